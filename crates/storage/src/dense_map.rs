//! A `u64 → u64` map for keys that come in dense runs: the key's low [`LEAF_BITS`] bits
//! address a slot in a leaf array, the rest name the leaf. The main-memory unique integer
//! index ([`crate::memindex`]) switches to it when its loaded keys fill leaves densely enough
//! (TPC-C's keys do: items, stock, customers and orders are numbered from 1 within their
//! warehouse and district).
//!
//! ```text
//!   key = leaf key (bits 63..9) | slot (bits 8..0)
//!
//!   directory: IntHash  leaf key → leaf address       (point operations: one probe, hot)
//!   order:     BTreeSet<leaf key>                      (scans: the leaves in key order)
//!   leaf:      [value + 1; 512] and a count            (4 KiB of slots; 0: empty)
//! ```
//!
//! Against the hash map ([`crate::int_hash`]), which it replaces for such keys:
//! - **Neighbours stay neighbours.** Keys inserted in order (an order's lines, the next order
//!   of a district) land in adjacent slots of the same leaf, which the previous insert has
//!   just brought into the cache. A hash map scatters them over a table of millions of slots,
//!   a cache miss per insert, and doubles that table (moving every entry) as it grows.
//! - **Fewer bytes per entry where keys are dense.** A slot holds the value alone (the key is
//!   where it is), and a leaf is as full as the keys are dense; the hash map keeps key and
//!   value and is 5/16 to 5/8 full. TPC-C's item and stock indexes take 1 MiB each instead of
//!   4; at the quarter fill that makes an index dense, the two take about the same.
//! - **Order for free.** A scan walks the leaves in key order and each leaf's slots, so the
//!   index needs no ordered map beside it and no list of keys waiting to be merged into one.
//! - **Lookups cost about the same:** a directory probe (its slots are few and stay cached)
//!   and the leaf's slot, where the hash map reads one slot.
//!
//! Sparse keys would waste a leaf on each: [`DenseMap::is_sparse`] tells the owner when the
//! entries fill less than [`SPARSE_FILL`] of the leaves, and it goes back to a hash map.
//!
//! Values are stored plus one, so that an all-zero leaf is empty; [`DenseMap::storable`] says
//! which values fit (every one but `u64::MAX`).
//!
//! Invariants (checked by [`DenseMap::check`]): the directory and `order` name the same
//! leaves; each leaf's count is its non-empty slots, and is never 0 (an emptied leaf is freed);
//! `len` is the sum of the counts.

use std::collections::BTreeSet;

use crate::int_hash::IntHash;

/// Key bits that address a slot within a leaf.
pub(crate) const LEAF_BITS: u32 = 9;
/// Slots in a leaf.
pub(crate) const LEAF_SLOTS: usize = 1 << LEAF_BITS;
const SLOT_MASK: u64 = LEAF_SLOTS as u64 - 1;

/// The fill below which the map reports itself sparse: entries per leaf slot, as a fraction.
pub(crate) const SPARSE_FILL: (usize, usize) = (1, 16);
/// Leaves a map may hold before [`DenseMap::is_sparse`] judges it (a few half-empty leaves
/// at the edges of a small table are no waste worth a change of structure).
const SPARSE_MIN_LEAVES: usize = 64;

/// One leaf: a slot per key, holding value + 1 (0: empty), and how many are not empty.
#[repr(C)]
struct Leaf {
    slots: [u64; LEAF_SLOTS],
    count: u64,
}

impl Leaf {
    /// A new, empty leaf, as zeroed memory from the allocator (no fill pass).
    fn new_boxed() -> Box<Leaf> {
        let layout = std::alloc::Layout::new::<Leaf>();
        // SAFETY: `Leaf` has a non-zero size; it is plain integers, for which all-zero bytes
        // are a valid value, so the zeroed block is a `Leaf` that `Box` may own (allocated
        // with `Leaf`'s own layout by the global allocator, as `Box` frees it).
        unsafe {
            let block = std::alloc::alloc_zeroed(layout);
            if block.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            Box::from_raw(block.cast::<Leaf>())
        }
    }
}

