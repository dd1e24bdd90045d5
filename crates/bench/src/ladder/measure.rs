//! One rung's measured run: the child process the ladder starts, natively (time) or under
//! callgrind (instructions).
//!
//! ```text
//!   open in-memory db (Switches::rung(k), durable) ─► load TPC-C ─► one terminal ─► warm-up
//!   ─► start instrumentation (a no-op natively) ─► for each phase:
//!        repeat txns times:  terminal.next() until the phase's type   (not counted)
//!                            measured_txn(db, terminal)               (counted: toggle-collect)
//!        dump the phase's profile (callgrind) / keep its elapsed time (native)
//! ```
//!
//! Rung 11 runs the kernel instead: inputs are drawn first, then `Kernel::run_mix` is the
//! counted function. Callgrind counts only inside `measured_txn` and `run_mix`
//! (`--collect-atstart=no --toggle-collect=...`), and instruments nothing before the
//! measured phase (`--instr-atstart=no` and a client request), so loading runs at valgrind's
//! uninstrumented speed.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use engine::db::{Database, DbConfig};
use engine::{Switches, TxError};
use serde::{Deserialize, Serialize};
use workloads::tpcc::{Tpcc, TpccConfig};
use workloads::{Mix, Terminal, Workload};

use crate::callgrind::client;

/// Which transactions a measured phase runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    NewOrder,
    Payment,
    /// The paper's 50/50 mix as the terminal draws it.
    Mix,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::NewOrder => "new-order",
            Phase::Payment => "payment",
            Phase::Mix => "mix",
        }
    }

    pub fn from_name(name: &str) -> Result<Phase, String> {
        match name {
            "new-order" => Ok(Phase::NewOrder),
            "payment" => Ok(Phase::Payment),
            "mix" => Ok(Phase::Mix),
            other => Err(format!(
                "unknown transaction '{other}' (valid: new-order, payment, mix)"
            )),
        }
    }

    /// The index into TPC-C's `txn_names` this phase keeps, or `None` for any.
    fn txn_type(self) -> Option<usize> {
        match self {
            Phase::NewOrder => Some(0),
            Phase::Payment => Some(1),
            Phase::Mix => None,
        }
    }
}

/// What one measured child run does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RungRun {
    /// Ladder rung, 0..=11.
    pub rung: usize,
    pub phases: Vec<Phase>,
    /// Transactions per phase.
    pub txns: u64,
    /// Transactions of the mix run before measuring.
    pub warmup: u64,
    /// TPC-C ITEM rows (100,000 at full size; smaller only for quick tests).
    pub items: u32,
    /// Customers per district (3,000 at full size).
    pub customers: u32,
    pub seed: u64,
}

/// One phase's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseOutcome {
    pub phase: Phase,
    pub txns: u64,
    /// Attempts aborted and retried.
    pub retries: u64,
    /// Transactions rolled back at the procedure's request.
    pub rollbacks: u64,
    /// Nanoseconds in the measured calls.
    pub elapsed_ns: u64,
}

impl PhaseOutcome {
    /// A phase of `txns` transactions, nothing measured yet.
    fn new(phase: Phase, txns: u64) -> Self {
        PhaseOutcome {
            phase,
            txns,
            retries: 0,
            rollbacks: 0,
            elapsed_ns: 0,
        }
    }
}

/// What the child prints (one JSON line on stdout).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RungOutcome {
    pub rung: usize,
    pub load_s: f64,
    pub phases: Vec<PhaseOutcome>,
}

/// Runs one rung's measured phases in this process.
pub fn run_rung(run: &RungRun) -> anyhow::Result<RungOutcome> {
    if run.rung > 11 {
        bail!(crate::UsageError(format!(
            "rung {} does not exist (valid: 0..=11)",
            run.rung
        )));
    }
    if run.rung == 11 {
        run_kernel(run)
    } else {
        run_engine(run)
    }
}

