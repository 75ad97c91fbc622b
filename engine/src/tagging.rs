//! Tagger's tables in the data path (Hu et al., CoNEXT 2017): deadlock prevention beside
//! DCFIT's detection.
//!
//! A packet's tag travels in its DSCP. A frame that arrives on port i with tag t and
//! matches an ingress rule (i, t) is charged to that rule's lossless priority, like any
//! lossless frame. At egress e the rewrite rule (i, t, e) gives the tag it leaves with,
//! and that tag's priority is the egress queue it waits in: the priority the next switch
//! charges it to, and so the one that switch's pauses stop.
//!
//! Anything the tables did not plan is lossy: a frame with no ingress rule, or a lossless
//! frame on a hop with no rewrite rule, leaves with the default tag in the default
//! priority. A frame must never stay lossless on a hop the tables do not cover, or the
//! tagged graph the tables were verified on no longer describes the network.
//!
//! The table is compiled once into dense arrays (at most 64 ports and 64 tags, as DSCP has
//! six bits), so classifying a frame is an index, never a hash or an allocation.

use crate::ports::PortId;
use std::fmt;

use tagger_tables::{IngressEntry, RewriteEntry, SwitchTables};

use super::config::Config;
use super::priorities::PRIORITIES;
use super::priorities::{Priorities, Priority};

/// Tags that fit in a DSCP.
pub const TAGS: usize = 64;
const NO_RULE: u8 = u8::MAX;

/// A table that does not fit this switch, naming the rule at fault.
///
/// Each variant's message (its `#[error]` text, which `Display` prints) says what it and
/// its fields are; a doc comment on each would repeat it.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TableError {
    #[error(
        "the table is for switch {table:?}, not {expected:?} (set tagger.switch, or pass --force to use it anyway)"
    )]
    OtherSwitch { table: String, expected: String },
    #[error("{rule}: the switch has no port {port} (its ports are 1..={ports})")]
    NoSuchPort { rule: String, port: u16, ports: usize },
    #[error("{rule}: tag {tag} does not fit in a DSCP (0..=63)")]
    TagTooLarge { rule: String, tag: u8 },
    #[error("{rule}: priority {priority} is not 0..=7")]
    BadPriority { rule: String, priority: u8 },
    #[error("{rule}: priority {priority} is lossy on this switch (pfc.lossless = {lossless:?})")]
    LossyPriority { rule: String, priority: u8, lossless: Vec<Priority> },
    #[error("{rule}: two tags on one queue: priority {priority} already carries tag {other} ({other_rule})")]
    SharedQueue { rule: String, priority: Priority, other: u8, other_rule: String },
    #[error("{rule}: tag {tag} is on two queues: priority {priority} here, {other} in {other_rule}")]
    TagOnTwoQueues { rule: String, tag: u8, priority: Priority, other: Priority, other_rule: String },
    #[error("{rule}: a second rule for the same key ({first})")]
    Duplicate { rule: String, first: String },
    #[error("{rule}: no ingress rule for port {port} tag {tag}, so it can never apply")]
    DeadRewrite { rule: String, port: u16, tag: u8 },
    #[error("{rule}: a frame never leaves by the port it came in on")]
    Hairpin { rule: String },
    #[error("{rule}: the table gives no priority for tag {tag} (no `priorities` entry, no ingress rule)")]
    UnknownTag { rule: String, tag: u8 },
    #[error("the default rule's priority {priority} is lossless; it must be a lossy one")]
    LosslessDefault { priority: Priority },
    #[error("pfc.lossless = {config:?} disagrees with the table's lossless priorities {table:?}: leave pfc.lossless out, or make them equal")]
    LosslessMismatch { config: Vec<Priority>, table: Vec<Priority> },
    #[error("the table has no ingress rules: it would make every frame lossy")]
    Empty,
}

fn ingress_rule(k: usize, e: &IngressEntry) -> String {
    format!("ingress rule #{} (port {}, tag {} → priority {})", k + 1, e.port, e.tag, e.priority)
}

fn rewrite_rule(k: usize, r: &RewriteEntry) -> String {
    format!("rewrite rule #{} (ingress {}, tag {}, egress {} → tag {})", k + 1, r.ingress, r.tag, r.egress, r.new_tag)
}

