//! Main-memory record store against a `HashMap` model, and under concurrent threads.

use std::collections::HashMap;
use std::sync::Arc;

use proptest::prelude::*;
use storage::memstore::{MemStore, RecordPtr};

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>),
    /// Which live record (index modulo the live count), offset, bytes.
    Write(usize, usize, Vec<u8>),
    Delete(usize),
    Read(usize),
    Reclaim,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..40).prop_map(Op::Insert),
        3 => (any::<usize>(), 0usize..40, proptest::collection::vec(any::<u8>(), 0..8))
            .prop_map(|(i, o, b)| Op::Write(i, o, b)),
        2 => any::<usize>().prop_map(Op::Delete),
        3 => any::<usize>().prop_map(Op::Read),
        1 => Just(Op::Reclaim),
    ]
}

proptest! {
    #[test]
    fn store_matches_model(ops in proptest::collection::vec(op_strategy(), 1..300), latching in any::<bool>()) {
        let mut store = MemStore::with_latching(latching);
        let mut model: HashMap<RecordPtr, Vec<u8>> = HashMap::new();
        let mut order: Vec<RecordPtr> = Vec::new(); // live pointers, for picking one
        for op in ops {
            match op {
                Op::Insert(bytes) => {
                    let p = store.insert(&bytes).unwrap();
                    prop_assert!(model.insert(p, bytes).is_none(), "address reused while live");
                    order.push(p);
                }
                Op::Write(i, offset, bytes) if !order.is_empty() => {
                    let p = order[i % order.len()];
                    let record = model.get_mut(&p).unwrap();
                    // SAFETY: a live record of this store; one thread.
                    let result = unsafe { store.write(p, offset, &bytes) };
                    if offset + bytes.len() <= record.len() {
                        prop_assert!(result.is_ok());
                        record[offset..offset + bytes.len()].copy_from_slice(&bytes);
                    } else {
                        prop_assert!(result.is_err());
                    }
                }
                Op::Delete(i) if !order.is_empty() => {
                    let p = order.swap_remove(i % order.len());
                    model.remove(&p);
                    // SAFETY: a live record of this store.
                    unsafe { store.delete(p).unwrap() };
                }
                Op::Read(i) if !order.is_empty() => {
                    let p = order[i % order.len()];
                    // SAFETY: a live record of this store; one thread.
                    let bytes = unsafe { store.read(p, |r| r.to_vec()) };
                    prop_assert_eq!(&bytes, &model[&p]);
                }
                Op::Reclaim => {
                    store.reclaim();
                    prop_assert_eq!(store.retired_len(), 0);
                }
                _ => {}
            }
            prop_assert_eq!(store.len(), model.len());
        }
        for (p, bytes) in &model {
            // SAFETY: live records of this store.
            prop_assert_eq!(unsafe { store.read(*p, |r| r.to_vec()) }, bytes.clone());
        }
    }
}

#[test]
fn threads_insert_read_update_and_delete_their_own_records() {
    let store = Arc::new(MemStore::new());
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                for i in 0..5_000u64 {
                    let p = store
                        .insert(&[t.to_le_bytes(), i.to_le_bytes()].concat())
                        .unwrap();
                    mine.push((p, i));
                    if i % 4 == 0 {
                        // SAFETY: this thread owns the record (the role record locks play).
                        unsafe { store.write(p, 8, &(i * 10).to_le_bytes()).unwrap() };
                        mine.last_mut().unwrap().1 = i * 10;
                    }
                    if i % 7 == 0 {
                        let (victim, _) = mine.swap_remove(mine.len() / 2);
                        // SAFETY: as above.
                        unsafe { store.delete(victim).unwrap() };
                    }
                }
                for &(p, expected) in &mine {
                    // SAFETY: as above.
                    let (owner, value) = unsafe {
                        store.read(p, |r| {
                            (
                                u64::from_le_bytes(r[..8].try_into().unwrap()),
                                u64::from_le_bytes(r[8..].try_into().unwrap()),
                            )
                        })
                    };
                    assert_eq!((owner, value), (t, expected));
                }
                mine.len()
            })
        })
        .collect();
    let live: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(store.len(), live);
    let deleted_per_thread = (0..5_000u64).filter(|i| i % 7 == 0).count();
    assert_eq!(store.retired_len(), 4 * deleted_per_thread);
    let mut store = Arc::try_unwrap(store).ok().unwrap();
    assert_eq!(store.reclaim(), 4 * deleted_per_thread);
    assert_eq!(store.len(), live);
}
