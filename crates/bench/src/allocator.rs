//! The process allocator: its one setting that matters to a growing main-memory database,
//! and a wrapper that counts each thread's allocations ([`Counting`]).
//!
//! glibc serves a request from its heap unless it is at least the *mmap threshold*, which
//! starts at 128 KiB and rises (up to 32 MiB) each time a mapped block is freed. A `Vec` on the
//! heap that doubles is copied to its new place; one that is mapped is moved by `mremap`, which
//! only remaps its pages. The stripped engine's registries and pending-key lists grow by one
//! entry per record (tens of MiB within a 10 s run), and its hash tables double: measured on the
//! TPC-C paper mix, single copies of 8–9 ms, two of which could land in one New-Order (its
//! 18 ms slowest transaction), and a doubling to a 16 MiB table that took 7.7 ms, most of it
//! `calloc` clearing heap memory. Fixing the threshold at 1 MiB keeps every such block mapped:
//! it is moved, never copied, and a fresh one arrives zeroed by the kernel (each of these
//! steps then took under 1 ms, and the slowest stripped transaction 3–10 ms).

/// Requests of at least this many bytes are mapped on their own.
pub const MMAP_THRESHOLD: usize = 1 << 20;

/// Fixes glibc's mmap threshold at [`MMAP_THRESHOLD`] for the whole process (see the module
/// documentation). Returns whether the allocator took the setting: false on other C libraries,
/// whose allocators have no such setting.
pub fn tune() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` only changes the allocator's parameters; any value is accepted
        // or refused with 0.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// The process's allocator, counting each thread's allocations: a binary that installs it
/// (`#[global_allocator] static A: Counting = Counting;`, as `glass` does) lets
/// [`thread_allocations`] say how many blocks, and how many bytes, the calling thread has
/// asked for — what `glass profile` reports per transaction. A reallocation counts as one
/// allocation of its new size; frees are not counted. The cost per allocation is two
/// additions to thread-local counters; nothing is shared between threads.
pub struct Counting;

thread_local! {
    /// This thread's (allocations, bytes). `const`-initialised and without a destructor, so
    /// reaching it never allocates.
    static ALLOCATED: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// Set by the first allocation through [`Counting`]: whether the counts mean anything.
static INSTALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl Counting {
    #[inline]
    fn count(bytes: usize) {
        if !INSTALLED.load(std::sync::atomic::Ordering::Relaxed) {
            INSTALLED.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        // A thread being torn down has no counters left: its allocations go uncounted.
        let _ = ALLOCATED.try_with(|c| {
            let (n, b) = c.get();
            c.set((n + 1, b + bytes as u64));
        });
    }
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s
// contract; the counting touches only thread-local cells and allocates nothing.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        Self::count(layout.size());
        // SAFETY: the caller upholds `alloc`'s contract, passed on as is.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        Self::count(layout.size());
        // SAFETY: as `alloc`.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        Self::count(new_size);
        // SAFETY: the caller upholds `realloc`'s contract, passed on as is.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: the caller upholds `dealloc`'s contract, passed on as is.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

/// The calling thread's allocations so far and the bytes they asked for, or `None` where
/// [`Counting`] is not the process's allocator.
pub fn thread_allocations() -> Option<(u64, u64)> {
    if !INSTALLED.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    ALLOCATED.try_with(std::cell::Cell::get).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_takes_the_threshold() {
        assert!(super::tune());
        // Allocating and growing past the threshold still works as before.
        let mut v: Vec<u64> = Vec::with_capacity(16);
        for i in 0..(1u64 << 19) {
            v.push(i);
        }
        assert_eq!(v.iter().sum::<u64>(), (1u64 << 19) * ((1u64 << 19) - 1) / 2);
    }
}
