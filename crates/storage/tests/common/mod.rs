//! Helpers shared by the storage model tests.
// Each test binary uses some of them.
#![allow(dead_code)]

use std::ops::Bound;
use std::sync::Arc;

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
