//! A `u64 → u64` hash map laid out for one cache miss per lookup: the point half of
//! [`crate::memindex`]'s unique integer index.
//!
//! ```text
//!   slots: [[key, value]; 2^bits]     16 bytes each, four to a cache line
//!   home(key) = top `bits` bits of (key ^ key >> 32) × φ·2^64    (multiply-shift)
//!   probe: home, home+1, … (linear, wrapping) until the key or an EMPTY slot
//! ```
//!
//! `std`'s (SwissTable) map keeps its control bytes and its entries in separate arrays, so a
//! lookup in a map larger than the cache misses twice — once for the control group, once for
//! the entry — and the record it leads to is a third miss. Here key and value sit together and
//! the table is kept at most [`MAX_LOAD`] full, so a lookup usually reads one line.
//!
//! Invariants (checked by [`IntHash::check`]):
//! - the capacity is a power of two and at least one slot is empty, so every probe ends;
//! - a slot is empty iff its key is [`EMPTY`]; the key `EMPTY` itself, if present, lives in
//!   `empty_key_value` instead of a slot;
//! - linear probing without tombstones: between an entry's home slot and the entry there is
//!   no empty slot. Removal keeps this by shifting later entries of the run back
//!   (backward-shift deletion);
//! - `len` counts the slot entries plus the `EMPTY` key if present.

/// The key that marks an empty slot (stored beside the table when it is a real key). Zero, so
/// a new table is zeroed memory the allocator gets from the kernel as such, with no fill pass.
const EMPTY: u64 = 0;

/// Entries per slot at which the table doubles (as a fraction: `len / capacity > 5/8`).
const MAX_LOAD: (usize, usize) = (5, 8);

/// Slots of a new table.
const MIN_CAPACITY: usize = 16;

#[derive(Clone)]
pub(crate) struct IntHash {
    /// `[key, value]` (an array, so a new table is `alloc_zeroed`).
    slots: Box<[[u64; 2]]>,
    /// `64 - log2(capacity)`: the multiply-shift's shift.
    shift: u32,
    /// Entries in `slots`, plus one if `empty_key_value` holds one.
    len: usize,
    /// The value of key [`EMPTY`], which cannot live in a slot.
    empty_key_value: Option<u64>,
}

impl Default for IntHash {
    fn default() -> Self {
        IntHash::with_capacity(MIN_CAPACITY)
    }
}

