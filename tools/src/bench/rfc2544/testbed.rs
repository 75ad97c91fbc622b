//! The testbeds the DUTs run on, and one frame size's measurements on them.

use super::*;
use crate::testbed::Placement;

/// A testbed for `dut`: two hosts, and between them a switch, a bridge, or nothing, every
/// link at `mtu`.
pub(crate) struct Bed {
    pub(super) dut: Dut,
    pub(super) mtu: u32,
    pub(super) switch: Option<SwitchProc>,
    /// Dropped before the testbed: its daemons stop before the namespace goes.
    pub(super) ovs: Option<crate::testbed::ovs::Ovs>,
    pub(crate) tb: Testbed,
    /// The switch's rx ring, frames: how long it lasts at a rate tells the machine's
    /// losses from the switch's.
    pub(super) ring_size: u32,
    /// Where the sender and the sink run: the testbed's placement, on the tester's CPUs
    /// under `--isolate`.
    tester: Placement,
    /// The CPU of the DUT's forwarding thread under `--isolate`: pfcswitch's loop
    /// (`dataplane.cpu`) and OVS's PMD thread (`pmd-cpu-mask`).
    dut_cpu: Option<usize>,
}

/// Where a bench's processes run: by default wherever the scheduler puts them (no CPU
/// named); under `--isolate`, [`harness::CpuPlan::split`]'s CPUs: the tester (sender and
/// sink) on all but the last, the DUT's forwarding thread on the last, as a tester and a
/// DUT are two boxes in RFC 2544. Only the plan's CPUs are used, not its nice values.
pub(crate) fn cpu_plan(isolate: bool) -> Result<harness::CpuPlan> {
    if !isolate {
        return Ok(harness::CpuPlan::default());
    }
    let plan = harness::CpuPlan::split();
    match plan.switch {
        Some(_) => Ok(plan),
        None => Err(anyhow!("--isolate needs two CPUs or more: one for the DUT, the others for the tester")),
    }
}

impl Bed {
    pub(super) fn up(dut: Dut, mtu: u32, cpus: &harness::CpuPlan) -> Result<Bed> {
        Bed::up_tuned(dut, mtu, cpus, |_| {})
    }

    /// [`Bed::up`] with pfcswitch's configuration changed by `tune` first.
    pub(crate) fn up_tuned(
        dut: Dut,
        mtu: u32,
        cpus: &harness::CpuPlan,
        tune: impl FnOnce(&mut pfcswitch::config::RunConfig),
    ) -> Result<Bed> {
        let name = unique_name(&format!("rfc-{}", &dut.as_str()[..2]));
        let topology = match dut {
            Dut::Direct => direct_topology(),
            Dut::Pfcswitch | Dut::Bridge | Dut::Ovs => Topology::star(2),
        };
        let tb = Testbed::up(&name, at_mtu(topology, mtu))?;
        // What a user gets without a file, unless the caller tunes it.
        let mut config = harness::switch_config(&tb, "sw1");
        tune(&mut config);
        if cpus.switch.is_some() {
            config.dataplane.cpu = cpus.switch;
        }
        let ring_size = config.dataplane.ring_size;
        let switch = match dut {
            Dut::Pfcswitch => Some(
                SwitchProc::start_as_service(&tb, "sw1", &config, &pfcswitch::cli::RunArgs::default())
                    .context("starting pfcswitch")?,
            ),
            Dut::Bridge => {
                tb.make_linux_bridge("sw1")?;
                None
            }
            Dut::Direct | Dut::Ovs => None,
        };
        let mut tester = tb.processes().clone();
        if cpus.hosts.cpus.is_some() {
            tester.cpus.clone_from(&cpus.hosts.cpus);
        }
        Ok(Bed { dut, mtu, switch, ovs: None, tb, ring_size, tester, dut_cpu: cpus.switch })
    }

    /// Starts what runs only while this DUT is measured: OVS, whose PMD thread polls its
    /// rings with a whole CPU even when idle, and would take it from the other DUTs'
    /// trials on this 2-core machine.
    pub(crate) fn measuring(&mut self) -> Result<()> {
        if self.dut == Dut::Ovs && self.ovs.is_none() {
            let ovs = crate::testbed::ovs::Ovs::start_with_pmd_on(&self.tb, "sw1", self.dut_cpu);
            self.ovs = Some(ovs.context("starting Open vSwitch")?);
        }
        Ok(())
    }

    /// Stops what [`Bed::measuring`] started.
    pub(crate) fn idle(&mut self) {
        self.ovs = None;
    }

    /// The DUT's process, where it has one.
    pub(crate) fn dut_pid(&self) -> Option<u32> {
        self.switch.as_ref().map(|s| s.proc.pid()).or(self.ovs.as_ref().map(|o| o.pid()))
    }

