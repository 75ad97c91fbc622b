//! pfcswitch's configuration, apart from the engine that runs it: the switch's TOML
//! ([`config::Config`]), SONiC's CONFIG_DB translated to it ([`config::sonic`]), and the
//! plain types both are written in. The switch, the simulator, the tools and the fuzz
//! targets share it through the engine, which re-exports each module at its old path
//! (`pfcswitch_core::config`, `pfcswitch_core::speed`, ...); a program that only reads or
//! checks configurations needs no more than this crate.

pub mod config;
pub mod headroom;
pub mod mac;
pub mod pool;
pub mod ports;
pub mod priorities;
pub mod speed;
pub mod watchdog;

pub use config::Config;
