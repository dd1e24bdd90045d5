//! Hinted B+-tree inserts and lookups (`LeafHint`): a hint may be stale in every way (its leaf
//! split or left the tree, the key belongs elsewhere, the root went up a level, another hint's
//! inserts moved the entries around), and the tree must still end up exactly as with plain
//! inserts, and every lookup answer as a plain one. Keys that arrive in ascending order at one
//! place must skip the descent.

mod common;

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use common::{filler_key as schema_key, pool_8k as pool, tree_entries as entries};
use proptest::prelude::*;
use storage::btree::{
    BTree, InsertOutcome, IntKeyOrder, KeyOrder, KeyPart, LeafHint, SchemaKeyOrder,
};
use storage::{counters, StorageError};

#[derive(Clone, Debug)]
enum Op {
    /// Insert through hint `h` (of three); with a next-key callback answering `Some(accept)`.
    Hinted(usize, Vec<u8>, u64, Option<bool>),
    /// Insert without a hint.
    Plain(Vec<u8>, u64),
    Delete(Vec<u8>, u64),
    /// Look up through hint `h` (of three).
    Get(usize, Vec<u8>),
}

/// Applies `ops` to `tree` and to a model, checking every outcome, the next key each
/// callback saw, the tree's structure and its entries at the end.
fn run<K: KeyOrder>(tree: &BTree<K>, unique: bool, ops: &[Op]) {
    let mut model: BTreeSet<(Vec<u8>, u64)> = BTreeSet::new();
    let mut hints = [LeafHint::default(); 3];
    let present = |model: &BTreeSet<(Vec<u8>, u64)>, k: &Vec<u8>, v: u64| {
        if unique {
            model
                .range((k.clone(), 0)..=(k.clone(), u64::MAX))
                .next()
                .is_some()
        } else {
            model.contains(&(k.clone(), v))
        }
    };
    for op in ops {
        match op {
            Op::Hinted(h, k, v, callback) => {
                let duplicate = present(&model, k, *v);
                let inserted = match callback {
                    None => match tree.insert_hinted(k, *v, &mut hints[*h]) {
                        Err(StorageError::DuplicateKey) => false,
                        r => {
                            r.unwrap();
                            true
                        }
                    },
                    Some(accept) => {
                        let from = if unique {
                            (k.clone(), u64::MAX)
                        } else {
                            (k.clone(), *v)
                        };
                        let want = model
                            .range((Bound::Excluded(from), Bound::Unbounded))
                            .next()
                            .map(|(k, _)| k.clone());
                        let mut seen = Vec::new();
                        let r = tree.insert_with_next_hinted(k, *v, &mut hints[*h], |next| {
                            seen.push(next.map(<[u8]>::to_vec));
                            *accept
                        });
                        match r {
                            Err(StorageError::DuplicateKey) => false,
                            r => {
                                assert_eq!(seen, vec![want], "next key of {k:?}");
                                let outcome = r.unwrap();
                                assert_eq!(outcome == InsertOutcome::Inserted, *accept);
                                *accept
                            }
                        }
                    }
                };
                if duplicate {
                    assert!(!inserted, "duplicate {k:?} inserted");
                } else if inserted {
                    model.insert((k.clone(), *v));
                }
            }
            Op::Plain(k, v) => {
                let duplicate = present(&model, k, *v);
                match tree.insert(k, *v) {
                    Err(StorageError::DuplicateKey) => assert!(duplicate),
                    r => {
                        r.unwrap();
                        assert!(!duplicate);
                        model.insert((k.clone(), *v));
                    }
                }
            }
            Op::Delete(k, v) => {
                let was = model.remove(&(k.clone(), *v));
                assert_eq!(tree.delete(k, *v).unwrap(), was);
            }
            Op::Get(h, k) => {
                let want = model
                    .range((k.clone(), 0)..=(k.clone(), u64::MAX))
                    .next()
                    .map(|(_, v)| *v);
                assert_eq!(tree.get_hinted(k, &mut hints[*h]).unwrap(), want, "{k:?}");
            }
        }
    }
    tree.check_invariants().unwrap();
    assert_eq!(entries(tree), model.into_iter().collect::<Vec<_>>());
}

/// Runs of ascending keys from a few places (what the hint is for) mixed with random keys,
/// plain inserts and deletes.
fn ops(key: impl Strategy<Value = Vec<u8>> + Clone) -> impl Strategy<Value = Vec<Op>> {
    let callback = prop_oneof![2 => Just(None), 3 => Just(Some(true)), 1 => Just(Some(false))];
    let op = prop_oneof![
        8 => (0usize..3, key.clone(), 0u64..3, callback).prop_map(|(h, k, v, c)| Op::Hinted(h, k, v, c)),
        2 => (key.clone(), 0u64..3).prop_map(|(k, v)| Op::Plain(k, v)),
        2 => (key.clone(), 0u64..3).prop_map(|(k, v)| Op::Delete(k, v)),
        4 => (0usize..3, key).prop_map(|(h, k)| Op::Get(h, k)),
    ];
    proptest::collection::vec(op, 1..600)
}

