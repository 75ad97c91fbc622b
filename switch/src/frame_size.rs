//! How large a frame a port receives and how large a UMEM frame must be to hold it:
//! one rule for what `doctor` reports, what `run` checks at start and how the
//! dataplane sizes its UMEM. A leaf: it imports nothing of the shell.

/// The kernel reserves this much at the start of every UMEM frame (XDP_PACKET_HEADROOM).
pub const XDP_HEADROOM: u32 = 256;

/// Largest frame (without FCS) a UMEM frame of `frame_size` bytes can hold.
pub fn usable_frame_bytes(frame_size: u32) -> u32 {
    frame_size - XDP_HEADROOM
}

/// The largest frame an interface with `mtu` receives: Ethernet header and FCS added.
pub fn largest_frame(mtu: u32) -> u32 {
    mtu + 14 + 4
}

/// The smallest UMEM frame size (2048 or 4096 bytes) that holds a `frame`-byte frame.
pub fn frame_size_holding(frame: u32) -> Option<u32> {
    [2048, 4096].into_iter().find(|&s| frame <= usable_frame_bytes(s))
}
