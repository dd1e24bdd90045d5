//! TPC-B: branches, tellers (10 per branch), accounts (100,000 per branch) and history; one
//! transaction, AccountUpdate.
//!
//! ```text
//! AccountUpdate(a, t, b, delta):
//!   get ACCOUNT a for update, a_balance += delta
//!   get TELLER  t for update, t_balance += delta   (t's branch is b)
//!   get BRANCH  b for update, b_balance += delta
//!   insert HISTORY (t, t_next_h_id, a, b, delta, time)
//! ```
//!
//! Terminal i works at branch (i mod B) + 1; each transaction picks a teller of that branch
//! at random, and an account of that branch — or, 15% of the time when B > 1, of another
//! branch. delta is uniform in [−999,999, +999,999] (integer balances).
//!
//! HISTORY has no key in the specification; here it is keyed by (h_t_id, h_seq), numbered by
//! a counter in the teller row the transaction already reads and writes.
//!
//! Invariants (check): Σ a_balance = Σ t_balance = Σ b_balance = Σ h_delta, and per branch
//! b_balance = Σ t_balance of its tellers.

use std::sync::Arc;

use engine::db::Database;
use engine::{Connection, TableRef, TableSchema, Tx, TxError, TxResult, Value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::util::{
    drawn, int, load_partitions, no_procedure, with_txn, Args, BatchLoader, CheckProgress,
    TableScan,
};
use crate::workload::{Condition, Interactions, Procedures, Receipt, Terminal, Workload};

pub const BRANCH: &str = "tpcb_branch";
pub const TELLER: &str = "tpcb_teller";
pub const ACCOUNT: &str = "tpcb_account";
pub const HISTORY: &str = "tpcb_history";

const B_BALANCE: usize = 1;
const T_B_ID: usize = 1;
const T_BALANCE: usize = 2;
const T_NEXT_H_ID: usize = 3;
const A_BALANCE: usize = 2;
const H_DELTA: usize = 4;

/// TPC-B sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct TpcbConfig {
    pub branches: u64,
    pub tellers_per_branch: i64,
    /// 100,000 in the specification; reducible for tests.
    pub accounts_per_branch: i64,
}

/// The largest teller id: `h_t_id` has 24 bits in the history table's key.
const MAX_TELLER_ID: i64 = (1 << 24) - 1;

/// The most branches TPC-B holds at its standard 10 tellers per branch.
pub const MAX_BRANCHES: u64 = (MAX_TELLER_ID / 10) as u64;

impl TpcbConfig {
    pub fn new(branches: u64) -> Self {
        TpcbConfig {
            branches,
            tellers_per_branch: 10,
            accounts_per_branch: 100_000,
        }
    }
}

pub fn tables() -> Vec<TableSchema> {
    vec![
        TableSchema::new(BRANCH)
            .int("b_id")
            .int("b_balance")
            .string("b_filler", 88)
            .key(&["b_id"])
            .int_key(&[32]),
        TableSchema::new(TELLER)
            .int("t_id")
            .int("t_b_id")
            .int("t_balance")
            .int("t_next_h_id")
            .string("t_filler", 84)
            .key(&["t_id"])
            .int_key(&[40]),
        TableSchema::new(ACCOUNT)
            .int("a_id")
            .int("a_b_id")
            .int("a_balance")
            .string("a_filler", 84)
            .key(&["a_id"])
            .int_key(&[48]),
        TableSchema::new(HISTORY)
            .int("h_t_id")
            .int("h_seq")
            .int("h_a_id")
            .int("h_b_id")
            .int("h_delta")
            .int("h_time")
            .string("h_filler", 22)
            .key(&["h_t_id", "h_seq"])
            .int_key(&[24, 40]),
    ]
}

/// One AccountUpdate's input.
#[derive(Clone, Debug, PartialEq)]
pub struct AccountUpdate {
    pub a_id: i64,
    pub t_id: i64,
    pub b_id: i64,
    pub delta: i64,
    pub time: i64,
}

#[derive(Clone, Debug)]
pub struct TpcbTables {
    pub branch: TableRef,
    pub teller: TableRef,
    pub account: TableRef,
    pub history: TableRef,
}

