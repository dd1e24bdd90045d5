//! The lock table: a hash-partitioned map from [`LockName`] to a lock head.
//!
//! ```text
//!   LockTable
//!   ├── bucket 0: SpinLatch<Bucket> ── heads: [ Record{1,42} | Table(1) ‖ spare | spare ]
//!   ├── bucket 1: SpinLatch<Bucket> ── …           in use: heads[..live]  ‖ recycled heads
//!   └── …  (a power of two; bucket = hash64(name) & mask, but see *Regions*)
//!
//!   LockHead
//!   ├── granted: [ (T1, IS), (T4, IX) ]          the granted group, pairwise compatible
//!   └── queue:   [ T2 X→SIX upgrade | T7 S | T9 X ]   FIFO; upgrades ahead of new requests
//! ```
//!
//! Latching. Each bucket's [`SpinLatch`] (exclusive only) protects its map, every head in
//! it, and the heads' grant and queue vectors. It is held for the few instructions of one
//! request or release and never while a transaction waits; no code holds two bucket latches
//! at once. That is why it spins instead of sleeping, and why it pays to release it with a
//! plain store rather than a [`storage::Latch`]'s compare-and-swap. Lock order: bucket latch
//! → wait-for-graph mutex. A waiter's slot is lock-free ([`WaitSlot`]): granting under the
//! latch is an atomic swap, and a sleeping waiter is unparked after the latch is released.
//!
//! Invariants of a head (checked by [`LockHead::check_invariants`]):
//! 1. a head in the map is never empty (granted group or queue non-empty): no orphans;
//! 2. the granted modes are pairwise compatible and each transaction appears at most once;
//! 3. each transaction appears at most once in the queue; upgrade requests come from
//!    holders and precede every new request;
//! 4. the queue's front request is not grantable (otherwise it would have been granted):
//!    the grant pass in [`LockHead::grant_waiters`] runs after every change.
//!
//! Regions. A table of more than [`REGION_BUCKETS`] buckets is cut into regions of that
//! many, and a record lock goes to the region its key's top byte names (modulo the regions),
//! at the bucket its hash picks there; every other name is hashed over the whole table. The
//! engine puts a record's leading key column in that byte, so two threads on different TPC-C
//! warehouses latch, and write, disjoint buckets and heads: hashed over the whole table, every
//! bucket line passed between their cores (on 2 cores the lock manager cost 2.7 times as much
//! per transaction on two threads as on one, one warehouse each).
//!
//! A bucket is a hash chain kept as one vector of heads: `heads[..live]` are the heads in
//! use (found by a linear search of a chain that is short — the names hash over thousands
//! of buckets), `heads[live..]` are spare heads recycled with their vectors' capacity. A
//! head that becomes unused is swapped behind `live`; a fresh name takes the first spare.
//! So once warm, locking a fresh record and releasing it allocate nothing: no map node, no
//! head, no grant or queue vector (`tests/lock_alloc.rs` counts allocations to check it).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::Instant;

use smallvec::SmallVec;
use storage::latch::{SpinGuard, SpinLatch};

use super::mode::LockMode;
use super::name::LockName;
use super::TxnId;

/// Buckets per region of record locks (see *Regions* in the module docs): the table's size
/// for one thread, whose heads and bucket array stay in its cache.
pub(crate) const REGION_BUCKETS: u64 = 256;

/// Spare heads kept per bucket (more are freed when a burst of names leaves the bucket).
const SPARE_HEADS_MAX: usize = 32;

/// One granted lock in a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Grant {
    pub txn: TxnId,
    pub mode: LockMode,
    /// The thread the transaction is bound to ([`super::LockConfig::thread_bound`]), or
    /// [`UNBOUND`].
    pub home: u32,
    /// The lowest key of the gap below this record that the grant guards against inserts
    /// (a [`KeyRank`](super::KeyRank)); [`WHOLE_GAP`](super::WHOLE_GAP) for all of it.
    pub floor: u64,
}

/// [`Grant::home`] of a transaction not bound to a thread.
pub(crate) const UNBOUND: u32 = u32::MAX;

