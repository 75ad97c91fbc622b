//! How large a frame a port receives and how large a UMEM frame must be to hold it:
//! one rule for what `doctor` reports, what `run` checks at start, what a port accepts
//! ([`max_frame_for_mtu`], the engine's) and how the dataplane sizes its UMEM. A leaf: it
//! imports nothing of the shell.

use pfcswitch_core::config::max_frame_for_mtu;

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

/// The largest UMEM frame size the shell uses (a chunk can be no larger than a page).
pub const LARGEST_FRAME_SIZE: u32 = 4096;

/// The largest MTU the switch carries (that of the largest jumbo frames switches take).
pub const MAX_MTU: u32 = 9216;

/// The largest MTU whose frames fit one UMEM frame of `frame_size` bytes: above it a
/// frame takes several (AF_XDP multi-buffer).
pub fn largest_mtu(frame_size: u32) -> u32 {
    usable_frame_bytes(frame_size) - largest_frame(0)
}

/// How many UMEM frames of `frame_size` bytes a `frame`-byte frame takes.
pub fn buffers_for(frame: u32, frame_size: u32) -> u32 {
    frame.div_ceil(usable_frame_bytes(frame_size)).max(1)
}

/// What to do about an MTU the switch does not carry.
pub fn too_large_advice(mtu: u32) -> String {
    format!("MTU {mtu} is above the largest pfcswitch carries, {MAX_MTU}: lower it (`ip link set IF mtu {MAX_MTU}`)")
}

/// What to do when a driver cannot receive or send a frame over several UMEM frames.
pub fn no_multi_buffer_advice() -> String {
    format!(
        "the driver (or kernel) does not offer AF_XDP multi-buffer, which frames larger than one UMEM frame \
         need: the largest MTU that works is {} (`ip link set IF mtu {}`)",
        largest_mtu(LARGEST_FRAME_SIZE),
        largest_mtu(LARGEST_FRAME_SIZE)
    )
}

/// How the UMEM is cut for the frames the ports receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes per UMEM frame (one buffer).
    pub frame_size: u32,
    /// Buffers the largest frame takes: above one, frames travel as AF_XDP multi-buffer.
    pub buffers_per_frame: u32,
}

/// The UMEM geometry for ports whose largest frame is `frame` bytes: the configured
/// frame size, or the smallest that holds the frame whole, or (a jumbo frame) 4096-byte
/// frames, several per frame. The one rule `doctor` reports and `run` applies; the
/// error says what to do.
pub fn geometry_for(frame: u32, configured: Option<u32>) -> Result<Geometry, String> {
    if frame > largest_frame(MAX_MTU) {
        return Err(format!("{frame}-byte frames: {}", too_large_advice(frame - largest_frame(0))));
    }
    let frame_size = configured.unwrap_or(frame_size_holding(frame).unwrap_or(LARGEST_FRAME_SIZE));
    Ok(Geometry { frame_size, buffers_per_frame: buffers_for(frame, frame_size) })
}

/// [`geometry_for`] the frames an interface with `mtu` receives, each `overhead` bytes
/// longer in the UMEM (an in-frame arrival stamp), for a classifier that is frags-aware
/// or not: without frags no frame over one UMEM frame reaches it. The one rule `doctor`
/// reports and `run` and the tools apply; the error says what to do (`IF` for the
/// interface).
pub fn geometry_for_mtu(
    mtu: u32,
    configured: Option<u32>,
    overhead: u32,
    frags_aware: bool,
) -> Result<Geometry, String> {
    let frame = largest_frame(mtu) + overhead;
    let g = geometry_for(frame, configured)?;
    if g.buffers_per_frame > 1 && !frags_aware {
        let largest = largest_mtu(g.frame_size) - overhead;
        return Err(format!(
            "MTU {mtu} ({frame}-byte frames) takes {} UMEM frames of {} bytes, and the classifier is not frags-aware \
             on this kernel (`pfcswitch doctor` says why), so no such frame reaches it: the largest MTU that works \
             is {largest} (`ip link set IF mtu {largest}`)",
            g.buffers_per_frame, g.frame_size
        ));
    }
    Ok(g)
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
    fn the_standard_mtu_gives_the_old_default_and_jumbo_frames_take_several_4096_byte_frames() {
        assert_eq!(largest_frame(1500), 1522);
        assert_eq!(frame_size_holding(largest_frame(1500)), Some(2048));
        assert_eq!(frame_size_holding(largest_frame(3500)), Some(4096));
        assert_eq!(largest_mtu(4096), 3818);
        assert_eq!(frame_size_holding(largest_frame(3818)), Some(4096));
        assert_eq!(frame_size_holding(largest_frame(3819)), None);
        assert_eq!(buffers_for(largest_frame(1500), 2048), 1);
        assert_eq!(buffers_for(largest_frame(3818), 4096), 1);
        assert_eq!(buffers_for(largest_frame(4200), 4096), 2);
        assert_eq!(buffers_for(largest_frame(9000), 4096), 3);
        assert_eq!(buffers_for(largest_frame(MAX_MTU), 2048), 6);
        let jumbo = geometry_for(largest_frame(9000), None).unwrap();
        assert_eq!((jumbo.frame_size, jumbo.buffers_per_frame), (4096, 3));
        let small = geometry_for(largest_frame(9000), Some(2048)).unwrap();
        assert_eq!((small.frame_size, small.buffers_per_frame), (2048, 6));
        assert_eq!(geometry_for(largest_frame(1500), None).unwrap().buffers_per_frame, 1);
        assert!(geometry_for(largest_frame(9500), None).unwrap_err().contains("9216"));
    }

    #[test]
    fn a_max_frame_off_the_mtu_is_said_either_way_and_advice_names_what_helps() {
        assert_eq!(max_frame_note("p1", 1522, 1500), None);
        let above = max_frame_note("p1", 9000, 1500).unwrap();
        assert!(above.contains("above") && above.contains("1522 bytes never arrive"), "{above}");
        let below = max_frame_note("p1", 1522, 3500).unwrap();
        assert!(below.contains("1523 to 3522 bytes are dropped as oversize"), "{below}");
        assert!(too_large_advice(9500).contains("largest pfcswitch carries, 9216"));
        let no_mb = no_multi_buffer_advice();
        assert!(no_mb.contains("multi-buffer") && no_mb.contains("3818"), "{no_mb}");
    }
}