impl IntHash {
    fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.next_power_of_two().max(MIN_CAPACITY);
        IntHash {
            slots: vec![[EMPTY, 0u64]; capacity].into_boxed_slice(),
            shift: 64 - capacity.trailing_zeros(),
            len: 0,
            empty_key_value: None,
        }
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The home slot of `key`: the top bits of a Fibonacci multiply of the key folded onto
    /// itself (so keys differing only in their high half spread too).
    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        ((key ^ (key >> 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The slot holding `key`, or the empty slot ending its probe run (`key != EMPTY`).
    #[inline(always)]
    fn probe(&self, key: u64) -> (usize, bool) {
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            // In bounds: `i` is masked, and the table is never full.
            let k = self.slots[i][0];
            if k == key {
                return (i, true);
            }
            if k == EMPTY {
                return (i, false);
            }
            i = (i + 1) & mask;
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn get(&self, key: u64) -> Option<u64> {
        if key == EMPTY {
            return self.empty_key_value;
        }
        match self.probe(key) {
            (i, true) => Some(self.slots[i][1]),
            _ => None,
        }
    }

    pub(crate) fn contains_key(&self, key: u64) -> bool {
        self.get(key).is_some()
    }

    /// Adds `key → value` unless `key` is present; returns whether it was added.
    #[inline]
    pub(crate) fn insert_new(&mut self, key: u64, value: u64) -> bool {
        if key == EMPTY {
            if self.empty_key_value.is_some() {
                return false;
            }
            self.empty_key_value = Some(value);
            self.len += 1;
            return true;
        }
        if (self.len + 1) * MAX_LOAD.1 > self.slots.len() * MAX_LOAD.0 {
            self.grow();
        }
        match self.probe(key) {
            (_, true) => false,
            (i, false) => {
                self.slots[i] = [key, value];
                self.len += 1;
                true
            }
        }
    }

    /// Removes `key`, returning its value.
    pub(crate) fn remove(&mut self, key: u64) -> Option<u64> {
        if key == EMPTY {
            let v = self.empty_key_value.take();
            self.len -= usize::from(v.is_some());
            return v;
        }
        let (mut hole, found) = self.probe(key);
        if !found {
            return None;
        }
        let removed = self.slots[hole][1];
        self.slots[hole][0] = EMPTY;
        self.len -= 1;
        // Backward shift: a later entry of the run moves into the hole when the hole lies on
        // its probe path (between its home slot and where it is now).
        let mask = self.mask();
        let mut i = (hole + 1) & mask;
        loop {
            let k = self.slots[i][0];
            if k == EMPTY {
                break;
            }
            let home = self.home(k);
            if hole.wrapping_sub(home) & mask < i.wrapping_sub(home) & mask {
                self.slots[hole] = self.slots[i];
                self.slots[i][0] = EMPTY;
                hole = i;
            }
            i = (i + 1) & mask;
        }
        Some(removed)
    }

    /// Every entry, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.slots
            .iter()
            .filter(|s| s[0] != EMPTY)
            .map(|s| (s[0], s[1]))
            .chain(self.empty_key_value.map(|v| (EMPTY, v)))
    }

    #[cold]
    fn grow(&mut self) {
        let mut bigger = IntHash::with_capacity(self.slots.len() * 2);
        let mask = bigger.mask();
        for &[k, v] in self.slots.iter().filter(|s| s[0] != EMPTY) {
            let mut i = bigger.home(k);
            while bigger.slots[i][0] != EMPTY {
                i = (i + 1) & mask;
            }
            bigger.slots[i] = [k, v];
        }
        bigger.len = self.len;
        bigger.empty_key_value = self.empty_key_value;
        *self = bigger;
    }

    /// The invariants of the module documentation; the first one broken.
    pub(crate) fn check(&self) -> Result<(), String> {
        let capacity = self.slots.len();
        if !capacity.is_power_of_two() || self.shift != 64 - capacity.trailing_zeros() {
            return Err(format!(
                "capacity {capacity} / shift {} disagree",
                self.shift
            ));
        }
        let live = self.slots.iter().filter(|s| s[0] != EMPTY).count();
        if live == capacity {
            return Err("no empty slot".into());
        }
        if live + usize::from(self.empty_key_value.is_some()) != self.len {
            return Err(format!("{live} live slots, len {}", self.len));
        }
        let mask = self.mask();
        for (i, &[k, _]) in self.slots.iter().enumerate() {
            if k == EMPTY {
                continue;
            }
            let mut j = self.home(k);
            while j != i {
                if self.slots[j][0] == EMPTY {
                    return Err(format!("slot {i}: an empty slot in its probe run at {j}"));
                }
                j = (j + 1) & mask;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u64),
        Remove(u64),
        Get(u64),
    }

    /// Keys from a small range (so operations meet), plus `EMPTY` and the extremes.
    fn key() -> impl Strategy<Value = u64> {
        prop_oneof![8 => 0u64..200, 1 => Just(EMPTY), 1 => Just(u64::MAX), 1 => any::<u64>()]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (key(), any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
            2 => key().prop_map(Op::Remove),
            2 => key().prop_map(Op::Get),
        ]
    }

    proptest! {
        /// Behaves as `std`'s map for any sequence of inserts, removes and lookups, and keeps
        /// its invariants after each.
        #[test]
        fn behaves_as_a_hash_map(ops in proptest::collection::vec(op(), 1..400)) {
            let mut t = IntHash::default();
            let mut model: HashMap<u64, u64> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        let added = !model.contains_key(&k);
                        if added {
                            model.insert(k, v);
                        }
                        prop_assert_eq!(t.insert_new(k, v), added);
                    }
                    Op::Remove(k) => prop_assert_eq!(t.remove(k), model.remove(&k)),
                    Op::Get(k) => prop_assert_eq!(t.get(k), model.get(&k).copied()),
                }
                prop_assert_eq!(t.len(), model.len());
                if let Err(e) = t.check() {
                    return Err(TestCaseError::fail(e));
                }
            }
            let mut all: Vec<_> = t.iter().collect();
            all.sort_unstable();
            let mut expected: Vec<_> = model.into_iter().collect();
            expected.sort_unstable();
            prop_assert_eq!(all, expected);
        }
    }

    #[test]
    fn grows_and_keeps_every_entry_below_its_load_limit() {
        let mut t = IntHash::default();
        for k in 1..=10_000u64 {
            assert!(t.insert_new(k * 7919, k));
        }
        assert!(!t.insert_new(7919, 0), "a duplicate is refused");
        assert_eq!(t.get(7919), Some(1), "and the old value kept");
        assert_eq!(t.len(), 10_000);
        assert!(t.len() * MAX_LOAD.1 <= t.slots.len() * MAX_LOAD.0);
        for k in 1..=10_000u64 {
            assert_eq!(t.get(k * 7919), Some(k));
        }
        t.check().unwrap();
    }

    #[test]
    fn a_broken_probe_run_is_reported() {
        let mut t = IntHash::default();
        // Two keys with the same home: the second sits after the first.
        let a = 1u64;
        let b = (2u64..).find(|b| t.home(*b) == t.home(a)).unwrap();
        t.insert_new(a, 1);
        t.insert_new(b, 2);
        t.check().unwrap();
        // Emptying the first slot by hand (not through `remove`) leaves a gap before `b`.
        let home = t.home(a);
        t.slots[home][0] = EMPTY;
        t.len -= 1;
        assert!(t
            .check()
            .unwrap_err()
            .contains("empty slot in its probe run"));
    }
}
