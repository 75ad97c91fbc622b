//! Priority classification: VLAN PCP when tagged, else DSCP through a map.

use super::config::ClassifyConfig;
use super::ether::FrameHeader;
use super::priorities::Priority;

#[derive(Clone, Debug)]
pub struct Classifier {
    dscp: [Priority; 64],
    default_priority: Priority,
}

impl Classifier {
    pub fn new(cfg: &ClassifyConfig) -> Classifier {
        Classifier { dscp: cfg.dscp_table(), default_priority: cfg.default_priority }
    }

    pub fn priority(&self, h: &FrameHeader) -> Priority {
        match (h.pcp, h.dscp) {
            (Some(pcp), _) => pcp,
            (None, Some(dscp)) => self.dscp[usize::from(dscp & 63)],
            (None, None) => self.default_priority,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mac::MacAddr;
    use crate::priorities::names::*;

    fn header(pcp: Option<Priority>, dscp: Option<u8>) -> FrameHeader {
        FrameHeader {
            dst: MacAddr::local(1),
            src: MacAddr::local(2),
            ethertype: 0x0800,
            pcp,
            dscp,
            ecn: None,
            ip: None,
        }
    }

    #[test]
    fn pcp_wins_then_dscp_map_then_default() {
        let c = Classifier::new(&ClassifyConfig::default());
        assert_eq!(c.priority(&header(Some(P6), Some(3))), P6);
        assert_eq!(c.priority(&header(None, Some(3))), P3);
        assert_eq!(c.priority(&header(None, Some(4))), P4);
        assert_eq!(c.priority(&header(None, Some(46))), P0);
        assert_eq!(c.priority(&header(None, None)), P0);
    }
}
