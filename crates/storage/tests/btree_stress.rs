//! Concurrent inserts, deletes, lookups and scans in both directions on one B+-tree, in a pool
//! smaller than the tree. Scans must always be ordered and always see the keys nobody deletes;
//! at the end the tree passes `check_invariants` and holds exactly the expected keys.

mod common;

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use storage::btree::{BTree, IntKeyOrder, KeyOrder, KeyPart, SchemaKeyOrder};
use storage::buffer::{BufferPool, PoolConfig};
use storage::file::MemPageStore;
use storage::PageSize;

fn pool(page_size: PageSize, frames: usize) -> Arc<BufferPool> {
    let config = PoolConfig {
        page_size,
        frames,
        latching: true,
    };
    Arc::new(BufferPool::new(Box::new(MemPageStore::new(page_size)), config, None).unwrap())
}

/// Keys `0..` spread over the key space; `make` turns an id into the tree's key bytes.
fn stress<K: KeyOrder>(tree: BTree<K>, make: fn(u64) -> Vec<u8>, per_writer: u64) {
    let tree = Arc::new(tree);
    // Stable keys (ids divisible by 10) exist throughout and are never deleted.
    let stable: BTreeSet<Vec<u8>> = (0..per_writer * 2).step_by(10).map(make).collect();
    for k in &stable {
        tree.insert(k, 1).unwrap();
    }
    let done = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(4);

    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let tree = tree.clone();
            std::thread::spawn(move || {
                let mut mine = BTreeSet::new();
                // Writer w owns ids with id % 2 == w that are not stable.
                for id in (0..per_writer * 2).filter(|id| id % 2 == w && id % 10 != 0) {
                    if Instant::now() > deadline {
                        break;
                    }
                    let key = make(id);
                    tree.insert(&key, id).unwrap();
                    mine.insert(key);
                    if id % 3 == 0 {
                        // Delete an earlier key of ours (same parity, so same owner).
                        let vid = id / 2 - (id / 2) % 2 + w;
                        let victim = make(vid);
                        if mine.remove(&victim) {
                            assert!(tree.delete(&victim, vid).unwrap(), "lost key {vid}");
                        }
                    }
                }
                mine
            })
        })
        .collect();

    let scanners = common::spawn_scanners(&tree, &stable, &done, 3, |_| 1);
    // The writers stop after four seconds; the watchdog turns a deadlock into a failure.
    let watchdog = Instant::now() + Duration::from_secs(120);
    let mut expected = stable.clone();
    for mine in common::join_before(writers, watchdog, "writers") {
        expected.extend(mine);
    }
    done.store(true, Ordering::Relaxed);
    for scans in common::join_before(scanners, watchdog, "scanners") {
        assert!(scans >= 2);
    }
    tree.check_invariants().unwrap();
    let mut got = BTreeSet::new();
    tree.scan(
        Bound::Unbounded,
        Bound::Unbounded,
        false,
        usize::MAX,
        |k, _| {
            got.insert(k.to_vec());
            true
        },
    )
    .unwrap();
    assert_eq!(got, expected);
}

fn int_key(id: u64) -> Vec<u8> {
    id.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .to_be_bytes()
        .to_vec()
}

fn schema_key(id: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let text = format!(
        "customer-{:0>40}",
        id.wrapping_mul(2_654_435_761) % 1_000_003
    );
    storage::btree::encode_key(
        &[
            storage::btree::KeyField::Int((id % 5) as i64),
            storage::btree::KeyField::Str(text.as_bytes()),
            storage::btree::KeyField::Int(id as i64),
        ],
        &mut out,
    )
    .unwrap();
    out
}

#[test]
fn int_keys_under_concurrent_writers_and_scanners() {
    let tree = BTree::create(pool(PageSize::Kib8, 48), IntKeyOrder, true).unwrap();
    stress(tree, int_key, 30_000);
}

#[test]
fn schema_keys_under_concurrent_writers_and_scanners_on_32_kib_pages() {
    let order = SchemaKeyOrder::new(vec![KeyPart::Int, KeyPart::Str, KeyPart::Int]);
    let tree = BTree::create(pool(PageSize::Kib32, 24), order, false).unwrap();
    stress(tree, schema_key, 12_000);
}
