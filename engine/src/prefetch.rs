//! Asking the cache for memory ahead of its use.
//!
//! A frame that waited in a queue, and the state of a port that has not sent or received
//! for a while, are seldom still in the cache; where a driver or the engine knows that it
//! will read them soon (a frame on the wire, the next head of a queue), a prefetch lets
//! that wait overlap other work. A hint only: it changes nothing a program can observe.

/// The cache line's size on the CPUs this runs on, the step of [`prefetch_range_l2`].
pub const LINE: usize = 64;

/// Asks the cache for the line that holds the start of `value`, without waiting for it.
#[inline]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    line::<{ std::arch::x86_64::_MM_HINT_T1 }>(std::ptr::from_ref(value).cast());
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Asks the cache for the line at `addr`, without waiting for it. Any address will do: a
/// prefetch of memory that is not mapped is dropped, it does not fault.
#[inline]
pub fn prefetch_addr(addr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    line::<{ std::arch::x86_64::_MM_HINT_T0 }>(addr);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Asks the second-level cache for the `len` bytes from `addr`, a line at a time, without
/// waiting for them: memory that will be read soon but not at once (a frame the kernel
/// copies when it is sent). Any address will do, as for [`prefetch_addr`].
#[inline]
pub fn prefetch_range_l2(addr: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for off in (0..len).step_by(LINE) {
        line::<{ std::arch::x86_64::_MM_HINT_T1 }>(addr.wrapping_add(off));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (addr, len);
}

/// The one prefetch instruction, with the cache level `HINT` names.
#[cfg(target_arch = "x86_64")]
#[inline]
fn line<const HINT: i32>(addr: *const u8) {
    // SAFETY: a prefetch neither faults nor changes memory, whatever the address.
    unsafe { std::arch::x86_64::_mm_prefetch::<HINT>(addr.cast()) };
}