/// `count` ascending integer keys from `start`, through hint `h`.
fn int_run(h: usize, start: u64, count: u64) -> Vec<Op> {
    (start..start + count)
        .map(|i| Op::Hinted(h, i.to_be_bytes().to_vec(), i, Some(true)))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn hinted_schema_tree_matches_the_model(
        unique in any::<bool>(),
        ops in ops((0i64..300, prop_oneof![0usize..8, 100usize..700])
            .prop_map(|(i, f)| schema_key(i, f))),
    ) {
        let order = SchemaKeyOrder::new(vec![KeyPart::Int, KeyPart::Str]);
        let tree = BTree::create(pool(128), order, unique).unwrap();
        run(&tree, unique, &ops);
    }

    #[test]
    fn hinted_int_tree_matches_the_model(
        ops in ops((0u64..5000).prop_map(|i| i.to_be_bytes().to_vec())),
    ) {
        let tree = BTree::create(pool(128), IntKeyOrder, true).unwrap();
        run(&tree, true, &ops);
    }

    /// Three hints appending at three places of one tree, interleaved at random, with random
    /// inserts and deletes between them: leaves split under hints that name them.
    #[test]
    fn interleaved_ascending_runs_match_the_model(
        runs in proptest::collection::vec((0usize..3, 1u64..400), 1..30),
        noise in ops((0u64..30_000).prop_map(|i| i.to_be_bytes().to_vec())),
    ) {
        let mut next = [0u64, 10_000, 20_000];
        let mut all = Vec::new();
        let mut noise = noise.into_iter();
        for (h, count) in runs {
            all.extend(int_run(h, next[h], count));
            next[h] += count;
            all.extend(noise.by_ref().take(5));
        }
        let tree = BTree::create(pool(256), IntKeyOrder, true).unwrap();
        run(&tree, true, &all);
    }
}

/// Ascending keys at ten places (the lines of orders in ten districts): each place's keys
/// after the first go through that place's hint to the leaf of the one before, visiting that
/// one node instead of descending from the root (all but the few inserts that split a leaf).
#[test]
fn ascending_runs_skip_the_descent() {
    // One-node inserts among the lines after each order's first.
    let one_node_inserts = |hinted: bool| {
        let tree = BTree::create(pool(512), IntKeyOrder, true).unwrap();
        // Existing keys in every district, so a district's end is inside the tree.
        for d in 0..10u64 {
            for i in 0..3000u64 {
                tree.insert(&(d << 32 | i).to_be_bytes(), i).unwrap();
            }
        }
        assert!(tree.height().unwrap() >= 2);
        let mut one_node = 0;
        for order in 0..200u64 {
            let d = order * 7 % 10;
            let mut hint = LeafHint::default();
            for line in 0..10u64 {
                let key = (d << 32 | (3000 + order * 10 + line)).to_be_bytes();
                let before = counters::snapshot();
                if hinted {
                    tree.insert_hinted(&key, line, &mut hint).unwrap();
                } else {
                    tree.insert(&key, line).unwrap();
                }
                if line > 0 && (counters::snapshot() - before).node_visits == 1 {
                    one_node += 1;
                }
            }
        }
        tree.check_invariants().unwrap();
        assert_eq!(tree.count().unwrap(), 30_000 + 2_000);
        one_node
    };
    assert_eq!(
        one_node_inserts(false),
        0,
        "a plain insert descends from the root"
    );
    let hinted = one_node_inserts(true);
    assert!(
        hinted >= 1_700,
        "{hinted} of 1,800 hinted inserts visited one node"
    );
}

/// Lookups of ascending keys spread over a tree (Stock-Level's sorted items) through one
/// hint read the leaf of the lookup before whenever the key lies in it, one node instead of
/// a descent; the answers are a plain lookup's, present keys and absent ones alike. Under
/// the pool without latching there is no version to validate a read by, and every lookup
/// descends.
#[test]
fn ascending_lookups_skip_the_descent_where_their_leaf_is_the_last_ones() {
    let tree = BTree::create(pool(512), IntKeyOrder, true).unwrap();
    for i in 0..20_000u64 {
        tree.insert(&(i * 2).to_be_bytes(), i).unwrap();
    }
    assert!(tree.height().unwrap() >= 2);
    let mut hint = LeafHint::default();
    let (mut one_node, mut lookups) = (0, 0);
    // Every 37th key, present (even) and absent (odd) ones alternately.
    for k in (0..40_000u64).step_by(37) {
        let before = counters::snapshot();
        let got = tree.get_hinted(&k.to_be_bytes(), &mut hint).unwrap();
        if (counters::snapshot() - before).node_visits == 1 {
            one_node += 1;
        }
        lookups += 1;
        assert_eq!(got, (k % 2 == 0).then_some(k / 2), "key {k}");
        assert_eq!(got, tree.get(&k.to_be_bytes()).unwrap());
    }
    // Some 290 entries a leaf of 8 KiB: about 8 lookups a leaf, all but the first through it.
    assert!(
        one_node * 10 >= lookups * 7,
        "{one_node} of {lookups} hinted lookups visited one node"
    );
    let plain = BTree::create(pool(512), IntKeyOrder, true).unwrap();
    for i in 0..20_000u64 {
        plain.insert(&(i * 2).to_be_bytes(), i).unwrap();
    }
    let before = counters::snapshot();
    for k in (0..40_000u64).step_by(37) {
        plain.get(&k.to_be_bytes()).unwrap();
    }
    let visits = (counters::snapshot() - before).node_visits;
    assert!(
        visits >= 2 * lookups as u64,
        "{visits} node visits for {lookups} plain lookups"
    );
}

