//! The multiplexed client against a real server: one thread drives many connections, as
//! stored-procedure calls and as interactive transactions (a coroutine each), an exact
//! transaction budget is met, the database stays consistent, an open loop runs at its rate,
//! and a connection idle in it holds no locks.

use std::sync::Arc;
use std::time::Duration;

use bench::acklog::{verify, AckLog};
use bench::driver::{DriverConfig, DriverError, Stop};
use bench::multiplex::{drive_multiplexed, ClientSide, Multiplexed};
use bench::progress::ProgressLine;
use bench::remote::Mode;
use client::{Client, RemoteConnection};
use engine::db::{Database, DbConfig};
use protocol::Endpoint;
use server::{Arch, Server, ServerConfig};
use workloads::tpcb::{Tpcb, TpcbConfig};
use workloads::ycsb::{CoreWorkload, Ycsb, YcsbConfig};
use workloads::Distribution;
use workloads::{Terminal, Workload};

fn serve() -> (Arc<dyn Workload>, Server, Arc<Database>) {
    serve_branches(4, 2)
}

fn serve_branches(branches: u64, workers: usize) -> (Arc<dyn Workload>, Server, Arc<Database>) {
    let w: Arc<dyn Workload> = Arc::new(
        Tpcb::new(TpcbConfig {
            accounts_per_branch: 1000,
            ..TpcbConfig::new(branches)
        })
        .unwrap(),
    );
    serve_workload(w, workers, ServerConfig::default())
}

fn serve_workload(
    w: Arc<dyn Workload>,
    workers: usize,
    config: ServerConfig,
) -> (Arc<dyn Workload>, Server, Arc<Database>) {
    // A worker serves one request at a time, so a lock wait behind an interactive transaction
    // whose next request is queued can only time out (as `glass serve --lock-wait-ms`).
    let db = Database::open(DbConfig {
        threads: 2,
        lock_wait_timeout: Duration::from_millis(50),
        ..DbConfig::default()
    })
    .unwrap();
    w.create_schema(&db).unwrap();
    w.load(&db, &|_, _| {}).unwrap();
    let server = Server::start(
        Arc::clone(&db),
        w.as_ref(),
        ServerConfig {
            arch: Arch::Dedicated,
            workers,
            // Loopback TCP unless the test names its endpoints.
            listen: match config.listen.is_empty() {
                true => vec![Endpoint::Tcp("127.0.0.1:0".parse().unwrap())],
                false => config.listen.clone(),
            },
            ..config
        },
    )
    .unwrap();
    (w, server, db)
}

fn terminals(w: &dyn Workload, endpoint: &Endpoint, n: usize) -> Vec<Box<dyn Terminal>> {
    let mut setup = Client::connect(endpoint).unwrap();
    let conn = RemoteConnection::new(&mut setup).unwrap();
    (0..n)
        .map(|i| w.terminal(&conn, i, n, i as u64).unwrap())
        .collect()
}

/// Drives `connections` of `w`'s terminals from this thread in `mode`, naming the workload
/// `workload` to the server.
fn drive(
    w: &dyn Workload,
    server: &Server,
    connections: usize,
    workload: &str,
    mode: Mode,
    config: &DriverConfig,
) -> Result<Multiplexed, DriverError> {
    drive_reading_ahead(w, server, connections, workload, mode, config, true)
}

/// [`drive`], the client reading ahead on the procedures' hints or not.
fn drive_reading_ahead(
    w: &dyn Workload,
    server: &Server,
    connections: usize,
    workload: &str,
    mode: Mode,
    config: &DriverConfig,
    read_ahead: bool,
) -> Result<Multiplexed, DriverError> {
    let endpoint = server.endpoints()[0].clone();
    let terminals = terminals(w, &endpoint, connections);
    let side = ClientSide {
        mode,
        read_ahead,
        ack_log: None,
    };
    drive_side(terminals, &endpoint, workload, w, side, config)
}

fn drive_side(
    terminals: Vec<Box<dyn Terminal>>,
    endpoint: &Endpoint,
    workload: &str,
    w: &dyn Workload,
    side: ClientSide<'_>,
    config: &DriverConfig,
) -> Result<Multiplexed, DriverError> {
    drive_multiplexed(
        terminals,
        endpoint,
        workload,
        w.txn_names(),
        side,
        config,
        &mut ProgressLine::with_enabled(false),
    )
}

