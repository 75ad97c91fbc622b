//! A tag system as switches apply it, and its per-switch tables.
//!
//! Per switch:
//! - ingress: (port, tag) → lossless queue (priority): where an arriving packet waits;
//! - rewrite: (ingress port, tag, egress port) → the tag the packet leaves with;
//! - default: anything unmatched leaves with the lossy tag, in the lossy queue.
//!
//! Lossless tags are `1..=lossless_tags`, decreasing along every route; hosts stamp
//! `initial_tag` (the highest); tag 0 is lossy. The tag travels in the DSCP field.
//!
//! ```toml
//! switch = "leaf0"
//! algorithm = "greedy"
//! lossless_tags = 2
//! initial_tag = 2
//! priorities = [1, 2]      # the priority (lossless queue) of tag 1, tag 2, ...
//!
//! [default]
//! tag = 0
//! priority = 0
//!
//! [[ingress]]
//! port = 1
//! tag = 2
//! priority = 2
//!
//! [[rewrite]]
//! ingress = 1
//! tag = 2
//! egress = 3
//! new_tag = 2
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use rustc_hash::FxHashMap;

use crate::algo::{Rules, Tagging};
use crate::topology::{NodeRef, PortId, SwitchId, Topology};

pub const LOSSY_TAG: u8 = 0;

#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    #[error("{tags} lossless tags need {tags} lossless priorities; only {given} given ({list:?})")]
    NotEnoughPriorities { tags: u8, given: usize, list: Vec<u8> },
    #[error("priorities must be 0..=7, distinct, and not the lossy priority: {0:?}")]
    BadPriorities(Vec<u8>),
    #[error("{file}: {problem}")]
    Table { file: String, problem: String },
    #[error("{dir}: no table files (*.toml, *.json)")]
    NoTables { dir: String },
    #[error("{0}")]
    Io(String),
}

/// Which priority each lossless tag uses: tag t → `lossless[t - 1]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagPriorities {
    pub lossless: Vec<u8>,
    pub lossy: u8,
}

impl Default for TagPriorities {
    /// Tag t at priority t, lossy at 0.
    fn default() -> TagPriorities {
        TagPriorities { lossless: (1..=7).collect(), lossy: 0 }
    }
}

impl TagPriorities {
    /// Tag t at priority t, skipping the lossy priority (and taking 0 last when it is free).
    pub fn with_lossy(lossy: u8) -> TagPriorities {
        TagPriorities { lossless: (1..=7).chain([0]).filter(|&p| p != lossy).collect(), lossy }
    }

    fn check(&self, tags: u8) -> Result<(), SystemError> {
        let mut sorted = self.lossless.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != self.lossless.len()
            || self.lossless.iter().any(|&p| p > 7 || p == self.lossy)
            || self.lossy > 7
        {
            return Err(SystemError::BadPriorities(self.lossless.clone()));
        }
        if (tags as usize) > self.lossless.len() {
            return Err(SystemError::NotEnoughPriorities {
                tags,
                given: self.lossless.len(),
                list: self.lossless.clone(),
            });
        }
        Ok(())
    }
}

/// A tag system over the topology's ports.
#[derive(Clone, Debug)]
pub struct TagSystem {
    pub algorithm: String,
    pub tags: u8,
    pub initial_tag: u8,
    pub lossy_priority: u8,
    /// The priority of tag 1, 2, ... (the same at every switch).
    pub priorities: Vec<u8>,
    /// Ingress (port, tag) → priority.
    pub queue: FxHashMap<(PortId, u8), u8>,
    pub rewrite: Rules,
}

impl TagSystem {
    pub fn new(t: &Topology, tagging: &Tagging, priorities: &TagPriorities) -> Result<TagSystem, SystemError> {
        priorities.check(tagging.tags)?;
        Ok(TagSystem::build(t, tagging, priorities.lossy, |tag| priorities.lossless[tag as usize - 1]))
    }

    /// Queue t for tag t, however many tags there are: for checking and comparing systems
    /// that need more lossless queues than a switch has.
    pub fn queue_per_tag(t: &Topology, tagging: &Tagging) -> TagSystem {
        TagSystem::build(t, tagging, LOSSY_TAG, |tag| tag)
    }

    fn build(t: &Topology, tagging: &Tagging, lossy_priority: u8, prio: impl Fn(u8) -> u8) -> TagSystem {
        let mut queue = FxHashMap::default();
        for (&(ingress, tag, egress), &new_tag) in &tagging.rules {
            queue.insert((ingress, tag), prio(tag));
            if let Some(next) = t.peer_port(egress) {
                queue.insert((next, new_tag), prio(new_tag));
            }
        }
        TagSystem {
            algorithm: tagging.algorithm.to_string(),
            tags: tagging.tags,
            initial_tag: tagging.tags,
            lossy_priority,
            priorities: (1..=tagging.tags).map(prio).collect(),
            queue,
            rewrite: tagging.rules.clone(),
        }
    }

