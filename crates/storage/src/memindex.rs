//! The main-memory ordered index of the ladder's `page-access=off` rung: an ordered map from
//! encoded keys straight to record pointers, with no pages, frames or node latches.
//!
//! It offers the operations and the scan contract of [`crate::btree::BTree`] (unique and
//! non-unique, prefix bounds, both directions), so the engine can swap one for the other.
//!
//! ```text
//!   MemIndex<K> ── Latch ── Map::Bytes     BTreeMap<key bytes, value>          (generic keys)
//!                           Map::Int       IntMap                              (IntKeyOrder, unique)
//!                           Map::Dense     DenseMap                            (the same, keys dense)
//!                           Map::IntMulti  BTreeSet<u128 = key << 64 | value>  (IntKeyOrder, non-unique)
//!
//!   IntMap:  points   FxHashMap<u64, value>   every entry: the source of truth
//!            pending  Vec<u64>                keys inserted since the last merge (may repeat,
//!               │                             may name keys deleted since)
//!               │ merge: sort, dedup, keep the keys `points` still holds, with its values
//!               ▼        (first scan after inserts, under the exclusive latch)
//!            ordered  BTreeMap<u64, value>    the merged entries, for scans
//! ```
//!
//! Byte keys compare with `memcmp`, which the order-preserving encoding
//! ([`crate::btree::keys`]) makes equal to the logical order; a non-unique byte index stores
//! `key ++ value` (8 bytes big-endian) like the B+-tree. Integer keys ([`KeyOrder::FIXED_U64`])
//! take the fast path: the map compares integers.
//!
//! A unique integer index (`IntMap`) answers point operations (lookups, an insert's duplicate
//! check, deletes) from a hash map, one probe each, and keeps its ordered map *lazily*: an
//! insert costs one hash insert and one `Vec` push, and the ordered map is brought up to date
//! only when something needs order — a scan (the first after inserts merges the pending keys).
//! Many workloads (the TPC-C paper mix among them) insert into indexes they never scan, and a
//! B-tree insert there was a tenth of a transaction's instructions. A delete removes the key
//! from both maps at once (cheap when the key is still only pending); a pending key that was
//! deleted since is dropped at merge time. Invariants, checked by
//! [`MemIndex::check_invariants`], as sets of `(key, value)`:
//!
//! - `ordered ⊆ points`, and no pending key is in `ordered` (a key is pushed only when absent
//!   from `points`, hence from `ordered`, and reaches `ordered` only by a merge, which empties
//!   `pending`);
//! - `ordered ∪ {(k, points[k]) : k ∈ pending, k ∈ points} == points`; after a merge `pending`
//!   is empty and `ordered == points`.
//!
//! So that `pending` stays bounded when a workload inserts and deletes but never scans, an
//! insert that finds it longer than `2 × points + PENDING_SLACK` compacts it (sort, dedup, drop
//! the keys `points` no longer holds) without touching `ordered`: afterwards it is no longer
//! than `points`, so compactions cost O(log n) per insert amortised.
//!
//! One latch guards the whole map (disabled when latching is off): the rung this index serves
//! runs partitioned or single-threaded, and `std`'s B-tree is not concurrent. Lookups and scans
//! take it shared, changes exclusive; a scan that finds pending keys takes it exclusive and
//! merges *and* scans under that one acquisition, so no insert can slip in between.
//!
//! A bulk load leaves every loaded key pending; [`MemIndex::merge_pending`] merges them when
//! the load ends, so that the first scan of a measured run does not pay for the whole load.
//!
//! **Dense keys.** At that same point a unique integer index whose keys fill at least
//! `DENSE_FILL` (a quarter) of the 512-key leaves they need becomes a `DenseMap` (`Map::Dense`): a slot
//! per key, in leaves kept in key order, so it needs neither `pending` nor `ordered`, and
//! inserts in key order write beside the previous one (see `dense_map` for what that buys).
//! It goes back to an `IntMap` if its fill drops below `dense_map::SPARSE_FILL` (judged over
//! more than a few leaves) or a value `DenseMap` cannot hold (`u64::MAX`) is inserted; an index
//! empty or sparse when its load ends stays an `IntMap`.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use rustc_hash::FxHashSet;

