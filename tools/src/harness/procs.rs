//! The real binaries as processes on a testbed: the switch (with its control socket),
//! the sink, the generator, and one flow from h1 to h2.

use super::*;

/// A pfcswitch process in a testbed node.
pub struct SwitchProc {
    pub name: String,
    pub socket: PathBuf,
    pub proc: Proc,
}

impl SwitchProc {
    /// Starts pfcswitch in `node` with `config` (its name and ports as given), placed as
    /// the testbed's processes are ([`Testbed::processes`]), and waits until its control
    /// socket answers.
    /// `args` are `pfcswitch run`'s other arguments (`RunArgs::default()` for none); the
    /// config file and the control socket are the harness's, in the testbed's directory.
    pub fn start(tb: &Testbed, node: &str, config: &RunConfig, args: &RunArgs) -> Result<SwitchProc> {
        SwitchProc::start_on(tb, node, config, args, tb.processes())
    }

    /// [`SwitchProc::start`] in a session of its own, as a service or a daemon runs
    /// ([`Placement::own_session`] says why it matters). The benches that measure it
    /// beside Open vSwitch start it so, as OVS's daemons run.
    pub fn start_as_service(tb: &Testbed, node: &str, config: &RunConfig, args: &RunArgs) -> Result<SwitchProc> {
        let own = Placement { own_session: true, ..Placement::default() };
        SwitchProc::start_on(tb, node, config, args, &own)
    }

    /// pfcswitch in `node` run from a SONiC CONFIG_DB document as written (`run
    /// --sonic-config DOC --port SONIC=IFACE ...`), named `name`, with the harness's
    /// control socket.
    pub fn start_sonic(
        tb: &Testbed,
        node: &str,
        name: &str,
        doc: &std::path::Path,
        ports: &[String],
    ) -> Result<SwitchProc> {
        let socket = tb.work_dir().join(format!("{name}.sock"));
        let run = RunArgs {
            sonic_config: Some(doc.to_path_buf()),
            sonic_ports: ports.to_vec(),
            name: Some(name.to_string()),
            socket: Some(socket.clone()),
            ..RunArgs::default()
        };
        let proc = tb.spawn(node, name, &command_line("pfcswitch", "run", &run)?)?;
        SwitchProc::wait_up(name, socket, proc)
    }

