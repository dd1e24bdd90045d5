//! Per-thread storage counters, read by the profiler. Placeholder until the buffer-pool work
//! lands; `bump_latch` is used by the latch.

use std::cell::Cell;

thread_local! {
    static LATCHES: Cell<u64> = const { Cell::new(0) };
}

/// Counts one latch acquisition on this thread.
#[inline]
pub fn bump_latch() {
    #[cfg(feature = "counters")]
    LATCHES.with(|c| c.set(c.get() + 1));
}

/// Latch acquisitions on this thread so far.
pub fn latch_acquisitions() -> u64 {
    LATCHES.with(|c| c.get())
}
