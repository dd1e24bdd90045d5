//! The seam between workloads and drivers.

use std::sync::Arc;

use engine::db::Database;
use engine::{Connection, Tx, TxResult, Value};

/// How a procedure talks to the database when run interactively (the 2025 paper, Table 2):
/// the number of client–server round trips its client-side form needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interactions {
    pub name: &'static str,
    /// Round trips of the interactive (client-side) form, commit included.
    pub round_trips: u32,
    /// A short statement of where that number comes from.
    pub note: &'static str,
}

/// The result of one consistency condition.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    /// E.g. "TPC-C 3.3.2.1".
    pub name: String,
    pub description: String,
    /// `None` if it holds, else what was found.
    pub violation: Option<String>,
}

impl Condition {
    pub fn holds(&self) -> bool {
        self.violation.is_none()
    }
}

/// A benchmark workload.
pub trait Workload: Send + Sync {
    /// "tpcc", "tpcb", "ycsb", "voter".
    fn name(&self) -> &'static str;
    /// Transaction type names, indexed by what [`Terminal::next`] returns.
    fn txn_names(&self) -> &'static [&'static str];
    /// Round trips per transaction type, in `txn_names` order.
    fn interactions(&self) -> Vec<Interactions>;
    /// Creates tables and indexes (or finds them if they exist).
    fn create_schema(&self, db: &Database) -> TxResult<()>;
    /// Populates the database; `progress(done, total)` is called now and then.
    fn load(&self, db: &Arc<Database>, progress: &(dyn Fn(u64, u64) + Sync)) -> TxResult<()>;
    /// A terminal (one closed-loop client) with its own random stream, opened against the
    /// database in process or a connection to a server.
    fn terminal(
        &self,
        conn: &dyn Connection,
        id: usize,
        terminals: usize,
        seed: u64,
    ) -> TxResult<Box<dyn Terminal>>;
    /// The workload's consistency conditions, checked against the database as it is now.
    fn check(&self, db: &Arc<Database>) -> TxResult<Vec<Condition>> {
        self.check_with_progress(db, crate::util::NO_PROGRESS)
    }
    /// [`Workload::check`], telling `progress(table, rows)` after each page of rows how many
    /// rows of `table` it has read so far: on a database of gigabytes the check reads for
    /// tens of seconds, and a driver shows how far it has got. The tables are reported in the
    /// order they are read, each up to its rows (from the start again if the check's
    /// transaction is retried).
    fn check_with_progress(
        &self,
        db: &Arc<Database>,
        progress: crate::util::CheckProgress<'_>,
    ) -> TxResult<Vec<Condition>>;
    /// The workload's transactions as stored procedures, for a server to run: procedure `i` is
    /// named `txn_names()[i]` and takes the arguments [`Terminal::args`] writes. The default
    /// refuses: a workload that runs only in process (a test's).
    fn procedures(&self, conn: &dyn Connection) -> TxResult<Box<dyn Procedures>> {
        let _ = conn;
        Err(engine::TxError::Invalid(format!(
            "{} has no stored procedures",
            self.name()
        )))
    }
}

/// A workload's stored procedures, resolved against one database: what a server runs when a
/// client calls a transaction by name with its arguments (one round trip per transaction).
/// The procedures are the same functions a terminal runs embedded; only their input arrives
/// as values.
pub trait Procedures: Send + Sync {
    /// Runs procedure `txn` (an index into [`Workload::txn_names`]) with `args` in `tx`, and
    /// appends what it returns to `out`. Like [`Terminal::run`] it never begins or commits,
    /// and may run again after a retryable error. Arguments of the wrong number or kind are an
    /// [`engine::TxError::Invalid`] naming the procedure and the argument.
    fn call(
        &self,
        tx: &mut dyn Tx,
        txn: usize,
        args: &[Value],
        out: &mut Vec<Value>,
    ) -> TxResult<()>;
}

/// What a committed transaction left in the database that no crash may take away once the
/// commit was acknowledged (durably): the row with primary key `key` in `table` is there
/// (`present`), or is gone for good (a delivered order's new-order row). Recorded by
/// `glass bench --ack-log` and looked up by `glass check --ack-log`.
///
/// Only effects no later transaction undoes make receipts (an order, a history row, a vote, an
/// inserted YCSB record, a delivered new-order row): a balance or a YCSB field is overwritten
/// by later commits, so it proves nothing about an earlier one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receipt {
    pub table: String,
    /// The primary key's columns, all integers in every workload.
    pub key: Vec<i64>,
    pub present: bool,
}

impl Receipt {
    pub fn present(table: &str, key: &[i64]) -> Receipt {
        Receipt {
            table: table.to_string(),
            key: key.to_vec(),
            present: true,
        }
    }

    pub fn absent(table: &str, key: &[i64]) -> Receipt {
        Receipt {
            table: table.to_string(),
            key: key.to_vec(),
            present: false,
        }
    }
}

/// One closed-loop client: draws a transaction, runs it.
pub trait Terminal: Send {
    /// Draws the next transaction and its input; returns its type (index into `txn_names`).
    fn next(&mut self) -> usize;
    /// Runs the drawn transaction's body once. The driver begins and commits (or aborts) and,
    /// after a retryable error, calls `run` again with the same input.
    /// `Err(TxError::UserAbort)` is a rollback the specification asks for.
    fn run(&mut self, tx: &mut dyn Tx) -> TxResult<()>;
    /// After the drawn transaction committed (its last `run` succeeded): the receipts of what
    /// it wrote, appended to `out`. None for a read-only transaction (the default).
    fn receipts(&self, _out: &mut Vec<Receipt>) {}
    /// The drawn transaction as a stored-procedure call: its input as arguments, appended to
    /// `out`. The procedure is the one [`Terminal::next`] named (see [`Procedures`]). The
    /// default refuses: a terminal that runs only in process (a test's, a hand-coded kernel's).
    fn args(&self, out: &mut Vec<Value>) -> TxResult<()> {
        let _ = out;
        Err(engine::TxError::Invalid(
            "this terminal's transactions run only in process, not as stored procedures"
                .to_string(),
        ))
    }
    /// A stored-procedure call of the drawn transaction committed and returned `values`: the
    /// terminal takes what its receipts name from them, as it would from its own `run`.
    fn returned(&mut self, values: &[Value]) -> TxResult<()> {
        let _ = values;
        Err(engine::TxError::Invalid(
            "this terminal's transactions run only in process, not as stored procedures"
                .to_string(),
        ))
    }
}
