//! Rows named by table and key, kept in a list and found by a hash of their values: the
//! bookkeeping of a procedure run away from the engine ([`crate::read_ahead`]'s hinted reads
//! and answers, [`crate::deferred`]'s held rows) finds a row in a few instructions however many
//! it keeps, without building an encoded key to look it up.
//!
//! TPC-C's Stock-Level hints some two hundred stock rows at once; found by comparing keys, each
//! hint searched those before it, and a WebAssembly procedure spent about a seventh of a
//! TPC-C call's instructions there (see `docs/performance.md`). A key of integers is hashed
//! straight from its values here, so a lookup allocates nothing.

use engine::Value;
use hashbrown::HashTable;

/// Something that names one row: the table's id and the row's key.
pub trait Named {
    fn table(&self) -> u32;
    fn key(&self) -> &[Value];
}

impl Named for (u32, Vec<Value>) {
    fn table(&self) -> u32 {
        self.0
    }

    fn key(&self) -> &[Value] {
        &self.1
    }
}

/// Whether two keys name the same row: equal values, floats by their bits (so that a key is
/// equal to itself, NaN included, as its hash is).
pub fn same_key(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| match (a, b) {
            (Value::Int(a), Value::Int(b)) => a == b,
            (a, b) => same_value(a, b),
        })
}

/// The same value, floats compared by their bits.
pub fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits(),
        (a, b) => a == b,
    }
}

/// The hash of row `key` of `table`: equal for keys [`same_key`] finds equal (two keys that
/// differ may share one: the lookup compares them). A multiply and a rotation a value, as
/// `FxHasher` does, written out: `FxHasher` through `Hasher`'s calls cost about 150
/// instructions a TPC-C key in the WebAssembly module (callgrind).
pub fn row_hash(table: u32, key: &[Value]) -> u64 {
    const K: u64 = 0xf135_7aea_2e62_a9c5;
    let mix = |h: u64, x: u64| (h ^ x).wrapping_mul(K).rotate_left(26);
    let mut h = mix(0, u64::from(table));
    for v in key {
        h = match v {
            Value::Int(i) => mix(h, *i as u64),
            Value::Float(f) => mix(h ^ 2, f.to_bits()),
            Value::Null => mix(h, 3),
            Value::Str(s) => {
                s.as_bytes()
                    .chunks(8)
                    .fold(mix(h, 4 ^ (s.len() as u64) << 8), |h, c| {
                        let mut word = [0u8; 8];
                        word[..c.len()].copy_from_slice(c);
                        mix(h, u64::from_le_bytes(word))
                    })
            }
        };
    }
    h
}

fn hash_of<T: Named>(item: &T) -> u64 {
    row_hash(item.table(), item.key())
}

fn names<T: Named>(item: &T, table: u32, key: &[Value]) -> bool {
    item.table() == table && same_key(item.key(), key)
}

/// Lists this long or shorter are searched, not hashed: Voter's four hinted rows are found
/// quicker by comparing keys than by hashing them.
const SEARCHED: usize = 4;

/// Items that each name one row, at most one a row, in the order added (until one is
/// removed: the last takes its place), found by table and key: searched while there are at
/// most [`SEARCHED`], by a hash of the row's key beyond.
pub struct RowList<T> {
    items: Vec<T>,
    /// Positions in `items`, by the hash of the row each names; empty while `items` is
    /// searched.
    at: HashTable<usize>,
}

/// Where [`RowList::find`] found an item: valid until the list next changes. It carries the
/// row's hash where the list is hashed, so that removing the item hashes nothing again.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    i: usize,
    hash: Option<u64>,
}

impl<T> Default for RowList<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            at: HashTable::new(),
        }
    }
}

impl<T: Named> RowList<T> {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn clear(&mut self) {
        self.items.clear();
        self.at.clear();
    }

    #[cfg(test)]
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    /// Every item, in the order added; the list is empty afterwards.
    pub fn take(&mut self) -> Vec<T> {
        self.at.clear();
        std::mem::take(&mut self.items)
    }

    /// Where the item that names row `key` of `table` is.
    fn position(&self, table: u32, key: &[Value]) -> Option<usize> {
        self.position_hashed(table, key).0
    }

    /// [`RowList::position`], and the row's hash where the list is hashed (computed once for
    /// the caller that goes on to index or unindex the row).
    fn position_hashed(&self, table: u32, key: &[Value]) -> (Option<usize>, Option<u64>) {
        let items = &self.items;
        if items.len() <= SEARCHED {
            return (items.iter().position(|item| names(item, table, key)), None);
        }
        let hash = row_hash(table, key);
        let found = self
            .at
            .find(hash, |&i| names(&items[i], table, key))
            .copied();
        (found, Some(hash))
    }

    /// The item that names row `key` of `table`.
    pub fn get(&self, table: u32, key: &[Value]) -> Option<&T> {
        let i = self.position(table, key)?;
        Some(&self.items[i])
    }

