//! The main-memory ordered index of the ladder's `page-access=off` rung: an ordered map from
//! encoded keys straight to record pointers, with no pages, frames or node latches.
//!
//! It offers the operations and the scan contract of [`crate::btree::BTree`] (unique and
//! non-unique, prefix bounds, both directions), so the engine can swap one for the other.
//!
//! ```text
//!   MemIndex<K> ── Latch ── Map::Bytes     BTreeMap<key bytes, value>          (generic keys)
//!                           Map::Int       BTreeMap<u64, value>                (IntKeyOrder, unique)
//!                                          + HashMap<u64, value> for point operations
//!                           Map::IntMulti  BTreeSet<u128 = key << 64 | value>  (IntKeyOrder, non-unique)
//! ```
//!
//! Byte keys compare with `memcmp`, which the order-preserving encoding
//! ([`crate::btree::keys`]) makes equal to the logical order; a non-unique byte index stores
//! `key ++ value` (8 bytes big-endian) like the B+-tree. Integer keys ([`KeyOrder::FIXED_U64`])
//! take the fast path: the map compares integers. A unique integer index also keeps a hash
//! map with the same entries, so a point lookup (and an insert's duplicate check) costs one
//! hash probe instead of a tree descent; scans use the ordered map. Both change together under
//! the latch.
//!
//! One latch guards the whole map (disabled when latching is off): the rung this index serves
//! runs partitioned or single-threaded, and `std`'s B-tree is not concurrent.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use rustc_hash::FxHashMap;

use crate::btree::keys::{KeyOrder, KeyRange};
use crate::error::{StorageError, StorageResult};
use crate::latch::Latch;

enum Map {
    Bytes(BTreeMap<Vec<u8>, u64>),
    Int {
        ordered: BTreeMap<u64, u64>,
        /// The same entries as `ordered`.
        points: FxHashMap<u64, u64>,
    },
    IntMulti(BTreeSet<u128>),
}

/// An in-memory ordered index from encoded keys to `u64` values.
pub struct MemIndex<K: KeyOrder> {
    order: K,
    unique: bool,
    /// Protects the map: shared for lookups and scans, exclusive for inserts and deletes.
    map: Latch<Map>,
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
            (true, true) => Map::Int {
                ordered: BTreeMap::new(),
                points: FxHashMap::default(),
            },
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
        let map = self.map.read();
        Ok(match &*map {
            Map::Int { points, .. } => points.get(&int_key(key)?).copied(),
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

    /// Adds an entry; [`StorageError::DuplicateKey`] if the key (unique) or the pair
    /// (non-unique) is present.
    pub fn insert(&self, key: &[u8], value: u64) -> StorageResult<()> {
        let mut map = self.map.write();
        let fresh = match &mut *map {
            Map::Int { ordered, points } => {
                let k = int_key(key)?;
                match points.entry(k) {
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(value);
                        ordered.insert(k, value);
                        true
                    }
                    std::collections::hash_map::Entry::Occupied(_) => false,
                }
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
        let mut map = self.map.write();
        Ok(match &mut *map {
            Map::Int { ordered, points } => {
                let k = int_key(key)?;
                if points.get(&k) == Some(&value) {
                    points.remove(&k);
                    ordered.remove(&k);
                    true
                } else {
                    false
                }
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
    /// Returns the number of entries passed to `f`. `f` runs under the index latch (shared).
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
        let map = self.map.read();
        let f = &mut f;
        Ok(match &*map {
            Map::Int { ordered: m, .. } => {
                let Some((lo, hi)) = int_range(&range, 8) else {
                    return Ok(0);
                };
                let hi = hi.map_or(Bound::Unbounded, |h| Bound::Excluded(h as u64));
                let iter = m
                    .range((Bound::Included(lo as u64), hi))
                    .map(|(&k, &v)| (k.to_be_bytes(), v));
                if reverse {
                    visit(iter.rev(), limit, f)
                } else {
                    visit(iter, limit, f)
                }
            }
            Map::IntMulti(s) => {
                let Some((lo, hi)) = int_range(&range, 16) else {
                    return Ok(0);
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
        })
    }

    /// Entries in the index.
    pub fn len(&self) -> usize {
        match &*self.map.read() {
            Map::Int { ordered, .. } => ordered.len(),
            Map::IntMulti(s) => s.len(),
            Map::Bytes(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks that the map variant fits the key order, that a unique integer index's hash map
    /// and ordered map agree, and, for non-unique byte keys, that every stored key ends with
    /// its value.
    pub fn check_invariants(&self) -> StorageResult<()> {
        let map = self.map.read();
        let bad = |reason: &str| Err(StorageError::Invalid(format!("mem index: {reason}")));
        match &*map {
            Map::Int { .. } | Map::IntMulti(_) if !K::FIXED_U64 => bad("integer map for byte keys"),
            Map::Int { ordered, points } => {
                if ordered.len() != points.len()
                    || ordered.iter().any(|(k, v)| points.get(k) != Some(v))
                {
                    return bad("hash map and ordered map hold different entries");
                }
                Ok(())
            }
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
}
