//! The server and the client side of a benchmark: `glass serve` (a workload's database behind
//! a [`server::Server`]) and `glass bench --server` (the workload's terminals driving it over
//! connections, all from one thread ([`crate::multiplex`])).
//!
//! ```text
//!   glass serve tpcc --listen 127.0.0.1:0          glass bench tpcc --server ADDR --mode M
//!   ────────────────────────────────────          ──────────────────────────────────────
//!   open + load the database                       a client connection per terminal
//!   Server::start ── prints where it listens       terminals drawn as embedded, opened
//!   … serves until SIGINT/SIGTERM …                through the connection (its catalog)
//!   Server::stop: in-flight requests finish,       one epoll loop ────────────────── M:
//!     open transactions abort                        sp           Call: one round trip
//!   check consistency, close the database            interactive  each Tx operation a
//!   exit 0 if every condition holds                               Batch, then Commit
//!                                                    autocommit   each operation its own
//!                                                                 transaction
//! ```
//!
//! The consistency conditions are checked where the database is: by the server when it
//! stops. The client reports round trips per transaction type beside the 2025 paper's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use client::{Client, RemoteConnection};
use engine::{TxError, TxResult, Value};
use protocol::Endpoint;
use server::trace::{Phase, Phases};
use server::{Server, ServerConfig, WorkerStats};
use workloads::{Condition, Interactions, Terminal};

use crate::acklog::AckLog;
use crate::run::{build_workload, open_loaded, BenchConfig, Status};

/// How a client runs a workload's transactions on a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Each transaction a stored-procedure call: one round trip.
    StoredProcedure,
    /// The procedure runs on the client; each `Tx` operation is a round trip within one
    /// transaction, which a last round trip commits. Locks are held across round trips.
    Interactive,
    /// The 2025 paper's simulation of interactive transactions: each operation a
    /// transaction of its own, committed at once. Not a transaction as a whole.
    Autocommit,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::StoredProcedure => "sp",
            Mode::Interactive => "interactive",
            Mode::Autocommit => "autocommit",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sp" => Ok(Mode::StoredProcedure),
            "interactive" => Ok(Mode::Interactive),
            "autocommit" => Ok(Mode::Autocommit),
            _ => Err(format!(
                "mode must be sp, interactive or autocommit, not {s:?}"
            )),
        }
    }
}

/// One attempt of `terminal`'s drawn transaction (the stored procedure `procedure`) through
/// `client`, in `mode`; `args` is scratch space for a call's arguments. Returns how the
/// attempt ended and the round trips it made. The multiplexed client's coroutines run their
/// transactions through this.
pub(crate) fn run_attempt(
    client: &mut Client,
    mode: Mode,
    procedure: &str,
    terminal: &mut dyn Terminal,
    args: &mut Vec<Value>,
) -> (TxResult<()>, u64) {
    let before = client.round_trips();
    let result = match mode {
        Mode::StoredProcedure => {
            args.clear();
            terminal
                .args(args)
                .and_then(|()| client.call(procedure, std::mem::take(args)))
                .and_then(|values| terminal.returned(&values))
        }
        Mode::Interactive => {
            let result = terminal.run(&mut client.remote_tx(false));
            client::finish(client, result)
        }
        // Each operation commits alone, so a procedure's later operation can meet what a
        // concurrent one left half done (two New-Orders read the same next order id): a
        // duplicate key ends the attempt as a rollback, not the run.
        Mode::Autocommit => match terminal.run(&mut client.remote_tx(true)) {
            Err(TxError::DuplicateKey(what)) => Err(TxError::UserAbort(format!(
                "autocommit: duplicate key in {what}"
            ))),
            other => other,
        },
    };
    (result, client.round_trips() - before)
}

/// The round trips a client run measured, beside the 2025 paper's (Table 2).
pub struct RoundTrips {
    pub mode: Mode,
    /// Per transaction type: its name, round trips per transaction measured, and the
    /// workload's statement of the paper's count.
    pub rows: Vec<(String, Option<f64>, Interactions)>,
}

impl RoundTrips {
    /// `{"mode": …, "per_txn": {type: round trips per transaction, or null}}`.
    pub fn json(&self) -> serde_json::Value {
        let per_txn: serde_json::Map<String, serde_json::Value> = self
            .rows
            .iter()
            .map(|(name, measured, _)| (name.clone(), serde_json::json!(measured)))
            .collect();
        serde_json::json!({ "mode": self.mode.name(), "per_txn": per_txn })
    }

