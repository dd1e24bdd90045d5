//! The process allocator's one setting that matters to a growing main-memory database.
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
