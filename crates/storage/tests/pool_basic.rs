//! Buffer pool: working sets larger than the pool, corruption detection, exhaustion, redo
//! fixes, and the no-log configuration.

use std::sync::Arc;

use storage::buffer::{BufferPool, FrameMemory, PoolConfig};
use storage::file::{FilePageStore, MemPageStore, PageStore};
use storage::page::{PageKind, PAGE_HEADER_SIZE};
use storage::{PageId, PageSize, StorageError};

fn config(frames: usize) -> PoolConfig {
    PoolConfig {
        page_size: PageSize::Kib8,
        frames,
        latching: true,
    }
}

/// The byte pattern page `id` carries at `offset` in these tests.
fn pattern(id: u64, offset: usize) -> u8 {
    (id.wrapping_mul(31) as usize ^ offset.wrapping_mul(7)) as u8
}

fn fill(pool: &BufferPool, id: PageId) {
    let mut g = pool.fix_exclusive(id).unwrap();
    let body = g.range_mut(PAGE_HEADER_SIZE, 8192 - PAGE_HEADER_SIZE);
    for (i, b) in body.iter_mut().enumerate() {
        *b = pattern(id.0, i);
    }
}

fn check(pool: &BufferPool, id: PageId) {
    let g = pool.fix_shared(id).unwrap();
    assert_eq!(g.page_id(), id);
    for (i, &b) in g[PAGE_HEADER_SIZE..].iter().enumerate() {
        assert_eq!(b, pattern(id.0, i), "page {id} byte {i}");
    }
}

/// Both kinds of frame memory hold every frame's page apart from its neighbours', in a pool
/// larger than a huge page (so its mapping is aligned and trimmed) and through evictions.
#[test]
fn pools_in_small_and_huge_pages_keep_every_page() {
    for memory in [FrameMemory::Small, FrameMemory::Huge] {
        let pool = BufferPool::with_memory(
            Box::new(MemPageStore::new(PageSize::Kib8)),
            config(300),
            None,
            memory,
        )
        .unwrap();
        let ids: Vec<PageId> = (0..900)
            .map(|_| pool.allocate_page(PageKind::Heap).unwrap().page_id())
            .collect();
        for &id in &ids {
            fill(&pool, id);
        }
        for &id in ids.iter().rev() {
            check(&pool, id);
        }
        pool.check_invariants();
    }
}

#[test]
fn working_set_ten_times_the_pool_reads_back_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let ids: Vec<PageId> = {
        let store = FilePageStore::create(&path, PageSize::Kib8).unwrap();
        let pool = BufferPool::new(Box::new(store), config(64), None).unwrap();
        assert_eq!(pool.page_count(), 1, "page 0 exists from the start");
        let ids: Vec<PageId> = (0..700)
            .map(|_| pool.allocate_page(PageKind::Heap).unwrap().page_id())
            .collect();
        assert_eq!(ids[0], PageId(1));
        assert_eq!(pool.page_count(), 701);
        for &id in &ids {
            fill(&pool, id);
        }
        for &id in ids.iter().rev() {
            check(&pool, id);
        }
        pool.check_invariants();
        pool.flush_all().unwrap();
        assert!(pool.dirty_pages().is_empty());
        pool.check_invariants();
        ids
    };
    let store = FilePageStore::open(&path, PageSize::Kib8).unwrap();
    assert_eq!(store.page_count(), 701);
    let pool = BufferPool::new(Box::new(store), config(16), None).unwrap();
    assert_eq!(pool.page_count(), 701);
    for &id in &ids {
        check(&pool, id);
    }
    // The meta page was never written: it reads as a fresh, zero page.
    assert!(pool
        .fix_shared(PageId::META)
        .unwrap()
        .iter()
        .all(|&b| b == 0));
    pool.check_invariants();
}

