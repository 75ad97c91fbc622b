// SPDX-License-Identifier: GPL-2.0 OR MIT
//
// pfcswitch XDP classifier.
//
// One instance of this object is loaded per switch port. It sorts every frame
// into a class, counts it per CPU, and hands it to the port's AF_XDP socket
// through `xsks` (keyed by rx queue). All forwarding decisions are made in
// userspace; this program never drops a frame it could deliver.
//
// The class numbers are mirrored in switch/src/dataplane/xdp.rs (XdpClass).

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ETH_P_MAC_CONTROL 0x8808
#define ETH_P_8021Q_ 0x8100
#define ETH_P_8021AD_ 0x88A8
#define ETH_P_QINQ1_ 0x9100
#define MAC_CONTROL_OP_PAUSE 0x0001
#define MAC_CONTROL_OP_PFC 0x0101

enum xdp_class {
	CLASS_PAUSE = 0,	/* 802.3x PAUSE */
	CLASS_PFC = 1,		/* 802.1Qbb priority flow control */
	CLASS_MAC_CONTROL = 2,	/* any other 0x8808 frame, incl. truncated ones */
	CLASS_VLAN = 3,		/* 802.1Q / 802.1ad tagged: priority from PCP */
	CLASS_IPV4 = 4,		/* untagged IPv4: priority from DSCP */
	CLASS_IPV6 = 5,		/* untagged IPv6: priority from DSCP */
	CLASS_OTHER = 6,	/* any other EtherType */
	CLASS_RUNT = 7,		/* shorter than an Ethernet header */
	CLASS_COUNT = 8,
};

// Written in the metadata area in front of every frame: when it arrived (CLOCK_MONOTONIC),
// so that pauses and reaction times count from arrival, not from when userspace read it.
// Mirrored in switch/src/dataplane/xsk.rs (RxMeta).
#define RX_META_MAGIC 0x50465453 /* "PFTS" */
struct rx_meta {
	__u32 magic;
	__u32 reserved;
	__u64 arrival_ns;
};

struct class_counter {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CLASS_COUNT);
	__type(key, __u32);
	__type(value, struct class_counter);
} class_counters SEC(".maps");

// Entry 0: what to do with a frame when no socket is bound for its rx queue:
// 0 = pass it to the kernel stack (default), 1 = drop it.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} config SEC(".maps");

static __always_inline __u32 classify(void *data, void *data_end)
{
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return CLASS_RUNT;

	__u16 proto = bpf_ntohs(eth->h_proto);
	switch (proto) {
	case ETH_P_MAC_CONTROL: {
		__be16 *opcode = (void *)(eth + 1);

		if ((void *)(opcode + 1) > data_end)
			return CLASS_MAC_CONTROL;
		if (bpf_ntohs(*opcode) == MAC_CONTROL_OP_PFC)
			return CLASS_PFC;
		if (bpf_ntohs(*opcode) == MAC_CONTROL_OP_PAUSE)
			return CLASS_PAUSE;
		return CLASS_MAC_CONTROL;
	}
	case ETH_P_8021Q_:
	case ETH_P_8021AD_:
	case ETH_P_QINQ1_:
		return CLASS_VLAN;
	case ETH_P_IP:
		return CLASS_IPV4;
	case ETH_P_IPV6:
		return CLASS_IPV6;
	default:
		return CLASS_OTHER;
	}
}

static __always_inline void stamp_arrival(struct xdp_md *ctx)
{
	__u64 now = bpf_ktime_get_ns();

	// Not every driver has a metadata area; then userspace falls back to its own clock.
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct rx_meta)))
		return;
	struct rx_meta *meta = (void *)(long)ctx->data_meta;
	if ((void *)(meta + 1) > (void *)(long)ctx->data)
		return;
	meta->magic = RX_META_MAGIC;
	meta->reserved = 0;
	meta->arrival_ns = now;
}

// Frags-aware ("xdp.frags"): a frame larger than a page arrives in several buffers
// (jumbo MTUs; veth refuses a program that is not frags-aware above about 3500 bytes).
// Only the headers, in the first buffer, are read here.
SEC("xdp.frags")
int pfcswitch_classify(struct xdp_md *ctx)
{
	stamp_arrival(ctx);

	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 class = classify(data, data_end);
	__u32 zero = 0;

	struct class_counter *counter = bpf_map_lookup_elem(&class_counters, &class);
	if (counter) {
		counter->packets++;
		// The whole frame: a jumbo frame's further buffers lie beyond data_end.
		counter->bytes += bpf_xdp_get_buff_len(ctx);
	}

	__u32 fallback = XDP_PASS;
	__u32 *drop_without_socket = bpf_map_lookup_elem(&config, &zero);
	if (drop_without_socket && *drop_without_socket)
		fallback = XDP_DROP;

	// The low bits of the flags are the action when no socket is bound for
	// this queue (kernel >= 5.3).
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, fallback);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
