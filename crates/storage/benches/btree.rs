//! B+-tree lookups and inserts on both key paths: the generic schema-interpreting comparator
//! against the hand-coded `u64` one (the ladder's `btree-keys` rung), on a tree of 100k keys in
//! a pool that holds all of it.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use storage::btree::{encode_key, BTree, IntKeyOrder, KeyField, KeyOrder, KeyPart, SchemaKeyOrder};
use storage::buffer::{BufferPool, PoolConfig};
use storage::file::MemPageStore;
use storage::PageSize;

const KEYS: u64 = 100_000;

fn pool() -> Arc<BufferPool> {
    let config = PoolConfig {
        page_size: PageSize::Kib8,
        frames: 4096,
        latching: true,
    };
    Arc::new(BufferPool::new(Box::new(MemPageStore::new(PageSize::Kib8)), config, None).unwrap())
}

/// A TPC-C-like composite key (warehouse, district, id) on the generic path.
fn schema_key(i: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    let fields = [
        KeyField::Int((i / 30_000) as i64),
        KeyField::Int((i / 3_000 % 10) as i64),
        KeyField::Int((i % 3_000) as i64),
    ];
    encode_key(&fields, &mut out).unwrap();
    out
}

/// The same composite packed into one u64 for the hand-coded path.
fn int_key(i: u64) -> Vec<u8> {
    let packed =
        storage::btree::pack_int_key(&[i / 30_000, i / 3_000 % 10, i % 3_000], &[16, 8, 40]);
    packed.unwrap().to_be_bytes().to_vec()
}

fn build<K: KeyOrder>(order: K, key: fn(u64) -> Vec<u8>) -> BTree<K> {
    let tree = BTree::create(pool(), order, true).unwrap();
    for i in 0..KEYS {
        tree.insert(&key(i.wrapping_mul(48_271) % KEYS), i).unwrap();
    }
    tree
}

fn bench_path<K: KeyOrder>(c: &mut Criterion, name: &str, order: K, key: fn(u64) -> Vec<u8>) {
    let tree = build(order, key);
    let probes: Vec<Vec<u8>> = (0..1024u64).map(|i| key(i * 97 % KEYS)).collect();
    let mut n = 0usize;
    c.bench_function(&format!("btree/lookup/{name}"), |b| {
        b.iter(|| {
            n = (n + 1) % probes.len();
            let v = tree.get(black_box(&probes[n])).unwrap();
            assert!(v.is_some());
            v
        })
    });
    let mut next = KEYS;
    c.bench_function(&format!("btree/insert/{name}"), |b| {
        b.iter_batched(
            || {
                next += 1;
                key(next)
            },
            |k| tree.insert(&k, 0).unwrap(),
            BatchSize::SmallInput,
        )
    });
}

fn benches(c: &mut Criterion) {
    let schema = SchemaKeyOrder::new(vec![KeyPart::Int, KeyPart::Int, KeyPart::Int]);
    bench_path(c, "schema", schema, schema_key);
    bench_path(c, "int", IntKeyOrder, int_key);
}

criterion_group!(btree, benches);
criterion_main!(btree);