use crate::dense_map::{self, DenseMap};
use crate::int_hash::IntHash;

use crate::btree::keys::{KeyOrder, KeyRange};
use crate::error::{StorageError, StorageResult};
use crate::latch::{Latch, LatchWriteGuard};

/// Pending keys an insert tolerates beyond twice the entry count before it compacts them.
const PENDING_SLACK: usize = 1024;

/// A merge rebuilds the ordered map from one sorted pass, instead of inserting key by key,
/// when the pending keys number at least `1 / REBUILD_FRACTION` of the merged entries.
const REBUILD_FRACTION: usize = 8;

/// Capacity `pending` keeps after a merge, so that alternating inserts and scans do not
/// reallocate it, while a load's worth of keys is given back.
const PENDING_KEPT_CAPACITY: usize = 1024;

/// The fill of [`DenseMap`] leaves at which a loaded unique integer index switches to one
/// (entries per leaf slot, as a fraction); it goes back to a hash map below
/// `dense_map::SPARSE_FILL`, a quarter of this, so a table near the line does not flip.
const DENSE_FILL: (usize, usize) = (1, 4);

/// A unique integer index: a hash map of every entry and an ordered map that lags behind it by
/// the keys in `pending` (see the module documentation for the invariants).
#[derive(Default)]
struct IntMap {
    /// The entries merged so far, for scans.
    ordered: BTreeMap<u64, u64>,
    /// Every entry.
    points: IntHash,
    /// Keys inserted since the last merge, in insertion order; some may have been deleted
    /// since, and a key deleted and inserted again appears twice.
    pending: Vec<u64>,
}

impl IntMap {
    /// Adds `k → value` unless `k` is present; returns whether it was added.
    #[inline]
    fn insert(&mut self, k: u64, value: u64) -> bool {
        if !self.points.insert_new(k, value) {
            return false;
        }
        self.pending.push(k);
        if self.pending.len() > 2 * self.points.len() + PENDING_SLACK {
            self.compact();
        }
        true
    }

    /// Removes `k` if it maps to `value`; returns whether it did.
    fn remove(&mut self, k: u64, value: u64) -> bool {
        if self.points.get(k) != Some(value) {
            return false;
        }
        self.points.remove(k);
        // Absent (a cheap miss) when `k` is still only pending; the pending key itself is
        // dropped by the next merge or compaction.
        self.ordered.remove(&k);
        true
    }

    /// Sorts and dedups `pending` and drops the keys `points` no longer holds; `ordered` is
    /// untouched. Afterwards `pending.len() == points.len() - ordered.len()`.
    fn compact(&mut self) {
        self.pending.sort_unstable();
        self.pending.dedup();
        let points = &self.points;
        self.pending.retain(|k| points.contains_key(*k));
    }

    /// Brings `ordered` up to date: every pending key `points` still holds goes in, with the
    /// value `points` has for it; `pending` is emptied. Afterwards `ordered == points`.
    fn merge(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_unstable();
        pending.dedup();
        let points = &self.points;
        let fresh = pending
            .iter()
            .filter_map(|&k| points.get(k).map(|v| (k, v)));
        if pending.len() * REBUILD_FRACTION >= self.ordered.len() {
            // Both sides are sorted and their keys disjoint: one merge pass, then
            // `BTreeMap`'s bulk build (its sort finds the input sorted).
            let old = std::mem::take(&mut self.ordered);
            self.ordered = merge_sorted(old.into_iter(), fresh).collect();
        } else {
            for (k, v) in fresh {
                self.ordered.insert(k, v);
            }
        }
        pending.clear();
        pending.shrink_to(PENDING_KEPT_CAPACITY);
        self.pending = pending;
    }

