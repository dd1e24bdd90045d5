//! Heap file against a `HashMap` model (proptest), with pools far smaller than the data.

use std::collections::HashMap;
use std::sync::Arc;

use proptest::prelude::*;
use storage::buffer::{BufferPool, PoolConfig};
use storage::file::MemPageStore;
use storage::heap::{HeapFile, RecordId};
use storage::{PageSize, StorageError};

#[derive(Clone, Debug)]
enum Op {
    Insert(usize, u8),
    /// Update the n-th live record (mod the count) to a record of this length.
    Update(usize, usize, u8),
    UpdateInPlace(usize, u8),
    Delete(usize),
    /// Delete the n-th live record and restore it at the same id.
    DeleteRestore(usize),
    Read(usize),
}

fn record_len() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0usize..64, 3 => 64usize..900, 1 => 900usize..4000, 1 => 7000usize..8146]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (record_len(), any::<u8>()).prop_map(|(l, b)| Op::Insert(l, b)),
        3 => (any::<usize>(), record_len(), any::<u8>()).prop_map(|(i, l, b)| Op::Update(i, l, b)),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Op::UpdateInPlace(i, b)),
        2 => any::<usize>().prop_map(Op::Delete),
        1 => any::<usize>().prop_map(Op::DeleteRestore),
        2 => any::<usize>().prop_map(Op::Read),
    ]
}

fn record(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i * 13) as u8))
        .collect()
}

fn pool(frames: usize) -> Arc<BufferPool> {
    Arc::new(
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
    )
}

fn nth(model: &HashMap<RecordId, Vec<u8>>, i: usize) -> Option<RecordId> {
    if model.is_empty() {
        return None;
    }
    let mut ids: Vec<RecordId> = model.keys().copied().collect();
    ids.sort();
    Some(ids[i % ids.len()])
}

/// Runs `ops` against the model; with `usual`, on a file told its records are usually that
/// long (which only changes what a read prefetches, wherever the records really are).
fn run(ops: Vec<Op>, frames: usize, usual: Option<usize>) -> Result<(), TestCaseError> {
    let pool = pool(frames);
    let heap = HeapFile::create(pool.clone()).unwrap();
    let heap = match usual {
        Some(len) => heap.expecting_records_of(len),
        None => heap,
    };
    let mut model: HashMap<RecordId, Vec<u8>> = HashMap::new();
    let mut out = Vec::new();
    for op in ops {
        match op {
            Op::Insert(len, seed) => {
                let r = record(len, seed);
                let mut announced = None;
                let rid = heap.insert_with(&r, |rid| announced = Some(rid)).unwrap();
                prop_assert_eq!(announced, Some(rid));
                prop_assert!(
                    model.insert(rid, r).is_none(),
                    "id {} handed out twice",
                    rid
                );
            }
            Op::Update(i, len, seed) => {
                if let Some(rid) = nth(&model, i) {
                    let r = record(len, seed);
                    heap.update(rid, &r).unwrap();
                    model.insert(rid, r);
                }
            }
            Op::UpdateInPlace(i, b) => {
                if let Some(rid) = nth(&model, i) {
                    let m = model.get_mut(&rid).unwrap();
                    if !m.is_empty() {
                        let off = m.len() / 2;
                        heap.update_in_place(rid, off, &[b]).unwrap();
                        m[off] = b;
                    }
                    let end = m.len();
                    prop_assert!(matches!(
                        heap.update_in_place(rid, end, &[1]),
                        Err(StorageError::Invalid(_))
                    ));
                }
            }
            Op::Delete(i) => {
                if let Some(rid) = nth(&model, i) {
                    prop_assert!(heap.delete(rid).unwrap());
                    prop_assert!(!heap.delete(rid).unwrap());
                    model.remove(&rid);
                    prop_assert!(!heap.read(rid, &mut out).unwrap());
                }
            }
            Op::DeleteRestore(i) => {
                if let Some(rid) = nth(&model, i) {
                    prop_assert!(heap.delete(rid).unwrap());
                    heap.restore(rid, &model[&rid]).unwrap();
                    prop_assert!(
                        heap.restore(rid, b"x").is_err(),
                        "restore over a live record"
                    );
                }
            }
            Op::Read(i) => {
                if let Some(rid) = nth(&model, i) {
                    prop_assert!(heap.read(rid, &mut out).unwrap());
                    prop_assert_eq!(&out, &model[&rid]);
                    let len = heap.with_record(rid, |b| b.len()).unwrap();
                    prop_assert_eq!(len, Some(model[&rid].len()));
                }
            }
        }
    }
    heap.check_invariants().unwrap();
    // Every record reads back, and a scan sees exactly the model.
    for (rid, r) in &model {
        prop_assert!(heap.read(*rid, &mut out).unwrap());
        prop_assert_eq!(&out, r);
    }
    let mut scanned = HashMap::new();
    heap.scan(|rid, b| {
        scanned.insert(rid, b.to_vec());
        true
    })
    .unwrap();
    prop_assert_eq!(&scanned, &model);
    // Reopening rebuilds the same free-space map from the chain.
    let reopened = HeapFile::open(pool.clone(), heap.first_page()).unwrap();
    reopened.check_invariants().unwrap();
    pool.check_invariants();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn heap_matches_hash_map(ops in proptest::collection::vec(op(), 1..120)) {
        run(ops, 64, None)?;
    }

    #[test]
    fn heap_matches_hash_map_with_a_tiny_pool(ops in proptest::collection::vec(op(), 1..300)) {
        run(ops, 16, None)?;
    }

    /// The guess of where a record lies is a prefetch only: right, wrong or past the page,
    /// and on frames evicted and remapped under it, every read still returns the model's
    /// bytes.
    #[test]
    fn a_usual_record_length_changes_no_result(
        ops in proptest::collection::vec(op(), 1..300),
        usual in record_len(),
    ) {
        run(ops, 16, Some(usual))?;
    }
}