impl TpcbTables {
    pub fn resolve(db: &dyn Connection) -> TxResult<Self> {
        Ok(TpcbTables {
            branch: db.table(BRANCH)?,
            teller: db.table(TELLER)?,
            account: db.table(ACCOUNT)?,
            history: db.table(HISTORY)?,
        })
    }
}

impl AccountUpdate {
    /// The input as the stored procedure's arguments: `a_id, t_id, b_id, delta, time`.
    pub fn to_args(&self, out: &mut Vec<Value>) {
        out.extend([self.a_id, self.t_id, self.b_id, self.delta, self.time].map(Value::Int));
    }

    /// The input from the stored procedure's arguments ([`AccountUpdate::to_args`]).
    pub fn from_args(args: &[Value]) -> TxResult<Self> {
        let mut a = Args::new("account_update", args);
        let input = AccountUpdate {
            a_id: a.int()?,
            t_id: a.int()?,
            b_id: a.int()?,
            delta: a.int()?,
            time: a.int()?,
        };
        a.finish()?;
        Ok(input)
    }
}

/// Adds `delta` to column `col` of row `id` in one read-modify-write; returns the new value.
fn add(tx: &mut dyn Tx, table: &TableRef, id: i64, col: usize, delta: i64) -> TxResult<i64> {
    let mut balance = 0;
    let found = tx.update_with(table, &[Value::Int(id)], &mut |r, set| {
        balance = r.int(col)? + delta;
        set.int(col, balance);
        Ok(())
    })?;
    if !found {
        return Err(TxError::Invalid(format!("no row {id} in {}", table.name)));
    }
    Ok(balance)
}

/// What AccountUpdate returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccountUpdateOutput {
    /// The account's new balance.
    pub balance: i64,
    /// The history row's sequence number (its key is `(t_id, h_seq)`).
    pub h_seq: i64,
}

/// The AccountUpdate transaction.
pub fn account_update(
    tx: &mut dyn Tx,
    t: &TpcbTables,
    input: &AccountUpdate,
) -> TxResult<AccountUpdateOutput> {
    // The three rows it updates, known from the input (see `Tx::prefetch_for_update`).
    tx.prefetch_for_update(
        &[
            (&t.account, &[input.a_id]),
            (&t.teller, &[input.t_id]),
            (&t.branch, &[input.b_id]),
        ],
        None,
    );
    let balance = add(tx, &t.account, input.a_id, A_BALANCE, input.delta)?;
    let mut seq = 0;
    let found = tx.update_with(&t.teller, &[Value::Int(input.t_id)], &mut |r, set| {
        seq = r.int(T_NEXT_H_ID)?;
        let t_balance = r.int(T_BALANCE)? + input.delta;
        set.int(T_BALANCE, t_balance);
        set.int(T_NEXT_H_ID, seq + 1);
        Ok(())
    })?;
    if !found {
        return Err(TxError::Invalid(format!("no teller {}", input.t_id)));
    }
    add(tx, &t.branch, input.b_id, B_BALANCE, input.delta)?;
    tx.insert(
        &t.history,
        &[
            Value::Int(input.t_id),
            Value::Int(seq),
            Value::Int(input.a_id),
            Value::Int(input.b_id),
            Value::Int(input.delta),
            Value::Int(input.time),
            Value::Str("x".repeat(22)),
        ],
    )?;
    Ok(AccountUpdateOutput {
        balance,
        h_seq: seq,
    })
}

/// The TPC-B workload.
pub struct Tpcb {
    pub config: TpcbConfig,
}

impl Tpcb {
    pub fn new(config: TpcbConfig) -> Result<Tpcb, String> {
        if config.branches == 0 || config.tellers_per_branch < 1 || config.accounts_per_branch < 1 {
            return Err(format!("TPC-B sizes must be positive: {config:?}"));
        }
        // Every id must fit its key's bits (`tables()`): teller ids have 24 in the history key,
        // account ids 48. Computed with checked arithmetic, since `branches` comes from the user.
        let branches = i64::try_from(config.branches).ok();
        let tellers = branches.and_then(|b| b.checked_mul(config.tellers_per_branch));
        let accounts = branches.and_then(|b| b.checked_mul(config.accounts_per_branch));
        match (tellers, accounts) {
            (Some(t), Some(a)) if t < 1 << 24 && a < 1 << 48 => Ok(Tpcb { config }),
            _ => Err(format!(
                "TPC-B holds at most {} branches (teller ids have 24 bits), not {}",
                MAX_TELLER_ID / config.tellers_per_branch,
                config.branches
            )),
        }
    }
}

