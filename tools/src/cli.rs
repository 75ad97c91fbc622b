//! Command-line arguments shared by the `pfctools` subcommands.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use pfcswitch::core::mac::MacAddr;
use pfcswitch::core::speed::{wire_bytes, Speed};
use pfcswitch::core::Priority;
use serde::Serialize;

use crate::traffic::flow::{FlowSpec, FCS_LEN};
use crate::traffic::gen::{GenFlow, GenOptions};
use crate::traffic::sink::{CnpOptions, SinkOptions};

/// `text` as a finite number that `ok` accepts.
fn finite(text: &str, ok: impl Fn(f64) -> bool) -> Option<f64> {
    text.trim().parse::<f64>().ok().filter(|&v| v.is_finite() && ok(v))
}

/// Parses "250000", "250k", "1.5M" (frames per second).
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'm' | 'M')) => (&t[..i], 1e6),
        _ => (t, 1.0),
    };
    finite(num, |v| v > 0.0)
        .map(|v| v * mult)
        .ok_or_else(|| format!("invalid rate {s:?}: frames per second, e.g. 100000, 250k, 1.2M"))
}

/// A finite number of at least zero (a delay in µs, a length in metres).
pub fn parse_non_negative(s: &str) -> Result<f64, String> {
    finite(s, |v| v >= 0.0).ok_or_else(|| format!("invalid value {s:?}: a finite number, 0 or more"))
}

/// A finite number above zero (an interval, a duration, a load).
pub fn parse_positive(s: &str) -> Result<f64, String> {
    finite(s, |v| v > 0.0).ok_or_else(|| format!("invalid value {s:?}: a finite number above 0"))
}

/// A share of line rate in percent: above 0, at most 100.
pub fn parse_percent(s: &str) -> Result<f64, String> {
    finite(s.trim().trim_end_matches('%'), |v| v > 0.0 && v <= 100.0)
        .ok_or_else(|| format!("invalid percentage {s:?}: above 0, at most 100"))
}

/// A share of line rate in percent that may be zero (no traffic of that kind).
pub fn parse_percent_or_zero(s: &str) -> Result<f64, String> {
    finite(s.trim().trim_end_matches('%'), |v| (0.0..=100.0).contains(&v))
        .ok_or_else(|| format!("invalid percentage {s:?}: 0 to 100"))
}

/// `PRIO=BYTES`, e.g. `3=49152`: one priority's size.
pub fn parse_prio_bytes(s: &str) -> Result<(u8, u64), String> {
    let bad = || format!("invalid {s:?}: PRIORITY=BYTES, e.g. 3=49152");
    let (p, b) = s.split_once('=').ok_or_else(bad)?;
    let prio: u8 = p.trim().parse().ok().filter(|&p| p < 8).ok_or_else(bad)?;
    Ok((prio, b.trim().parse().map_err(|_| bad())?))
}

pub fn parse_secs(s: &str) -> Result<Duration, String> {
    finite(s.trim().trim_end_matches('s'), |v| v >= 0.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("invalid duration {s:?}: seconds, e.g. 2 or 0.5"))
}

