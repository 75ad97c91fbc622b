//! Priority classification: VLAN PCP when tagged, else DSCP through a map.

use super::config::ClassifyConfig;
use super::ether::FrameHeader;

#[derive(Clone, Debug)]
pub struct Classifier {
    dscp: [u8; 64],
    default_priority: u8,
}

impl Classifier {
    pub fn new(cfg: &ClassifyConfig) -> Classifier {
        Classifier { dscp: cfg.dscp_table(), default_priority: cfg.default_priority }
    }

    pub fn priority(&self, h: &FrameHeader) -> u8 {
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

    fn header(pcp: Option<u8>, dscp: Option<u8>) -> FrameHeader {
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
        assert_eq!(c.priority(&header(Some(6), Some(3))), 6);
        assert_eq!(c.priority(&header(None, Some(3))), 3);
        assert_eq!(c.priority(&header(None, Some(4))), 4);
        assert_eq!(c.priority(&header(None, Some(46))), 0);
        assert_eq!(c.priority(&header(None, None)), 0);
    }
}