/// One switch's Tagger table, compiled against its ports.
#[derive(Clone)]
pub struct TagTable {
    /// The switch the table was written for.
    pub switch: String,
    /// Where it came from (a file path), for stats and logs.
    pub source: String,
    /// Ingress rules.
    pub ingress_rules: usize,
    /// Rewrite rules.
    pub rewrite_rules: usize,
    /// The tag a host's frames start with.
    pub initial_tag: u8,
    /// The tag of frames that match no rule.
    pub default_tag: u8,
    /// The priority of the default tag (lossy).
    pub default_priority: Priority,
    ports: usize,
    /// (port, tag) → priority, at `port * TAGS + tag`; `NO_RULE` where no rule says (a
    /// byte each, checked as compiled: the table is ports × 64 entries).
    ingress: Vec<u8>,
    /// (ingress, tag, egress) → new tag, at `(ingress * TAGS + tag) * ports + egress`.
    rewrite: Vec<u8>,
    /// Tag → priority.
    tag_priority: [Option<Priority>; TAGS],
    /// Priority → tag (one tag per queue).
    priority_tag: [u8; PRIORITIES],
    lossless: Priorities,
}

impl fmt::Debug for TagTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TagTable")
            .field("switch", &self.switch)
            .field("source", &self.source)
            .field("ingress_rules", &self.ingress_rules)
            .field("rewrite_rules", &self.rewrite_rules)
            .field("lossless", &self.lossless_priorities())
            .finish_non_exhaustive()
    }
}

impl TagTable {
    /// Checks `tables` against a switch with `ports` ports (numbered from 1) and, when the
    /// configuration names them, its lossless priorities.
    pub fn compile(
        tables: &SwitchTables,
        source: &str,
        ports: usize,
        lossless: Option<&[Priority]>,
    ) -> Result<TagTable, TableError> {
        let default_priority = Priority::checked(tables.default.priority).ok_or_else(|| TableError::BadPriority {
            rule: "the default rule".into(),
            priority: tables.default.priority,
        })?;
        let mut t = TagTable {
            switch: tables.switch.clone(),
            source: source.to_string(),
            ingress_rules: tables.ingress.len(),
            rewrite_rules: tables.rewrite.len(),
            initial_tag: tables.initial_tag,
            default_tag: tables.default.tag,
            default_priority,
            ports,
            ingress: vec![NO_RULE; ports * TAGS],
            rewrite: vec![NO_RULE; ports * TAGS * ports],
            tag_priority: [None; TAGS],
            priority_tag: [NO_RULE; PRIORITIES],
            lossless: Priorities::NONE,
        };
        if tables.ingress.is_empty() {
            return Err(TableError::Empty);
        }
        let port = |rule: &dyn Fn() -> String, n: u16| -> Result<usize, TableError> {
            match usize::from(n) {
                p if (1..=ports).contains(&p) => Ok(p - 1),
                _ => Err(TableError::NoSuchPort { rule: rule(), port: n, ports }),
            }
        };
        let tag = |rule: &dyn Fn() -> String, tag: u8| -> Result<usize, TableError> {
            match usize::from(tag) {
                t if t < TAGS => Ok(t),
                _ => Err(TableError::TagTooLarge { rule: rule(), tag }),
            }
        };
        // Which rule first named each (tag, priority), for errors that point at both.
        let mut tag_source: [Option<String>; TAGS] = std::array::from_fn(|_| None);
        let mut prio_tag: [Option<(u8, String)>; PRIORITIES] = Default::default();
        let mut bind = |rule: String, tg: u8, priority: u8, t: &mut TagTable| -> Result<(), TableError> {
            let Some(priority) = Priority::checked(priority) else {
                return Err(TableError::BadPriority { rule, priority });
            };
            let slot = &mut t.tag_priority[usize::from(tg)];
            if let Some(other) = slot.filter(|&other| other != priority) {
                let other_rule = tag_source[usize::from(tg)].clone().unwrap_or_default();
                return Err(TableError::TagOnTwoQueues { rule, tag: tg, priority, other, other_rule });
            }
            match &prio_tag[priority] {
                Some((other, other_rule)) if *other != tg => {
                    return Err(TableError::SharedQueue {
                        rule,
                        priority,
                        other: *other,
                        other_rule: other_rule.clone(),
                    })
                }
                Some(_) => {}
                None => prio_tag[priority] = Some((tg, rule.clone())),
            }
            *slot = Some(priority);
            t.priority_tag[priority] = tg;
            tag_source[usize::from(tg)].get_or_insert(rule);
            t.lossless.insert(priority);
            Ok(())
        };
        for (k, &p) in tables.priorities.iter().enumerate() {
            let rule = format!("priorities[{k}] (tag {} → priority {p})", k + 1);
            let tg = u8::try_from(k + 1).unwrap_or(u8::MAX);
            tag(&|| rule.clone(), tg)?;
            bind(rule, tg, p, &mut t)?;
        }
        let mut first_ingress: Vec<Option<usize>> = vec![None; ports * TAGS];
        for (k, e) in tables.ingress.iter().enumerate() {
            let rule = || ingress_rule(k, e);
            let (p, tg) = (port(&rule, e.port)?, tag(&rule, e.tag)?);
            if let Some(first) = first_ingress[p * TAGS + tg] {
                return Err(TableError::Duplicate { rule: rule(), first: ingress_rule(first, &tables.ingress[first]) });
            }
            first_ingress[p * TAGS + tg] = Some(k);
            bind(rule(), e.tag, e.priority, &mut t)?;
            t.ingress[p * TAGS + tg] = e.priority;
        }
        let mut first_rewrite: Vec<Option<usize>> = vec![None; t.rewrite.len()];
        for (k, r) in tables.rewrite.iter().enumerate() {
            let rule = || rewrite_rule(k, r);
            let (i, tg, e) = (port(&rule, r.ingress)?, tag(&rule, r.tag)?, port(&rule, r.egress)?);
            tag(&rule, r.new_tag)?;
            if i == e {
                return Err(TableError::Hairpin { rule: rule() });
            }
            if t.ingress[i * TAGS + tg] == NO_RULE {
                return Err(TableError::DeadRewrite { rule: rule(), port: r.ingress, tag: r.tag });
            }
            if t.tag_priority[usize::from(r.new_tag)].is_none() {
                return Err(TableError::UnknownTag { rule: rule(), tag: r.new_tag });
            }
            let at = (i * TAGS + tg) * ports + e;
            if let Some(first) = first_rewrite[at] {
                return Err(TableError::Duplicate { rule: rule(), first: rewrite_rule(first, &tables.rewrite[first]) });
            }
            first_rewrite[at] = Some(k);
            t.rewrite[at] = r.new_tag;
        }
        if usize::from(t.default_tag) >= TAGS {
            return Err(TableError::TagTooLarge { rule: "the default rule".into(), tag: t.default_tag });
        }
        if t.lossless.contains(t.default_priority) {
            return Err(TableError::LosslessDefault { priority: t.default_priority });
        }
        if let Some(config) = lossless {
            let configured: Priorities = config.iter().copied().collect();
            // Every ingress rule's priority was checked as it was bound, above.
            if let Some(k) = tables.ingress.iter().position(|e| !configured.contains(Priority::from_pcp(e.priority))) {
                let e = &tables.ingress[k];
                return Err(TableError::LossyPriority {
                    rule: ingress_rule(k, e),
                    priority: e.priority,
                    lossless: config.to_vec(),
                });
            }
            if configured != t.lossless {
                return Err(TableError::LosslessMismatch { config: config.to_vec(), table: t.lossless_priorities() });
            }
        }
        Ok(t)
    }

