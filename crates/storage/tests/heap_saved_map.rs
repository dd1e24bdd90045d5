//! A heap file opened with a saved free-space map (`storage::heap::saved`): exact after any
//! changes since the map was saved, reading only the pages changed or added.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use storage::buffer::{BufferPool, PoolConfig};
use storage::file::MemPageStore;
use storage::heap::{HeapFile, RecordId, SavedHeap};
use storage::page::PageRedo;
use storage::{Lsn, PageId, PageLog, PageSize, StorageResult};

/// A log that remembers which pages it was handed changes of: what recovery's analysis pass
/// finds in the log after a checkpoint's begin.
#[derive(Default)]
struct ChangedPages(Mutex<(u64, HashSet<PageId>)>);

impl ChangedPages {
    /// Forgets the pages so far (a checkpoint begins), returns nothing.
    fn begin(&self) {
        self.0.lock().unwrap().1.clear();
    }

    fn pages(&self) -> HashSet<PageId> {
        self.0.lock().unwrap().1.clone()
    }
}

impl PageLog for ChangedPages {
    fn log_redo(&self, pages: &[PageRedo<'_>]) -> Lsn {
        let mut s = self.0.lock().unwrap();
        s.1.extend(pages.iter().map(|p| p.page));
        s.0 += 1;
        Lsn(s.0)
    }
    fn flush_to(&self, _: Lsn) -> StorageResult<()> {
        Ok(())
    }
}

fn pool(log: Arc<ChangedPages>) -> Arc<BufferPool> {
    Arc::new(
        BufferPool::new(
            Box::new(MemPageStore::new(PageSize::Kib8)),
            PoolConfig {
                page_size: PageSize::Kib8,
                frames: 64,
                latching: true,
            },
            Some(log),
        )
        .unwrap(),
    )
}

/// The file opened again from `saved` and the pages changed since it was saved, checked
/// against its pages (the map exact) and against a walk of the chain; the pages it read.
fn reopened_from(
    pool: &Arc<BufferPool>,
    heap: &HeapFile,
    saved: &SavedHeap,
    log: &ChangedPages,
) -> u64 {
    let changed = log.pages();
    let (opened, read) = HeapFile::open_saved(pool.clone(), heap.first_page(), saved, |p| {
        changed.contains(&p)
    })
    .unwrap();
    opened.check_invariants().unwrap();
    let walked = HeapFile::open(pool.clone(), heap.first_page()).unwrap();
    assert_eq!(opened.pages(), walked.pages());
    // It read the changed pages it knew and the pages added since, nothing else.
    let known: HashSet<PageId> = saved.pages.iter().map(|e| e.0).collect();
    let added = walked.pages() - known.len();
    assert_eq!(read as usize, changed.intersection(&known).count() + added);
    read
}

#[test]
fn a_saved_map_takes_only_the_pages_changed_or_added_since() {
    let log = Arc::new(ChangedPages::default());
    let pool = pool(log.clone());
    let heap = HeapFile::create(pool.clone()).unwrap();
    let rids: Vec<RecordId> = (0..400u32)
        .map(|i| heap.insert(&[i as u8; 300]).unwrap())
        .collect();
    log.begin();
    let saved = heap.free_space_to_save().unwrap();
    assert_eq!(saved.first, heap.first_page());
    assert_eq!(saved.pages.len(), heap.pages());
    // This thread's insertion page reads as full in the map; saved, it has its real room.
    let last = rids.last().unwrap().page;
    let (_, room) = saved.pages.iter().find(|e| e.0 == last).unwrap();
    assert!(*room > 0, "the claimed page saved as full");

    // Unchanged since: nothing to read.
    assert_eq!(reopened_from(&pool, &heap, &saved, &log), 0);

    // A delete on one page, and enough inserts for new pages linked into the chain.
    assert!(heap.delete(rids[3]).unwrap());
    for i in 0..200u32 {
        heap.insert(&[i as u8; 500]).unwrap();
    }
    assert!(heap.pages() > saved.pages.len() + 5);
    let read = reopened_from(&pool, &heap, &saved, &log);
    assert!(
        read < heap.pages() as u64,
        "read {read} of {} pages",
        heap.pages()
    );
}

#[test]
fn a_map_without_the_file_s_first_page_is_refused() {
    let log = Arc::new(ChangedPages::default());
    let pool = pool(log.clone());
    let heap = HeapFile::create(pool.clone()).unwrap();
    heap.insert(&[1; 100]).unwrap();
    let mut saved = heap.free_space_to_save().unwrap();
    let other = HeapFile::create(pool.clone()).unwrap();
    assert!(HeapFile::open_saved(pool.clone(), other.first_page(), &saved, |_| false).is_err());
    saved.pages.clear();
    assert!(HeapFile::open_saved(pool.clone(), heap.first_page(), &saved, |_| false).is_err());
}

#[test]
fn threads_inserting_while_the_map_is_saved_leave_it_exact() {
    let log = Arc::new(ChangedPages::default());
    let pool = pool(log.clone());
    let heap = Arc::new(HeapFile::create(pool.clone()).unwrap());
    for i in 0..100u32 {
        heap.insert(&[i as u8; 200]).unwrap();
    }
    for _ in 0..20 {
        let writers: Vec<_> = (0..3)
            .map(|t| {
                let heap = heap.clone();
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..150u32 {
                        mine.push(heap.insert(&[(t * 7 + i) as u8; 180]).unwrap());
                        if i % 5 == 0 {
                            let rid = mine.swap_remove(i as usize % mine.len());
                            assert!(heap.delete(rid).unwrap());
                        }
                    }
                })
            })
            .collect();
        std::thread::yield_now();
        log.begin();
        let saved = heap.free_space_to_save().unwrap();
        for w in writers {
            w.join().unwrap();
        }
        reopened_from(&pool, &heap, &saved, &log);
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(usize),
    Update(usize, usize),
    Delete(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let len = prop_oneof![3 => 1usize..200, 2 => 200usize..3000, 1 => 3000usize..8000];
    prop_oneof![
        4 => len.clone().prop_map(Op::Insert),
        3 => (any::<usize>(), len).prop_map(|(i, l)| Op::Update(i, l)),
        2 => any::<usize>().prop_map(Op::Delete),
    ]
}

fn apply(heap: &HeapFile, live: &mut Vec<RecordId>, op: Op) {
    match op {
        Op::Insert(len) => live.push(heap.insert(&vec![7; len]).unwrap()),
        Op::Update(i, len) if !live.is_empty() => {
            heap.update(live[i % live.len()], &vec![9; len]).unwrap()
        }
        Op::Delete(i) if !live.is_empty() => {
            let rid = live.swap_remove(i % live.len());
            assert!(heap.delete(rid).unwrap());
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever happened before the map was saved and after, the file opened from it has the
    /// map a walk of the chain builds.
    #[test]
    fn a_saved_map_and_the_changes_since_give_the_walk_s_map(
        before in prop::collection::vec(op(), 0..120),
        after in prop::collection::vec(op(), 0..120),
    ) {
        let log = Arc::new(ChangedPages::default());
        let pool = pool(log.clone());
        let heap = HeapFile::create(pool.clone()).unwrap();
        let mut live = Vec::new();
        for op in before {
            apply(&heap, &mut live, op);
        }
        log.begin();
        let saved = heap.free_space_to_save().unwrap();
        for op in after {
            apply(&heap, &mut live, op);
        }
        reopened_from(&pool, &heap, &saved, &log);
    }
}
