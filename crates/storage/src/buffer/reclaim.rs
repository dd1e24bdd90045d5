//! Pages given back and handed out again: the unlinked leaves of B+-trees, reused once no
//! reader can still hold their ids.
//!
//! A delete that empties a B+-tree leaf takes it out of the tree (`BTree::unlink_empty_leaf`),
//! but readers that began before may still hold the page's id: a transaction's leaf hints, a
//! backward scan that read it from its right neighbour's link, an optimistic descent between
//! the parent's read and its check. Each of those lives inside one transaction. So the page
//! is *retired* with the current epoch, and reused only once every reader that entered at
//! that epoch or before has left:
//!
//! ```text
//!   reader (a transaction):  enter: e = epoch; count[shard][e & 1] += 1; epoch still e? else undo, again
//!                            exit:  count[shard][e & 1] -= 1
//!   retire(page):            retired += (epoch, page)                      (after the unlink)
//!   advance (rare):          no reader counted in parity (epoch − 1) & 1  →  epoch += 1
//!   allocate:                a page retired at r is free once epoch ≥ r + 2
//! ```
//!
//! Why `r + 2`: moving the epoch from `g` to `g + 1` waits until no reader of parity
//! `(g − 1) & 1` is left, so after it every reader entered at `g` or `g + 1`. At `r + 2` the
//! readers of epochs `r − 1` and `r` have both been waited out, and a reader entered later
//! began after the unlink (the retire reads the epoch after it), so it cannot know the page.
//! A reader that read the epoch just before an advance and counted itself after it sees the
//! epoch changed and counts itself again (every operation sequentially consistent), so an
//! advance never misses one.
//!
//! The counters are per shard of threads (`shard::thread_index`), each on a line of its own,
//! as the active-transaction table's: entering and leaving write only the thread's own line.
//! Retiring, advancing and allocating take one mutex; they happen once per emptied leaf and
//! per allocation, not per transaction.
//!
//! Off until the pool's owner turns it on ([`Reclaimer::enable`]): only an owner that makes
//! every reader enter (the engine's transactions) may let pages be reused. Off, a retired page
//! is simply kept, as unlinked leaves always were.
//!
//! The lists live in memory; the engine carries them across a restart. Each checkpoint
//! records the pages listed ([`Reclaimer::listed`]), and the next open, once recovery has
//! redone the log, hands back ([`Reclaimer::adopt`]) those that are still unlinked leaves,
//! with the ones unlinked after the checkpoint: no reader of the last process can hold them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};

use crossbeam::utils::CachePadded;
use parking_lot::Mutex;

use crate::page::PageId;

/// Shards of the readers' counters (a thread uses `thread_index % SHARDS`).
const SHARDS: usize = 64;

/// Where a reader counted itself ([`Reclaimer::enter`]); given back to
/// [`Reclaimer::exit`], from any thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochToken {
    shard: u16,
    parity: u8,
}

#[derive(Default)]
struct Lists {
    /// Retired pages with the epoch they were retired in, oldest first.
    retired: VecDeque<(u64, PageId)>,
    /// Pages no reader can hold: the next allocations take them.
    free: Vec<PageId>,
}

/// Counts of pages given back and handed out again ([`Reclaimer::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReuseStats {
    /// Pages retired since the pool was created (while reuse was on).
    pub retired: u64,
    /// Allocations served by a retired page instead of a new one.
    pub reused: u64,
    /// Retired pages not yet reused (waiting for their readers, or free), adopted ones
    /// included.
    pub waiting: u64,
    /// Unlinked leaves left by an earlier run of the database, found when it opened and
    /// handed out like retired pages ([`Reclaimer::adopt`]).
    pub adopted: u64,
}

pub(crate) struct Reclaimer {
    enabled: AtomicBool,
    epoch: CachePadded<AtomicU64>,
    /// Readers in each parity of the epoch they entered, per shard.
    readers: Box<[CachePadded<[AtomicU64; 2]>]>,
    lists: Mutex<Lists>,
    /// Retired plus free pages: whether an allocation need look at `lists` at all.
    waiting: AtomicUsize,
    retired_total: AtomicU64,
    reused_total: AtomicU64,
    adopted_total: AtomicU64,
}

