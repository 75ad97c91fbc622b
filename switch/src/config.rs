//! What `pfcswitch run` reads from its config file: the engine's [`Config`] and the AF_XDP
//! shell's own `[dataplane]` table (rings, frames, XDP and bind modes, batching, busy
//! polling), which the engine has no use for and so does not hold.
//!
//! One file holds both, as it always has: [`RunConfig`] reads it in one pass, handing the
//! `[dataplane]` table to [`DataplaneConfig`] and everything else to the engine's
//! `Config`, each refusing keys it does not know, with the file's line in the message.

use std::fmt;
use std::ops::{Deref, DerefMut};

use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

pub use afxdp::modes::{ArrivalStamp, BindMode, XdpMode};

use crate::core::config::{Config, ConfigError};
use crate::core::pool::{PoolSize, DEFAULT_RING_SIZE};

/// The `[dataplane]` table: what the AF_XDP shell reads (rings, frames, XDP and bind modes,
/// batching, busy polling).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DataplaneConfig {
    /// UMEM frames shared by all ports; bounds how many frames the switch can hold.
    /// Absent: a fill ring's worth per rx queue, a tx ring's worth per port, and 16384
    /// for queued frames (see [`DataplaneConfig::pool`]).
    pub umem_frames: Option<u32>,
    /// UMEM frame size: 2048 or 4096; chosen from the interfaces' MTU when absent.
    pub frame_size: Option<u32>,
    /// Descriptors per AF_XDP ring. What arrives while the loop is behind (off its CPU,
    /// or slower than the traffic for a while on a CPU it shares) waits on the rx ring:
    /// 8192 frames last 27 ms at 300 k frames/s.
    pub ring_size: u32,
    /// Frames handled per ring per loop turn.
    pub batch: usize,
    /// How long the loop keeps polling without sleeping after the last work it did.
    /// 200 µs by default: an idle CPU between bursts. A second (1000000) keeps the CPU
    /// while frames flow, as Open vSwitch's PMD thread does: a loop that slept between
    /// bursts gave its CPU away and came back to share it (64-byte frames at 184 k/s:
    /// p99 242-659 µs in five of seven runs with 200 µs, 46-77 µs in seven with a
    /// second, OVS 45-56 beside them; docs/bench). Not the default: beside other busy
    /// work on two cores the polling loop takes a core from it (two clean-clone suites
    /// beside `yes` failed a PFC test whose sender starved, where eight had passed).
    pub busy_poll_us: u64,
    /// Without a socket on a queue, drop frames instead of passing them to the kernel.
    pub drop_without_socket: bool,
    /// Pin the dataplane thread to this CPU.
    pub cpu: Option<usize>,
    /// While the switch runs, keep idle CPUs from sleeping deeper than this many µs
    /// (`/dev/cpu_dma_latency`; 0: they poll). An idle loop sleeps, and on a VM whose
    /// idle vCPUs halt, each frame that finds it asleep waits for the host to run the
    /// vCPU again (a ping through an idle switch: 126 µs p50, 32 µs with 0). The price:
    /// idle CPUs stay busy, and on a VM take time from their busy siblings. The kernel
    /// reads the request only through a cpuidle driver: where it has none
    /// (`/sys/devices/system/cpu/cpuidle/current_driver`), idle CPUs halt all the same,
    /// and the switch says so at start. Absent: the machine's own policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_latency_us: Option<u32>,
    /// Bind at most this many rx queues of each port (queues 0..N-1); every queue the
    /// interface has when absent. Frames the NIC steers to a queue left out are dropped
    /// by the classifier, never passed around the switch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queues: Option<u32>,
    /// How the classifier is attached: native (in the driver) or generic (after the
    /// kernel built an skb). Absent: native where the driver takes it, else generic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp_mode: Option<XdpMode>,
    /// How the AF_XDP sockets use the UMEM: zero-copy (the NIC writes frames into it) or
    /// copy. Absent: zero-copy where the driver offers it, else copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind_mode: Option<BindMode>,
    /// How the classifier tells the loop when a frame arrived: in the frame's metadata
    /// area, in 16 bytes pushed in front of the frame, or not at all (the loop's clock as
    /// it takes the frame off its rx ring). Absent: the first of these this kernel allows
    /// (`pfcswitch doctor` says which); a path set here that the kernel refuses is an
    /// error at start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival_stamp: Option<ArrivalStamp>,
    /// Load the classifier frags-aware (kernel 5.18 and later), which frames over one
    /// UMEM frame (jumbo MTUs) need. Absent: where the kernel allows it; `false` forces
    /// it off, `true` makes a kernel that refuses it an error at start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp_frags: Option<bool>,
}

