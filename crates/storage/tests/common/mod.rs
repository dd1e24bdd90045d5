//! Helpers shared by the storage model tests.
// Each test binary uses some of them.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use storage::btree::{encode_key, BTree, KeyField, KeyOrder};
use storage::buffer::{BufferPool, PoolConfig};
use storage::file::MemPageStore;
use storage::PageSize;

/// An in-memory buffer pool of `frames` latched 8 KiB frames.
pub fn pool_8k(frames: usize) -> Arc<BufferPool> {
    let config = PoolConfig {
        page_size: PageSize::Kib8,
        frames,
        latching: true,
    };
    Arc::new(BufferPool::new(Box::new(MemPageStore::new(PageSize::Kib8)), config, None).unwrap())
}

/// A schema key `(Int i, Str of filler 'x's)`: a long filler makes a few dozen entries split
/// a leaf (and makes separators long).
pub fn filler_key(i: i64, filler: usize) -> Vec<u8> {
    let s = vec![b'x'; filler];
    let mut out = Vec::new();
    encode_key(&[KeyField::Int(i), KeyField::Str(&s)], &mut out).unwrap();
    out
}

/// Every entry of `tree` in key order.
pub fn tree_entries<K: KeyOrder>(tree: &BTree<K>) -> Vec<(Vec<u8>, u64)> {
    let mut got = Vec::new();
    tree.scan(
        Bound::Unbounded,
        Bound::Unbounded,
        false,
        usize::MAX,
        |k, v| {
            got.push((k.to_vec(), v));
            true
        },
    )
    .unwrap();
    got
}

/// Whether `key` is within the low bound of a scan whose bounds may be key prefixes
/// (`Excluded(p)` skips every key starting with `p`), as the index scans read them.
pub fn in_low(key: &[u8], lo: &Bound<Vec<u8>>) -> bool {
    match lo {
        Bound::Included(p) => key >= &p[..],
        Bound::Excluded(p) => key > &p[..] && !key.starts_with(p),
        Bound::Unbounded => true,
    }
}

/// Whether `key` is within the high bound (`Included(p)` takes every key starting with `p`).
pub fn in_high(key: &[u8], hi: &Bound<Vec<u8>>) -> bool {
    match hi {
        Bound::Included(p) => key <= &p[..] || key.starts_with(p),
        Bound::Excluded(p) => key < &p[..],
        Bound::Unbounded => true,
    }
}

/// Every key of `tree`, scanned in order (`reverse`: descending).
pub fn keys_in_order<K: KeyOrder>(tree: &BTree<K>, reverse: bool) -> Vec<Vec<u8>> {
    let mut seen = Vec::new();
    tree.scan(
        Bound::Unbounded,
        Bound::Unbounded,
        reverse,
        usize::MAX,
        |k, _| {
            seen.push(k.to_vec());
            true
        },
    )
    .unwrap();
    seen
}

/// Two threads that scan `tree` forward and backward, over and over until `done` is set (and
/// at least twice each): every scan must be in order and hold every key of `stable`, and each
/// scan also looks up every `stride`-th of them, expecting `value_of(key)`. Each returns how
/// many scans it made.
pub fn spawn_scanners<K: KeyOrder + Send + Sync + 'static>(
    tree: &Arc<BTree<K>>,
    stable: &BTreeSet<Vec<u8>>,
    done: &Arc<AtomicBool>,
    stride: usize,
    value_of: fn(&[u8]) -> u64,
) -> Vec<JoinHandle<usize>> {
    [false, true]
        .into_iter()
        .map(|reverse| {
            let (tree, stable, done) = (tree.clone(), stable.clone(), done.clone());
            std::thread::spawn(move || {
                let mut scans = 0;
                while !done.load(Ordering::Relaxed) || scans < 2 {
                    // A reader of the tree's pages for one scan and its lookups (nothing
                    // unless the pool reuses unlinked leaves).
                    let epoch = tree.pool().epoch_enter();
                    let seen = keys_in_order(&tree, reverse);
                    let ordered = |p: &[Vec<u8>]| match reverse {
                        true => p[0] > p[1],
                        false => p[0] < p[1],
                    };
                    assert!(
                        seen.windows(2).all(ordered),
                        "scan out of order (reverse={reverse})"
                    );
                    let seen: BTreeSet<Vec<u8>> = seen.into_iter().collect();
                    assert!(
                        stable.is_subset(&seen),
                        "scan (reverse={reverse}) missed a stable key"
                    );
                    for k in stable.iter().skip(scans % stride).step_by(stride) {
                        assert_eq!(
                            tree.get(k).unwrap(),
                            Some(value_of(k)),
                            "lookup missed a stable key"
                        );
                    }
                    if let Some(token) = epoch {
                        tree.pool().epoch_exit(token);
                    }
                    scans += 1;
                }
                scans
            })
        })
        .collect()
}

/// Joins `threads` once all have finished, failing the test if any is still running at
/// `watchdog`: latches have no deadlock detection, so a cycle would otherwise hang the test
/// (and CI) for good.
pub fn join_before<T>(threads: Vec<JoinHandle<T>>, watchdog: Instant, what: &str) -> Vec<T> {
    while !threads.iter().all(|t| t.is_finished()) {
        assert!(
            Instant::now() < watchdog,
            "{what} still running at the watchdog's deadline: deadlocked"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}
