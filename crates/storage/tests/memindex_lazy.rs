//! The unique integer `MemIndex`, whose ordered map lags its hash map until a scan merges
//! them, against a `BTreeMap` model: random inserts, deletes (of the current value or a
//! wrong one), delete-then-reinsert with a new value, lookups and scans in both directions
//! with prefix bounds, limits and early stops, interleaved so that scans find anywhere from no
//! pending key to all of them. The invariant check runs after every operation, so the lagging
//! state is checked too, not only the merged one. A threaded run checks that scans racing
//! inserts (latching on) see sorted, complete snapshots.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use common::{in_high, in_low};
use proptest::prelude::*;
use storage::btree::IntKeyOrder;
use storage::memindex::MemIndex;
use storage::StorageError;

#[derive(Clone, Debug)]
enum Op {
    Insert(u64, u64),
    /// Deletes `(key, value)`; the value may be wrong.
    Delete(u64, u64),
    /// Deletes the key's current entry, if any, and inserts it again with a new value.
    Replace(u64, u64),
    Get(u64),
    Scan {
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        reverse: bool,
        limit: usize,
        stop_after: usize,
    },
}

/// Keys that share their first byte or their last seven, so that prefix bounds of any
/// length split them.
fn key_strategy() -> impl Strategy<Value = u64> + Clone {
    (0u64..4, 0u64..24).prop_map(|(high, low)| (high << 56) | low)
}

/// A scan bound of 0 to 9 bytes: a prefix of a key, a whole key, or longer than a key.
fn bound_strategy() -> impl Strategy<Value = Bound<Vec<u8>>> {
    let bytes = (key_strategy(), 0usize..=9, any::<u8>()).prop_map(|(k, len, extra)| {
        let mut b = k.to_be_bytes().to_vec();
        b.push(extra);
        b.truncate(len);
        b
    });
    prop_oneof![
        1 => Just(Bound::Unbounded),
        3 => bytes.clone().prop_map(Bound::Included),
        3 => bytes.prop_map(Bound::Excluded),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let value = 0u64..3;
    prop_oneof![
        8 => (key_strategy(), value.clone()).prop_map(|(k, v)| Op::Insert(k, v)),
        2 => (key_strategy(), value.clone()).prop_map(|(k, v)| Op::Delete(k, v)),
        2 => (key_strategy(), 10u64..20).prop_map(|(k, v)| Op::Replace(k, v)),
        1 => key_strategy().prop_map(Op::Get),
        2 => (bound_strategy(), bound_strategy(), any::<bool>(),
              prop_oneof![Just(usize::MAX), 1usize..8], prop_oneof![Just(usize::MAX), 1usize..6])
            .prop_map(|(lo, hi, reverse, limit, stop_after)| Op::Scan { lo, hi, reverse, limit, stop_after }),
    ]
}

/// What a scan must return: the model's entries within bounds, in order, cut at `limit` and
/// at the `stop_after`th entry (the one `f` refused is still counted).
fn model_scan(
    model: &BTreeMap<u64, u64>,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
    reverse: bool,
    limit: usize,
    stop_after: usize,
) -> Vec<(u64, u64)> {
    let within = |(k, _): &(&u64, &u64)| {
        let bytes = k.to_be_bytes();
        in_low(&bytes, lo) && in_high(&bytes, hi)
    };
    let take = limit.min(stop_after);
    let entries: Vec<_> = if reverse {
        model.iter().rev().filter(within).take(take).collect()
    } else {
        model.iter().filter(within).take(take).collect()
    };
    entries.into_iter().map(|(&k, &v)| (k, v)).collect()
}

fn index_scan(
    index: &MemIndex<IntKeyOrder>,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
    reverse: bool,
    limit: usize,
    stop_after: usize,
) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let n = index
        .scan(
            lo.as_ref().map(|b| &b[..]),
            hi.as_ref().map(|b| &b[..]),
            reverse,
            limit,
            |k, v| {
                out.push((u64::from_be_bytes(k.try_into().expect("8-byte key")), v));
                out.len() < stop_after
            },
        )
        .unwrap();
    assert_eq!(n, out.len(), "scan returns the entries it visited");
    out
}

fn run(index: &MemIndex<IntKeyOrder>, ops: &[Op]) {
    run_from(index, BTreeMap::new(), ops);
}

