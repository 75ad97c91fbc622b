//! The pool that the tagging's and the verifier's parallel work runs on (`--threads`).

/// Runs `f` on a pool of `threads` threads (rayon's global pool when it cannot make one).
pub(crate) fn in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    match rayon::ThreadPoolBuilder::new().num_threads(threads.max(1)).build() {
        Ok(pool) => pool.install(f),
        Err(_) => f(),
    }
}
