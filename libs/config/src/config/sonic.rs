//! SONiC's configuration as written: a CONFIG_DB document (`config_db.json`,
//! `sonic-cfggen`'s output) translated into a [`Config`], for the ports a user maps to
//! interfaces (`Ethernet0=p1`).
//!
//! pfcswitch's model is SONiC's with one number per class: a frame's traffic class is
//! its priority group, its egress queue and its PFC priority. The tables are read as
//! SONiC's managers read them:
//!
//! - `PORT` (`speed` in Mb/s, `mtu`), `CABLE_LENGTH` (the cable each port's headroom
//!   covers);
//! - `PORT_QOS_MAP` per port: `pfc_enable` (the lossless priorities), `dscp_to_tc_map`,
//!   `tc_to_pg_map`, `tc_to_queue_map`, `pfc_to_queue_map`, naming `DSCP_TO_TC_MAP`,
//!   `TC_TO_PRIORITY_GROUP_MAP`, `TC_TO_QUEUE_MAP`, `MAP_PFC_PRIORITY_TO_QUEUE`;
//! - `BUFFER_POOL` (the ingress lossless pool is the shared buffer; `dynamic` mode makes a
//!   profile's `dynamic_th` an alpha of 2^th), `BUFFER_PROFILE` and `BUFFER_PG`
//!   (`Ethernet0|3-4`): a lossless PG's `xoff` is its headroom, `xon`/`xon_offset` its
//!   resume, `dynamic_th`/`static_th` its XOFF. A lossless PG with no profile (SONiC's
//!   buffer manager makes one at run time from the port's speed and cable) gets its
//!   headroom from the calculator ([`crate::headroom`]), and the translation says so;
//! - `QUEUE` (`Ethernet0|3`: `scheduler`, `wred_profile`), `SCHEDULER` (`DWRR`/`WRR`
//!   weights, `STRICT`), `WRED_PROFILE` (green);
//! - `PFC_WD` per port (`action`, `detection_time`, `restoration_time`).
//!
//! What pfcswitch cannot do is said once per table and key ([`Note`]) and the rest goes
//! on; what contradicts itself (a reference to a missing entry, a threshold above its
//! pool, a number that is not one) is a [`SonicError`] naming the table and key, and no
//! configuration comes out. The document is untrusted: its size and entry count are
//! bounded.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Map, Value};

use super::{BufferProfile, Config, PauseMode, Scheduler, WredSettings};
use crate::config::port::max_frame_for_mtu;
use crate::config::EcnMode;
use crate::headroom::{reaction_allowance_quanta, CalcInput};
use crate::priorities::{Priority, PRIORITIES};
use crate::speed::Speed;
use crate::watchdog::{WatchdogAction, WatchdogOverride};

/// The largest document read, bytes (a full 128-port switch's is under 2 MB).
pub const MAX_DOCUMENT_BYTES: usize = 32 << 20;
/// The most entries (keys of all tables together) a document may have.
pub const MAX_ENTRIES: usize = 500_000;

/// Why a document could not be translated.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SonicError {
    /// Not JSON, or not an object of tables.
    #[error("not a CONFIG_DB document: {0}")]
    Parse(String),
    /// Larger than [`MAX_DOCUMENT_BYTES`] or with more than [`MAX_ENTRIES`] entries.
    #[error("the document is too large: {0}")]
    TooLarge(String),
    /// A mapping `SONIC=IFACE` the user gave is malformed or names a port twice.
    #[error("--port {0}: {1}")]
    PortMapping(String, String),
    /// An entry that contradicts the document or pfcswitch's model.
    #[error("{table}|{key}: {why}")]
    Invalid {
        /// The table.
        table: String,
        /// The key (with its field, where one is to blame).
        key: String,
        /// What is wrong.
        why: String,
    },
}

fn invalid(table: &str, key: impl Into<String>, why: impl Into<String>) -> SonicError {
    SonicError::Invalid { table: table.to_string(), key: key.into(), why: why.into() }
}

/// What the translation did with a table or key that does not map one to one.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Note {
    /// The table.
    pub table: String,
    /// The key or field.
    pub key: String,
    /// Derived (worked out, not read) or not honoured.
    pub kind: NoteKind,
    /// What, and why.
    pub text: String,
}

/// What a [`Note`] says of its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoteKind {
    /// The figure was worked out, as SONiC's buffer manager would, not read.
    Derived,
    /// pfcswitch does not do what the key asks; the rest of the document applies.
    NotHonoured,
}

/// A document's translation: the configuration and what it could not take as written.
#[derive(Clone, Debug)]
pub struct Translation {
    /// The switch's configuration (validated).
    pub config: Config,
    /// Derived figures and keys not honoured, each said once.
    pub notes: Vec<Note>,
}

/// A SONiC port mapped to an interface: `Ethernet0=p1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortMap {
    /// The port's name in the document.
    pub sonic: String,
    /// The interface (or simulated port) it becomes.
    pub iface: String,
}