#[test]
fn flipped_byte_in_the_file_is_corruption_naming_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let pool = BufferPool::new(
            Box::new(FilePageStore::create(&path, PageSize::Kib8).unwrap()),
            config(8),
            None,
        )
        .unwrap();
        for _ in 0..4 {
            let id = pool.allocate_page(PageKind::Heap).unwrap().page_id();
            fill(&pool, id);
        }
        pool.flush_all().unwrap();
    }
    // Flip one body byte of page 3, and put page 1's image where page 2 belongs.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[3 * 8192 + 1000] ^= 0x40;
    let page1 = bytes[8192..2 * 8192].to_vec();
    bytes[2 * 8192..3 * 8192].copy_from_slice(&page1);
    std::fs::write(&path, &bytes).unwrap();

    let pool = BufferPool::new(
        Box::new(FilePageStore::open(&path, PageSize::Kib8).unwrap()),
        config(8),
        None,
    )
    .unwrap();
    check(&pool, PageId(1));
    check(&pool, PageId(4));
    match pool.fix_shared(PageId(3)) {
        Err(StorageError::Corruption { page, reason }) => {
            assert_eq!(page, PageId(3));
            assert!(reason.contains("checksum"), "{reason}");
        }
        other => panic!("expected corruption, got {:?}", other.map(|g| g.page_id())),
    }
    match pool.fix_exclusive(PageId(2)) {
        Err(StorageError::Corruption { page, reason }) => {
            assert_eq!(page, PageId(2));
            assert!(reason.contains("#1"), "{reason}");
        }
        other => panic!("expected corruption, got {:?}", other.map(|g| g.page_id())),
    }
    // A failed load leaves no trace in the page table, and fails again the same way.
    pool.check_invariants();
    assert!(matches!(
        pool.fix_shared(PageId(3)),
        Err(StorageError::Corruption { .. })
    ));
}

#[test]
fn all_frames_fixed_is_pool_exhausted_until_one_is_released() {
    let pool =
        BufferPool::new(Box::new(MemPageStore::new(PageSize::Kib8)), config(4), None).unwrap();
    let mut guards: Vec<_> = (0..4)
        .map(|_| pool.allocate_page(PageKind::Heap).unwrap())
        .collect();
    let err = pool.allocate_page(PageKind::Heap).err().unwrap();
    assert!(
        matches!(err, StorageError::PoolExhausted { frames: 4 }),
        "{err}"
    );
    assert!(matches!(
        pool.fix_shared(PageId::META),
        Err(StorageError::PoolExhausted { .. })
    ));
    guards.pop();
    drop(guards);
    let g = pool.fix_shared(PageId::META).unwrap();
    assert_eq!(g.page_id(), PageId::META);
    drop(g);
    pool.check_invariants();
}

/// With latching on a read guard holds no pin: its shared latch alone keeps the evictor off
/// the frame. Pages held by read guards stay in place, byte for byte, while other fixes evict
/// everything else; a pool held entirely by read guards reports exhaustion rather than
/// waiting; and without latching (where the latch keeps nobody off) read guards pin.
#[test]
fn read_guards_keep_their_frames_through_evictions() {
    for latching in [true, false] {
        let pool = Arc::new(
            BufferPool::new(
                Box::new(MemPageStore::new(PageSize::Kib8)),
                PoolConfig {
                    latching,
                    ..config(4)
                },
                None,
            )
            .unwrap(),
        );
        let ids: Vec<PageId> = (0..12)
            .map(|_| pool.allocate_page(PageKind::Heap).unwrap().page_id())
            .collect();
        for &id in &ids {
            fill(&pool, id);
        }
        let held: Vec<_> = ids[..2]
            .iter()
            .map(|&id| pool.fix_shared(id).unwrap())
            .collect();
        // Two frames for ten pages: each fix below evicts.
        for _ in 0..3 {
            for &id in &ids[2..] {
                check(&pool, id);
            }
        }
        for (g, &id) in held.iter().zip(&ids) {
            assert_eq!(g.page_id(), id);
            for (i, &b) in g[PAGE_HEADER_SIZE..].iter().enumerate() {
                assert_eq!(
                    b,
                    pattern(id.0, i),
                    "held page {id} byte {i}, latching {latching}"
                );
            }
        }
        let more: Vec<_> = ids[2..4]
            .iter()
            .map(|&id| pool.fix_shared(id).unwrap())
            .collect();
        // On another thread, so that a fix that waits instead of failing fails the test.
        let (tx, rx) = std::sync::mpsc::channel();
        let (fixer, wanted) = (pool.clone(), ids[5]);
        std::thread::spawn(move || {
            let exhausted = matches!(
                fixer.fix_shared(wanted),
                Err(StorageError::PoolExhausted { frames: 4 })
            );
            let _ = tx.send(exhausted);
        });
        let answer = rx.recv_timeout(std::time::Duration::from_secs(20));
        assert_eq!(
            answer,
            Ok(true),
            "a fix with every frame held, latching {latching}"
        );
        drop(more);
        drop(held);
        check(&pool, ids[5]);
        pool.check_invariants();
    }
}

