//! Hash index against `HashMap`, and under concurrent threads.

use std::collections::HashMap;
use std::sync::Arc;

use proptest::prelude::*;
use storage::hash::HashIndex;
use storage::StorageError;

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, u64),
    Remove(Vec<u8>),
    Get(Vec<u8>),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    // Small key space so that operations collide; lengths cross the 8-byte chunking.
    let key = proptest::collection::vec(0u8..4, 0..11);
    prop_oneof![
        (key.clone(), any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
        key.clone().prop_map(Op::Remove),
        key.prop_map(Op::Get),
    ]
}

proptest! {
    #[test]
    fn byte_keys_match_hashmap(ops in proptest::collection::vec(op_strategy(), 1..400), latching in any::<bool>()) {
        let index = HashIndex::new(2, latching);
        let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
        for op in ops {
            match op {
                Op::Insert(k, v) => {
                    let result = index.insert(&k, v);
                    if let std::collections::hash_map::Entry::Vacant(e) = model.entry(k) {
                        prop_assert!(result.is_ok());
                        e.insert(v);
                    } else {
                        prop_assert!(matches!(result, Err(StorageError::DuplicateKey)));
                    }
                }
                Op::Remove(k) => prop_assert_eq!(index.remove(&k), model.remove(&k)),
                Op::Get(k) => prop_assert_eq!(index.get(&k), model.get(&k).copied()),
            }
        }
        prop_assert_eq!(index.len(), model.len());
        index.check_invariants().unwrap();
        for (k, v) in &model {
            prop_assert_eq!(index.get(k), Some(*v));
        }
    }

    #[test]
    fn u64_keys_match_hashmap(ops in proptest::collection::vec((0u8..3, 0u64..64, any::<u64>()), 1..600)) {
        let index = HashIndex::new_u64(1, false);
        let mut model: HashMap<u64, u64> = HashMap::new();
        for (kind, k, v) in ops {
            match kind {
                0 => {
                    let ok = index.insert_u64(k, v).is_ok();
                    prop_assert_eq!(ok, !model.contains_key(&k));
                    model.entry(k).or_insert(v);
                }
                1 => prop_assert_eq!(index.remove_u64(k), model.remove(&k)),
                _ => prop_assert_eq!(index.get_u64(k), model.get(&k).copied()),
            }
        }
        prop_assert_eq!(index.len(), model.len());
        index.check_invariants().unwrap();
    }
}

#[test]
fn threads_insert_remove_and_read_disjoint_keys() {
    let index = Arc::new(HashIndex::new_u64(16, true));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let index = index.clone();
            std::thread::spawn(move || {
                for i in 0..20_000u64 {
                    let key = i * 4 + t;
                    index.insert_u64(key, key * 2).unwrap();
                    assert_eq!(index.get_u64(key), Some(key * 2));
                    if i % 3 == 0 {
                        assert_eq!(index.remove_u64(key), Some(key * 2));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    index.check_invariants().unwrap();
    let expected = (0..20_000u64).filter(|i| i % 3 != 0).count() * 4;
    assert_eq!(index.len(), expected);
    for key in 0..80_000u64 {
        let present = (key / 4) % 3 != 0;
        assert_eq!(index.get_u64(key), present.then_some(key * 2), "key {key}");
    }
}

#[test]
fn threads_racing_on_the_same_keys_insert_each_once() {
    let index = Arc::new(HashIndex::new(0, true));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let index = index.clone();
            std::thread::spawn(move || {
                let mut won = 0;
                for i in 0..5_000u64 {
                    if index.insert(&i.to_le_bytes(), t).is_ok() {
                        won += 1;
                    }
                }
                won
            })
        })
        .collect();
    let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(total, 5_000);
    assert_eq!(index.len(), 5_000);
    index.check_invariants().unwrap();
}
