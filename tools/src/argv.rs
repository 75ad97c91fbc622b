//! Command lines for the subprocesses the tools drive (`pfctools gen`, `sink`, `storm`,
//! `pause-probe`, `pfcswitch run`), rendered from the very clap structs those commands
//! parse. A flag's name, its short form, its default and its enum spellings live once, in
//! its `#[arg]`; the harness and the benches fill in a struct and [`to_args`] writes the
//! command line, so a renamed flag cannot leave a caller behind (the round-trip tests
//! below parse every struct back from what it rendered).

use anyhow::{anyhow, bail, Context, Result};
use clap::{Arg, ArgAction, Args, Command, FromArgMatches};
use serde::Serialize;
use serde_json::{Map, Value};

/// The arguments (without the subcommand) that make clap give back `value`: one
/// `--long VALUE` per value an argument holds, `--long` alone for a set switch, and
/// nothing for what is absent or equal to the argument's default. Field names are the
/// clap argument ids, as `#[derive(Args)]` makes them; values are written as `serde`
/// writes them (durations as seconds through [`secs`]).
pub fn to_args<T: Args + Serialize>(value: &T) -> Result<Vec<String>> {
    let Value::Object(fields) = serde_json::to_value(value).context("rendering a command line")? else {
        bail!("a command line is rendered from a struct of arguments");
    };
    render(&command::<T>(), &fields)
}

/// `T` as clap parses it from `flags` (the arguments after the subcommand).
pub fn parse<T: Args + FromArgMatches>(flags: &[&str]) -> Result<T> {
    let matches = command::<T>().no_binary_name(true).try_get_matches_from(flags)?;
    Ok(T::from_arg_matches(&matches)?)
}

/// `T` with the arguments in `given` (argument id to value, as [`to_args`] reads them)
/// and clap's defaults for all the others: how a caller builds a struct whose required
/// arguments have no default.
pub fn with_defaults<T: Args + FromArgMatches>(given: Value) -> Result<T> {
    let Value::Object(fields) = given else { bail!("arguments are given as an object of id to value") };
    let cmd = command::<T>();
    if let Some(unknown) = fields.keys().find(|k| !cmd.get_arguments().any(|a| a.get_id() == k.as_str())) {
        bail!("{unknown:?} is not an argument of this command");
    }
    let flags = render(&cmd, &fields)?;
    parse(&flags.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Serialises a duration as the seconds the tools' `parse_secs` reads back.
pub fn secs<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// [`secs`] for an optional duration.
pub fn opt_secs<S: serde::Serializer>(d: &Option<std::time::Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

fn command<T: Args>() -> Command {
    T::augment_args(Command::new("args"))
}

fn render(cmd: &Command, fields: &Map<String, Value>) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut positional = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(value) = fields.get(arg.get_id().as_str()) else { continue };
        let texts = match value {
            Value::Null => continue,
            Value::Bool(set) if matches!(arg.get_action(), ArgAction::SetTrue) => {
                if *set {
                    out.push(flag(arg)?);
                }
                continue;
            }
            Value::Array(items) => items.iter().map(|v| text(arg, v)).collect::<Result<Vec<_>>>()?,
            v => vec![text(arg, v)?],
        };
        if texts.is_empty() || is_default(arg, &texts) {
            continue;
        }
        if arg.is_positional() {
            positional.extend(texts);
            continue;
        }
        let name = flag(arg)?;
        for t in texts {
            out.push(name.clone());
            out.push(t);
        }
    }
    if !positional.is_empty() {
        out.push("--".into());
        out.extend(positional);
    }
    Ok(out)
}

fn flag(arg: &Arg) -> Result<String> {
    match (arg.get_long(), arg.get_short()) {
        (Some(long), _) => Ok(format!("--{long}")),
        (None, Some(short)) => Ok(format!("-{short}")),
        (None, None) => bail!("argument {} has no flag to write", arg.get_id()),
    }
}

/// One value as the command line spells it; a `ValueEnum` by clap's own name for it.
fn text(arg: &Arg, v: &Value) -> Result<String> {
    let t = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => bail!("argument {}: {other} has no command-line spelling", arg.get_id()),
    };
    let choices = arg.get_possible_values();
    if choices.is_empty() {
        return Ok(t);
    }
    let plain = |s: &str| s.chars().filter(|c| c.is_alphanumeric()).collect::<String>().to_lowercase();
    choices
        .iter()
        .find(|c| plain(c.get_name()) == plain(&t))
        .map(|c| c.get_name().to_string())
        .ok_or_else(|| anyhow!("argument {}: {t:?} is none of its values", arg.get_id()))
}

