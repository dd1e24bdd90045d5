//! The multiplexed stored-procedure client against a real server: one thread drives many
//! connections, an exact transaction budget is met, the database stays consistent, and an
//! open loop runs at its rate.

use std::sync::Arc;
use std::time::Duration;

use bench::driver::{DriverConfig, Stop};
use bench::multiplex::drive_multiplexed;
use bench::progress::ProgressLine;
use client::{Client, RemoteConnection};
use engine::db::{Database, DbConfig};
use protocol::Endpoint;
use server::{Arch, Server, ServerConfig};
use workloads::tpcb::{Tpcb, TpcbConfig};
use workloads::{Terminal, Workload};

fn serve() -> (Arc<dyn Workload>, Server, Arc<Database>) {
    let w: Arc<dyn Workload> = Arc::new(
        Tpcb::new(TpcbConfig {
            accounts_per_branch: 1000,
            ..TpcbConfig::new(4)
        })
        .unwrap(),
    );
    let db = Database::open(DbConfig {
        threads: 2,
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
            workers: 2,
            listen: vec![Endpoint::Tcp("127.0.0.1:0".parse().unwrap())],
            ..ServerConfig::default()
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

#[test]
fn one_thread_drives_many_connections_to_an_exact_budget() {
    let (w, server, db) = serve();
    let endpoint = server.endpoints()[0].clone();
    let config = DriverConfig {
        stop: Stop::Txns(600),
        ..DriverConfig::default()
    };
    let out = drive_multiplexed(
        terminals(w.as_ref(), &endpoint, 32),
        &endpoint,
        "tpcb",
        w.txn_names(),
        &config,
        &mut ProgressLine::with_enabled(false),
    )
    .unwrap();
    assert_eq!(out.stats.overall().count(), 600);
    let stats = server.stop();
    assert_eq!(stats.connections, 33, "32 driven and the set-up one");
    // TPC-B's balances agree, and every committed call left a history row.
    let conditions = w.check(&db).unwrap();
    assert!(conditions.iter().all(|c| c.holds()), "{conditions:?}");
}

#[test]
fn an_open_loop_runs_at_its_rate_and_a_wrong_workload_is_refused() {
    let (w, server, _db) = serve();
    let endpoint = server.endpoints()[0].clone();
    let config = DriverConfig {
        stop: Stop::Duration(Duration::from_millis(800)),
        rate: Some(500.0),
        ..DriverConfig::default()
    };
    let out = drive_multiplexed(
        terminals(w.as_ref(), &endpoint, 8),
        &endpoint,
        "tpcb",
        w.txn_names(),
        &config,
        &mut ProgressLine::with_enabled(false),
    )
    .unwrap();
    let tps = out.stats.overall().count() as f64 / out.elapsed.as_secs_f64();
    assert!((350.0..=650.0).contains(&tps), "{tps}");
    let err = drive_multiplexed(
        terminals(w.as_ref(), &endpoint, 1),
        &endpoint,
        "voter",
        w.txn_names(),
        &DriverConfig::default(),
        &mut ProgressLine::with_enabled(false),
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
