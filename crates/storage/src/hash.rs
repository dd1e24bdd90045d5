//! An in-memory hash index for point operations: the alternative to a B+-tree that the 2008
//! paper (§5.5) asks about once the rest of the engine is stripped away.
//!
//! ```text
//!   hash(key) ──┬── top bits ──> stripe s: Latch<Table> ──> open addressing, linear probing
//!               └── low bits ──> home slot in stripe s's table
//! ```
//!
//! The key space is split into a fixed number of *stripes*, each an independent open-addressing
//! table behind its own [`Latch`] (disabled, with one stripe, when latching is off). Lookups
//! take the stripe's latch shared, inserts and removes exclusive. Each stripe grows on its own,
//! by rehashing into a table twice the size, when it passes 7/8 full.
//!
//! Invariants of a stripe's table (checked by [`HashIndex::check_invariants`]):
//! * its capacity is a power of two and it is never full (at least one empty slot), so every
//!   probe sequence ends;
//! * linear probing without tombstones: every entry lies between its home slot and the first
//!   empty slot after it. Removal keeps this by shifting later entries of the run back
//!   (backward-shift deletion).
//!
//! Keys are generic ([`HashKey`]): byte strings (`HashIndex<Box<[u8]>>`, the default) and a
//! `u64` fast path (`HashIndex<u64>`) that hashes one integer and compares one integer.

use crate::error::{StorageError, StorageResult};
use crate::latch::Latch;

/// A key type the hash index can hold.
pub trait HashKey: Eq + Send + Sync + 'static {
    /// The borrowed form callers pass to lookups.
    type Ref: ?Sized + Eq;
    fn hash_ref(key: &Self::Ref) -> u64;
    fn as_ref_key(&self) -> &Self::Ref;
    fn from_ref(key: &Self::Ref) -> Self;
}

/// Final avalanche of a 64-bit hash (the SplitMix64 finaliser).
#[inline]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl HashKey for u64 {
    type Ref = u64;
    #[inline]
    fn hash_ref(key: &u64) -> u64 {
        mix(*key)
    }
    #[inline]
    fn as_ref_key(&self) -> &u64 {
        self
    }
    #[inline]
    fn from_ref(key: &u64) -> u64 {
        *key
    }
}