    /// Compiles `tables` for the switch `config` describes and makes the configuration's
    /// lossless priorities the table's. The table must be for this switch (`tagger.switch`,
    /// else the switch's name) unless `force`.
    pub fn apply(
        config: &mut Config,
        tables: &SwitchTables,
        source: &str,
        force: bool,
    ) -> Result<TagTable, TableError> {
        let expected = config.tagger.as_ref().and_then(|t| t.switch.clone()).unwrap_or_else(|| config.name.clone());
        if tables.switch != expected && !force {
            return Err(TableError::OtherSwitch { table: tables.switch.clone(), expected });
        }
        let table = TagTable::compile(tables, source, config.ports.len(), config.pfc.lossless.as_deref())?;
        config.pfc.lossless = Some(table.lossless_priorities());
        Ok(table)
    }

    /// The lossless priority of a frame that arrived on `port` with `tag`, if a rule says so.
    pub fn ingress(&self, port: PortId, tag: u8) -> Option<Priority> {
        Priority::checked(*self.ingress.get(port.index() * TAGS + usize::from(tag))?)
    }

    /// The tag a frame of (`ingress`, `tag`) leaves `egress` with, if a rule says so.
    pub fn rewrite(&self, ingress: PortId, tag: u8, egress: PortId) -> Option<u8> {
        let t = *self.rewrite.get((ingress.index() * TAGS + usize::from(tag)) * self.ports + egress.index())?;
        (t != NO_RULE).then_some(t)
    }