#[derive(Args, Clone, Debug, Serialize)]
pub struct GenArgs {
    /// Interface to send on.
    #[arg(long, short)]
    pub iface: String,
    /// Destination MAC of the test frames.
    #[arg(long)]
    pub dst_mac: MacAddr,
    /// Source MAC (default: the interface's).
    #[arg(long)]
    pub src_mac: Option<MacAddr>,
    #[arg(long, default_value = "10.0.0.1")]
    pub src_ip: Ipv4Addr,
    #[arg(long, default_value = "10.0.0.2")]
    pub dst_ip: Ipv4Addr,
    /// Frames per flow.
    #[arg(long, short)]
    pub count: Option<u64>,
    /// Seconds to send for.
    #[arg(long, short, value_parser = parse_secs)]
    #[serde(serialize_with = "crate::argv::opt_secs")]
    pub duration: Option<Duration>,
    /// Seconds to wait (receiving) before sending, so that the other hosts of a test are
    /// ready to receive.
    #[arg(long, value_parser = parse_secs, default_value = "0")]
    #[serde(serialize_with = "crate::argv::secs")]
    pub start_delay: Duration,
    /// Seconds to go on receiving after the last frame is sent (frames from other hosts
    /// still on their way are then counted).
    #[arg(long, value_parser = parse_secs, default_value = "0")]
    #[serde(serialize_with = "crate::argv::secs")]
    pub linger: Duration,
    /// Frame size on the wire, FCS included (64..9216).
    #[arg(long, short, default_value_t = 64)]
    pub size: usize,
    /// Number of flows (UDP source ports); DSCP values are assigned to them in turn.
    #[arg(long, default_value_t = 1)]
    pub flows: u16,
    /// Id of the first flow.
    #[arg(long, default_value_t = 0)]
    pub flow_base: u16,
    /// DSCP of the frames; repeat to give flows different DSCPs.
    #[arg(long)]
    pub dscp: Vec<u8>,
    /// Stamp the `initial_tag` of this Tagger table (a switch's file from `tagger
    /// compute`) as the DSCP, and send on that tag's priority.
    #[arg(long, conflicts_with_all = ["dscp", "initial_tag"])]
    pub tagger_table: Option<PathBuf>,
    /// Stamp this Tagger tag as the DSCP (the priority: --prio, else the tag itself).
    #[arg(long, conflicts_with = "dscp")]
    pub initial_tag: Option<u8>,
    /// The ECN field of the frames: not-ect (0), ect1 (1), ect0 (2) or ce (3); ect0 with
    /// --roce, else not-ect.
    #[arg(long, value_enum)]
    pub ecn: Option<Ecn>,
    /// Send RoCEv2 frames: UDP to 4791, an InfiniBand BTH (RC Send Only, the flow's
    /// queue pair, a PSN that counts the flow's frames) before the test stamp, and the
    /// invariant CRC at the end; ECT(0) unless --ecn says otherwise.
    #[arg(long)]
    pub roce: bool,
    /// Tag frames with this VLAN id.
    #[arg(long)]
    pub vlan: Option<u16>,
    /// PCP of the VLAN tag.
    #[arg(long, default_value_t = Priority::new(0))]
    pub pcp: Priority,
    /// Priority the sender considers the frames to be on (what PFC pauses); from the
    /// PCP when tagged, else DSCP 3→3, 4→4, others 0.
    #[arg(long)]
    pub prio: Option<Priority>,
    /// Total frames per second (e.g. 100k); as fast as possible when absent.
    #[arg(long, value_parser = parse_rate, conflicts_with = "load")]
    pub rate: Option<f64>,
    /// Offered load in percent of --speed at this frame size (all flows together).
    #[arg(long, value_parser = parse_positive)]
    pub load: Option<f64>,
    /// Load of each flow in percent of --speed, one value per flow (instead of --load).
    #[arg(long, value_delimiter = ',', value_parser = parse_positive, conflicts_with_all = ["rate", "load"])]
    pub flow_load: Vec<f64>,
    /// Poll instead of sleeping between frames (obeys pauses within microseconds; uses a CPU).
    #[arg(long)]
    pub spin: bool,
    /// The link's speed: converts pause quanta to time, and --load to a rate.
    #[arg(long, default_value = "10G")]
    pub speed: Speed,
    /// PFC response delay: keep sending this many quanta after a pause arrives.
    #[arg(long, default_value_t = 0)]
    pub pause_delay_quanta: u32,
    /// Count received pauses but keep sending.
    #[arg(long)]
    pub ignore_pfc: bool,
    /// Do not receive at all (no XDP program on the interface; pauses go unseen).
    #[arg(long)]
    pub tx_only: bool,
    #[arg(long, default_value_t = 16384)]
    pub umem_frames: u32,
    /// Replace an XDP program already on the interface.
    #[arg(long)]
    pub force: bool,
    /// How the receive program stamps arrivals: metadata, in-frame or rx-clock (the
    /// best this kernel allows when absent, as the switch chooses).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival_stamp: Option<pfcswitch::config::ArrivalStamp>,
    /// Write the MAC control frames received to this pcap file.
    #[arg(long)]
    pub capture: Option<PathBuf>,
    /// React to RoCEv2 CNPs as DCQCN's reaction point, each flow on its own (its paced
    /// rate, or the port's, is its line rate), with the NIC's default parameters.
    #[arg(long)]
    pub dcqcn: bool,
    /// DCQCN's parameters from this TOML file (the NIC's names: rpg_time_reset = 55, ...);
    /// implies --dcqcn.
    #[arg(long)]
    pub dcqcn_params: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// An IP header's ECN field (RFC 3168 §5), as `--ecn` names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Ecn {
    /// Not ECN-capable.
    #[default]
    NotEct = 0,
    Ect1 = 1,
    Ect0 = 2,
    /// Congestion Experienced already.
    Ce = 3,
}

