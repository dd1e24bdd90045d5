//! The B+-tree proper: descent with latch coupling, inserts with splits, deletes, range scans in
//! both directions, and the structural check.
//!
//! Concurrency protocol (latches are the buffer pool's frame latches, held by page guards):
//!
//! * **Lookups and scans** descend with shared latches, fixing the child before releasing the
//!   parent (latch coupling). A forward scan moves right the same way: next leaf fixed, and
//!   the leaf it left released only once the first key beyond that leaf has been visited
//!   under both latches (where [`BTree::scan_to_next`]'s callers lock it); across empty
//!   leaves it holds every one passed until then.
//! * **Backward scans** never wait for a left sibling while holding a right one (that order
//!   would deadlock against forward scans and splits, which go left to right). They release the
//!   current leaf, fix the leaf its `prev` link named and, if that leaf split in between, walk
//!   right until the leaf whose `next` is the one they left. Nodes are never freed, so the
//!   `prev` page is still a leaf of this tree.
//! * **Inserts and deletes** are optimistic first: shared latches down to the last inner
//!   level, an exclusive latch on the leaf. An insert that would split the leaf releases
//!   everything and restarts pessimistically: exclusive latches from the root, releasing all
//!   ancestors as soon as a child is *safe* (has room for one more maximal entry, so no split
//!   below it can reach above it). A split then changes only pages it holds exclusively, plus
//!   the new right sibling's right neighbour (fixed left to right), and hands all of them to
//!   [`BufferPool::log_together`] so the split reaches the log as one record.
//!
//! * **Insert with next key** ([`BTree::insert_with_next`], ARIES/IM): with the leaf latched
//!   exclusively and before it changes, a callback sees the key that will follow the new
//!   entry (in the leaf, or the first key of the next non-empty leaf, fixed shared left to
//!   right) and may refuse, which releases everything and changes nothing. The engine
//!   try-locks the next key there instead of descending a second time to find it.
//!
//! * **Hinted inserts** ([`LeafHint`]): an insert may fix the leaf of the last insert through
//!   the same hint directly, holding nothing else, and uses it only if the leaf provably
//!   covers the key (it has not split since a descent recorded the separator to its right,
//!   the key is below that separator and above the leaf's first key); otherwise it lets go
//!   and descends. Ascending keys at one place (the ten lines of an order) skip the descent.
//!   A hinted lookup ([`BTree::get_hinted`]) reads the hinted leaf optimistically under the
//!   same proof: ascending lookups (Stock-Level's sorted items) skip the descent where one
//!   leaf holds several of their keys.
//!
//! Latch order, which makes the protocol deadlock-free: parent before child, inner nodes
//! before leaves; among leaves, left before right. Nobody waits for a parent while holding a
//! node, nor for an inner node or a left neighbour while holding a leaf.
//!
//! The root page never changes: a root split moves the root's entries into two new children
//! and turns the root into an inner node one level higher.
//!
//! Deletes do not merge or rebalance. A delete that empties a leaf takes it out of the tree
//! (`BTree::unlink_empty_leaf`), and with it an inner node left with no other child (up to
//! the nearest ancestor that has one); only a root with a single path down to the leaf
//! keeps it. An unlinked leaf's page (and an inner node's, rewritten as one) is marked and retired
//! to the pool, which hands it out again only once no reader that may hold its id (a
//! backward scan, a leaf hint) is left, where the pool's owner turned reuse on
//! ([`BufferPool::enable_page_reuse`]); otherwise it is never reused. The mark is logged with
//! the unlink, so it survives a restart: [`unlinked_leaves`] tells which of a list of pages
//! still carry it, and an open hands those out again.
//!
//! Allocation. Point lookups, inserts and deletes that do not split, and scans allocate
//! nothing (a forward scan keeps the guards of empty leaves it passes in a vector): the
//! descent holds one guard at a time, a non-unique entry `key ++ value` and the
//! successor of a prefix bound are built in a stack [`KeyBuf`] (keys up to
//! [`KEY_BUF_INLINE`](super::keys::KEY_BUF_INLINE) bytes), and a backward scan copies the
//! last key it passed only when it leaves a leaf. A split allocates a few buffers per level
//! (a leaf: the list of moved entries and the new leaf's scratch; an inner node or the root: a
//! copy of the node, the entry list, scratch per rebuilt node; the guards it logs together).
//! A leaf below the root keeps its left part in place ([`node::truncate`]).
//!
//! Split point. Internal nodes split in the middle (by bytes). A leaf splits right after the
//! new entry when that leaves it at least a quarter of the bytes
//! ([`node::leaf_split_point`]): keys that arrive in ascending order at one place (each
//! district's next order, in front of the next district's keys) then fill the left leaf by
//! appending at its end, instead of shifting and logging the slots behind them on every
//! insert.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use super::keys::{Guide, KeyBuf, KeyOrder, KeyRange, KeyRef, Rank};
use super::node::{self, entry_space, max_internal_key_len, Node, NodePage};
use crate::buffer::{BufferPool, PageReadGuard, PageWriteGuard, ReadToken};
use crate::counters;
use crate::error::{Fault, StorageError, StorageResult};
use crate::page::{PageId, PageKind};

impl NodePage for PageWriteGuard<'_> {
    #[inline]
    fn bytes(&self) -> &[u8] {
        self
    }
    #[inline]
    fn range_mut(&mut self, offset: usize, len: usize) -> &mut [u8] {
        PageWriteGuard::range_mut(self, offset, len)
    }
}

/// Where a descent goes.
#[derive(Clone, Copy)]
enum Target<'k> {
    /// The leaf where `probe` belongs (last separator `<= probe`), or with `strict` the leaf
    /// holding the greatest keys `< probe`.
    Key {
        probe: &'k [u8],
        strict: bool,
    },
    Leftmost,
    Rightmost,
}

/// What [`BTree::insert_with_next`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertOutcome {
    /// The entry is in the tree.
    Inserted,
    /// The callback refused the next key: nothing changed, no latch is held.
    Blocked,
}

/// What [`BTree::scan_to_next`] passes its visitor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanStep<'a> {
    /// An entry within the range: its user key and value.
    Entry(&'a [u8], u64),
    /// The range ended: the first key past it, or `None` past the tree's last entry.
    After(Option<&'a [u8]>),
}

/// Where the last insert through this hint put its entry, so that the next one can try that
/// leaf before descending from the root ([`BTree::insert_hinted`],
/// [`BTree::insert_with_next_hinted`]). Keys that arrive in ascending order at one place (the
/// lines of one order) then skip the descent, and within the leaf two key comparisons at the
/// slot after the last entry replace the binary search.
///
/// The hint keeps the leaf's upper bound as the descent that found the leaf saw it (the
/// separator to its right in its parent) and the leaf's right neighbour at that time. A
/// leaf's bounds change only when it splits, and a split always gives it a new right
/// neighbour (a page never used before, or an unlinked leaf's that no reader holding a hint
/// can know: see [`BufferPool::enable_page_reuse`]), so a hinted leaf whose neighbour is
/// unchanged still has that upper bound. A hint is only a guess: the leaf is used
/// only if it provably covers the key, so a stale hint costs one leaf fix, never a wrong
/// insert. It names a page of one tree and must not be passed to another tree.
#[derive(Clone, Copy, Debug)]
pub struct LeafHint {
    leaf: Option<PageId>,
    /// The slot where the next key is expected: right after the last insert.
    expected: u16,
    /// The leaf's right neighbour when `upper` was read.
    next: Option<PageId>,
    upper: UpperBound,
    /// The upper bound's bytes (`UpperBound::Key(len)`: the first `len`).
    high: [u8; LEAF_HINT_KEY_MAX],
}

/// The longest separator a [`LeafHint`] keeps as a leaf's upper bound; a leaf bounded by a
/// longer one is not hinted.
pub const LEAF_HINT_KEY_MAX: usize = 48;

/// Optimistic descents a lookup or insert tries before it latches its way down: a writer
/// holding an inner node (a split) fails them until it is done.
const OPTIMISTIC_TRIES: usize = 3;

/// How often [`BTree::try_take_out_leftmost_leaf`] looks again for a left neighbour that
/// split or left the tree while it was not latched.
const TAKE_OUT_TRIES: usize = 4;

/// What [`BTree::try_unlink_empty_leaf`] did.
enum Unlink {
    /// Unlinked the leaf, or found nothing to do.
    Done,
    /// The leaf is its parent's leftmost child: [`BTree::try_take_out_leftmost_leaf`].
    Leftmost,
}

/// How an optimistic descent ended ([`BTree::descend_optimistic`]).
enum Descent<G> {
    /// The leaf, fixed, and its parent's guide.
    Found(G, Option<Guide>),
    /// A node changed under the descent, or is held exclusively: try again.
    Retry,
    /// The tree's shape asks for the latched descent (a leaf root).
    Latch,
}

/// A hinted leaf's upper bound, as the descent that found it saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UpperBound {
    /// No separator to the right anywhere on the path: the rightmost leaf.
    Unbounded,
    /// `high[..len]`.
    Key(u8),
    /// Longer than [`LEAF_HINT_KEY_MAX`]: the leaf cannot be hinted.
    Unknown,
}

impl Default for LeafHint {
    fn default() -> Self {
        LeafHint {
            leaf: None,
            expected: 0,
            next: None,
            upper: UpperBound::Unknown,
            high: [0; LEAF_HINT_KEY_MAX],
        }
    }
}

impl LeafHint {
    /// The hinted leaf and the slot where the next key is expected, if any.
    pub fn get(&self) -> Option<(PageId, usize)> {
        self.leaf.map(|page| (page, self.expected as usize))
    }

    /// Starts a descent: no separator seen yet.
    #[inline]
    fn start_descent(&mut self) {
        self.leaf = None;
        self.upper = UpperBound::Unbounded;
    }

    /// A descent passed separator `key` on the right of the child it took; the deepest such
    /// separator is the leaf's upper bound, so each one replaces the last.
    #[inline]
    fn bound_by(&mut self, key: &[u8]) {
        self.upper = match self.high.get_mut(..key.len()) {
            Some(high) => {
                high.copy_from_slice(key);
                UpperBound::Key(key.len() as u8)
            }
            None => UpperBound::Unknown,
        };
    }

    /// Records the leaf an entry just went to (the next key is expected at `expected`) and
    /// the leaf's right neighbour; the upper bound is the one already recorded for it.
    #[inline]
    fn remember(&mut self, leaf: PageId, expected: usize, next: Option<PageId>) {
        if self.upper == UpperBound::Unknown {
            self.leaf = None;
            return;
        }
        self.leaf = Some(leaf);
        // A slot past u16 cannot exist in a page.
        self.expected = u16::try_from(expected).unwrap_or(u16::MAX);
        self.next = next;
    }

    /// Whether `key` lies below the hinted leaf's upper bound.
    #[inline]
    fn below_upper<K: KeyOrder>(&self, order: &K, key: &[u8]) -> bool {
        match self.upper {
            UpperBound::Unbounded => true,
            UpperBound::Key(len) => {
                order.compare(key, &self.high[..len as usize]) == Ordering::Less
            }
            UpperBound::Unknown => false,
        }
    }
}

/// A B+-tree mapping encoded keys to `u64` values, on buffer-pool pages.
///
/// A unique tree holds each key once. A non-unique tree holds `(key, value)` pairs once, stored
/// as `key ++ value` (8 bytes big-endian), so entries with equal keys sort by value.
pub struct BTree<K: KeyOrder> {
    pool: Arc<BufferPool>,
    root: PageId,
    order: K,
    unique: bool,
    /// Longest user key accepted.
    max_key_len: usize,
    /// The emulated data device its pages are allocated on (see [`crate::device`]).
    device: u8,
}

impl<K: KeyOrder> BTree<K> {
    /// Creates an empty tree: one leaf, which stays the root page forever.
    pub fn create(pool: Arc<BufferPool>, order: K, unique: bool) -> StorageResult<Self> {
        Self::create_on(pool, order, unique, 0)
    }

    /// Creates an empty tree whose pages live on emulated data device `device`.
    pub fn create_on(
        pool: Arc<BufferPool>,
        order: K,
        unique: bool,
        device: u8,
    ) -> StorageResult<Self> {
        let root = {
            let mut guard = pool.allocate_page_on(PageKind::BTreeLeaf, device)?;
            node::format(&mut guard, 0);
            guard.page_id()
        };
        Ok(Self::open(pool, root, order, unique).on_device(device))
    }

    /// This tree, allocating its new pages on emulated data device `device` (an opened
    /// tree's existing pages keep the device their header names).
    pub fn on_device(mut self, device: u8) -> Self {
        self.device = device;
        self
    }

    /// Opens the tree whose root is `root`.
    pub fn open(pool: Arc<BufferPool>, root: PageId, order: K, unique: bool) -> Self {
        let max_key_len = max_internal_key_len(pool.page_size()) - 8;
        BTree {
            pool,
            root,
            order,
            unique,
            max_key_len,
            device: 0,
        }
    }

    /// The root page; it never changes after [`BTree::create`].
    pub fn root(&self) -> PageId {
        self.root
    }