impl std::str::FromStr for PortMap {
    type Err = SonicError;
    fn from_str(s: &str) -> Result<PortMap, SonicError> {
        let bad = |why: &str| SonicError::PortMapping(s.to_string(), why.to_string());
        let (sonic, iface) = s.split_once('=').ok_or_else(|| bad("give SONIC_PORT=IFACE, e.g. Ethernet0=p1"))?;
        if sonic.is_empty() || iface.is_empty() || sonic.len() > 64 || iface.len() > 64 {
            return Err(bad("both names, each at most 64 characters"));
        }
        Ok(PortMap { sonic: sonic.to_string(), iface: iface.to_string() })
    }
}

/// The document, read.
struct Doc {
    tables: Map<String, Value>,
    notes: Vec<Note>,
    noted: BTreeSet<(String, String)>,
}

impl Doc {
    fn table(&self, name: &str) -> Option<&Map<String, Value>> {
        self.tables.get(name)?.as_object()
    }

    fn entry(&self, table: &str, key: &str) -> Option<&Map<String, Value>> {
        self.table(table)?.get(key)?.as_object()
    }

    /// The entry `key` of `table`, which something named: missing is a contradiction.
    fn named(&self, table: &str, key: &str, by: &str) -> Result<&Map<String, Value>, SonicError> {
        self.entry(table, key).ok_or_else(|| invalid(table, key, format!("named by {by}, but there is no such entry")))
    }

    fn note(&mut self, table: &str, key: &str, kind: NoteKind, text: impl Into<String>) {
        if self.noted.insert((table.to_string(), key.to_string())) {
            self.notes.push(Note { table: table.into(), key: key.into(), kind, text: text.into() });
        }
    }
}

/// A field's text (SONiC writes numbers as strings; numbers are taken too).
fn field<'a>(entry: &'a Map<String, Value>, name: &str) -> Option<std::borrow::Cow<'a, str>> {
    match entry.get(name)? {
        Value::String(s) => Some(s.as_str().into()),
        Value::Number(n) => Some(n.to_string().into()),
        Value::Bool(b) => Some(b.to_string().into()),
        _ => None,
    }
}

fn number<T: std::str::FromStr>(table: &str, key: &str, name: &str, text: &str) -> Result<T, SonicError> {
    text.trim().parse().map_err(|_| invalid(table, format!("{key}.{name}"), format!("`{text}` is not a number")))
}

/// `[TABLE|name]` (the older reference form) or `name`.
fn reference(text: &str) -> &str {
    let t = text.trim();
    match t.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        Some(inner) => inner.split_once('|').map_or(inner, |(_, name)| name),
        None => t,
    }
}

/// `3`, `3-4` or `0,1,5-6`: classes 0..7.
fn classes(table: &str, key: &str, text: &str) -> Result<Vec<Priority>, SonicError> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (u8, u8) = (number(table, key, "classes", a)?, number(table, key, "classes", b)?);
        if a > b || usize::from(b) >= PRIORITIES {
            return Err(invalid(table, key, format!("`{part}` is not a range of classes 0..7")));
        }
        out.extend((a..=b).map(Priority::new));
    }
    Ok(out)
}

/// Reads a document from `source` (a file the driver opened), at most
/// [`MAX_DOCUMENT_BYTES`]: the one place the bound is applied before the text is held,
/// so a driver never reads a larger file whole (the engine itself opens no file).
pub fn read_document(source: impl std::io::Read) -> Result<String, SonicError> {
    use std::io::Read as _;
    let mut text = String::new();
    source
        .take(MAX_DOCUMENT_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|e| SonicError::Parse(format!("reading: {e}")))?;
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(SonicError::TooLarge(format!("more than {MAX_DOCUMENT_BYTES} bytes")));
    }
    Ok(text)
}