/// A blocked request.
pub(crate) struct Waiter {
    pub txn: TxnId,
    /// The mode to hold once granted (for an upgrade: the supremum of held and requested).
    pub mode: LockMode,
    /// Converts an existing grant of the same transaction instead of adding one.
    pub upgrade: bool,
    /// The transaction's [`Grant::home`].
    pub home: u32,
    /// The request's [`Grant::floor`] (for an upgrade: the lower of held and requested).
    pub floor: u64,
    /// Whether the request is in the wait-for graph. A waiter registers when it is about to
    /// sleep (at once when it will not spin), never while it spins; see `super::deadlock`.
    pub registered: bool,
    pub slot: Arc<WaitSlot>,
    /// The waiting thread, unparked by whoever grants or nudges the request.
    pub thread: Thread,
}

/// The thread to unpark for each grant or nudge made under a bucket latch: they are
/// unparked after the latch is released ([`wake`]), so that no system call lengthens a
/// latch's hold. Four inline: a grant pass rarely wakes more.
pub(crate) type Wakes = SmallVec<[Thread; 4]>;

/// Unparks the threads a grant pass collected. Call with no latch held.
pub(crate) fn wake(wakes: Wakes) {
    for thread in wakes {
        thread.unpark();
    }
}

/// Where a blocked transaction waits. One per transaction; a transaction waits for at most
/// one request at a time.
///
/// ```text
///            arm            sleep_until (CAS)
///   Idle ───────▶ Waiting ───────────────────▶ Parked
///    ▲             │  ▲ ▲  park timed out        │ │
///    │             │  │ └────────────────────────┘ │ nudge: the granter unparks it
///    │             │  │  waiter takes the nudge     ▼
///    │             │  └─────────────────────── Nudged ◀── nudge (an awake waiter)
///    │     grant   ▼                              │
///    └───────── Granted ◀─────────────────────────┘ grant (from Parked: unparks it)
///      disarm
/// ```
///
/// The state is one atomic: the waiter watches it while it spins, and moves it
/// from `Waiting` to `Parked` (compare-and-swap) just before it sleeps with
/// `std::thread::park`. The granter swaps in `Granted` under the bucket latch; only if the
/// swap found `Parked` does the waiter need unparking, which the granter does after the
/// latch is released. A grant to a spinning waiter is therefore one atomic swap and no
/// system call; and since the waiter parks only after its compare-and-swap succeeded, a
/// grant can never fall between its last look and its sleep. A *nudge* (the request moved
/// to the front of its queue, [`LockHead::grant_waiters`]) works the same way with state
/// `Nudged`: the waiter, awake or woken, takes it back to `Waiting` and spins again. The
/// granter first leaves the grant's time in `granted_at_ns`, so that the waiter can measure
/// how late it saw its grant (its wake-up latency).
pub(crate) struct WaitSlot {
    /// `IDLE`, `WAITING`, `PARKED`, `NUDGED` or `GRANTED`.
    state: AtomicU8,
    /// When the request was granted, in the lock manager's clock (ns since its creation);
    /// written before `state` becomes `GRANTED`, read after that is seen.
    granted_at_ns: AtomicU64,
}

const IDLE: u8 = 0;
const WAITING: u8 = 1;
const PARKED: u8 = 2;
const NUDGED: u8 = 3;
const GRANTED: u8 = 4;

/// How a sleep ([`WaitSlot::sleep_until`]) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sleep {
    /// The request was granted while the waiter slept (or, `slept: false`, just before it
    /// would have).
    Granted { slept: bool },
    /// Nudged: the request moved to the front of its queue.
    Nudged,
    /// The deadline passed.
    Deadline,
}

impl WaitSlot {
    pub fn new() -> Self {
        WaitSlot {
            state: AtomicU8::new(IDLE),
            granted_at_ns: AtomicU64::new(0),
        }
    }

    /// Marks the owner as about to wait. Called under the bucket latch, before it is released.
    pub fn arm(&self) {
        self.state.store(WAITING, Ordering::Relaxed);
    }

    /// Grants the owner's request at `now_ns` (the lock manager's clock). Called under the
    /// bucket latch. Returns whether the owner sleeps, so must be unparked.
    pub fn grant(&self, now_ns: u64) -> bool {
        self.granted_at_ns.store(now_ns, Ordering::Relaxed);
        let before = self.state.swap(GRANTED, Ordering::AcqRel);
        debug_assert!(
            matches!(before, WAITING | PARKED | NUDGED),
            "grant of a request not waiting"
        );
        // From `NUDGED` the waiter is awake, or its nudger is about to unpark it.
        before == PARKED
    }

