//! `BTree::insert_with_next` against a `BTreeSet` model: the callback sees exactly the key
//! that follows the new entry (across splits and leaves emptied by deletes), is called once
//! per insert that is not a duplicate, and a refusal leaves the tree unchanged.

mod common;

use std::collections::BTreeSet;
use std::ops::Bound;

use common::{filler_key as schema_key, pool_8k as pool, tree_entries};
use proptest::prelude::*;
use storage::btree::SchemaKeyOrder;
use storage::btree::{BTree, InsertOutcome, IntKeyOrder, KeyOrder, KeyPart};
use storage::StorageError;

#[derive(Clone, Debug)]
enum Op {
    /// Insert `(key, value)`; the callback answers `accept`.
    Insert(Vec<u8>, u64, bool),
    Delete(Vec<u8>, u64),
}

/// The model: `(key, value)` pairs; a unique tree keeps one per key.
fn expected_next(
    model: &BTreeSet<(Vec<u8>, u64)>,
    key: &[u8],
    value: u64,
    unique: bool,
) -> Option<Vec<u8>> {
    let from = if unique {
        (key.to_vec(), u64::MAX)
    } else {
        (key.to_vec(), value)
    };
    model
        .range((Bound::Excluded(from), Bound::Unbounded))
        .next()
        .map(|(k, _)| k.clone())
}

fn run<K: KeyOrder>(tree: &BTree<K>, unique: bool, ops: &[Op]) {
    let mut model: BTreeSet<(Vec<u8>, u64)> = BTreeSet::new();
    for op in ops {
        match op {
            Op::Insert(k, v, accept) => {
                let duplicate = if unique {
                    model
                        .range((k.clone(), 0)..=(k.clone(), u64::MAX))
                        .next()
                        .is_some()
                } else {
                    model.contains(&(k.clone(), *v))
                };
                let want = expected_next(&model, k, *v, unique);
                let mut calls = Vec::new();
                let r = tree.insert_with_next(k, *v, |next| {
                    calls.push(next.map(<[u8]>::to_vec));
                    *accept
                });
                if duplicate {
                    assert!(matches!(r, Err(StorageError::DuplicateKey)), "{r:?}");
                    assert!(calls.is_empty(), "callback called for a duplicate");
                    continue;
                }
                assert_eq!(calls, vec![want], "next key of {k:?}");
                if *accept {
                    assert_eq!(r.unwrap(), InsertOutcome::Inserted);
                    model.insert((k.clone(), *v));
                } else {
                    assert_eq!(r.unwrap(), InsertOutcome::Blocked);
                }
            }
            Op::Delete(k, v) => {
                let present = model.remove(&(k.clone(), *v));
                assert_eq!(tree.delete(k, *v).unwrap(), present);
            }
        }
    }
    tree.check_invariants().unwrap();
    let want: Vec<_> = model.into_iter().collect();
    assert_eq!(tree_entries(tree), want);
}

fn ops(key: impl Strategy<Value = Vec<u8>> + Clone) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        6 => (key.clone(), 0u64..3, prop_oneof![4 => Just(true), 1 => Just(false)])
            .prop_map(|(k, v, a)| Op::Insert(k, v, a)),
        3 => (key, 0u64..3).prop_map(|(k, v)| Op::Delete(k, v)),
    ];
    proptest::collection::vec(op, 1..500)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn schema_tree_reports_the_next_key(
        unique in any::<bool>(),
        ops in ops((0i64..200, prop_oneof![0usize..8, 200usize..900])
            .prop_map(|(i, f)| schema_key(i, f))),
    ) {
        let order = SchemaKeyOrder::new(vec![KeyPart::Int, KeyPart::Str]);
        let tree = BTree::create(pool(64), order, unique).unwrap();
        run(&tree, unique, &ops);
    }

    #[test]
    fn int_tree_reports_the_next_key(
        ops in ops((0u64..3000).prop_map(|i| i.to_be_bytes().to_vec())),
    ) {
        let tree = BTree::create(pool(64), IntKeyOrder, true).unwrap();
        run(&tree, true, &ops);
    }
}

/// Ascending inserts split leaf after leaf; the next key is `None` every time, and deleting
/// a whole middle leaf's keys makes an insert before it look past the empty leaf.
#[test]
fn next_key_past_splits_and_empty_leaves() {
    let tree = BTree::create(pool(64), IntKeyOrder, true).unwrap();
    for i in 0..5000u64 {
        let k = (i * 10).to_be_bytes();
        let r = tree.insert_with_next(&k, i, |next| {
            assert_eq!(next, None);
            true
        });
        assert_eq!(r.unwrap(), InsertOutcome::Inserted);
    }
    assert!(tree.height().unwrap() > 1);
    for i in 100..4000u64 {
        assert!(tree.delete(&(i * 10).to_be_bytes(), i).unwrap());
    }
    let mut seen = None;
    let r = tree.insert_with_next(&995u64.to_be_bytes(), 7, |next| {
        seen = next.map(<[u8]>::to_vec);
        false
    });
    assert_eq!(r.unwrap(), InsertOutcome::Blocked);
    assert_eq!(seen, Some(40_000u64.to_be_bytes().to_vec()));
    assert_eq!(tree.get(&995u64.to_be_bytes()).unwrap(), None);
    tree.check_invariants().unwrap();
}