/// A hint whose leaf split (through another hint or none) or whose key lies elsewhere is
/// not used for that key: the entry goes where a descent puts it.
#[test]
fn stale_hints_fall_back_to_a_descent() {
    let tree = BTree::create(pool(256), IntKeyOrder, true).unwrap();
    let mut hint = LeafHint::default();
    tree.insert_hinted(&100u64.to_be_bytes(), 0, &mut hint)
        .unwrap();
    let first = hint.get().expect("a hint after an insert").0;
    assert_eq!(first, tree.root(), "the only leaf is the root");
    // The root splits (the root page goes up a level) under the hint.
    for i in 0..3000u64 {
        tree.insert(&(1000 + i).to_be_bytes(), i).unwrap();
    }
    assert!(tree.height().unwrap() > 1);
    tree.insert_hinted(&101u64.to_be_bytes(), 1, &mut hint)
        .unwrap();
    // (After an insert that split its leaf the hint names no leaf; otherwise not the root.)
    assert_ne!(hint.get().map(|h| h.0), Some(tree.root()));
    // A key far to the right through the same hint: another leaf.
    tree.insert_hinted(&5000u64.to_be_bytes(), 2, &mut hint)
        .unwrap();
    // Split the hinted leaf by plain inserts just behind the hint's key, then insert
    // through the stale hint.
    for i in 0..2000u64 {
        tree.insert(&(5001 + i).to_be_bytes(), i).unwrap();
    }
    tree.insert_hinted(&7100u64.to_be_bytes(), 3, &mut hint)
        .unwrap();
    tree.check_invariants().unwrap();
    assert_eq!(tree.get(&7100u64.to_be_bytes()).unwrap(), Some(3));
    assert_eq!(tree.get(&101u64.to_be_bytes()).unwrap(), Some(1));
    // A duplicate through a hint is reported as without one.
    assert!(matches!(
        tree.insert_hinted(&7100u64.to_be_bytes(), 4, &mut hint),
        Err(StorageError::DuplicateKey)
    ));
}

/// A leaf bounded by a separator longer than a hint keeps is not hinted: its inserts are
/// still correct, they just descend each time.
#[test]
fn long_separators_leave_no_hint() {
    let order = SchemaKeyOrder::new(vec![KeyPart::Int, KeyPart::Str]);
    let tree = BTree::create(pool(128), order, true).unwrap();
    for i in 0..200 {
        tree.insert(&schema_key(i * 2, 300), 0).unwrap();
    }
    assert!(tree.height().unwrap() > 1);
    let mut hint = LeafHint::default();
    tree.insert_hinted(&schema_key(1, 300), 1, &mut hint)
        .unwrap();
    assert_eq!(hint.get(), None);
    tree.insert_hinted(&schema_key(3, 300), 1, &mut hint)
        .unwrap();
    tree.check_invariants().unwrap();
    assert_eq!(tree.count().unwrap(), 202);
}

/// Four threads append at four places of one tree through their own hints while the leaves
/// split under them; every key arrives, and the tree is well formed.
#[test]
fn concurrent_hinted_appends() {
    let tree = Arc::new(BTree::create(pool(1024), IntKeyOrder, true).unwrap());
    for t in 0..4u64 {
        tree.insert(&(t << 32 | u32::MAX as u64).to_be_bytes(), 0)
            .unwrap();
    }
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let tree = &tree;
            s.spawn(move || {
                let mut hint = LeafHint::default();
                for i in 0..5000u64 {
                    let key = (t << 32 | i).to_be_bytes();
                    let r = tree.insert_with_next_hinted(&key, i, &mut hint, |_| true);
                    assert_eq!(r.unwrap(), InsertOutcome::Inserted);
                }
            });
        }
    });
    tree.check_invariants().unwrap();
    assert_eq!(tree.count().unwrap(), 4 * 5001);
    for t in 0..4u64 {
        for i in (0..5000u64).step_by(97) {
            assert_eq!(tree.get(&(t << 32 | i).to_be_bytes()).unwrap(), Some(i));
        }
    }
}
