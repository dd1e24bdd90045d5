//! A whole B+-tree of up to six pages read through the buffer pool, as an index of a database
//! is: lookups, scans both ways, the invariant check, then an insert (which may split), and
//! deletes of the first entries a scan finds (which may empty a leaf and take it out of the
//! tree), followed by scans both ways again. Input:
//! the pages, 8 KiB each, as pages 1, 2, ... of the file (the tree's root is page 1); each
//! gets a valid header magic, id and checksum, so that mutations reach the tree's own reads.
//!
//! This is where links between nodes are followed, so where a corrupt child or sibling link
//! could send a descent or a scan round forever: each must end in a corruption error.
#![no_main]

use std::ops::Bound;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use storage::btree::BytewiseKeyOrder;
use storage::file::{MemPageStore, PageStore};
use storage::page::{PageSize, OFFSET_MAGIC, OFFSET_PAGE_ID, PAGE_MAGIC};
use storage::{BTree, BufferPool, PageId, PoolConfig};

const PAGE_SIZE: usize = 8192;
const MAX_PAGES: usize = 6;

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let store = MemPageStore::new(PageSize::Kib8);
    store.write_page(PageId(0), &[0; PAGE_SIZE]).unwrap();
    for (i, chunk) in data.chunks(PAGE_SIZE).take(MAX_PAGES).enumerate() {
        let id = i as u64 + 1;
        let mut page = glass_fuzz::page_image(chunk, PAGE_SIZE);
        page[OFFSET_MAGIC..OFFSET_MAGIC + 2].copy_from_slice(&PAGE_MAGIC.to_le_bytes());
        page[OFFSET_PAGE_ID..OFFSET_PAGE_ID + 8].copy_from_slice(&id.to_le_bytes());
        glass_fuzz::fix_page_checksum(&mut page);
        store.write_page(PageId(id), &page).unwrap();
    }
    let config = PoolConfig {
        page_size: PageSize::Kib8,
        frames: 16,
        latching: true,
    };
    let pool = Arc::new(BufferPool::new(Box::new(store), config, None).unwrap());
    let tree = BTree::open(pool, PageId(1), BytewiseKeyOrder, true);
    let probes: [&[u8]; 4] = [b"", b"key-00100", b"key-00300", &[0xFF; 12]];
    for probe in probes {
        let _ = tree.get(probe);
        let _ = tree.scan(
            Bound::Included(probe),
            Bound::Unbounded,
            false,
            10_000,
            |_, _| true,
        );
        let _ = tree.scan(
            Bound::Unbounded,
            Bound::Excluded(probe),
            true,
            10_000,
            |_, _| true,
        );
    }
    let _ = tree.height();
    let _ = tree.check_invariants();
    let _ = tree.insert(b"key-00150-fuzz", 1);
    let mut first = Vec::new();
    let _ = tree.scan(Bound::Unbounded, Bound::Unbounded, false, 64, |k, v| {
        first.push((k.to_vec(), v));
        true
    });
    for (key, value) in first {
        if tree.delete(&key, value).is_err() {
            break;
        }
    }
    let _ = tree.scan(Bound::Unbounded, Bound::Unbounded, false, 10_000, |_, _| {
        true
    });
    let _ = tree.scan(Bound::Unbounded, Bound::Unbounded, true, 10_000, |_, _| {
        true
    });
    let _ = tree.check_invariants();
});
