//! Ordered indexes against a `BTreeSet` model: the B+-tree on both key paths (unique and
//! non-unique, 8 and 32 KiB pages, pools smaller than the tree) and the main-memory index, all
//! through one harness.

mod common;

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use common::{in_high, in_low};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use storage::btree::{encode_key, BTree, IntKeyOrder, KeyField, KeyOrder, KeyPart, SchemaKeyOrder};
use storage::buffer::{BufferPool, PoolConfig};
use storage::file::MemPageStore;
use storage::memindex::MemIndex;
use storage::{PageSize, StorageError, StorageResult};

/// What the harness needs of an ordered index.
trait OrderedIndex {
    fn insert(&self, key: &[u8], value: u64) -> StorageResult<()>;
    fn delete(&self, key: &[u8], value: u64) -> StorageResult<bool>;
    fn get(&self, key: &[u8]) -> StorageResult<Option<u64>>;
    fn scan_into(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
        stop_after: usize,
    ) -> StorageResult<Vec<(Vec<u8>, u64)>>;
    fn check(&self);
}

impl<K: KeyOrder> OrderedIndex for BTree<K> {
    fn insert(&self, key: &[u8], value: u64) -> StorageResult<()> {
        BTree::insert(self, key, value)
    }
    fn delete(&self, key: &[u8], value: u64) -> StorageResult<bool> {
        BTree::delete(self, key, value)
    }
    fn get(&self, key: &[u8]) -> StorageResult<Option<u64>> {
        BTree::get(self, key)
    }
    fn scan_into(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
        stop_after: usize,
    ) -> StorageResult<Vec<(Vec<u8>, u64)>> {
        let mut out = Vec::new();
        let n = self.scan(lo, hi, reverse, limit, |k, v| {
            out.push((k.to_vec(), v));
            out.len() < stop_after
        })?;
        assert_eq!(n, out.len(), "scan returns the entries it visited");
        Ok(out)
    }
    fn check(&self) {
        self.check_invariants().unwrap();
    }
}

impl<K: KeyOrder> OrderedIndex for MemIndex<K> {
    fn insert(&self, key: &[u8], value: u64) -> StorageResult<()> {
        MemIndex::insert(self, key, value)
    }
    fn delete(&self, key: &[u8], value: u64) -> StorageResult<bool> {
        MemIndex::delete(self, key, value)
    }
    fn get(&self, key: &[u8]) -> StorageResult<Option<u64>> {
        MemIndex::get(self, key)
    }
    fn scan_into(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
        stop_after: usize,
    ) -> StorageResult<Vec<(Vec<u8>, u64)>> {
        let mut out = Vec::new();
        let n = self.scan(lo, hi, reverse, limit, |k, v| {
            out.push((k.to_vec(), v));
            out.len() < stop_after
        })?;
        assert_eq!(n, out.len(), "scan returns the entries it visited");
        Ok(out)
    }
    fn check(&self) {
        self.check_invariants().unwrap();
    }
}

/// The reference: `(key, value)` pairs; keys are prefix-free encodings, so tuple order is the
/// index's byte order of `key ++ value`.
struct Model {
    unique: bool,
    set: BTreeSet<(Vec<u8>, u64)>,
}