/// Translates `text` for the ports `ports` (SONiC name to interface), in that order.
pub fn translate(text: &str, ports: &[PortMap]) -> Result<Translation, SonicError> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(SonicError::TooLarge(format!("{} bytes, at most {MAX_DOCUMENT_BYTES}", text.len())));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| SonicError::Parse(e.to_string()))?;
    let Value::Object(tables) = value else { return Err(SonicError::Parse("the top level is not an object".into())) };
    let tables = nested(tables);
    let entries: usize = tables.values().filter_map(Value::as_object).map(Map::len).sum();
    if entries > MAX_ENTRIES {
        return Err(SonicError::TooLarge(format!("{entries} entries, at most {MAX_ENTRIES}")));
    }
    if ports.is_empty() {
        return Err(SonicError::PortMapping(String::new(), "map at least one port: --port Ethernet0=p1".into()));
    }
    let mut seen = BTreeSet::new();
    for p in ports {
        if !seen.insert(&p.sonic) || ports.iter().filter(|q| q.iface == p.iface).count() > 1 {
            return Err(SonicError::PortMapping(
                format!("{}={}", p.sonic, p.iface),
                "each port and interface once".into(),
            ));
        }
    }
    let mut doc = Doc { tables, notes: Vec::new(), noted: BTreeSet::new() };
    let mut config = Config::for_interfaces(&ports.iter().map(|p| p.iface.as_str()).collect::<Vec<_>>());
    config.name = doc
        .entry("DEVICE_METADATA", "localhost")
        .and_then(|e| field(e, "hostname"))
        .filter(|h| !h.is_empty() && h.len() <= 64 && h.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)))
        .map_or_else(|| "sonic".to_string(), |h| h.into_owned());
    ports_table(&mut doc, &mut config, ports)?;
    let lossless = qos_maps(&mut doc, &mut config, ports)?;
    watchdog(&mut doc, &mut config, ports)?;
    buffers(&mut doc, &mut config, ports, &lossless)?;
    queues(&mut doc, &mut config, ports)?;
    unread_tables(&mut doc);
    config.validate().map_err(|e| invalid("(translation)", "", e.to_string()))?;
    Ok(Translation { config, notes: doc.notes })
}

/// The document as tables of entries. Besides the nested form (`sonic-cfggen`,
/// `config_db.json`), the flat one of a database dump is taken: top-level keys
/// `TABLE|KEY`, each entry its fields, or `{"type": "hash", "value": {fields}}` as
/// `sonic-db-dump` writes them.
fn nested(top: Map<String, Value>) -> Map<String, Value> {
    let mut tables = Map::new();
    for (key, value) in top {
        let Some((table, entry)) = key.split_once('|') else {
            match (tables.get_mut(&key), value) {
                (Some(Value::Object(have)), Value::Object(more)) => have.extend(more),
                (_, value) => {
                    tables.insert(key, value);
                }
            }
            continue;
        };
        let fields = match value {
            Value::Object(mut o)
                if o.get("type").and_then(Value::as_str) == Some("hash")
                    && o.get("value").is_some_and(Value::is_object) =>
            {
                o.remove("value").unwrap_or_default()
            }
            other => other,
        };
        if let Value::Object(t) = tables.entry(table.to_string()).or_insert_with(|| Value::Object(Map::new())) {
            t.insert(entry.to_string(), fields);
        }
    }
    tables
}

/// `PORT` and `CABLE_LENGTH`.
fn ports_table(doc: &mut Doc, config: &mut Config, ports: &[PortMap]) -> Result<(), SonicError> {
    let has_port_table = doc.table("PORT").is_some();
    if !has_port_table {
        doc.note("PORT", "", NoteKind::NotHonoured, "no PORT table: speeds and MTUs come from the interfaces");
    }
    for (i, p) in ports.iter().enumerate() {
        config.ports[i].name = Some(p.sonic.clone());
        if has_port_table {
            let entry = doc.named("PORT", &p.sonic, &format!("--port {}={}", p.sonic, p.iface))?.clone();
            if let Some(speed) = field(&entry, "speed") {
                let mbps: u64 = number("PORT", &p.sonic, "speed", &speed)?;
                config.ports[i].speed = Some(Speed::mbps(mbps));
            }
            if let Some(mtu) = field(&entry, "mtu") {
                let mtu: u32 = number("PORT", &p.sonic, "mtu", &mtu)?;
                if !(68..=16_000).contains(&mtu) {
                    return Err(invalid("PORT", format!("{}.mtu", p.sonic), "an MTU of 68 to 16000 bytes"));
                }
                config.ports[i].max_frame = Some(max_frame_for_mtu(mtu));
            }
            if field(&entry, "admin_status").is_some_and(|s| s == "down") {
                doc.note(
                    "PORT",
                    &format!("{}.admin_status", p.sonic),
                    NoteKind::NotHonoured,
                    "down: pfcswitch has no administrative state; the port forwards (leave it out of --port to leave it out)",
                );
            }
            if field(&entry, "pfc_asym").is_some_and(|s| s == "on") {
                doc.note(
                    "PORT",
                    &format!("{}.pfc_asym", p.sonic),
                    NoteKind::NotHonoured,
                    "on: pfcswitch sends and obeys PFC on the same priorities (symmetric)",
                );
            }
            for key in entry.keys().filter(|k| !["speed", "mtu", "admin_status", "pfc_asym"].contains(&k.as_str())) {
                doc.note(
                    "PORT",
                    key,
                    NoteKind::NotHonoured,
                    "describes the ASIC's port (lanes, alias, FEC...): not used",
                );
            }
        }
        let cable = doc.table("CABLE_LENGTH").and_then(|t| {
            t.values()
                .filter_map(Value::as_object)
                .find_map(|e| e.get(&p.sonic).and_then(Value::as_str))
                .map(str::to_string)
        });
        if let Some(c) = cable {
            let metres: f64 = number("CABLE_LENGTH", &p.sonic, "length", c.trim_end_matches('m'))?;
            if !(0.0..=10_000.0).contains(&metres) {
                return Err(invalid("CABLE_LENGTH", &p.sonic, "a cable of 0 to 10000 m"));
            }
            config.ports[i].cable_m = metres;
        }
    }
    Ok(())
}

