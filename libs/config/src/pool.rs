//! How big a driver's frame pool is: what the configuration sizes (`[dataplane]`) and the
//! engine shares out (`pfcswitch_core::pool` holds the pool itself).

/// Descriptors per ring a driver uses unless configured otherwise (the AF_XDP shell's
/// `[dataplane] ring_size`).
pub const DEFAULT_RING_SIZE: u32 = 8192;

/// Frames a pool holds beyond what its rings take, unless configured otherwise: what the
/// switch may queue and the slowpath hold.
pub const DEFAULT_HELD_FRAMES: u32 = 16384;

/// How big a driver's frame pool is, and how much of it its rings take (a fill ring per
/// receive socket, a transmit ring per port): frames in a ring never wait in the switch,
/// so the engine shares out only the rest ([`crate::config::Config::frame_caps`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolSize {
    /// Frames in the pool: frame ids run from 0 to this.
    pub frames: u32,
    /// Frames its rings hold.
    pub in_rings: u32,
}

impl PoolSize {
    /// The pool of a switch with `ports` ports and `rx_sockets` receive sockets on rings
    /// of `ring_size` descriptors: `frames` if given, else the rings' frames and
    /// [`DEFAULT_HELD_FRAMES`] more. The AF_XDP shell sizes its UMEM so; the simulator
    /// gives a simulated switch the pool `pfcswitch run` would have (one socket per port,
    /// [`DEFAULT_RING_SIZE`]).
    pub fn for_rings(ports: usize, rx_sockets: usize, ring_size: u32, frames: Option<u32>) -> PoolSize {
        let in_rings = (ports + rx_sockets) as u32 * ring_size;
        PoolSize { frames: frames.unwrap_or(in_rings + DEFAULT_HELD_FRAMES), in_rings }
    }

    /// A pool of `frames` with no rings (a test's, shared whole).
    pub fn without_rings(frames: u32) -> PoolSize {
        PoolSize { frames, in_rings: 0 }
    }
}
