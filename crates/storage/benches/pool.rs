//! Buffer-pool and heap micro-benchmarks: the hit path of a fix, heap insert and heap read.

use std::sync::Arc;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use storage::buffer::{BufferPool, PoolConfig};
use storage::file::MemPageStore;
use storage::heap::{HeapFile, RecordId};
use storage::page::PageKind;
use storage::PageSize;

fn pool(frames: usize, latching: bool) -> Arc<BufferPool> {
    Arc::new(
        BufferPool::new(
            Box::new(MemPageStore::new(PageSize::Kib8)),
            PoolConfig {
                page_size: PageSize::Kib8,
                frames,
                latching,
            },
            None,
        )
        .unwrap(),
    )
}

fn fix_hit(c: &mut Criterion) {
    for latching in [true, false] {
        let pool = pool(64, latching);
        let id = pool.allocate_page(PageKind::Heap).unwrap().page_id();
        let name = format!("fix_shared_hit/latching={latching}");
        c.bench_function(&name, |b| {
            b.iter(|| {
                let g = pool.fix_shared(black_box(id)).unwrap();
                // Check the answer: the fixed page is the one asked for.
                assert_eq!(g[6], PageKind::Heap as u8);
                black_box(&g[100]);
            })
        });
    }
}

fn heap_ops(c: &mut Criterion) {
    let heap = HeapFile::create(pool(4096, true)).unwrap();
    let record = [42u8; 100];
    c.bench_function("heap_insert_100b", |b| {
        b.iter(|| black_box(heap.insert(black_box(&record)).unwrap()))
    });
    let rids: Vec<RecordId> = (0..10_000).map(|_| heap.insert(&record).unwrap()).collect();
    let mut i = 0;
    let mut out = Vec::with_capacity(128);
    c.bench_function("heap_read_100b", |b| {
        b.iter(|| {
            i = (i + 7919) % rids.len();
            assert!(heap.read(rids[i], &mut out).unwrap());
            assert_eq!(out.len(), 100);
        })
    });
}

criterion_group!(benches, fix_hit, heap_ops);
criterion_main!(benches);