fn run_engine(run: &RungRun) -> anyhow::Result<RungOutcome> {
    let started = Instant::now();
    let db = Database::open(DbConfig {
        switches: Switches::rung(run.rung),
        threads: 1,
        durable: true,
        // No fuzzy checkpoints: one landing in a measured phase of a thousand transactions
        // (the in-memory log passes 64 MiB every few thousand) would add its page write-backs
        // to that phase alone (a rung-1 Payment measured 61K instructions instead of 24K).
        // The runs are short; the in-memory log is kept whole.
        checkpoint_bytes: u64::MAX,
        ..DbConfig::default()
    })
    .with_context(|| format!("open the rung {} database", run.rung))?;
    let mut config = TpccConfig::new(1, Mix::Paper);
    config.items = i64::from(run.items);
    config.customers_per_district = i64::from(run.customers);
    let tpcc = Tpcc::new(config).map_err(|e| crate::UsageError(e.to_string()))?;
    tpcc.create_schema(&db).context("create the TPC-C schema")?;
    tpcc.load(&db, &|_, _| {}).context("load TPC-C")?;
    db.finish_load();
    let load_s = started.elapsed().as_secs_f64();
    let mut terminal = tpcc
        .terminal(&db, 0, 1, run.seed)
        .context("start the terminal")?;
    for _ in 0..run.warmup {
        terminal.next();
        measured_txn(&db, terminal.as_mut()).context("warm-up transaction")?;
    }
    client::start_instrumentation();
    let mut phases = Vec::new();
    for &phase in &run.phases {
        let mut outcome = PhaseOutcome::new(phase, run.txns);
        for _ in 0..run.txns {
            while let Some(wanted) = phase.txn_type() {
                if terminal.next() == wanted {
                    break;
                }
            }
            if phase.txn_type().is_none() {
                terminal.next();
            }
            let t0 = Instant::now();
            let attempt = measured_txn(&db, terminal.as_mut())
                .with_context(|| format!("{} transaction", phase.name()))?;
            outcome.elapsed_ns += t0.elapsed().as_nanos() as u64;
            outcome.retries += attempt.retries;
            outcome.rollbacks += u64::from(attempt.rolled_back);
        }
        client::dump_stats_at(phase.name());
        phases.push(outcome);
    }
    client::stop_instrumentation();
    drop(terminal);
    db.close().context("close the database")?;
    Ok(RungOutcome {
        rung: run.rung,
        load_s,
        phases,
    })
}

/// How one measured transaction ended.
#[derive(Clone, Copy, Debug, Default)]
pub struct Attempt {
    pub retries: u64,
    pub rolled_back: bool,
}

/// One transaction: begin, run, commit (or abort and retry a retryable error). The function
/// callgrind counts (`--toggle-collect=*measured_txn*`); never inlined so the toggle sees it.
#[inline(never)]
pub fn measured_txn(db: &Arc<Database>, terminal: &mut dyn Terminal) -> anyhow::Result<Attempt> {
    let mut attempt = Attempt::default();
    loop {
        let mut txn = db.begin()?;
        match terminal.run(&mut txn) {
            Ok(()) => match txn.commit() {
                Ok(()) => return Ok(attempt),
                Err(e) if e.is_retryable() && attempt.retries < 1000 => attempt.retries += 1,
                Err(e) => return Err(e.into()),
            },
            Err(TxError::UserAbort(_)) => {
                txn.abort()?;
                attempt.rolled_back = true;
                return Ok(attempt);
            }
            Err(e) if e.is_retryable() && attempt.retries < 1000 => {
                let _ = txn.abort();
                attempt.retries += 1;
            }
            Err(e) => {
                let _ = txn.abort();
                return Err(e.into());
            }
        }
    }
}

fn run_kernel(run: &RungRun) -> anyhow::Result<RungOutcome> {
    use kernel::{generate_inputs_for, Kernel, KernelInput, Scale};
    let started = Instant::now();
    let scale = Scale {
        warehouses: 1,
        items: run.items,
        customers_per_district: run.customers,
    };
    let mut k = Kernel::populate(scale, run.seed)
        .map_err(|e| anyhow::anyhow!("populate the kernel: {e}"))?;
    let load_s = started.elapsed().as_secs_f64();
    let mut seed = run.seed.wrapping_add(1);
    let mut draw = |phase: Phase, count: usize| -> Vec<KernelInput> {
        let mut inputs = Vec::with_capacity(count);
        while inputs.len() < count {
            seed = seed.wrapping_add(1);
            inputs.extend(
                generate_inputs_for(seed, count * 2 + 16, scale)
                    .into_iter()
                    .filter(|i| match phase {
                        Phase::NewOrder => matches!(i, KernelInput::NewOrder(_)),
                        Phase::Payment => matches!(i, KernelInput::Payment(_)),
                        Phase::Mix => true,
                    }),
            );
        }
        inputs.truncate(count);
        inputs
    };
    let warmup = draw(Phase::Mix, run.warmup as usize);
    k.reserve_for(&warmup);
    std::hint::black_box(k.run_mix(&warmup));
    client::start_instrumentation();
    let mut phases = Vec::new();
    for &phase in &run.phases {
        let mut outcome = PhaseOutcome::new(phase, run.txns);
        let inputs = draw(phase, run.txns as usize);
        k.reserve_for(&inputs);
        let t0 = Instant::now();
        let committed = k.run_mix(&inputs);
        outcome.elapsed_ns = t0.elapsed().as_nanos() as u64;
        outcome.rollbacks += run.txns - committed;
        client::dump_stats_at(phase.name());
        phases.push(outcome);
    }
    client::stop_instrumentation();
    Ok(RungOutcome {
        rung: run.rung,
        load_s,
        phases,
    })
}