    pub fn render(&self) -> String {
        let mut out = format!(
            "round trips per transaction ({} mode; the paper's interactive counts, Table 2):\n",
            self.mode.name()
        );
        for (name, measured, paper) in &self.rows {
            let measured = measured.map_or("-".to_string(), |m| format!("{m:.2}"));
            out.push_str(&format!(
                "  {name:<18} {measured:>7}   paper {:>2}\n",
                paper.round_trips
            ));
        }
        out
    }
}

/// The result of a run against a server: no consistency conditions here, since the database,
/// and so the check, is the server's.
fn server_result(
    config: &BenchConfig,
    timestamp: String,
    txn_names: &[&str],
    outcome: &crate::run::Rounds,
) -> anyhow::Result<crate::report::BenchResult> {
    let conditions: Vec<Condition> = Vec::new();
    let mut result = crate::run::bench_result(
        config,
        &config.db,
        timestamp,
        None,
        txn_names,
        outcome,
        &conditions,
    )?;
    result.consistency = crate::report::CHECKED_BY_SERVER.to_string();
    Ok(result)
}

/// The eight phases per transaction, as `glass serve --trace` prints them: µs of server
/// CPU per transaction and share of the server threads' CPU time, then the 2025 paper's
/// Figure 3 split.
pub struct PhaseReport {
    pub phases: Phases,
}

impl PhaseReport {
    /// µs per transaction of `ns` nanoseconds in all.
    fn per_txn(&self, ns: u64) -> f64 {
        ns as f64 / 1000.0 / self.phases.transactions.max(1) as f64
    }

    /// (transaction processing, Glass's networking layer, kernel), nanoseconds: procedure
    /// and query execution; the rest of the threads' user time, less a spin-polling thread's
    /// idle passes; their system time.
    pub fn split_ns(&self) -> (u64, u64, u64) {
        let p = &self.phases;
        let txn = p.get(Phase::ProcedureExecution) + p.get(Phase::QueryExecution);
        let net = p.user_ns.saturating_sub(txn).saturating_sub(p.idle_poll_ns);
        (txn, net, p.system_ns)
    }

    /// The threads' CPU time that went to requests: user and system time less idle polling.
    fn busy_ns(&self) -> u64 {
        (self.phases.user_ns + self.phases.system_ns).saturating_sub(self.phases.idle_poll_ns)
    }

    pub fn render(&self) -> String {
        let p = &self.phases;
        let cpu = self.busy_ns().max(1) as f64;
        let share = |ns: u64| 100.0 * ns as f64 / cpu;
        let mut out = format!(
            "where the server's time went: µs of server CPU per transaction ({} transactions)\n",
            p.transactions
        );
        let row = |out: &mut String, n: &str, name: &str, ns: Option<u64>, note: &str| {
            let cells = match ns {
                Some(ns) => format!("{:>9.2} {:>6.1}%", self.per_txn(ns), share(ns)),
                None => format!("{:>9} {:>7}", "-", ""),
            };
            out.push_str(&format!("  {n:>1} {name:<22}{cells}  {note}\n"));
        };
        row(
            &mut out,
            "1",
            "network receive",
            None,
            "in the kernel's time below",
        );
        row(
            &mut out,
            "2",
            "socket read",
            Some(p.get(Phase::SocketRead)),
            "read calls",
        );
        row(
            &mut out,
            "3",
            "request queuing",
            Some(p.get(Phase::RequestQueuing)),
            "",
        );
        row(
            &mut out,
            "4",
            "procedure execution",
            Some(p.get(Phase::ProcedureExecution)),
            "",
        );
        row(
            &mut out,
            "5",
            "isolation overhead",
            Some(p.get(Phase::Isolation)),
            if p.get(Phase::Isolation) == 0 {
                "procedures run in the server"
            } else {
                "crossing to the procedure process and back (wall)"
            },
        );
        row(
            &mut out,
            "6",
            "query execution",
            Some(p.get(Phase::QueryExecution)),
            "engine",
        );
        row(
            &mut out,
            "7",
            "response queuing",
            Some(p.get(Phase::ResponseQueuing)),
            "",
        );
        row(
            &mut out,
            "8",
            "network send",
            Some(p.get(Phase::NetworkSend)),
            "write calls",
        );
        row(
            &mut out,
            "",
            "decode",
            Some(p.get(Phase::Decode)),
            "protocol codec",
        );
        row(
            &mut out,
            "",
            "encode",
            Some(p.get(Phase::Encode)),
            "protocol codec",
        );
        out.push_str(&format!(
            "  threads' CPU per transaction: {:.2} µs user, {:.2} µs system",
            self.per_txn(p.user_ns),
            self.per_txn(p.system_ns)
        ));
        if p.idle_poll_ns > 0 {
            out.push_str(&format!(
                " ({:.2} µs of it polling shared memory with nothing to do, left out below)",
                self.per_txn(p.idle_poll_ns)
            ));
        }
        out.push('\n');
        let (txn, net, kernel) = self.split_ns();
        out.push_str(&format!(
            "  split (the paper's Figure 3): transaction processing {:.1}% · Glass's networking \
             layer {:.1}% · kernel {:.1}%\n",
            share(txn),
            share(net),
            share(kernel)
        ));
        out
    }

