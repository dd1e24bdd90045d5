//! The shared-write counter on the paper mix's path (`storage::shared`, `glass profile`).
//!
//! Each transaction type has a budget: the places where it may latch or read-modify-write
//! memory that every thread writes, and how often per transaction. A new global point on the
//! path — a counter every thread increments, a latch every transaction takes — that is
//! counted at a place outside the budget, or that pushes a place over it, fails the test;
//! the budget is raised only with a measurement that says why (docs/performance.md, "Where
//! every thread meets").

use bench::table4::TypeProfile;
use storage::shared::Place;

mod common;

fn profile_paper_mix(set_up_for: usize) -> Vec<TypeProfile> {
    common::profile_paper_mix(set_up_for, 300)
}

fn per_txn(t: &TypeProfile, place: Place) -> f64 {
    t.sum.shared[place as usize] as f64 / t.txns as f64
}

/// (place, most per transaction) for each type; every other place must stay at zero.
fn budget(type_name: &str) -> &'static [(Place, f64)] {
    match type_name {
        // Page-redo records (each carrying its undo record) take their log-buffer bytes
        // from the thread's run, one reservation on the tail per 4 KiB, and the commit one
        // more: measured 2.6 (6.4 with 1 KiB runs, 37.1 with one reservation per record);
        // B+-tree descents read inner nodes optimistically and latch them
        // only when a read fails validation or a split needs them (measured 0.1, was 37.3
        // with every descent latching); a heap page claimed now and then by an insert.
        // Its items' heap pages are read without latching (`read-only-page` stays at zero;
        // measured 10.0 when every item read latched its page).
        "new_order" => &[
            (Place::LogAppend, 4.0),
            (Place::BtreeInner, 2.0),
            (Place::HeapFreeSpace, 2.0),
            (Place::HeapTail, 1.0),
            (Place::PageTable, 2.0),
        ],
        "payment" => &[
            // Measured 1.2: the commit, and now and then a run for its four records (1.8
            // with 1 KiB runs, 6.0 with one reservation per record).
            (Place::LogAppend, 2.0),
            (Place::BtreeInner, 1.0),
            (Place::HeapFreeSpace, 1.0),
            (Place::HeapTail, 1.0),
            (Place::PageTable, 1.0),
        ],
        other => panic!("no budget for {other}"),
    }
}

#[test]
fn the_paper_mix_meets_other_threads_only_where_its_budget_says() {
    let types = profile_paper_mix(16);
    assert_eq!(types.len(), 2, "new_order and payment both ran");
    for t in &types {
        let allowed = budget(&t.name);
        for place in Place::ALL {
            let seen = per_txn(t, place);
            let most = allowed
                .iter()
                .find(|(p, _)| *p == place)
                .map_or(0.0, |(_, most)| *most);
            assert!(
                seen <= most,
                "{}: {seen:.1} shared writes per transaction at {} (budget {most})",
                t.name,
                place.name()
            );
        }
    }
    // The counter counts: every New-Order reserves its commit, and a run more often than not.
    let new_order = &types[0];
    assert!(per_txn(new_order, Place::LogAppend) >= 1.5);
}

/// With the lock manager set up for one thread (no partitions), every transaction's intention
/// locks go to the one lock head per table, which the counter must see; set up for sixteen,
/// they go to the thread's own partition, which it must not.
#[test]
fn unpartitioned_intention_locks_are_counted_and_partitions_remove_them() {
    let one = profile_paper_mix(1);
    let sixteen = profile_paper_mix(16);
    for (a, b) in one.iter().zip(&sixteen) {
        assert!(
            per_txn(a, Place::LockCoarse) >= 2.0,
            "{}: {:.1} coarse-lock requests counted with one lock per table",
            a.name,
            per_txn(a, Place::LockCoarse)
        );
        assert_eq!(per_txn(b, Place::LockCoarse), 0.0, "{}", b.name);
    }
}

/// Where the counter above names places by construction, `--handoffs` counts what two threads
/// actually passed each other: latched fixes of a page whose last latched fix was the other
/// thread's. With one warehouse each, the paper mix's threads share almost no page they latch
/// (TPC-C's items, read by both, are read without latching; latched, their heap pages were
/// handed off 2.2-2.6 times a transaction); on one warehouse they share most.
#[test]
fn two_threads_on_warehouses_of_their_own_hand_off_almost_no_page_latch() {
    let run = |warehouses: u64| {
        let mut config = bench::BenchConfig::new("tpcc");
        config.options.scale = warehouses;
        config.options.mix = workloads::Mix::Paper;
        config.threads = 2;
        config.stop = bench::Stop::Txns(6000);
        config.warmup = std::time::Duration::from_millis(200);
        config.quiet = true;
        config.handoffs = true;
        bench::run_bench(&config)
            .unwrap()
            .handoffs
            .expect("counted")
    };
    let own = run(2);
    assert!(
        own.heap as f64 / own.txns as f64 <= 0.2 && own.per_txn <= 0.3,
        "one warehouse each: {own:?}"
    );
    let shared = run(1);
    assert!(shared.txns >= 6000, "{shared:?}");
    assert!(
        shared.btree_leaf + shared.heap > own.btree_leaf + own.heap,
        "{shared:?} against {own:?}"
    );
}