/// [`run`] on an index that already holds `model`.
fn run_from(index: &MemIndex<IntKeyOrder>, mut model: BTreeMap<u64, u64>, ops: &[Op]) {
    for op in ops {
        match op {
            Op::Insert(k, v) => {
                let r = index.insert(&k.to_be_bytes(), *v);
                if model.contains_key(k) {
                    assert!(matches!(r, Err(StorageError::DuplicateKey)), "{r:?}");
                } else {
                    r.unwrap();
                    model.insert(*k, *v);
                }
            }
            Op::Delete(k, v) => {
                let expected = model.get(k) == Some(v);
                assert_eq!(index.delete(&k.to_be_bytes(), *v).unwrap(), expected);
                if expected {
                    model.remove(k);
                }
            }
            Op::Replace(k, v) => {
                if let Some(old) = model.remove(k) {
                    assert!(index.delete(&k.to_be_bytes(), old).unwrap());
                }
                index.insert(&k.to_be_bytes(), *v).unwrap();
                model.insert(*k, *v);
            }
            Op::Get(k) => {
                assert_eq!(index.get(&k.to_be_bytes()).unwrap(), model.get(k).copied());
            }
            Op::Scan {
                lo,
                hi,
                reverse,
                limit,
                stop_after,
            } => {
                assert_eq!(
                    index_scan(index, lo, hi, *reverse, *limit, *stop_after),
                    model_scan(&model, lo, hi, *reverse, *limit, *stop_after),
                    "scan {lo:?}..{hi:?} reverse {reverse} limit {limit} stop after {stop_after}"
                );
            }
        }
        index.check_invariants().unwrap();
        assert_eq!(index.len(), model.len());
    }
    let everything = model_scan(
        &model,
        &Bound::Unbounded,
        &Bound::Unbounded,
        false,
        usize::MAX,
        usize::MAX,
    );
    let scanned = index_scan(
        index,
        &Bound::Unbounded,
        &Bound::Unbounded,
        false,
        usize::MAX,
        usize::MAX,
    );
    assert_eq!(scanned, everything);
    index.check_invariants().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn lazy_unique_int_memindex_matches_model(
        latching in any::<bool>(),
        ops in proptest::collection::vec(op_strategy(), 1..300),
    ) {
        let index = MemIndex::new(IntKeyOrder, true, latching);
        run(&index, &ops);
    }
}

/// Loads keys `0..n` (value `k * 3`), as a bulk load would, and ends the load.
fn loaded(n: u64, latching: bool) -> (MemIndex<IntKeyOrder>, BTreeMap<u64, u64>) {
    let index = MemIndex::new(IntKeyOrder, true, latching);
    let mut model = BTreeMap::new();
    for k in 0..n {
        index.insert(&k.to_be_bytes(), k * 3).unwrap();
        model.insert(k, k * 3);
    }
    index.merge_pending();
    (index, model)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The same operations on an index whose load left it dense: the keys near zero fall in
    /// its first leaf, the others in new leaves far apart; `u64::MAX` as a value (which a
    /// dense map cannot hold) sends it back to a hash map mid-run.
    #[test]
    fn dense_unique_int_memindex_matches_model(
        latching in any::<bool>(),
        max_value in any::<bool>(),
        ops in proptest::collection::vec(op_strategy(), 1..300),
    ) {
        let (index, model) = loaded(1_000, latching);
        prop_assert!(index.is_dense(), "1,000 keys in a row fill their leaves");
        let mut ops = ops;
        if max_value {
            ops.insert(ops.len() / 2, Op::Replace(3, u64::MAX));
        }
        run_from(&index, model, &ops);
    }
}

#[test]
fn a_load_chooses_by_density_and_sparse_inserts_go_back_to_a_hash_map() {
    let (sparse, _) = {
        let index = MemIndex::new(IntKeyOrder, true, false);
        for i in 0..2_000u64 {
            index.insert(&(i << 20).to_be_bytes(), i).unwrap();
        }
        index.merge_pending();
        (index, ())
    };
    assert!(!sparse.is_dense(), "one key per 2^20 stays hashed");
    let (small, _) = loaded(100, false);
    assert!(
        !small.is_dense(),
        "fewer keys than a leaf holds stay hashed"
    );

    let (index, mut model) = loaded(5_000, false);
    assert!(index.is_dense());
    // A key per leaf from here: the fill falls below a sixteenth and the index goes back.
    let mut i = 0u64;
    while index.is_dense() {
        i += 1;
        let k = (1 << 40) + (i << 12);
        index.insert(&k.to_be_bytes(), i).unwrap();
        model.insert(k, i);
        assert!(i < 1_000, "still dense after {i} sparse inserts");
    }
    assert!(
        i > 64,
        "went back after {i} inserts, before judging more than a few leaves"
    );
    index.check_invariants().unwrap();
    let all = index_scan(
        &index,
        &Bound::Unbounded,
        &Bound::Unbounded,
        false,
        usize::MAX,
        usize::MAX,
    );
    assert_eq!(all, model.into_iter().collect::<Vec<_>>());
}