/// Draws AccountUpdate inputs for one terminal.
pub struct TpcbInputs {
    pub config: TpcbConfig,
    pub home_b_id: i64,
}

impl TpcbInputs {
    pub fn draw(&self, rng: &mut impl Rng, time: i64) -> AccountUpdate {
        let c = &self.config;
        let b_id = self.home_b_id;
        let t_id = (b_id - 1) * c.tellers_per_branch + rng.gen_range(1..=c.tellers_per_branch);
        let account_branch = if c.branches > 1 && rng.gen_range(0..100) < 15 {
            let other = rng.gen_range(1..c.branches as i64);
            if other >= b_id {
                other + 1
            } else {
                other
            }
        } else {
            b_id
        };
        let a_id =
            (account_branch - 1) * c.accounts_per_branch + rng.gen_range(1..=c.accounts_per_branch);
        AccountUpdate {
            a_id,
            t_id,
            b_id,
            delta: rng.gen_range(-999_999..=999_999),
            time,
        }
    }
}

struct TpcbTerminal {
    tables: TpcbTables,
    inputs: TpcbInputs,
    rng: SmallRng,
    input: Option<AccountUpdate>,
    /// The history row the last successful run inserted: (t_id, h_seq).
    history: Option<(i64, i64)>,
}

impl Terminal for TpcbTerminal {
    fn next(&mut self) -> usize {
        self.input = Some(self.inputs.draw(&mut self.rng, crate::util::now_seconds()));
        0
    }

    fn run(&mut self, tx: &mut dyn Tx) -> TxResult<()> {
        let input = drawn(&self.input, "run")?;
        self.history = None;
        let out = account_update(tx, &self.tables, input)?;
        self.history = Some((input.t_id, out.h_seq));
        Ok(())
    }

    fn args(&self, out: &mut Vec<Value>) -> TxResult<()> {
        let input = drawn(&self.input, "args")?;
        input.to_args(out);
        Ok(())
    }

    fn returned(&mut self, values: &[Value]) -> TxResult<()> {
        let input = drawn(&self.input, "returned")?;
        // `balance, h_seq` (see `TpcbProcedures`).
        self.history = Some((input.t_id, int(values, 1)?));
        Ok(())
    }

    fn receipts(&self, out: &mut Vec<Receipt>) {
        if let Some((t_id, seq)) = self.history {
            out.push(Receipt::present(HISTORY, &[t_id, seq]));
        }
    }
}

/// AccountUpdate as a stored procedure: returns `balance, h_seq`.
struct TpcbProcedures {
    tables: TpcbTables,
}

impl Procedures for TpcbProcedures {
    fn call(
        &self,
        tx: &mut dyn Tx,
        txn: usize,
        args: &[Value],
        out: &mut Vec<Value>,
    ) -> TxResult<()> {
        if txn != 0 {
            return Err(no_procedure("tpcb", txn));
        }
        let output = account_update(tx, &self.tables, &AccountUpdate::from_args(args)?)?;
        out.extend([Value::Int(output.balance), Value::Int(output.h_seq)]);
        Ok(())
    }
}

