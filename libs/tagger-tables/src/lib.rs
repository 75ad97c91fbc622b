//! The per-switch tables Tagger computes (`tagger compute`) and a switch applies
//! (`pfcswitch run --tagger`, the simulator): one file per switch, in TOML or JSON.
//!
//! A leaf crate of types alone, so that the switch's engine reads the tables without
//! depending on the tagger tool (its algorithms, topologies and command line).

use serde::{Deserialize, Serialize};

/// One switch's tables.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SwitchTables {
    /// The switch they are for.
    pub switch: String,
    /// The algorithm that computed them.
    pub algorithm: String,
    /// How many tags the lossless routes use.
    pub lossless_tags: u8,
    /// The tag a host stamps on a packet it sends.
    pub initial_tag: u8,
    /// The priority of tag 1, 2, ...: what a switch needs to queue a packet under the tag
    /// it leaves with (files from before this field derive it from the ingress rules).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub priorities: Vec<u8>,
    /// Where a packet the tables do not cover goes.
    pub default: DefaultRule,
    /// Per (ingress port, tag): the lossless priority the packet is charged to.
    #[serde(default)]
    pub ingress: Vec<IngressEntry>,
    /// Per (ingress port, tag, egress port): the tag it leaves with.
    #[serde(default)]
    pub rewrite: Vec<RewriteEntry>,
}

impl SwitchTables {
    /// Rules in all.
    pub fn entries(&self) -> usize {
        self.ingress.len() + self.rewrite.len()
    }

    /// The priority `tag` is queued under: from `priorities`, else from an ingress rule.
    pub fn priority_of(&self, tag: u8) -> Option<u8> {
        let listed = usize::from(tag).checked_sub(1).and_then(|i| self.priorities.get(i)).copied();
        listed.or_else(|| self.ingress.iter().find(|e| e.tag == tag).map(|e| e.priority))
    }
}

/// The tag and priority of what the tables do not cover (lossy).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DefaultRule {
    pub tag: u8,
    pub priority: u8,
}

/// A packet arriving on `port` with `tag` is charged to lossless `priority`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct IngressEntry {
    pub port: u16,
    pub tag: u8,
    pub priority: u8,
}

/// A packet that arrived on `ingress` with `tag` leaves `egress` with `new_tag`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RewriteEntry {
    pub ingress: u16,
    pub tag: u8,
    pub egress: u16,
    pub new_tag: u8,
}
