//! What the kernel says of the machine: a process's CPU time, the host's steal, the
//! switch's counters that account for lost frames.

use super::*;

/// The switch's counters that account for lost frames, summed over its ports.
#[derive(Clone, Copy, Debug, Default)]
pub struct SwitchLosses {
    /// Frames the kernel could not queue on a full rx ring.
    pub rx_ring_full: u64,
    /// Frames the kernel had no frame from the fill ring for.
    pub rx_no_frame: u64,
    /// Egress tail drops.
    pub tail_drops: u64,
    pub other_drops: u64,
}

impl SwitchLosses {
    pub fn read(switch: &SwitchProc) -> Result<SwitchLosses> {
        Ok(SwitchLosses::of(&switch.stats()?))
    }

    pub fn of(stats: &Stats) -> SwitchLosses {
        let mut l = SwitchLosses::default();
        for p in &stats.ports {
            l.rx_ring_full += p.socket.rx_ring_full;
            l.rx_no_frame += p.socket.rx_dropped;
            l.tail_drops += p.counters.drops.lossy;
            l.other_drops += p.counters.drops.total() - p.counters.drops.lossy;
        }
        l
    }

    /// Frames the kernel could not put on the switch's rx rings: ring full or no fill
    /// frame (`SocketCounters::rx_lost`, summed).
    pub fn rx_lost(&self) -> u64 {
        self.rx_ring_full + self.rx_no_frame
    }

    /// Frames the switch dropped itself.
    pub fn dropped(&self) -> u64 {
        self.tail_drops + self.other_drops
    }

    pub fn minus(self, o: SwitchLosses) -> SwitchLosses {
        SwitchLosses {
            rx_ring_full: self.rx_ring_full - o.rx_ring_full,
            rx_no_frame: self.rx_no_frame - o.rx_no_frame,
            tail_drops: self.tail_drops - o.tail_drops,
            other_drops: self.other_drops - o.other_drops,
        }
    }

    pub fn plus(self, o: SwitchLosses) -> SwitchLosses {
        SwitchLosses {
            rx_ring_full: self.rx_ring_full + o.rx_ring_full,
            rx_no_frame: self.rx_no_frame + o.rx_no_frame,
            tail_drops: self.tail_drops + o.tail_drops,
            other_drops: self.other_drops + o.other_drops,
        }
    }
}

/// CPU time (user + system) a process has used so far.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces) start after ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(user_ticks(ticks, user_tick()))
}

/// The tick `/proc` counts CPU times in (USER_HZ; 10 ms on Linux here).
pub(super) fn user_tick() -> Duration {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Duration::from_secs(1) / u32::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

pub(super) fn user_ticks(n: u64, tick: Duration) -> Duration {
    Duration::from_nanos(n.saturating_mul(tick.as_nanos() as u64))
}

/// How long the hypervisor has kept each of this VM's CPUs from running so far: the
/// `steal` column of `/proc/stat`, time a vCPU had work and the host ran something else.
/// On the 2-core development VMs the host takes a vCPU for about 100 ms at a time, and
/// only while both are busy; a trial at a DUT's limit keeps both busy. Empty where the
/// file cannot be read (then nothing is ever put down to the host).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostSteal(pub(super) Vec<Duration>);

impl HostSteal {
    pub fn read() -> HostSteal {
        std::fs::read_to_string("/proc/stat").map(|s| HostSteal::parse(&s, user_tick())).unwrap_or_default()
    }

    /// The per-CPU lines (`cpu0`, `cpu1`, ...; not the `cpu` total), ticks of `tick`.
    pub(super) fn parse(stat: &str, tick: Duration) -> HostSteal {
        let steal = |line: &str| {
            let mut fields = line.split_ascii_whitespace();
            let name = fields.next()?;
            let per_cpu =
                name.strip_prefix("cpu").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            // user nice system idle iowait irq softirq steal
            per_cpu.then(|| fields.nth(7)?.parse::<u64>().ok()).flatten().map(|t| user_ticks(t, tick))
        };
        HostSteal(stat.lines().filter_map(steal).collect())
    }

    /// The most the host took from any one CPU between `earlier` and this reading.
    pub fn most_since(&self, earlier: &HostSteal) -> Duration {
        self.0.iter().zip(&earlier.0).map(|(now, then)| now.saturating_sub(*then)).max().unwrap_or_default()
    }
}
