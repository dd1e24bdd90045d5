//! The lock manager's claim that "nothing is allocated once warm", checked with a counting
//! global allocator: after a warm-up, a transaction that begins, locks records in several
//! tables, upgrades and releases everything makes no heap allocation.
//!
//! "Warm" means every bucket has already held as many heads at once as it does now: the
//! measured round locks the same names as the warm-up round (under new transaction ids), so
//! the test is deterministic; a fresh name only allocates when its bucket reaches a new
//! high-water mark of occupancy.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use txn::{LockConfig, LockManager, LockMode, TxnId, WHOLE_GAP};

/// Counts allocations made by the current thread (other test threads do not interfere).
struct CountingAlloc;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// One TPC-C-like transaction: a few tables, reads, writes, an upgrade, fresh record names.
fn run_txn(m: &LockManager, id: u64, names: u64) {
    let mut t = m.begin(TxnId(id));
    for table in 1..=4u32 {
        for k in 0..12u64 {
            let key = names.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (k << 8) ^ table as u64;
            m.lock_record(&mut t, table, key, LockMode::S, WHOLE_GAP)
                .unwrap();
            if k % 3 == 0 {
                m.lock_record(&mut t, table, key, LockMode::X, WHOLE_GAP)
                    .unwrap();
            }
        }
    }
    m.lock_table(&mut t, 5, LockMode::IX).unwrap();
    m.release_all(&mut t);
}

#[test]
fn warm_lock_paths_allocate_nothing() {
    for buckets in [4096, 16] {
        let m = LockManager::new(LockConfig {
            buckets,
            ..LockConfig::default()
        });
        for id in 1..=1000 {
            run_txn(&m, id, id);
        }
        let before = allocations();
        for id in 1001..=2000 {
            run_txn(&m, id, id - 1000);
        }
        let made = allocations() - before;
        assert_eq!(
            made, 0,
            "{made} allocations in 1000 warm transactions ({buckets} buckets)"
        );
        assert_eq!(m.lock_name_count(), 0);
        m.check_invariants();
    }
}