/// The one map every mapped port names in `PORT_QOS_MAP`'s `field` (pfcswitch classifies
/// switch-wide), or none.
fn common_map(doc: &Doc, ports: &[PortMap], field_name: &str) -> Result<Option<String>, SonicError> {
    let mut names = BTreeMap::new();
    for p in ports {
        let name = doc
            .entry("PORT_QOS_MAP", &p.sonic)
            .and_then(|e| field(e, field_name))
            .or_else(|| doc.entry("PORT_QOS_MAP", "global").and_then(|e| field(e, field_name)))
            .map(|n| reference(&n).to_string());
        names.insert(name, &p.sonic);
    }
    if names.len() > 1 {
        let list: Vec<String> = names.iter().map(|(n, p)| format!("{p} {}", n.as_deref().unwrap_or("none"))).collect();
        return Err(invalid(
            "PORT_QOS_MAP",
            field_name,
            format!("pfcswitch maps classes switch-wide, and the ports name different maps: {}", list.join(", ")),
        ));
    }
    Ok(names.into_keys().next().flatten())
}

/// A class map: class (or DSCP) → class, every key and value checked.
fn class_map(doc: &Doc, table: &str, name: &str, keys: usize) -> Result<BTreeMap<u8, Priority>, SonicError> {
    let entry = doc.named(table, name, "PORT_QOS_MAP")?;
    let mut out = BTreeMap::new();
    for (k, v) in entry {
        let from: u8 = number(table, name, k, k)?;
        let to: u8 = number(table, name, k, v.as_str().unwrap_or(""))?;
        match Priority::checked(to) {
            Some(to) if usize::from(from) < keys => out.insert(from, to),
            _ => {
                return Err(invalid(
                    table,
                    format!("{name}.{k}"),
                    format!("maps {from} to {to}: keys 0..{}, classes 0..7", keys - 1),
                ))
            }
        };
    }
    Ok(out)
}

/// `PORT_QOS_MAP` and the maps it names. Returns the lossless priorities.
fn qos_maps(doc: &mut Doc, config: &mut Config, ports: &[PortMap]) -> Result<Vec<Priority>, SonicError> {
    let mut lossless: Option<Vec<Priority>> = None;
    for (i, p) in ports.iter().enumerate() {
        let enabled = doc.entry("PORT_QOS_MAP", &p.sonic).and_then(|e| field(e, "pfc_enable")).map(|s| s.into_owned());
        match enabled {
            Some(list) => {
                let prios = classes("PORT_QOS_MAP", &format!("{}.pfc_enable", p.sonic), &list)?;
                if lossless.as_ref().is_some_and(|l| *l != prios) {
                    return Err(invalid(
                        "PORT_QOS_MAP",
                        format!("{}.pfc_enable", p.sonic),
                        format!("{list}, where another mapped port has {:?}: pfcswitch's lossless priorities are switch-wide", lossless.unwrap_or_default()),
                    ));
                }
                lossless = Some(prios);
            }
            None => {
                config.ports[i].pause_mode = PauseMode::Off;
                doc.note(
                    "PORT_QOS_MAP",
                    &format!("{}.pfc_enable", p.sonic),
                    NoteKind::Derived,
                    "absent: no PFC on this port (pause_mode = \"off\")",
                );
            }
        }
    }
    // No port with PFC: no lossless priority at all (not pfcswitch's default 3 and 4).
    let lossless = lossless.unwrap_or_default();
    config.pfc.lossless = Some(lossless.clone());
    if let Some(name) = common_map(doc, ports, "dscp_to_tc_map")? {
        let map = class_map(doc, "DSCP_TO_TC_MAP", &name, 64)?;
        config.classify.dscp = map.iter().map(|(d, tc)| (d.to_string(), *tc)).collect();
        config.classify.default_priority = Priority::new(0);
    } else {
        doc.note(
            "PORT_QOS_MAP",
            "dscp_to_tc_map",
            NoteKind::NotHonoured,
            "no DSCP map named: pfcswitch's default (DSCP 3 and 4 to priorities 3 and 4)",
        );
    }
    for (field_name, table) in [
        ("tc_to_pg_map", "TC_TO_PRIORITY_GROUP_MAP"),
        ("tc_to_queue_map", "TC_TO_QUEUE_MAP"),
        ("pfc_to_queue_map", "MAP_PFC_PRIORITY_TO_QUEUE"),
    ] {
        let Some(name) = common_map(doc, ports, field_name)? else { continue };
        let map = class_map(doc, table, &name, PRIORITIES)?;
        let moved: Vec<String> = map.iter().filter(|(&a, b)| a != b.get()).map(|(a, b)| format!("{a}→{b}")).collect();
        let lossless_moved = map.iter().any(|(&a, b)| a != b.get() && lossless.iter().any(|l| l.get() == a));
        if lossless_moved {
            return Err(invalid(
                table,
                &name,
                format!("moves a lossless class ({}): pfcswitch keeps a lossless class's group, queue and PFC priority one number", moved.join(", ")),
            ));
        }
        if !moved.is_empty() {
            doc.note(
                table,
                &name,
                NoteKind::NotHonoured,
                format!("{}: lossy classes keep their own number in pfcswitch (lossy groups have no ingress profile; each class has its queue)", moved.join(", ")),
            );
        }
    }
    Ok(lossless)
}

