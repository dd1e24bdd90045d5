//! The driver against the real engine, with a tiny bank workload: transfers between accounts
//! (which deadlock now and then under 2PL, so retries happen), and a transaction that writes
//! and then asks for a rollback. Money must be conserved and every count must add up.

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use bench::{run_workload, BenchConfig, Stop};
use engine::db::{Database, DbConfig};
use engine::{Fetch, KeyRange, TableSchema, Tx, TxError, TxResult, Value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use workloads::{Condition, Interactions, Terminal, Workload};

const ACCOUNTS: i64 = 8;
const OPENING_BALANCE: i64 = 100;

struct Bank;

fn account_table() -> TableSchema {
    TableSchema::new("account")
        .int("id")
        .int("balance")
        .key(&["id"])
        .int_key(&[32])
}

impl Workload for Bank {
    fn name(&self) -> &'static str {
        "bank"
    }
    fn txn_names(&self) -> &'static [&'static str] {
        &["transfer", "doomed"]
    }
    fn interactions(&self) -> Vec<Interactions> {
        Vec::new()
    }
    fn create_schema(&self, db: &Database) -> TxResult<()> {
        db.create_table(account_table()).map(|_| ())
    }
    fn load(&self, db: &Arc<Database>, progress: &(dyn Fn(u64, u64) + Sync)) -> TxResult<()> {
        let table = db.table("account")?;
        let mut txn = db.begin()?;
        for id in 0..ACCOUNTS {
            txn.insert(&table, &[Value::Int(id), Value::Int(OPENING_BALANCE)])?;
            progress(id as u64 + 1, ACCOUNTS as u64);
        }
        txn.commit()
    }
    fn terminal(
        &self,
        db: &dyn engine::Connection,
        _id: usize,
        _terminals: usize,
        seed: u64,
    ) -> TxResult<Box<dyn Terminal>> {
        Ok(Box::new(Teller {
            table: db.table("account")?,
            rng: SmallRng::seed_from_u64(seed),
            input: (0, 0, 0, 0),
        }))
    }
    /// Reads the table at once, reporting no progress (it is small).
    fn check_with_progress(
        &self,
        db: &Arc<Database>,
        _progress: &dyn Fn(&str, u64),
    ) -> TxResult<Vec<Condition>> {
        let table = db.table("account")?;
        let mut txn = db.begin()?;
        let rows = txn.scan(
            &table,
            KeyRange {
                low: Bound::Unbounded,
                high: Bound::Unbounded,
            },
            None,
            false,
            Fetch::All,
            false,
        )?;
        txn.commit()?;
        let total: i64 = rows.iter().filter_map(|r| r[1].as_int()).sum();
        Ok(vec![Condition {
            name: "bank total".into(),
            description: "money is conserved".into(),
            violation: (total != ACCOUNTS * OPENING_BALANCE || rows.len() != ACCOUNTS as usize)
                .then(|| format!("{} accounts hold {total}", rows.len())),
        }])
    }
}

struct Teller {
    table: engine::TableRef,
    rng: SmallRng,
    /// (type, from, to, amount), kept across retries.
    input: (usize, i64, i64, i64),
}

