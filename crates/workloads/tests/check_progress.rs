//! A consistency check's progress: every table the check reads is reported, in one stretch,
//! from its first page up to exactly its rows, and reporting changes nothing the check finds.

mod common;

use std::cell::RefCell;
use std::sync::Arc;

use engine::db::Database;
use workloads::tpcb::{Tpcb, TpcbConfig, TpcbTables};
use workloads::tpcc::{Tables, Tpcc, TpccConfig};
use workloads::util::{scan_all, with_txn};
use workloads::voter::{Voter, VoterConfig, VoterTables};
use workloads::ycsb::{CoreWorkload, Ycsb, YcsbConfig, USERTABLE};
use workloads::{Distribution, Mix, Workload};

/// Loads `w`, runs a few hundred of its transactions on two terminals, checks with progress,
/// and asserts what the reports must say about `tables` (the tables the check reads, in the
/// order it reads them).
fn assert_reports_every_row(w: Arc<dyn Workload>, tables: impl Fn(&Database) -> Vec<String>) {
    let db = common::loaded(w.as_ref(), 2);
    common::run(&db, &w, 2, 200);
    let reports = RefCell::new(Vec::<(String, u64)>::new());
    let conditions = w
        .check_with_progress(&db, &|table, rows| {
            reports.borrow_mut().push((table.to_string(), rows))
        })
        .unwrap();
    common::assert_all_hold(&conditions);
    assert_eq!(conditions, w.check(&db).unwrap(), "{}", w.name());

    // One stretch per table, in the order the check reads them.
    let reports = reports.into_inner();
    let mut stretches: Vec<(String, Vec<u64>)> = Vec::new();
    for (table, rows) in reports {
        match stretches.last_mut() {
            Some((last, counts)) if *last == table => counts.push(rows),
            _ => stretches.push((table, vec![rows])),
        }
    }
    let read: Vec<&str> = stretches.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(read, tables(&db), "{}: tables reported, in order", w.name());

    let mut paged = false;
    for (table, counts) in &stretches {
        assert!(
            counts.windows(2).all(|c| c[0] <= c[1]),
            "{}: {table}'s count went back: {counts:?}",
            w.name()
        );
        let rows = with_txn(&db, |tx| scan_all(tx, &db.table(table)?, &[0]))
            .unwrap()
            .len() as u64;
        assert_eq!(
            counts.last().copied(),
            Some(rows),
            "{}: {table}'s last report against its rows",
            w.name()
        );
        paged |= counts.len() >= 2 && counts[0] > 0 && counts[0] < rows;
    }
    assert!(paged, "{}: no table was reported page by page", w.name());
}

fn names(tables: &[&engine::TableRef]) -> Vec<String> {
    tables.iter().map(|t| t.name.clone()).collect()
}

#[test]
fn tpcc_check_reports_every_table_it_reads() {
    let w = Tpcc::new(TpccConfig {
        items: 1000,
        customers_per_district: 100,
        load_threads: 2,
        ..TpccConfig::new(2, Mix::Full)
    })
    .unwrap();
    assert_reports_every_row(Arc::new(w), |db| {
        let t = Tables::resolve(db).unwrap();
        names(&[
            &t.warehouse,
            &t.district,
            &t.customer,
            &t.history,
            &t.order,
            &t.new_order,
            &t.order_line,
        ])
    });
}

#[test]
fn tpcb_check_reports_every_table_it_reads() {
    let w = Tpcb::new(TpcbConfig {
        accounts_per_branch: 1000,
        ..TpcbConfig::new(2)
    })
    .unwrap();
    assert_reports_every_row(Arc::new(w), |db| {
        let t = TpcbTables::resolve(db).unwrap();
        names(&[&t.account, &t.teller, &t.branch, &t.history])
    });
}

#[test]
fn ycsb_check_reports_its_table() {
    let w = Ycsb::new(YcsbConfig {
        record_count: 2000,
        workload: CoreWorkload::from_letter('D').unwrap(),
        distribution: Distribution::standard_for('D'),
        field_size: 20,
        field_count: 4,
    })
    .unwrap();
    assert_reports_every_row(Arc::new(w), |_| vec![USERTABLE.to_string()]);
}

#[test]
fn voter_check_reports_every_table_it_reads() {
    let w = Voter::new(VoterConfig::new(1)).unwrap();
    assert_reports_every_row(Arc::new(w), |db| {
        let t = VoterTables::resolve(db).unwrap();
        names(&[&t.votes, &t.votes_by_contestant_area, &t.votes_by_phone])
    });
}
