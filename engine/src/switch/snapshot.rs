//! The stats snapshot: everything `ctl stats` shows, assembled from the engine's state.

use crate::ports::PortId;
use crate::priorities::Priority;
use crate::stats::{PortStats, PrioStats, SwitchStats, TagRow, TaggerStats, WatchdogStats};
use crate::tagging::{TagTable, TAGS};
use crate::time::Time;

use super::{Port, Switch, TAG_SLOTS};

impl Switch {
    /// A snapshot of everything the engine knows of the switch and its ports (drivers add
    /// what they know: see [`SwitchStats::map_ports`]).
    pub fn stats(&self, now: Time) -> SwitchStats {
        SwitchStats {
            name: self.name.clone(),
            switch_id: self.switch_id,
            uptime_s: now.saturating_since(self.started).as_secs_f64(),
            fdb_entries: self.fdb.len(),
            shared_buffer_bytes: self.buffer.shared_total(),
            shared_buffer_used: self.buffer.shared_used(),
            xoff_threshold: self.buffer.wide_thresholds().0,
            xon_threshold: self.buffer.wide_thresholds().1,
            pfc_reaction: self.reaction.percentiles(),
            resume_lateness: self.resume_lateness.percentiles(),
            pause_response: self.pause_response.percentiles(),
            deadlocks_detected: self.deadlocks,
            slowpath_overflow: self.slowpath_overflow,
            pfcwd_events_forgotten: self.pfcwd_events.forgotten,
            ports: self.ports.iter().enumerate().map(|(i, p)| self.port_stats(now, PortId::new(i), p)).collect(),
            tagger: self.tags.as_ref().map(|t| self.tagger_stats(t)),
        }
    }

    fn tagger_stats(&self, t: &TagTable) -> TaggerStats {
        let tags = self
            .tag_counters
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.is_zero())
            .map(|(k, c)| TagRow {
                port: self.ports[k / TAG_SLOTS].name.clone(),
                tag: u8::try_from(k % TAG_SLOTS).ok().filter(|&tag| usize::from(tag) < TAGS),
                counters: *c,
            })
            .collect();
        TaggerStats {
            table_switch: t.switch.clone(),
            source: t.source.clone(),
            rules: t.ingress_rules + t.rewrite_rules,
            ingress_rules: t.ingress_rules,
            rewrite_rules: t.rewrite_rules,
            lossless: t.lossless_priorities(),
            initial_tag: t.initial_tag,
            default_tag: t.default_tag,
            default_priority: t.default_priority,
            tags,
        }
    }

    fn port_stats(&self, now: Time, index: PortId, p: &Port) -> PortStats {
        let paused = p.tx.pause.paused(now);
        let priorities = Priority::all()
            .map(|prio| {
                let g = self.buffer.group(index, prio);
                let lossless = self.is_lossless(prio);
                let profile = |v: u64| if lossless { v } else { 0 };
                PrioStats {
                    priority: prio,
                    lossless,
                    counters: p.prio[prio],
                    ingress_bytes: g.occupancy(),
                    ingress_watermark: g.watermark,
                    ingress_shared_watermark: g.shared_watermark,
                    headroom_bytes: g.headroom,
                    headroom_watermark: g.headroom_watermark,
                    xoff_threshold: profile(self.buffer.xoff_threshold(index, prio)),
                    xon_threshold: profile(self.buffer.xon_threshold(index, prio)),
                    headroom_size: profile(self.buffer.profile(index, prio).headroom_bytes),
                    xoff: g.xoff,
                    egress_queue_frames: p.tx.queues[prio].len(),
                    egress_queue_bytes: p.tx.queues[prio].bytes(),
                    egress_queue_watermark: p.tx.queues[prio].watermark(),
                    egress_paused: paused.contains(prio),
                    paused_us: p.tx.pause.paused_time(now, prio).as_micros() as u64,
                    pfc_history: p.tx.pause.history(now, prio),
                    xoff_since_ns: g.xoff.then(|| p.upstream.xoff_since(prio).as_nanos()),
                    upstream_response_max_us: p.upstream.upstream_response(prio).as_secs_f64() * 1e6,
                }
            })
            .collect();
        PortStats {
            name: p.name.clone(),
            iface: p.iface.clone(),
            mac: p.mac,
            speed: p.speed,
            pause_mode: p.mode,
            role: p.role,
            link_up: p.link_up,
            blocked: self.is_blocked(index),
            held_by_slowpath: self.map.held_at_slowpath_for(index),
            watchdog_active: p.dcfit.deadlock_drop.is_some_and(|(until, _)| now < until),
            pfcwd: self
                .watched(index)
                .iter()
                .map(|prio| WatchdogStats {
                    priority: prio,
                    action: p.pfcwd.action(),
                    active: p.pfcwd.stormed().contains(prio),
                    counters: p.pfcwd.counters(prio, p.prio[prio].frames()),
                })
                .collect(),
            checks: p.checks,
            xoff_episodes: p.upstream.episodes().copied().collect(),
            pause_arrivals_ns: p.upstream.pause_arrivals().copied().collect(),
            counters: p.counters,
            priorities,
        }
    }

    /// Clears every watermark (for a fresh measurement).
    pub fn clear_watermarks(&mut self) {
        self.buffer.clear_watermarks();
        for p in &mut self.ports {
            p.tx.queues.clear_watermarks();
        }
    }
}
