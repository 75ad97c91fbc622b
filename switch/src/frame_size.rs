//! How large a frame a port receives and how large a UMEM frame must be to hold it:
//! one rule for what `doctor` reports, what `run` checks at start, what a port accepts
//! ([`max_frame_for_mtu`], the engine's) and how the dataplane sizes its UMEM. A leaf: it
//! imports nothing of the shell.

use crate::core::config::max_frame_for_mtu;

/// The kernel reserves this much at the start of every UMEM frame (XDP_PACKET_HEADROOM).
pub const XDP_HEADROOM: u32 = 256;

/// Largest frame (without FCS) a UMEM frame of `frame_size` bytes can hold.
pub fn usable_frame_bytes(frame_size: u32) -> u32 {
    frame_size - XDP_HEADROOM
}

/// The largest frame an interface with `mtu` receives (see [`max_frame_for_mtu`]).
pub fn largest_frame(mtu: u32) -> u32 {
    max_frame_for_mtu(mtu) as u32
}

/// The largest UMEM frame size the shell uses.
pub const LARGEST_FRAME_SIZE: u32 = 4096;

/// The largest MTU whose frames fit one UMEM frame of `frame_size` bytes: the largest the
/// switch can carry, since it does not spread a frame over several UMEM frames (AF_XDP
/// multi-buffer) yet.
pub fn largest_mtu(frame_size: u32) -> u32 {
    usable_frame_bytes(frame_size) - largest_frame(0)
}

/// What to do about an MTU whose frames do not fit the UMEM frames configured (the
/// advice is the same whatever that size was: the largest one, or a lower MTU).
pub fn too_large_advice(mtu: u32) -> String {
    if frame_size_holding(largest_frame(mtu)).is_some() {
        return format!("set dataplane.frame_size = {LARGEST_FRAME_SIZE} (or leave it out: it follows the MTU)");
    }
    format!(
        "pfcswitch does not yet spread a frame over several UMEM frames (AF_XDP multi-buffer), so the largest MTU \
         it switches is {}: lower the MTU (`ip link set IF mtu {}`)",
        largest_mtu(LARGEST_FRAME_SIZE),
        largest_mtu(LARGEST_FRAME_SIZE)
    )
}

/// What a port's configured `max_frame` means on an interface with `mtu`, when the two
/// disagree (said at start and by `check-config`).
pub fn max_frame_note(port: &str, max_frame: usize, mtu: u32) -> Option<String> {
    let takes = max_frame_for_mtu(mtu);
    if max_frame > takes {
        Some(format!(
            "port {port}: max_frame {max_frame} is above what MTU {mtu} lets the interface receive ({takes} bytes): \
             frames above {takes} bytes never arrive (raise the MTU, or leave max_frame out to follow it)"
        ))
    } else if max_frame < takes {
        Some(format!(
            "port {port}: max_frame {max_frame} is below what MTU {mtu} lets through ({takes} bytes): frames of \
             {} to {takes} bytes are dropped as oversize, and TCP at that MTU stalls (leave max_frame out to follow \
             the MTU)",
            max_frame + 1
        ))
    } else {
        None
    }
}

/// The smallest UMEM frame size (2048 or 4096 bytes) that holds a `frame`-byte frame.
pub fn frame_size_holding(frame: u32) -> Option<u32> {
    [2048, 4096].into_iter().find(|&s| frame <= usable_frame_bytes(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_mtu_gives_the_old_default_and_the_largest_mtu_fills_a_4096_byte_frame() {
        assert_eq!(largest_frame(1500), 1522);
        assert_eq!(frame_size_holding(largest_frame(1500)), Some(2048));
        assert_eq!(frame_size_holding(largest_frame(3500)), Some(4096));
        assert_eq!(largest_mtu(4096), 3818);
        assert_eq!(frame_size_holding(largest_frame(3818)), Some(4096));
        assert_eq!(frame_size_holding(largest_frame(3819)), None);
    }

    #[test]
    fn a_max_frame_off_the_mtu_is_said_either_way_and_advice_names_what_helps() {
        assert_eq!(max_frame_note("p1", 1522, 1500), None);
        let above = max_frame_note("p1", 9000, 1500).unwrap();
        assert!(above.contains("above") && above.contains("1522 bytes never arrive"), "{above}");
        let below = max_frame_note("p1", 1522, 3500).unwrap();
        assert!(below.contains("1523 to 3522 bytes are dropped as oversize"), "{below}");
        assert!(too_large_advice(3000).contains("frame_size = 4096"));
        let jumbo = too_large_advice(9000);
        assert!(jumbo.contains("multi-buffer") && jumbo.contains("3818"), "{jumbo}");
    }
}