/// `PFC_WD`: per port, and `GLOBAL`.
fn watchdog(doc: &mut Doc, config: &mut Config, ports: &[PortMap]) -> Result<(), SonicError> {
    if doc.table("PFC_WD").is_none() {
        config.pfcwd.action = WatchdogAction::Off;
        doc.note(
            "PFC_WD",
            "",
            NoteKind::Derived,
            "no PFC_WD table: the watchdog is off, as on a SONiC switch where it was never started",
        );
        return Ok(());
    }
    if doc.entry("PFC_WD", "GLOBAL").is_some_and(|g| g.contains_key("POLL_INTERVAL")) {
        doc.note(
            "PFC_WD",
            "GLOBAL.POLL_INTERVAL",
            NoteKind::NotHonoured,
            "pfcswitch's watchdog looks on every turn of its loop, not at an interval",
        );
    }
    for (i, p) in ports.iter().enumerate() {
        let Some(entry) = doc.entry("PFC_WD", &p.sonic).cloned() else {
            config.ports[i].pfcwd = Some(WatchdogOverride { action: Some(WatchdogAction::Off), ..Default::default() });
            continue;
        };
        let key = |f: &str| format!("{}.{f}", p.sonic);
        let action = match field(&entry, "action").as_deref() {
            None | Some("drop") => WatchdogAction::Drop,
            Some("forward") => WatchdogAction::Forward,
            Some("alert") => WatchdogAction::Alert,
            Some(other) => return Err(invalid("PFC_WD", key("action"), format!("`{other}`: drop, forward or alert"))),
        };
        let ms = |name: &str| -> Result<Option<u64>, SonicError> {
            field(&entry, name).map(|v| number::<u64>("PFC_WD", &p.sonic, name, &v)).transpose()
        };
        let (detection, restoration) = (ms("detection_time")?, ms("restoration_time")?);
        for (name, v) in [("detection_time", detection), ("restoration_time", restoration)] {
            if v.is_some_and(|v| !(1..=60_000).contains(&v)) {
                return Err(invalid("PFC_WD", key(name), "1 to 60000 ms"));
            }
        }
        config.ports[i].pfcwd =
            Some(WatchdogOverride { action: Some(action), detection_ms: detection, restoration_ms: restoration });
    }
    Ok(())
}

/// A buffer pool: its size and whether its thresholds are dynamic.
struct Pool {
    size: u64,
    dynamic: bool,
}

fn pool(doc: &Doc, name: &str, by: &str) -> Result<Pool, SonicError> {
    let e = doc.named("BUFFER_POOL", name, by)?;
    let size = field(e, "size").ok_or_else(|| invalid("BUFFER_POOL", name, "has no size"))?;
    Ok(Pool {
        size: number("BUFFER_POOL", name, "size", &size)?,
        dynamic: field(e, "mode").is_none_or(|m| m == "dynamic"),
    })
}