/// The priority a Tagger tag's frames are sent on: the table's, else the tag itself,
/// which must then be one.
fn tag_priority(p: u8) -> Result<Priority> {
    Priority::checked(p).with_context(|| format!("tag {p} names no priority 0..7: give --prio"))
}

/// The priority a sender would put a DSCP on with the switch's default map.
pub fn default_priority(dscp: u8) -> Priority {
    match dscp {
        3 | 4 => Priority::new(dscp),
        _ => Priority::new(0),
    }
}

impl GenArgs {
    pub fn options(&self, iface_mac: Option<MacAddr>) -> Result<GenOptions> {
        if self.flows == 0 {
            bail!("--flows must be at least 1");
        }
        let (dscps, tag_prio) = match (&self.tagger_table, self.initial_tag) {
            (Some(path), _) => {
                let t = tagger::system::read_table(path)?;
                (
                    vec![t.initial_tag],
                    t.priority_of(t.initial_tag).or(Some(t.initial_tag)).map(tag_priority).transpose()?,
                )
            }
            (None, Some(tag)) => (vec![tag], Some(tag_priority(tag)?)),
            (None, None) if self.dscp.is_empty() => (vec![0], None),
            (None, None) => (self.dscp.clone(), None),
        };
        if let Some(&d) = dscps.iter().find(|&&d| d > 63) {
            bail!("DSCP (or tag) {d} does not fit in six bits (0..63)");
        }
        let src_mac = self.src_mac.or(iface_mac).unwrap_or(MacAddr::local(1));
        if !self.flow_load.is_empty() && self.flow_load.len() != usize::from(self.flows) {
            bail!("--flow-load needs one value per flow ({} flows)", self.flows);
        }
        let line = line_rate_pps(self.speed, self.size);
        let total_rate = match (self.rate, self.load) {
            (Some(r), _) => Some(r),
            (None, Some(pct)) => Some(line * pct / 100.0),
            (None, None) => None,
        };
        let flows = (0..self.flows)
            .map(|k| {
                let dscp = dscps[usize::from(k) % dscps.len()];
                let vlan = self.vlan.map(|v| (v, self.pcp.get()));
                let prio =
                    self.prio.or(tag_prio).unwrap_or(if vlan.is_some() { self.pcp } else { default_priority(dscp) });
                let spec = FlowSpec {
                    id: self.flow_base + k,
                    src_mac,
                    dst_mac: self.dst_mac,
                    vlan,
                    dscp,
                    ecn: self.ecn.unwrap_or(if self.roce { Ecn::Ect0 } else { Ecn::NotEct }) as u8,
                    roce: self.roce,
                    src_ip: self.src_ip,
                    dst_ip: self.dst_ip,
                    wire_size: self.size,
                };
                let rate = match self.flow_load.get(usize::from(k)) {
                    Some(pct) => Some(line * pct / 100.0),
                    None => total_rate.map(|r| r / f64::from(self.flows)),
                };
                GenFlow { spec, prio, rate }
            })
            .collect();
        Ok(GenOptions {
            iface: self.iface.clone(),
            flows,
            count: self.count,
            duration: self.duration,
            linger: self.linger,
            start_delay: self.start_delay,
            honour_pfc: !self.ignore_pfc,
            pause_delay_quanta: self.pause_delay_quanta,
            speed: self.speed,
            tx_only: self.tx_only,
            spin: self.spin,
            umem_frames: self.umem_frames,
            force: self.force,
            arrival_stamp: self.arrival_stamp,
            capture: self.capture.clone(),
            dcqcn: self.dcqcn_params()?,
        })
    }
}

impl GenArgs {
    /// DCQCN's parameters, when the flows react to CNPs.
    fn dcqcn_params(&self) -> Result<Option<roce::DcqcnParams>> {
        let params = match &self.dcqcn_params {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                toml::from_str(&text).with_context(|| format!("{}", path.display()))?
            }
            None if self.dcqcn => roce::DcqcnParams::default(),
            None => return Ok(None),
        };
        params.check().map_err(anyhow::Error::msg)?;
        Ok(Some(params))
    }
}