    /// The invariants of the module documentation; the reason of the first one broken.
    fn check(&self) -> Result<(), &'static str> {
        if self
            .ordered
            .iter()
            .any(|(k, v)| self.points.get(*k) != Some(*v))
        {
            return Err("the ordered map holds an entry the hash map does not");
        }
        if self.pending.iter().any(|k| self.ordered.contains_key(k)) {
            return Err("a pending key is already in the ordered map");
        }
        let pending: FxHashSet<u64> = self.pending.iter().copied().collect();
        if self
            .points
            .iter()
            .any(|(k, _)| !self.ordered.contains_key(&k) && !pending.contains(&k))
        {
            return Err("an entry is neither in the ordered map nor pending");
        }
        self.points
            .check()
            .map_err(|_| "the hash map's probe invariants are broken")
    }
}

/// The union of two ascending sequences with disjoint keys, ascending.
fn merge_sorted(
    a: impl Iterator<Item = (u64, u64)>,
    b: impl Iterator<Item = (u64, u64)>,
) -> impl Iterator<Item = (u64, u64)> {
    let mut a = a.peekable();
    let mut b = b.peekable();
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if x.0 <= y.0 => a.next(),
        (Some(_), Some(_)) => b.next(),
        (Some(_), None) => a.next(),
        (None, _) => b.next(),
    })
}

/// Explicitly tagged: without `repr`, the tag hides in a niche of `IntMap`'s `Vec` and every
/// lookup pays a few instructions to decode it.
#[repr(u8)]
enum Map {
    Bytes(BTreeMap<Vec<u8>, u64>),
    Int(IntMap),
    /// A unique integer index whose keys fill [`DenseMap`] leaves densely (chosen by
    /// [`MemIndex::merge_pending`], given back to `Int` when they stop doing so).
    Dense(DenseMap),
    IntMulti(BTreeSet<u128>),
}

impl Map {
    /// Switches a merged unique integer map whose keys would fill at least [`DENSE_FILL`] of
    /// the [`DenseMap`] leaves they need (and at least one leaf's worth) to a `DenseMap`.
    fn densify_if_dense(&mut self) {
        let Map::Int(m) = self else {
            return;
        };
        debug_assert!(m.pending.is_empty(), "densify an unmerged map");
        let len = m.ordered.len();
        // The keys are in order, so each leaf's keys are together.
        let mut leaves = 0;
        let mut last = None;
        for leaf_key in m.ordered.keys().map(|k| k >> dense_map::LEAF_BITS) {
            leaves += usize::from(last != Some(leaf_key));
            last = Some(leaf_key);
        }
        let dense = len >= dense_map::LEAF_SLOTS
            && len * DENSE_FILL.1 >= leaves * dense_map::LEAF_SLOTS * DENSE_FILL.0
            && m.ordered.values().all(|&v| DenseMap::storable(v));
        if dense {
            let mut d = DenseMap::default();
            for (&k, &v) in &m.ordered {
                d.insert_new(k, v);
            }
            *self = Map::Dense(d);
        }
    }

    /// Gives a [`Map::Dense`] back to a hash map (its ordered map built from the leaves, in
    /// one sorted pass, nothing pending).
    #[cold]
    fn back_to_hash(&mut self) {
        let Map::Dense(d) = self else {
            return;
        };
        let mut m = IntMap::default();
        for (k, v) in d.iter() {
            m.points.insert_new(k, v);
        }
        m.ordered = d.iter().collect();
        *self = Map::Int(m);
    }
}

/// An in-memory ordered index from encoded keys to `u64` values.
pub struct MemIndex<K: KeyOrder> {
    order: K,
    unique: bool,
    /// Protects the map: shared for lookups and scans, exclusive for inserts, deletes and the
    /// scans that first merge a unique integer index's pending keys.
    map: Latch<Map>,
}

impl<K: KeyOrder> MemIndex<K> {
    /// The map, latched shared (counted: every thread latches it).
    #[inline]
    fn map_read(&self) -> crate::latch::LatchReadGuard<'_, Map> {
        crate::shared::bump(crate::shared::Place::MemIndex);
        self.map.read()
    }

    /// The map, latched exclusively.
    #[inline]
    fn map_write(&self) -> crate::latch::LatchWriteGuard<'_, Map> {
        crate::shared::bump(crate::shared::Place::MemIndex);
        self.map.write()
    }
}