impl Reclaimer {
    pub(crate) fn new() -> Reclaimer {
        Reclaimer {
            enabled: AtomicBool::new(false),
            // From 2, so that `r + 2` of a page retired at the start is past any reader.
            epoch: CachePadded::new(AtomicU64::new(2)),
            readers: (0..SHARDS)
                .map(|_| CachePadded::new([AtomicU64::new(0), AtomicU64::new(0)]))
                .collect(),
            lists: Mutex::new(Lists::default()),
            waiting: AtomicUsize::new(0),
            retired_total: AtomicU64::new(0),
            reused_total: AtomicU64::new(0),
            adopted_total: AtomicU64::new(0),
        }
    }

    pub(crate) fn enable(&self) {
        self.enabled.store(true, SeqCst);
    }

    /// Counts the caller as a reader until [`Reclaimer::exit`]; `None` while reuse is off.
    #[inline]
    pub(crate) fn enter(&self) -> Option<EpochToken> {
        if !self.enabled.load(SeqCst) {
            return None;
        }
        let shard = crate::shard::thread_index() % SHARDS;
        let counts = &self.readers[shard];
        loop {
            let e = self.epoch.load(SeqCst);
            let parity = (e & 1) as usize;
            counts[parity].fetch_add(1, SeqCst);
            if self.epoch.load(SeqCst) == e {
                return Some(EpochToken {
                    shard: shard as u16,
                    parity: parity as u8,
                });
            }
            counts[parity].fetch_sub(1, SeqCst);
        }
    }

    #[inline]
    pub(crate) fn exit(&self, token: EpochToken) {
        self.readers[token.shard as usize][token.parity as usize].fetch_sub(1, SeqCst);
    }

    /// Takes `page`, just unlinked, for reuse once its readers are gone. Ignored while reuse
    /// is off (the page stays an unlinked leaf).
    pub(crate) fn retire(&self, page: PageId) {
        if !self.enabled.load(SeqCst) {
            return;
        }
        let mut lists = self.lists.lock();
        let e = self.epoch.load(SeqCst);
        lists.retired.push_back((e, page));
        self.waiting.fetch_add(1, SeqCst);
        self.retired_total.fetch_add(1, SeqCst);
        self.mature(&mut lists);
    }

    /// Takes `pages` as free at once: pages in no structure that no reader can hold (the
    /// unlinked leaves an earlier run of the database left, found when it opens, before any
    /// transaction). A page already listed is not listed twice. Ignored while reuse is off.
    pub(crate) fn adopt(&self, pages: &[PageId]) {
        if !self.enabled.load(SeqCst) || pages.is_empty() {
            return;
        }
        let mut lists = self.lists.lock();
        let mut known: std::collections::HashSet<PageId> = lists
            .retired
            .iter()
            .map(|(_, p)| *p)
            .chain(lists.free.iter().copied())
            .collect();
        for &page in pages {
            if known.insert(page) {
                lists.free.push(page);
                self.waiting.fetch_add(1, SeqCst);
                self.adopted_total.fetch_add(1, SeqCst);
            }
        }
    }

    /// Every page retired or adopted and not yet reused, oldest retire first (what a
    /// checkpoint records, so that the next open can adopt them).
    pub(crate) fn listed(&self) -> Vec<PageId> {
        let lists = self.lists.lock();
        lists
            .retired
            .iter()
            .map(|(_, p)| *p)
            .chain(lists.free.iter().copied())
            .collect()
    }

    /// A page no reader can hold, if there is one, for an allocation.
    #[inline]
    pub(crate) fn take(&self) -> Option<PageId> {
        if self.waiting.load(SeqCst) == 0 {
            return None;
        }
        self.take_slow()
    }

    #[inline(never)]
    fn take_slow(&self) -> Option<PageId> {
        let mut lists = self.lists.lock();
        if lists.free.is_empty() {
            self.mature(&mut lists);
        }
        let page = lists.free.pop()?;
        self.waiting.fetch_sub(1, SeqCst);
        self.reused_total.fetch_add(1, SeqCst);
        Some(page)
    }

    /// Advances the epoch if the readers of the one before have left, then frees every
    /// retired page two epochs old.
    fn mature(&self, lists: &mut Lists) {
        if lists.retired.is_empty() {
            return;
        }
        let e = self.epoch.load(SeqCst);
        let old = ((e + 1) & 1) as usize; // the parity of e − 1
        if self.readers.iter().all(|r| r[old].load(SeqCst) == 0) {
            // Only advanced under the lists' mutex, so this cannot race another advance.
            self.epoch.store(e + 1, SeqCst);
        }
        let now = self.epoch.load(SeqCst);
        while let Some(&(r, page)) = lists.retired.front() {
            if now < r + 2 {
                break;
            }
            lists.retired.pop_front();
            lists.free.push(page);
        }
    }

