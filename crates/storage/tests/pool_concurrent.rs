//! Many threads fixing random pages of a pool much smaller than the data, and reading them
//! without latching (optimistic reads, validated by the frame latch's version).

use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use storage::buffer::{BufferPool, PoolConfig};
use storage::file::MemPageStore;
use storage::page::PageKind;
use storage::{PageId, PageSize};

const PAGES: u64 = 200;
const THREADS: u64 = 4;
const OPS: u64 = 4000;
/// Positions in each page that always hold the same counter value.
const SLOTS: [usize; 4] = [64, 1000, 4000, 8184];

#[test]
fn concurrent_fixes_see_consistent_pages_and_lose_no_update() {
    fixes_and_evictions(24, OPS);
}

/// Hits find their frame without the page-table latch: with barely more frames than threads
/// nearly every fix evicts, so fixes race evictions of the frame they just looked up.
#[test]
fn lock_free_hits_survive_constant_eviction() {
    fixes_and_evictions(THREADS as usize + 2, OPS / 2);
}

fn fixes_and_evictions(frames: usize, ops: u64) {
    let pool = Arc::new(
        BufferPool::new(
            Box::new(MemPageStore::new(PageSize::Kib8)),
            PoolConfig {
                page_size: PageSize::Kib8,
                frames,
                latching: true,
            },
            None,
        )
        .unwrap(),
    );
    for _ in 0..PAGES {
        drop(pool.allocate_page(PageKind::Heap).unwrap());
    }
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t);
                let mut increments = 0u64;
                let mut validated = 0u64;
                for _ in 0..ops {
                    let id = PageId(rng.gen_range(1..=PAGES));
                    if rng.gen_bool(0.3) {
                        let mut g = pool.fix_exclusive(id).unwrap();
                        let v = u64::from_le_bytes(g[SLOTS[0]..SLOTS[0] + 8].try_into().unwrap());
                        for s in SLOTS {
                            g.range_mut(s, 8).copy_from_slice(&(v + 1).to_le_bytes());
                        }
                        increments += 1;
                    } else if rng.gen_bool(0.5) {
                        // A validated optimistic read is never torn, nor of another page.
                        let read = pool.read_optimistic(id, |b| {
                            let page = u64::from_le_bytes(b[16..24].try_into().unwrap());
                            let slots =
                                SLOTS.map(|s| u64::from_le_bytes(b[s..s + 8].try_into().unwrap()));
                            (page, slots)
                        });
                        if let Some(((page, slots), _)) = read {
                            assert_eq!(page, id.0, "optimistic read of another page");
                            assert!(slots.iter().all(|&v| v == slots[0]), "torn page {id}");
                            validated += 1;
                        }
                    } else {
                        let g = pool.fix_shared(id).unwrap();
                        assert_eq!(g.page_id(), id);
                        assert_eq!(u64::from_le_bytes(g[16..24].try_into().unwrap()), id.0);
                        let v = &g[SLOTS[0]..SLOTS[0] + 8];
                        for s in SLOTS {
                            assert_eq!(&g[s..s + 8], v, "torn page {id}");
                        }
                    }
                }
                (increments, validated)
            })
        })
        .collect();
    let counts: Vec<(u64, u64)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let increments: u64 = counts.iter().map(|c| c.0).sum();
    // Pages in the pool are read optimistically; with most pages out, fewer.
    assert!(
        counts.iter().map(|c| c.1).sum::<u64>() > 0,
        "no optimistic read validated"
    );
    let total: u64 = (1..=PAGES)
        .map(|p| {
            let g = pool.fix_shared(PageId(p)).unwrap();
            u64::from_le_bytes(g[SLOTS[0]..SLOTS[0] + 8].try_into().unwrap())
        })
        .sum();
    assert_eq!(total, increments, "every increment survived eviction");
    pool.check_invariants();
}

/// An 8-frame in-memory pool, latching or not.
fn small_pool(latching: bool) -> BufferPool {
    BufferPool::new(
        Box::new(MemPageStore::new(PageSize::Kib8)),
        PoolConfig {
            page_size: PageSize::Kib8,
            frames: 8,
            latching,
        },
        None,
    )
    .unwrap()
}

