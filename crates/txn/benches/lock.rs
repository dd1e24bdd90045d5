//! Lock-manager micro-benchmarks: the uncontended paths a transaction pays on every access.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use txn::{LockConfig, LockManager, LockMode, TxnId, WHOLE_GAP};

fn lock_paths(c: &mut Criterion) {
    let m = LockManager::new(LockConfig::default());
    let mut t = m.begin(TxnId(1));
    let mut next = 0u64;

    c.bench_function("lock_record+release_all (1 record)", |b| {
        b.iter(|| {
            next += 1;
            t.reset(TxnId(next));
            m.lock_record(&mut t, 1, black_box(next), LockMode::X, WHOLE_GAP)
                .expect("uncontended lock");
            assert_eq!(t.held().len(), 3, "database, table, record");
            m.release_all(&mut t);
        })
    });

    c.bench_function("lock_record x10 + release_all", |b| {
        b.iter(|| {
            next += 1;
            t.reset(TxnId(next));
            for key in 0..10u64 {
                m.lock_record(
                    &mut t,
                    1,
                    black_box(next * 16 + key),
                    LockMode::S,
                    WHOLE_GAP,
                )
                .expect("uncontended lock");
            }
            assert_eq!(t.held().len(), 12, "database, table, ten records");
            m.release_all(&mut t);
        })
    });

    assert_eq!(m.lock_name_count(), 0);
}

criterion_group!(benches, lock_paths);
criterion_main!(benches);