impl Workload for Tpcb {
    fn name(&self) -> &'static str {
        "tpcb"
    }

    fn txn_names(&self) -> &'static [&'static str] {
        &["account_update"]
    }

    fn interactions(&self) -> Vec<Interactions> {
        vec![Interactions {
            name: "account_update",
            round_trips: 3,
            note: "get account, teller, branch for update (1); update the three + insert \
                   history (1); commit (1)",
        }]
    }

    fn create_schema(&self, db: &Database) -> TxResult<()> {
        for table in tables() {
            db.create_table(table)?;
        }
        Ok(())
    }

    fn load(&self, db: &Arc<Database>, progress: &(dyn Fn(u64, u64) + Sync)) -> TxResult<()> {
        let t = TpcbTables::resolve(db)?;
        let c = &self.config;
        let branches = c.branches as i64;
        let total = (branches * (1 + c.tellers_per_branch + c.accounts_per_branch)) as u64;
        let done = std::sync::atomic::AtomicU64::new(0);
        let report = |rows: u64| {
            let now = done.fetch_add(rows, std::sync::atomic::Ordering::Relaxed) + rows;
            progress(now, total);
        };
        // Each branch (its row, its tellers, its accounts) is loaded by one thread, the
        // branches spread over up to one thread per core: each loading thread inserts into
        // heap pages of its own, so two branches' rows (and their tellers) never share a page
        // when there are as many loading threads as branches. Loaded from one thread, all
        // branches (two to a page) and tellers (twenty) shared pages, and a run with one
        // branch per thread latched and dirtied the other threads' pages on every transaction
        // (two threads ran 1.15 times one on two cores). Without latches or locks (the
        // stripped preset) the tables take one writer at a time.
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(db.config().switches.max_threads())
            .clamp(1, branches.max(1) as usize);
        load_partitions(db, &report, threads, c.branches, |loader, b| {
            load_branch(loader, &t, c, b)
        })?;
        Ok(())
    }

    fn terminal(
        &self,
        db: &dyn Connection,
        id: usize,
        _terminals: usize,
        seed: u64,
    ) -> TxResult<Box<dyn Terminal>> {
        Ok(Box::new(TpcbTerminal {
            tables: TpcbTables::resolve(db)?,
            inputs: TpcbInputs {
                config: self.config.clone(),
                home_b_id: (id as u64 % self.config.branches) as i64 + 1,
            },
            rng: SmallRng::seed_from_u64(seed),
            input: None,
            history: None,
        }))
    }

    fn procedures(&self, conn: &dyn Connection) -> TxResult<Box<dyn Procedures>> {
        Ok(Box::new(TpcbProcedures {
            tables: TpcbTables::resolve(conn)?,
        }))
    }

    fn check_with_progress(
        &self,
        db: &Arc<Database>,
        progress: CheckProgress<'_>,
    ) -> TxResult<Vec<Condition>> {
        let t = TpcbTables::resolve(db)?;
        let accounts = TableScan::new(db, &t.account, &[A_BALANCE])?.reporting_to(progress);
        let tellers = TableScan::new(db, &t.teller, &[T_B_ID, T_BALANCE])?.reporting_to(progress);
        let branches = TableScan::new(db, &t.branch, &[0, B_BALANCE])?.reporting_to(progress);
        let history = TableScan::new(db, &t.history, &[H_DELTA])?.reporting_to(progress);
        // Per table: (rows, Σ balance or delta); per branch: (b_balance, Σ its t_balance).
        let (totals, per_branch) = with_txn(db, |tx| {
            let mut totals = [(0i64, 0i64); 4];
            let mut per_branch = std::collections::BTreeMap::<i64, (i64, i64)>::new();
            let mut add = |table: usize, amount: i64| {
                totals[table].0 += 1;
                totals[table].1 += amount;
            };
            accounts.for_each(tx, |r| {
                add(0, int(r, 0)?);
                Ok(())
            })?;
            tellers.for_each(tx, |r| {
                add(1, int(r, 1)?);
                per_branch.entry(int(r, 0)?).or_default().1 += int(r, 1)?;
                Ok(())
            })?;
            branches.for_each(tx, |r| {
                add(2, int(r, 1)?);
                per_branch.entry(int(r, 0)?).or_default().0 += int(r, 1)?;
                Ok(())
            })?;
            history.for_each(tx, |r| {
                add(3, int(r, 0)?);
                Ok(())
            })?;
            Ok((totals, per_branch))
        })?;
        let sums = totals.map(|(_, sum)| sum);
        let [accounts, tellers, branches, _] = totals.map(|(rows, _)| rows);
        let c = &self.config;
        let expected_accounts = c.branches as i64 * c.accounts_per_branch;
        let mut out = vec![Condition {
            name: "TPC-B balances".to_string(),
            description: "sum(a_balance) = sum(t_balance) = sum(b_balance) = sum(h_delta)"
                .to_string(),
            violation: sums.iter().any(|s| *s != sums[0]).then(|| {
                format!(
                    "accounts {}, tellers {}, branches {}, history {}",
                    sums[0], sums[1], sums[2], sums[3]
                )
            }),
        }];
        let bad: Vec<String> = per_branch
            .iter()
            .filter(|(_, (b, t))| b != t)
            .take(3)
            .map(|(id, (b, t))| format!("branch {id}: b_balance {b}, tellers {t}"))
            .collect();
        out.push(Condition {
            name: "TPC-B branch = its tellers".to_string(),
            description: "b_balance = sum(t_balance) over the branch's tellers".to_string(),
            violation: (!bad.is_empty()).then(|| bad.join("; ")),
        });
        out.push(Condition {
            name: "TPC-B cardinality".to_string(),
            description: "accounts, tellers and branches as loaded".to_string(),
            violation: (accounts != expected_accounts
                || tellers != c.branches as i64 * c.tellers_per_branch
                || branches as u64 != c.branches)
                .then(|| format!("{accounts} accounts, {tellers} tellers, {branches} branches")),
        });
        Ok(out)
    }
}