    /// The pool the tree's pages live in.
    pub fn pool(&self) -> &Arc<BufferPool> {
        &self.pool
    }

    pub fn is_unique(&self) -> bool {
        self.unique
    }

    /// Longest key this tree accepts, in bytes.
    pub fn max_key_len(&self) -> usize {
        self.max_key_len
    }

    pub fn order(&self) -> &K {
        &self.order
    }

    /// The stored key of an entry: the key itself (borrowed), or `key ++ value` in a
    /// non-unique tree (built on the stack when short): no allocation either way.
    fn internal_key<'a>(&self, key: &'a [u8], value: u64) -> KeyRef<'a> {
        if self.unique {
            return KeyRef::Borrowed(key);
        }
        KeyRef::Built(KeyBuf::from_parts(&[key, &value.to_be_bytes()]))
    }

    /// The user key of a stored key.
    #[inline]
    fn user_key<'a>(&self, stored: &'a [u8]) -> &'a [u8] {
        if self.unique {
            stored
        } else {
            &stored[..stored.len().saturating_sub(8)]
        }
    }

    fn check_key(&self, key: &[u8]) -> StorageResult<()> {
        if key.len() > self.max_key_len {
            return Err(StorageError::KeyTooLarge {
                len: key.len(),
                max: self.max_key_len,
            });
        }
        if K::FIXED_U64 && key.len() != 8 {
            return Err(StorageError::Invalid(format!(
                "an integer-keyed b+-tree takes 8-byte keys, not {}",
                key.len()
            )));
        }
        Ok(())
    }

    #[inline(always)]
    fn fix_shared(&self, id: PageId) -> StorageResult<PageReadGuard<'_>> {
        let guard = self.pool.fix_shared(id)?;
        counters::bump_node_visit();
        Ok(guard)
    }

    #[inline(always)]
    fn fix_exclusive(&self, id: PageId) -> StorageResult<PageWriteGuard<'_>> {
        let guard = self.pool.fix_exclusive(id)?;
        counters::bump_node_visit();
        Ok(guard)
    }

    /// Inner node: the index of the child `target` names (for a key: the child whose subtree
    /// holds it, last separator `<= probe`, or with `strict` `< probe`), its search started
    /// where `guide` points.
    #[inline(always)]
    fn child_index(
        &self,
        node: &Node<'_>,
        target: Target<'_>,
        guide: Option<Guide>,
    ) -> StorageResult<usize> {
        Ok(match target {
            Target::Key { probe, strict } => {
                node.search_guided(&self.order, probe, strict, guide)?.index
            }
            Target::Leftmost => 0,
            Target::Rightmost => node.len(),
        })
    }

    /// Starts loading the frame and header lines of node `id` together, so that the fix that
    /// follows waits for one miss, not for the frame's and then the header's
    /// ([`BufferPool::prefetch_page`]).
    #[inline(always)]
    fn prefetch_node(&self, id: PageId) {
        self.pool.prefetch_page(id, &[(0, node::NODE_HEADER_SIZE)]);
    }

    /// [`BTree::prefetch_node`] for a leaf a lookup of `probe` is about to fix, with the slot
    /// and the cell its guided search will read first if the leaf's keys run on from the low
    /// separator without gaps ([`Guide::dense_slot`]) and its cells lie in slot order (see
    /// [`Node::search_guided`]): for a table loaded in order the whole lookup then waits
    /// about once. A wrong guess only wastes the loads.
    #[inline(always)]
    fn prefetch_leaf(&self, id: PageId, guide: Guide, probe: &[u8]) {
        let stride = node::CELL_OVERHEAD + probe.len();
        let header = (0, node::NODE_HEADER_SIZE);
        match guide.dense_slot(probe).and_then(|slot| {
            let cell = node::in_order_cell(self.pool.page_size(), slot, stride)?;
            Some((node::slot_offset(slot), cell))
        }) {
            Some((slot_at, cell)) => self
                .pool
                .prefetch_page(id, &[header, (slot_at, node::SLOT_SIZE), (cell, stride)]),
            None => self.pool.prefetch_page(id, &[header]),
        }
    }

    /// Descends to the leaf `target` names and fixes it shared; with it, what the leaf's
    /// parent knows of its keys, for the leaf's search ([`Guide`]). Each inner node's search
    /// is guided by its own parent's separators. Inner nodes are read optimistically
    /// ([`BTree::descend_optimistic`]); a descent that keeps meeting writers latches.
    fn descend_shared(
        &self,
        target: Target<'_>,
    ) -> StorageResult<(PageReadGuard<'_>, Option<Guide>)> {
        // Without latching (one thread) there is no version to validate a read by.
        for _ in 0..self.optimistic_tries() {
            let fix = |id, _, parent_unchanged: &dyn Fn() -> bool| {
                let leaf = self.fix_shared(id)?;
                self.leaf_under_unchanged_parent(leaf, parent_unchanged)
            };
            match self.descend_optimistic(target, None, true, false, fix)? {
                Descent::Found(leaf, guide) => return Ok((leaf, guide)),
                Descent::Retry => continue,
                Descent::Latch => break,
            }
        }
        self.descend_shared_latched(target)
    }

    /// Descends reading the inner nodes without latching them ([`BufferPool::read_optimistic`])
    /// and ends at the leaf with `leaf(id, guide, parent_unchanged)`: it fixes or reads the
    /// leaf, and must call `parent_unchanged` once it has (`None`: it failed, try again).
    /// `guided`: each node's search is guided by its parent's separators (lookups; inserts,
    /// which mostly append, search unguided). A root that is a leaf goes to `leaf` only if
    /// `reads_leaf` (it reads and checks the
    /// node itself, validated); a fix of it is left to the latched descent.
    ///
    /// Each node's read is validated, and so is its parent's once the node is read or the
    /// leaf fixed: a split moves keys out of a child only while its parent is latched
    /// exclusively (the pessimistic descent holds the parent that takes the new separator),
    /// so a parent still unchanged after its child was fixed means the child holds what the
    /// parent said it does — what latch coupling gave, without a write to any shared node.
    /// Nothing read is trusted before its validation: a corrupt node is reported by the
    /// latched descent, which the caller falls back on.
    #[inline(always)]
    fn descend_optimistic<'a, G>(
        &'a self,
        target: Target<'_>,
        mut hint: Option<&mut LeafHint>,
        guided: bool,
        reads_leaf: bool,
        leaf: impl FnOnce(PageId, Option<Guide>, &dyn Fn() -> bool) -> StorageResult<Option<G>>,
    ) -> StorageResult<Descent<G>> {
        if let Some(h) = hint.as_deref_mut() {
            h.start_descent();
        }
        let mut id = self.root;
        let mut guide = None;
        let mut parent: Option<(ReadToken<'a>, usize)> = None;
        loop {
            if let Some((token, 1)) = parent {
                return Ok(match leaf(id, guide, &|| token.still_valid())? {
                    Some(found) => Descent::Found(found, guide),
                    None => Descent::Retry,
                });
            }
            let parent_level = parent.map(|(_, level)| level);
            let read = self.pool.read_optimistic(id, |bytes| {
                let node = Node::new(bytes).ok()?;
                if node.is_leaf() || check_child_level(&node, parent_level).is_err() {
                    return Some(None);
                }
                let at = self.child_index(&node, target, guide).ok()?;
                if let Some(h) = hint.as_deref_mut() {
                    if at < node.len() {
                        h.bound_by(node.key(at).ok()?);
                    }
                }
                let child_guide = match guided {
                    true => node.guide_for_child(&self.order, at),
                    false => None,
                };
                Some(Some((node.level(), node.child(at).ok()?, child_guide)))
            });
            let (step, token) = match read {
                Some((Some(step), token)) => (step, token),
                // Held exclusively, changed while read, or not in the pool.
                None | Some((None, _)) => return Ok(Descent::Retry),
            };
            if let Some((parent, _)) = parent {
                if !parent.still_valid() {
                    return Ok(Descent::Retry);
                }
            }
            let Some((level, child, child_guide)) = step else {
                if parent.is_none() && reads_leaf {
                    // A leaf root (a small tree), read by `leaf`, which checks it is one.
                    return Ok(match leaf(id, None, &|| true)? {
                        Some(found) => Descent::Found(found, None),
                        None => Descent::Retry,
                    });
                }
                // A leaf root to fix (it may split before it is fixed), or a level that
                // does not fit: latched.
                return Ok(Descent::Latch);
            };
            counters::bump_node_visit();
            match (level, child_guide, target) {
                (1, Some(g), Target::Key { probe, .. }) => self.prefetch_leaf(child, g, probe),
                _ => self.prefetch_node(child),
            }
            guide = child_guide;
            parent = Some((token, level));
            id = child;
        }
    }

    /// How many optimistic descents to try before latching: none without latching (one
    /// thread), where there is no latch version to validate a read by.
    #[inline]
    fn optimistic_tries(&self) -> usize {
        if self.pool.is_latching() {
            OPTIMISTIC_TRIES
        } else {
            0
        }
    }

    /// A leaf an optimistic descent fixed: `None` if its parent changed meanwhile (the leaf
    /// may no longer hold what the parent said); otherwise checked to be a leaf, since the
    /// unchanged parent names it as its child.
    fn leaf_under_unchanged_parent<G: std::ops::Deref<Target = [u8]>>(
        &self,
        leaf: G,
        parent_unchanged: &dyn Fn() -> bool,
    ) -> StorageResult<Option<G>> {
        if !parent_unchanged() {
            return Ok(None);
        }
        check_child_level(&Node::new(&leaf)?, Some(1))?;
        Ok(Some(leaf))
    }

    /// [`BTree::get`] in a unique tree without latching at all: the inner nodes and the leaf
    /// are read optimistically. `None` where that failed (the caller latches): a point lookup
    /// of a row every thread reads (TPC-C's warehouse and district, its items) then writes to
    /// no shared line.
    fn get_optimistic(&self, key: &[u8]) -> StorageResult<Option<Option<u64>>> {
        let target = Target::Key {
            probe: key,
            strict: false,
        };
        for _ in 0..self.optimistic_tries() {
            let read = |id, guide, parent_unchanged: &dyn Fn() -> bool| {
                counters::bump_node_visit();
                let found = self.pool.read_optimistic(id, |bytes| {
                    self.leaf_lookup(bytes, key, guide)
                        .map(|(value, _, _)| value)
                });
                Ok(match found {
                    Some((Some(value), _)) if parent_unchanged() => Some(value),
                    _ => None,
                })
            };
            match self.descend_optimistic(target, None, true, true, read)? {
                Descent::Found(value, _) => return Ok(Some(value)),
                Descent::Retry => continue,
                Descent::Latch => break,
            }
        }
        Ok(None)
    }

    /// `key` looked up in a leaf read optimistically (`None`: not a leaf, or unreadable, as a
    /// torn read may be): its value if present, its rank, and the leaf's right neighbour.
    #[inline(always)]
    fn leaf_lookup(
        &self,
        bytes: &[u8],
        key: &[u8],
        guide: Option<Guide>,
    ) -> Option<(Option<u64>, usize, Option<PageId>)> {
        let node = Node::new(bytes).ok()?;
        if !node.is_leaf() {
            return None;
        }
        let rank = node.search_guided(&self.order, key, true, guide).ok()?;
        let value = match rank.found {
            true => Some(node.value(rank.index).ok()?),
            false => None,
        };
        Some((value, rank.index, node.next()))
    }

    /// [`BTree::descend_shared`] with shared latch coupling all the way down.
    fn descend_shared_latched(
        &self,
        target: Target<'_>,
    ) -> StorageResult<(PageReadGuard<'_>, Option<Guide>)> {
        let mut guard = self.fix_shared(self.root)?;
        let mut guide = None;
        let mut parent_level = None;
        loop {
            let node = Node::new(&guard)?;
            check_child_level(&node, parent_level)?;
            if node.is_leaf() {
                return Ok((guard, guide));
            }
            crate::shared::bump(crate::shared::Place::BtreeInner);
            parent_level = Some(node.level());
            let at = self.child_index(&node, target, guide)?;
            guide = node.guide_for_child(&self.order, at);
            let child = node.child(at)?;
            match (node.level(), guide, target) {
                (1, Some(g), Target::Key { probe, .. }) => self.prefetch_leaf(child, g, probe),
                _ => self.prefetch_node(child),
            }
            // Child first, then the parent goes (assignment drops the old guard).
            guard = self.fix_shared(child)?;
        }
    }

    /// Descends to the leaf `probe` belongs in and fixes it exclusively, reading the inner
    /// nodes optimistically ([`BTree::descend_optimistic`]) and latching them where that keeps
    /// failing. With `hint`, records in it the leaf's upper bound as the path shows it (see
    /// [`LeafHint`]).
    fn descend_to_leaf_exclusive(
        &self,
        probe: &[u8],
        mut hint: Option<&mut LeafHint>,
    ) -> StorageResult<PageWriteGuard<'_>> {
        // Unguided, as the latched descent: inserts mostly append, where a node's first and
        // last keys settle the slot at once.
        let target = Target::Key {
            probe,
            strict: false,
        };
        for _ in 0..self.optimistic_tries() {
            let fix = |id, _, parent_unchanged: &dyn Fn() -> bool| {
                let leaf = self.fix_exclusive(id)?;
                self.leaf_under_unchanged_parent(leaf, parent_unchanged)
            };
            match self.descend_optimistic(target, hint.as_deref_mut(), false, false, fix)? {
                Descent::Found(leaf, _) => return Ok(leaf),
                Descent::Retry => continue,
                Descent::Latch => break,
            }
        }
        self.descend_to_leaf_exclusive_latched(probe, hint)
    }

    /// [`BTree::descend_to_leaf_exclusive`] with shared latches to the last inner level.
    /// Each node's header is checked once, when it is fixed.
    fn descend_to_leaf_exclusive_latched(
        &self,
        probe: &[u8],
        mut hint: Option<&mut LeafHint>,
    ) -> StorageResult<PageWriteGuard<'_>> {
        let mut guard = self.fix_shared(self.root)?;
        if let Some(h) = hint.as_deref_mut() {
            h.start_descent();
        }
        let mut parent_level = None;
        loop {
            let node = Node::new(&guard)?;
            check_child_level(&node, parent_level)?;
            let level = node.level();
            parent_level = Some(level);
            if level > 0 {
                crate::shared::bump(crate::shared::Place::BtreeInner);
            }
            if level == 0 {
                // Only the root can be a leaf here: the descent stops above the leaves.
                if guard.page_id() != self.root {
                    return Err(StorageError::Corruption {
                        page: guard.page_id(),
                        reason: "b+-tree leaf where an inner node was expected".into(),
                    });
                }
                drop(guard);
                let root = self.fix_exclusive(self.root)?;
                if Node::new(&root)?.is_leaf() {
                    if let Some(h) = hint.as_deref_mut() {
                        h.start_descent();
                    }
                    return Ok(root);
                }
                // The root split in between: descend again.
                drop(root);
                guard = self.fix_shared(self.root)?;
                parent_level = None;
                if let Some(h) = hint.as_deref_mut() {
                    h.start_descent();
                }
                continue;
            }
            // The child holding `probe` (last separator <= probe). Unguided: inserts mostly
            // append, where the node's first and last keys settle the slot at once.
            let target = Target::Key {
                probe,
                strict: false,
            };
            let at = self.child_index(&node, target, None)?;
            if let Some(h) = hint.as_deref_mut() {
                if at < node.len() {
                    h.bound_by(node.key(at)?);
                }
            }
            let child = node.child(at)?;
            self.prefetch_node(child);
            if level == 1 {
                // A link to itself would wait for its own shared latch.
                if child == guard.page_id() {
                    return Err(self_link(child));
                }
                let leaf = self.fix_exclusive(child)?;
                check_child_level(&Node::new(&leaf)?, Some(1))?;
                drop(guard);
                return Ok(leaf);
            }
            guard = self.fix_shared(child)?;
        }
    }

    /// Point lookup: the value of `key` (non-unique tree: of the first entry with this key).
    pub fn get(&self, key: &[u8]) -> StorageResult<Option<u64>> {
        if !self.unique {
            let mut found = None;
            let exact = key.len() + 8;
            self.scan(
                Bound::Included(key),
                Bound::Included(key),
                false,
                usize::MAX,
                |k, v| {
                    if k.len() + 8 == exact {
                        found = Some(v);
                        false
                    } else {
                        true
                    }
                },
            )?;
            return Ok(found);
        }
        if let Some(found) = self.get_optimistic(key)? {
            return Ok(found);
        }
        let (leaf, guide) = self.descend_shared(Target::Key {
            probe: key,
            strict: false,
        })?;
        let node = Node::new(&leaf)?;
        let rank = node.search_guided(&self.order, key, true, guide)?;
        if rank.found {
            Ok(Some(node.value(rank.index)?))
        } else {
            Ok(None)
        }
    }

    /// [`BTree::get`] (unique trees; a non-unique one looks up plainly) trying first the leaf
    /// `hint` names, and leaving in it the leaf this lookup ended at: lookups of ascending keys
    /// (Stock-Level's items, sorted) that land in one leaf read that leaf alone instead of
    /// descending from the root. The hinted leaf is read optimistically and its answer taken
    /// only if the leaf provably covers the key, as for a hinted insert: the key is below the
    /// upper bound the hint recorded, the leaf has not split since (same right neighbour), is
    /// not unlinked, and the key is above its first key (or the leaf is the leftmost). A key
    /// found in it is in the tree; one not found there is nowhere else. Otherwise (or where a
    /// read cannot be validated: no latching, a page not in the pool) it descends.
    pub fn get_hinted(&self, key: &[u8], hint: &mut LeafHint) -> StorageResult<Option<u64>> {
        if !self.unique {
            return self.get(key);
        }
        if let Some(page) = hint.leaf {
            if hint.below_upper(&self.order, key) {
                let next = hint.next;
                let read = self.pool.read_optimistic(page, |bytes| {
                    let node = Node::new(bytes).ok()?;
                    if !node.is_leaf() || node.is_unlinked() || node.next() != next {
                        return None;
                    }
                    let rank = node.search(&self.order, key, true).ok()?;
                    if rank.found {
                        return Some(Some(node.value(rank.index).ok()?));
                    }
                    (rank.index > 0 || node.prev().is_none()).then_some(None)
                });
                if let Some((Some(found), _)) = read {
                    counters::bump_node_visit();
                    return Ok(found);
                }
            }
        }
        let target = Target::Key {
            probe: key,
            strict: false,
        };
        for _ in 0..self.optimistic_tries() {
            let read = |id, guide, parent_unchanged: &dyn Fn() -> bool| {
                counters::bump_node_visit();
                let found = self
                    .pool
                    .read_optimistic(id, |bytes| self.leaf_lookup(bytes, key, guide));
                Ok(match found {
                    Some((Some(found), _)) if parent_unchanged() => Some((id, found)),
                    _ => None,
                })
            };
            match self.descend_optimistic(target, Some(&mut *hint), true, true, read)? {
                Descent::Found((leaf, (value, index, next)), _) => {
                    hint.remember(leaf, index, next);
                    return Ok(value);
                }
                Descent::Retry => continue,
                Descent::Latch => break,
            }
        }
        hint.leaf = None;
        self.get(key)
    }

    /// Adds an entry. Unique tree: [`StorageError::DuplicateKey`] if `key` is present;
    /// non-unique tree: if the pair `(key, value)` is present.
    pub fn insert(&self, key: &[u8], value: u64) -> StorageResult<()> {
        self.insert_entry(key, value, None)
    }

    /// [`BTree::insert`], trying the leaf `hint` names first and leaving in it where this entry
    /// went. The hinted leaf is used only if it provably covers the key: it has not split since
    /// a descent recorded its upper bound, the key is below that bound, and the key is above
    /// the leaf's first key or no leaf lies to its left (separators never change, so a leaf's
    /// lower bound never moves). Otherwise, or if the leaf has no room, the insert descends
    /// from the root as usual (and records the new leaf's bound).
    pub fn insert_hinted(&self, key: &[u8], value: u64, hint: &mut LeafHint) -> StorageResult<()> {
        self.insert_entry(key, value, Some(hint))
    }

    fn insert_entry(
        &self,
        key: &[u8],
        value: u64,
        hint: Option<&mut LeafHint>,
    ) -> StorageResult<()> {
        self.check_key(key)?;
        let stored = self.internal_key(key, value);
        let none = None::<&mut fn(Option<&[u8]>) -> bool>;
        if self
            .insert_optimistic(&stored, value, none, hint)?
            .is_some()
        {
            return Ok(());
        }
        self.insert_pessimistic(&stored, value, None::<&mut fn(Option<&[u8]>) -> bool>)
            .map(|_| ())
    }

    /// Adds an entry unless `next` refuses: with the leaf latched exclusively and before it
    /// changes, calls `next` once with the (user) key that will follow the new entry — in
    /// the leaf, else the first key of the next non-empty leaf to the right (fixed left to
    /// right, shared) — or `None` at the end of the tree. If `next` returns false, every
    /// latch is released and nothing changes ([`InsertOutcome::Blocked`]); otherwise the entry
    /// is inserted before any latch is released ([`InsertOutcome::Inserted`]), so nobody sees
    /// the entry before `next` ran (ARIES/IM: a next-key lock requested conditionally under
    /// the latch).
    ///
    /// Duplicates are reported as by [`BTree::insert`], without calling `next`. `next` runs
    /// with leaves latched: it must not touch this tree or wait for anything that may wait
    /// for a latch of it.
    pub fn insert_with_next(
        &self,
        key: &[u8],
        value: u64,
        next: impl FnMut(Option<&[u8]>) -> bool,
    ) -> StorageResult<InsertOutcome> {
        self.insert_next(key, value, None, next)
    }

    /// [`BTree::insert_with_next`] with a [`LeafHint`], as [`BTree::insert_hinted`]. A refused
    /// insert leaves the hint on its leaf, for the retry.
    pub fn insert_with_next_hinted(
        &self,
        key: &[u8],
        value: u64,
        hint: &mut LeafHint,
        next: impl FnMut(Option<&[u8]>) -> bool,
    ) -> StorageResult<InsertOutcome> {
        self.insert_next(key, value, Some(hint), next)
    }

    fn insert_next(
        &self,
        key: &[u8],
        value: u64,
        hint: Option<&mut LeafHint>,
        mut next: impl FnMut(Option<&[u8]>) -> bool,
    ) -> StorageResult<InsertOutcome> {
        self.check_key(key)?;
        let stored = self.internal_key(key, value);
        if let Some(outcome) = self.insert_optimistic(&stored, value, Some(&mut next), hint)? {
            return Ok(outcome);
        }
        self.insert_pessimistic(&stored, value, Some(&mut next))
    }

    /// Calls `f` with the user key following slot `slot` of the latched leaf `node` (walking
    /// right across empty leaves with shared latch coupling), or `None` at the end.
    fn visit_next<F: FnMut(Option<&[u8]>) -> bool>(
        &self,
        node: &Node<'_>,
        slot: usize,
        f: &mut F,
    ) -> StorageResult<bool> {
        if slot < node.len() {
            return Ok(f(Some(self.user_key(node.key(slot)?))));
        }
        let mut link = node.next();
        let mut held: Option<PageReadGuard<'_>>;
        while let Some(id) = link {
            // The next leaf first, then the one before it goes (assignment drops it).
            let guard = self.fix_shared(id)?;
            held = Some(guard);
            let right = Node::new(held.as_deref().expect("just set"))?;
            if !right.is_empty() {
                return Ok(f(Some(self.user_key(right.key(0)?))));
            }
            link = right.next();
        }
        Ok(f(None))
    }

    /// Inserts into a leaf if it has room: the hinted one if it covers the key, else the one a
    /// descent finds. Ok(None): the leaf must split (`next` not called); the hint then names
    /// no leaf, and the pessimistic insert does not set it.
    fn insert_optimistic<F: FnMut(Option<&[u8]>) -> bool>(
        &self,
        stored: &[u8],
        value: u64,
        mut next: Option<&mut F>,
        mut hint: Option<&mut LeafHint>,
    ) -> StorageResult<Option<InsertOutcome>> {
        if let Some(h) = hint.as_deref_mut() {
            if let Some(page) = h.leaf.take() {
                let leaf = self.fix_exclusive(page)?;
                let outcome =
                    self.insert_into_leaf(leaf, stored, value, next.as_deref_mut(), true, Some(h))?;
                if outcome.is_some() {
                    return Ok(outcome);
                }
            }
        }
        let leaf = self.descend_to_leaf_exclusive(stored, hint.as_deref_mut())?;
        self.insert_into_leaf(leaf, stored, value, next, false, hint)
    }

    /// Inserts into `leaf`, latched exclusively, if it has room. `hinted`: the leaf came from
    /// `hint` and is used only if it covers the key (Ok(None) otherwise, nothing changed);
    /// else a descent found it (and recorded its upper bound in `hint`, if any). On success,
    /// or a refusal by `next`, `hint` names this leaf.
    fn insert_into_leaf<F: FnMut(Option<&[u8]>) -> bool>(
        &self,
        mut leaf: PageWriteGuard<'_>,
        stored: &[u8],
        value: u64,
        next: Option<&mut F>,
        hinted: bool,
        mut hint: Option<&mut LeafHint>,
    ) -> StorageResult<Option<InsertOutcome>> {
        let node = Node::new(&leaf)?;
        let rank = match hint.as_deref() {
            Some(h) if hinted => match self.rank_in_hinted_leaf(&node, stored, h)? {
                Some(rank) => rank,
                None => return Ok(None),
            },
            _ => node.search(&self.order, stored, true)?,
        };
        if rank.found {
            return Err(StorageError::DuplicateKey);
        }
        let slot = rank.index;
        let right = node.next();
        if let Some(f) = next {
            if node.free_space() < entry_space(stored.len()) {
                return Ok(None);
            }
            if !self.visit_next(&node, slot, f)? {
                if let Some(h) = hint.as_deref_mut() {
                    h.remember(leaf.page_id(), slot, right);
                }
                return Ok(Some(InsertOutcome::Blocked));
            }
        }
        if !node::insert_at(&mut leaf, slot, stored, value) {
            return Ok(None);
        }
        if let Some(h) = hint {
            h.remember(leaf.page_id(), slot + 1, right);
        }
        Ok(Some(InsertOutcome::Inserted))
    }

    /// Where `stored` goes in the leaf `node` that `hint` named, if the leaf still covers it:
    /// it is still a leaf (the root page goes up a level when it splits), it has not split
    /// since its upper bound was recorded (same right neighbour), the key is below that bound,
    /// and above the leaf's first key or the leaf is the leftmost. `None` otherwise. A key
    /// found in the leaf is reported wherever it is: it is in the tree. The slot the hint
    /// expects is checked first, with two comparisons; the binary search runs only if the
    /// key does not go there.
    fn rank_in_hinted_leaf(
        &self,
        node: &Node<'_>,
        stored: &[u8],
        hint: &LeafHint,
    ) -> StorageResult<Option<Rank>> {
        if !node.is_leaf()
            || node.is_unlinked()
            || node.next() != hint.next
            || !hint.below_upper(&self.order, stored)
        {
            return Ok(None);
        }
        let n = node.len();
        let expected = hint.expected as usize;
        let goes_there = (1..=n).contains(&expected)
            && self.order.compare(node.key(expected - 1)?, stored) == Ordering::Less
            && (expected == n
                || self.order.compare(node.key(expected)?, stored) == Ordering::Greater);
        let rank = if goes_there {
            Rank {
                index: expected,
                found: false,
            }
        } else {
            node.search(&self.order, stored, true)?
        };
        let covered = rank.index > 0 || node.prev().is_none();
        Ok((covered || rank.found).then_some(rank))
    }

    /// Whether a node has room for one more entry of the largest size (so a split below it
    /// cannot split it).
    fn is_safe(&self, node: &Node<'_>) -> bool {
        node.free_space() >= entry_space(max_internal_key_len(self.pool.page_size()))
    }

    fn insert_pessimistic<F: FnMut(Option<&[u8]>) -> bool>(
        &self,
        stored: &[u8],
        value: u64,
        next: Option<&mut F>,
    ) -> StorageResult<InsertOutcome> {
        let target = Target::Key {
            probe: stored,
            strict: false,
        };
        // Exclusive latches from the root; `path` holds the unsafe suffix of the descent.
        let mut path: Vec<PageWriteGuard<'_>> = vec![self.fix_exclusive(self.root)?];
        loop {
            let top = path.last().expect("path starts with the root");
            let node = Node::new(top)?;
            if node.is_leaf() {
                break;
            }
            crate::shared::bump(crate::shared::Place::BtreeInner);
            let child_id = node.child(self.child_index(&node, target, None)?)?;
            // A link back to a node latched on the path would wait for its own latch.
            if path.iter().any(|g| g.page_id() == child_id) {
                return Err(self_link(child_id));
            }
            let level = node.level();
            let child = self.fix_exclusive(child_id)?;
            let child_node = Node::new(&child)?;
            check_child_level(&child_node, Some(level))?;
            let safe = if child_node.is_leaf() {
                child_node.free_space() >= entry_space(stored.len())
            } else {
                self.is_safe(&child_node)
            };
            if safe {
                path.clear();
            }
            path.push(child);
        }
        let mut leaf = path.pop().expect("the path ends at a leaf");
        let node = Node::new(&leaf)?;
        let rank = node.search(&self.order, stored, true)?;
        if rank.found {
            return Err(StorageError::DuplicateKey);
        }
        let slot = rank.index;
        if let Some(f) = next {
            if !self.visit_next(&node, slot, f)? {
                return Ok(InsertOutcome::Blocked);
            }
        }
        if node::insert_at(&mut leaf, slot, stored, value) {
            return Ok(InsertOutcome::Inserted); // another thread made room meanwhile
        }
        // Once the first node has changed the split must finish: a thread refusing reads
        // (two-stage execution) reads the neighbour leaf here rather than stop half-way.
        crate::buffer::stage::allow_reads(|| self.split(path, leaf, slot, stored, value))?;
        Ok(InsertOutcome::Inserted)
    }

    /// Splits `guard`, which has no room for the entry `(key, value)` at `slot`, and inserts
    /// the separator into its parent (the last guard of `path`), splitting upward as needed.
    ///
    /// Each level copies its node once into a page-sized scratch buffer and lists the entries
    /// as slices of that copy (plus the new one), so a split allocates a few buffers per
    /// level, not one per entry.
    fn split<'p>(
        &'p self,
        mut path: Vec<PageWriteGuard<'p>>,
        mut guard: PageWriteGuard<'p>,
        mut slot: usize,
        key: &[u8],
        mut value: u64,
    ) -> StorageResult<()> {
        let mut touched: Vec<PageWriteGuard<'p>> = Vec::new();
        // The entry to insert at this level: the new one, then the separator from below.
        let mut carried = KeyBuf::from_parts(&[key]);
        if guard.page_id() != self.root && Node::new(&guard)?.is_leaf() {
            let (separator, right_id) =
                self.split_leaf(&mut guard, slot, key, value, &mut touched)?;
            let left_id = guard.page_id();
            touched.push(guard);
            match self.carry_up(&mut path, left_id, &separator, right_id, &mut touched)? {
                None => {
                    let mut refs: Vec<&mut PageWriteGuard<'p>> = touched.iter_mut().collect();
                    self.pool.log_together(&mut refs);
                    return Ok(());
                }
                // The parent splits too, taking the separator as its new entry.
                Some((parent, at)) => {
                    carried = separator;
                    slot = at;
                    value = right_id.0;
                    guard = parent;
                }
            }
        }
        let mut snapshot: Vec<u8> = Vec::with_capacity(self.pool.page_size());
        loop {
            snapshot.clear();
            snapshot.extend_from_slice(&guard);
            let node = Node::new(&snapshot)?;
            let mut entries: Vec<(&[u8], u64)> = Vec::with_capacity(node.len() + 1);
            for i in 0..node.len() {
                entries.push((node.key(i)?, node.value(i)?));
            }
            entries.insert(slot, (&carried, value));
            let (level, leftmost) = (node.level(), node.leftmost());
            let is_leaf = level == 0;
            let kind = if is_leaf {
                PageKind::BTreeLeaf
            } else {
                PageKind::BTreeInner
            };
            let mid = if is_leaf {
                node::leaf_split_point(&entries, slot, self.pool.page_size())
            } else {
                node::split_point(&entries)
            };
            // Both halves need an entry: a node too empty to split, yet too full for one
            // more entry, is lying about its space (a corrupt node).
            if mid == 0 || mid >= entries.len() {
                return Err(too_few_to_split(guard.page_id()));
            }
            // Leaf: the right half starts at `mid` and its first key is the separator.
            // Inner: entry `mid` moves up; its child becomes the right node's leftmost.
            let separator = KeyBuf::from_parts(&[entries[mid].0]);
            let (left_entries, right_leftmost, right_entries) = if is_leaf {
                (&entries[..mid], None, &entries[mid..])
            } else {
                (
                    &entries[..mid],
                    Some(PageId(entries[mid].1)),
                    &entries[mid + 1..],
                )
            };
            let size = self.pool.page_size();
            if !node::fits(size, left_entries) || !node::fits(size, right_entries) {
                return Err(halves_do_not_fit(guard.page_id()));
            }

            if guard.page_id() == self.root {
                // Root split: both halves move to new pages; the root page goes up a level.
                let mut left = self.pool.allocate_page_on(kind, self.device)?;
                let mut right = self.pool.allocate_page_on(kind, self.device)?;
                let (left_id, right_id) = (left.page_id(), right.page_id());
                let (l_next, r_prev) = if is_leaf {
                    (Some(right_id), Some(left_id))
                } else {
                    (None, None)
                };
                node::rebuild(&mut left, level, leftmost, None, l_next, left_entries);
                node::rebuild(
                    &mut right,
                    level,
                    right_leftmost,
                    r_prev,
                    None,
                    right_entries,
                );
                node::rebuild(
                    &mut guard,
                    level + 1,
                    Some(left_id),
                    None,
                    None,
                    &[(&*separator, right_id.0)],
                );
                touched.extend([guard, left, right]);
                break;
            }

            // Below the root, leaves split in `split_leaf`: this is an inner node.
            if is_leaf {
                return Err(StorageError::Corruption {
                    page: guard.page_id(),
                    reason: "b+-tree leaf met above the leaf level during a split".into(),
                });
            }
            let mut right = self.pool.allocate_page_on(kind, self.device)?;
            let right_id = right.page_id();
            let left_id = guard.page_id();
            node::rebuild(&mut guard, level, leftmost, None, None, left_entries);
            node::rebuild(&mut right, level, right_leftmost, None, None, right_entries);
            touched.push(guard);
            touched.push(right);
            let Some((parent, at)) =
                self.carry_up(&mut path, left_id, &separator, right_id, &mut touched)?
            else {
                break;
            };
            // The parent splits too, taking the separator as its new entry.
            drop(entries);
            carried = separator;
            slot = at;
            value = right_id.0;
            guard = parent;
        }
        let mut refs: Vec<&mut PageWriteGuard<'p>> = touched.iter_mut().collect();
        self.pool.log_together(&mut refs);
        Ok(())
    }

    /// Inserts the separator of a split of `left` (the new node `right` to its right) into
    /// the parent, the last guard of `path`: `None` once it is there (the parent joins
    /// `touched`), or the parent and the separator's slot in it when the parent is full and
    /// must split in turn.
    fn carry_up<'p>(
        &'p self,
        path: &mut Vec<PageWriteGuard<'p>>,
        left: PageId,
        separator: &[u8],
        right: PageId,
        touched: &mut Vec<PageWriteGuard<'p>>,
    ) -> StorageResult<Option<(PageWriteGuard<'p>, usize)>> {
        let Some(mut parent) = path.pop() else {
            return Err(StorageError::Corruption {
                page: left,
                reason: "b+-tree split of an unsafe node without its parent latched".into(),
            });
        };
        let at = Node::new(&parent)?.rank(&self.order, separator, true)?;
        if node::insert_at(&mut parent, at, separator, right.0) {
            touched.push(parent);
            return Ok(None);
        }
        Ok(Some((parent, at)))
    }

    /// Splits the full leaf `leaf` (not the root) for the entry `(key, value)` at `slot`:
    /// the right part goes to a new leaf, built in one pass from the old leaf's cells; the
    /// left part stays where it is, the leaf only cut short ([`node::truncate`]: a header
    /// write), and the new entry goes into whichever part [`node::leaf_split_point_of`] gives
    /// it. Returns the separator (the right leaf's first key) and the right leaf, having put
    /// the right leaf and the relinked neighbour, if any, in `touched` (the caller adds
    /// `leaf`).
    ///
    /// So a split costs what it moves: a rightmost append moves nothing, and a split after
    /// the new entry (keys arriving in order at one place) moves only the keys behind it.
    /// Rebuilding both halves from a list of every entry had cost a 32 KiB leaf split about
    /// 273 K instructions under callgrind; this costs about 179 K, a third of it the new
    /// page's zeroing.
    fn split_leaf<'p>(
        &'p self,
        leaf: &mut PageWriteGuard<'p>,
        slot: usize,
        key: &[u8],
        value: u64,
        touched: &mut Vec<PageWriteGuard<'p>>,
    ) -> StorageResult<(KeyBuf, PageId)> {
        let left_id = leaf.page_id();
        let mut right = self
            .pool
            .allocate_page_on(PageKind::BTreeLeaf, self.device)?;
        let right_id = right.page_id();
        let (keep, new_left, separator, next) = {
            let node = Node::new(leaf)?;
            let n = node.len();
            let spaces = node.spaces_with(slot, key.len())?;
            // `mid` indexes the entries with the new one at `slot`.
            let mid = node::leaf_split_point_of(&spaces, slot, self.pool.page_size());
            let new_left = slot < mid;
            let keep = if new_left { mid - 1 } else { mid };
            let mut moved: Vec<(&[u8], u64)> = Vec::with_capacity(n + 1 - mid);
            for old in keep..n {
                if old == slot && !new_left {
                    moved.push((key, value));
                }
                moved.push((node.key(old)?, node.value(old)?));
            }
            if slot == n {
                moved.push((key, value));
            }
            let next = node.next();
            if moved.is_empty() {
                return Err(too_few_to_split(left_id));
            }
            if !node::fits(self.pool.page_size(), &moved) {
                return Err(halves_do_not_fit(left_id));
            }
            node::rebuild(&mut right, 0, None, Some(left_id), next, &moved);
            (keep, new_left, KeyBuf::from_parts(&[moved[0].0]), next)
        };
        node::truncate(leaf, keep)?;
        node::set_next(leaf, Some(right_id));
        if new_left && !node::insert_at(leaf, slot, key, value) {
            return Err(StorageError::Corruption {
                page: left_id,
                reason: "b+-tree leaf split left no room for the new entry".into(),
            });
        }
        touched.push(right);
        if let Some(next_id) = next {
            if next_id == left_id || next_id == right_id {
                return Err(self_link(next_id));
            }
            // Left to right: allowed while holding the left leaf.
            let mut neighbour = self.fix_exclusive(next_id)?;
            node::set_prev(&mut neighbour, Some(right_id));
            touched.push(neighbour);
        }
        Ok((separator, right_id))
    }

    /// Removes the entry `(key, value)`. Unique tree: only if `key` maps to `value`.
    /// Returns whether an entry was removed.
    ///
    /// A delete that empties a leaf then takes the leaf out of the tree where it can
    /// ([`BTree::unlink_empty_leaf`]), so that keys deleted at one end and inserted at the
    /// other (TPC-C's new orders, a queue) do not leave a growing run of empty leaves for every
    /// scan and next-key lookup to walk.
    pub fn delete(&self, key: &[u8], value: u64) -> StorageResult<bool> {
        let stored = self.internal_key(key, value);
        let mut leaf = self.descend_to_leaf_exclusive(&stored, None)?;
        let node = Node::new(&leaf)?;
        let slot = match node.find(&self.order, &stored)? {
            Some(slot) if node.value(slot)? == value => slot,
            _ => return Ok(false),
        };
        node::remove_at(&mut leaf, slot)?;
        let emptied = Node::new(&leaf)?.is_empty() && leaf.page_id() != self.root;
        // The delete is logged as its guard goes, before the leaf can leave the tree.
        drop(leaf);
        if emptied {
            self.unlink_empty_leaf(&stored)?;
        }
        Ok(true)
    }

    /// Takes the leaf where `probe` belongs out of the tree if it is empty and is not its
    /// parent's leftmost child: its parent loses the leaf's separator and link (the left
    /// sibling's range grows over the leaf's), and the leaf chain skips it. One redo record
    /// covers the parent, both siblings and the leaf, as a split's does; it is never undone
    /// (an undo that puts a key back inserts it where the tree now says, the left sibling).
    ///
    /// Latches, in the order the tree's protocol allows: shared coupling down to the last inner
    /// level, which is latched exclusively; then the left sibling, the leaf and the right
    /// sibling, left to right (the left sibling is the parent's child too, so it is fixed
    /// before the leaf, never while holding it). Nothing changes until all four are held.
    ///
    /// A backward scan may still hold the page's id from its right neighbour's link, and a
    /// [`LeafHint`] its id from an insert, so the page stays an empty leaf marked as unlinked
    /// ([`node::mark_unlinked`]), its links as they were, and both check for the mark. It is
    /// then retired ([`BufferPool::retire_page`]): where the pool's owner turned reuse on,
    /// allocated again once every reader that entered before has left; otherwise kept for
    /// good, and `glass check` counts it among the pages no structure reaches.
    ///
    /// A parent's leftmost child leaves by [`BTree::try_take_out_leftmost_leaf`], which
    /// latches from the root (its left neighbour has another parent, and its parent may have
    /// to go too). Where a fetch stage refuses
    /// physical reads ([`crate::buffer::stage`]) and a page it needs is not in the pool, the
    /// leaf stays in the tree, empty, which readers walk past as they walk past the others.
    fn unlink_empty_leaf(&self, probe: &[u8]) -> StorageResult<()> {
        let done = match self.try_unlink_empty_leaf(probe) {
            Ok(Unlink::Leftmost) => self.try_take_out_leftmost_leaf(probe),
            other => other.map(|_| ()),
        };
        match done {
            Err(StorageError::WouldRead { .. }) => Ok(()),
            done => done,
        }
    }

    fn try_unlink_empty_leaf(&self, probe: &[u8]) -> StorageResult<Unlink> {
        let target = Target::Key {
            probe,
            strict: false,
        };
        // The last inner level, latched exclusively.
        let mut parent = {
            let mut guard = self.fix_shared(self.root)?;
            let mut parent_level = None;
            loop {
                let node = Node::new(&guard)?;
                check_child_level(&node, parent_level)?;
                let level = node.level();
                if level == 0 {
                    return Ok(Unlink::Done); // a leaf root has no parent to leave
                }
                if level == 1 {
                    // Only the root is met at level 1 here: below it the step ends above.
                    drop(guard);
                    let root = self.fix_exclusive(self.root)?;
                    if Node::new(&root)?.level() != 1 {
                        return Ok(Unlink::Done); // the root split meanwhile: leave the leaf be
                    }
                    break root;
                }
                crate::shared::bump(crate::shared::Place::BtreeInner);
                let child = node.child(self.child_index(&node, target, None)?)?;
                if child == guard.page_id() {
                    return Err(self_link(child));
                }
                if level == 2 {
                    let inner = self.fix_exclusive(child)?;
                    check_child_level(&Node::new(&inner)?, Some(2))?;
                    break inner;
                }
                parent_level = Some(level);
                guard = self.fix_shared(child)?;
            }
        };
        crate::shared::bump(crate::shared::Place::BtreeInner);
        let parent_id = parent.page_id();
        let (at, left_id, leaf_id) = {
            let node = Node::new(&parent)?;
            let at = self.child_index(&node, target, None)?;
            if at == 0 {
                return Ok(Unlink::Leftmost);
            }
            (at, node.child(at - 1)?, node.child(at)?)
        };
        if left_id == leaf_id || left_id == parent_id || leaf_id == parent_id {
            return Err(self_link(leaf_id));
        }
        let mut left = self.fix_exclusive(left_id)?;
        let mut leaf = self.fix_exclusive(leaf_id)?;
        let next = {
            let (left_node, leaf_node) = (Node::new(&left)?, Node::new(&leaf)?);
            check_child_level(&left_node, Some(1))?;
            check_child_level(&leaf_node, Some(1))?;
            if !leaf_node.is_empty() {
                return Ok(Unlink::Done); // refilled before the latches were taken
            }
            if leaf_node.prev() != Some(left_id) || left_node.next() != Some(leaf_id) {
                return Err(StorageError::Corruption {
                    page: leaf_id,
                    reason: "b+-tree sibling links disagree with the parent".into(),
                });
            }
            leaf_node.next()
        };
        let mut right = match next {
            Some(id) if id == parent_id || id == left_id || id == leaf_id => {
                return Err(self_link(id))
            }
            Some(id) => Some(self.fix_right_neighbour(id, leaf_id)?),
            None => None,
        };
        // Every page is held and checked: from here the unlink cannot stop half-way.
        node::remove_at(&mut parent, at - 1)?;
        node::set_next(&mut left, next);
        if let Some(right) = right.as_mut() {
            node::set_prev(right, Some(left_id));
        }
        node::mark_unlinked(&mut leaf);
        let mut guards: Vec<&mut PageWriteGuard<'_>> = vec![&mut parent, &mut left, &mut leaf];
        if let Some(right) = right.as_mut() {
            guards.push(right);
        }
        self.pool.log_together(&mut guards);
        drop(guards);
        drop((parent, left, leaf, right));
        // Handed out again once no reader that may hold its id is left (only where the
        // pool's owner turned reuse on).
        self.pool.retire_page(leaf_id);
        Ok(Unlink::Done)
    }

    /// The right neighbour `id` of a leaf leaving the tree, latched exclusively: a leaf whose
    /// prev link names `leaf_id`, or the corruption it is.
    fn fix_right_neighbour(
        &self,
        id: PageId,
        leaf_id: PageId,
    ) -> StorageResult<PageWriteGuard<'_>> {
        let right = self.fix_exclusive(id)?;
        let node = Node::new(&right)?;
        check_child_level(&node, Some(1))?;
        if node.prev() != Some(leaf_id) {
            return Err(StorageError::Corruption {
                page: id,
                reason: "b+-tree leaf's prev link does not name its left sibling".into(),
            });
        }
        Ok(right)
    }

    /// [`BTree::unlink_empty_leaf`] for a leaf that is its parent's leftmost child. The
    /// nearest ancestor with more than one child loses the child on the leaf's path, and with
    /// it every node of the path below it, each of which has that one child only (the leaf's
    /// parent where it has other children; otherwise a drained last-level inner node, and
    /// above it any inner node left with nothing but that one). The ancestor's next child
    /// takes over the range where the one removed was its leftmost, the previous child's
    /// rightmost leaf where it was not, and the leaf chain skips the leaf. One redo record
    /// covers every page changed; it is never undone, as the unlink's is not.
    ///
    /// The inner nodes removed are rewritten as empty leaves marked unlinked, so that a reader
    /// still holding one's id from before (an optimistic descent) finds no child to go to and
    /// a restart finds the page free ([`unlinked_leaves`]); they are retired with the leaf.
    ///
    /// Latches, top-down then left to right along the leaves, as everywhere in the tree:
    /// exclusive coupling from the root, letting each ancestor go once a node below it has
    /// another child; then the leaf's left neighbour, the leaf and its right neighbour. The
    /// left neighbour may lie under another parent, which is not needed (only its next link
    /// changes) and not latched: no thread holding a leaf waits for an inner node, so waiting
    /// for it here cannot close a cycle. It is found by the leaf's prev link, read before it
    /// is latched and checked once both are held; a neighbour that split or left the tree in
    /// between makes it look again, a few times, then leave the leaf, empty, in the tree.
    /// So does a root left with this one path (nothing to hand the range to).
    fn try_take_out_leftmost_leaf(&self, probe: &[u8]) -> StorageResult<()> {
        let target = Target::Key {
            probe,
            strict: false,
        };
        // The ancestor with another child, then the one-child nodes down to the leaf's parent,
        // each with the index of the child the path takes.
        let mut path: Vec<(PageWriteGuard<'_>, usize)> = Vec::new();
        let mut guard = self.fix_exclusive(self.root)?;
        let mut parent_level = None;
        let leaf_id = loop {
            let node = Node::new(&guard)?;
            check_child_level(&node, parent_level)?;
            let level = node.level();
            if level == 0 {
                return Ok(()); // a leaf root has no parent to leave
            }
            crate::shared::bump(crate::shared::Place::BtreeInner);
            let at = self.child_index(&node, target, None)?;
            let child = node.child(at)?;
            if !node.is_empty() {
                path.clear(); // a child besides the path: the ancestors above can go
            }
            parent_level = Some(level);
            path.push((guard, at));
            // A link back to a page held here would wait for its own latch.
            if path.iter().any(|(g, _)| g.page_id() == child) {
                return Err(self_link(child));
            }
            if level == 1 {
                break child;
            }
            guard = self.fix_exclusive(child)?;
        };
        let (top, at) = &path[0];
        if Node::new(top)?.is_empty() {
            return Ok(()); // the root's only path: nowhere to hand the range to
        }
        let at = *at;
        let held = |id: PageId| id == leaf_id || path.iter().any(|(g, _)| g.page_id() == id);
        for _ in 0..TAKE_OUT_TRIES {
            let prev = {
                let leaf = self.fix_shared(leaf_id)?;
                let node = Node::new(&leaf)?;
                check_child_level(&node, Some(1))?;
                if !node.is_empty() {
                    return Ok(()); // refilled meanwhile
                }
                node.prev()
            };
            let mut left = match prev {
                Some(id) if held(id) => return Err(self_link(id)),
                Some(id) => Some(self.fix_exclusive(id)?),
                None => None,
            };
            let mut leaf = self.fix_exclusive(leaf_id)?;
            let next = {
                let node = Node::new(&leaf)?;
                if !node.is_empty() {
                    return Ok(());
                }
                if node.prev() != prev {
                    continue; // the left neighbour split or left meanwhile: look again
                }
                if let Some(left) = &left {
                    let left_node = Node::new(left)?;
                    check_child_level(&left_node, Some(1))?;
                    if left_node.next() != Some(leaf_id) {
                        return Err(StorageError::Corruption {
                            page: left.page_id(),
                            reason: "b+-tree leaf's next link does not name its right neighbour"
                                .into(),
                        });
                    }
                }
                node.next()
            };
            let mut right = match next {
                Some(id) if held(id) || Some(id) == prev => return Err(self_link(id)),
                Some(id) => Some(self.fix_right_neighbour(id, leaf_id)?),
                None => None,
            };
            // Every page is held and checked: from here it cannot stop half-way.
            let mut chain = path.split_off(1);
            let (top, _) = &mut path[0];
            if at == 0 {
                let heir = Node::new(top)?.child(1)?;
                node::set_leftmost(top, heir);
                node::remove_at(top, 0)?;
            } else {
                node::remove_at(top, at - 1)?;
            }
            if let Some(left) = left.as_mut() {
                node::set_next(left, next);
            }
            if let Some(right) = right.as_mut() {
                node::set_prev(right, prev);
            }
            node::mark_unlinked(&mut leaf);
            for (inner, _) in chain.iter_mut() {
                node::rebuild(inner, 0, None, None, None, &[] as &[(&[u8], u64)]);
                node::mark_unlinked(inner);
            }
            let taken: Vec<PageId> = chain.iter().map(|(g, _)| g.page_id()).collect();
            let mut guards: Vec<&mut PageWriteGuard<'_>> = vec![top];
            guards.extend(chain.iter_mut().map(|(g, _)| g));
            guards.extend(left.as_mut());
            guards.push(&mut leaf);
            guards.extend(right.as_mut());
            self.pool.log_together(&mut guards);
            drop(guards);
            drop((path, chain, left, leaf, right));
            for page in taken.into_iter().chain([leaf_id]) {
                self.pool.retire_page(page);
            }
            return Ok(());
        }
        Ok(())
    }

    /// Visits the entries with `lo <= key <= hi` in ascending order (`reverse`: descending), at
    /// most `limit` of them, calling `f(key, value)` until it returns false. Returns the number
    /// of entries passed to `f`.
    ///
    /// A bound may be a prefix of keys: `Included(p)` as the high bound takes every key that
    /// starts with `p`, `Excluded(p)` as the low bound skips them all (see [`KeyRange::new`]).
    ///
    /// `f` runs with a leaf latched in shared mode: it must not write to this tree.
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
        let (lo, hi) = (range.lo.as_deref(), range.hi.as_deref());
        if reverse {
            self.scan_backward(lo, hi, limit, f)
        } else {
            self.scan_forward(lo, hi, limit, |step| match step {
                ScanStep::Entry(key, value) => f(key, value),
                ScanStep::After(_) => true,
            })
        }
    }

    /// A forward [`Self::scan`] that also names the key after the range. `visit` gets each
    /// entry as [`ScanStep::Entry`] (returning false stops the scan) and, where the scan ends
    /// because it met a key past `hi` or ran past the tree's last entry, that key (or `None`)
    /// as [`ScanStep::After`], under the latch of the leaf holding it; not where `visit`
    /// stopped the scan or `limit` entries were passed.
    ///
    /// A leaf is let go only after the first key beyond its entries has been visited under
    /// its latch and the next leaf's, and an insert into the gap between two leaves reads
    /// that key under the same latches (`visit_next`) to lock it. So a caller under key-range
    /// locking that locks each entry and the key after the range as it visits them has the
    /// range to itself once every lock was granted: no insert lands in a gap the scan passed
    /// without meeting one of its locks.
    pub fn scan_to_next(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        visit: impl FnMut(ScanStep<'_>) -> bool,
    ) -> StorageResult<usize> {
        let Some(range) = KeyRange::new(lo, hi) else {
            return Ok(0);
        };
        if limit == 0 {
            return Ok(0);
        }
        self.scan_forward(range.lo.as_deref(), range.hi.as_deref(), limit, visit)
    }

    /// Counts one step along the leaf chain, to `to`: a scan that has taken more steps than
    /// the page file has pages is going round a cycle of sibling links (a corrupt tree), which
    /// is an error instead of an endless loop.
    fn count_hop(&self, hops: &mut u64, to: PageId) -> StorageResult<()> {
        *hops += 1;
        if *hops > self.pool.page_count() {
            return Err(StorageError::Corruption {
                page: to,
                reason: "b+-tree leaf chain has a cycle".into(),
            });
        }
        Ok(())
    }

    fn scan_forward(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        limit: usize,
        mut visit: impl FnMut(ScanStep<'_>) -> bool,
    ) -> StorageResult<usize> {
        let target = match lo {
            Some(probe) => Target::Key {
                probe,
                strict: false,
            },
            None => Target::Leftmost,
        };
        let (mut guard, guide) = self.descend_shared(target)?;
        let mut slot = match lo {
            Some(l) => {
                let node = Node::new(&guard)?;
                node.search_guided(&self.order, l, true, guide)?.index
            }
            None => 0,
        };
        let mut count = 0;
        let mut hops = 0;
        // The leaves passed and still latched. A leaf is let go only once the first key after
        // its entries has been visited under its latch and the next leaf's,
        // so an insert into the gap between the two (which reads that key to lock it, see
        // `visit_next`) comes either before the scan or after the caller's lock on it
        // (`scan_to_next`). Usually the one leaf before; more only across empty leaves.
        let mut behind: Option<PageReadGuard<'_>> = None;
        let mut empties: Vec<PageReadGuard<'_>> = Vec::new();
        loop {
            let node = Node::new(&guard)?;
            while slot < node.len() {
                let key = node.key(slot)?;
                if let Some(h) = hi {
                    if self.order.compare(key, h) != Ordering::Less {
                        visit(ScanStep::After(Some(self.user_key(key))));
                        return Ok(count);
                    }
                }
                count += 1;
                if !visit(ScanStep::Entry(self.user_key(key), node.value(slot)?)) || count >= limit
                {
                    return Ok(count);
                }
                if behind.take().is_some() {
                    empties.clear();
                }
                slot += 1;
            }
            let Some(next) = node.next() else {
                visit(ScanStep::After(None));
                return Ok(count);
            };
            self.count_hop(&mut hops, next)?;
            let leaf = self.fix_shared(next)?;
            let passed = std::mem::replace(&mut guard, leaf);
            if behind.is_none() {
                behind = Some(passed);
            } else {
                empties.push(passed);
            }
            slot = 0;
        }
    }

    fn scan_backward(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        limit: usize,
        mut f: impl FnMut(&[u8], u64) -> bool,
    ) -> StorageResult<usize> {
        let target = match hi {
            Some(probe) => Target::Key {
                probe,
                strict: true,
            },
            None => Target::Rightmost,
        };
        let (mut guard, _) = self.descend_shared(target)?;
        // Exclusive upper limit for the entries still to visit: `hi`, then the last key passed
        // to `f` (guards against entries that moved while no leaf was latched). The last key
        // is copied only when the scan leaves a leaf, into a stack buffer when short.
        let mut passed: Option<KeyBuf> = None;
        let mut count = 0;
        let mut hops = 0;
        loop {
            let node = Node::new(&guard)?;
            let upper = passed.as_deref().or(hi);
            let mut slot = match upper {
                Some(u) => node.rank(&self.order, u, true)?,
                None => node.len(),
            };
            let mut last_passed = None;
            while slot > 0 {
                slot -= 1;
                let key = node.key(slot)?;
                if let Some(l) = lo {
                    if self.order.compare(key, l) == Ordering::Less {
                        return Ok(count);
                    }
                }
                count += 1;
                if !f(self.user_key(key), node.value(slot)?) || count >= limit {
                    return Ok(count);
                }
                last_passed = Some(key);
            }
            if let Some(key) = last_passed {
                passed = Some(KeyBuf::from_parts(&[key]));
            }
            let Some(prev) = node.prev() else {
                return Ok(count);
            };
            let this = guard.page_id();
            drop(guard);
            // Each step back lands on a leaf left of every leaf the scan has visited; each
            // walk right below, on leaves between that one and `this`. Each is bounded by
            // the pages on its own: counted together, a scan that met many splits (each makes
            // it visit a leaf twice, on the walk right and on the next step back) would take
            // itself for one going round a cycle.
            self.count_hop(&mut hops, prev)?;
            guard = self.fix_shared(prev)?;
            // If `prev` split after we read the link, its right part lies between it and us:
            // walk right to `this`. If `prev` or `this` left the tree meanwhile (an emptied
            // leaf, `unlink_empty_leaf`), `this` is not there to find: descend again to the
            // leaf of the greatest keys below what the scan has passed, which `passed` makes
            // safe from any leaf (nothing at or above it is visited twice).
            let upper = passed.as_deref().or(hi);
            let mut walked = 0;
            let found = loop {
                let node = Node::new(&guard)?;
                if node.is_unlinked() {
                    break false;
                }
                match node.next() {
                    Some(next) if next == this => break true,
                    Some(next) => {
                        self.count_hop(&mut walked, next)?;
                        guard = self.fix_shared(next)?;
                        // A split's right part holds keys and lies below `this`'s: a leaf
                        // that is empty or not below the bound is past where `this` was.
                        let right = Node::new(&guard)?;
                        let below = match upper {
                            _ if right.is_empty() => false,
                            Some(u) => self.order.compare(right.key(0)?, u) == Ordering::Less,
                            None => true,
                        };
                        if !below {
                            break false;
                        }
                    }
                    None => break false,
                }
            };
            if !found {
                drop(guard);
                // Counted as a step: a corrupt chain that never leads back cannot loop.
                self.count_hop(&mut hops, this)?;
                let target = match upper {
                    Some(probe) => Target::Key {
                        probe,
                        strict: true,
                    },
                    None => Target::Rightmost,
                };
                guard = self.descend_shared(target)?.0;
            }
        }
    }

    /// Levels in the tree: 1 while the root is a leaf.
    pub fn height(&self) -> StorageResult<usize> {
        let root = self.fix_shared(self.root)?;
        Ok(Node::new(&root)?.level() + 1)
    }

    /// Number of entries (walks the leaves).
    pub fn count(&self) -> StorageResult<usize> {
        self.scan(
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            usize::MAX,
            |_, _| true,
        )
    }

    /// Checks the whole tree: every node's header and slot array, keys strictly ascending in
    /// every node and inside the bounds its parent's separators set, all leaves at the same
    /// depth, children one level below their parent, the leaf chain (both directions) visiting
    /// exactly the leaves of the tree in key order, and the same entry count both ways.
    /// Stops at the first fault; [`BTree::verify`] reports them all.
    ///
    /// Fixes one node at a time: run it while no thread writes to the tree.
    pub fn check_invariants(&self) -> StorageResult<()> {
        match self.verify().faults.into_iter().next() {
            Some(fault) => Err(fault.into_error()),
            None => Ok(()),
        }
    }

    /// Checks what [`BTree::check_invariants`] checks, and goes on past each fault: a node
    /// that cannot be read (checksum, header) or sits at the wrong level is reported and its
    /// subtree skipped; keys out of order are reported and the descent goes on; a page reached
    /// a second time is reported and not entered again, so a damaged tree is walked in time
    /// linear in its pages. The leaf chain is followed only along the leaves the descent found,
    /// never by its own links, so a cycle in them cannot hold the check.
    ///
    /// Fixes one node at a time: run it while no thread writes to the tree.
    pub fn verify(&self) -> TreeCheck {
        self.verify_with_progress(&mut || {})
    }

    /// [`BTree::verify`], calling `walked` once for each page of the tree it reaches.
    pub fn verify_with_progress(&self, walked: &mut dyn FnMut()) -> TreeCheck {
        let mut walk = TreeWalk {
            check: TreeCheck::default(),
            seen: std::collections::HashSet::new(),
            unreadable: std::collections::HashSet::new(),
            leaves: Vec::new(),
            walked,
        };
        self.verify_subtree(self.root, None, None, None, &mut walk);
        let TreeWalk {
            mut check,
            leaves,
            unreadable,
            ..
        } = walk;
        let fault = |page: PageId, detail: String| Fault {
            page,
            detail: format!("b+-tree check: {detail}"),
        };
        // The leaf chain must list the same leaves, linked both ways.
        let mut prev: Option<PageId> = None;
        for (i, &leaf) in leaves.iter().enumerate() {
            if unreadable.contains(&leaf) {
                prev = Some(leaf);
                continue;
            }
            let links = self.pool.fix_shared(leaf).and_then(|g| {
                Node::new(&g).map(|n| (n.prev(), n.next(), n.is_unlinked(), n.is_empty()))
            });
            let (leaf_prev, leaf_next) = match links {
                Ok((_, _, true, _)) => {
                    check.faults.push(fault(
                        leaf,
                        "a leaf marked as taken out of the tree is still in it".into(),
                    ));
                    prev = Some(leaf);
                    continue;
                }
                Ok((leaf_prev, leaf_next, false, empty)) => {
                    check.empty_leaves += usize::from(empty);
                    (leaf_prev, leaf_next)
                }
                Err(e) => {
                    check.faults.push(Fault::from_error(leaf, &e));
                    prev = Some(leaf);
                    continue;
                }
            };
            if leaf_prev != prev {
                check.faults.push(fault(
                    leaf,
                    format!("prev link {leaf_prev:?}, expected {prev:?}"),
                ));
            }
            let expected_next = leaves.get(i + 1).copied();
            if leaf_next != expected_next {
                check.faults.push(fault(
                    leaf,
                    format!("next link {leaf_next:?}, expected {expected_next:?}"),
                ));
            }
            prev = Some(leaf);
        }
        // The scan follows the links: only once they are known to be sound.
        if check.faults.is_empty() {
            match self.count() {
                Ok(chained) if chained == check.entries => {}
                Ok(chained) => check.faults.push(fault(
                    self.root,
                    format!(
                        "{} entries in the tree but {chained} along the leaf chain",
                        check.entries
                    ),
                )),
                Err(e) => check.faults.push(Fault::from_error(self.root, &e)),
            }
        }
        check
    }

    /// Checks the subtree at `id`, whose keys must lie in `[lower, upper)` and whose level must
    /// be `level` (None at the root). Appends its leaves in order and its faults.
    fn verify_subtree(
        &self,
        id: PageId,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        level: Option<usize>,
        walk: &mut TreeWalk<'_>,
    ) {
        let fault = |detail: String| Fault {
            page: id,
            detail: format!("b+-tree check: {detail}"),
        };
        if !walk.seen.insert(id) {
            walk.check
                .faults
                .push(fault("page reached a second time".into()));
            return;
        }
        walk.check.pages.push(id);
        (walk.walked)();
        let read = || -> StorageResult<(usize, Vec<Vec<u8>>, Vec<PageId>)> {
            let guard = self.pool.fix_shared(id)?;
            let node = Node::new(&guard)?;
            node.check_space()?;
            let keys: Vec<Vec<u8>> = (0..node.len())
                .map(|i| node.key(i).map(<[u8]>::to_vec))
                .collect::<StorageResult<_>>()?;
            let children: Vec<PageId> = if node.is_leaf() {
                Vec::new()
            } else {
                (0..=node.len())
                    .map(|i| node.child(i))
                    .collect::<StorageResult<_>>()?
            };
            Ok((node.level(), keys, children))
        };
        let (node_level, keys, children) = match read() {
            Ok(node) => node,
            Err(e) => {
                walk.check.faults.push(Fault::from_error(id, &e));
                walk.unreadable.insert(id);
                if level == Some(0) {
                    // Its place in the leaf chain, so its neighbours' links still line up.
                    walk.leaves.push(id);
                }
                return;
            }
        };
        if let Some(expected) = level {
            if node_level != expected {
                walk.check.faults.push(fault(format!(
                    "level {node_level} under a parent expecting {expected}"
                )));
                return;
            }
        }
        if let Some(i) = keys
            .windows(2)
            .position(|pair| self.order.compare(&pair[0], &pair[1]) != Ordering::Less)
        {
            walk.check.faults.push(fault(format!(
                "keys not strictly ascending (slots {i} and {})",
                i + 1
            )));
        }
        if let (Some(lower), Some(first)) = (lower, keys.first()) {
            if self.order.compare(first, lower) == Ordering::Less {
                walk.check
                    .faults
                    .push(fault("key below the separator that leads here".into()));
            }
        }
        if let (Some(upper), Some(last)) = (upper, keys.last()) {
            if self.order.compare(last, upper) != Ordering::Less {
                walk.check
                    .faults
                    .push(fault("key not below the next separator".into()));
            }
        }
        if let Some((i, key)) = keys.iter().enumerate().find(|(_, key)| {
            key.len() > max_internal_key_len(self.pool.page_size())
                || (!self.unique && key.len() < 8)
        }) {
            walk.check
                .faults
                .push(fault(format!("key of {} bytes in slot {i}", key.len())));
        }
        if node_level == 0 {
            walk.leaves.push(id);
            walk.check.entries += keys.len();
            return;
        }
        for (i, &child) in children.iter().enumerate() {
            let child_lower = if i == 0 {
                lower
            } else {
                Some(&keys[i - 1][..])
            };
            let child_upper = keys.get(i).map(|k| &k[..]).or(upper);
            self.verify_subtree(child, child_lower, child_upper, Some(node_level - 1), walk);
        }
    }
}

/// What [`BTree::verify`] found.
#[derive(Clone, Debug, Default)]
pub struct TreeCheck {
    /// Every page the descent reached from the root, each once.
    pub pages: Vec<PageId>,
    /// Entries in the leaves the descent reached.
    pub entries: usize,
    /// Leaves in the chain that hold no entry (an emptied leaf that could not leave the
    /// tree: the root's only path, or a neighbour that kept changing; see
    /// `BTree::unlink_empty_leaf`).
    pub empty_leaves: usize,
    /// Every fault, in the order the walk met them.
    pub faults: Vec<Fault>,
}

/// The state of one [`BTree::verify`] walk.
struct TreeWalk<'a> {
    check: TreeCheck,
    seen: std::collections::HashSet<PageId>,
    /// Pages reached but not readable as nodes (reported once, when reached).
    unreadable: std::collections::HashSet<PageId>,
    /// The leaves in key order, unreadable pages where a leaf was expected included.
    leaves: Vec<PageId>,
    /// Called once for each page reached ([`BTree::verify_with_progress`]).
    walked: &'a mut dyn FnMut(),
}