/// `BUFFER_POOL`, `BUFFER_PROFILE`, `BUFFER_PG` and `BUFFER_QUEUE`, with the lossless PGs
/// that have no profile derived.
fn buffers(doc: &mut Doc, config: &mut Config, ports: &[PortMap], lossless: &[Priority]) -> Result<(), SonicError> {
    let ingress = doc.table("BUFFER_POOL").and_then(|t| {
        t.iter()
            .filter(|(_, v)| v.get("type").and_then(Value::as_str) == Some("ingress"))
            .map(|(k, _)| k.clone())
            .min_by_key(|k| (k != "ingress_lossless_pool", k.clone()))
    });
    let shared = match &ingress {
        Some(name) => {
            let p = pool(doc, name, "BUFFER_POOL")?;
            if p.size > 1 << 30 {
                return Err(invalid(
                    "BUFFER_POOL",
                    format!("{name}.size"),
                    "at most 1 GiB: pfcswitch's buffer is memory",
                ));
            }
            config.buffer.shared_bytes = p.size;
            if doc.entry("BUFFER_POOL", name).is_some_and(|e| e.contains_key("xoff")) {
                doc.note(
                    "BUFFER_POOL",
                    &format!("{name}.xoff"),
                    NoteKind::NotHonoured,
                    "a shared headroom pool: pfcswitch gives each lossless group its own headroom (the profiles' xoff)",
                );
            }
            Some(p)
        }
        None => {
            doc.note("BUFFER_POOL", "", NoteKind::NotHonoured, "no ingress pool: pfcswitch's default shared buffer");
            None
        }
    };
    if doc
        .table("BUFFER_POOL")
        .is_some_and(|t| t.values().any(|v| v.get("type").and_then(Value::as_str) == Some("egress")))
    {
        doc.note("BUFFER_POOL", "egress", NoteKind::NotHonoured, "egress pools: pfcswitch's queues draw on the one shared buffer; a lossy queue is bounded by buffer.lossy_queue_bytes");
    }
    if doc.table("BUFFER_QUEUE").is_some() {
        doc.note("BUFFER_QUEUE", "", NoteKind::NotHonoured, "egress queue profiles: lossless queues are bounded by their ingress groups' XOFF and headroom, lossy ones by buffer.lossy_queue_bytes");
    }
    let pgs: Vec<(String, String)> = doc
        .table("BUFFER_PG")
        .map(|t| {
            t.iter().filter_map(|(k, v)| Some((k.clone(), field(v.as_object()?, "profile")?.into_owned()))).collect()
        })
        .unwrap_or_default();
    for (i, p) in ports.iter().enumerate() {
        let mut covered = BTreeSet::new();
        for (key, profile_ref) in &pgs {
            let Some(range) = key.strip_prefix(&format!("{}|", p.sonic)) else {
                if key.matches('|').count() > 1 {
                    doc.note(
                        "BUFFER_PG",
                        key,
                        NoteKind::NotHonoured,
                        "a multi-ASIC key (host|asic|port|pg): only PORT|PG keys are read",
                    );
                }
                continue;
            };
            let name = reference(profile_ref).to_string();
            for pg in classes("BUFFER_PG", key, range)? {
                if !lossless.contains(&pg) {
                    doc.note(
                        "BUFFER_PG",
                        "lossy",
                        NoteKind::NotHonoured,
                        "lossy groups' ingress profiles: pfcswitch bounds lossy traffic at its egress queues",
                    );
                    continue;
                }
                if name == "NULL" || name.is_empty() {
                    continue; // the dynamic model's "buffer manager decides": derived below
                }
                let profile = profile(doc, &name, key, shared.as_ref())?;
                config.ports[i].priority.insert(pg, profile);
                covered.insert(pg);
            }
        }
        for &pg in lossless.iter().filter(|pg| !covered.contains(pg)) {
            let derived = derive(doc, config, i, shared.as_ref())?;
            doc.note("BUFFER_PG", &format!("{}|{pg}", p.sonic), NoteKind::Derived, derived.1);
            config.ports[i].priority.insert(pg, derived.0);
        }
    }
    Ok(())
}

/// A lossless PG's `BUFFER_PROFILE` as pfcswitch's profile.
fn profile(doc: &mut Doc, name: &str, by: &str, shared: Option<&Pool>) -> Result<BufferProfile, SonicError> {
    let e = doc.named("BUFFER_PROFILE", name, &format!("BUFFER_PG|{by}"))?.clone();
    let num = |f: &str| -> Result<Option<u64>, SonicError> {
        field(&e, f).map(|v| number::<u64>("BUFFER_PROFILE", name, f, &v)).transpose()
    };
    let (pool_size, pool_dynamic) = match field(&e, "pool") {
        Some(p) => {
            let p = pool(doc, reference(&p), &format!("BUFFER_PROFILE|{name}"))?;
            (Some(p.size), Some(p.dynamic))
        }
        None => (shared.map(|p| p.size), shared.map(|p| p.dynamic)),
    };
    let mut out = BufferProfile { headroom_bytes: num("xoff")?, ..Default::default() };
    if let Some(th) = field(&e, "dynamic_th") {
        let th: i32 = number("BUFFER_PROFILE", name, "dynamic_th", &th)?;
        if !(-8..=6).contains(&th) {
            return Err(invalid("BUFFER_PROFILE", format!("{name}.dynamic_th"), "-8 to 6 (alpha = 2^th, at most 64)"));
        }
        if pool_dynamic == Some(false) {
            return Err(invalid(
                "BUFFER_PROFILE",
                format!("{name}.dynamic_th"),
                "a dynamic threshold in a static pool",
            ));
        }
        out.xoff_alpha = Some(2f64.powi(th));
    } else if let Some(th) = num("static_th")? {
        if pool_size.is_some_and(|size| th > size) {
            return Err(invalid(
                "BUFFER_PROFILE",
                format!("{name}.static_th"),
                format!("{th} is larger than its pool"),
            ));
        }
        out.xoff_bytes = Some(th);
    }
    match (num("xon_offset")?, num("xon")?) {
        (Some(offset), xon) => {
            out.xon_offset_bytes = Some(offset);
            if xon.is_some() {
                doc.note(
                    "BUFFER_PROFILE",
                    &format!("{name}.xon"),
                    NoteKind::NotHonoured,
                    "pfcswitch takes one XON rule: xon_offset (XON = XOFF − offset)",
                );
            }
        }
        (None, xon) => out.xon_bytes = xon,
    }
    if let (Some(size), Some(x)) = (pool_size, out.headroom_bytes) {
        if x > size {
            return Err(invalid("BUFFER_PROFILE", format!("{name}.xoff"), format!("{x} is larger than its pool")));
        }
    }
    if num("size")?.is_some_and(|s| s > 0) {
        doc.note(
            "BUFFER_PROFILE",
            &format!("{name}.size"),
            NoteKind::NotHonoured,
            "a group's reserved minimum: pfcswitch reserves none (every group draws on the shared buffer)",
        );
    }
    Ok(out)
}