    /// Each switch's tables, sorted.
    pub fn tables(&self, t: &Topology) -> Vec<SwitchTables> {
        let mut per: Vec<SwitchTables> = t
            .switches
            .iter()
            .map(|s| SwitchTables {
                switch: s.name.clone(),
                algorithm: self.algorithm.clone(),
                lossless_tags: self.tags,
                initial_tag: self.initial_tag,
                priorities: self.priorities.clone(),
                default: DefaultRule { tag: LOSSY_TAG, priority: self.lossy_priority },
                ingress: Vec::new(),
                rewrite: Vec::new(),
            })
            .collect();
        for (&(port, tag), &priority) in &self.queue {
            let p = t.port(port);
            per[p.switch as usize].ingress.push(IngressEntry { port: p.number, tag, priority });
        }
        for (&(ingress, tag, egress), &new_tag) in &self.rewrite {
            let p = t.port(ingress);
            per[p.switch as usize].rewrite.push(RewriteEntry {
                ingress: p.number,
                tag,
                egress: t.port(egress).number,
                new_tag,
            });
        }
        for s in &mut per {
            s.ingress.sort_unstable_by_key(|e| (e.port, std::cmp::Reverse(e.tag)));
            s.rewrite.sort_unstable_by_key(|e| (e.ingress, std::cmp::Reverse(e.tag), e.egress));
        }
        per
    }

    /// The system the tables describe (as loaded back from files).
    pub fn from_tables(t: &Topology, tables: &[(String, SwitchTables)]) -> Result<TagSystem, SystemError> {
        let first = &tables.first().ok_or_else(|| SystemError::NoTables { dir: "(none)".into() })?.1;
        let mut sys = TagSystem {
            algorithm: first.algorithm.clone(),
            tags: first.lossless_tags,
            initial_tag: first.initial_tag,
            lossy_priority: first.default.priority,
            priorities: first.priorities.clone(),
            queue: FxHashMap::default(),
            rewrite: FxHashMap::default(),
        };
        for (file, tab) in tables {
            let bad = |problem: String| SystemError::Table { file: file.clone(), problem };
            if (tab.lossless_tags, tab.initial_tag) != (sys.tags, sys.initial_tag) {
                return Err(bad(format!(
                    "lossless_tags {} / initial_tag {} differ from the other tables' {} / {}",
                    tab.lossless_tags, tab.initial_tag, sys.tags, sys.initial_tag
                )));
            }
            if tab.priorities != sys.priorities {
                return Err(bad(format!(
                    "tag priorities {:?} differ from the other tables' {:?}",
                    tab.priorities, sys.priorities
                )));
            }
            if tab.default.tag != LOSSY_TAG {
                return Err(bad(format!("the default rule must use the lossy tag {LOSSY_TAG}")));
            }
            let s: SwitchId = match t.node(&tab.switch) {
                Some(NodeRef::Switch(s)) => s,
                _ => return Err(bad(format!("no switch called {:?} in the topology", tab.switch))),
            };
            let port = |n: u16| t.port_by_number(s, n).ok_or_else(|| bad(format!("{} has no port {n}", tab.switch)));
            for e in &tab.ingress {
                if sys.queue.insert((port(e.port)?, e.tag), e.priority).is_some() {
                    return Err(bad(format!("two ingress entries for port {} tag {}", e.port, e.tag)));
                }
            }
            for r in &tab.rewrite {
                if sys.rewrite.insert((port(r.ingress)?, r.tag, port(r.egress)?), r.new_tag).is_some() {
                    return Err(bad(format!(
                        "two rewrite entries for ingress {} tag {} egress {}",
                        r.ingress, r.tag, r.egress
                    )));
                }
            }
        }
        Ok(sys)
    }
}

/// The file format of a switch's tables: a crate of its own, which the switch reads.
pub use tagger_tables::{DefaultRule, IngressEntry, RewriteEntry, SwitchTables};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Toml,
    Json,
}

/// Writes one file per switch into `dir` (created if needed).
pub fn write_tables(dir: &Path, tables: &[SwitchTables], format: Format) -> Result<(), SystemError> {
    std::fs::create_dir_all(dir).map_err(|e| SystemError::Io(format!("{}: {e}", dir.display())))?;
    for tab in tables {
        let (text, ext) = match format {
            Format::Toml => (toml::to_string(tab).expect("tables serialize"), "toml"),
            Format::Json => (serde_json::to_string_pretty(tab).expect("tables serialize") + "\n", "json"),
        };
        let path = dir.join(format!("{}.{ext}", tab.switch));
        std::fs::write(&path, text).map_err(|e| SystemError::Io(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// Reads one switch's tables: JSON if the file ends in `.json` or starts with `{`, else TOML.
pub fn read_table(path: &Path) -> Result<SwitchTables, SystemError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| SystemError::Io(format!("{name}: {e}")))?;
    parse_table(&name, &text, path.extension().is_some_and(|e| e == "json"))
}

/// Parses one switch's tables from `text` (JSON when `json` or when it starts with `{`);
/// `name` says where the text came from in errors.
pub fn parse_table(name: &str, text: &str, json: bool) -> Result<SwitchTables, SystemError> {
    let bad = |problem: String| SystemError::Table { file: name.to_string(), problem };
    if json || text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| bad(e.to_string()))
    } else {
        toml::from_str(text).map_err(|e| bad(e.to_string()))
    }
}

/// Reads every `*.toml` and `*.json` in `dir` as a switch's tables, by file name.
pub fn read_tables(dir: &Path) -> Result<Vec<(String, SwitchTables)>, SystemError> {
    let io = |e: std::io::Error| SystemError::Io(format!("{}: {e}", dir.display()));
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let json = match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => false,
            Some("json") => true,
            _ => continue,
        };
        let name = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|e| SystemError::Io(format!("{name}: {e}")))?;
        let tab = parse_table(&name, &text, json)?;
        files.insert(name, tab);
    }
    if files.is_empty() {
        return Err(SystemError::NoTables { dir: dir.display().to_string() });
    }
    Ok(files.into_iter().collect())
}
