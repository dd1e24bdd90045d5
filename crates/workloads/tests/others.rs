//! TPC-B, YCSB and Voter against the engine: concurrent runs ending in check(), and each
//! check shown to catch a broken database.

mod common;

use std::sync::Arc;

use engine::{Fetch, Value};
use workloads::tpcb::{Tpcb, TpcbConfig, TpcbTables};
use workloads::util::with_txn;
use workloads::voter::{vote, VoteInput, VoteOutcome, Voter, VoterConfig, VoterTables};
use workloads::ycsb::{CoreWorkload, Ycsb, YcsbConfig};
use workloads::{by_name, Distribution, Workload, WorkloadOptions};

#[test]
fn by_name_knows_every_workload_and_names_the_choices() {
    let options = WorkloadOptions::default();
    for name in ["tpcc", "tpcb", "ycsb", "voter"] {
        let w = by_name(name, &options).unwrap();
        assert_eq!(w.name(), name);
        assert_eq!(w.interactions().len(), w.txn_names().len());
        for (i, names) in w.interactions().iter().zip(w.txn_names()) {
            assert_eq!(i.name, *names);
            assert!(i.round_trips >= 1);
        }
    }
    let err = by_name("tpce", &options).err().unwrap();
    assert!(err.contains("tpcc, tpcb, ycsb, voter"), "{err}");
    let err = by_name(
        "ycsb",
        &WorkloadOptions {
            ycsb_workload: 'Z',
            ..options
        },
    )
    .err()
    .unwrap();
    assert!(err.contains("A, B, C, D, E, F"), "{err}");
}

#[test]
fn tpcb_conserves_money_under_concurrency() {
    let w: Arc<dyn Workload> = Arc::new(
        Tpcb::new(TpcbConfig {
            accounts_per_branch: 1000,
            ..TpcbConfig::new(3)
        })
        .unwrap(),
    );
    let db = common::loaded(w.as_ref(), 4);
    common::assert_all_hold(&w.check(&db).unwrap());
    let out = common::run(&db, &w, 4, 300);
    assert_eq!(out.committed[0], 1200, "{out:?}");
    common::assert_all_hold(&w.check(&db).unwrap());

    // Money appearing in one teller breaks both sums.
    let t = TpcbTables::resolve(&db).unwrap();
    with_txn(&db, |tx| {
        let row = tx
            .get(&t.teller, &[Value::Int(4)], Fetch::Cols(&[2]), true)?
            .unwrap();
        let balance = row[0].as_int().unwrap();
        tx.update(&t.teller, &[Value::Int(4)], &[(2, Value::Int(balance + 1))])
            .map(drop)
    })
    .unwrap();
    let conditions = w.check(&db).unwrap();
    assert!(
        !conditions[0].holds() && !conditions[1].holds(),
        "{conditions:?}"
    );
}

#[test]
fn every_ycsb_core_workload_runs_and_checks() {
    for letter in ['A', 'B', 'C', 'D', 'E', 'F'] {
        let w: Arc<dyn Workload> = Arc::new(
            Ycsb::new(YcsbConfig {
                record_count: 2000,
                workload: CoreWorkload::from_letter(letter).unwrap(),
                distribution: Distribution::standard_for(letter),
                field_size: 20,
                field_count: 4,
            })
            .unwrap(),
        );
        let db = common::loaded(w.as_ref(), 2);
        let out = common::run(&db, &w, 2, 200);
        assert_eq!(out.committed.iter().sum::<u64>(), 400, "{letter}: {out:?}");
        common::assert_all_hold(&w.check(&db).unwrap());
        if letter == 'D' || letter == 'E' {
            assert!(out.committed[2] > 0, "{letter} inserted nothing: {out:?}");
        }
    }
}