/// A split whose halves do not fit their pages: the node's cells overlap (a corrupt node).
#[cold]
fn halves_do_not_fit(page: PageId) -> StorageError {
    StorageError::Corruption {
        page,
        reason: "b+-tree node's entries do not fit the two halves of a split (overlapping cells)"
            .into(),
    }
}

/// A split of a node with too few entries for two halves: its space fields lie.
#[cold]
fn too_few_to_split(page: PageId) -> StorageError {
    StorageError::Corruption {
        page,
        reason: "b+-tree node too full for one more entry but too empty to split".into(),
    }
}

/// A link from a node to a page its path holds latched (a corrupt tree).
#[cold]
fn self_link(page: PageId) -> StorageError {
    StorageError::Corruption {
        page,
        reason: "b+-tree link to a node already latched on the same path (a cycle)".into(),
    }
}

/// A node reached from a parent of `parent_level` must lie one level below it: a child
/// link back up or across (a corrupt tree) would otherwise send a descent round forever.
#[inline]
fn check_child_level(node: &Node<'_>, parent_level: Option<usize>) -> StorageResult<()> {
    match parent_level {
        Some(parent) if node.level() + 1 != parent => Err(StorageError::Corruption {
            page: node.page_id(),
            reason: format!(
                "b+-tree node of level {} under a parent of level {parent}",
                node.level()
            ),
        }),
        _ => Ok(()),
    }
}