impl HashKey for Box<[u8]> {
    type Ref = [u8];
    #[inline]
    fn hash_ref(key: &[u8]) -> u64 {
        // Eight bytes at a time, multiply-rotate (FxHash style), then a full avalanche.
        let mut h: u64 = key.len() as u64;
        let mut chunks = key.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            h = (h.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
        let mut tail = [0u8; 8];
        tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        h = (h.rotate_left(5) ^ u64::from_le_bytes(tail)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        mix(h)
    }
    #[inline]
    fn as_ref_key(&self) -> &[u8] {
        self
    }
    #[inline]
    fn from_ref(key: &[u8]) -> Self {
        key.into()
    }
}

struct Entry<K> {
    hash: u64,
    key: K,
    value: u64,
}

/// One stripe: an open-addressing table with linear probing.
struct Table<K> {
    slots: Vec<Option<Entry<K>>>,
    len: usize,
}

impl<K: HashKey> Table<K> {
    fn with_capacity(entries: usize) -> Self {
        let capacity = (entries * 8 / 7 + 1).next_power_of_two().max(8);
        Table {
            slots: (0..capacity).map(|_| None).collect(),
            len: 0,
        }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot holding `key`, or the empty slot ending its probe run.
    #[inline]
    fn probe(&self, hash: u64, key: &K::Ref) -> (usize, bool) {
        let mask = self.mask();
        let mut i = hash as usize & mask;
        loop {
            match &self.slots[i] {
                None => return (i, false),
                Some(e) if e.hash == hash && e.key.as_ref_key() == key => return (i, true),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    fn get(&self, hash: u64, key: &K::Ref) -> Option<u64> {
        match self.probe(hash, key) {
            (i, true) => self.slots[i].as_ref().map(|e| e.value),
            _ => None,
        }
    }

    fn insert(&mut self, hash: u64, key: &K::Ref, value: u64) -> StorageResult<()> {
        if (self.len + 1) * 8 > self.slots.len() * 7 {
            self.grow();
        }
        match self.probe(hash, key) {
            (_, true) => Err(StorageError::DuplicateKey),
            (i, false) => {
                self.slots[i] = Some(Entry {
                    hash,
                    key: K::from_ref(key),
                    value,
                });
                self.len += 1;
                Ok(())
            }
        }
    }

    fn remove(&mut self, hash: u64, key: &K::Ref) -> Option<u64> {
        let (mut hole, found) = self.probe(hash, key);
        if !found {
            return None;
        }
        let removed = self.slots[hole].take().map(|e| e.value);
        self.len -= 1;
        // Backward-shift: move later entries of the run into the hole when the hole lies on
        // their probe path (between their home slot and their current slot).
        let mask = self.mask();
        let mut i = (hole + 1) & mask;
        while let Some(entry) = &self.slots[i] {
            let home = entry.hash as usize & mask;
            let distance_to_hole = hole.wrapping_sub(home) & mask;
            let distance_to_here = i.wrapping_sub(home) & mask;
            if distance_to_hole < distance_to_here {
                self.slots[hole] = self.slots[i].take();
                hole = i;
            }
            i = (i + 1) & mask;
        }
        removed
    }

    fn grow(&mut self) {
        let mut bigger = Table {
            slots: (0..self.slots.len() * 2).map(|_| None).collect(),
            len: self.len,
        };
        let mask = bigger.mask();
        for entry in self.slots.drain(..).flatten() {
            let mut i = entry.hash as usize & mask;
            while bigger.slots[i].is_some() {
                i = (i + 1) & mask;
            }
            bigger.slots[i] = Some(entry);
        }
        *self = bigger;
    }

    fn check_invariants(&self) -> StorageResult<()> {
        let bad = |reason: String| Err(StorageError::Invalid(format!("hash index: {reason}")));
        if !self.slots.len().is_power_of_two() {
            return bad("capacity is not a power of two".into());
        }
        let live = self.slots.iter().filter(|s| s.is_some()).count();
        if live != self.len || live == self.slots.len() {
            return bad(format!("{live} live slots, len {}", self.len));
        }
        let mask = self.mask();
        for (i, slot) in self.slots.iter().enumerate() {
            if let Some(entry) = slot {
                if entry.hash != K::hash_ref(entry.key.as_ref_key()) {
                    return bad(format!("slot {i}: stored hash is stale"));
                }
                // No empty slot between the entry's home and the entry.
                let mut j = entry.hash as usize & mask;
                while j != i {
                    if self.slots[j].is_none() {
                        return bad(format!("slot {i}: gap in its probe run"));
                    }
                    j = (j + 1) & mask;
                }
            }
        }
        Ok(())
    }
}

/// Stripes when latching is on: enough that a handful of threads rarely meet.
const STRIPES_LATCHED: usize = 64;

/// A striped open-addressing hash index from keys to `u64` values. Unique keys.
pub struct HashIndex<K: HashKey = Box<[u8]>> {
    /// Each latch protects its stripe's table: slots, entries and length.
    stripes: Box<[Latch<Table<K>>]>,
    stripe_shift: u32,
}

impl HashIndex<Box<[u8]>> {
    /// A byte-keyed index sized for about `capacity_hint` entries.
    pub fn new(capacity_hint: usize, latching: bool) -> Self {
        Self::with_capacity(capacity_hint, latching)
    }
}

impl HashIndex<u64> {
    /// A `u64`-keyed index (the integer fast path) sized for about `capacity_hint` entries.
    pub fn new_u64(capacity_hint: usize, latching: bool) -> Self {
        Self::with_capacity(capacity_hint, latching)
    }

    #[inline]
    pub fn get_u64(&self, key: u64) -> Option<u64> {
        self.get(&key)
    }

    #[inline]
    pub fn insert_u64(&self, key: u64, value: u64) -> StorageResult<()> {
        self.insert(&key, value)
    }

    #[inline]
    pub fn remove_u64(&self, key: u64) -> Option<u64> {
        self.remove(&key)
    }
}

impl<K: HashKey> HashIndex<K> {
    /// An index sized for about `capacity_hint` entries; with `latching` off it has one stripe
    /// and no latch work (one thread only).
    pub fn with_capacity(capacity_hint: usize, latching: bool) -> Self {
        let stripes = if latching { STRIPES_LATCHED } else { 1 };
        let per_stripe = capacity_hint.div_ceil(stripes);
        HashIndex {
            stripes: (0..stripes)
                .map(|_| Latch::new(Table::with_capacity(per_stripe), latching))
                .collect(),
            // Top bits pick the stripe; `u64 >> 64` is not allowed, so one stripe uses a
            // shift of 63 on a zero-masked value (see `stripe`).
            stripe_shift: 64 - stripes.trailing_zeros().max(1),
        }
    }

    #[inline]
    fn stripe(&self, hash: u64) -> &Latch<Table<K>> {
        let index = (hash >> self.stripe_shift) as usize & (self.stripes.len() - 1);
        &self.stripes[index]
    }

    /// The value stored for `key`.
    #[inline]
    pub fn get(&self, key: &K::Ref) -> Option<u64> {
        let hash = K::hash_ref(key);
        self.stripe(hash).read().get(hash, key)
    }

    /// Adds `key`; [`StorageError::DuplicateKey`] if it is present.
    pub fn insert(&self, key: &K::Ref, value: u64) -> StorageResult<()> {
        let hash = K::hash_ref(key);
        self.stripe(hash).write().insert(hash, key, value)
    }

    /// Removes `key`, returning its value.
    pub fn remove(&self, key: &K::Ref) -> Option<u64> {
        let hash = K::hash_ref(key);
        self.stripe(hash).write().remove(hash, key)
    }

    /// Entries in the index (sums the stripes; not a hot-path operation).
    pub fn len(&self) -> usize {
        self.stripes.iter().map(|s| s.read().len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks every stripe's probing invariants.
    pub fn check_invariants(&self) -> StorageResult<()> {
        for stripe in self.stripes.iter() {
            stripe.read().check_invariants()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_past_its_hint_and_keeps_every_entry() {
        let index = HashIndex::new_u64(4, false);
        for k in 0..10_000u64 {
            index.insert_u64(k * 7919, k).unwrap();
        }
        assert_eq!(index.len(), 10_000);
        index.check_invariants().unwrap();
        for k in 0..10_000u64 {
            assert_eq!(index.get_u64(k * 7919), Some(k));
        }
        assert_eq!(index.get_u64(1), None);
    }

    #[test]
    fn duplicate_insert_is_refused_and_keeps_the_old_value() {
        let index = HashIndex::new(16, true);
        index.insert(b"alpha", 1).unwrap();
        assert!(matches!(
            index.insert(b"alpha", 2),
            Err(StorageError::DuplicateKey)
        ));
        assert_eq!(index.get(b"alpha"), Some(1));
    }

    #[test]
    fn removal_keeps_probe_runs_intact() {
        // One stripe, tiny table: many keys share runs, removals must shift entries back.
        let index = HashIndex::new_u64(8, false);
        for k in 0..6u64 {
            index.insert_u64(k, k + 100).unwrap();
        }
        for k in [0u64, 3, 4] {
            assert_eq!(index.remove_u64(k), Some(k + 100));
            index.check_invariants().unwrap();
        }
        assert_eq!(index.remove_u64(3), None);
        for k in [1u64, 2, 5] {
            assert_eq!(index.get_u64(k), Some(k + 100));
        }
    }
}