#[test]
fn long_runs_without_scans_then_one_scan_match_the_model() {
    // Thousands of inserts, deletes and reinserts with no scan (compactions included), then
    // every kind of scan.
    let index = MemIndex::new(IntKeyOrder, true, false);
    let mut model = BTreeMap::new();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for round in 0..40_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = x % 600;
        if let Some(old) = model.remove(&k) {
            assert!(index.delete(&k.to_be_bytes(), old).unwrap());
        } else {
            index.insert(&k.to_be_bytes(), round).unwrap();
            model.insert(k, round);
        }
    }
    index.check_invariants().unwrap();
    for (reverse, limit) in [
        (false, usize::MAX),
        (true, usize::MAX),
        (false, 7),
        (true, 7),
    ] {
        let lo = Bound::Included(100u64.to_be_bytes().to_vec());
        let hi = Bound::Excluded(400u64.to_be_bytes().to_vec());
        assert_eq!(
            index_scan(&index, &lo, &hi, reverse, limit, usize::MAX),
            model_scan(&model, &lo, &hi, reverse, limit, usize::MAX)
        );
    }
    index.check_invariants().unwrap();
}

#[test]
fn scans_racing_inserts_see_sorted_growing_snapshots() {
    let index = race_scans_and_inserts(MemIndex::new(IntKeyOrder, true, true), 0);
    assert!(
        !index.is_dense(),
        "nothing chose a dense map: no load ended"
    );
}

/// The same race on an index that a load left dense: the writers append past the loaded keys
/// (new leaves), a reader looks keys up, and the scanner sees every snapshot sorted.
#[test]
fn scans_racing_inserts_on_a_dense_index_see_sorted_growing_snapshots() {
    let (index, _) = loaded(2_000, true);
    assert!(index.is_dense());
    let index = race_scans_and_inserts(index, 2_000);
    assert!(index.is_dense(), "appends in key order keep it dense");
}

/// Three writers insert keys from `base` on (`k → k + 1`, interleaved among them) while a
/// scanner checks that each full scan is sorted, right and no smaller than the last; the
/// index holds keys `0..base` with values `k * 3` to begin with. Returns the index.
fn race_scans_and_inserts(index: MemIndex<IntKeyOrder>, base: u64) -> Arc<MemIndex<IntKeyOrder>> {
    const WRITERS: u64 = 3;
    const PER_WRITER: u64 = 3_000;
    let index = Arc::new(index);
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let index = index.clone();
            std::thread::spawn(move || {
                for i in 0..PER_WRITER {
                    let k = base + i * WRITERS + w;
                    index.insert(&k.to_be_bytes(), k + 1).unwrap();
                    let probe = base + i / 2 * WRITERS + w;
                    assert_eq!(index.get_int(probe), Some(probe + 1));
                }
            })
        })
        .collect();
    let total = (base + WRITERS * PER_WRITER) as usize;
    let scanner = {
        let index = index.clone();
        std::thread::spawn(move || {
            let mut seen = 0;
            while seen < total {
                let mut keys = Vec::new();
                index
                    .scan(
                        Bound::Unbounded,
                        Bound::Unbounded,
                        false,
                        usize::MAX,
                        |k, v| {
                            let k = u64::from_be_bytes(k.try_into().unwrap());
                            assert_eq!(v, if k < base { k * 3 } else { k + 1 });
                            keys.push(k);
                            true
                        },
                    )
                    .unwrap();
                assert!(keys.windows(2).all(|w| w[0] < w[1]), "scan out of order");
                assert!(keys.len() >= seen, "a later scan saw fewer entries");
                seen = keys.len();
            }
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    scanner.join().unwrap();
    assert_eq!(index.len(), total);
    index.check_invariants().unwrap();
    index
}