/// The headroom SONiC's buffer manager would give port `i`'s lossless PG: the calculator's
/// figure for its speed, cable and largest frame, with 802.3's reaction allowance as the
/// upstream's response. Returns the profile and how it was worked out.
fn derive(doc: &Doc, config: &Config, i: usize, shared: Option<&Pool>) -> Result<(BufferProfile, String), SonicError> {
    let p = &config.ports[i];
    let speed = p.speed();
    let tabled = reaction_allowance_quanta(speed);
    // Untabled speeds take the 100G entry's quanta: at 25G that errs large (more time than
    // 40G's entry allows); above 100G it may err small.
    let quanta = tabled.unwrap_or(394);
    let mut input = CalcInput {
        speed,
        cable_m: p.cable_m,
        max_frame: p.max_frame() as u32,
        response: Duration::ZERO,
        switch_delay: Duration::ZERO,
        load: 1.0,
    };
    input.response = input.quanta(quanta);
    let bytes = input.calculate().total_bytes;
    let mut why = format!(
        "no profile: headroom {bytes} B from the calculator ({speed}, {} m of cable, {} B frames, the upstream stopping within {quanta} quanta{})",
        p.cable_m,
        p.max_frame(),
        if tabled.is_some() { ", 802.3 Annex 31B.3.7" } else { ", 100G's allowance: 802.3 tables none for this speed" },
    );
    let mut profile = BufferProfile { headroom_bytes: Some(bytes), ..Default::default() };
    // The XOFF rule of the profiles the buffer manager makes: the pool's, with the
    // document's default threshold where it gives one (the dynamic model's table).
    if shared.is_some_and(|p| p.dynamic) {
        let key = "AZURE";
        let th = match doc.entry("DEFAULT_LOSSLESS_BUFFER_PARAMETER", key).and_then(|e| field(e, "default_dynamic_th"))
        {
            Some(th) => number::<i32>("DEFAULT_LOSSLESS_BUFFER_PARAMETER", key, "default_dynamic_th", &th)?,
            None => 0,
        };
        if !(-8..=6).contains(&th) {
            return Err(invalid("DEFAULT_LOSSLESS_BUFFER_PARAMETER", format!("{key}.default_dynamic_th"), "-8 to 6"));
        }
        profile.xoff_alpha = Some(2f64.powi(th));
        why += &format!("; XOFF at 2^{th} of the free shared buffer (the pool is dynamic)");
    }
    why += "; XON pfcswitch's default offset below XOFF";
    Ok((profile, why))
}