    /// Tells the owner that its request moved to the front of its queue, so that it spins
    /// again. Called under the bucket latch. Returns whether the owner sleeps, so must be
    /// unparked.
    pub fn nudge(&self) -> bool {
        for from in [PARKED, WAITING] {
            if self
                .state
                .compare_exchange(from, NUDGED, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return from == PARKED;
            }
        }
        false
    }

    /// Whether granted.
    #[inline]
    pub fn is_granted(&self) -> bool {
        self.state.load(Ordering::Acquire) == GRANTED
    }

    /// When the request was granted (the lock manager's clock); meaningful once granted.
    pub fn granted_at_ns(&self) -> u64 {
        self.granted_at_ns.load(Ordering::Relaxed)
    }

    /// Spins until granted or `until`; returns whether granted.
    pub fn spin_until(&self, until: Instant) -> bool {
        loop {
            // The clock is read once per 64 checks: a check is a few instructions.
            for _ in 0..64 {
                if self.is_granted() {
                    return true;
                }
                std::hint::spin_loop();
            }
            if Instant::now() >= until {
                return self.is_granted();
            }
        }
    }

    /// Sleeps until granted, nudged or `deadline`. Never holds a bucket latch.
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        match self
            .state
            .compare_exchange(WAITING, PARKED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {}
            Err(GRANTED) => return Sleep::Granted { slept: false },
            Err(_) => return self.take_nudge(false),
        }
        loop {
            match self.state.load(Ordering::Acquire) {
                GRANTED => return Sleep::Granted { slept: true },
                NUDGED => return self.take_nudge(true),
                _ => {}
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            // Returns when unparked, at the timeout, or spuriously: the loop looks again.
            std::thread::park_timeout(deadline - now);
        }
        match self
            .state
            .compare_exchange(PARKED, WAITING, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Sleep::Deadline,
            Err(GRANTED) => Sleep::Granted { slept: true },
            Err(_) => self.take_nudge(true),
        }
    }

    /// Takes a nudge (`Nudged` back to `Waiting`), unless a grant overtook it.
    fn take_nudge(&self, slept: bool) -> Sleep {
        match self
            .state
            .compare_exchange(NUDGED, WAITING, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Sleep::Nudged,
            Err(_) => Sleep::Granted { slept },
        }
    }

    /// Back to idle after the wait ends (granted, timed out or chosen as victim).
    pub fn disarm(&self) {
        self.state.store(IDLE, Ordering::Relaxed);
    }
}

/// The state of one lock name: granted group and FIFO wait queue.
pub(crate) struct LockHead {
    /// The name this head locks (meaningless while the head is a spare).
    pub name: LockName,
    /// Held inline up to two grants (almost every record lock has one holder), so that
    /// granting writes the head's own cache line, not a separate allocation's.
    pub granted: SmallVec<[Grant; 2]>,
    pub queue: VecDeque<Waiter>,
}

impl LockHead {
    fn new(name: LockName) -> Self {
        LockHead {
            name,
            granted: SmallVec::new(),
            queue: VecDeque::new(),
        }
    }

    /// Index of `txn`'s grant.
    #[inline]
    pub fn grant_of(&self, txn: TxnId) -> Option<usize> {
        self.granted.iter().position(|g| g.txn == txn)
    }

    /// Whether `mode` is compatible with every grant except `txn`'s own.
    #[inline]
    pub fn compatible_with_others(&self, txn: TxnId, mode: LockMode) -> bool {
        self.granted
            .iter()
            .all(|g| g.txn == txn || g.mode.compatible(mode))
    }

    /// Whether an insert of a key ranked `inserting` into the gap below this record may go
    /// ahead with `mode` (the insert's instant check): every other grant is compatible, or
    /// guards only keys from a floor above the inserted one.
    #[inline]
    pub fn admits_insert(&self, txn: TxnId, mode: LockMode, inserting: u64) -> bool {
        self.granted
            .iter()
            .all(|g| g.txn == txn || g.mode.compatible(mode) || inserting < g.floor)
    }