/// A map from `u64` keys to `u64` values (all but `u64::MAX`), organised in leaves of
/// [`LEAF_SLOTS`] consecutive keys (see the module documentation). Leaves are written only
/// through `&mut self`, so the map is `Send` and `Sync` as the plain integers it holds are.
#[derive(Default)]
pub(crate) struct DenseMap {
    /// Leaf key → the address of a leaf this map owns (made by `Box::into_raw`, freed in
    /// `remove` when it empties or in `Drop`).
    directory: IntHash,
    /// The leaf keys of `directory`, in order, for scans.
    order: BTreeSet<u64>,
    /// Entries in all leaves.
    len: usize,
}

impl DenseMap {
    /// Whether `value` can be stored (every value but `u64::MAX`, as slots hold value + 1).
    pub(crate) const fn storable(value: u64) -> bool {
        value != u64::MAX
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Leaves in use.
    pub(crate) fn leaves(&self) -> usize {
        self.order.len()
    }

    #[inline(always)]
    fn leaf(&self, key: u64) -> Option<&Leaf> {
        // SAFETY: every address in the directory is a live leaf this map owns; `&self` keeps
        // it from being freed or written while the reference lives.
        self.directory
            .get(key >> LEAF_BITS)
            .map(|addr| unsafe { &*(addr as *const Leaf) })
    }

    #[inline(always)]
    fn leaf_mut(&mut self, key: u64) -> Option<&mut Leaf> {
        // SAFETY: as for `leaf`; `&mut self` makes this the only reference into the leaf.
        self.directory
            .get(key >> LEAF_BITS)
            .map(|addr| unsafe { &mut *(addr as *mut Leaf) })
    }

    #[inline(always)]
    pub(crate) fn get(&self, key: u64) -> Option<u64> {
        let stored = self.leaf(key)?.slots[(key & SLOT_MASK) as usize];
        stored.checked_sub(1)
    }

    /// Starts loading the slot of `key` (see [`crate::prefetch`]); finding its leaf reads the
    /// directory, whose few slots stay cached. Nothing if the leaf does not exist yet.
    #[inline(always)]
    pub(crate) fn prefetch(&self, key: u64) {
        if let Some(leaf) = self.leaf(key) {
            crate::prefetch::line(
                std::ptr::from_ref(&leaf.slots[(key & SLOT_MASK) as usize]).cast(),
            );
        }
    }

    /// Adds `key → value` unless `key` is present; returns whether it was added. `value` must
    /// be [storable](Self::storable).
    #[inline]
    pub(crate) fn insert_new(&mut self, key: u64, value: u64) -> bool {
        assert!(Self::storable(value), "DenseMap cannot store u64::MAX");
        let leaf = match self.leaf_mut(key) {
            Some(leaf) => leaf,
            None => self.add_leaf(key >> LEAF_BITS),
        };
        let slot = &mut leaf.slots[(key & SLOT_MASK) as usize];
        if *slot != 0 {
            return false;
        }
        *slot = value + 1;
        leaf.count += 1;
        self.len += 1;
        true
    }

    #[cold]
    fn add_leaf(&mut self, leaf_key: u64) -> &mut Leaf {
        let addr = Box::into_raw(Leaf::new_boxed());
        self.directory.insert_new(leaf_key, addr as u64);
        self.order.insert(leaf_key);
        // SAFETY: just made, and owned by this map from now on.
        unsafe { &mut *addr }
    }

    /// Removes `key`, returning its value; a leaf left empty is freed.
    pub(crate) fn remove(&mut self, key: u64) -> Option<u64> {
        let leaf = self.leaf_mut(key)?;
        let slot = &mut leaf.slots[(key & SLOT_MASK) as usize];
        let value = std::mem::take(slot).checked_sub(1)?;
        leaf.count -= 1;
        let emptied = leaf.count == 0;
        self.len -= 1;
        if emptied {
            let leaf_key = key >> LEAF_BITS;
            let addr = self.directory.remove(leaf_key).expect("the leaf was found");
            self.order.remove(&leaf_key);
            // SAFETY: made by `add_leaf` with `Box::into_raw`; no longer in the directory, so
            // nothing reaches it again.
            drop(unsafe { Box::from_raw(addr as *mut Leaf) });
        }
        Some(value)
    }

    /// Whether the entries fill less than [`SPARSE_FILL`] of the leaves' slots (judged once
    /// there are more than a few leaves): then a hash map holds them in less memory.
    pub(crate) fn is_sparse(&self) -> bool {
        let leaves = self.leaves();
        leaves > SPARSE_MIN_LEAVES && self.len * SPARSE_FILL.1 < leaves * LEAF_SLOTS * SPARSE_FILL.0
    }

    /// The entries with `lo <= key < hi` (`hi` None: no upper bound), ascending; reverse the
    /// iterator for descending order.
    pub(crate) fn range(
        &self,
        lo: u64,
        hi: Option<u64>,
    ) -> impl DoubleEndedIterator<Item = (u64, u64)> + '_ {
        // The last key in range, if any.
        let last = match hi {
            Some(0) => None,
            Some(h) => Some(h - 1),
            None => Some(u64::MAX),
        }
        .filter(|&last| last >= lo);
        let leaf_keys = match last {
            Some(last) => self.order.range(lo >> LEAF_BITS..=last >> LEAF_BITS),
            // An empty range of the set: nothing in it is visited.
            None => self.order.range(1..1),
        };
        let last = last.unwrap_or(0);
        leaf_keys.flat_map(move |&leaf_key| {
            let base = leaf_key << LEAF_BITS;
            let first = if leaf_key == lo >> LEAF_BITS {
                (lo & SLOT_MASK) as usize
            } else {
                0
            };
            let end = if leaf_key == last >> LEAF_BITS {
                (last & SLOT_MASK) as usize
            } else {
                LEAF_SLOTS - 1
            };
            let leaf = self
                .leaf(base)
                .expect("every ordered leaf is in the directory");
            (first..=end).filter_map(move |i| {
                leaf.slots[i]
                    .checked_sub(1)
                    .map(|value| (base | i as u64, value))
            })
        })
    }