/// Reads an 8-byte integer key.
fn int_key(key: &[u8]) -> StorageResult<u64> {
    key.try_into().map(u64::from_be_bytes).map_err(|_| {
        StorageError::Invalid(format!(
            "an integer-keyed index takes 8-byte keys, not {}",
            key.len()
        ))
    })
}

/// `bytes` as a big-endian integer of `width` bytes, zero-padded on the right (`bytes` at most
/// `width` long).
fn padded(bytes: &[u8], width: usize) -> u128 {
    let mut buf = [0u8; 16];
    buf[16 - width..16 - width + bytes.len()].copy_from_slice(bytes);
    u128::from_be_bytes(buf)
}

/// The integer range `[lo, hi)` of `width`-byte keys equal to the byte range `range`; `hi`
/// None means unbounded, and None overall means empty.
fn int_range(range: &KeyRange, width: usize) -> Option<(u128, Option<u128>)> {
    let max = if width == 16 {
        u128::MAX
    } else {
        (1u128 << (8 * width)) - 1
    };
    // A bound longer than the key: keys equal to its first `width` bytes are its prefixes,
    // hence smaller than it.
    let lo = match &range.lo {
        None => 0,
        Some(b) if b.len() <= width => padded(b, width),
        Some(b) => {
            let x = padded(&b[..width], width);
            if x == max {
                return None;
            }
            x + 1
        }
    };
    let hi = match &range.hi {
        None => None,
        Some(h) if h.len() <= width => Some(padded(h, width)),
        Some(h) => {
            let x = padded(&h[..width], width);
            (x < max).then_some(x + 1)
        }
    };
    match hi {
        Some(h) if lo >= h => None,
        _ => Some((lo, hi)),
    }
}

/// Calls `f` on up to `limit` entries of `iter`; returns how many it was called on.
fn visit<B: AsRef<[u8]>>(
    iter: impl Iterator<Item = (B, u64)>,
    limit: usize,
    f: &mut impl FnMut(&[u8], u64) -> bool,
) -> usize {
    let mut count = 0;
    for (key, value) in iter {
        count += 1;
        if !f(key.as_ref(), value) || count >= limit {
            break;
        }
    }
    count
}

impl<K: KeyOrder> MemIndex<K> {
    /// An empty index; `K::FIXED_U64` orders get the integer map.
    pub fn new(order: K, unique: bool, latching: bool) -> Self {
        let map = match (K::FIXED_U64, unique) {
            (true, true) => Map::Int(IntMap::default()),
            (true, false) => Map::IntMulti(BTreeSet::new()),
            (false, _) => Map::Bytes(BTreeMap::new()),
        };
        MemIndex {
            order,
            unique,
            map: Latch::new(map, latching),
        }
    }

    pub fn order(&self) -> &K {
        &self.order
    }

    pub fn is_unique(&self) -> bool {
        self.unique
    }

    fn stored_key(&self, key: &[u8], value: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(key.len() + 8);
        out.extend_from_slice(key);
        if !self.unique {
            out.extend_from_slice(&value.to_be_bytes());
        }
        out
    }

    /// Point lookup: the value of `key` (non-unique: of the first entry with this key).
    pub fn get(&self, key: &[u8]) -> StorageResult<Option<u64>> {
        let map = self.map_read();
        Ok(match &*map {
            Map::Int(m) => m.points.get(int_key(key)?),
            Map::Dense(d) => d.get(int_key(key)?),
            Map::IntMulti(s) => {
                let k = (int_key(key)? as u128) << 64;
                s.range(k..=k | u64::MAX as u128).next().map(|&e| e as u64)
            }
            Map::Bytes(m) if self.unique => m.get(key).copied(),
            Map::Bytes(m) => m
                .range(self.stored_key(key, 0)..=self.stored_key(key, u64::MAX))
                .next()
                .map(|(_, &v)| v),
        })
    }

