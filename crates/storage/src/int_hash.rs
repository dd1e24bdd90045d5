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
//! **Growing without a pause.** Past [`MAX_LOAD`] the table doubles, but its entries move over
//! a few at a time: the old table stays beside the new one, and each insert moves the next
//! [`MOVE_STEP`] or more slots of it (always ending after an empty slot, so no probe run is
//! split), until it is empty and dropped. Lookups and removes look in the new table, then in
//! what is left of the old one. Moving everything at once would stop the inserting
//! transaction for as long as it takes to rehash millions of entries (about 150 ms for
//! TPC-C's order lines after a minute of stripped New-Orders), which a benchmark's maximum
//! latency would show. With the top bits as the home slot, the old table's order is the new
//! one's order, so the moves write the new table front to back.
//!
//! **Preparing the new table's memory.** A new table of a megabyte or more is fresh memory
//! from the kernel, and an insert reads its slot before writing it. On a page nobody has
//! touched, that read maps the kernel's shared zero page and the write then faults a second
//! time for a page of its own: two faults per page, at random places, inside transactions.
//! So while a table grows, each insert also asks the kernel to map the next
//! [`POPULATE_STEP_BYTES`] of the new table writable at once (`MADV_POPULATE_WRITE`, Linux
//! 5.14 on; elsewhere, or if the kernel refuses, pages fault in as before). The whole table is
//! mapped within its first `bytes / POPULATE_STEP_BYTES` inserts, long before the move ends,
//! and no single insert waits for more than one step. On TPC-C's stripped New-Order/Payment
//! mix this took 140,000 of 962,000 page faults per million transactions away (see
//! `docs/performance.md` for what it did to throughput): on this machine a page fault costs
//! 1.5–1.9 µs, a read-then-write pair about 3 µs, and a page mapped in a batch 1.0 µs.
//! (Mapping the whole table when it is allocated does as well on average, but a transaction
//! that grows a 256 MiB table then waits a tenth of a second or more: one waited 1.5 s.)
//!
//! **Giving the old table back as it empties.** The other end of a growth cost as much: the
//! insert that finished a move dropped the old table, and unmapping 512 MiB took the kernel
//! 13–21 ms inside that transaction (`strace -T`). So the moved part of an old table of a
//! megabyte or more goes back to the kernel [`RELEASE_STEP_BYTES`] at a time
//! (`MADV_DONTNEED`) as the move proceeds, and the final unmap finds little left (0.3 ms for
//! 128 MiB). Released pages read as zeros, which is what moved slots hold, so no reader can
//! tell; and no reader goes there: a key whose home slot has been moved is not in the old
//! table (a move takes whole probe runs), so lookups, inserts and removes skip the old table
//! for it without reading it, which also spares them a cache miss.
//!
//! Invariants (checked by [`IntHash::check`]):
//! - each table's capacity is a power of two and at least one of its slots is empty, so every
//!   probe ends;
//! - a slot is empty iff its key is [`EMPTY`]; the key `EMPTY` itself, if present, lives in
//!   `empty_key_value` instead of a slot;
//! - linear probing without tombstones: between an entry's home slot and the entry there is
//!   no empty slot. Removal keeps this by shifting later entries of the run back
//!   (backward-shift deletion);
//! - while growing, the old table's slots before the move cursor are empty, and no key is in
//!   both tables;
//! - `len` counts the entries of both tables plus the `EMPTY` key if present.

/// The key that marks an empty slot (stored beside the table when it is a real key). Zero, so
/// a new table is zeroed memory the allocator gets from the kernel as such, with no fill pass.
const EMPTY: u64 = 0;

/// Entries per slot at which the table doubles (as a fraction: `len / capacity > 5/8`).
const MAX_LOAD: (usize, usize) = (5, 8);

/// Slots of a new table.
const MIN_CAPACITY: usize = 16;