impl Default for DataplaneConfig {
    fn default() -> DataplaneConfig {
        DataplaneConfig {
            umem_frames: None,
            frame_size: None,
            ring_size: DEFAULT_RING_SIZE,
            batch: 64,
            busy_poll_us: 200,
            drop_without_socket: false,
            cpu: None,
            wake_latency_us: None,
            queues: None,
            xdp_mode: None,
            bind_mode: None,
            arrival_stamp: None,
            xdp_frags: None,
        }
    }
}

impl DataplaneConfig {
    /// Every optional part of the AF_XDP path forced to its fallback (generic XDP, copy
    /// mode, no arrival stamp, not frags-aware): what a kernel or driver that offers none
    /// of them gets. The suite runs its core PFC and pause tests once more with this, so
    /// that the fallbacks are tested on a kernel that offers the fast paths.
    pub fn every_optional_part_off(mut self) -> DataplaneConfig {
        self.xdp_mode = Some(XdpMode::Generic);
        self.bind_mode = Some(BindMode::Copy);
        self.arrival_stamp = Some(ArrivalStamp::RxClock);
        self.xdp_frags = Some(false);
        self
    }

    /// The frame pool for `ports` ports with `rx_sockets` sockets in all (one per bound rx
    /// queue): `umem_frames`, or a fill ring's worth per socket, a tx ring's worth per port
    /// (ports send on their first queue), and [`crate::core::pool::DEFAULT_HELD_FRAMES`] for the frames the
    /// switch holds.
    pub fn pool(&self, ports: usize, rx_sockets: usize) -> PoolSize {
        PoolSize::for_rings(ports, rx_sockets, self.ring_size, self.umem_frames)
    }

    /// Checks every field; the error names the one at fault.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |field: &str, problem: &str| Err(ConfigError::invalid(format!("dataplane.{field}"), problem));
        if self.umem_frames.is_some_and(|f| !(256..=1 << 20).contains(&f)) {
            return invalid("umem_frames", "must be 256..1048576");
        }
        if self.frame_size.is_some_and(|fs| fs != 2048 && fs != 4096) {
            return invalid("frame_size", "must be 2048 or 4096");
        }
        if !self.ring_size.is_power_of_two() || !(64..=16384).contains(&self.ring_size) {
            return invalid("ring_size", "must be a power of two from 64 to 16384");
        }
        if !(1..=256).contains(&self.batch) {
            return invalid("batch", "must be 1..256");
        }
        if self.queues.is_some_and(|q| !(1..=1024).contains(&q)) {
            return invalid("queues", "must be 1..1024");
        }
        if self.busy_poll_us > 1_000_000 {
            return invalid("busy_poll_us", "at most 1000000");
        }
        if self.wake_latency_us.is_some_and(|us| us > 1_000_000) {
            return invalid("wake_latency_us", "at most 1000000");
        }
        Ok(())
    }
}

/// A `pfcswitch run` config file: the engine's [`Config`] (reached through `Deref`, so
/// `run.ports` is the engine's ports) and the shell's `[dataplane]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// Everything but `[dataplane]`.
    pub switch: Config,
    /// The `[dataplane]` table.
    pub dataplane: DataplaneConfig,
}

impl RunConfig {
    /// A switch on these interfaces with every other setting at its default.
    pub fn for_interfaces<S: AsRef<str>>(ifaces: &[S]) -> RunConfig {
        RunConfig { switch: Config::for_interfaces(ifaces), dataplane: DataplaneConfig::default() }
    }

    /// Parses and validates a config file.
    pub fn from_toml(text: &str) -> Result<RunConfig, ConfigError> {
        let run: RunConfig = toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        run.validate()?;
        Ok(run)
    }

    /// Checks the engine's part and the `[dataplane]` table.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.switch.validate()?;
        self.dataplane.validate()
    }

    /// The config file as TOML (what `check-config` prints), with `[dataplane]` where it
    /// has always stood: after `[fdb]`, before `[dcfit]`.
    pub fn to_toml(&self) -> String {
        #[derive(Serialize)]
        struct Table<'a> {
            dataplane: &'a DataplaneConfig,
        }
        let engine = self.switch.to_toml();
        let table = toml::to_string_pretty(&Table { dataplane: &self.dataplane }).expect("the table serializes");
        match engine.find("\n[dcfit]\n") {
            Some(at) => format!("{}{table}\n{}", &engine[..=at], &engine[at + 1..]),
            None => format!("{engine}\n{table}"),
        }
    }
}

impl Deref for RunConfig {
    type Target = Config;
    fn deref(&self) -> &Config {
        &self.switch
    }
}

impl DerefMut for RunConfig {
    fn deref_mut(&mut self) -> &mut Config {
        &mut self.switch
    }
}

/// The table's key.
const DATAPLANE: &str = "dataplane";

impl<'de> Deserialize<'de> for RunConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RunConfig, D::Error> {
        d.deserialize_map(FileVisitor)
    }
}

struct FileVisitor;