/// An optimistic read is refused while a writer holds the page, and its token tells
/// afterwards whether a writer came and went.
#[test]
fn an_optimistic_read_is_refused_under_a_writer_and_its_token_sees_a_later_one() {
    let pool = small_pool(true);
    let id = pool.allocate_page(PageKind::Heap).unwrap().page_id();
    let (page, token) = pool
        .read_optimistic(id, |b| u64::from_le_bytes(b[16..24].try_into().unwrap()))
        .expect("an unlatched page in the pool reads");
    assert_eq!(page, id.0);
    assert!(token.still_valid());
    {
        let _reader = pool.fix_shared(id).unwrap();
        assert!(token.still_valid(), "a shared fix writes nothing");
        assert!(pool.read_optimistic(id, |_| ()).is_some());
    }
    {
        let _writer = pool.fix_exclusive(id).unwrap();
        assert!(
            pool.read_optimistic(id, |_| ()).is_none(),
            "read under a writer"
        );
        assert!(!token.still_valid(), "a writer holds the page");
    }
    assert!(!token.still_valid(), "a writer came and went");
    assert!(pool.read_optimistic(id, |_| ()).unwrap().1.still_valid());
    // Without latching there is no version to trust: callers latch.
    let unlatched = small_pool(false);
    let id = unlatched.allocate_page(PageKind::Heap).unwrap().page_id();
    assert!(unlatched.read_optimistic(id, |_| ()).is_none());
}

/// A fix finds its frame in the directory without the page-table latch, so the frame may go
/// to another page before the fix waits for its latch; the fix must not go on waiting for a
/// frame that no longer holds its page. Left-to-right walkers (a B+-tree's scans) and
/// "splitters" that hold a page, a fresh page and then the page to its right (a leaf split)
/// obey one latch order; a walker left waiting for the frame of a splitter's fresh page while
/// holding the page the splitter wants next deadlocked the two (found by `btree_stress`).
/// Here a watchdog fails the test if the fixes stop making progress.
#[test]
fn a_fix_never_waits_for_a_frame_that_went_to_another_page() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    const CHAIN: u64 = 48;
    const WALKERS: u64 = 3;
    const SPLITTERS: u64 = 3;
    let pool = Arc::new(
        BufferPool::new(
            Box::new(MemPageStore::new(PageSize::Kib8)),
            PoolConfig {
                page_size: PageSize::Kib8,
                // Two a walker, three a splitter, and two to spare: nearly every fix evicts.
                frames: (2 * WALKERS + 3 * SPLITTERS + 2) as usize,
                latching: true,
            },
            None,
        )
        .unwrap(),
    );
    for _ in 0..CHAIN {
        drop(pool.allocate_page(PageKind::Heap).unwrap());
    }
    let progress = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..WALKERS + SPLITTERS)
        .map(|t| {
            let (pool, progress, stop) = (pool.clone(), progress.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t);
                for _ in 0..1500 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let first = rng.gen_range(1..CHAIN);
                    if t < WALKERS {
                        // Shared latch coupling to the right: the next page, then the last goes.
                        let mut g = pool.fix_shared(PageId(first)).unwrap();
                        assert_eq!(g.page_id(), PageId(first));
                        for p in first + 1..(first + 8).min(CHAIN + 1) {
                            g = pool.fix_shared(PageId(p)).unwrap();
                            assert_eq!(g.page_id(), PageId(p));
                        }
                    } else {
                        let left = pool.fix_exclusive(PageId(first)).unwrap();
                        let fresh = pool.allocate_page(PageKind::Heap).unwrap();
                        let right = pool.fix_exclusive(PageId(first + 1)).unwrap();
                        assert_eq!(right.page_id(), PageId(first + 1));
                        drop((left, fresh, right));
                    }
                    progress.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut last = (0, Instant::now());
    while !threads.iter().all(|t| t.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        let now = progress.load(Ordering::Relaxed);
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(20) {
            stop.store(true, Ordering::Relaxed);
            // A thread that failed is the better report.
            for t in threads.into_iter().filter(|t| t.is_finished()) {
                t.join().unwrap();
            }
            panic!("no fix finished for 20 s after {now}: the fixing threads are deadlocked");
        }
    }
    for t in threads {
        t.join().unwrap();
    }
    pool.check_invariants();
}