#[test]
fn fixing_an_unallocated_page_is_invalid() {
    let pool =
        BufferPool::new(Box::new(MemPageStore::new(PageSize::Kib8)), config(4), None).unwrap();
    assert!(matches!(
        pool.fix_shared(PageId(5)),
        Err(StorageError::Invalid(_))
    ));
    assert!(matches!(
        pool.fix_exclusive(PageId(1)),
        Err(StorageError::Invalid(_))
    ));
}

#[test]
fn fix_for_redo_creates_missing_pages_and_moves_the_allocator() {
    let pool =
        BufferPool::new(Box::new(MemPageStore::new(PageSize::Kib8)), config(4), None).unwrap();
    {
        let mut g = pool.fix_for_redo(PageId(9)).unwrap();
        assert!(g.iter().all(|&b| b == 0));
        g.range_mut(100, 3).copy_from_slice(b"abc");
        g.set_lsn(storage::Lsn(42));
    }
    assert_eq!(pool.page_count(), 10);
    assert_eq!(
        pool.allocate_page(PageKind::Heap).unwrap().page_id(),
        PageId(10)
    );
    let g = pool.fix_shared(PageId(9)).unwrap();
    assert_eq!(&g[100..103], b"abc");
    assert_eq!(g.lsn(), storage::Lsn(42));
    drop(g);
    assert!(pool.dirty_pages().contains(&(PageId(9), storage::Lsn(42))));
}

/// Page ids past the frame directory (2^26 pages; only a damaged log could name one) are
/// mapped by the latched overflow map and work the same way.
#[test]
fn page_ids_past_the_frame_directory_use_the_overflow_map() {
    let pool =
        BufferPool::new(Box::new(MemPageStore::new(PageSize::Kib8)), config(4), None).unwrap();
    let far = PageId((1 << 26) + 7);
    {
        let mut g = pool.fix_for_redo(far).unwrap();
        g.range_mut(200, 3).copy_from_slice(b"far");
    }
    // Hits, shared and exclusive, find it; a near page shares the pool with it.
    let near = pool.allocate_page(PageKind::Heap).unwrap().page_id();
    assert_eq!(near, PageId(far.0 + 1));
    assert_eq!(&pool.fix_shared(far).unwrap()[200..203], b"far");
    pool.fix_exclusive(far).unwrap().range_mut(203, 1)[0] = b'!';
    assert_eq!(&pool.fix_shared(far).unwrap()[200..204], b"far!");
    pool.check_invariants();
    assert!(pool.dirty_pages().iter().any(|&(p, _)| p == far));
}

#[test]
fn pool_without_latching_works_on_one_thread() {
    let pool = BufferPool::new(
        Box::new(MemPageStore::new(PageSize::Kib32)),
        PoolConfig {
            page_size: PageSize::Kib32,
            frames: 8,
            latching: false,
        },
        None,
    )
    .unwrap();
    assert_eq!(pool.page_size(), 32768);
    let ids: Vec<PageId> = (0..40)
        .map(|_| pool.allocate_page(PageKind::BTreeLeaf).unwrap().page_id())
        .collect();
    for &id in &ids {
        pool.fix_exclusive(id)
            .unwrap()
            .range_mut(30000, 8)
            .copy_from_slice(&id.0.to_le_bytes());
    }
    for &id in &ids {
        let g = pool.fix_shared(id).unwrap();
        assert_eq!(g[30000..30008], id.0.to_le_bytes());
        assert_eq!(g[6], PageKind::BTreeLeaf as u8);
    }
    pool.check_invariants();
}