/// Tables at least this large are prepared for writing a step at a time while they grow
/// (smaller ones come from the allocator's heap, often already mapped).
const POPULATE_MIN_BYTES: usize = 1 << 20;

/// Bytes of a growing table each insert prepares for writing: 64 pages of 4 KiB, about 65 µs
/// of the kernel's time on this machine, paid by the first `bytes / 256 KiB` inserts after a
/// growth (1,024 for a 256 MiB table). Steps of 16 and 64 KiB left more pages to fault twice
/// before the step reached them (868,000 and 832,000 faults per million stripped TPC-C
/// transactions against 822,000) and ran slower.
const POPULATE_STEP_BYTES: usize = 256 << 10;

/// Bytes of one slot.
const SLOT_BYTES: usize = std::mem::size_of::<[u64; 2]>();

/// Old tables at least this large give the memory of their moved part back to the kernel
/// during the move (a few pages in tests, so that the property tests go through it).
const RELEASE_MIN_BYTES: usize = if cfg!(test) { 1 } else { 1 << 20 };

/// Moved bytes of an old table given back at a time.
const RELEASE_STEP_BYTES: usize = if cfg!(test) { 8 << 10 } else { 256 << 10 };

/// Old-table slots an insert moves (at least) while the table grows. The old table is at most
/// 5/8 full, so it empties after `capacity / MOVE_STEP` inserts, long before the new table
/// (twice its size, starting 5/16 full) fills to 5/8.
const MOVE_STEP: usize = 16;

/// One open-addressing table.
#[derive(Clone)]
struct Slots {
    /// `[key, value]` (an array, so a new table is `alloc_zeroed`).
    slots: Box<[[u64; 2]]>,
    /// `64 - log2(capacity)`: the multiply-shift's shift.
    shift: u32,
}

impl Slots {
    fn new(capacity: usize) -> Self {
        let capacity = capacity.next_power_of_two().max(MIN_CAPACITY);
        Slots {
            slots: vec![[EMPTY, 0u64]; capacity].into_boxed_slice(),
            shift: 64 - capacity.trailing_zeros(),
        }
    }