/// Loads branch `b`: its row, its tellers and its accounts.
fn load_branch(
    loader: &mut BatchLoader<'_>,
    t: &TpcbTables,
    c: &TpcbConfig,
    b: i64,
) -> TxResult<()> {
    loader.push(
        &t.branch,
        vec![Value::Int(b), Value::Int(0), Value::Str("b".repeat(88))],
    )?;
    for k in 1..=c.tellers_per_branch {
        let t_id = (b - 1) * c.tellers_per_branch + k;
        loader.push(
            &t.teller,
            vec![
                Value::Int(t_id),
                Value::Int(b),
                Value::Int(0),
                Value::Int(1),
                Value::Str("t".repeat(84)),
            ],
        )?;
    }
    for k in 1..=c.accounts_per_branch {
        let a_id = (b - 1) * c.accounts_per_branch + k;
        loader.push(
            &t.account,
            vec![
                Value::Int(a_id),
                Value::Int(b),
                Value::Int(0),
                Value::Str("a".repeat(84)),
            ],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branches_beyond_the_key_bits_are_refused_not_wrapped() {
        assert!(Tpcb::new(TpcbConfig::new(MAX_BRANCHES)).is_ok());
        for branches in [MAX_BRANCHES + 1, 1 << 40, i64::MAX as u64, u64::MAX] {
            let err = Tpcb::new(TpcbConfig::new(branches))
                .err()
                .unwrap_or_else(|| panic!("{branches} branches accepted"));
            assert!(err.contains(&MAX_BRANCHES.to_string()), "{err}");
            assert!(err.contains(&branches.to_string()), "{err}");
        }
    }

    #[test]
    fn fifteen_percent_of_accounts_are_remote_and_tellers_are_local() {
        let inputs = TpcbInputs {
            config: TpcbConfig::new(4),
            home_b_id: 2,
        };
        let mut rng = SmallRng::seed_from_u64(1);
        let draws = 100_000;
        let mut remote = 0;
        for _ in 0..draws {
            let u = inputs.draw(&mut rng, 0);
            assert_eq!(u.b_id, 2);
            assert!((11..=20).contains(&u.t_id));
            assert!((1..=400_000).contains(&u.a_id));
            assert!((-999_999..=999_999).contains(&u.delta));
            if (u.a_id - 1) / 100_000 + 1 != 2 {
                remote += 1;
            }
        }
        let p = remote as f64 * 100.0 / draws as f64;
        assert!((p - 15.0).abs() < 0.5, "{p}% remote");
        let single = TpcbInputs {
            config: TpcbConfig::new(1),
            home_b_id: 1,
        };
        assert!((0..1000).all(|_| single.draw(&mut rng, 0).a_id <= 100_000));
    }
}