/// Drives `terminals`, a connection each to `endpoint`, from this thread in `mode`, appending
/// each acknowledged commit's receipts to `ack_log` if one is given.
fn drive_these(
    w: &dyn Workload,
    terminals: Vec<Box<dyn Terminal>>,
    endpoint: &Endpoint,
    workload: &str,
    mode: Mode,
    config: &DriverConfig,
    ack_log: Option<&AckLog>,
) -> Result<Multiplexed, DriverError> {
    let side = ClientSide {
        mode,
        read_ahead: true,
        ack_log,
    };
    drive_side(terminals, endpoint, workload, w, side, config)
}

/// Every consistency condition of `w` holds in the server's database.
fn assert_consistent(w: &dyn Workload, db: &Arc<Database>) {
    let conditions = w.check(db).unwrap();
    assert!(conditions.iter().all(|c| c.holds()), "{conditions:?}");
}

/// A run of `n` measured transactions.
fn budget(n: u64) -> DriverConfig {
    DriverConfig {
        stop: Stop::Txns(n),
        ..DriverConfig::default()
    }
}

#[test]
fn one_thread_drives_many_connections_to_an_exact_budget() {
    let (w, server, db) = serve();
    let config = budget(600);
    let out = drive(
        w.as_ref(),
        &server,
        32,
        "tpcb",
        Mode::StoredProcedure,
        &config,
    )
    .unwrap()
    .outcome;
    assert_eq!(out.stats.overall().count(), 600);
    let stats = server.stop();
    assert_eq!(stats.connections, 33, "32 driven and the set-up one");
    // TPC-B's balances agree, and every committed call left a history row.
    assert_consistent(w.as_ref(), &db);
}

#[test]
fn an_open_loop_runs_at_its_rate_and_a_wrong_workload_is_refused() {
    let (w, server, _db) = serve();
    let config = DriverConfig {
        stop: Stop::Duration(Duration::from_millis(800)),
        rate: Some(500.0),
        ..DriverConfig::default()
    };
    let out = drive(
        w.as_ref(),
        &server,
        8,
        "tpcb",
        Mode::StoredProcedure,
        &config,
    )
    .unwrap()
    .outcome;
    let tps = out.stats.overall().count() as f64 / out.elapsed.as_secs_f64();
    assert!((350.0..=650.0).contains(&tps), "{tps}");
    let err = drive(
        w.as_ref(),
        &server,
        1,
        "voter",
        Mode::StoredProcedure,
        &DriverConfig::default(),
    )
    .expect_err("the server serves tpcb");
    let cause = std::error::Error::source(&err).map(|s| s.to_string());
    assert!(
        cause
            .as_deref()
            .is_some_and(|c| c.contains("serves tpcb, not voter")),
        "{err}: {cause:?}"
    );
    server.stop();
}

/// Interactive transactions from one thread: each connection's procedure runs on a coroutine
/// that waits for its own round trips, 64 of them at once on this thread; the budget is met
/// exactly, every transaction took the round trips the client library promises, and the
/// server's database stays consistent (autocommit's is not atomic, so not checked).
#[test]
fn one_thread_runs_many_interactive_transactions_on_coroutines() {
    for mode in [Mode::Interactive, Mode::Autocommit] {
        let (w, server, db) = serve_branches(64, 4);
        let config = budget(400);
        let out = drive(w.as_ref(), &server, 64, "tpcb", mode, &config).unwrap();
        let stats = out.outcome.stats.overall();
        assert_eq!(stats.count(), 400, "{mode:?}");
        let (ended, trips) = out.trips[0];
        assert!(ended >= 400, "{mode:?}: {ended}");
        // AccountUpdate reads its account, teller and branch for update and writes the three
        // and a history row. Interactive: the three hinted reads in one round trip, the four
        // deferred writes with the commit in a second; autocommit: each of the seven
        // operations a round trip. Exact even under retries: only ended attempts count.
        let per = trips as f64 / ended as f64;
        let expected = if mode == Mode::Interactive { 2.0 } else { 7.0 };
        assert_eq!(per, expected, "{mode:?}: round trips per transaction");
        server.stop();
        if mode == Mode::Interactive {
            assert_consistent(w.as_ref(), &db);
        }
    }
}