    pub fn json(&self) -> serde_json::Value {
        let p = &self.phases;
        let mut phases = serde_json::Map::new();
        for phase in Phase::ALL {
            phases.insert(
                phase.name().to_string(),
                serde_json::json!(self.per_txn(p.get(phase))),
            );
        }
        let (txn, net, kernel) = self.split_ns();
        serde_json::json!({
            "transactions": p.transactions,
            "us_per_txn": phases,
            "user_us_per_txn": self.per_txn(p.user_ns),
            "system_us_per_txn": self.per_txn(p.system_ns),
            "idle_poll_us_per_txn": self.per_txn(p.idle_poll_ns),
            "split_us_per_txn": {
                "transaction processing": self.per_txn(txn),
                "glass networking layer": self.per_txn(net),
                "kernel": self.per_txn(kernel),
            },
        })
    }
}

/// [`run_remote_bench`] for a sweep of runs: its result, or `None` where Ctrl-C or SIGTERM
/// ([`crate::driver::interrupt_flag`]) cut it short, in its measured phase or before it. A
/// run cut short is left out, and the sweep ends with what it measured before.
pub fn run_remote_uncut(
    config: &BenchConfig,
    endpoint: &Endpoint,
    mode: Mode,
) -> anyhow::Result<Option<crate::report::BenchResult>> {
    match run_remote_bench(config, endpoint, mode) {
        Ok((r, _)) if r.interrupted => Ok(None),
        Ok((r, _)) => Ok(Some(r)),
        Err(e) if crate::driver::is_interruption(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Runs `config`'s workload on the server at `endpoint`, every connection multiplexed on one
/// client thread ([`crate::multiplex`]): stored-procedure calls as frames, interactive and
/// autocommit transactions (and every mode through shared memory) on a coroutine each.
pub fn run_remote_bench(
    config: &BenchConfig,
    endpoint: &Endpoint,
    mode: Mode,
) -> anyhow::Result<(crate::report::BenchResult, RoundTrips)> {
    let status = Status::new(config.quiet);
    let workload = build_workload(&config.workload, &config.options)?;
    let workload = workload.as_ref();
    // Before any work: a file that cannot be written fails the run now. `--durable` on the
    // client says the server forces its commits, so the receipts are durable ones.
    if let Some(path) = &config.json {
        crate::run::check_writable(path).map_err(|e| {
            crate::UsageError(format!("--json {}: cannot write it: {e}", path.display()))
        })?;
    }
    let ack_log = match &config.ack_log {
        Some(path) => Some(AckLog::open(path, &config.workload, config.db.durable)?),
        None => None,
    };
    let ack_log = ack_log.as_ref();
    status.say(format_args!(
        "connecting {} client{} to {endpoint} ({} mode, one client thread)...",
        config.threads,
        if config.threads == 1 { "" } else { "s" },
        mode.name()
    ));
    let timestamp = crate::report::rfc3339_utc(std::time::SystemTime::now());
    let txn_names = workload.txn_names();
    // Terminals open through one connection (they keep nothing of it), which closes before
    // the run, so that it takes no room the run needs (a shared-memory region of N slots
    // runs N connections: a claim waits for the server to free the set-up's slot).
    let connect = || Client::connect(endpoint).context("connect to set the terminals up");
    let mut setup = Some(connect()?);
    if let Some(setup) = setup.as_ref().filter(|s| s.workload() != workload.name()) {
        anyhow::bail!(crate::UsageError(format!(
            "the server at {endpoint} serves {}, not {}",
            setup.workload(),
            workload.name()
        )));
    }
    let driver_config = crate::driver::DriverConfig {
        warmup: config.warmup,
        stop: config.stop,
        retry_limit: config.retry_limit,
        seed: config.seed,
        rate: config.rate,
    };
    let side = crate::multiplex::ClientSide {
        mode,
        // `--no-prefetch`: the procedures' hints are ignored here too, every read its own trip.
        read_ahead: config.db.prefetch,
        ack_log,
    };
    // Others' share of the CPUs, where the server runs here: its work is this run's. A
    // server elsewhere (or one `/proc` does not show) gives no share.
    let cpu = crate::local_server::watch(endpoint);
    let mut merged: Option<crate::driver::DriverOutcome> = None;
    let mut each = Vec::new();
    let mut trips = vec![(0u64, 0u64); txn_names.len()];
    for round in 0..config.rounds.max(1) {
        let seed = config
            .seed
            .wrapping_add(u64::from(round).wrapping_mul(config.threads as u64));
        let terminals = {
            let mut setup = match setup.take() {
                Some(setup) => setup,
                None => connect()?,
            };
            let conn = RemoteConnection::new(&mut setup)?;
            (0..config.threads)
                .map(|i| {
                    workload
                        .terminal(&conn, i, config.threads, seed.wrapping_add(i as u64))
                        .with_context(|| format!("start terminal {i}"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?
        };
        status.say(format_args!(
            "running {} for {} on {} connections ({} s warm-up)...",
            config.workload,
            match config.stop {
                crate::driver::Stop::Duration(d) => format!("{} s", d.as_secs_f64()),
                crate::driver::Stop::Txns(n) => format!("{n} transactions"),
            },
            config.threads,
            config.warmup.as_secs_f64()
        ));
        let mut progress = if config.quiet {
            crate::progress::ProgressLine::with_enabled(false)
        } else {
            crate::progress::ProgressLine::stderr()
        };
        let run = crate::multiplex::drive_multiplexed(
            terminals,
            endpoint,
            workload.name(),
            txn_names,
            side,
            &driver_config,
            &mut progress,
        )
        .with_context(|| format!("run {}", config.workload))?;
        for (t, r) in trips.iter_mut().zip(&run.trips) {
            t.0 += r.0;
            t.1 += r.1;
        }
        let outcome = run.outcome;
        each.push(crate::report::RoundResult::of(
            &outcome.stats.overall(),
            outcome.elapsed,
        ));
        let interrupted = outcome.interrupted;
        crate::run::merge_round(&mut merged, outcome);
        if interrupted {
            break;
        }
    }
    let others_cpu = cpu.and_then(|w| w.share());
    let merged = merged.expect("at least one round ran");
    let outcome = crate::run::Rounds { merged, each };
    let trips = RoundTrips {
        mode,
        rows: txn_names
            .iter()
            .zip(workload.interactions())
            .zip(trips)
            .map(|((name, paper), (n, t))| {
                (
                    name.to_string(),
                    (n > 0).then(|| t as f64 / n as f64),
                    paper,
                )
            })
            .collect(),
    };
    let mut result =
        server_result(config, timestamp, txn_names, &outcome)?.with_others_cpu(others_cpu);
    if mode == Mode::Autocommit {
        result.consistency = crate::report::NOT_ATOMIC.to_string();
    }
    if let Some(path) = &config.json {
        let mut json = serde_json::to_value(&result)?;
        json["round_trips"] = trips.json();
        std::fs::write(path, format!("{json:#}\n"))
            .with_context(|| format!("write results to {}", path.display()))?;
    }
    Ok((result, trips))
}

/// What `glass serve` does besides serving.
pub struct ServeConfig {
    /// The workload, its data and the database, as `glass bench` has them.
    pub bench: BenchConfig,
    pub server: ServerConfig,
    /// Set (by a signal handler) to stop the server.
    pub stop: Arc<AtomicBool>,
}

/// What a server run came to.
pub struct ServeReport {
    pub stats: WorkerStats,
    pub conditions: Vec<Condition>,
    /// Pages the buffer pool read from and wrote to its store while serving.
    pub pool: Option<crate::report::PoolSummary>,
    /// Bytes appended to the log while serving (0 without one).
    pub log_bytes: u64,
}

/// What the consistency check after serving says of the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every condition holds.
    Consistent,
    /// A condition broke, and batches committed alone wrote (`lone_writes` of them,
    /// [`server::WorkerStats::lone_writes`]): what the autocommit mode does by design, since
    /// each step of its procedures commits on its own. Not a fault of the server.
    BrokenByAutocommit { lone_writes: u64 },
    /// A condition broke and no batch was committed alone: every transaction ran whole (as a
    /// stored procedure or an interactive transaction), so the server is at fault.
    Fault,
}

impl ServeReport {
    pub fn consistent(&self) -> bool {
        self.conditions.iter().all(Condition::holds)
    }

    pub fn verdict(&self) -> Verdict {
        if self.consistent() {
            Verdict::Consistent
        } else if self.stats.lone_writes > 0 {
            Verdict::BrokenByAutocommit {
                lone_writes: self.stats.lone_writes,
            }
        } else {
            Verdict::Fault
        }
    }
}

/// Opens (loading if needed) the database, serves it until `config.stop` is set, then stops
/// cleanly and checks the workload's consistency. `listening` is told each endpoint once the
/// server accepts connections.
pub fn run_serve(
    config: &ServeConfig,
    listening: &mut dyn FnMut(&Endpoint),
) -> anyhow::Result<ServeReport> {
    let status = Status::new(config.bench.quiet);
    let bench = &config.bench;
    let workload = build_workload(&bench.workload, &bench.options)?;
    let mut db_config = bench.db.clone();
    db_config.threads = config.server.workers;
    if db_config.pool_mib == 0 {
        let run = crate::capacity::RunLength::Open {
            threads: config.server.workers,
        };
        db_config.pool_mib =
            crate::capacity::default_pool_mib(&bench.workload, &bench.options, &db_config, run);
    }
    crate::run::validate_switches(&db_config.switches, config.server.workers)?;
    let (db, _) = open_loaded(
        "serve",
        &bench.workload,
        workload.as_ref(),
        &bench.options,
        &db_config,
        &status,
    )?;
    let pool_before = db.pool().map(|p| p.io());
    let log_bytes = || db.log().map_or(0, |l| l.stats().bytes);
    let log_before = log_bytes();
    let server = Server::start(Arc::clone(&db), workload.as_ref(), config.server.clone())
        .context("start the server")?;
    for endpoint in server.endpoints() {
        listening(endpoint);
    }
    status.say(format_args!(
        "serving {} with {} {} worker{}; stop with Ctrl-C (SIGINT) or SIGTERM",
        bench.workload,
        config.server.workers,
        config.server.arch,
        if config.server.workers == 1 { "" } else { "s" }
    ));
    while !config.stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(50));
    }
    status.say(format_args!("stopping..."));
    let stats = server.stop();
    let pool = crate::report::PoolSummary::since(&db, &db_config, pool_before);
    let log_bytes = log_bytes().saturating_sub(log_before);
    status.say(format_args!(
        "served {} connections, {} requests ({} refused, {} idle transactions aborted; {} \
         batches parked behind a lock of their worker, {} of them run again in time, \
         {} times one waited on for the next holder instead); checking consistency...",
        stats.connections,
        stats.requests,
        stats.refused,
        stats.timed_out,
        stats.parked,
        stats.unparked,
        stats.handed_on
    ));
    if let Some(locks) = db.lock_manager().map(|m| m.stats()) {
        status.say(format_args!(
            "locks: {} waits (mean {:.1} µs), {} deadlock{}, {} waits refused for a \
             transaction of the same worker, {} timeout{}",
            locks.waits,
            locks.wait_ns as f64 / locks.waits.max(1) as f64 / 1e3,
            locks.deadlocks,
            crate::report::plural(locks.deadlocks as usize),
            locks.same_thread,
            locks.timeouts,
            crate::report::plural(locks.timeouts as usize)
        ));
    }
    let conditions = crate::run::check_consistency(workload.as_ref(), &db, config.bench.quiet)?;
    db.close().context("close the database")?;
    Ok(ServeReport {
        stats,
        conditions,
        pool,
        log_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(violated: bool, lone_writes: u64) -> ServeReport {
        ServeReport {
            stats: WorkerStats {
                lone_writes,
                ..WorkerStats::default()
            },
            pool: None,
            log_bytes: 0,
            conditions: vec![Condition {
                name: "TPC-C 3.3.2.1".to_string(),
                description: "W_YTD = sum(D_YTD)".to_string(),
                violation: violated.then(|| "warehouse 1: 10 != 12".to_string()),
            }],
        }
    }

    #[test]
    fn a_broken_condition_is_a_fault_unless_batches_committed_alone() {
        assert_eq!(report(false, 0).verdict(), Verdict::Consistent);
        assert_eq!(report(false, 5).verdict(), Verdict::Consistent);
        assert_eq!(
            report(true, 5).verdict(),
            Verdict::BrokenByAutocommit { lone_writes: 5 }
        );
        assert_eq!(report(true, 0).verdict(), Verdict::Fault);
    }
}
