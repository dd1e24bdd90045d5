//! The paper's 50/50 mix on the kernel: time per batch of 1,000 transactions.
//!
//! The database is populated once (one warehouse, reduced to 10,000 items and 300 customers
//! per district so that setup is quick); each iteration runs a fresh batch of inputs on a
//! clone, and checks that every transaction committed.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kernel::{generate_inputs_for, Kernel, Scale};

const BATCH: usize = 1_000;

fn mix(c: &mut Criterion) {
    let scale = Scale {
        warehouses: 1,
        items: 10_000,
        customers_per_district: 300,
    };
    let base = Kernel::populate(scale, 1).expect("populate");
    let inputs = generate_inputs_for(2, BATCH, scale);
    let mut group = c.benchmark_group("kernel");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("paper_mix_1000", |b| {
        b.iter_batched_ref(
            || {
                let mut k = base.clone();
                k.reserve_for(&inputs);
                k
            },
            |k| assert_eq!(k.run_mix(&inputs), BATCH as u64),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, mix);
criterion_main!(benches);
