//! Software prefetch: asks the CPU to start loading a cache line that will be read soon, so
//! that several independent loads wait for memory at once instead of one after another
//! (memory-level parallelism).
//!
//! A prefetch is only a hint: it never faults, even on an address that is not mapped, and has
//! no effect a program can observe except time. On targets without a prefetch instruction it
//! compiles to nothing.

/// Bytes in a cache line on the targets this crate is built for.
pub const LINE: usize = 64;

/// The x86 hints (`_MM_HINT_T0`, `_MM_HINT_ET0`), named here so that other targets compile.
const HINT_READ: i32 = 3;
const HINT_WRITE: i32 = 7;
#[cfg(target_arch = "x86_64")]
const _: () = assert!(
    HINT_READ == std::arch::x86_64::_MM_HINT_T0 && HINT_WRITE == std::arch::x86_64::_MM_HINT_ET0
);

#[inline(always)]
fn hinted<const HINT: i32>(addr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is in every x86-64 CPU, reads nothing architecturally and cannot
    // fault, whatever the address; on a CPU without `prefetchw` that instruction does nothing.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<HINT>(addr.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Starts loading the cache line holding `addr` into every cache level.
#[inline(always)]
pub fn line(addr: *const u8) {
    hinted::<HINT_READ>(addr);
}

/// Starts loading the cache line holding `addr` in a state that lets this core write it
/// (`prefetchw`): a store to a line that is not in the cache must first fetch it, and an
/// atomic instruction after the store waits for that (x86 drains the store buffer first).
#[inline(always)]
pub fn line_for_write(addr: *const u8) {
    hinted::<HINT_WRITE>(addr);
}

/// Starts loading every cache line of `addr .. addr + len` (at least the first).
#[inline]
pub fn range(addr: *const u8, len: usize) {
    each_line(addr, len, line);
}

/// [`range`] with [`line_for_write`].
#[inline]
pub fn range_for_write(addr: *const u8, len: usize) {
    each_line(addr, len, line_for_write);
}

#[inline(always)]
fn each_line(addr: *const u8, len: usize, prefetch: impl Fn(*const u8)) {
    let first = addr as usize & !(LINE - 1);
    let end = (addr as usize).saturating_add(len.max(1));
    let mut at = first;
    while at < end {
        prefetch(at as *const u8);
        at += LINE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetching_any_address_is_harmless() {
        let data = vec![7u8; 1000];
        range(data.as_ptr(), data.len());
        // Addresses that are not mapped: a prefetch never faults.
        line(std::ptr::null());
        range((usize::MAX - 200) as *const u8, 100);
        line(8 as *const u8);
        line_for_write(std::ptr::null());
        line_for_write(data.as_ptr());
        range_for_write(data.as_ptr(), data.len());
        range_for_write((usize::MAX - 200) as *const u8, 100);
        assert!(data.iter().all(|&b| b == 7));
    }
}