/// Interactive transactions that conflict (sixteen connections on four branches, locks held
/// across round trips). Reading ahead, the conflicts meet a transaction's first batch (its
/// hinted reads), which the server parks until the holder ends; without it, they meet later
/// batches too, which the server takes back to where they began and parks the same way (a
/// deadlock's victim, or one of two parked behind each other at the bound, is refused, and
/// retried after a back-off on its coroutine while the others go on). Either way every
/// transaction ends, and the database stays consistent.
#[test]
fn conflicting_interactive_transactions_are_parked_or_retried_and_stay_consistent() {
    for read_ahead in [true, false] {
        let (w, server, db) = serve_branches(4, 4);
        let config = budget(300);
        let mode = Mode::Interactive;
        let out = drive_reading_ahead(w.as_ref(), &server, 16, "tpcb", mode, &config, read_ahead)
            .unwrap();
        let stats = out.outcome.stats.overall();
        assert_eq!(stats.count(), 300);
        let served = server.stop();
        assert!(
            served.parked > 0,
            "no batch met a conflict (read ahead: {read_ahead})"
        );
        assert_consistent(w.as_ref(), &db);
    }
}

/// In an open loop a connection sits idle between its slots: an interactive read-only
/// transaction's lazy commit (which would ride on the connection's next request) goes out at
/// once, so its locks are not held until the next slot. With slots 200 ms apart (the loop
/// gives each slot the connection freed last, so one connection takes them all) and a server
/// that aborts a transaction idle for 100 ms, any lazy commit left waiting would be a
/// transaction timed out.
#[test]
fn an_idle_connection_in_an_open_loop_holds_no_transaction_open() {
    let w: Arc<dyn Workload> = Arc::new(
        Ycsb::new(YcsbConfig {
            record_count: 1000,
            workload: CoreWorkload::from_letter('C').unwrap(),
            distribution: Distribution::Uniform,
            field_size: 10,
            field_count: 2,
        })
        .unwrap(),
    );
    let (w, server, _db) = serve_workload(
        w,
        2,
        ServerConfig {
            idle_timeout: Duration::from_millis(100),
            ..ServerConfig::default()
        },
    );
    let config = DriverConfig {
        stop: Stop::Duration(Duration::from_millis(1500)),
        warmup: Duration::ZERO,
        rate: Some(5.0),
        ..DriverConfig::default()
    };
    let out = drive(w.as_ref(), &server, 4, "ycsb", Mode::Interactive, &config).unwrap();
    let (ended, trips) = out.trips[0];
    assert!(ended >= 6, "{ended} reads at 5 a second for 1.5 s");
    assert_eq!(trips, ended, "a read is one round trip");
    let stats = server.stop();
    assert_eq!(stats.timed_out, 0, "a lazy commit waited for the next slot");
}

/// A terminal whose transaction body (`run`, on a coroutine when interactive) and whose
/// stored-procedure result handler (`returned`) panic on its `after`-th transaction: a bug in a
/// workload.
struct PanicsAfter {
    inner: Box<dyn Terminal>,
    after: u32,
}

impl PanicsAfter {
    fn count(&mut self) {
        self.after = self.after.saturating_sub(1);
        if self.after == 0 {
            panic!("a bug in the workload");
        }
    }
}

impl Terminal for PanicsAfter {
    fn next(&mut self) -> usize {
        self.inner.next()
    }
    fn run(&mut self, tx: &mut dyn engine::Tx) -> engine::TxResult<()> {
        self.count();
        self.inner.run(tx)
    }
    fn args(&self, out: &mut Vec<engine::Value>) -> engine::TxResult<()> {
        self.inner.args(out)
    }
    fn returned(&mut self, values: &[engine::Value]) -> engine::TxResult<()> {
        self.count();
        self.inner.returned(values)
    }
}

