//! The allocator of the binaries that run the simulator (`pfcsim`, `pfctools`): mimalloc,
//! whose arenas the kernel backs with 2 MiB pages; and how the benches read the memory a
//! run took (the peak resident set, ours or a child's).
//!
//! A run touches its state all over: every switch's ports, queues and table, the links,
//! the frames in flight and the event wheel, some 10 MiB at a k=8 fat-tree and 74 MiB at
//! k=16 (heaptrack). In 4 KiB pages that is thousands of pages against a TLB of a couple
//! of thousand entries, so an event pays page walks besides its cache misses. glibc's
//! malloc spreads the state over 4 KiB pages: Debian's `transparent_hugepage` is
//! `madvise`, so the kernel gives 2 MiB pages only to memory a program asks them for, and
//! glibc asks for none.
//! mimalloc (v3) takes its memory in large aligned arenas and asks for 2 MiB pages for
//! them (`madvise(MADV_HUGEPAGE)`). On a k=8 fat-tree pinned to one CPU of a VM with 8 MiB
//! of L3, a run took 0.87 to 0.91 of glibc's time, and 1.10 to 1.13 of that again with
//! `MIMALLOC_ALLOW_THP=0` in its environment, which turns the advice off: the pages are
//! the gain, not the allocator (docs/bench/2026-12-02-huge-pages.md). On a VM with 48 MiB
//! of L3, glibc's own huge pages had made no difference once the tables were sized to
//! their use (docs/simulator.md): how much this gains depends on the machine. It costs
//! memory, the pages' rounding: the k=8 run's resident set was 40 MiB instead of 26.
//! Nothing the simulator decides depends on where its memory lies, so the reports are
//! the same byte for byte.
//!
//! Only the binaries choose it (`#[global_allocator] static ALLOC: SimAlloc = SimAlloc;`):
//! the library's users keep their own.
//!
//! mimalloc (v3) keeps what a program frees resident for a second before it hands it
//! back (`MIMALLOC_PURGE_DELAY`, ms). With `MIMALLOC_PURGE_DELAY=0` in the environment a
//! k=16 fat-tree's peak was 117 MiB instead of 126, but the run took 1.13 to 1.19 times
//! as long: handing back parts of 2 MiB pages splits them (18 500 page faults instead of
//! 1 200). The default keeps the pages; the variable is there for a run that must fit.

pub use mimalloc::MiMalloc as SimAlloc;

/// Hands back to the kernel the memory the program has freed and mimalloc still holds
/// (it keeps freed pages a while, for reuse). `bench sim` calls it between cases: a
/// case's peak resident set is measured from what is held when it starts, and without
/// this the k=16 run's freed 200 MiB counted in the cases after it. With another global
/// allocator mimalloc holds nothing, and this does nothing.
pub fn release_freed() {
    // SAFETY: `mi_collect` has no precondition; `force` also returns memory other
    // threads freed.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// Resets the process's peak resident set to what it holds now (Linux: `clear_refs` 5),
/// once the allocator has handed back what was freed: a bench's case is measured from
/// there.
pub(crate) fn reset_peak_rss() {
    release_freed();
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The process's peak resident set since the last reset, MiB.
pub(crate) fn peak_rss_mib() -> Option<f64> {
    let kib = vm_hwm_kib(&std::fs::read_to_string("/proc/self/status").ok()?)?;
    Some(kib as f64 / 1024.0)
}

/// `VmHWM` (the peak resident set) of a `/proc/PID/status`, KiB.
pub(crate) fn vm_hwm_kib(status: &str) -> Option<u64> {
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?.trim().parse().ok())
}