    /// Starts loading what a point lookup or insert of the integer key `key` reads first (see
    /// [`crate::prefetch`]): its slot in a unique integer index (hash or dense); nothing for
    /// the other maps, whose first reads are a chain of nodes.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        match &*self.map_read() {
            Map::Int(m) => m.points.prefetch(key),
            Map::Dense(d) => d.prefetch(key),
            _ => {}
        }
    }

    /// Point lookup of an integer key (as [`MemIndex::get`] of its 8 big-endian bytes), on
    /// the hash or dense map of a unique integer index; `None` from the other maps.
    #[inline(always)]
    pub fn get_int(&self, key: u64) -> Option<u64> {
        match &*self.map_read() {
            Map::Int(m) => m.points.get(key),
            Map::Dense(d) => d.get(key),
            _ => None,
        }
    }

    /// Adds an entry; [`StorageError::DuplicateKey`] if the key (unique) or the pair
    /// (non-unique) is present.
    pub fn insert(&self, key: &[u8], value: u64) -> StorageResult<()> {
        let mut map = self.map_write();
        if matches!(&*map, Map::Dense(_)) && !DenseMap::storable(value) {
            map.back_to_hash();
        }
        let fresh = match &mut *map {
            Map::Int(m) => m.insert(int_key(key)?, value),
            Map::Dense(d) => {
                let fresh = d.insert_new(int_key(key)?, value);
                if d.is_sparse() {
                    map.back_to_hash();
                }
                fresh
            }
            Map::IntMulti(s) => s.insert(((int_key(key)? as u128) << 64) | value as u128),
            Map::Bytes(m) => match m.entry(self.stored_key(key, value)) {
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(value);
                    true
                }
                std::collections::btree_map::Entry::Occupied(_) => false,
            },
        };
        if fresh {
            Ok(())
        } else {
            Err(StorageError::DuplicateKey)
        }
    }

    /// Removes the entry `(key, value)` (unique: only if `key` maps to `value`).
    pub fn delete(&self, key: &[u8], value: u64) -> StorageResult<bool> {
        let mut map = self.map_write();
        Ok(match &mut *map {
            Map::Int(m) => m.remove(int_key(key)?, value),
            Map::Dense(d) => {
                let k = int_key(key)?;
                d.get(k) == Some(value) && d.remove(k).is_some()
            }
            Map::IntMulti(s) => s.remove(&(((int_key(key)? as u128) << 64) | value as u128)),
            Map::Bytes(m) => {
                let stored = self.stored_key(key, value);
                if m.get(&stored) == Some(&value) {
                    m.remove(&stored);
                    true
                } else {
                    false
                }
            }
        })
    }

    /// Same contract as [`crate::btree::BTree::scan`]: entries with `lo <= key <= hi` (bounds
    /// may be prefixes), ascending or descending, at most `limit`, until `f` returns false.
    /// Returns the number of entries passed to `f`. `f` runs under the index latch: shared, or
    /// exclusive when this scan first merges a unique integer index's pending keys; either
    /// way `f` must not call back into this index.
    pub fn scan(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
        mut f: impl FnMut(&[u8], u64) -> bool,
    ) -> StorageResult<usize> {
        let Some(range) = KeyRange::new(lo, hi) else {
            return Ok(0);
        };
        if limit == 0 {
            return Ok(0);
        }
        let map = self.map_read();
        if matches!(&*map, Map::Int(m) if !m.pending.is_empty()) {
            drop(map);
            let map = self.merged();
            return Ok(self.scan_map(&map, &range, reverse, limit, &mut f));
        }
        Ok(self.scan_map(&map, &range, reverse, limit, &mut f))
    }

    /// Brings a unique integer index's ordered map up to date now (a no-op for the other
    /// kinds, and when nothing is pending). Meant for the end of a bulk load: otherwise the
    /// first scan after the load merges every loaded key, inside whatever is being measured.
    ///
    /// A unique integer index also chooses its structure here, from the keys it holds: a
    /// `DenseMap` if they fill its leaves densely enough, else it stays a hash map.
    pub fn merge_pending(&self) {
        self.merged().densify_if_dense();
    }

    /// The map under the exclusive latch, a unique integer index's pending keys merged.
    fn merged(&self) -> LatchWriteGuard<'_, Map> {
        let mut map = self.map_write();
        if let Map::Int(m) = &mut *map {
            m.merge();
        }
        map
    }

    /// [`Self::scan`] on a map whose ordered part is up to date.
    fn scan_map(
        &self,
        map: &Map,
        range: &KeyRange,
        reverse: bool,
        limit: usize,
        f: &mut impl FnMut(&[u8], u64) -> bool,
    ) -> usize {
        match map {
            Map::Int(m) => {
                debug_assert!(m.pending.is_empty(), "scan of an unmerged integer map");
                let Some((lo, hi)) = int_range(range, 8) else {
                    return 0;
                };
                let hi = hi.map_or(Bound::Unbounded, |h| Bound::Excluded(h as u64));
                let iter = m
                    .ordered
                    .range((Bound::Included(lo as u64), hi))
                    .map(|(&k, &v)| (k.to_be_bytes(), v));
                if reverse {
                    visit(iter.rev(), limit, f)
                } else {
                    visit(iter, limit, f)
                }
            }
            Map::Dense(d) => {
                let Some((lo, hi)) = int_range(range, 8) else {
                    return 0;
                };
                // Both fit: `int_range` keeps 8-byte bounds at most `u64::MAX`.
                let iter = d
                    .range(lo as u64, hi.map(|h| h as u64))
                    .map(|(k, v)| (k.to_be_bytes(), v));
                if reverse {
                    visit(iter.rev(), limit, f)
                } else {
                    visit(iter, limit, f)
                }
            }
            Map::IntMulti(s) => {
                let Some((lo, hi)) = int_range(range, 16) else {
                    return 0;
                };
                let hi = hi.map_or(Bound::Unbounded, Bound::Excluded);
                let iter = s
                    .range((Bound::Included(lo), hi))
                    .map(|&e| (((e >> 64) as u64).to_be_bytes(), e as u64));
                if reverse {
                    visit(iter.rev(), limit, f)
                } else {
                    visit(iter, limit, f)
                }
            }
            Map::Bytes(m) => {
                let lo = range
                    .lo
                    .as_deref()
                    .map_or(Bound::Unbounded, Bound::Included);
                let hi = range
                    .hi
                    .as_deref()
                    .map_or(Bound::Unbounded, Bound::Excluded);
                let suffix = if self.unique { 0 } else { 8 };
                let iter = m
                    .range::<[u8], _>((lo, hi))
                    .map(|(k, &v)| (&k[..k.len() - suffix], v));
                if reverse {
                    visit(iter.rev(), limit, f)
                } else {
                    visit(iter, limit, f)
                }
            }
        }
    }

    /// Entries in the index (a unique integer index counts its hash map: no merge needed).
    pub fn len(&self) -> usize {
        match &*self.map_read() {
            Map::Int(m) => m.points.len(),
            Map::Dense(d) => d.len(),
            Map::IntMulti(s) => s.len(),
            Map::Bytes(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether this unique integer index now keeps its entries in a `DenseMap` (chosen by
    /// [`Self::merge_pending`] for densely filled keys) rather than a hash map.
    pub fn is_dense(&self) -> bool {
        matches!(&*self.map_read(), Map::Dense(_))
    }

    /// Keys inserted since the last merge (0 for the kinds that keep no pending keys): what
    /// the next scan, or [`Self::merge_pending`], will merge. Counts duplicates and keys
    /// deleted since, which the merge drops.
    pub fn pending(&self) -> usize {
        match &*self.map_read() {
            Map::Int(m) => m.pending.len(),
            Map::Dense(_) | Map::IntMulti(_) | Map::Bytes(_) => 0,
        }
    }

    /// Checks that the map variant fits the key order, that a unique integer index's hash map,
    /// ordered map and pending keys keep the invariants of the module documentation (without
    /// merging: the lagging state is what is checked), and, for non-unique byte keys, that
    /// every stored key ends with its value.
    pub fn check_invariants(&self) -> StorageResult<()> {
        let map = self.map_read();
        let bad = |reason: &str| Err(StorageError::Invalid(format!("mem index: {reason}")));
        match &*map {
            Map::Int(_) | Map::Dense(_) | Map::IntMulti(_) if !K::FIXED_U64 => {
                bad("integer map for byte keys")
            }
            Map::Dense(_) if !self.unique => bad("dense map for a non-unique index"),
            Map::Int(m) => m.check().or_else(bad),
            Map::Dense(d) => d.check().or_else(|e| bad(&e)),
            Map::Bytes(_) if K::FIXED_U64 => bad("byte map for integer keys"),
            Map::Bytes(m) if !self.unique => {
                for (k, &v) in m {
                    if k.len() < 8 || k[k.len() - 8..] != v.to_be_bytes() {
                        return bad("non-unique entry whose key does not end with its value");
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::keys::IntKeyOrder;

    #[test]
    fn int_range_handles_short_and_long_bounds() {
        let r = KeyRange::new(Bound::Included(&[0, 1]), Bound::Excluded(&[0, 2])).unwrap();
        assert_eq!(int_range(&r, 8), Some((1 << 48, Some(2 << 48))));
        // A 9-byte low bound excludes the key equal to its first 8 bytes.
        let r = KeyRange::new(
            Bound::Included(&[0, 0, 0, 0, 0, 0, 0, 5, 0]),
            Bound::Unbounded,
        )
        .unwrap();
        assert_eq!(int_range(&r, 8), Some((6, None)));
        let r = KeyRange::new(Bound::Included(&[0xFF; 9]), Bound::Unbounded).unwrap();
        assert_eq!(int_range(&r, 8), None);
    }

    #[test]
    fn non_unique_int_index_keeps_pairs_in_value_order() {
        let index = MemIndex::new(IntKeyOrder, false, true);
        for v in [3u64, 1, 2] {
            index.insert(&7u64.to_be_bytes(), v).unwrap();
        }
        assert!(index.insert(&7u64.to_be_bytes(), 2).is_err());
        assert_eq!(index.get(&7u64.to_be_bytes()).unwrap(), Some(1));
        let mut seen = Vec::new();
        let key = 7u64.to_be_bytes();
        index
            .scan(
                Bound::Included(&key),
                Bound::Included(&key),
                true,
                2,
                |_, v| {
                    seen.push(v);
                    true
                },
            )
            .unwrap();
        assert_eq!(seen, vec![3, 2]);
        assert!(index.delete(&key, 3).unwrap());
        assert_eq!(index.len(), 2);
    }

    fn int(k: u64) -> [u8; 8] {
        k.to_be_bytes()
    }

    /// The integer lookup a prefetch hint uses answers as the byte-keyed one does, on a unique
    /// integer index through growth and deletes; a non-unique one answers nothing (it has no
    /// hash map), and prefetching any key of either changes nothing.
    #[test]
    fn integer_lookup_matches_the_byte_lookup() {
        let index = MemIndex::new(IntKeyOrder, true, false);
        for k in 0..5000u64 {
            index.insert(&int(k * 3), k).unwrap();
        }
        for k in (0..5000u64).step_by(7) {
            assert!(index.delete(&int(k * 3), k).unwrap());
        }
        for k in 0..15_001u64 {
            index.prefetch(k);
            assert_eq!(index.get_int(k), index.get(&int(k)).unwrap(), "key {k}");
        }
        assert_eq!(index.get_int(3), Some(1));
        assert_eq!(index.get_int(0), None);
        let multi = MemIndex::new(IntKeyOrder, false, false);
        multi.insert(&int(3), 1).unwrap();
        multi.prefetch(3);
        assert_eq!(multi.get_int(3), None);
        assert_eq!(multi.get(&int(3)).unwrap(), Some(1));
    }

    /// The unique integer map's `(ordered, points, pending)` sizes.
    fn sizes(index: &MemIndex<IntKeyOrder>) -> (usize, usize, usize) {
        match &*index.map.read() {
            Map::Int(m) => (m.ordered.len(), m.points.len(), m.pending.len()),
            _ => panic!("a unique integer index has the integer map"),
        }
    }

    fn all(index: &MemIndex<IntKeyOrder>, reverse: bool) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        index
            .scan(
                Bound::Unbounded,
                Bound::Unbounded,
                reverse,
                usize::MAX,
                |k, v| {
                    out.push((u64::from_be_bytes(k.try_into().unwrap()), v));
                    true
                },
            )
            .unwrap();
        out
    }

    #[test]
    fn unique_int_inserts_leave_the_ordered_map_alone_until_a_scan() {
        let index = MemIndex::new(IntKeyOrder, true, true);
        for k in (0..100u64).rev() {
            index.insert(&int(k), k * 10).unwrap();
        }
        assert_eq!(index.get(&int(42)).unwrap(), Some(420));
        assert!(
            index.insert(&int(42), 1).is_err(),
            "the hash map sees pending keys"
        );
        assert_eq!(index.len(), 100);
        assert!(index.delete(&int(7), 70).unwrap());
        index.check_invariants().unwrap();
        // Lookups, inserts, deletes, len and the invariant check merge nothing.
        assert_eq!(sizes(&index), (0, 99, 100));
        let copy = MemIndex::new(IntKeyOrder, true, true);
        for k in 0..10u64 {
            copy.insert(&int(k), k).unwrap();
        }
        copy.merge_pending();
        assert_eq!(sizes(&copy), (10, 10, 0), "merge_pending merges");

        let entries = all(&index, false);
        assert_eq!(sizes(&index), (99, 99, 0));
        let expected: Vec<_> = (0..100u64)
            .filter(|&k| k != 7)
            .map(|k| (k, k * 10))
            .collect();
        assert_eq!(entries, expected);
        index.check_invariants().unwrap();

        // Later inserts are pending again; a reverse scan merges them one by one.
        index.insert(&int(7), 71).unwrap();
        index.insert(&int(500), 5).unwrap();
        assert_eq!(sizes(&index), (99, 101, 2));
        let entries = all(&index, true);
        assert_eq!(entries[0], (500, 5));
        assert!(entries.contains(&(7, 71)));
        assert_eq!(sizes(&index), (101, 101, 0));
        index.check_invariants().unwrap();
    }

    #[test]
    fn merge_takes_the_current_value_of_a_key_deleted_and_inserted_again() {
        let index = MemIndex::new(IntKeyOrder, true, false);
        for k in 0..50u64 {
            index.insert(&int(k), 0).unwrap();
        }
        assert_eq!(all(&index, false).len(), 50);
        // Key 3: merged, deleted, inserted twice more; key 60: pending, deleted, gone.
        for v in [1, 2] {
            assert!(index.delete(&int(3), v - 1).unwrap());
            index.insert(&int(3), v).unwrap();
        }
        index.insert(&int(60), 6).unwrap();
        assert!(
            !index.delete(&int(60), 5).unwrap(),
            "a pending key keeps its value"
        );
        assert!(index.delete(&int(60), 6).unwrap());
        assert_eq!(sizes(&index), (49, 50, 3));
        index.check_invariants().unwrap();
        let entries = all(&index, false);
        assert_eq!(entries.len(), 50);
        assert_eq!(entries[3], (3, 2));
        assert_eq!(sizes(&index), (50, 50, 0));
    }

    #[test]
    fn pending_keys_stay_bounded_without_scans() {
        let index = MemIndex::new(IntKeyOrder, true, false);
        for round in 0..20_000u64 {
            index.insert(&int(round % 8), round).unwrap();
            assert!(index.delete(&int(round % 8), round).unwrap());
        }
        let (ordered, points, pending) = sizes(&index);
        assert_eq!((ordered, points), (0, 0));
        assert!(pending <= PENDING_SLACK + 1, "{pending} pending keys");
        index.check_invariants().unwrap();
        assert!(all(&index, false).is_empty());
    }

    #[test]
    fn invariant_check_catches_a_lost_pending_key() {
        let index = MemIndex::new(IntKeyOrder, true, false);
        index.insert(&int(1), 1).unwrap();
        if let Map::Int(m) = &mut *index.map.write() {
            m.pending.clear();
        }
        assert!(index.check_invariants().is_err());
    }

    #[test]
    fn merged_sequences_stay_sorted() {
        let a = [(1, 0), (4, 0), (9, 0)].into_iter();
        let b = [(0, 1), (5, 1), (10, 1), (11, 1)].into_iter();
        let keys: Vec<u64> = merge_sorted(a, b).map(|(k, _)| k).collect();
        assert_eq!(keys, vec![0, 1, 4, 5, 9, 10, 11]);
    }
}