    /// A transaction bound to thread `home` that a request of `txn` for `mode`, queued behind
    /// the first `ahead` waiters, would wait for: a holder incompatible with it, or with a
    /// waiter ahead of it (the queue is served in order). Such a holder runs again only when
    /// that thread does, and the thread is the one about to wait.
    pub fn own_thread_blocker(
        &self,
        txn: TxnId,
        home: u32,
        mode: LockMode,
        ahead: usize,
    ) -> Option<TxnId> {
        if home == UNBOUND {
            return None;
        }
        let modes = std::iter::once(mode).chain(self.queue.iter().take(ahead).map(|w| w.mode));
        self.granted
            .iter()
            .find(|g| {
                g.home == home && g.txn != txn && modes.clone().any(|m| !g.mode.compatible(m))
            })
            .map(|g| g.txn)
    }

    pub fn is_unused(&self) -> bool {
        self.granted.is_empty() && self.queue.is_empty()
    }

    /// Queues a blocked request: upgrades after the upgrades already queued, new requests
    /// at the back.
    pub fn enqueue(&mut self, waiter: Waiter) {
        if waiter.upgrade {
            let at = self.queue.iter().take_while(|w| w.upgrade).count();
            self.queue.insert(at, waiter);
        } else {
            self.queue.push_back(waiter);
        }
    }

    /// Removes `txn`'s queued request, if any.
    pub fn dequeue(&mut self, txn: TxnId) -> bool {
        match self.queue.iter().position(|w| w.txn == txn) {
            Some(i) => {
                self.queue.remove(i);
                true
            }
            None => false,
        }
    }