    /// The item that names row `key` of `table`, to change (not the row it names).
    pub fn get_mut(&mut self, table: u32, key: &[Value]) -> Option<&mut T> {
        let i = self.position(table, key)?;
        Some(&mut self.items[i])
    }

    pub fn contains(&self, table: u32, key: &[Value]) -> bool {
        self.position(table, key).is_some()
    }

    /// Adds `item`; an item that names the same row is replaced, and returned.
    #[cfg(test)]
    pub fn put(&mut self, item: T) -> Option<T> {
        let (found, hash) = self.position_hashed(item.table(), item.key());
        if let Some(i) = found {
            return Some(std::mem::replace(&mut self.items[i], item));
        }
        self.push_hashed(item, hash);
        None
    }

    /// Adds `item`, which names a row no item names (the caller knows: it just looked, or
    /// removed the row's item), without looking again.
    pub fn push(&mut self, item: T) {
        self.push_hashed(item, None);
    }

    /// [`RowList::push`] with the item's row hash where the caller has it.
    fn push_hashed(&mut self, item: T, hash: Option<u64>) {
        debug_assert!(!self.contains(item.table(), item.key()));
        self.items.push(item);
        let n = self.items.len();
        if n == SEARCHED + 1 {
            self.index();
        } else if n > SEARCHED + 1 {
            let items = &self.items;
            let hash = hash.unwrap_or_else(|| hash_of(&items[n - 1]));
            self.at.insert_unique(hash, n - 1, |&j| hash_of(&items[j]));
        }
    }

    /// Where the item that names row `key` of `table` is, to look at ([`RowList::at`]) and
    /// perhaps remove ([`RowList::remove_at`]) with one lookup.
    pub fn find(&self, table: u32, key: &[Value]) -> Option<Slot> {
        let (found, hash) = self.position_hashed(table, key);
        Some(Slot { i: found?, hash })
    }

    /// The item at `slot` (from [`RowList::find`] since the list last changed).
    pub fn at(&self, slot: Slot) -> &T {
        &self.items[slot.i]
    }

    /// Adds the item `make` builds for row `key` of `table` unless one names the row already;
    /// whether it added.
    pub fn add_with(&mut self, table: u32, key: &[Value], make: impl FnOnce() -> T) -> bool {
        let (found, hash) = self.position_hashed(table, key);
        if found.is_some() {
            return false;
        }
        self.push_hashed(make(), hash);
        true
    }

    /// Removes the item that names row `key` of `table`; the last item takes its place.
    pub fn remove(&mut self, table: u32, key: &[Value]) -> Option<T> {
        let slot = self.find(table, key)?;
        Some(self.remove_at(slot))
    }

    /// Removes the item at `slot` (from [`RowList::find`] since the list last changed); the
    /// last item takes its place.
    pub fn remove_at(&mut self, slot: Slot) -> T {
        let Slot { i, hash } = slot;
        let last = self.items.len() - 1;
        if let Some(hash) = hash {
            if last == SEARCHED {
                // Searched from now on.
                self.at.clear();
            } else {
                if let Ok(entry) = self.at.find_entry(hash, |&j| j == i) {
                    entry.remove();
                }
                if i != last {
                    let moved = hash_of(&self.items[last]);
                    if let Some(slot) = self.at.find_mut(moved, |&j| j == last) {
                        *slot = i;
                    }
                }
            }
        }
        self.items.swap_remove(i)
    }