    #[inline(always)]
    fn capacity(&self) -> usize {
        self.slots.len()
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

    /// Starts loading the line of `key`'s home slot (see [`crate::prefetch`]).
    #[inline(always)]
    fn prefetch(&self, key: u64) {
        crate::prefetch::line(self.slots[self.home(key)].as_ptr().cast());
    }

    #[inline(always)]
    fn get(&self, key: u64) -> Option<u64> {
        match self.probe(key) {
            (i, true) => Some(self.slots[i][1]),
            _ => None,
        }
    }

    /// Puts an entry known to be absent into the empty slot ending its probe run.
    #[inline(always)]
    fn put_absent(&mut self, key: u64, value: u64) {
        let mask = self.mask();
        let mut i = self.home(key);
        while self.slots[i][0] != EMPTY {
            i = (i + 1) & mask;
        }
        self.slots[i] = [key, value];
    }

    /// Removes `key`, shifting later entries of its run back into the hole when it lies on
    /// their probe path (between their home slot and where they are).
    fn remove(&mut self, key: u64) -> Option<u64> {
        let (mut hole, found) = self.probe(key);
        if !found {
            return None;
        }
        let removed = self.slots[hole][1];
        self.slots[hole][0] = EMPTY;
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

    fn entries(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.slots
            .iter()
            .filter(|s| s[0] != EMPTY)
            .map(|s| (s[0], s[1]))
    }

    /// Every entry lies at the end of an unbroken run from its home slot.
    fn check_runs(&self, what: &str) -> Result<usize, String> {
        let live = self.entries().count();
        if live == self.capacity() {
            return Err(format!("{what} table has no empty slot"));
        }
        let mask = self.mask();
        for (i, &[k, _]) in self.slots.iter().enumerate() {
            if k == EMPTY {
                continue;
            }
            let mut j = self.home(k);
            while j != i {
                if self.slots[j][0] == EMPTY {
                    return Err(format!(
                        "{what} table, slot {i}: an empty slot in its probe run at {j}"
                    ));
                }
                j = (j + 1) & mask;
            }
        }
        Ok(live)
    }
}

/// The old table while its entries move to the new one.
#[derive(Clone)]
struct Moving {
    table: Slots,
    /// The next slot to move, counted from `start` (0 ..= capacity); moves go slot by slot,
    /// wrapping, so the slots `start .. start + cursor` are empty.
    cursor: usize,
    /// An empty slot of the old table when the move began: no probe run crosses it, so moving
    /// from just after it never splits one.
    start: usize,
    /// Slots (counted like `cursor`) whose memory has been given back to the kernel.
    released: usize,
}

impl Moving {
    /// Whether `key`'s home slot has been moved. Then `key` is not in the old table: a move
    /// takes whole probe runs, so an entry whose run starts in the moved part left with it.
    /// Checking this first keeps lookups off the moved part, whose memory may be released.
    #[inline(always)]
    fn moved_home(&self, key: u64) -> bool {
        let home = self.table.home(key);
        home.wrapping_sub(self.start + 1) & self.table.mask() < self.cursor
    }

    /// The old table's value of `key`, if it still holds it.
    #[inline(always)]
    fn get(&self, key: u64) -> Option<u64> {
        if self.moved_home(key) {
            return None;
        }
        self.table.get(key)
    }

    /// Gives the whole pages of the moved part back to the kernel, once at least
    /// [`RELEASE_STEP_BYTES`] of it are not yet given back (and the table is large enough for
    /// its memory to be its own). They read as zeros, which is what moved slots hold, so this
    /// changes nothing a reader can see; it spreads over the move the cost of unmapping the
    /// old table, which at the end took one insert 13–21 ms for a 512 MiB table.
    fn release_moved(&mut self) {
        let bytes = self.table.capacity() * SLOT_BYTES;
        if bytes < RELEASE_MIN_BYTES
            || (self.cursor - self.released) * SLOT_BYTES < RELEASE_STEP_BYTES
        {
            return;
        }
        let capacity = self.table.capacity();
        // Move order is slot `start + 1` onwards, wrapping: at most two runs of indexes.
        let first = (self.start + 1 + self.released) & self.table.mask();
        let mut left = self.cursor - self.released;
        let mut at = first;
        let base = self.table.slots.as_ptr().cast::<u8>();
        while left > 0 {
            let run = left.min(capacity - at);
            release(base.wrapping_add(at * SLOT_BYTES), run * SLOT_BYTES);
            left -= run;
            at = 0;
        }
        self.released = self.cursor;
    }
}

#[derive(Clone)]
pub(crate) struct IntHash {
    table: Slots,
    /// Bytes at the start of `table` already prepared for writing (see the module
    /// documentation); the whole table when it is small, or once preparing failed.
    populated: usize,
    /// While growing: the previous table, whose entries move over a few per insert.
    old: Option<Box<Moving>>,
    /// Entries in both tables, plus one if `empty_key_value` holds one.
    len: usize,
    /// The value of key [`EMPTY`], which cannot live in a slot.
    empty_key_value: Option<u64>,
}

impl Default for IntHash {
    fn default() -> Self {
        IntHash {
            table: Slots::new(MIN_CAPACITY),
            populated: MIN_CAPACITY * SLOT_BYTES,
            old: None,
            len: 0,
            empty_key_value: None,
        }
    }
}

impl IntHash {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub(crate) fn get(&self, key: u64) -> Option<u64> {
        if key == EMPTY {
            return self.empty_key_value;
        }
        match self.table.get(key) {
            Some(v) => Some(v),
            None => self.old.as_ref().and_then(|o| o.get(key)),
        }
    }

    /// Starts loading the slot a lookup or insert of `key` reads first, in the new table and,
    /// while growing, in the old one: a hint, see [`crate::prefetch`].
    #[inline]
    pub(crate) fn prefetch(&self, key: u64) {
        self.table.prefetch(key);
        if let Some(old) = self.old.as_ref().filter(|o| !o.moved_home(key)) {
            old.table.prefetch(key);
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
        if self.old.is_some() {
            self.move_some();
        }
        let (i, found) = self.table.probe(key);
        if found || self.old.as_ref().is_some_and(|o| o.get(key).is_some()) {
            return false;
        }
        if (self.len + 1) * MAX_LOAD.1 > self.table.capacity() * MAX_LOAD.0 {
            self.grow();
            self.table.put_absent(key, value);
        } else {
            self.table.slots[i] = [key, value];
        }
        self.len += 1;
        true
    }

    /// Removes `key`, returning its value.
    pub(crate) fn remove(&mut self, key: u64) -> Option<u64> {
        let removed = if key == EMPTY {
            self.empty_key_value.take()
        } else {
            match self.table.remove(key) {
                Some(v) => Some(v),
                None => self
                    .old
                    .as_mut()
                    .filter(|o| !o.moved_home(key))
                    .and_then(|o| o.table.remove(key)),
            }
        };
        self.len -= usize::from(removed.is_some());
        removed
    }

    /// Every entry, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.table
            .entries()
            .chain(self.old.iter().flat_map(|o| o.table.entries()))
            .chain(self.empty_key_value.map(|v| (EMPTY, v)))
    }

    /// Starts moving to a table twice the size (finishing a move still under way first).
    #[cold]
    fn grow(&mut self) {
        while self.old.is_some() {
            self.move_some();
        }
        let bigger = Slots::new(self.table.capacity() * 2);
        let bytes = bigger.capacity() * SLOT_BYTES;
        self.populated = if bytes >= POPULATE_MIN_BYTES {
            0
        } else {
            bytes
        };
        let old = std::mem::replace(&mut self.table, bigger);
        let start = old
            .slots
            .iter()
            .position(|s| s[0] == EMPTY)
            .expect("a table always has an empty slot");
        self.old = Some(Box::new(Moving {
            table: old,
            cursor: 0,
            start,
            released: 0,
        }));
    }

    /// Moves the old table's next [`MOVE_STEP`] slots or more, up to and including an empty
    /// one, into the new table; drops the old table once every slot is moved.
    /// Also prepares the next [`POPULATE_STEP_BYTES`] of the new table for writing, until
    /// all of it is.
    #[inline(never)]
    fn move_some(&mut self) {
        if self.populated < self.table.capacity() * SLOT_BYTES {
            self.populate_some();
        }
        let Some(old) = self.old.as_mut() else {
            return;
        };
        let capacity = old.table.capacity();
        let mask = old.table.mask();
        let mut moved = 0;
        while old.cursor < capacity {
            // `start` is empty and was never refilled (inserts go to the new table), so the
            // last slot visited, `start` itself, ends the move.
            let i = (old.start + 1 + old.cursor) & mask;
            old.cursor += 1;
            let [k, v] = old.table.slots[i];
            if k == EMPTY {
                if moved >= MOVE_STEP {
                    old.release_moved();
                    return;
                }
            } else {
                old.table.slots[i][0] = EMPTY;
                self.table.put_absent(k, v);
            }
            moved += 1;
        }
        self.old = None;
    }

    /// Prepares the next step of the table for writing. A kernel that cannot (too old, not
    /// Linux) is not asked again for this table: its pages fault in as they are first touched.
    #[cold]
    fn populate_some(&mut self) {
        let all = self.table.capacity() * SLOT_BYTES;
        let end = (self.populated + POPULATE_STEP_BYTES).min(all);
        let start = self
            .table
            .slots
            .as_ptr()
            .cast::<u8>()
            .wrapping_add(self.populated);
        self.populated = if prepare_for_writes(start, end - self.populated) {
            end
        } else {
            all
        };
    }

    /// Bytes of the current table prepared for writing (for tests).
    #[cfg(test)]
    fn populated(&self) -> (usize, usize) {
        (self.populated, self.table.capacity() * SLOT_BYTES)
    }

    /// The invariants of the module documentation; the first one broken.
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut live = self.table.check_runs("new")?;
        if let Some(old) = &self.old {
            live += old.table.check_runs("old")?;
            let mask = old.table.mask();
            for c in 0..old.cursor {
                if old.table.slots[(old.start + 1 + c) & mask][0] != EMPTY {
                    return Err(format!(
                        "old table slot {c} after the start is moved yet full"
                    ));
                }
            }
            if let Some((k, _)) = old
                .table
                .entries()
                .find(|(k, _)| self.table.get(*k).is_some())
            {
                return Err(format!("key {k} is in both tables"));
            }
        }
        if live + usize::from(self.empty_key_value.is_some()) != self.len {
            return Err(format!("{live} live slots, len {}", self.len));
        }
        Ok(())
    }
}

/// Gives the whole pages inside `start .. start + len` back to the kernel
/// (`MADV_DONTNEED`): they read as zeros afterwards, and are mapped again if written. A hint:
/// where the kernel cannot, nothing happens.
#[cfg(target_os = "linux")]
fn release(start: *const u8, len: usize) {
    if let Some((first, bytes)) = whole_pages(start, len) {
        // SAFETY: the pages lie inside one live allocation of the caller's, whose contents
        // there the caller no longer needs (any zeros will do); no reference to them is used
        // across this call.
        unsafe { libc::madvise(first as *mut libc::c_void, bytes, libc::MADV_DONTNEED) };
    }
}

#[cfg(not(target_os = "linux"))]
fn release(_start: *const u8, _len: usize) {}

/// The whole pages inside `start .. start + len`: the first one's address and their bytes,
/// `None` if there are none (or the page size is unknown).
#[cfg(target_os = "linux")]
fn whole_pages(start: *const u8, len: usize) -> Option<(usize, usize)> {
    // SAFETY: `sysconf` has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as usize,
        _ => return None,
    };
    let first = (start as usize).next_multiple_of(page);
    let end = (start as usize + len) / page * page;
    (end > first).then(|| (first, end - first))
}