/// A check by another process than the one that inserted (`glass check` after a run or a
/// crash) knows nothing of the keys handed out: the inserted records are not "unexpected".
/// (They were, and every check of a YCSB D or E database on disk failed.)
#[test]
fn ycsb_inserted_records_check_in_a_workload_that_did_not_insert_them() {
    let config = || YcsbConfig {
        record_count: 500,
        workload: CoreWorkload::from_letter('D').unwrap(),
        distribution: Distribution::standard_for('D'),
        field_size: 20,
        field_count: 4,
    };
    let w: Arc<dyn Workload> = Arc::new(Ycsb::new(config()).unwrap());
    let db = common::loaded(w.as_ref(), 2);
    let out = common::run(&db, &w, 2, 300);
    assert!(out.committed[2] > 0, "nothing inserted: {out:?}");
    common::assert_all_hold(&w.check(&db).unwrap());
    let fresh = Ycsb::new(config()).unwrap();
    common::assert_all_hold(&fresh.check(&db).unwrap());
    // It still catches a record below the loaded ones gone missing.
    let table = db.table(workloads::ycsb::USERTABLE).unwrap();
    with_txn(&db, |tx| tx.delete(&table, &[Value::Int(3)]).map(drop)).unwrap();
    assert!(!fresh.check(&db).unwrap()[0].holds());
}

#[test]
fn ycsb_check_catches_a_lost_record_and_a_short_field() {
    let w = Ycsb::new(YcsbConfig {
        record_count: 100,
        workload: CoreWorkload::from_letter('A').unwrap(),
        distribution: Distribution::Uniform,
        field_size: 10,
        field_count: 2,
    })
    .unwrap();
    let db = common::loaded(&w, 1);
    let table = db.table(workloads::ycsb::USERTABLE).unwrap();
    with_txn(&db, |tx| {
        tx.delete(&table, &[Value::Int(5)])?;
        tx.update(&table, &[Value::Int(6)], &[(1, Value::Str("short".into()))])
            .map(drop)
    })
    .unwrap();
    let conditions = w.check(&db).unwrap();
    assert!(conditions.iter().all(|c| !c.holds()), "{conditions:?}");
}

#[test]
fn voter_enforces_the_limit_and_keeps_totals() {
    let config = VoterConfig {
        voters: 50,
        ..VoterConfig::new(1)
    };
    let w: Arc<dyn Workload> = Arc::new(Voter::new(config).unwrap());
    let db = common::loaded(w.as_ref(), 4);
    let t = VoterTables::resolve(&db).unwrap();
    let call = |phone: i64, contestant: i64| VoteInput {
        phone_number: phone,
        contestant_number: contestant,
        max_votes: 2,
        created: 0,
    };
    let phone = 617 * 10_000_000 + 1;
    let outcomes: Vec<VoteOutcome> = [(phone, 1), (phone, 7), (phone, 2), (phone, 3)]
        .iter()
        .map(|(p, c)| with_txn(&db, |tx| vote(tx, &t, &call(*p, *c))).unwrap())
        .collect();
    assert_eq!(
        outcomes,
        [
            VoteOutcome::Accepted,
            VoteOutcome::InvalidContestant,
            VoteOutcome::Accepted,
            VoteOutcome::OverLimit
        ]
    );
    // The contestants and area codes are read-only once loaded (their reads lock no row and
    // latch no page): a write to either is refused, naming why.
    for (table, key, value) in [(&t.contestants, 1, "Y"), (&t.area_code_state, 617, "ZZ")] {
        let change = [(1, Value::Str(value.into()))];
        let refused = with_txn(&db, |tx| tx.update(table, &[Value::Int(key)], &change));
        assert!(
            matches!(&refused, Err(engine::TxError::Invalid(m)) if m.contains("read-only")),
            "{refused:?}"
        );
    }
    // 50 voters with 2 votes each cannot cast more than 100 of the 1200 calls.
    let out = common::run(&db, &w, 4, 300);
    assert_eq!(out.committed[0], 1200);
    common::assert_all_hold(&w.check(&db).unwrap());
    let votes = with_txn(&db, |tx| workloads::util::scan_all(tx, &t.votes, &[0])).unwrap();
    assert!(
        votes.len() <= 102 && votes.len() > 50,
        "{} votes",
        votes.len()
    );

    // A vote slipped in past the procedure breaks the limit and the totals.
    with_txn(&db, |tx| {
        tx.insert(
            &t.votes,
            &[
                Value::Int(phone),
                Value::Int(3),
                Value::Str("MA".into()),
                Value::Int(1),
                Value::Int(0),
            ],
        )
    })
    .unwrap();
    let conditions = w.check(&db).unwrap();
    assert!(
        !conditions[0].holds() && !conditions[1].holds(),
        "{conditions:?}"
    );
}