    /// The priority `tag` is queued under. Every tag a rewrite produces has one (checked
    /// as compiled); any other is queued as the default rule's, lossy.
    pub fn priority_of(&self, tag: u8) -> Priority {
        self.tag_priority[usize::from(tag) % TAGS].unwrap_or(self.default_priority)
    }

    /// The tag lossless priority `prio` carries.
    pub fn tag_of(&self, prio: Priority) -> Option<u8> {
        Some(self.priority_tag[prio]).filter(|&t| t != NO_RULE)
    }

    /// The egress queues at `egress` that frames of `ingress` charged to the priorities
    /// in `groups` wait in: those of the tags they leave with.
    pub fn egress_queues(&self, ingress: PortId, groups: Priorities, egress: PortId) -> Priorities {
        groups
            .iter()
            .filter_map(|p| self.rewrite(ingress, self.tag_of(p)?, egress))
            .map(|tag| self.priority_of(tag))
            .collect()
    }

    /// The lossless priorities the table's rules use.
    pub fn lossless(&self) -> Priorities {
        self.lossless
    }

    /// The same, as a sorted list.
    pub fn lossless_priorities(&self) -> Vec<Priority> {
        self.lossless.iter().collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::priorities::names::*;

    /// A three-port switch's table: hosts on port 1 enter with tag 2 (priority 4); from
    /// port 1 to port 2 the tag drops to 1 (priority 3); port 2's tag 1 goes to port 3.
    pub(crate) const TABLE: &str = r#"
        switch = "sw1"
        algorithm = "greedy"
        lossless_tags = 2
        initial_tag = 2
        priorities = [3, 4]
        [default]
        tag = 0
        priority = 0
        [[ingress]]
        port = 1
        tag = 2
        priority = 4
        [[ingress]]
        port = 2
        tag = 1
        priority = 3
        [[rewrite]]
        ingress = 1
        tag = 2
        egress = 2
        new_tag = 1
        [[rewrite]]
        ingress = 1
        tag = 2
        egress = 3
        new_tag = 2
        [[rewrite]]
        ingress = 2
        tag = 1
        egress = 3
        new_tag = 1
    "#;

    /// A table file for sw1 with two lossless tags on priorities 3 and 4, hosts entering
    /// with tag 2 and the default tag 0 on priority 0, followed by `rules`.
    pub(crate) fn table_with(rules: &str) -> String {
        let header =
            "switch = \"sw1\"\nalgorithm = \"greedy\"\nlossless_tags = 2\ninitial_tag = 2\npriorities = [3, 4]";
        format!("{header}\n[default]\ntag = 0\npriority = 0\n{rules}")
    }

    pub(crate) fn tables(text: &str) -> SwitchTables {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn rules_compile_into_lookups() {
        let t = TagTable::compile(&tables(TABLE), "sw1.toml", 3, None).unwrap();
        assert_eq!(
            (
                t.ingress(PortId::new(0), 2),
                t.ingress(PortId::new(1), 1),
                t.ingress(PortId::new(0), 1),
                t.ingress(PortId::new(2), 2)
            ),
            (Some(P4), Some(P3), None, None)
        );
        assert_eq!(
            (
                t.rewrite(PortId::new(0), 2, PortId::new(1)),
                t.rewrite(PortId::new(0), 2, PortId::new(2)),
                t.rewrite(PortId::new(1), 1, PortId::new(2))
            ),
            (Some(1), Some(2), Some(1))
        );
        assert_eq!(
            (t.rewrite(PortId::new(1), 1, PortId::new(0)), t.rewrite(PortId::new(0), 1, PortId::new(1))),
            (None, None)
        );
        assert_eq!((t.priority_of(1), t.priority_of(2)), (P3, P4));
        assert_eq!(t.lossless_priorities(), vec![P3, P4]);
        assert_eq!((t.ingress_rules, t.rewrite_rules, t.initial_tag), (2, 3, 2));
    }

    #[test]
    fn the_table_sets_the_lossless_priorities_and_must_be_for_this_switch() {
        let mut c = Config::for_interfaces(&["a", "b", "c"]);
        c.name = "sw1".into();
        TagTable::apply(&mut c, &tables(TABLE), "t", false).unwrap();
        assert_eq!(c.pfc.lossless, Some(vec![P3, P4]));

        c.name = "lab-1-sw1".into();
        let err = TagTable::apply(&mut c, &tables(TABLE), "t", false).unwrap_err();
        assert_eq!(err, TableError::OtherSwitch { table: "sw1".into(), expected: "lab-1-sw1".into() });
        assert!(err.to_string().contains("--force"), "{err}");
        assert!(TagTable::apply(&mut c, &tables(TABLE), "t", true).is_ok());
        c.tagger = Some(crate::config::TaggerConfig { table: "t".into(), switch: Some("sw1".into()) });
        assert!(TagTable::apply(&mut c, &tables(TABLE), "t", false).is_ok());
    }

    #[test]
    fn errors_name_the_rule_at_fault() {
        let edit = |from: &str, to: &str| tables(&TABLE.replacen(from, to, 1));
        let cases: Vec<(SwitchTables, usize, Option<Vec<Priority>>, &str)> = vec![
            (tables(TABLE), 2, None, "rewrite rule #2 (ingress 1, tag 2, egress 3 → tag 2): the switch has no port 3"),
            (
                tables(TABLE),
                3,
                Some(vec![P3]),
                "ingress rule #1 (port 1, tag 2 → priority 4): priority 4 is lossy on this switch (pfc.lossless = [3])",
            ),
            (
                tables(TABLE),
                3,
                Some(vec![P3, P4, P5]),
                "pfc.lossless = [3, 4, 5] disagrees with the table's lossless priorities [3, 4]",
            ),
            (
                edit(
                    "port = 2\n        tag = 1\n        priority = 3",
                    "port = 2\n        tag = 1\n        priority = 4",
                ),
                3,
                None,
                "tag 1 is on two queues: priority 4 here, 3 in priorities[0]",
            ),
            (
                edit("priorities = [3, 4]", "priorities = [3, 3]"),
                3,
                None,
                "priorities[1] (tag 2 → priority 3): two tags on one queue: priority 3 already carries tag 1",
            ),
            (
                edit("port = 2\n        tag = 1", "port = 1\n        tag = 2"),
                3,
                None,
                "ingress rule #2 (port 1, tag 2 → priority 3): a second rule for the same key (ingress rule #1",
            ),
            (
                edit(
                    "ingress = 2\n        tag = 1\n        egress = 3",
                    "ingress = 2\n        tag = 2\n        egress = 3",
                ),
                3,
                None,
                "rewrite rule #3 (ingress 2, tag 2, egress 3 → tag 1): no ingress rule for port 2 tag 2",
            ),
            (
                edit("egress = 3\n        new_tag = 2", "egress = 1\n        new_tag = 2"),
                3,
                None,
                "rewrite rule #2 (ingress 1, tag 2, egress 1 → tag 2): a frame never leaves by the port it came in on",
            ),
            (
                edit("egress = 3\n        new_tag = 2", "egress = 2\n        new_tag = 2"),
                3,
                None,
                "rewrite rule #2 (ingress 1, tag 2, egress 2 → tag 2): a second rule for the same key (rewrite rule #1",
            ),
            (
                edit("egress = 3\n        new_tag = 2", "egress = 3\n        new_tag = 7"),
                3,
                None,
                "rewrite rule #2 (ingress 1, tag 2, egress 3 → tag 7): the table gives no priority for tag 7",
            ),
            (
                edit("tag = 2\n        priority = 4", "tag = 64\n        priority = 4"),
                3,
                None,
                "ingress rule #1 (port 1, tag 64 → priority 4): tag 64 does not fit in a DSCP",
            ),
            (
                edit("tag = 0\n        priority = 0", "tag = 0\n        priority = 3"),
                3,
                None,
                "the default rule's priority 3 is lossless",
            ),
            (edit("priority = 4", "priority = 9"), 3, None, "priority 9 is not 0..=7"),
        ];
        for (tab, ports, lossless, want) in cases {
            let err = TagTable::compile(&tab, "t", ports, lossless.as_deref()).unwrap_err().to_string();
            assert!(err.contains(want), "want {want:?}\n got {err:?}");
        }
        let mut empty = tables(TABLE);
        empty.ingress.clear();
        empty.rewrite.clear();
        assert_eq!(TagTable::compile(&empty, "t", 3, None).unwrap_err(), TableError::Empty);
    }

    #[test]
    fn tables_without_a_priorities_list_take_them_from_the_ingress_rules() {
        let old = tables(&TABLE.replacen("priorities = [3, 4]", "", 1));
        let t = TagTable::compile(&old, "t", 3, None).unwrap();
        assert_eq!((t.priority_of(1), t.priority_of(2)), (P3, P4));
    }
}
