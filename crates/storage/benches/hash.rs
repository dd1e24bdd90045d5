//! Hash index lookups (the 2008 paper's §5.5 question: do hash tables beat B-trees once
//! everything else is stripped?), on 100k keys, latched and unlatched, u64 and byte keys.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use storage::hash::HashIndex;

const KEYS: u64 = 100_000;

fn benches(c: &mut Criterion) {
    for latching in [true, false] {
        let index = HashIndex::new_u64(KEYS as usize, latching);
        for k in 0..KEYS {
            index.insert_u64(k * 7, k).unwrap();
        }
        let mut n = 0u64;
        c.bench_function(&format!("hash/lookup_u64/latching={latching}"), |b| {
            b.iter(|| {
                n = (n + 7919) % KEYS;
                let v = index.get_u64(black_box(n * 7));
                assert_eq!(v, Some(n));
                v
            })
        });
    }
    let index = HashIndex::new(KEYS as usize, true);
    for k in 0..KEYS {
        index.insert(&(k * 7).to_be_bytes(), k).unwrap();
    }
    let mut n = 0u64;
    c.bench_function("hash/lookup_bytes/latching=true", |b| {
        b.iter(|| {
            n = (n + 7919) % KEYS;
            let v = index.get(black_box(&(n * 7).to_be_bytes()));
            assert_eq!(v, Some(n));
            v
        })
    });
}

criterion_group!(hash, benches);
criterion_main!(hash);