    /// Removes `txn`'s grant, if any.
    pub fn remove_grant(&mut self, txn: TxnId) -> bool {
        match self.grant_of(txn) {
            Some(i) => {
                self.granted.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Grants queued requests from the front while they are compatible with the granted
    /// group; stops at the first that is not (FIFO, no barging). Each grant is stamped
    /// `now_ns` (the lock manager's clock); a sleeping grantee's thread goes into `wakes`.
    /// Calls `on_grant` with each granted request that was in the wait-for graph. Then,
    /// if `nudge` (waiters spin), nudges the new front ([`LockHead::nudge_front`]).
    pub fn grant_waiters(
        &mut self,
        now_ns: u64,
        nudge: bool,
        wakes: &mut Wakes,
        mut on_grant: impl FnMut(TxnId),
    ) {
        let mut granted = false;
        while let Some(front) = self.queue.front() {
            if !self.compatible_with_others(front.txn, front.mode) {
                break;
            }
            let Some(w) = self.queue.pop_front() else {
                break;
            };
            match self.grant_of(w.txn) {
                Some(i) if w.upgrade => {
                    let g = &mut self.granted[i];
                    g.mode = w.mode;
                    g.floor = g.floor.min(w.floor);
                }
                _ => self.granted.push(Grant {
                    txn: w.txn,
                    mode: w.mode,
                    home: w.home,
                    floor: w.floor,
                }),
            }
            if w.slot.grant(now_ns) {
                wakes.push(w.thread);
            }
            if w.registered {
                on_grant(w.txn);
            }
            granted = true;
        }
        if granted && nudge {
            self.nudge_front(wakes);
        }
    }

    /// Whether the request at queue index `at` is at the front: every request queued ahead
    /// of it is compatible with it, so that it is granted as soon as the holders that block
    /// it release (the ones ahead are granted with it). Only such a request spins.
    pub fn is_front(&self, at: usize) -> bool {
        self.front_len() > at
    }

    /// How many requests, from the queue's start, are at the front: each compatible with
    /// every one ahead of it, that is (compatibility being monotone in the lattice) with the
    /// supremum of their modes.
    fn front_len(&self) -> usize {
        let mut ahead: Option<LockMode> = None;
        for (at, w) in self.queue.iter().enumerate() {
            if ahead.is_some_and(|m| !m.compatible(w.mode)) {
                return at;
            }
            ahead = Some(ahead.map_or(w.mode, |m| m.supremum(w.mode)));
        }
        self.queue.len()
    }

    /// Nudges the registered requests at the front (see [`LockHead::is_front`]) after a
    /// grant moved them there: they sleep or are about to, and are woken now so that their
    /// wake-up overlaps the new holders' work and they spin, not sleep, through its end.
    /// (The unregistered ones at the front are spinning already.)
    fn nudge_front(&self, wakes: &mut Wakes) {
        for w in self.queue.iter().take(self.front_len()) {
            if w.registered && w.slot.nudge() {
                wakes.push(w.thread.clone());
            }
        }
    }

    /// Whether any queued request is in the wait-for graph (else a change of this head
    /// leaves the graph as it is, and its mutex need not be taken).
    pub fn has_registered(&self) -> bool {
        self.queue.iter().any(|w| w.registered)
    }

    /// The transactions that the waiter at queue index `at` waits for, each with its thread
    /// ([`Grant::home`]): incompatible other holders and everyone queued ahead.
    pub fn blockers_of(&self, at: usize) -> impl Iterator<Item = (TxnId, u32)> + '_ {
        let w = &self.queue[at];
        let holders = self
            .granted
            .iter()
            .filter(move |g| g.txn != w.txn && !g.mode.compatible(w.mode))
            .map(|g| (g.txn, g.home));
        let ahead = self.queue.iter().take(at).map(|a| (a.txn, a.home));
        holders.chain(ahead)
    }

    /// Panics if an invariant of the module documentation is broken.
    pub fn check_invariants(&self) {
        let name = &self.name;
        assert!(!self.is_unused(), "{name}: orphan lock head");
        for (i, a) in self.granted.iter().enumerate() {
            for b in &self.granted[i + 1..] {
                assert_ne!(a.txn, b.txn, "{name}: {} granted twice", a.txn);
                assert!(
                    a.mode.compatible(b.mode),
                    "{name}: incompatible grants {} {} / {} {}",
                    a.txn,
                    a.mode,
                    b.txn,
                    b.mode
                );
            }
        }
        let mut seen_new = false;
        for (i, w) in self.queue.iter().enumerate() {
            assert!(
                self.queue.iter().skip(i + 1).all(|o| o.txn != w.txn),
                "{name}: {} queued twice",
                w.txn
            );
            if w.upgrade {
                assert!(
                    !seen_new,
                    "{name}: upgrade of {} behind a new request",
                    w.txn
                );
                assert!(
                    self.grant_of(w.txn).is_some(),
                    "{name}: upgrade of {} holds nothing",
                    w.txn
                );
            } else {
                seen_new = true;
                assert!(
                    self.grant_of(w.txn).is_none(),
                    "{name}: new request of holder {}",
                    w.txn
                );
            }
        }
        if let Some(front) = self.queue.front() {
            assert!(
                !self.compatible_with_others(front.txn, front.mode),
                "{name}: front request of {} is grantable but waits",
                front.txn
            );
        }
    }
}

/// The heads of one partition of the name space: a hash chain plus its spare heads.
#[derive(Default)]
pub(crate) struct Bucket {
    /// `heads[..live]`: the heads in use, one per name, in no order; `heads[live..]`: spares.
    heads: Vec<LockHead>,
    live: usize,
}

impl Bucket {
    /// The heads in use.
    #[inline]
    pub fn heads(&self) -> &[LockHead] {
        &self.heads[..self.live]
    }

    /// Index of `name`'s head, if it has one.
    #[inline(always)]
    pub fn position(&self, name: LockName) -> Option<usize> {
        self.heads[..self.live].iter().position(|h| h.name == name)
    }

    /// The head at `index` (from [`Bucket::position`] or [`Bucket::head_index`]).
    #[inline]
    pub fn head_at(&mut self, index: usize) -> &mut LockHead {
        &mut self.heads[index]
    }

    /// Index of `name`'s head, taking a spare (or, before the bucket is warm, a new head)
    /// if it has none.
    #[inline(always)]
    pub fn head_index(&mut self, name: LockName) -> usize {
        if let Some(i) = self.position(name) {
            return i;
        }
        let i = self.live;
        match self.heads.get_mut(i) {
            Some(spare) => {
                debug_assert!(spare.is_unused(), "spare head in use");
                spare.name = name;
            }
            None => self.heads.push(LockHead::new(name)),
        }
        self.live += 1;
        i
    }

    /// Retires the head at `index` if it became unused, keeping it as a spare.
    #[inline(always)]
    pub fn retire_if_unused(&mut self, index: usize) {
        if !self.heads[index].is_unused() {
            return;
        }
        self.live -= 1;
        if index != self.live {
            // (The usual chain holds one head: then it is already last, and nothing moves.)
            self.heads.swap(index, self.live);
        }
        if self.heads.len() - self.live > SPARE_HEADS_MAX {
            self.heads.truncate(self.live + SPARE_HEADS_MAX);
        }
    }
}

/// A bucket on a cache line of its own: a bucket's latch word and chain (about 40 bytes)
/// shared a line with its neighbour's, so threads locking unrelated names in neighbouring
/// buckets took the line from each other at every request and release.
#[repr(align(64))]
struct PaddedBucket(SpinLatch<Bucket>);

/// The partitioned table.
pub(crate) struct LockTable {
    /// Each latch protects its bucket's map and all heads in it.
    buckets: Box<[PaddedBucket]>,
    mask: u64,
}

impl LockTable {
    /// `buckets` is rounded up to a power of two (at least 1, at most 2^30).
    pub fn new(buckets: usize, latching: bool) -> Self {
        let n = buckets.clamp(1, 1 << 30).next_power_of_two();
        LockTable {
            buckets: (0..n)
                .map(|_| PaddedBucket(SpinLatch::new(Bucket::default(), latching)))
                .collect(),
            mask: n as u64 - 1,
        }
    }

    #[inline]
    pub fn bucket(&self, name: LockName) -> &SpinLatch<Bucket> {
        self.bucket_at(self.bucket_index(name))
    }

    /// Index of `name`'s bucket; a held lock keeps it, so its release does not hash again.
    /// A record's bucket lies in its region (see *Regions* in the module docs).
    #[inline]
    pub fn bucket_index(&self, name: LockName) -> u32 {
        let h = name.hash64();
        match name {
            LockName::Record { key, .. } if self.mask >= REGION_BUCKETS => {
                let regions = (self.mask + 1) / REGION_BUCKETS;
                let region = (key >> 56) & (regions - 1);
                ((region * REGION_BUCKETS) | (h & (REGION_BUCKETS - 1))) as u32
            }
            _ => (h & self.mask) as u32,
        }
    }

    /// The bucket at `index` (from [`LockTable::bucket_index`]).
    #[inline]
    pub fn bucket_at(&self, index: u32) -> &SpinLatch<Bucket> {
        &self.buckets[index as usize].0
    }

    pub fn buckets(&self) -> impl Iterator<Item = &SpinLatch<Bucket>> {
        self.buckets.iter().map(|b| &b.0)
    }

    /// Latches `name`'s bucket exclusively.
    #[inline]
    pub fn latch(&self, name: LockName) -> SpinGuard<'_, Bucket> {
        self.bucket(name).lock()
    }
}

#[cfg(test)]
mod region_tests {
    use super::*;