    pub(crate) fn stats(&self) -> ReuseStats {
        ReuseStats {
            retired: self.retired_total.load(SeqCst),
            reused: self.reused_total.load(SeqCst),
            waiting: self.waiting.load(SeqCst) as u64,
            adopted: self.adopted_total.load(SeqCst),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on() -> Reclaimer {
        let r = Reclaimer::new();
        r.enable();
        r
    }

    #[test]
    fn off_it_counts_no_reader_and_keeps_every_page() {
        let r = Reclaimer::new();
        assert_eq!(r.enter(), None);
        r.retire(PageId(7));
        assert_eq!(r.take(), None);
        assert_eq!(r.stats(), ReuseStats::default());
    }

    #[test]
    fn a_page_waits_for_the_readers_that_entered_before_it_was_retired() {
        let r = on();
        let before = r.enter().unwrap();
        r.retire(PageId(7));
        // However often an allocation asks, the reader from before the retire holds it.
        for _ in 0..5 {
            assert_eq!(r.take(), None);
        }
        // A reader entering after the retire does not.
        let after = r.enter().unwrap();
        assert_eq!(r.take(), None);
        r.exit(before);
        assert_eq!(r.take(), Some(PageId(7)));
        r.exit(after);
        assert_eq!(r.take(), None);
        assert_eq!(
            r.stats(),
            ReuseStats {
                retired: 1,
                reused: 1,
                waiting: 0,
                adopted: 0
            }
        );
    }

    #[test]
    fn with_no_reader_a_retired_page_is_reused_at_once() {
        let r = on();
        r.retire(PageId(3));
        r.retire(PageId(4));
        let mut got = vec![r.take().unwrap(), r.take().unwrap()];
        got.sort();
        assert_eq!(got, vec![PageId(3), PageId(4)]);
        assert_eq!(r.take(), None);
    }

    #[test]
    fn adopted_pages_are_free_at_once_and_listed_once() {
        let off = Reclaimer::new();
        off.adopt(&[PageId(9)]);
        assert_eq!(off.take(), None, "adopted while reuse is off");

        let r = on();
        let reader = r.enter().unwrap();
        r.retire(PageId(3));
        // 3 is retired already, 5 comes twice: each is listed once.
        r.adopt(&[PageId(5), PageId(3), PageId(5), PageId(8)]);
        let mut listed = r.listed();
        listed.sort();
        assert_eq!(listed, vec![PageId(3), PageId(5), PageId(8)]);
        // The adopted pages go out while the reader still holds back the retired one.
        let mut got = vec![r.take().unwrap(), r.take().unwrap()];
        got.sort();
        assert_eq!(got, vec![PageId(5), PageId(8)]);
        assert_eq!(r.take(), None);
        r.exit(reader);
        assert_eq!(r.take(), Some(PageId(3)));
        assert_eq!(r.listed(), vec![]);
        assert_eq!(
            r.stats(),
            ReuseStats {
                retired: 1,
                reused: 3,
                waiting: 0,
                adopted: 2
            }
        );
    }

    #[test]
    fn readers_on_many_threads_never_see_their_page_handed_out() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        // Each reader retires a page while inside (as if it had unlinked a leaf it could
        // still reach), and checks after a while that no allocation took it meanwhile.
        let r = Arc::new(on());
        let taken = Arc::new(Mutex::new(std::collections::HashSet::<PageId>::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for _ in 0..3 {
            let (r, taken, stop) = (r.clone(), taken.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                let mut checked = 0u64;
                while !stop.load(SeqCst) {
                    let t = r.enter().unwrap();
                    let page = PageId(fresh_page());
                    r.retire(page);
                    for _ in 0..50 {
                        std::hint::spin_loop();
                    }
                    assert!(
                        !taken.lock().contains(&page),
                        "{page:?} reused under a reader"
                    );
                    r.exit(t);
                    checked += 1;
                }
                checked
            }));
        }
        let allocator = {
            let (r, taken, stop) = (r.clone(), taken.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(SeqCst) {
                    if let Some(p) = r.take() {
                        taken.lock().insert(p);
                        n += 1;
                    }
                }
                n
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(300));
        stop.store(true, SeqCst);
        let checked: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        let reused = allocator.join().unwrap();
        assert!(checked > 100, "{checked} reads");
        assert!(reused > 0, "nothing was ever reused");
    }

    /// A page id unique to this call (the test's "retired leaves").
    fn fresh_page() -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, SeqCst)
    }
}