impl Terminal for Teller {
    fn next(&mut self) -> usize {
        let ty = usize::from(self.rng.gen_ratio(1, 10));
        let from = self.rng.gen_range(0..ACCOUNTS);
        let to = (from + self.rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
        self.input = (ty, from, to, self.rng.gen_range(1..=5));
        ty
    }

    fn run(&mut self, tx: &mut dyn Tx) -> TxResult<()> {
        let (ty, from, to, amount) = self.input;
        let balance = |tx: &mut dyn Tx, id: i64| -> TxResult<i64> {
            let row = tx
                .get(&self.table, &[Value::Int(id)], Fetch::All, true)?
                .ok_or_else(|| TxError::Invalid(format!("no account {id}")))?;
            Ok(row[1].as_int().unwrap_or(0))
        };
        let a = balance(tx, from)?;
        tx.update(
            &self.table,
            &[Value::Int(from)],
            &[(1, Value::Int(a - amount))],
        )?;
        if ty == 1 {
            // The write above must be undone by the rollback.
            return Err(TxError::UserAbort("doomed by design".into()));
        }
        let b = balance(tx, to)?;
        tx.update(
            &self.table,
            &[Value::Int(to)],
            &[(1, Value::Int(b + amount))],
        )?;
        Ok(())
    }
}

#[test]
fn bank_transfers_conserve_money_and_counts_add_up() {
    let mut config = BenchConfig::new("bank");
    config.threads = 4;
    config.stop = Stop::Txns(400);
    config.warmup = Duration::ZERO;
    config.quiet = true;
    config.db = DbConfig {
        threads: 4,
        ..DbConfig::default()
    };
    let result = run_workload(Arc::new(Bank), &config).unwrap();
    assert_eq!(result.consistency, "ok", "{:?}", result.conditions);
    assert_eq!(result.txn_count, 400);
    assert_eq!(result.commits + result.rollbacks, 400);
    let transfer = &result.by_type[0];
    let doomed = &result.by_type[1];
    assert_eq!(transfer.name, "transfer");
    assert_eq!(transfer.count + doomed.count, 400);
    assert_eq!(transfer.rollbacks, 0);
    assert_eq!(doomed.commits, 0);
    assert_eq!(doomed.rollbacks, doomed.count);
    assert!(doomed.count > 0 && transfer.count > doomed.count);
    assert_eq!(result.aborts, transfer.aborts + doomed.aborts);
    assert!(result.tps > 0.0 && result.p50_us > 0 && result.p50_us <= result.max_us);
    assert_eq!(result.config.preset, "full");
    assert!(result.config.load_s.is_some());
}

#[test]
fn rounds_are_measured_apart_and_added_up() {
    let mut config = BenchConfig::new("bank");
    config.threads = 2;
    config.stop = Stop::Txns(150);
    config.warmup = Duration::ZERO;
    config.quiet = true;
    config.rounds = 3;
    config.db = DbConfig {
        threads: 2,
        ..DbConfig::default()
    };
    let result = run_workload(Arc::new(Bank), &config).unwrap();
    assert_eq!(result.consistency, "ok", "{:?}", result.conditions);
    assert_eq!(result.rounds.len(), 3);
    assert!(result
        .rounds
        .iter()
        .all(|r| r.txn_count == 150 && r.tps > 0.0));
    // The table covers every round: their transactions and their time.
    assert_eq!(result.txn_count, 450);
    let time: f64 = result.rounds.iter().map(|r| r.duration_s).sum();
    assert!((result.duration_s - time).abs() < 1e-9);
    let mut tps: Vec<f64> = result.rounds.iter().map(|r| r.tps).collect();
    tps.sort_by(f64::total_cmp);
    assert_eq!(result.tps_median, tps[1]);
    let rendered = result.render();
    assert!(rendered.contains("3 rounds: "), "{rendered}");

    config.rounds = 0;
    let err = run_workload(Arc::new(Bank), &config).unwrap_err();
    assert!(err.to_string().contains("--rounds"), "{err}");
}

#[test]
fn a_duration_run_on_one_thread_with_switches_off_also_checks_out() {
    let mut config = BenchConfig::new("bank");
    config.threads = 1;
    config.stop = Stop::Duration(Duration::from_millis(300));
    config.warmup = Duration::from_millis(100);
    config.quiet = true;
    config.db = DbConfig {
        switches: bench::run::build_switches("stripped", &[], 1).unwrap(),
        ..DbConfig::default()
    };
    let result = run_workload(Arc::new(Bank), &config).unwrap();
    assert_eq!(result.consistency, "ok");
    assert!(result.txn_count > 0);
    assert_eq!(result.aborts, 0, "one thread cannot deadlock");
    assert_eq!(result.config.preset, "stripped");
    assert!(result.duration_s >= 0.3 && result.duration_s < 5.0);
}
