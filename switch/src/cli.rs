//! The arguments of `pfcswitch run`, in the library so that the lab tools start switches
//! from the same struct the binary parses (see `pfctools`' `argv`).

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use crate::core::speed::Speed;

/// `pfcswitch run`'s arguments.
#[derive(Args, Clone, Debug, Default, Serialize)]
pub struct RunArgs {
    /// TOML configuration file (ports, buffers, PFC...). Flags below override it.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// A SONiC CONFIG_DB document (`config_db.json`, `sonic-cfggen`'s output) to run as
    /// written, its ports mapped to interfaces with --port (see `check-config
    /// --sonic-config` for the translation).
    #[arg(long, value_name = "FILE", conflicts_with = "config")]
    pub sonic_config: Option<PathBuf>,
    /// With --sonic-config: a SONiC port and the interface it becomes, SONIC=IFACE
    /// (e.g. Ethernet0=p1); repeat for each port, in the order they are numbered.
    #[arg(long = "port", value_name = "SONIC=IFACE", requires = "sonic_config")]
    pub sonic_ports: Vec<String>,
    /// An interface to switch between; repeat for each port.
    #[arg(long = "iface", short = 'i')]
    pub ifaces: Vec<String>,
    /// Switch name: used for the control socket and in logs.
    #[arg(long)]
    pub name: Option<String>,
    /// Line rate of every port given with --iface (e.g. 1G, 10G).
    #[arg(long)]
    pub speed: Option<Speed>,
    /// Apply this Tagger table (one switch's file as `tagger compute` writes it; its port
    /// N is the N-th interface). Same as `[tagger] table` in the config.
    #[arg(long)]
    pub tagger_table: Option<PathBuf>,
    /// Replace an XDP program already attached to an interface, and accept a Tagger
    /// table written for another switch.
    #[arg(long)]
    pub force: bool,
    /// Control socket path (default /run/pfcswitch/NAME.sock). A stale socket there is
    /// replaced; any other file is left alone and the switch does not start.
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Let this group's members use the control socket too (mode 0660; default 0600,
    /// the owner and root only).
    #[arg(long)]
    pub socket_group: Option<String>,
    /// Bind at most N rx queues of each interface (default: all it has). Frames the NIC
    /// steers to the other queues are dropped; `ethtool -L IF combined N` avoids that.
    #[arg(long, value_name = "N")]
    pub queues: Option<u32>,
    /// Attach the classifier in this XDP mode only (default: native where the driver
    /// takes it, else generic).
    #[arg(long, value_enum)]
    pub xdp_mode: Option<XdpModeArg>,
    /// Bind the sockets in this mode only (default: zero-copy where the driver offers
    /// it, else copy).
    #[arg(long, value_enum)]
    pub bind_mode: Option<BindModeArg>,
    /// Serve the counters for Prometheus at http://ADDR:PORT/metrics (e.g. 127.0.0.1:9469).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// `--xdp-mode`.
#[derive(Clone, Copy, Debug, clap::ValueEnum, Serialize)]
pub enum XdpModeArg {
    Native,
    Generic,
}

/// `--bind-mode`.
#[derive(Clone, Copy, Debug, clap::ValueEnum, Serialize)]
pub enum BindModeArg {
    ZeroCopy,
    Copy,
}