/// A panic in a workload's code, on a coroutine or in a stored procedure's result handler,
/// ends the run as the threaded driver's does, as `DriverError::Panicked` naming the terminal
/// and the message, not as a panic out of the client; the server drops the connection's
/// transaction and the database stays consistent.
#[test]
fn a_panic_in_a_workload_ends_the_run_as_an_error() {
    for mode in [Mode::StoredProcedure, Mode::Interactive] {
        let (w, server, db) = serve_branches(8, 2);
        let endpoint = server.endpoints()[0].clone();
        let mut connections = terminals(w.as_ref(), &endpoint, 8);
        let inner = connections.remove(3);
        connections.insert(3, Box::new(PanicsAfter { inner, after: 5 }));
        let result = drive_these(
            w.as_ref(),
            connections,
            &endpoint,
            "tpcb",
            mode,
            &budget(400),
            None,
        );
        match result {
            Err(DriverError::Panicked { terminal, message }) => {
                assert_eq!(terminal, 3, "{mode:?}");
                assert_eq!(message, "a bug in the workload", "{mode:?}");
            }
            other => panic!("{mode:?}: {other:?}"),
        }
        server.stop();
        assert_consistent(w.as_ref(), &db);
    }
}

/// Through shared memory (no socket, nothing to poll) every mode runs from one thread too:
/// the loop spins over the waiting connections' slots. Sixteen connections on a region of
/// sixteen slots (the terminals' set-up connection is gone before the run), an exact budget
/// in each mode, the database consistent after the atomic ones.
#[test]
fn one_thread_drives_shared_memory_connections_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    for mode in [Mode::StoredProcedure, Mode::Interactive, Mode::Autocommit] {
        let w: Arc<dyn Workload> = Arc::new(
            Tpcb::new(TpcbConfig {
                accounts_per_branch: 1000,
                ..TpcbConfig::new(16)
            })
            .unwrap(),
        );
        let region = dir.path().join(format!("region-{}", mode.name()));
        let (w, server, db) = serve_workload(
            w,
            2,
            ServerConfig {
                listen: vec![Endpoint::Shm(region)],
                shm_slots: 16,
                ..ServerConfig::default()
            },
        );
        let endpoint = server.endpoints()[0].clone();
        // The set-up connection's slot is freed once the server sees it released.
        let terminals = terminals(w.as_ref(), &endpoint, 16);
        let out = drive_these(
            w.as_ref(),
            terminals,
            &endpoint,
            "tpcb",
            mode,
            &budget(300),
            None,
        )
        .unwrap();
        assert_eq!(out.outcome.stats.overall().count(), 300, "{mode:?}");
        let (ended, trips) = out.trips[0];
        let expected = match mode {
            Mode::StoredProcedure => 1.0,
            Mode::Interactive => 2.0,
            Mode::Autocommit => 7.0,
        };
        assert_eq!(trips as f64 / ended as f64, expected, "{mode:?}");
        server.stop();
        if mode != Mode::Autocommit {
            assert_consistent(w.as_ref(), &db);
        }
    }
}

/// With an ack log, every commit the loop takes the answer of leaves its receipts, from a
/// stored procedure's terminal and from an interactive procedure's coroutine alike, and the
/// server's database holds every one of them.
#[test]
fn an_ack_log_records_every_acknowledged_commit() {
    let dir = tempfile::tempdir().unwrap();
    for mode in [Mode::StoredProcedure, Mode::Interactive] {
        let (w, server, db) = serve_branches(16, 2);
        let endpoint = server.endpoints()[0].clone();
        let path = dir.path().join(format!("acks-{}", mode.name()));
        let log = AckLog::open(&path, "tpcb", false).unwrap();
        let terminals = terminals(w.as_ref(), &endpoint, 8);
        let out = drive_these(
            w.as_ref(),
            terminals,
            &endpoint,
            "tpcb",
            mode,
            &budget(200),
            Some(&log),
        )
        .unwrap();
        server.stop();
        // Warm-up included: every commit the run made, measured or not.
        let committed = out.trips[0].0;
        assert!(committed >= 200, "{mode:?}: {committed}");
        let report = verify(&db, "tpcb", &path).unwrap();
        assert_eq!(
            report.not_durable_missing,
            0,
            "{mode:?}: {}",
            report.render()
        );
        // One history row a TPC-B commit.
        assert_eq!(report.not_durable as u64, committed, "{mode:?}");
    }
}
