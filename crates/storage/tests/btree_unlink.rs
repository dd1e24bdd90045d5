//! Leaves emptied by deletes leave the tree (`BTree::delete` → `unlink_empty_leaf`): keys
//! deleted at one end and inserted at the other, as TPC-C's new orders are, must not leave a
//! run of empty leaves that grows with the run for every scan and next-key lookup to walk,
//! neither leaves nor the inner nodes above a drained range.
//! Scans in both directions, lookups and inserts stay correct while leaves leave the tree
//! under them, and every unlink keeps the tree's invariants.

mod common;

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::pool_8k;
use storage::btree::node::Node;
use storage::btree::{BTree, BytewiseKeyOrder, IntKeyOrder, KeyOrder};
use storage::buffer::BufferPool;
use storage::PageId;

fn key(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

/// The tree's reachable leaves that are empty, and its last-level inner nodes.
fn empty_leaves_and_last_inner(pool: &BufferPool, tree: &BTree<IntKeyOrder>) -> (usize, usize) {
    let check = tree.verify();
    assert!(check.faults.is_empty(), "{:?}", check.faults);
    let (mut empty, mut last_inner) = (0, 0);
    for &page in &check.pages {
        let guard = pool.fix_shared(page).unwrap();
        let node = Node::new(&guard).unwrap();
        assert!(!node.is_unlinked(), "an unlinked leaf is reachable");
        match node.level() {
            0 if node.is_empty() => empty += 1,
            1 => last_inner += 1,
            _ => {}
        }
    }
    (empty, last_inner)
}

fn keys_in_order(tree: &BTree<IntKeyOrder>, reverse: bool) -> Vec<u64> {
    common::keys_in_order(tree, reverse)
        .into_iter()
        .map(|k| u64::from_be_bytes(k.try_into().unwrap()))
        .collect()
}

/// Draining nine tenths of the keys in order empties some four hundred leaves and several
/// last-level inner nodes: every one leaves the tree, the parents' leftmost children and the drained
/// inner node too, and the keys deleted can be inserted again, in any order, into the leaves
/// that took over their range.
#[test]
fn a_drained_range_leaves_no_empty_leaf_in_the_tree() {
    let pool = pool_8k(4096);
    let tree = BTree::create(pool.clone(), IntKeyOrder, true).unwrap();
    let n = 200_000u64;
    for id in 0..n {
        tree.insert(&key(id), id).unwrap();
    }
    let reached_before = tree.verify().pages.len();
    let (_, last_inner_before) = empty_leaves_and_last_inner(&pool, &tree);
    assert!(
        last_inner_before > 1,
        "{last_inner_before} last-level inner nodes"
    );
    let drained = n * 9 / 10;
    for id in 0..drained {
        assert!(tree.delete(&key(id), id).unwrap());
    }
    tree.check_invariants().unwrap();
    let (empty, last_inner) = empty_leaves_and_last_inner(&pool, &tree);
    assert_eq!(empty, 0, "empty leaves still in the tree");
    assert!(
        last_inner < last_inner_before,
        "no last-level inner node left the tree"
    );
    let reached_after = tree.verify().pages.len();
    assert!(
        reached_after * 4 < reached_before,
        "{reached_after} pages still reached of {reached_before}"
    );
    let left: Vec<u64> = (drained..n).collect();
    assert_eq!(keys_in_order(&tree, false), left);
    assert_eq!(
        keys_in_order(&tree, true),
        left.iter().rev().copied().collect::<Vec<_>>()
    );

    // Back in, scattered over the drained range.
    for i in 0..drained {
        let id = (i * 7919) % drained;
        tree.insert(&key(id), id).unwrap();
    }
    tree.check_invariants().unwrap();
    assert_eq!(keys_in_order(&tree, false), (0..n).collect::<Vec<_>>());
    for id in (0..n).step_by(97) {
        assert_eq!(tree.get(&key(id)).unwrap(), Some(id));
    }
}

/// A queue: each round appends a batch and deletes the oldest batch. The leaves a scan from
/// the front walks before its first entry stay bounded; with every emptied leaf left in the
/// tree they grew by one for every leaf's worth of keys ever deleted (some 250 here).
#[test]
fn a_queue_does_not_leave_a_growing_run_of_empty_leaves_in_front_of_it() {
    let pool = pool_8k(8192);
    let tree = BTree::create(pool.clone(), IntKeyOrder, true).unwrap();
    let batch = 500u64;
    let (mut head, mut tail) = (0u64, 0u64);
    let front_visits = |tree: &BTree<IntKeyOrder>, expect: u64| {
        let before = storage::counters::snapshot().node_visits;
        let mut first = None;
        tree.scan(Bound::Unbounded, Bound::Unbounded, false, 1, |k, _| {
            first = Some(u64::from_be_bytes(k.try_into().unwrap()));
            false
        })
        .unwrap();
        assert_eq!(first, Some(expect), "the queue's front");
        storage::counters::snapshot().node_visits - before
    };
    let mut early = 0;
    for round in 0..200 {
        for id in tail..tail + batch {
            tree.insert(&key(id), id).unwrap();
        }
        tail += batch;
        if round > 0 {
            for id in head..head + batch {
                assert!(tree.delete(&key(id), id).unwrap());
            }
            head += batch;
        }
        if round == 20 {
            early = front_visits(&tree, head);
        }
    }
    let late = front_visits(&tree, head);
    tree.check_invariants().unwrap();
    assert!(
        late <= early + 3,
        "a scan from the front visits {late} nodes after 200 rounds, {early} after 20"
    );
    assert_eq!(tree.count().unwrap() as u64, tail - head);
}

/// Two writers drain and refill blocks of keys several leaves long (so whole leaves empty and
/// leave the tree) while scanners go forward and backward and look up keys that are never
/// deleted: every scan is ordered and sees every such key, and at the end the tree holds
/// exactly what the writers left in it, with pages taken out of it on the way.
#[test]
fn scans_and_lookups_stay_right_while_emptied_leaves_leave_the_tree() {
    scans_and_lookups_while_leaves_leave(false, Keys::Narrow, IntKeyOrder);
}

/// The same with the pool handing unlinked leaves' pages out again
/// (`BufferPool::enable_page_reuse`), every scan and every writer's operation counted as a
/// reader: splits then take pages that were leaves of the same tree moments before, while
/// backward scans and lookups may still be on their way to them. Fails if a page is reused
/// while a reader that began before its unlink can still reach it (a scan out of order or
/// missing keys, a lookup missing one), or if no page is ever reused.
#[test]
fn scans_and_lookups_stay_right_while_unlinked_leaves_pages_are_reused() {
    scans_and_lookups_while_leaves_leave(true, Keys::Narrow, IntKeyOrder);
}

/// Both again with keys of a kilobyte, a handful to a node: a drained block then spans
/// several last-level inner nodes, so parents' leftmost children leave too, and whole inner
/// nodes with them (latched from the root, the left neighbour under another parent), while
/// the scanners walk past and the pages are handed out again.
#[test]
fn scans_and_lookups_stay_right_while_drained_inner_nodes_leave_the_tree() {
    scans_and_lookups_while_leaves_leave(false, Keys::Wide, BytewiseKeyOrder);
    scans_and_lookups_while_leaves_leave(true, Keys::Wide, BytewiseKeyOrder);
}

/// The keys of a concurrent test: 8-byte integers, or a kilobyte each (the id's 8 bytes
/// first, so that they sort as the ids do).
#[derive(Clone, Copy)]
enum Keys {
    Narrow,
    Wide,
}

impl Keys {
    fn key(self, id: u64) -> Vec<u8> {
        match self {
            Keys::Narrow => key(id).to_vec(),
            Keys::Wide => {
                let mut k = vec![0xAB; 1000];
                k[..8].copy_from_slice(&id.to_be_bytes());
                k
            }
        }
    }

    /// Keys a block holds, and blocks: some five leaves a block either way.
    fn blocks(self) -> (u64, u64) {
        match self {
            Keys::Narrow => (2_000, 20),
            Keys::Wide => (40, 30),
        }
    }
}

fn id_of(k: &[u8]) -> u64 {
    u64::from_be_bytes(k[..8].try_into().unwrap())
}

fn scans_and_lookups_while_leaves_leave<K: KeyOrder + Send + Sync + 'static>(
    reuse: bool,
    keys: Keys,
    order: K,
) {
    let pool = pool_8k(8192);
    if reuse {
        pool.enable_page_reuse();
    }
    let tree = Arc::new(BTree::create(pool.clone(), order, true).unwrap());
    // Even blocks are never deleted.
    let (block, blocks) = keys.blocks();
    for id in 0..block * blocks {
        tree.insert(&keys.key(id), id).unwrap();
    }
    // The inner nodes, and the leaves that are their parents' leftmost children.
    let (mut inner_before, mut leftmost_before) = (Vec::new(), Vec::new());
    for page in tree.verify().pages {
        let guard = pool.fix_shared(page).unwrap();
        let node = Node::new(&guard).unwrap();
        if !node.is_leaf() {
            inner_before.push(page);
        }
        if node.level() == 1 {
            leftmost_before.push(node.child(0).unwrap());
        }
    }
    let stable: BTreeSet<u64> = (0..block * blocks)
        .filter(|id| (id / block).is_multiple_of(2))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(3);
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let tree = tree.clone();
            std::thread::spawn(move || {
                // Writer w owns the odd blocks b with b % 4 == 2w + 1.
                let mine: Vec<u64> = (0..blocks).filter(|b| b % 4 == 2 * w + 1).collect();
                let mut rounds = 0u64;
                while Instant::now() < deadline {
                    let b = mine[rounds as usize % mine.len()];
                    let ids = b * block..(b + 1) * block;
                    // Each operation a reader of the tree's pages, as a transaction is.
                    let op = |f: &dyn Fn()| {
                        let epoch = tree.pool().epoch_enter();
                        f();
                        if let Some(token) = epoch {
                            tree.pool().epoch_exit(token);
                        }
                    };
                    for id in ids.clone() {
                        op(&|| assert!(tree.delete(&keys.key(id), id).unwrap(), "lost key {id}"));
                    }
                    // Back in, ascending in one round and descending in the next.
                    let back: Vec<u64> = match rounds % 2 {
                        0 => ids.collect(),
                        _ => ids.rev().collect(),
                    };
                    for id in back {
                        op(&|| tree.insert(&keys.key(id), id).unwrap());
                    }
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    let stable: BTreeSet<Vec<u8>> = stable.iter().map(|&id| keys.key(id)).collect();
    let scanners = common::spawn_scanners(&tree, &stable, &done, 50, id_of);
    let watchdog = Instant::now() + Duration::from_secs(120);
    for rounds in common::join_before(writers, watchdog, "writers") {
        assert!(rounds >= 1);
    }
    done.store(true, Ordering::Relaxed);
    for scans in common::join_before(scanners, watchdog, "scanners") {
        assert!(scans >= 2);
    }
    tree.check_invariants().unwrap();
    let ids: Vec<u64> = common::keys_in_order(&tree, false)
        .iter()
        .map(|k| id_of(k))
        .collect();
    assert_eq!(ids, (0..block * blocks).collect::<Vec<_>>());
    // Page 0 is the meta page; every other page the tree does not reach left it, and is an
    // unlinked leaf (what an open would hand out again).
    let reached = tree.verify().pages.len() as u64;
    let stats = pool.reuse_stats();
    let unlinked = storage::btree::unlinked_leaves(&pool, (0..pool.page_count()).map(PageId));
    assert_eq!(unlinked.len() as u64, pool.page_count() - 1 - reached);
    if reuse {
        assert!(stats.reused > 0, "no page was reused: {stats:?}");
        assert_eq!(
            pool.page_count() - 1 - reached,
            stats.waiting,
            "the pages the tree does not reach are the retired ones not yet reused"
        );
    } else {
        // Without reuse nothing is relinked: these left the tree (a leftmost child stays
        // one until it leaves).
        if let Keys::Wide = keys {
            assert!(
                inner_before.iter().any(|p| unlinked.contains(p)),
                "no inner node left the tree"
            );
            assert!(
                leftmost_before.iter().any(|p| unlinked.contains(p)),
                "no leftmost child left the tree"
            );
        }
        assert_eq!(stats, storage::buffer::ReuseStats::default());
        assert!(
            reached + 1 < pool.page_count(),
            "no leaf left the tree: {reached} of {} pages reached",
            pool.page_count()
        );
    }
}