    /// Keeps the items `keep` says to, in their order.
    pub fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        let before = self.items.len();
        self.items.retain(keep);
        if self.items.len() != before {
            self.index();
        }
    }

    /// Builds the index afresh (or leaves it empty, for a list that is searched).
    fn index(&mut self) {
        self.at.clear();
        if self.items.len() > SEARCHED {
            let items = &self.items;
            for (i, item) in items.iter().enumerate() {
                self.at
                    .insert_unique(hash_of(item), i, |&j| hash_of(&items[j]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn row(table: u32, key: &[i64]) -> (u32, Vec<Value>) {
        (table, key.iter().map(|&k| Value::Int(k)).collect())
    }

    #[test]
    fn rows_are_told_apart_by_table_kind_and_value() {
        let mut list = RowList::default();
        let keys = [
            (1, vec![Value::Int(1)]),
            (2, vec![Value::Int(1)]),
            (1, vec![Value::Int(1), Value::Int(2)]),
            (1, vec![Value::Float(1.0)]),
            (1, vec![Value::Float(0.0)]),
            (1, vec![Value::Float(-0.0)]),
            (1, vec![Value::Str("1".into())]),
            (1, vec![Value::Null]),
            (1, vec![Value::Float(f64::NAN)]),
            (1, vec![]),
        ];
        for k in &keys {
            assert!(list.put(k.clone()).is_none(), "{k:?} taken for another row");
        }
        for (table, key) in &keys {
            assert!(list.contains(*table, key), "{key:?} of {table} not found");
        }
        assert!(!list.contains(1, &[Value::Int(2)]));
        assert!(!list.contains(3, &[Value::Int(1)]));
        for (_, a) in &keys {
            for (_, b) in &keys {
                if same_key(a, b) {
                    assert_eq!(row_hash(1, a), row_hash(1, b), "{a:?} and {b:?}");
                }
            }
        }
        assert_eq!(
            list.put(row(1, &[1])),
            Some(row(1, &[1])),
            "same row put twice"
        );
        assert_eq!(list.len(), keys.len());
    }

    #[derive(Clone, Debug)]
    enum Step {
        Put(u32, i64, u8),
        Remove(u32, i64),
        /// Adds the row's item unless one names it (`add_with`).
        Add(u32, i64, u8),
        /// Removes the row's item if its tag is odd, looked up once (`find`, `at`, `remove_at`).
        RemoveIfOdd(u32, i64),
        RetainOdd,
        Take,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0u32..3, 0i64..24, any::<u8>()).prop_map(|(t, k, v)| Step::Put(t, k, v)),
            3 => (0u32..3, 0i64..24).prop_map(|(t, k)| Step::Remove(t, k)),
            2 => (0u32..3, 0i64..24, any::<u8>()).prop_map(|(t, k, v)| Step::Add(t, k, v)),
            2 => (0u32..3, 0i64..24).prop_map(|(t, k)| Step::RemoveIfOdd(t, k)),
            1 => Just(Step::RetainOdd),
            1 => Just(Step::Take),
        ]
    }

    struct Tagged(u32, Vec<Value>, u8);

    impl Named for Tagged {
        fn table(&self) -> u32 {
            self.0
        }
        fn key(&self) -> &[Value] {
            &self.1
        }
    }

    proptest! {
        /// Against a plain list searched from the start: the same items found, the same
        /// ones returned, after any sequence of puts, removes, retains and takes.
        #[test]
        fn a_row_list_finds_what_a_searched_list_finds(steps in prop::collection::vec(step(), 0..120)) {
            let mut list: RowList<Tagged> = RowList::default();
            let mut model: Vec<(u32, i64, u8)> = Vec::new();
            for s in steps {
                match s {
                    Step::Put(t, k, v) => {
                        let old = list.put(Tagged(t, vec![Value::Int(k)], v)).map(|x| x.2);
                        let at = model.iter().position(|&(mt, mk, _)| (mt, mk) == (t, k));
                        let want = at.map(|i| std::mem::replace(&mut model[i].2, v));
                        if at.is_none() {
                            model.push((t, k, v));
                        }
                        prop_assert_eq!(old, want);
                    }
                    Step::Remove(t, k) => {
                        let got = list.remove(t, &[Value::Int(k)]).map(|x| x.2);
                        let at = model.iter().position(|&(mt, mk, _)| (mt, mk) == (t, k));
                        let want = at.map(|i| model.swap_remove(i).2);
                        prop_assert_eq!(got, want);
                    }
                    Step::Add(t, k, v) => {
                        let added = list.add_with(t, &[Value::Int(k)], || Tagged(t, vec![Value::Int(k)], v));
                        let absent = !model.iter().any(|&(mt, mk, _)| (mt, mk) == (t, k));
                        if absent {
                            model.push((t, k, v));
                        }
                        prop_assert_eq!(added, absent);
                    }
                    Step::RemoveIfOdd(t, k) => {
                        let got = list.find(t, &[Value::Int(k)]).and_then(|slot| {
                            (list.at(slot).2 % 2 == 1).then(|| list.remove_at(slot).2)
                        });
                        let at = model
                            .iter()
                            .position(|&(mt, mk, v)| (mt, mk) == (t, k) && v % 2 == 1);
                        let want = at.map(|i| model.swap_remove(i).2);
                        prop_assert_eq!(got, want);
                    }
                    Step::RetainOdd => {
                        list.retain(|x| x.2 % 2 == 1);
                        model.retain(|&(_, _, v)| v % 2 == 1);
                    }
                    Step::Take => {
                        let got: Vec<_> = list.take().into_iter().map(|x| (x.0, x.1[0].as_int().unwrap(), x.2)).collect();
                        prop_assert_eq!(got, std::mem::take(&mut model));
                    }
                }
                prop_assert_eq!(list.len(), model.len());
                for t in 0..3 {
                    for k in 0..24 {
                        let got = list.get(t, &[Value::Int(k)]).map(|x| x.2);
                        let want = model.iter().find(|&&(mt, mk, _)| (mt, mk) == (t, k)).map(|m| m.2);
                        prop_assert_eq!(got, want);
                    }
                }
                let order: Vec<_> = list.iter().map(|x| (x.0, x.1[0].as_int().unwrap(), x.2)).collect();
                prop_assert_eq!(&order, &model);
            }
        }
    }
}
