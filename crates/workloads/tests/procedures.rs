//! The stored-procedure form of every workload: a terminal's input sent as arguments and run
//! by `Procedures::call` does what the terminal's own `run` does, and arguments from the
//! network that are wrong in number or kind are refused with an error, never a panic.

mod common;

use std::sync::Arc;

use engine::db::Database;
use engine::{TxError, Value};
use proptest::prelude::*;
use workloads::tpcb::{Tpcb, TpcbConfig};
use workloads::tpcc::{Tpcc, TpccConfig};
use workloads::voter::{Voter, VoterConfig};
use workloads::ycsb::{CoreWorkload, Ycsb, YcsbConfig};
use workloads::{Distribution, Mix, Receipt, Workload};

fn all() -> Vec<Arc<dyn Workload>> {
    vec![
        Arc::new(
            Tpcc::new(TpccConfig {
                items: 1000,
                customers_per_district: 100,
                load_threads: 1,
                ..TpccConfig::new(1, Mix::Full)
            })
            .unwrap(),
        ),
        Arc::new(
            Tpcb::new(TpcbConfig {
                accounts_per_branch: 1000,
                ..TpcbConfig::new(2)
            })
            .unwrap(),
        ),
        Arc::new(
            Voter::new(VoterConfig {
                voters: 200,
                ..VoterConfig::new(1)
            })
            .unwrap(),
        ),
        Arc::new(
            Ycsb::new(YcsbConfig {
                record_count: 1000,
                // D: reads and 5% inserts, whose receipts name their keys.
                workload: CoreWorkload::from_letter('D').unwrap(),
                distribution: Distribution::standard_for('D'),
                field_size: 10,
                field_count: 3,
            })
            .unwrap(),
        ),
    ]
}

/// Runs `txns` transactions of one terminal (seed 7), each either embedded (`run`) or as a
/// stored procedure (`args`, `call`, `returned`); returns the receipts in order and what the
/// rolled-back ones were.
fn drive(
    w: &dyn Workload,
    db: &Arc<Database>,
    txns: usize,
    as_procedure: bool,
) -> (Vec<Receipt>, Vec<usize>) {
    let procedures = w.procedures(db).unwrap();
    let mut terminal = w.terminal(db, 0, 1, 7).unwrap();
    let mut receipts = Vec::new();
    let mut rolled_back = Vec::new();
    for i in 0..txns {
        let kind = terminal.next();
        let mut txn = db.begin().unwrap();
        let result = if as_procedure {
            let mut args = Vec::new();
            terminal.args(&mut args).unwrap();
            let mut out = Vec::new();
            procedures
                .call(&mut txn, kind, &args, &mut out)
                .map(|()| out)
        } else {
            terminal.run(&mut txn).map(|()| Vec::new())
        };
        match result {
            Ok(out) => {
                txn.commit().unwrap();
                if as_procedure {
                    terminal.returned(&out).unwrap();
                }
                terminal.receipts(&mut receipts);
            }
            Err(TxError::UserAbort(_)) => {
                txn.abort().unwrap();
                rolled_back.push(i);
            }
            Err(e) => panic!("{} {}: {e}", w.name(), w.txn_names()[kind]),
        }
    }
    (receipts, rolled_back)
}

#[test]
fn a_stored_procedure_does_what_the_terminal_does() {
    // Each run has a workload of its own: YCSB's terminals share the next insert key.
    for (w, twin) in all().into_iter().zip(all()) {
        let embedded = common::loaded(w.as_ref(), 1);
        let called = common::loaded(twin.as_ref(), 1);
        let (r1, rb1) = drive(w.as_ref(), &embedded, 300, false);
        let (r2, rb2) = drive(twin.as_ref(), &called, 300, true);
        assert!(!r1.is_empty(), "{}: no receipts to compare", w.name());
        assert_eq!(r1, r2, "{}: receipts differ", w.name());
        assert_eq!(rb1, rb2, "{}: rollbacks differ", w.name());
        common::assert_all_hold(&w.check(&called).unwrap());
    }
}

#[test]
fn an_unknown_procedure_number_is_an_error() {
    for w in all() {
        let db = common::loaded(w.as_ref(), 1);
        let procedures = w.procedures(&db).unwrap();
        let mut txn = db.begin().unwrap();
        let err = procedures
            .call(&mut txn, w.txn_names().len(), &[], &mut Vec::new())
            .unwrap_err();
        assert!(matches!(err, TxError::Invalid(_)), "{}: {err}", w.name());
    }
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        prop_oneof![
            Just(0i64),
            Just(1),
            Just(2),
            Just(5),
            Just(15),
            Just(-1),
            Just(i64::MAX),
            Just(i64::MIN),
            any::<i64>()
        ]
        .prop_map(Value::Int),
        prop_oneof![Just(0.5f64), Just(f64::NAN), Just(-1e300)].prop_map(Value::Float),
        "[a-zA-Z]{0,20}".prop_map(Value::Str),
    ]
}

/// A workload and its loaded database.
type Loaded = (Arc<dyn Workload>, Arc<Database>);

/// Every workload, loaded once for all the cases of the property below.
fn loaded_once() -> &'static [Loaded] {
    static LOADED: std::sync::OnceLock<Vec<Loaded>> = std::sync::OnceLock::new();
    LOADED.get_or_init(|| {
        all()
            .into_iter()
            .map(|w| {
                let db = common::loaded(w.as_ref(), 1);
                (w, db)
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Arguments of any number and kind, as a client may send: every procedure answers with
    /// a result or an error (what it then did to the data is not checked: arguments that
    /// happen to be valid but unrelated, a teller of another branch, are a real call).
    #[test]
    fn procedures_refuse_bad_arguments_without_panicking(
        calls in prop::collection::vec((0usize..5, prop::collection::vec(value(), 0..24)), 1..12)
    ) {
        for (w, db) in loaded_once() {
            let procedures = w.procedures(db).unwrap();
            let types = w.txn_names().len();
            for (kind, args) in &calls {
                let mut txn = db.begin().unwrap();
                match procedures.call(&mut txn, kind % types, args, &mut Vec::new()) {
                    Ok(()) => txn.commit().unwrap(),
                    Err(_) => txn.abort().unwrap(),
                }
            }
        }
    }
}