/// `QUEUE` with `SCHEDULER` and `WRED_PROFILE`.
fn queues(doc: &mut Doc, config: &mut Config, ports: &[PortMap]) -> Result<(), SonicError> {
    // SONiC marks and drops early only on the queues QUEUE gives a WRED profile; every
    // other queue, lossless or not, tail-drops or pauses. pfcswitch's own default marks
    // lossless queues, so the switch-wide level is turned off here.
    let off = WredSettings { ecn: Some(EcnMode::EcnNone), wred_green_enable: Some(false), ..Default::default() };
    config.wred.priority = Priority::all().map(|q| (q, off.clone())).collect();
    let entries: Vec<(String, Map<String, Value>)> = doc
        .table("QUEUE")
        .map(|t| t.iter().filter_map(|(k, v)| Some((k.clone(), v.as_object()?.clone()))).collect())
        .unwrap_or_default();
    for (i, p) in ports.iter().enumerate() {
        let mut weights: [Option<u32>; PRIORITIES] = [None; PRIORITIES];
        for (key, entry) in &entries {
            let Some(range) = key.strip_prefix(&format!("{}|", p.sonic)) else {
                if key.matches('|').count() > 1 {
                    doc.note(
                        "QUEUE",
                        key,
                        NoteKind::NotHonoured,
                        "a multi-ASIC key (host|asic|port|queue): only PORT|QUEUE keys are read",
                    );
                }
                continue;
            };
            for q in classes("QUEUE", key, range)? {
                if let Some(s) = field(entry, "scheduler") {
                    let name = reference(&s).to_string();
                    let sched = doc.named("SCHEDULER", &name, &format!("QUEUE|{key}"))?.clone();
                    let kind = field(&sched, "type").map(|t| t.to_ascii_uppercase()).unwrap_or_else(|| "DWRR".into());
                    weights[q] = Some(match kind.as_str() {
                        "STRICT" => 0,
                        "DWRR" | "WRR" => {
                            let w = field(&sched, "weight")
                                .ok_or_else(|| invalid("SCHEDULER", &name, "a DWRR scheduler with no weight"))?;
                            let w: u32 = number("SCHEDULER", &name, "weight", &w)?;
                            if !(1..=100).contains(&w) {
                                return Err(invalid("SCHEDULER", format!("{name}.weight"), "1 to 100"));
                            }
                            w
                        }
                        other => {
                            return Err(invalid(
                                "SCHEDULER",
                                format!("{name}.type"),
                                format!("`{other}`: DWRR, WRR or STRICT"),
                            ))
                        }
                    });
                    for f in sched.keys().filter(|f| !["type", "weight"].contains(&f.as_str())) {
                        doc.note(
                            "SCHEDULER",
                            &format!("{name}.{f}"),
                            NoteKind::NotHonoured,
                            "shaping and meters per queue: pfcswitch shapes the port only",
                        );
                    }
                }
                if let Some(w) = field(entry, "wred_profile") {
                    let name = reference(&w).to_string();
                    let settings = wred(doc, &name, key)?;
                    config.ports[i].wred.priority.insert(q, settings);
                }
            }
        }
        if weights.iter().any(|w| w.is_some_and(|w| w > 0)) {
            // A queue no scheduler names takes the lowest weight given: it is served, never first.
            let least = weights.iter().flatten().filter(|&&w| w > 0).min().copied().unwrap_or(1);
            config.ports[i].scheduler = Scheduler::Drr { weights: weights.map(|w| w.unwrap_or(least)) };
        }
    }
    Ok(())
}

/// A `WRED_PROFILE`'s green settings.
fn wred(doc: &mut Doc, name: &str, by: &str) -> Result<WredSettings, SonicError> {
    let e = doc.named("WRED_PROFILE", name, &format!("QUEUE|{by}"))?.clone();
    let num = |f: &str| -> Result<Option<u64>, SonicError> {
        field(&e, f).map(|v| number::<u64>("WRED_PROFILE", name, f, &v)).transpose()
    };
    let ecn = match field(&e, "ecn").as_deref() {
        None => None,
        Some("ecn_all") | Some("ecn_green") => Some(EcnMode::EcnAll),
        Some("ecn_none") => Some(EcnMode::EcnNone),
        Some(other) => {
            doc.note(
                "WRED_PROFILE",
                &format!("{name}.ecn"),
                NoteKind::NotHonoured,
                format!("`{other}`: frames are green in pfcswitch; marked as ecn_all"),
            );
            Some(EcnMode::EcnAll)
        }
    };
    if e.keys().any(|k| {
        k.starts_with("yellow_") || k.starts_with("red_") || k.starts_with("wred_yellow") || k.starts_with("wred_red")
    }) {
        doc.note(
            "WRED_PROFILE",
            &format!("{name}.yellow/red"),
            NoteKind::NotHonoured,
            "pfcswitch colours every frame green: only the green settings apply",
        );
    }
    let probability = num("green_drop_probability")?;
    if probability.is_some_and(|p| p > 100) {
        return Err(invalid("WRED_PROFILE", format!("{name}.green_drop_probability"), "a percentage, 0..100"));
    }
    Ok(WredSettings {
        ecn,
        wred_green_enable: field(&e, "wred_green_enable").map(|v| v == "true"),
        green_min_threshold: num("green_min_threshold")?,
        green_max_threshold: num("green_max_threshold")?,
        green_drop_probability: probability.map(|p| p as u32),
    })
}

/// The tables read above; any other is said once.
const READ: &[&str] = &[
    "PORT",
    "CABLE_LENGTH",
    "PORT_QOS_MAP",
    "DSCP_TO_TC_MAP",
    "TC_TO_PRIORITY_GROUP_MAP",
    "TC_TO_QUEUE_MAP",
    "MAP_PFC_PRIORITY_TO_QUEUE",
    "BUFFER_POOL",
    "BUFFER_PROFILE",
    "BUFFER_PG",
    "BUFFER_QUEUE",
    "QUEUE",
    "SCHEDULER",
    "WRED_PROFILE",
    "PFC_WD",
    "DEFAULT_LOSSLESS_BUFFER_PARAMETER",
    "DEVICE_METADATA",
];

fn unread_tables(doc: &mut Doc) {
    let unread: Vec<String> = doc.tables.keys().filter(|t| !READ.contains(&t.as_str())).cloned().collect();
    for t in unread {
        doc.note(&t, "", NoteKind::NotHonoured, "not a table of the lossless data path: not read");
    }
}

#[cfg(test)]
mod tests;