    /// One trial of `size`-byte frames at `rate` (unpaced when `None`).
    pub(super) fn trial(&self, size: usize, seconds: f64, rate: Option<f64>) -> Result<Trial> {
        let before = match &self.switch {
            Some(s) => Some((SwitchLosses::read(s)?, pfcswitch::sys::now().as_nanos())),
            None => None,
        };
        if let Some(s) = &self.switch {
            // The stage figures start from nothing, so that they are this trial's alone.
            s.command(&Request::ClearWatermarks)?;
        }
        let steal = harness::HostSteal::read();
        let run = harness::one_flow_h1_to_h2_on(&self.tb, size, seconds, rate, self.dut_pid(), &self.tester)?;
        let host_took = harness::HostSteal::read().most_since(&steal);
        let dut_cpu_ns = run.cpu.map(|d| d.as_nanos() as u64);
        let switch = match (&self.switch, before) {
            (Some(s), Some((before, start_ns))) => {
                let stats = s.stats()?;
                let lost = SwitchLosses::of(&stats).minus(before);
                let rx_lost = lost.rx_lost();
                let longest = stats.stalls.longest_since(start_ns);
                let ring_lasts = Duration::from_secs_f64(f64::from(self.ring_size) / run.gen.pps.max(1.0));
                Some(SwitchSide {
                    rx_lost,
                    dropped: lost.dropped(),
                    machine_explains: stats.stalls.rx_lost_off_cpu(start_ns, ring_lasts).min(rx_lost),
                    longest_stall_us: longest.map_or(0, |st| st.us),
                    longest_stall_cpu_wait_us: longest.map_or(0, |st| st.cpu_wait_us),
                    stages: stats.latency,
                    tx_in_flight_max: stats.ports.iter().map(|p| p.socket.tx_in_flight_max).max().unwrap_or(0),
                })
            }
            _ => None,
        };
        let flow = run.sink.flows.first().cloned().unwrap_or_default();
        Ok(Trial {
            asked_fps: rate,
            offered_fps: run.gen.pps,
            sent: run.gen.sent,
            // Each frame once: the sink counts copies apart (`duplicates`), not in it.
            received: flow.received,
            latency: flow.latency,
            sink_dropped: run.sink.socket_dropped,
            switch,
            dut_cpu_ns,
            host_took_ms: host_took.as_millis() as u64,
        })
    }

    pub(crate) fn down(self) {
        drop(self.ovs);
        if let Some(s) = self.switch {
            let finished = s.stop();
            if !finished.success() {
                eprintln!("pfcswitch exited with {}: {}", finished.status, finished.stderr.trim());
            }
        }
    }
}

pub(super) fn direct_topology() -> Topology {
    let host = |i: usize| {
        Endpoint::Full(EndpointSpec {
            node: format!("h{i}"),
            port: None,
            iface: Some("eth0".into()),
            mac: None,
            addr: Some(format!("10.0.0.{i}/24")),
        })
    };
    Topology {
        hosts: vec![HostSpec { name: "h1".into() }, HostSpec { name: "h2".into() }],
        links: vec![Link { a: host(1), b: host(2), mtu: None, queues: None }],
        ..Topology::default()
    }
}

/// Bits a frame of `size` bytes (FCS included) takes on the wire, preamble, SFD and
/// inter-frame gap with it.
pub(super) fn wire_bits(size: usize) -> f64 {
    pfcswitch::core::speed::wire_bytes(size.saturating_sub(4)) as f64 * 8.0
}

pub(super) fn measure(bed: &Bed, size: usize, args: &Rfc2544Args) -> Result<SizeResult> {
    // The unpaced trial loses frames by design, and is not judged.
    let ceiling = bed.trial(size, args.trial_s, None)?;
    let mut host_disturbed = Vec::new();
    let mut paced = |rate| undisturbed(&mut host_disturbed, || bed.trial(size, args.trial_s, Some(rate)));
    let (throughput, mut trials) = search(&ceiling, args.resolution, args.max_trials, args.retries, &mut paced)?;
    trials.insert(0, ceiling.clone());
    let found = throughput;
    let confirmed = if found > 0.0 {
        confirm(found, args.retries, &mut paced)?
    } else {
        Confirmed { rate: 0.0, held: false, trials: Vec::new() }
    };
    let throughput = confirmed.rate;
    let latency_trials = confirmed.trials;
    let at_throughput = latency_trials.last();
    let mut loss = Vec::new();
    for rate in loss_rates(throughput, ceiling.offered_fps) {
        let t = if rate >= ceiling.offered_fps * 0.99 {
            ceiling.clone()
        } else {
            bed.trial(size, args.trial_s, Some(rate))?
        };
        loss.push(LossPoint { offered_fps: t.offered_fps, loss_pct: t.loss_pct() });
    }
    Ok(SizeResult {
        dut: bed.dut,
        size,
        throughput_fps: throughput,
        search_fps: found,
        throughput_bps: throughput * wire_bits(size),
        sender_max_fps: ceiling.offered_fps,
        sender_limited: ceiling.lost() == 0,
        latency: at_throughput.map(|t| t.latency).unwrap_or_default(),
        latency_trial_lost: at_throughput.map_or(0, Trial::lost),
        confirmed: confirmed.held,
        dut_cpu_ns_per_frame: at_throughput.and_then(|t| t.dut_cpu_ns.map(|ns| ns as f64 / t.received.max(1) as f64)),
        latency_trials,
        host_disturbed,
        loss,
        trials,
        equal_load: Vec::new(),
    })
}

/// Trials of every DUT at [`EQUAL_LOADS`] of `lowest`, the lowest zero-loss rate of the
/// size: latency compared at the same offered load, not each at its own limit.
pub(super) fn measure_equal_load(
    bed: &mut Bed,
    size: usize,
    lowest: f64,
    args: &Rfc2544Args,
) -> Result<Vec<LoadPoint>> {
    bed.measuring()?;
    let points = EQUAL_LOADS
        .iter()
        .map(|&share| Ok(LoadPoint { share, trial: bed.trial(size, args.trial_s, Some(lowest * share))? }))
        .collect();
    bed.idle();
    points
}