#[test]
fn tpcb_check_catches_a_lost_account_and_a_stray_history_row() {
    let w = Tpcb::new(TpcbConfig {
        accounts_per_branch: 1000,
        ..TpcbConfig::new(2)
    })
    .unwrap();
    let db = common::loaded(&w, 1);
    let t = TpcbTables::resolve(&db).unwrap();
    // An account with no money gone: the sums still agree, the count does not.
    with_txn(&db, |tx| {
        let row = tx.get(&t.account, &[Value::Int(7)], Fetch::Cols(&[2]), true)?;
        assert_eq!(
            row,
            Some(vec![Value::Int(0)]),
            "a loaded account holds nothing"
        );
        assert!(tx.delete(&t.account, &[Value::Int(7)])?);
        Ok(())
    })
    .unwrap();
    let holds = |db| -> Vec<bool> { w.check(db).unwrap().iter().map(|c| c.holds()).collect() };
    assert_eq!(holds(&db), [true, true, false]);
    // A history row no account, teller or branch paid for breaks the four-way sum only.
    with_txn(&db, |tx| {
        tx.insert(
            &t.history,
            &[
                Value::Int(1),
                Value::Int(1_000_000),
                Value::Int(1),
                Value::Int(1),
                Value::Int(5),
                Value::Int(0),
                Value::Str("stray".into()),
            ],
        )
    })
    .unwrap();
    assert_eq!(holds(&db), [false, true, false]);
}

#[test]
fn voter_check_catches_a_vote_from_the_wrong_state() {
    let w = Voter::new(VoterConfig {
        voters: 50,
        ..VoterConfig::new(1)
    })
    .unwrap();
    let db = common::loaded(&w, 1);
    let t = VoterTables::resolve(&db).unwrap();
    let phone = 617 * 10_000_000 + 1;
    let input = VoteInput {
        phone_number: phone,
        contestant_number: 2,
        max_votes: 2,
        created: 0,
    };
    let outcome = with_txn(&db, |tx| vote(tx, &t, &input)).unwrap();
    assert_eq!(outcome, VoteOutcome::Accepted);
    common::assert_all_hold(&w.check(&db).unwrap());
    // Area code 617 is Massachusetts; the counts and tallies stay as they were.
    with_txn(&db, |tx| {
        let rows = tx.scan(
            &t.votes,
            engine::KeyRange::prefix(&[Value::Int(phone)]),
            None,
            false,
            Fetch::Cols(&[1, 2]),
            true,
        )?;
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][1], Value::Str("MA".into()));
        let key = [Value::Int(phone), rows[0][0].clone()];
        tx.update(&t.votes, &key, &[(2, Value::Str("TX".into()))])
            .map(drop)
    })
    .unwrap();
    let conditions = w.check(&db).unwrap();
    let holds: Vec<bool> = conditions.iter().map(|c| c.holds()).collect();
    assert_eq!(holds, [true, true, false], "{conditions:?}");
    assert!(
        conditions[2]
            .violation
            .as_deref()
            .unwrap()
            .contains("state TX"),
        "{conditions:?}"
    );
}
