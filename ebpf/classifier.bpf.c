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

// How the program tells userspace when a frame arrived (CLOCK_MONOTONIC), so that pauses
// and reaction times count from arrival, not from when userspace read it. Mirrored in
// switch/src/dataplane/xsk.rs (ArrivalStamp, STAMP_LEN).
#define STAMP_RX_CLOCK 0 /* no stamp: userspace takes its own clock when it reads the frame */
#define STAMP_METADATA 1 /* in the metadata area in front of the frame (bpf_xdp_adjust_meta) */
#define STAMP_IN_FRAME 2 /* in 16 bytes pushed in front of the frame (bpf_xdp_adjust_head), which userspace takes off */
struct rx_meta {
	__u32 magic;
	__u32 reserved;
	__u64 arrival_ns;
};

// Set by the loader before the program is loaded (switch/src/dataplane/paths.rs), after
// probing what this kernel allows. Read-only: the verifier knows their values and never
// walks the branches they turn off, so a kernel that refuses a helper never sees its call.
// One struct, the only thing in .rodata: the loader finds it at offset 0 (and checks its
// size and defaults before it writes).
struct classifier_options {
	// One of the STAMP_* above.
	__u32 arrival_stamp;
	// The stamp's first word: chosen at random per process, so that a frame that merely
	// begins with the same bytes is never taken for a stamp.
	__u32 stamp_magic;
	// Loaded frags-aware (BPF_F_XDP_HAS_FRAGS, kernel 5.18 and later): only then may the
	// program ask for the whole length of a frame over several buffers.
	__u32 frags_aware;
};
const volatile struct classifier_options options = {
	.arrival_stamp = STAMP_METADATA,
	.stamp_magic = 0x50465453, /* "PFTS" */
	.frags_aware = 1,
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

static __always_inline void stamp_in_meta(struct xdp_md *ctx, __u64 now)
{
	// Not every driver has a metadata area; then the frame carries no stamp and
	// userspace takes its own clock for it (and counts it).
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct rx_meta)))
		return;
	struct rx_meta *meta = (void *)(long)ctx->data_meta;
	if ((void *)(meta + 1) > (void *)(long)ctx->data)
		return;
	meta->magic = options.stamp_magic;
	meta->reserved = 0;
	meta->arrival_ns = now;
}

// Pushes the stamp in front of the frame itself; returns whether it did. XDP gives every
// frame 256 bytes of headroom, so this fails only on a driver that breaks that promise.
static __always_inline int stamp_in_frame(struct xdp_md *ctx, __u64 now)
{
	if (bpf_xdp_adjust_head(ctx, -(int)sizeof(struct rx_meta)))
		return 0;
	struct rx_meta *meta = (void *)(long)ctx->data;
	if ((void *)(meta + 1) > (void *)(long)ctx->data_end) {
		bpf_xdp_adjust_head(ctx, (int)sizeof(struct rx_meta));
		return 0;
	}
	meta->magic = options.stamp_magic;
	meta->reserved = 0;
	meta->arrival_ns = now;
	return 1;
}

// Frags-aware ("xdp.frags"): a frame larger than a page arrives in several buffers
// (jumbo MTUs; veth refuses a program that is not frags-aware above about 3500 bytes).
// Only the headers, in the first buffer, are read here.
SEC("xdp.frags")
int pfcswitch_classify(struct xdp_md *ctx)
{
	__u64 now = 0;

	if (options.arrival_stamp != STAMP_RX_CLOCK)
		now = bpf_ktime_get_ns();
	if (options.arrival_stamp == STAMP_METADATA)
		stamp_in_meta(ctx, now);

	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 class = classify(data, data_end);
	__u32 zero = 0;

	struct class_counter *counter = bpf_map_lookup_elem(&class_counters, &class);
	if (counter) {
		counter->packets++;
		// The whole frame: a jumbo frame's further buffers lie beyond data_end.
		if (options.frags_aware)
			counter->bytes += bpf_xdp_get_buff_len(ctx);
		else
			counter->bytes += data_end - data;
	}

	__u32 fallback = XDP_PASS;
	__u32 *drop_without_socket = bpf_map_lookup_elem(&config, &zero);
	if (drop_without_socket && *drop_without_socket)
		fallback = XDP_DROP;

	int in_frame = options.arrival_stamp == STAMP_IN_FRAME && stamp_in_frame(ctx, now);
	// The low bits of the flags are the action when no socket is bound for
	// this queue (kernel >= 5.3).
	long action = bpf_redirect_map(&xsks, ctx->rx_queue_index, fallback);
	// A frame the kernel stack gets back must be the frame that arrived.
	if (in_frame && action != XDP_REDIRECT)
		bpf_xdp_adjust_head(ctx, (int)sizeof(struct rx_meta));
	return action;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