impl Model {
    fn insert(&mut self, key: &[u8], value: u64) -> bool {
        let present = if self.unique {
            self.get(key).is_some()
        } else {
            self.set.contains(&(key.to_vec(), value))
        };
        !present && self.set.insert((key.to_vec(), value))
    }
    fn delete(&mut self, key: &[u8], value: u64) -> bool {
        self.set.remove(&(key.to_vec(), value))
    }
    fn get(&self, key: &[u8]) -> Option<u64> {
        self.set
            .range((key.to_vec(), 0)..=(key.to_vec(), u64::MAX))
            .next()
            .map(|(_, v)| *v)
    }
    fn scan(
        &self,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
        reverse: bool,
        limit: usize,
        stop_after: usize,
    ) -> Vec<(Vec<u8>, u64)> {
        let hits = self
            .set
            .iter()
            .filter(|(k, _)| in_low(k, lo) && in_high(k, hi))
            .cloned();
        let take = limit.min(stop_after);
        if reverse {
            hits.rev().take(take).collect()
        } else {
            hits.take(take).collect()
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, u64),
    Delete(Vec<u8>, u64),
    Get(Vec<u8>),
    /// Every entry within the bounds deleted, one by one, ascending or descending: a drained
    /// range, which empties runs of leaves (parents' leftmost children, whole inner nodes).
    DeleteRange {
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        descending: bool,
    },
    Scan {
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        reverse: bool,
        limit: usize,
        stop_after: usize,
    },
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(p) => Bound::Included(p),
        Bound::Excluded(p) => Bound::Excluded(p),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn apply(index: &dyn OrderedIndex, model: &mut Model, op: &Op) {
    match op {
        Op::Insert(k, v) => {
            let expected = model.insert(k, *v);
            match index.insert(k, *v) {
                Ok(()) => assert!(expected, "insert of {k:?} should have been a duplicate"),
                Err(StorageError::DuplicateKey) => assert!(!expected, "spurious duplicate {k:?}"),
                Err(e) => panic!("insert failed: {e}"),
            }
        }
        Op::Delete(k, v) => assert_eq!(index.delete(k, *v).unwrap(), model.delete(k, *v)),
        Op::Get(k) => assert_eq!(index.get(k).unwrap(), model.get(k), "get {k:?}"),
        Op::DeleteRange { lo, hi, descending } => {
            let mut doomed = model.scan(lo, hi, false, usize::MAX, usize::MAX);
            if *descending {
                doomed.reverse();
            }
            for (k, v) in doomed {
                assert!(model.delete(&k, v));
                assert!(index.delete(&k, v).unwrap(), "delete of {k:?} in a range");
            }
            index.check();
        }
        Op::Scan {
            lo,
            hi,
            reverse,
            limit,
            stop_after,
        } => {
            let got = index
                .scan_into(as_ref(lo), as_ref(hi), *reverse, *limit, *stop_after)
                .unwrap();
            let expected = model.scan(lo, hi, *reverse, *limit, *stop_after);
            assert_eq!(
                got, expected,
                "scan {lo:?}..{hi:?} reverse={reverse} limit={limit}"
            );
        }
    }
}

fn run(index: &dyn OrderedIndex, unique: bool, ops: &[Op]) {
    let mut model = Model {
        unique,
        set: BTreeSet::new(),
    };
    for op in ops {
        apply(index, &mut model, op);
    }
    index.check();
    let all = Op::Scan {
        lo: Bound::Unbounded,
        hi: Bound::Unbounded,
        reverse: false,
        limit: usize::MAX,
        stop_after: usize::MAX,
    };
    apply(index, &mut model, &all);
}

fn pool(page_size: PageSize, frames: usize) -> Arc<BufferPool> {
    pool_latched(page_size, frames, true)
}

fn pool_latched(page_size: PageSize, frames: usize, latching: bool) -> Arc<BufferPool> {
    let config = PoolConfig {
        page_size,
        frames,
        latching,
    };
    Arc::new(BufferPool::new(Box::new(MemPageStore::new(page_size)), config, None).unwrap())
}

// ---- key generators ----

/// Schema keys `(Int, Str)` with a long filler so that a few hundred entries split nodes.
fn schema_key(i: i64, letter: u8, filler: usize) -> Vec<u8> {
    let mut s = vec![letter];
    s.extend(vec![b'x'; filler]);
    let mut out = Vec::new();
    encode_key(&[KeyField::Int(i), KeyField::Str(&s)], &mut out).unwrap();
    out
}

fn schema_order() -> SchemaKeyOrder {
    SchemaKeyOrder::new(vec![KeyPart::Int, KeyPart::Str])
}

fn schema_key_strategy() -> impl Strategy<Value = Vec<u8>> + Clone {
    (-2i64..2, b'a'..b'd', prop_oneof![0usize..4, 0usize..1200])
        .prop_map(|(i, l, f)| schema_key(i, l, f))
}

/// Integer keys varying in the top and the bottom bytes, so prefixes of any length matter.
fn int_key_strategy() -> impl Strategy<Value = Vec<u8>> + Clone {
    (0u64..3, 0u64..2000).prop_map(|(a, b)| ((a << 56) | b).to_be_bytes().to_vec())
}

fn bound_strategy(key: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Bound<Vec<u8>>> {
    (0u8..3, key, 0usize..12).prop_map(|(kind, k, cut)| {
        let p = k[..cut.min(k.len())].to_vec();
        match kind {
            0 => Bound::Unbounded,
            1 => Bound::Included(p),
            _ => Bound::Excluded(p),
        }
    })
}

fn op_strategy(key: impl Strategy<Value = Vec<u8>> + Clone) -> impl Strategy<Value = Op> {
    let value = 0u64..4;
    prop_oneof![
        6 => (key.clone(), value.clone()).prop_map(|(k, v)| Op::Insert(k, v)),
        2 => (key.clone(), value).prop_map(|(k, v)| Op::Delete(k, v)),
        1 => key.clone().prop_map(Op::Get),
        1 => (bound_strategy(key.clone()), bound_strategy(key.clone()), any::<bool>())
            .prop_map(|(lo, hi, descending)| Op::DeleteRange { lo, hi, descending }),
        1 => (bound_strategy(key.clone()), bound_strategy(key), any::<bool>(),
              prop_oneof![Just(usize::MAX), 0usize..20], prop_oneof![Just(usize::MAX), 1usize..10])
            .prop_map(|(lo, hi, reverse, limit, stop_after)| Op::Scan { lo, hi, reverse, limit, stop_after }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn schema_tree_matches_model(
        unique in any::<bool>(),
        latching in any::<bool>(),
        ops in proptest::collection::vec(op_strategy(schema_key_strategy()), 1..400),
    ) {
        let pool = pool_latched(PageSize::Kib8, 64, latching);
        let tree = BTree::create(pool, schema_order(), unique).unwrap();
        run(&tree, unique, &ops);
    }

    /// A tree of three levels first (some 1,400 long keys), then random operations: ranges
    /// drained out of it take whole inner nodes out of the tree.
    #[test]
    fn a_loaded_schema_tree_drained_in_ranges_matches_model(
        unique in any::<bool>(),
        ops in proptest::collection::vec(op_strategy(schema_key_strategy()), 1..60),
    ) {
        let tree = BTree::create(pool(PageSize::Kib8, 256), schema_order(), unique).unwrap();
        let load: Vec<Op> = (-2i64..2)
            .flat_map(|i| (b'a'..b'd').flat_map(move |l| (0..1200).step_by(10).map(move |f| (i, l, f))))
            .map(|(i, l, f)| Op::Insert(schema_key(i, l, f), f as u64 % 4))
            .chain(ops)
            .collect();
        run(&tree, unique, &load);
    }

    #[test]
    fn int_tree_matches_model(
        unique in any::<bool>(),
        ops in proptest::collection::vec(op_strategy(int_key_strategy()), 1..2500),
    ) {
        let tree = BTree::create(pool(PageSize::Kib8, 64), IntKeyOrder, unique).unwrap();
        run(&tree, unique, &ops);
    }

    #[test]
    fn schema_memindex_matches_model(
        unique in any::<bool>(),
        ops in proptest::collection::vec(op_strategy(schema_key_strategy()), 1..400),
    ) {
        let index = MemIndex::new(schema_order(), unique, true);
        run(&index, unique, &ops);
    }

    #[test]
    fn int_memindex_matches_model(
        unique in any::<bool>(),
        ops in proptest::collection::vec(op_strategy(int_key_strategy()), 1..1000),
    ) {
        let index = MemIndex::new(IntKeyOrder, unique, false);
        run(&index, unique, &ops);
    }
}

/// Random operations at scale, in a pool far smaller than the tree: nodes are evicted and read
/// back all the time.
fn large_random_run(page_size: PageSize, frames: usize, unique: bool, key_count: u64, seed: u64) {
    let tree = BTree::create(pool(page_size, frames), IntKeyOrder, unique).unwrap();
    let mut model = Model {
        unique,
        set: BTreeSet::new(),
    };
    let mut rng = SmallRng::seed_from_u64(seed);
    let before = storage::counters::snapshot();
    for i in 0..key_count {
        // Keys inserted in a scrambled order; every fifth one is also deleted later.
        let k = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 8)
            .to_be_bytes()
            .to_vec();
        apply(&tree, &mut model, &Op::Insert(k.clone(), i % 3));
        if rng.gen_ratio(1, 5) {
            let victim = model
                .set
                .iter()
                .nth(rng.gen_range(0..model.set.len()))
                .cloned();
            if let Some((k, v)) = victim {
                apply(&tree, &mut model, &Op::Delete(k, v));
            }
        }
        if i % 2000 == 0 {
            let lo = Bound::Included(k[..3].to_vec());
            for reverse in [false, true] {
                apply(
                    &tree,
                    &mut model,
                    &Op::Scan {
                        lo: lo.clone(),
                        hi: Bound::Unbounded,
                        reverse,
                        limit: 300,
                        stop_after: usize::MAX,
                    },
                );
            }
        }
    }
    tree.check_invariants().unwrap();
    assert_eq!(tree.count().unwrap(), model.set.len());
    assert!(tree.height().unwrap() >= 2);
    let used = storage::counters::snapshot() - before;
    if cfg!(feature = "counters") {
        // The tree outgrew the pool: nodes were evicted and read back.
        assert!(used.evictions > 0 && used.reads > 0, "{used:?}");
        assert!(used.node_visits >= key_count * 2);
    }
    for (k, v) in model.set.iter().step_by(7) {
        if unique {
            assert_eq!(tree.get(k).unwrap(), Some(*v));
        }
    }
    // Full scans both ways.
    for reverse in [false, true] {
        apply(
            &tree,
            &mut model,
            &Op::Scan {
                lo: Bound::Unbounded,
                hi: Bound::Unbounded,
                reverse,
                limit: usize::MAX,
                stop_after: usize::MAX,
            },
        );
    }
}

#[test]
fn twenty_thousand_keys_through_32_frames_of_8_kib() {
    large_random_run(PageSize::Kib8, 32, true, 20_000, 1);
}

#[test]
fn non_unique_tree_in_a_small_pool() {
    large_random_run(PageSize::Kib8, 32, false, 12_000, 2);
}

#[test]
fn thirty_two_kib_pages_split_too() {
    large_random_run(PageSize::Kib32, 16, true, 20_000, 3);
}

#[test]
fn long_string_keys_build_a_deep_tree_on_32_kib_pages() {
    let tree = BTree::create(pool(PageSize::Kib32, 32), schema_order(), false).unwrap();
    let mut model = Model {
        unique: false,
        set: BTreeSet::new(),
    };
    for i in 0..3000u64 {
        let key = schema_key(
            (i % 7) as i64,
            b'a' + (i % 5) as u8,
            (i as usize * 37) % 4000,
        );
        apply(&tree, &mut model, &Op::Insert(key, i));
    }
    tree.check_invariants().unwrap();
    assert!(tree.height().unwrap() >= 3);
    let prefix = schema_key(3, b'c', 0)[..9].to_vec(); // Int 3, then "c..."
    for reverse in [false, true] {
        apply(
            &tree,
            &mut model,
            &Op::Scan {
                lo: Bound::Included(prefix.clone()),
                hi: Bound::Included(prefix.clone()),
                reverse,
                limit: usize::MAX,
                stop_after: usize::MAX,
            },
        );
    }
}

#[test]
fn root_page_never_moves_and_tree_reopens() {
    let pool = pool(PageSize::Kib8, 64);
    let tree = BTree::create(pool.clone(), IntKeyOrder, true).unwrap();
    let root = tree.root();
    for k in 0..5000u64 {
        tree.insert(&k.to_be_bytes(), k).unwrap();
    }
    assert_eq!(tree.root(), root);
    drop(tree);
    let reopened = BTree::open(pool, root, IntKeyOrder, true);
    reopened.check_invariants().unwrap();
    assert_eq!(reopened.get(&4321u64.to_be_bytes()).unwrap(), Some(4321));
    assert_eq!(reopened.count().unwrap(), 5000);
}

#[test]
fn oversized_and_malformed_keys_are_refused() {
    let tree = BTree::create(pool(PageSize::Kib8, 16), schema_order(), true).unwrap();
    let big = vec![1u8; tree.max_key_len() + 1];
    assert!(matches!(
        tree.insert(&big, 1),
        Err(StorageError::KeyTooLarge { .. })
    ));
    tree.insert(&vec![1u8; tree.max_key_len()], 1).unwrap();
    let ints = BTree::create(pool(PageSize::Kib8, 16), IntKeyOrder, true).unwrap();
    assert!(matches!(
        ints.insert(&[1, 2, 3], 1),
        Err(StorageError::Invalid(_))
    ));
}

#[test]
fn indexes_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<BTree<IntKeyOrder>>();
    assert_send_sync::<BTree<SchemaKeyOrder>>();
    assert_send_sync::<MemIndex<SchemaKeyOrder>>();
    assert_send_sync::<storage::HashIndex>();
    assert_send_sync::<storage::MemStore>();
}