#[test]
fn store_errors_surface_as_errors() {
    struct FailingStore;
    impl PageStore for FailingStore {
        fn read_page(&self, _: PageId, _: &mut [u8]) -> storage::StorageResult<()> {
            Err(StorageError::io(
                "read page",
                std::io::Error::other("disk gone"),
            ))
        }
        fn write_page(&self, _: PageId, _: &[u8]) -> storage::StorageResult<()> {
            Err(StorageError::io(
                "write page",
                std::io::Error::other("disk full"),
            ))
        }
        fn sync(&self) -> storage::StorageResult<()> {
            Ok(())
        }
        fn page_count(&self) -> u64 {
            3
        }
    }
    let pool = Arc::new(BufferPool::new(Box::new(FailingStore), config(2), None).unwrap());
    assert!(matches!(
        pool.fix_shared(PageId(1)),
        Err(StorageError::Io { .. })
    ));
    drop(pool.allocate_page(PageKind::Heap).unwrap());
    drop(pool.allocate_page(PageKind::Heap).unwrap());
    // Both frames are dirty and cannot be written: the next miss reports the write error.
    let err = pool.allocate_page(PageKind::Heap).err().unwrap();
    assert!(
        matches!(
            err,
            StorageError::Io {
                action: "write page",
                ..
            }
        ),
        "{err}"
    );
    assert!(pool.flush_all().is_err());
    pool.check_invariants();
}

#[cfg(feature = "counters")]
#[test]
fn counters_see_hits_misses_reads_writes_and_evictions() {
    use storage::counters;
    let pool =
        BufferPool::new(Box::new(MemPageStore::new(PageSize::Kib8)), config(2), None).unwrap();
    let ids: Vec<PageId> = (0..3)
        .map(|_| pool.allocate_page(PageKind::Heap).unwrap().page_id())
        .collect();
    // Placing page 3 wrote page 1 back (the clock's dirty victim) and evicted it: the frames
    // hold pages 2 and 3, both dirty.
    counters::reset();
    counters::set_unique_tracking(true);
    drop(pool.fix_shared(ids[2]).unwrap()); // hit
    drop(pool.fix_shared(ids[2]).unwrap()); // hit, same page
    drop(pool.fix_shared(ids[0]).unwrap()); // miss: evicts, reads
    let c = counters::snapshot();
    counters::set_unique_tracking(false);
    assert_eq!((c.fixes, c.unique_fixes, c.hits, c.misses), (3, 2, 2, 1));
    assert_eq!((c.reads, c.evictions), (1, 1));
    assert_eq!(c.writes, 1, "the victim was dirty: written back once");
    // A hit latches its frame only (the directory needs no latch); the miss latches the page
    // table and the victim frame, writes the victim back, latches both again to take it, then
    // the frame in shared mode.
    assert_eq!(c.latches, 2 + 5, "table and frame latches: {}", c.latches);
}

#[test]
fn the_pools_io_counts_every_threads_reads_and_write_backs() {
    let pool =
        BufferPool::new(Box::new(MemPageStore::new(PageSize::Kib8)), config(2), None).unwrap();
    let ids: Vec<PageId> = (0..3)
        .map(|_| pool.allocate_page(PageKind::Heap).unwrap().page_id())
        .collect();
    // Placing page 3 wrote page 1 back; nothing was read (fresh pages are not read in).
    let before = pool.io();
    assert_eq!((before.reads, before.writes), (0, 1));
    drop(pool.fix_shared(ids[2]).unwrap()); // hit: no I/O
                                            // Another thread's miss: evicts a dirty page (a write) and reads page 1 back.
    std::thread::scope(|s| {
        s.spawn(|| drop(pool.fix_shared(ids[0]).unwrap()));
    });
    let io = pool.io().since(&before);
    assert_eq!((io.reads, io.writes), (1, 1));
    assert_eq!(pool.io().evict_writes, 2, "both writes freed a victim");
    pool.flush_all().unwrap();
    let io = pool.io().since(&before);
    assert_eq!(io.writes, 2, "one dirty page left to flush");
    assert_eq!(
        (io.evict_writes, io.cleaner_writes),
        (1, 0),
        "a flush frees no victim"
    );
}