    /// Waits until the switch's control socket answers.
    fn wait_up(name: &str, socket: PathBuf, mut proc: Proc) -> Result<SwitchProc> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if client::request(&socket, &Request::Stats).is_ok() {
                return Ok(SwitchProc { name: name.to_string(), socket, proc });
            }
            if !proc.is_running() {
                bail!("pfcswitch {name} exited at start-up: {}", proc.stderr_so_far().trim());
            }
            if Instant::now() > deadline {
                bail!("pfcswitch {name} did not come up: {}", proc.stderr_so_far().trim());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// [`SwitchProc::start`], the process placed as `placement` says.
    pub fn start_on(
        tb: &Testbed,
        node: &str,
        config: &RunConfig,
        args: &RunArgs,
        placement: &Placement,
    ) -> Result<SwitchProc> {
        let path = tb.work_dir().join(format!("{}.toml", config.name));
        std::fs::write(&path, config.to_toml()).with_context(|| format!("writing {}", path.display()))?;
        let socket = tb.work_dir().join(format!("{}.sock", config.name));
        let run = RunArgs { config: Some(path), socket: Some(socket.clone()), ..args.clone() };
        let proc = tb.spawn_on(node, &config.name, placement, &command_line("pfcswitch", "run", &run)?)?;
        SwitchProc::wait_up(&config.name, socket, proc)
    }

    pub fn stats(&self) -> Result<Stats> {
        Ok(client::stats(&self.socket)?)
    }

    pub fn fdb(&self) -> Result<Vec<FdbRow>> {
        Ok(client::fdb(&self.socket)?)
    }

    pub fn traffic_map(&self) -> Result<TrafficMapView> {
        Ok(client::traffic_map(&self.socket)?)
    }

    pub fn deadlocks(&self) -> Result<DeadlockReport> {
        Ok(client::deadlocks(&self.socket)?)
    }

    /// Sends a command (block, unblock, clear-watermarks); returns what was done.
    pub fn command(&self, req: &Request) -> Result<String> {
        Ok(client::command(&self.socket, req)?)
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(self) -> Finished {
        self.proc.stop(Duration::from_secs(10))
    }
}

/// A sink started in `node` on the node's host interface; it reports JSON.
pub struct SinkProc {
    proc: Proc,
}

impl SinkProc {
    /// Starts a sink placed as the testbed's processes are ([`Testbed::processes`]).
    pub fn start(tb: &Testbed, node: &str, label: &str, args: &SinkArgs) -> Result<SinkProc> {
        SinkProc::start_on(tb, node, label, tb.processes(), args)
    }

    /// [`SinkProc::start`] on the CPUs in `cpus`.
    pub fn start_on(tb: &Testbed, node: &str, label: &str, placement: &Placement, args: &SinkArgs) -> Result<SinkProc> {
        let args = SinkArgs { iface: tb.host_iface(node)?.name.clone(), json: true, ..args.clone() };
        let mut proc = tb.spawn_on(node, label, placement, &command_line("pfctools", "sink", &args)?)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !proc.stderr_so_far().contains(READY_LINE) {
            if !proc.is_running() || Instant::now() > deadline {
                bail!("sink on {node} did not start: {}", proc.stderr_so_far().trim());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(SinkProc { proc })
    }

    /// Waits for the sink to finish by itself (idle timeout, count, duration).
    pub fn finish(self, timeout: Duration) -> Result<SinkReport> {
        parse_report(self.proc.wait(timeout), "sink")
    }

    /// Stops the sink now and returns what it saw.
    pub fn stop(self) -> Result<SinkReport> {
        parse_report(self.proc.stop(Duration::from_secs(5)), "sink")
    }
}

pub(super) fn parse_report<T: serde::de::DeserializeOwned>(f: Finished, what: &str) -> Result<T> {
    let line = f.stdout.lines().last().unwrap_or("");
    serde_json::from_str(line).with_context(|| format!("{what} report unreadable ({}): {}", f.status, f.stderr.trim()))
}

/// What one flow from h1 to a sink on h2 gave (see [`one_flow_h1_to_h2`]).
pub struct OneFlowRun {
    pub gen: GenReport,
    pub sink: SinkReport,
    /// The CPU time the process asked about spent while the generator ran.
    pub cpu: Option<Duration>,
}

/// One flow of `size`-byte frames from h1 to a sink on h2 (tx-only): at `rate` frames/s
/// for `seconds`, or unpaced for that long. The CPU time of process `cpu_of` (a switch)
/// is measured around the generator.
pub fn one_flow_h1_to_h2(
    tb: &Testbed,
    size: usize,
    seconds: f64,
    rate: Option<f64>,
    cpu_of: Option<u32>,
) -> Result<OneFlowRun> {
    one_flow_h1_to_h2_on(tb, size, seconds, rate, cpu_of, tb.processes())
}

/// [`one_flow_h1_to_h2`] with the generator and the sink placed as `placement` says.
pub fn one_flow_h1_to_h2_on(
    tb: &Testbed,
    size: usize,
    seconds: f64,
    rate: Option<f64>,
    cpu_of: Option<u32>,
    placement: &Placement,
) -> Result<OneFlowRun> {
    // Paced: as many frames as the rate gives in `seconds`; unpaced: for `seconds`.
    let count = rate.map(|r| (r * seconds).max(1.0) as u64);
    let sink_args = SinkArgs {
        idle: Duration::from_secs(1),
        duration: Some(Duration::from_secs_f64(seconds + 10.0)),
        // A paced trial that lost nothing ends at its last frame, not a second later;
        // one that lost some waits out the idle second for latecomers.
        expect: count,
        ..sink_defaults()
    };
    let sink = SinkProc::start_on(tb, "h2", "sink", placement, &sink_args)?;
    let args = GenArgs {
        size,
        tx_only: true,
        rate,
        count,
        duration: rate.is_none().then(|| Duration::from_secs_f64(seconds)),
        ..gen_to(tb.host_iface("h2")?.mac)
    };
    let cpu_before = cpu_of.and_then(cpu_time);
    let gen = start_gen_on(tb, "h1", "gen", placement, &args)?.finish(Duration::from_secs_f64(seconds + 30.0))?;
    let cpu_after = cpu_of.and_then(cpu_time);
    let sink = sink.finish(Duration::from_secs_f64(seconds + 20.0))?;
    let cpu = cpu_before.zip(cpu_after).map(|(a, b)| b.saturating_sub(a));
    Ok(OneFlowRun { gen, sink, cpu })
}

/// Runs `pfctools gen` in `node` to completion, on the node's host interface.
pub fn run_gen(tb: &Testbed, node: &str, label: &str, args: &GenArgs, timeout: Duration) -> Result<GenReport> {
    start_gen(tb, node, label, args)?.finish(timeout)
}

/// A generator running in the background.
pub struct GenProc {
    proc: Proc,
}

/// Starts `pfctools gen` in `node` on the node's host interface, placed as the
/// testbed's processes are ([`Testbed::processes`]); it reports JSON.
pub fn start_gen(tb: &Testbed, node: &str, label: &str, args: &GenArgs) -> Result<GenProc> {
    start_gen_on(tb, node, label, tb.processes(), args)
}

/// [`start_gen`] on the CPUs in `cpus`.
pub fn start_gen_on(tb: &Testbed, node: &str, label: &str, placement: &Placement, args: &GenArgs) -> Result<GenProc> {
    let args = GenArgs { iface: tb.host_iface(node)?.name.clone(), json: true, ..args.clone() };
    Ok(GenProc { proc: tb.spawn_on(node, label, placement, &command_line("pfctools", "gen", &args)?)? })
}

impl GenProc {
    pub fn finish(self, timeout: Duration) -> Result<GenReport> {
        let f = self.proc.wait(timeout);
        if !f.success() {
            bail!("generator failed ({}): {}", f.status, f.stderr.trim());
        }
        parse_report(f, "generator")
    }

    pub fn stop(self) -> Result<GenReport> {
        parse_report(self.proc.stop(Duration::from_secs(5)), "generator")
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }
}