/// Which of `candidates` are B+-tree leaves taken out of their trees and not allocated since:
/// formatted leaf pages, empty, carrying the unlink's mark ([`node::mark_unlinked`]), within
/// the pages allocated. Such a page is in no structure: the unlink that marked it removed
/// every link to it, in the same logged change, and nothing links an unlinked page again (an
/// allocation zeroes the page, mark and all). So, read when nothing else runs (an open, after
/// recovery has redone the log), the answer is the set of pages that may be handed out again
/// whatever the candidates' source; a list that is stale or wrong only leaves pages unused.
/// A page that cannot be read is left out: `glass check` reports it.
pub fn unlinked_leaves(
    pool: &BufferPool,
    candidates: impl IntoIterator<Item = PageId>,
) -> Vec<PageId> {
    let mut pages: Vec<PageId> = candidates
        .into_iter()
        .filter(|p| *p != PageId::META && p.0 < pool.page_count())
        .collect();
    pages.sort_unstable();
    pages.dedup();
    pages.retain(|&id| {
        let Ok(guard) = pool.fix_shared(id) else {
            return false;
        };
        let formatted = guard[crate::page::OFFSET_MAGIC..crate::page::OFFSET_MAGIC + 2]
            == crate::page::PAGE_MAGIC.to_le_bytes();
        formatted
            && Node::new(&guard).is_ok_and(|n| n.is_unlinked() && n.is_empty() && n.page_id() == id)
    });
    pages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::keys::BytewiseKeyOrder;
    use crate::buffer::PoolConfig;
    use crate::file::MemPageStore;
    use crate::page::{PageSize, OFFSET_KIND};
    use std::ops::Bound;

    fn key(i: u32) -> Vec<u8> {
        let mut k = vec![0xAB; 1000];
        k[..4].copy_from_slice(&i.to_be_bytes());
        k
    }

    /// A tree in a pool of `frames` 8 KiB frames, grown by `key(0)`, `key(1)`, … until it has
    /// `height` levels (1000-byte keys: a handful per node, so a few hundred make three).
    /// Returns the pool, the tree and how many keys it took.
    fn tree_of_height(
        height: usize,
        frames: usize,
    ) -> (Arc<BufferPool>, BTree<BytewiseKeyOrder>, u32) {
        let config = PoolConfig {
            page_size: PageSize::Kib8,
            frames,
            latching: true,
        };
        let store = Box::new(MemPageStore::new(PageSize::Kib8));
        let pool = Arc::new(BufferPool::new(store, config, None).unwrap());
        let tree = BTree::create(pool.clone(), BytewiseKeyOrder, true).unwrap();
        let mut n = 0;
        while tree.height().unwrap() < height {
            tree.insert(&key(n), n as u64).unwrap();
            n += 1;
        }
        (pool, tree, n)
    }

    /// A leaf's entries, copied out.
    type Entries = Vec<(Vec<u8>, u64)>;

    /// Each leaf of `tree`, left to right along the chain: its page and its entries.
    /// A whole backward scan that, at each key `at` names a message for, sends it on `ask` and
    /// pauses 50 ms, holding that key's leaf, so the thread receiving it acts meanwhile; then
    /// closes `ask`. The scan's result and the keys it passed, in order.
    fn scan_back_asking<T>(
        tree: &BTree<BytewiseKeyOrder>,
        ask: std::sync::mpsc::Sender<T>,
        mut at: impl FnMut(&[u8]) -> Option<T>,
    ) -> (StorageResult<usize>, Vec<Vec<u8>>) {
        let mut seen: Vec<Vec<u8>> = Vec::new();
        let scanned = tree.scan(
            Bound::Unbounded,
            Bound::Unbounded,
            true,
            usize::MAX,
            |k, _| {
                seen.push(k.to_vec());
                if let Some(message) = at(k) {
                    ask.send(message).unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                true
            },
        );
        (scanned, seen)
    }

    fn leaf_chain(tree: &BTree<BytewiseKeyOrder>) -> Vec<(PageId, Entries)> {
        let (mut leaf, _) = tree.descend_shared(Target::Leftmost).unwrap();
        let mut all = vec![(leaf.page_id(), Node::new(&leaf).unwrap().entries().unwrap())];
        while let Some(next) = Node::new(&leaf).unwrap().next() {
            leaf = tree.fix_shared(next).unwrap();
            all.push((next, Node::new(&leaf).unwrap().entries().unwrap()));
        }
        all
    }

    /// A backward scan whose every step back meets a split of the leaf it steps to (the split
    /// waits, holding that leaf, for the scan to leave the leaf to its right) visits each
    /// split-off leaf on a walk right and again on the next step back: more steps than the
    /// file has pages, on a sound tree. It must finish with every entry, not report a cycle.
    #[test]
    fn a_backward_scan_through_a_split_at_every_step_is_not_a_cycle() {
        let (_pool, tree, _) = tree_of_height(1, 64);
        let tree = Arc::new(tree);
        let mut n = 0;
        // Ascending inserts leave every leaf but the last full.
        let leaf_firsts = |tree: &BTree<BytewiseKeyOrder>| -> Vec<Vec<u8>> {
            leaf_chain(tree)
                .into_iter()
                .filter_map(|(_, entries)| entries.first().map(|(k, _)| k.clone()))
                .collect()
        };
        while leaf_firsts(&tree).len() < 10 {
            tree.insert(&key(n), n as u64).unwrap();
            n += 1;
        }
        let firsts = leaf_firsts(&tree);
        // When the scan reaches a leaf's first entry, the splitter inserts just above the
        // first key of the leaf to its left, which is full: that leaf splits, and the split
        // waits for the leaf the scan holds (its right neighbour) until the scan moves on.
        let (ask, asked) = std::sync::mpsc::channel::<Vec<u8>>();
        let splitter = {
            let tree = tree.clone();
            std::thread::spawn(move || {
                let mut split = 0;
                for mut above in asked {
                    *above.last_mut().unwrap() += 1;
                    tree.insert(&above, u64::MAX).unwrap();
                    split += 1;
                }
                split
            })
        };
        let (scanned, seen) = scan_back_asking(&tree, ask, |k| {
            let at = firsts[1..].iter().position(|f| f == k)?;
            Some(firsts[at].clone())
        });
        let split = splitter.join().unwrap();
        let scanned = scanned.expect("a sound tree's backward scan ends without an error");
        assert_eq!(split, firsts.len() - 1);
        assert!(seen.windows(2).all(|w| w[0] > w[1]), "scan out of order");
        assert_eq!(
            scanned,
            n as usize + split,
            "every entry, the split-off ones too"
        );
        tree.check_invariants().unwrap();
    }

    /// Keys deleted in order from the left of a four-level tree, then from the right: every
    /// emptied leaf leaves, the leftmost children too, and so does each inner node left with
    /// no other child, up to the nearest ancestor that has one. No empty leaf stays reachable;
    /// each page no longer reached is an unlinked leaf, inner nodes rewritten as such among
    /// them; every key left is found by lookups and both scans; the keys go back in.
    #[test]
    fn drained_ranges_take_their_leaves_and_inner_nodes_out_of_the_tree() {
        let (pool, tree, mut n) = tree_of_height(4, 2048);
        // A root with several children, so that whole level-2 subtrees drain.
        while Node::new(&tree.fix_shared(tree.root()).unwrap())
            .unwrap()
            .len()
            < 3
        {
            tree.insert(&key(n), n as u64).unwrap();
            n += 1;
        }
        let inner_pages = |tree: &BTree<BytewiseKeyOrder>| -> Vec<PageId> {
            tree.verify()
                .pages
                .into_iter()
                .filter(|&p| !Node::new(&tree.fix_shared(p).unwrap()).unwrap().is_leaf())
                .collect()
        };
        let inner_before = inner_pages(&tree);
        let level_of = |p: PageId| Node::new(&tree.fix_shared(p).unwrap()).unwrap().level();
        let upper_before: Vec<PageId> = inner_before
            .iter()
            .copied()
            .filter(|&p| level_of(p) == 2)
            .collect();
        let (lo, hi) = (n / 2, n * 5 / 6);
        let deleted: Vec<u32> = (0..lo).chain((hi..n).rev()).collect();
        for &i in &deleted {
            assert!(tree.delete(&key(i), i as u64).unwrap());
        }
        let check = tree.verify();
        assert!(check.faults.is_empty(), "{:?}", check.faults);
        assert_eq!(check.empty_leaves, 0, "empty leaves still reachable");
        assert_eq!(check.entries, (hi - lo) as usize);
        let reached: std::collections::HashSet<PageId> = check.pages.iter().copied().collect();
        let unreached: Vec<PageId> = (1..pool.page_count())
            .map(PageId)
            .filter(|p| !reached.contains(p))
            .collect();
        assert_eq!(unlinked_leaves(&pool, unreached.iter().copied()), unreached);
        let inner_gone: Vec<PageId> = inner_before
            .iter()
            .copied()
            .filter(|p| !reached.contains(p))
            .collect();
        assert!(
            inner_gone.len() * 3 >= inner_before.len(),
            "{} of {} inner nodes left the tree",
            inner_gone.len(),
            inner_before.len()
        );
        // Whole level-2 subtrees went too: chains of two inner nodes above a leaf.
        assert!(
            upper_before.iter().any(|p| inner_gone.contains(p)),
            "no level-2 node of {upper_before:?} left the tree"
        );
        let left: Vec<Vec<u8>> = (lo..hi).map(key).collect();
        let scanned = |reverse| {
            let mut keys = Vec::new();
            tree.scan(
                Bound::Unbounded,
                Bound::Unbounded,
                reverse,
                usize::MAX,
                |k, _| {
                    keys.push(k.to_vec());
                    true
                },
            )
            .unwrap();
            keys
        };
        assert_eq!(scanned(false), left);
        assert_eq!(
            scanned(true),
            left.iter().rev().cloned().collect::<Vec<_>>()
        );
        for i in (lo..hi).step_by(7) {
            assert_eq!(tree.get(&key(i)).unwrap(), Some(i as u64));
        }
        for i in [0, lo - 1, hi, n - 1] {
            assert_eq!(tree.get(&key(i)).unwrap(), None);
        }
        put_back(&tree, deleted.iter().rev().copied(), n);
    }

    /// Inserts `key(i)` for each of `ids` into a tree that then holds `n` keys, and checks it.
    fn put_back(tree: &BTree<BytewiseKeyOrder>, ids: impl Iterator<Item = u32>, n: u32) {
        for i in ids {
            tree.insert(&key(i), i as u64).unwrap();
        }
        tree.check_invariants().unwrap();
        assert_eq!(tree.count().unwrap(), n as usize);
    }

    /// Every key deleted: the root keeps one path down to one empty leaf, the only empty leaf
    /// left, and the tree takes its keys again.
    #[test]
    fn a_tree_emptied_keeps_one_path_from_its_root() {
        let (_pool, tree, n) = tree_of_height(3, 512);
        for i in 0..n {
            assert!(tree.delete(&key(i), i as u64).unwrap());
        }
        let check = tree.verify();
        assert!(check.faults.is_empty(), "{:?}", check.faults);
        assert_eq!((check.entries, check.empty_leaves), (0, 1));
        assert_eq!(check.pages.len(), 3, "the root, one inner node, one leaf");
        put_back(&tree, (0..n).rev(), n);
    }

    /// A backward scan whose step back lands on a leaf that left the tree meanwhile (emptied by
    /// deletes, its unlink waiting for the leaf the scan holds) descends again below the last
    /// key it passed: it sees every entry nobody deleted, each once, in order.
    #[test]
    fn a_backward_scan_stepping_onto_an_unlinked_leaf_finds_its_way_on() {
        let (_pool, tree, _) = tree_of_height(1, 64);
        let tree = Arc::new(tree);
        let mut n = 0;
        let leaves = leaf_chain;
        while leaves(&tree).len() < 12 {
            tree.insert(&key(n), n as u64).unwrap();
            n += 1;
        }
        let (pages, before): (Vec<PageId>, Vec<_>) = leaves(&tree).into_iter().unzip();
        // Every other leaf is emptied, as the scan reaches the first key of the leaf to its
        // right; among them the second parent's leftmost child, which leaves from the root.
        let leftmost: Vec<PageId> = tree
            .verify()
            .pages
            .iter()
            .filter_map(|&p| {
                let guard = tree.fix_shared(p).unwrap();
                let node = Node::new(&guard).unwrap();
                (node.level() == 1).then(|| node.child(0).unwrap())
            })
            .collect();
        let second_parents_first = (1..pages.len())
            .find(|&i| leftmost.contains(&pages[i]))
            .expect("two last-level inner nodes");
        let emptied: Vec<usize> = (2 - second_parents_first % 2..before.len() - 1)
            .step_by(2)
            .collect();
        assert!(emptied.contains(&second_parents_first) && emptied.len() >= 3);
        let (ask, asked) = std::sync::mpsc::channel::<Vec<(Vec<u8>, u64)>>();
        let deleter = {
            let tree = tree.clone();
            std::thread::spawn(move || {
                for entries in asked {
                    for (k, v) in entries {
                        assert!(tree.delete(&k, v).unwrap());
                    }
                }
            })
        };
        let (scanned, seen) = scan_back_asking(&tree, ask, |k| {
            let at = before.iter().position(|l| l[0].0 == k)?;
            (at > 0 && emptied.contains(&(at - 1))).then(|| before[at - 1].clone())
        });
        deleter.join().unwrap();
        scanned.expect("a sound tree's backward scan ends without an error");
        let expected: Vec<Vec<u8>> = before
            .iter()
            .enumerate()
            .rev()
            .filter(|(i, _)| !emptied.contains(i))
            .flat_map(|(_, l)| l.iter().rev().map(|(k, _)| k.clone()))
            .collect();
        assert_eq!(seen, expected);
        tree.check_invariants().unwrap();
        assert_eq!(leaves(&tree).len(), before.len() - emptied.len());
        for (i, page) in pages.iter().enumerate() {
            let guard = tree.fix_shared(*page).unwrap();
            assert_eq!(
                Node::new(&guard).unwrap().is_unlinked(),
                emptied.contains(&i)
            );
        }
    }

    /// A leaf where the exclusive descent expects an inner node (a corrupt level field) is
    /// reported as corruption: the descent neither treats it as an inner node nor restarts
    /// from the root forever.
    #[test]
    fn leaf_above_the_last_inner_level_is_corruption() {
        let (pool, tree, _) = tree_of_height(3, 256);
        assert_eq!(tree.get(&key(0)).unwrap(), Some(0));
        let first_inner = {
            let root = pool.fix_shared(tree.root()).unwrap();
            Node::new(&root).unwrap().child(0).unwrap()
        };
        {
            // Relabel the level-1 node under the root as a leaf (kind and level agree, so
            // its header alone looks sound).
            let mut page = pool.fix_exclusive(first_inner).unwrap();
            page.range_mut(OFFSET_KIND, 1)[0] = PageKind::BTreeLeaf as u8;
            page.range_mut(node::OFFSET_LEVEL, 2).fill(0);
        }
        assert!(matches!(
            tree.insert(&key(0), 7),
            Err(StorageError::Corruption { .. })
        ));
        assert!(tree.check_invariants().is_err());
    }

    /// `verify` goes on past a damaged node: two leaves of different subtrees relabelled as
    /// heap pages are both reported at their own page, the other leaves are still walked,
    /// and `check_invariants` stops at the first.
    #[test]
    fn verify_reports_every_damaged_node() {
        let (pool, tree, n) = tree_of_height(3, 256);
        let clean = tree.verify();
        assert!(clean.faults.is_empty(), "{:?}", clean.faults);
        assert_eq!(clean.entries, n as usize);
        let leaf_under = |inner_slot: usize| {
            let root = pool.fix_shared(tree.root()).unwrap();
            let inner = Node::new(&root).unwrap().child(inner_slot).unwrap();
            drop(root);
            let inner = pool.fix_shared(inner).unwrap();
            Node::new(&inner).unwrap().child(0).unwrap()
        };
        let damaged = [leaf_under(0), leaf_under(1)];
        for &leaf in &damaged {
            let mut page = pool.fix_exclusive(leaf).unwrap();
            page.range_mut(OFFSET_KIND, 1)[0] = PageKind::Heap as u8;
        }
        let check = tree.verify();
        let pages: Vec<PageId> = check.faults.iter().map(|f| f.page).collect();
        assert_eq!(pages, damaged, "{:?}", check.faults);
        assert_eq!(
            check.pages.len(),
            clean.pages.len(),
            "every node still reached"
        );
        assert!(check.entries < clean.entries);
        assert!(matches!(
            tree.check_invariants(),
            Err(StorageError::Corruption { page, .. }) if page == damaged[0]
        ));
    }

    /// A child link back to an ancestor, or a leaf chain that comes round again: before, a
    /// lookup descended and a scan walked forever; now each is a corruption error.
    #[test]
    fn cycles_in_a_corrupt_tree_are_errors_not_endless_loops() {
        let (pool, tree, _) = tree_of_height(3, 256);
        let (first_inner, first_leaf) = {
            let root = pool.fix_shared(tree.root()).unwrap();
            let inner = Node::new(&root).unwrap().child(0).unwrap();
            let page = pool.fix_shared(inner).unwrap();
            (inner, Node::new(&page).unwrap().child(0).unwrap())
        };
        // The last leaf's right sibling becomes the first leaf: the chain is a ring.
        let last_leaf = {
            let mut leaf = first_leaf;
            loop {
                let page = pool.fix_shared(leaf).unwrap();
                match Node::new(&page).unwrap().next() {
                    Some(next) => leaf = next,
                    None => break leaf,
                }
            }
        };
        node::set_next(
            &mut pool.fix_exclusive(last_leaf).unwrap(),
            Some(first_leaf),
        );
        let scanned = tree.scan(
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            usize::MAX,
            |_, _| true,
        );
        let message = scanned.unwrap_err().to_string();
        assert!(message.contains("leaf chain has a cycle"), "{message}");
        // The first inner node's leftmost child becomes the root: a lookup would go round.
        node::set_leftmost(&mut pool.fix_exclusive(first_inner).unwrap(), tree.root());
        let message = tree.get(&key(0)).unwrap_err().to_string();
        assert!(message.contains("under a parent of level 1"), "{message}");
        assert!(tree.insert(&key(0), 1).is_err());
    }

    /// Found by the `btree_tree` fuzz target: an inner node whose child link names itself
    /// made an insert wait forever for the exclusive latch of the page it held shared.
    #[test]
    fn a_node_linking_to_itself_is_an_error_not_a_deadlock() {
        let (pool, tree, _) = tree_of_height(2, 256);
        node::set_leftmost(&mut pool.fix_exclusive(tree.root()).unwrap(), tree.root());
        let message = tree.insert(&[0u8], 1).unwrap_err().to_string();
        assert!(message.contains("already latched"), "{message}");
        assert!(tree.get(&[0u8]).is_err());
    }

    /// Found by the `btree_tree` fuzz target: splitting a leaf whose slots share cells gave
    /// halves larger than a page, and the rebuild of the first half panicked.
    #[test]
    fn splitting_a_node_whose_slots_share_cells_is_an_error_not_a_panic() {
        let (pool, tree, _) = tree_of_height(1, 16);
        for n in 0..7 {
            tree.insert(&key(n), n as u64).unwrap();
        }
        assert_eq!(tree.height().unwrap(), 1, "still one leaf");
        {
            // More slots, all naming slot 6's cell: the header still checks out.
            let mut root = pool.fix_exclusive(tree.root()).unwrap();
            let cell = root[node::slot_offset(6)..node::slot_offset(6) + 2].to_vec();
            for i in 7..40 {
                root.range_mut(node::slot_offset(i), 2)
                    .copy_from_slice(&cell);
            }
            root.range_mut(node::OFFSET_SLOT_COUNT, 2)
                .copy_from_slice(&40u16.to_le_bytes());
            Node::new(&root).unwrap();
        }
        let message = tree.insert(&key(100), 1).unwrap_err().to_string();
        assert!(message.contains("do not fit"), "{message}");
    }

    /// Found by the `btree_tree` fuzz target: an empty leaf whose cell area claims the whole
    /// page has no room for an entry, and its split indexed past the one entry it had.
    #[test]
    fn splitting_a_node_too_empty_to_split_is_an_error_not_a_panic() {
        let (pool, tree, _) = tree_of_height(1, 16);
        {
            let mut root = pool.fix_exclusive(tree.root()).unwrap();
            let start = node::NODE_HEADER_SIZE as u16;
            root.range_mut(node::OFFSET_CELL_START, 2)
                .copy_from_slice(&start.to_le_bytes());
            Node::new(&root).unwrap();
        }
        let message = tree.insert(&key(1), 1).unwrap_err().to_string();
        assert!(message.contains("too empty to split"), "{message}");
    }
}