/// A page cleaner's pass writes the dirty frames the clock would take next (unpinned,
/// unlatched, not referenced since the hand passed) and nothing else; cleaners that split a
/// range write it once between them; what they wrote reads back intact.
#[test]
fn cleaning_writes_the_frames_the_clock_would_take_and_no_other() {
    let pool =
        BufferPool::new(Box::new(MemPageStore::new(PageSize::Kib8)), config(4), None).unwrap();
    let ids: Vec<PageId> = (0..4)
        .map(|_| pool.allocate_page(PageKind::Heap).unwrap().page_id())
        .collect();
    for &id in &ids {
        fill(&pool, id);
    }
    // Nothing to take yet: every frame was referenced since the hand last passed.
    assert_eq!(pool.clean_frames(0, 4, (0, 1)).unwrap(), 0);
    // A fifth page: the clock sweeps every frame (clearing the bits) and takes the first,
    // writing it back itself. Three dirty frames are left unreferenced, the new one is not.
    let fifth = pool.allocate_page(PageKind::Heap).unwrap().page_id();
    fill(&pool, fifth);
    let before = pool.io();
    assert_eq!(before.evict_writes, 1);
    // One of the three is in use (latched by a reader): left alone.
    let held = pool.fix_shared(ids[3]).unwrap();
    let hand = pool.clock_hand();
    let written =
        pool.clean_frames(hand, 4, (0, 2)).unwrap() + pool.clean_frames(hand, 4, (1, 2)).unwrap();
    assert_eq!(written, 2, "the two idle dirty frames, once");
    drop(held);
    let io = pool.io().since(&before);
    assert_eq!((io.writes, io.cleaner_writes, io.evict_writes), (2, 2, 0));
    // Written means clean: a second pass finds nothing.
    assert_eq!(pool.clean_frames(0, 4, (0, 1)).unwrap(), 0);
    // Every page reads back as filled, through evictions.
    for _ in 0..4 {
        let id = pool.allocate_page(PageKind::Heap).unwrap().page_id();
        fill(&pool, id);
    }
    for &id in ids.iter().chain([&fifth]) {
        check(&pool, id);
    }
}

/// A page store that counts the pages written to it, and keeps the pages it was told will be
/// read.
struct CountingStore {
    inner: MemPageStore,
    writes: Arc<std::sync::atomic::AtomicU64>,
    advised: Arc<std::sync::Mutex<Vec<PageId>>>,
}

impl PageStore for CountingStore {
    fn read_page(&self, id: PageId, buf: &mut [u8]) -> storage::StorageResult<()> {
        self.inner.read_page(id, buf)
    }
    fn write_page(&self, id: PageId, buf: &[u8]) -> storage::StorageResult<()> {
        self.writes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.write_page(id, buf)
    }
    fn sync(&self) -> storage::StorageResult<()> {
        self.inner.sync()
    }
    fn page_count(&self) -> u64 {
        self.inner.page_count()
    }
    fn will_need(&self, ids: &[PageId]) {
        self.advised.lock().unwrap().extend_from_slice(ids);
    }
}

/// What redo does with the pages its analysis found dirty: the advice reaches the store
/// behind the pool, and nothing enters the pool by it.
#[test]
fn the_pool_passes_advice_of_pages_to_be_read_to_its_store() {
    let advised = Arc::new(std::sync::Mutex::new(Vec::new()));
    let store = CountingStore {
        inner: MemPageStore::new(PageSize::Kib8),
        writes: Arc::default(),
        advised: advised.clone(),
    };
    let pool = BufferPool::new(Box::new(store), config(16), None).unwrap();
    let reads = pool.io().reads;
    pool.will_need(&[PageId(7), PageId(3)]);
    assert_eq!(*advised.lock().unwrap(), [PageId(7), PageId(3)]);
    assert_eq!(pool.io().reads, reads, "nothing read into the pool");
}

#[test]
fn a_miss_in_a_pool_of_dirty_frames_writes_back_one_victim_not_the_pool() {
    let writes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let written = || writes.load(std::sync::atomic::Ordering::Relaxed);
    let store = CountingStore {
        inner: MemPageStore::new(PageSize::Kib8),
        writes: writes.clone(),
        advised: Arc::default(),
    };
    let pool = BufferPool::new(Box::new(store), config(16), None).unwrap();
    let ids: Vec<PageId> = (0..16)
        .map(|_| pool.allocate_page(PageKind::Heap).unwrap().page_id())
        .collect();
    for id in &ids {
        fill(&pool, *id);
    }
    assert_eq!(written(), 0, "every frame is dirty and none was written");
    // The clock's victim is written back and then taken; before, the miss went on writing
    // back every dirty frame it passed: the whole pool.
    let extra = pool.allocate_page(PageKind::Heap).unwrap().page_id();
    assert_eq!(written(), 1);
    fill(&pool, extra);
    for id in ids.iter().chain([&extra]) {
        check(&pool, *id);
    }
    pool.check_invariants();
}