    /// Every entry, ascending.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, u64)> + '_ {
        self.range(0, None)
    }

    /// The invariants of the module documentation; the reason of the first one broken.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.directory.len() != self.order.len() {
            return Err(format!(
                "{} leaves in the directory, {} in order",
                self.directory.len(),
                self.order.len()
            ));
        }
        let mut total = 0;
        for &leaf_key in &self.order {
            let Some(leaf) = self.leaf(leaf_key << LEAF_BITS) else {
                return Err(format!(
                    "leaf {leaf_key} is ordered but not in the directory"
                ));
            };
            let used = leaf.slots.iter().filter(|&&s| s != 0).count() as u64;
            if used != leaf.count || used == 0 {
                return Err(format!(
                    "leaf {leaf_key} counts {} entries and holds {used}",
                    leaf.count
                ));
            }
            total += used as usize;
        }
        if total != self.len {
            return Err(format!(
                "{total} entries in the leaves, len says {}",
                self.len
            ));
        }
        Ok(())
    }
}

impl Drop for DenseMap {
    fn drop(&mut self) {
        for (_, addr) in self.directory.iter() {
            // SAFETY: every address in the directory is a leaf made by `add_leaf` and owned by
            // this map alone; each is freed once, here.
            drop(unsafe { Box::from_raw(addr as *mut Leaf) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u64, u64),
        Remove(u64),
        Get(u64),
        Range(u64, Option<u64>, bool),
    }

    /// Keys in a few runs near leaf boundaries, near zero and near `u64::MAX`, so leaves fill,
    /// empty and meet at both ends of the key space.
    fn key() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..1100,
            (0u64..3, 0u64..40).prop_map(|(leaf, off)| (leaf + 7) * LEAF_SLOTS as u64 - 20 + off),
            (0u64..600).prop_map(|off| u64::MAX - off),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (key(), 0u64..u64::MAX).prop_map(|(k, v)| Op::Insert(k, v)),
            2 => key().prop_map(Op::Remove),
            2 => key().prop_map(Op::Get),
            1 => (key(), proptest::option::of(key()), any::<bool>())
                .prop_map(|(lo, hi, rev)| Op::Range(lo, hi, rev)),
        ]
    }

