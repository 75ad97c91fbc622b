//! What a run leaves for its report.

use super::*;

impl Sim<'_> {
    pub fn switch(&self, sw: usize) -> &Switch {
        &self.switches[sw].switch
    }

    pub fn slowpath(&self, sw: usize) -> &Slowpath {
        &self.switches[sw].slowpath
    }

    pub fn free_frames(&self, sw: usize) -> usize {
        self.switches[sw].slots.free_count()
    }

    pub fn rx_no_frame(&self, sw: usize, port: usize) -> u64 {
        self.switches[sw].rx_no_frame[port]
    }

    pub fn sent(&self, flow: usize) -> u64 {
        self.flows[flow].sent
    }

    pub fn received(&self, flow: usize) -> &Received {
        &self.flows[flow].rx
    }

    /// Frames on a link: sent, of which pause frames, lost to the link going down.
    pub fn link_counts(&self, port: usize) -> (u64, u64, u64, u64) {
        let p = &self.link_counts[port];
        (p.tx_frames, p.tx_bytes, p.pause_frames, p.lost_link_down)
    }
}