/// Whether `texts` say what the argument's default says (numbers compared as numbers:
/// a default of "2" seconds is the 2.0 a duration renders).
fn is_default(arg: &Arg, texts: &[String]) -> bool {
    let defaults = arg.get_default_values();
    defaults.len() == texts.len()
        && defaults.iter().zip(texts).all(|(d, t)| {
            let d = d.to_string_lossy();
            d == t.as_str() || matches!((d.parse::<f64>(), t.parse::<f64>()), (Ok(a), Ok(b)) if a == b)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{GenArgs, SinkArgs};
    use crate::storm::{StormArgs, StormMode};
    use crate::traffic::probe::ProbeArgs;
    use pfcswitch::cli::{BindModeArg, RunArgs, XdpModeArg};
    use pfcswitch::core::mac::MacAddr;
    use pfcswitch::core::speed::Speed;
    use std::time::Duration;

    /// Renders `value`, parses it back, and compares what Debug shows of both.
    fn round_trip<T: Args + FromArgMatches + Serialize + std::fmt::Debug>(value: &T) -> Vec<String> {
        let args = to_args(value).unwrap();
        let back: T = parse(&args.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
        assert_eq!(format!("{back:?}"), format!("{value:?}"), "{args:?}");
        args
    }

    #[test]
    fn a_generator_command_line_parses_back_to_the_struct_it_was_rendered_from() {
        let mut g: GenArgs = with_defaults(serde_json::json!({"iface": "eth0", "dst_mac": MacAddr::local(2)})).unwrap();
        assert_eq!(round_trip(&g), ["--iface", "eth0", "--dst-mac", "02:00:00:00:00:02"], "defaults are left out");
        g.count = Some(1000);
        g.duration = Some(Duration::from_millis(2500));
        g.linger = Duration::from_millis(500);
        g.dscp = vec![3, 4];
        g.flow_load = vec![12.5, 40.0];
        g.flows = 2;
        g.rate = None;
        g.spin = true;
        g.speed = Speed::gbps(25);
        let args = round_trip(&g);
        assert!(args.windows(2).any(|w| w == ["--dscp", "4"]) && args.contains(&"--spin".to_string()));
        g.rate = Some(20_000.0);
        g.flow_load.clear();
        g.dscp.clear();
        g.tagger_table = Some("/tmp/sw1.json".into());
        round_trip(&g);
    }

    #[test]
    fn sink_storm_probe_and_switch_command_lines_parse_back_too() {
        let mut s: SinkArgs = with_defaults(serde_json::json!({"iface": "eth0"})).unwrap();
        s.idle = Duration::from_secs(1);
        s.expect_per_flow = Some(100_000);
        round_trip(&s);

        let mut st: StormArgs = with_defaults(serde_json::json!({"iface": ["eth0", "eth1"]})).unwrap();
        st.bitmap = Some(0x18);
        st.duration = Some(Duration::from_secs(3));
        st.mode = StormMode::ZeroVector;
        st.json = true;
        let args = round_trip(&st);
        assert!(args.windows(2).any(|w| w == ["--mode", "zero-vector"]), "{args:?}");

        let p: ProbeArgs =
            with_defaults(serde_json::json!({"iface": "eth0", "speed": Speed::gbps(1), "quanta": [100, 500]})).unwrap();
        round_trip(&p);

        let r = RunArgs {
            config: Some("/tmp/sw1.toml".into()),
            socket: Some("/tmp/sw1.sock".into()),
            force: true,
            queues: Some(1),
            xdp_mode: Some(XdpModeArg::Generic),
            bind_mode: Some(BindModeArg::ZeroCopy),
            metrics: Some("127.0.0.1:9469".parse().unwrap()),
            ..RunArgs::default()
        };
        let args = round_trip(&r);
        assert!(args.windows(2).any(|w| w == ["--bind-mode", "zero-copy"]), "{args:?}");
    }

    #[test]
    fn a_field_that_is_no_argument_is_refused_by_name() {
        let err = with_defaults::<SinkArgs>(serde_json::json!({"iface": "eth0", "idel": 1})).unwrap_err();
        assert!(err.to_string().contains("\"idel\""), "{err}");
    }
}