    proptest! {
        #[test]
        fn behaves_as_an_ordered_map(ops in proptest::collection::vec(op(), 1..400)) {
            let mut map = DenseMap::default();
            let mut model = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        let fresh = !model.contains_key(&k);
                        prop_assert_eq!(map.insert_new(k, v), fresh);
                        model.entry(k).or_insert(v);
                    }
                    Op::Remove(k) => prop_assert_eq!(map.remove(k), model.remove(&k)),
                    Op::Get(k) => prop_assert_eq!(map.get(k), model.get(&k).copied()),
                    Op::Range(lo, hi, reverse) => {
                        let got: Vec<_> = if reverse {
                            map.range(lo, hi).rev().collect()
                        } else {
                            map.range(lo, hi).collect()
                        };
                        let upper = hi.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
                        let mut want: Vec<_> = if hi.is_some_and(|h| h <= lo) {
                            Vec::new()
                        } else {
                            model
                                .range((std::ops::Bound::Included(lo), upper))
                                .map(|(&k, &v)| (k, v))
                                .collect()
                        };
                        if reverse {
                            want.reverse();
                        }
                        prop_assert_eq!(got, want);
                    }
                }
                prop_assert_eq!(map.len(), model.len());
                if let Err(e) = map.check() {
                    return Err(TestCaseError::fail(e));
                }
            }
        }
    }

    #[test]
    fn an_emptied_leaf_is_freed_and_keys_in_order_share_leaves() {
        let mut map = DenseMap::default();
        for k in 0..LEAF_SLOTS as u64 * 3 {
            assert!(map.insert_new(k, k * 10));
        }
        assert_eq!(map.leaves(), 3);
        for k in LEAF_SLOTS as u64..2 * LEAF_SLOTS as u64 {
            assert_eq!(map.remove(k), Some(k * 10));
        }
        assert_eq!(map.leaves(), 2, "the middle leaf is freed once empty");
        assert_eq!(map.get(LEAF_SLOTS as u64), None);
        assert_eq!(map.remove(LEAF_SLOTS as u64), None);
        map.check().unwrap();
    }

    #[test]
    fn sparse_keys_are_reported_once_there_are_enough_leaves() {
        let mut map = DenseMap::default();
        for i in 0..=SPARSE_MIN_LEAVES as u64 {
            map.insert_new(i << 20, i);
        }
        assert!(map.is_sparse(), "one key per leaf");
        let mut dense = DenseMap::default();
        for k in 0..(SPARSE_MIN_LEAVES * LEAF_SLOTS) as u64 {
            dense.insert_new(k * 2, k);
        }
        assert!(!dense.is_sparse(), "every other slot used");
    }

    #[test]
    fn values_up_to_but_not_including_max_are_storable() {
        let mut map = DenseMap::default();
        assert!(map.insert_new(5, 0));
        assert!(map.insert_new(6, u64::MAX - 1));
        assert_eq!((map.get(5), map.get(6)), (Some(0), Some(u64::MAX - 1)));
        assert!(!DenseMap::storable(u64::MAX));
    }
}