/// Asks the kernel to map the whole pages inside `start .. start + len` writable now, as
/// write faults would one at a time; false if it cannot. The memory's contents do not change
/// (anonymous memory not yet touched reads as zeros either way), so this is only about time.
#[cfg(target_os = "linux")]
fn prepare_for_writes(start: *const u8, len: usize) -> bool {
    let Some((first, bytes)) = whole_pages(start, len) else {
        return true;
    };
    // SAFETY: the range lies inside one live allocation of the caller's (rounded inwards to
    // whole pages), and MADV_POPULATE_WRITE only maps its pages; it changes no byte.
    unsafe { libc::madvise(first as *mut libc::c_void, bytes, libc::MADV_POPULATE_WRITE) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn prepare_for_writes(_start: *const u8, _len: usize) -> bool {
    false
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
        /// Inserts keys `from .. from + n` (so tables grow, and grow again mid-move).
        Fill(u64, u64),
    }

    /// Keys from a small range (so operations meet), plus `EMPTY` and the extremes.
    fn key() -> impl Strategy<Value = u64> {
        prop_oneof![8 => 0u64..400, 1 => Just(EMPTY), 1 => Just(u64::MAX), 1 => any::<u64>()]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (key(), any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
            4 => key().prop_map(Op::Remove),
            4 => key().prop_map(Op::Get),
            1 => (0u64..400, 1u64..300).prop_map(|(from, n)| Op::Fill(from, n)),
        ]
    }

    proptest! {
        /// Behaves as `std`'s map for any sequence of inserts, removes and lookups, while
        /// growing and while moving, and keeps its invariants after each.
        #[test]
        fn behaves_as_a_hash_map(ops in proptest::collection::vec(op(), 1..300)) {
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
                    Op::Fill(from, n) => {
                        for k in from..from + n {
                            let added = !model.contains_key(&k);
                            model.entry(k).or_insert(k);
                            prop_assert_eq!(t.insert_new(k, k), added);
                        }
                    }
                }
                prop_assert_eq!(t.len(), model.len());
                if let Err(e) = t.check() {
                    return Err(TestCaseError::fail(e));
                }
            }
            for (k, v) in &model {
                prop_assert_eq!(t.get(*k), Some(*v));
            }
            let mut all: Vec<_> = t.iter().collect();
            all.sort_unstable();
            let mut expected: Vec<_> = model.into_iter().collect();
            expected.sort_unstable();
            prop_assert_eq!(all, expected);
        }
    }

    #[test]
    fn a_large_new_table_is_prepared_a_step_per_insert_while_it_fills() {
        let mut t = IntHash::default();
        let mut k = 1u64;
        // Fill until the current table is large enough to be prepared.
        while t.populated().1 < POPULATE_MIN_BYTES {
            assert!(t.insert_new(k, k));
            k += 1;
        }
        let (done, all) = t.populated();
        assert_eq!(
            done, 0,
            "the insert that grew the table prepared nothing yet"
        );
        // One step per insert: after all / step more inserts, the whole table (the steps
        // are counted even where the kernel cannot prepare memory: then the first ends it).
        for step in 1..=all / POPULATE_STEP_BYTES {
            assert!(t.insert_new(k, k));
            k += 1;
            let (done, _) = t.populated();
            assert!(
                done == all || done == step * POPULATE_STEP_BYTES,
                "step {step}: {done}"
            );
        }
        assert_eq!(t.populated().0, all);
        t.check().unwrap();
        for key in 1..k {
            assert_eq!(t.get(key), Some(key));
        }
        // Small tables are never prepared.
        assert!(IntHash::default().populated().0 == MIN_CAPACITY * SLOT_BYTES);
    }

    /// Whether each page of `bytes` is mapped, by `mincore`.
    #[cfg(target_os = "linux")]
    fn resident_pages(start: *const u8, len: usize) -> Vec<bool> {
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let mut vec = vec![0u8; len.div_ceil(page)];
        // SAFETY: `start` is page-aligned (an mmap) and `len` bytes of one mapping.
        let rc = unsafe { libc::mincore(start as *mut libc::c_void, len, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore");
        vec.iter().map(|b| b & 1 == 1).collect()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn preparing_maps_whole_pages_inside_the_range_and_changes_no_byte() {
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = 8 * page;
        // SAFETY: a fresh private anonymous mapping, unmapped at the end.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let base = base.cast::<u8>().cast_const();
        assert!(
            resident_pages(base, len).iter().all(|r| !r),
            "fresh memory is unmapped"
        );
        // From the middle of page 1 to the middle of page 6: pages 2 to 5 are whole.
        let prepared = prepare_for_writes(base.wrapping_add(page + page / 2), 5 * page);
        if prepared {
            let resident = resident_pages(base, len);
            let expected: Vec<bool> = (0..8).map(|p| (2..=5).contains(&p)).collect();
            assert_eq!(resident, expected);
        } else {
            eprintln!("this kernel cannot prepare memory (MADV_POPULATE_WRITE): nothing to check");
        }
        // SAFETY: the mapping's bytes are readable; it is unmapped once, below.
        let bytes = unsafe { std::slice::from_raw_parts(base, len) };
        assert!(bytes.iter().all(|&b| b == 0));
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(base as *mut libc::c_void, len) };
    }

    #[test]
    fn an_old_table_gives_back_its_moved_part_and_every_key_stays() {
        let mut t = IntHash::default();
        let mut k = 1u64;
        // Grow until a move starts from a table of at least 4,096 slots (64 KiB).
        while t.old.as_ref().is_none_or(|o| o.table.capacity() < 4096) {
            assert!(t.insert_new(k * 7919, k));
            k += 1;
        }
        // Insert until more than a release step has been moved and given back.
        while t.old.as_ref().is_some_and(|o| o.released == 0) {
            assert!(t.insert_new(k * 7919, k));
            k += 1;
        }
        #[cfg(target_os = "linux")]
        {
            let old = t.old.as_ref().expect("still moving");
            let base = old.table.slots.as_ptr().cast::<u8>();
            let first = (old.start + 1) & old.table.mask();
            // The released part, if it does not wrap: some whole page in it is gone (checked
            // before anything reads it again, which would map the zero page there).
            if first + old.released <= old.table.capacity() {
                let (page_start, bytes) = whole_pages(
                    base.wrapping_add(first * SLOT_BYTES),
                    old.released * SLOT_BYTES,
                )
                .expect("a release step holds whole pages");
                let resident = resident_pages(page_start as *const u8, bytes);
                assert!(resident.iter().any(|r| !r), "{resident:?}");
            }
        }
        let old = t.old.as_ref().expect("still moving");
        assert!(old.released * SLOT_BYTES >= RELEASE_STEP_BYTES);
        // Keys whose home was moved are not looked for in the old table; all are found.
        t.check().unwrap();
        for key in 1..k {
            assert_eq!(t.get(key * 7919), Some(key), "key {key}");
        }
        assert!(t.remove(7919).is_some() && t.get(7919).is_none());
        // Finishing the move keeps everything.
        while t.old.is_some() {
            assert!(t.insert_new(k * 7919, k));
            k += 1;
        }
        t.check().unwrap();
        for key in 2..k {
            assert_eq!(t.get(key * 7919), Some(key));
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
        assert!(t.len() * MAX_LOAD.1 <= t.table.capacity() * MAX_LOAD.0);
        for k in 1..=10_000u64 {
            assert_eq!(t.get(k * 7919), Some(k));
        }
        t.check().unwrap();
    }

    #[test]
    fn a_growth_moves_entries_a_few_per_insert() {
        let mut t = IntHash::default();
        let mut k = 1u64;
        // Fill until the table starts growing (the insert that finds it 5/8 full).
        while t.old.is_none() {
            t.insert_new(k, k);
            k += 1;
        }
        let old_capacity = t.old.as_ref().unwrap().table.capacity();
        assert_eq!(t.table.capacity(), 2 * old_capacity);
        let mut inserts = 0;
        while t.old.is_some() {
            // No single insert moves much more than its share.
            let before = t.old.as_ref().unwrap().cursor;
            t.insert_new(k, k);
            k += 1;
            inserts += 1;
            if let Some(old) = &t.old {
                assert!(
                    old.cursor - before <= MOVE_STEP + 64,
                    "one insert moved too much"
                );
            }
            t.check().unwrap();
        }
        assert!(
            inserts >= old_capacity / (MOVE_STEP + 64),
            "{inserts} inserts"
        );
        assert!(inserts <= old_capacity / MOVE_STEP + 1, "{inserts} inserts");
        for key in 1..k {
            assert_eq!(t.get(key), Some(key));
        }
    }

    #[test]
    fn a_broken_probe_run_is_reported() {
        let mut t = IntHash::default();
        // Two keys with the same home: the second sits after the first.
        let a = 1u64;
        let b = (2u64..)
            .find(|b| t.table.home(*b) == t.table.home(a))
            .unwrap();
        t.insert_new(a, 1);
        t.insert_new(b, 2);
        t.check().unwrap();
        // Emptying the first slot by hand (not through `remove`) leaves a gap before `b`.
        let home = t.table.home(a);
        t.table.slots[home][0] = EMPTY;
        t.len -= 1;
        assert!(t
            .check()
            .unwrap_err()
            .contains("empty slot in its probe run"));
    }
}