/// Frames per second that fill a link of `speed` with frames of `wire_size` (FCS included).
pub fn line_rate_pps(speed: Speed, wire_size: usize) -> f64 {
    speed.bps() as f64 / 8.0 / wire_bytes(wire_size - FCS_LEN) as f64
}

#[derive(Args, Clone, Debug, Serialize)]
pub struct SinkArgs {
    /// Interface to receive on.
    #[arg(long, short)]
    pub iface: String,
    /// Seconds to receive for.
    #[arg(long, short, value_parser = parse_secs)]
    #[serde(serialize_with = "crate::argv::opt_secs")]
    pub duration: Option<Duration>,
    /// Stop when no test frame arrived for this many seconds (after the first).
    #[arg(long, value_parser = parse_secs, default_value = "2")]
    #[serde(serialize_with = "crate::argv::secs")]
    pub idle: Duration,
    /// Stop once this many distinct test frames arrived (duplicates not counted).
    #[arg(long)]
    pub expect: Option<u64>,
    /// Frames each flow sent: losses after the last received frame count too.
    #[arg(long)]
    pub expect_per_flow: Option<u64>,
    /// Write the MAC control frames received to this pcap file.
    #[arg(long)]
    pub capture: Option<PathBuf>,
    #[arg(long, default_value_t = 16384)]
    pub umem_frames: u32,
    #[arg(long)]
    pub force: bool,
    /// How the receive program stamps arrivals: metadata, in-frame or rx-clock (the
    /// best this kernel allows when absent, as the switch chooses).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival_stamp: Option<pfcswitch::config::ArrivalStamp>,
    /// Act as DCQCN's notification point: answer CE-marked test frames with RoCEv2 CNPs,
    /// at most one per flow per --min-time-between-cnps.
    #[arg(long)]
    pub cnp: bool,
    /// The shortest time between two CNPs of a flow, µs.
    #[arg(long, default_value_t = 50)]
    pub min_time_between_cnps: u64,
    /// The DSCP of the CNPs.
    #[arg(long, default_value_t = roce::wire::DEFAULT_CNP_DSCP, value_parser = clap::value_parser!(u8).range(0..64))]
    pub cnp_dscp: u8,
    #[arg(long)]
    pub json: bool,
}

impl SinkArgs {
    pub fn options(&self) -> SinkOptions {
        SinkOptions {
            iface: self.iface.clone(),
            duration: self.duration,
            idle_timeout: Some(self.idle),
            expect_total: self.expect,
            expect_per_flow: self.expect_per_flow,
            capture: self.capture.clone(),
            umem_frames: self.umem_frames,
            force: self.force,
            arrival_stamp: self.arrival_stamp,
            cnp: self.cnp.then(|| CnpOptions {
                params: roce::DcqcnParams { min_time_between_cnps: self.min_time_between_cnps, ..Default::default() },
                dscp: self.cnp_dscp,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_durations_parse() {
        assert_eq!(parse_rate("250k").unwrap(), 250_000.0);
        assert_eq!(parse_rate("1.5M").unwrap(), 1_500_000.0);
        assert!(parse_rate("fast").is_err() && parse_rate("0").is_err());
        assert_eq!(parse_secs("0.5").unwrap(), Duration::from_millis(500));
        assert!(parse_secs("-1").is_err());
        // 64-byte frames at 10G: 14.88 Mpps.
        assert!((line_rate_pps(Speed::gbps(10), 64) - 14_880_952.4).abs() < 1.0);
    }

    #[test]
    fn negative_infinite_and_nan_numbers_are_refused_not_panicked_on() {
        for bad in ["-1", "NaN", "nan", "inf", "-inf", "x", ""] {
            assert!(parse_non_negative(bad).is_err(), "{bad}");
            assert!(parse_positive(bad).is_err(), "{bad}");
            assert!(parse_percent(bad).is_err(), "{bad}");
            assert!(parse_secs(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_non_negative("0").unwrap(), 0.0);
        assert!(parse_positive("0").is_err());
        assert_eq!(parse_percent("50%").unwrap(), 50.0);
        assert!(parse_percent("100.5").is_err());
    }
}