    fn record(region: u64, i: u64) -> LockName {
        // A spread of low bits, as the engine's key hash gives.
        let hash = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 8;
        LockName::Record {
            table: 3,
            key: (region << 56) | hash,
        }
    }

    /// With four regions, a record's bucket lies in its region's 256 and the region's
    /// records spread over them; with one (256 buckets), the region changes nothing.
    #[test]
    fn records_of_different_regions_never_share_a_bucket() {
        let table = LockTable::new(1024, true);
        for region in 0..8u64 {
            let mut used = std::collections::HashSet::new();
            for i in 0..10_000 {
                let b = u64::from(table.bucket_index(record(region, i)));
                assert_eq!(b / REGION_BUCKETS, region % 4, "region {region} key {i}");
                used.insert(b);
            }
            assert!(
                used.len() > 250,
                "region {region} used {} buckets",
                used.len()
            );
        }
        let small = LockTable::new(256, true);
        for i in 0..1_000 {
            let (a, b) = (record(0, i), record(5, i));
            assert_eq!(small.bucket_index(a), (a.hash64() & 255) as u32);
            assert_eq!(small.bucket_index(b), (b.hash64() & 255) as u32);
        }
    }

    /// Names other than records are hashed over the whole table.
    #[test]
    fn other_names_use_every_bucket() {
        let table = LockTable::new(1024, true);
        let used: std::collections::HashSet<u32> = (0..20_000u64)
            .map(|p| table.bucket_index(LockName::Page { table: 1, page: p }))
            .collect();
        assert!(used.len() > 1000, "{} buckets", used.len());
    }
}