impl<'de> Visitor<'de> for FileVisitor {
    type Value = RunConfig;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a pfcswitch config file")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RunConfig, A::Error> {
        let mut dataplane = None;
        let switch = Config::deserialize(WithoutDataplane { map, dataplane: &mut dataplane })?;
        Ok(RunConfig { switch, dataplane: dataplane.unwrap_or_default() })
    }
}

/// The file's top-level table as the engine's `Config` sees it: `[dataplane]` is taken
/// out on the way into `dataplane`, every other key goes through untouched (the engine
/// refuses the ones it does not know, as before).
struct WithoutDataplane<'a, A> {
    map: A,
    dataplane: &'a mut Option<DataplaneConfig>,
}

impl<'de, A: MapAccess<'de>> Deserializer<'de> for WithoutDataplane<'_, A> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, A::Error> {
        visitor.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for WithoutDataplane<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        let mut seed = Some(seed);
        loop {
            let key = self.map.next_key_seed(KeyOrDataplane(&mut seed))?;
            match key {
                None => return Ok(None),
                Some(Some(k)) => return Ok(Some(k)),
                Some(None) => {
                    if self.dataplane.is_some() {
                        return Err(de::Error::duplicate_field(DATAPLANE));
                    }
                    *self.dataplane = Some(self.map.next_value()?);
                }
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// Reads one key: `None` for `dataplane`, else what `seed` makes of it (inside the
/// file's own key, so an unknown one is reported at its line).
struct KeyOrDataplane<'s, K>(&'s mut Option<K>);

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for KeyOrDataplane<'_, K> {
    type Value = Option<K::Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let key = String::deserialize(d)?;
        if key == DATAPLANE {
            return Ok(None);
        }
        let seed = self.0.take().expect("a key is read once");
        seed.deserialize(key.into_deserializer()).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::pool::DEFAULT_HELD_FRAMES;

    const PORTS: &str = "[[port]]\niface = \"a\"\n[[port]]\niface = \"b\"\n";

    #[test]
    fn one_file_gives_the_engine_its_tables_and_the_shell_its_dataplane() {
        let text = format!("name = \"sw1\"\n[dataplane]\nring_size = 1024\nbatch = 8\n[fdb]\naging_s = 60\n{PORTS}");
        let run = RunConfig::from_toml(&text).unwrap();
        assert_eq!((run.name.as_str(), run.fdb.aging_s, run.ports.len()), ("sw1", 60, 2));
        assert_eq!((run.dataplane.ring_size, run.dataplane.batch), (1024, 8));
        let printed = run.to_toml();
        assert_eq!(RunConfig::from_toml(&printed).unwrap(), run, "what check-config prints reads back");
        let (fdb, dataplane, dcfit) = (printed.find("[fdb]"), printed.find("[dataplane]"), printed.find("[dcfit]"));
        assert!(fdb < dataplane && dataplane < dcfit, "{printed}");
        let without = RunConfig::from_toml(PORTS).unwrap();
        assert_eq!(without.dataplane, DataplaneConfig::default());
    }

    #[test]
    fn unknown_keys_are_refused_by_name_and_line_in_either_part() {
        let err = RunConfig::from_toml(&format!("{PORTS}[dataplane]\nring_sise = 1024\n")).unwrap_err().to_string();
        assert!(err.contains("ring_sise") && err.contains("line 6"), "{err}");
        let err = RunConfig::from_toml(&format!("nmae = \"x\"\n{PORTS}")).unwrap_err().to_string();
        assert!(err.contains("nmae") && err.contains("line 1"), "{err}");
        let err = RunConfig::from_toml(&format!("[dataplane]\n[dataplane]\n{PORTS}")).unwrap_err().to_string();
        assert!(err.contains("dataplane"), "{err}");
    }

    #[test]
    fn dataplane_values_the_shell_cannot_use_are_refused_by_field() {
        for (table, field) in [
            ("ring_size = 1000", "dataplane.ring_size"),
            ("batch = 0", "dataplane.batch"),
            ("umem_frames = 10", "dataplane.umem_frames"),
            ("frame_size = 3000", "dataplane.frame_size"),
            ("queues = 0", "dataplane.queues"),
            ("busy_poll_us = 2000000", "dataplane.busy_poll_us"),
            ("wake_latency_us = 2000000", "dataplane.wake_latency_us"),
        ] {
            let err = RunConfig::from_toml(&format!("[dataplane]\n{table}\n{PORTS}")).unwrap_err().to_string();
            assert!(err.starts_with(field), "{table}: {err}");
        }
    }

    #[test]
    fn the_pool_is_the_rings_and_the_held_frames_unless_umem_frames_is_set() {
        let mut d = DataplaneConfig::default();
        assert_eq!(
            d.pool(2, 4),
            PoolSize { frames: 6 * DEFAULT_RING_SIZE + DEFAULT_HELD_FRAMES, in_rings: 6 * DEFAULT_RING_SIZE }
        );
        d.umem_frames = Some(100_000);
        assert_eq!(d.pool(2, 4).frames, 100_000);
    }
}
