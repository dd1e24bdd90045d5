//! The server end to end, under both thread architectures: stored procedures and interactive
//! transactions over TCP and Unix sockets, locks held across round trips and released when a
//! client goes away or idles too long, bad frames answered and their connection alone closed,
//! many connections held, a bounded number admitted, and a clean stop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{Client, RemoteConnection};
use engine::db::{Database, DbConfig};
use engine::{Fetch, Tx, TxError, Value};
use protocol::{Endpoint, ErrorClass, Op, OpResult, Request, Response};
use server::{Arch, Server, ServerConfig};
use workloads::tpcb::{Tpcb, TpcbConfig, ACCOUNT, HISTORY};
use workloads::Workload;

const ARCHS: [Arch; 2] = [Arch::Dedicated, Arch::Unified];

fn tpcb() -> Arc<dyn Workload> {
    Arc::new(
        Tpcb::new(TpcbConfig {
            accounts_per_branch: 1000,
            ..TpcbConfig::new(2)
        })
        .unwrap(),
    )
}

/// A loaded in-memory TPC-B database served on a free TCP port and a Unix socket in `dir`.
fn start(
    w: &dyn Workload,
    arch: Arch,
    dir: &tempfile::TempDir,
    tweak: impl FnOnce(&mut ServerConfig),
) -> (Server, Arc<Database>) {
    start_waiting(w, arch, dir, LONG_WAIT, tweak)
}

/// [`start`], with lock waits bounded by `lock_wait`.
fn start_waiting(
    w: &dyn Workload,
    arch: Arch,
    dir: &tempfile::TempDir,
    lock_wait: Duration,
    tweak: impl FnOnce(&mut ServerConfig),
) -> (Server, Arc<Database>) {
    let db = Database::open(DbConfig {
        threads: 2,
        lock_wait_timeout: lock_wait,
        ..DbConfig::default()
    })
    .unwrap();
    w.create_schema(&db).unwrap();
    w.load(&db, &|_, _| {}).unwrap();
    let mut config = ServerConfig {
        arch,
        workers: 2,
        listen: vec![
            Endpoint::Tcp("127.0.0.1:0".parse().unwrap()),
            Endpoint::Unix(dir.path().join("glass.sock")),
        ],
        ..ServerConfig::default()
    };
    tweak(&mut config);
    let server = Server::start(Arc::clone(&db), w, config).unwrap();
    (server, db)
}

fn tcp(server: &Server) -> Endpoint {
    server.endpoints()[0].clone()
}

fn account(id: i64) -> Op {
    Op::Get {
        table: 0,
        key: vec![Value::Int(id)],
        columns: None,
        for_update: true,
    }
}

/// The table id of TPC-B's accounts on the server.
fn account_table(client: &mut Client) -> u32 {
    let catalog = client.catalog().unwrap();
    catalog.tables.iter().find(|(n, _)| n == ACCOUNT).unwrap().1
}

fn lock_account(client: &mut Client, table: u32, id: i64) {
    let mut op = account(id);
    if let Op::Get { table: t, .. } = &mut op {
        *t = table;
    }
    let results = client.batch(vec![op], false).unwrap();
    assert!(matches!(&results[0], OpResult::Row(Some(_))), "{results:?}");
    assert!(client.in_transaction());
}

/// [`start`]'s lock wait bound: longer than any test waits.
const LONG_WAIT: Duration = Duration::from_secs(5);

/// A TPC-B server with `workers` workers and lock waits bounded by `lock_wait`, and a client
/// whose open transaction holds account 5 exclusively; `table` is the accounts' id.
struct Held {
    server: Server,
    db: Arc<Database>,
    holder: Client,
    table: u32,
    _dir: tempfile::TempDir,
}

fn holding_account_5(arch: Arch, workers: usize, lock_wait: Duration) -> Held {
    let w = tpcb();
    let dir = tempfile::tempdir().unwrap();
    let (server, db) = start_waiting(w.as_ref(), arch, &dir, lock_wait, |c| c.workers = workers);
    let mut holder = Client::connect(&tcp(&server)).unwrap();
    let table = account_table(&mut holder);
    lock_account(&mut holder, table, 5);
    Held {
        server,
        db,
        holder,
        table,
        _dir: dir,
    }
}

fn update_account(client: &mut Client, table: u32, id: i64) -> Result<Vec<OpResult>, TxError> {
    client.batch(
        vec![Op::Update {
            table,
            key: vec![Value::Int(id)],
            set: vec![(2, Value::Int(7))],
        }],
        true,
    )
}

#[test]
fn stored_procedures_over_tcp_and_unix_leave_the_database_consistent() {
    for arch in ARCHS {
        let w = tpcb();
        let dir = tempfile::tempdir().unwrap();
        let (server, db) = start(w.as_ref(), arch, &dir, |_| {});
        let endpoints = server.endpoints().to_vec();
        assert!(matches!(endpoints[1], Endpoint::Unix(_)));
        std::thread::scope(|s| {
            for i in 0..4 {
                let (w, endpoint) = (&w, endpoints[i % 2].clone());
                s.spawn(move || {
                    let mut client = Client::connect(&endpoint).unwrap();
                    assert_eq!(client.workload(), "tpcb");
                    assert_eq!(client.procedures(), ["account_update"]);
                    let mut terminal = {
                        let conn = RemoteConnection::new(&mut client).unwrap();
                        w.terminal(&conn, i, 4, i as u64).unwrap()
                    };
                    for _ in 0..200 {
                        let kind = terminal.next();
                        let mut args = Vec::new();
                        terminal.args(&mut args).unwrap();
                        loop {
                            match client.call(w.txn_names()[kind], args.clone()) {
                                Ok(values) => {
                                    terminal.returned(&values).unwrap();
                                    break;
                                }
                                Err(e) if e.is_retryable() => {}
                                Err(e) => panic!("{arch}: {e}"),
                            }
                        }
                    }
                    // A catalog and 200 calls.
                    assert!(client.round_trips() >= 201, "{}", client.round_trips());
                });
            }
        });
        let stats = server.stop();
        assert_eq!(stats.connections, 4, "{arch}");
        assert!(stats.requests >= 4 * 202, "{arch}: {stats:?}");
        let conditions = w.check(&db).unwrap();
        assert!(
            conditions.iter().all(|c| c.holds()),
            "{arch}: {conditions:?}"
        );
        let history = db.table(HISTORY).unwrap();
        let rows =
            workloads::util::with_txn(&db, |tx| workloads::util::scan_all(tx, &history, &[0]))
                .unwrap();
        assert_eq!(rows.len(), 800, "{arch}");
    }
}

#[test]
fn an_interactive_transaction_runs_workload_code_and_commits_or_aborts_as_a_whole() {
    for arch in ARCHS {
        let w = tpcb();
        let dir = tempfile::tempdir().unwrap();
        let (server, db) = start(w.as_ref(), arch, &dir, |_| {});
        let mut client = Client::connect(&tcp(&server)).unwrap();
        let conn = RemoteConnection::new(&mut client).unwrap();
        let mut terminal = w.terminal(&conn, 0, 1, 3).unwrap();
        drop(conn);
        for _ in 0..50 {
            terminal.next();
            let result = terminal.run(&mut client.remote_tx(false));
            client::finish(&mut client, result).unwrap();
        }
        // One that fails half-way leaves nothing behind: the server aborts it.
        let table = account_table(&mut client);
        let before = {
            let mut tx = client.remote_tx(true);
            tx.get(
                &engine::TableRef {
                    name: ACCOUNT.into(),
                    id: table,
                },
                &[Value::Int(1)],
                Fetch::All,
                false,
            )
            .unwrap()
        };
        update_account_in(&mut client, table, 1);
        let err = client
            .batch(
                vec![Op::Get {
                    table: 9999,
                    key: vec![],
                    columns: None,
                    for_update: false,
                }],
                false,
            )
            .unwrap_err();
        assert!(matches!(err, TxError::Invalid(_)), "{err}");
        assert!(!client.in_transaction());
        let after = client.batch(vec![account_get(table, 1)], true).unwrap();
        assert_eq!(after, vec![OpResult::Row(before)], "{arch}");
        drop(client);
        server.stop();
        let conditions = w.check(&db).unwrap();
        assert!(
            conditions.iter().all(|c| c.holds()),
            "{arch}: {conditions:?}"
        );
    }
}

fn account_get(table: u32, id: i64) -> Op {
    Op::Get {
        table,
        key: vec![Value::Int(id)],
        columns: None,
        for_update: false,
    }
}

/// Sets account `id`'s balance inside an open (or a new) transaction, without committing.
fn update_account_in(client: &mut Client, table: u32, id: i64) {
    let results = client
        .batch(
            vec![Op::Update {
                table,
                key: vec![Value::Int(id)],
                set: vec![(2, Value::Int(123_456))],
            }],
            false,
        )
        .unwrap();
    assert_eq!(results, vec![OpResult::Found(true)]);
}

#[test]
fn locks_are_held_across_round_trips() {
    for arch in ARCHS {
        let w = tpcb();
        let dir = tempfile::tempdir().unwrap();
        let (server, _db) = start(w.as_ref(), arch, &dir, |_| {});
        let mut holder = Client::connect(&tcp(&server)).unwrap();
        let table = account_table(&mut holder);
        lock_account(&mut holder, table, 5);
        let waited = std::thread::scope(|s| {
            let endpoint = tcp(&server);
            let waiter = s.spawn(move || {
                let mut other = Client::connect(&endpoint).unwrap();
                let started = Instant::now();
                update_account(&mut other, table, 5).unwrap();
                started.elapsed()
            });
            std::thread::sleep(Duration::from_millis(400));
            holder.commit().unwrap();
            waiter.join().unwrap()
        });
        assert!(
            waited >= Duration::from_millis(300),
            "{arch}: the update did not wait for the lock ({waited:?})"
        );
        server.stop();
    }
}

#[test]
fn a_read_committed_interactive_transaction_lets_go_of_its_read_locks() {
    // `Tx::read_committed` travels to the server (`Op::ReadCommitted`, in front of the read it
    // is for): a row read at that level can be updated by another client while the reader's
    // transaction is still open. At the default level the update waits for the reader's end.
    for arch in ARCHS {
        for read_committed in [true, false] {
            let w = tpcb();
            let dir = tempfile::tempdir().unwrap();
            let (server, _db) = start(w.as_ref(), arch, &dir, |_| {});
            let mut reader = Client::connect(&tcp(&server)).unwrap();
            let table = account_table(&mut reader);
            let accounts = engine::TableRef {
                id: table,
                name: ACCOUNT.to_string(),
            };
            let mut tx = reader.remote_tx(false);
            if read_committed {
                tx.read_committed();
            }
            let row = tx
                .get(&accounts, &[Value::Int(5)], Fetch::All, false)
                .unwrap();
            assert!(row.is_some(), "{arch}");
            assert!(reader.in_transaction(), "{arch}");
            std::thread::scope(|s| {
                let endpoint = tcp(&server);
                let (done, finished) = std::sync::mpsc::channel();
                s.spawn(move || {
                    let mut writer = Client::connect(&endpoint).unwrap();
                    // The receiver is gone only once the test has failed.
                    let _ = done.send(update_account(&mut writer, table, 5).map(drop));
                });
                let early = finished.recv_timeout(Duration::from_secs(1));
                if read_committed {
                    assert!(
                        matches!(early, Ok(Ok(()))),
                        "{arch}: the update waited for a read-committed reader: {early:?}"
                    );
                } else {
                    assert!(
                        early.is_err(),
                        "{arch}: the update did not wait for a serializable reader: {early:?}"
                    );
                    reader.commit().unwrap();
                    let late = finished.recv().unwrap();
                    assert!(late.is_ok(), "{arch}: {late:?}");
                }
            });
            if reader.in_transaction() {
                reader.commit().unwrap();
            }
            server.stop();
        }
    }
}

/// Account `id`'s balance, read in a transaction of its own.
fn balance(client: &mut Client, table: u32, id: i64) -> Value {
    let results = client.batch(vec![account_get(table, id)], true).unwrap();
    let [OpResult::Row(Some(row))] = &results[..] else {
        panic!("{results:?}");
    };
    row[2].clone()
}

#[test]
fn a_first_batch_that_meets_a_lock_of_the_same_worker_is_parked_until_its_holder_ends() {
    for arch in ARCHS {
        for holder_commits in [true, false] {
            let Held {
                server,
                db,
                mut holder,
                table,
                _dir,
            } = holding_account_5(arch, 1, LONG_WAIT);
            let refused_before = db.lock_manager().unwrap().stats().same_thread;
            std::thread::scope(|s| {
                let endpoint = tcp(&server);
                let (done, finished) = std::sync::mpsc::channel();
                s.spawn(move || {
                    let mut other = Client::connect(&endpoint).unwrap();
                    let _ = done.send(update_account(&mut other, table, 5).map(drop));
                });
                // The one worker keeps the holder's transaction open: the other's batch, the
                // first of its transaction, is put aside, neither answered nor refused.
                let early = finished.recv_timeout(Duration::from_millis(500));
                assert!(early.is_err(), "{arch}: answered while parked: {early:?}");
                assert!(
                    db.lock_manager().unwrap().stats().same_thread > refused_before,
                    "{arch}: it met the holder's lock"
                );
                // The holder goes on and ends; the parked batch then runs, and commits.
                update_account_in(&mut holder, table, 5);
                if holder_commits {
                    holder.commit().unwrap();
                } else {
                    drop(holder);
                }
                let late = finished.recv_timeout(Duration::from_secs(2));
                assert!(matches!(late, Ok(Ok(()))), "{arch}: {late:?}");
            });
            let mut reader = Client::connect(&tcp(&server)).unwrap();
            assert_eq!(balance(&mut reader, table, 5), Value::Int(7), "{arch}");
            drop(reader);
            let stats = server.stop();
            assert_eq!((stats.parked, stats.unparked), (1, 1), "{arch}");
        }
    }
}

#[test]
fn a_parked_batch_runs_again_when_its_holder_ends_not_when_any_transaction_does() {
    for arch in ARCHS {
        let Held {
            server,
            db,
            mut holder,
            table,
            _dir,
        } = holding_account_5(arch, 1, LONG_WAIT);
        let refusals = || db.lock_manager().unwrap().stats().same_thread;
        std::thread::scope(|s| {
            let endpoint = tcp(&server);
            let (done, finished) = std::sync::mpsc::channel();
            let before = refusals();
            s.spawn(move || {
                let mut other = Client::connect(&endpoint).unwrap();
                let _ = done.send(update_account(&mut other, table, 5).map(drop));
            });
            while refusals() == before {
                std::thread::sleep(Duration::from_millis(1));
            }
            // A third connection of the worker commits transaction after transaction: the
            // parked batch waits for its holder, so none of them runs it again (a sweep, one
            // every tick of at most 100 ms, may).
            let parked = refusals();
            let mut third = Client::connect(&tcp(&server)).unwrap();
            for _ in 0..200 {
                lock_account(&mut third, table, 9);
                third.commit().unwrap();
            }
            let again = refusals() - parked;
            assert!(
                again < 20,
                "{arch}: run again {again} times for 200 others' ends"
            );
            holder.commit().unwrap();
            let late = finished.recv_timeout(Duration::from_secs(2));
            assert!(matches!(late, Ok(Ok(()))), "{arch}: {late:?}");
        });
        server.stop();
    }
}

#[test]
fn batches_parked_behind_one_holder_run_one_at_a_time_oldest_first() {
    const WAITERS: usize = 8;
    for arch in ARCHS {
        let Held {
            server,
            db,
            mut holder,
            table,
            _dir,
        } = holding_account_5(arch, 1, LONG_WAIT);
        let refusals = || db.lock_manager().unwrap().stats().same_thread;
        let order = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            // Each waiter's first batch locks the row the holder has, is parked, and once
            // answered commits at once: the next in line may go.
            for waiter in 0..WAITERS {
                let before = refusals();
                let (endpoint, order) = (tcp(&server), &order);
                s.spawn(move || {
                    let mut client = Client::connect(&endpoint).unwrap();
                    lock_account(&mut client, table, 5);
                    order.lock().unwrap().push(waiter);
                    client.commit().unwrap();
                });
                while refusals() == before {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            let parked = refusals();
            holder.commit().unwrap();
            while order.lock().unwrap().len() < WAITERS {
                std::thread::sleep(Duration::from_millis(1));
            }
            // Woken all at once, every waiter still parked would run at each commit and be
            // refused by the one that went first: 7 + 6 + … + 1 = 28 refusals. One at a
            // time, none (a sweep, one every tick of at most 100 ms, runs all once more).
            let again = refusals() - parked;
            assert!(again < 14, "{arch}: refused {again} times more");
        });
        let order = order.into_inner().unwrap();
        assert_eq!(
            order,
            (0..WAITERS).collect::<Vec<_>>(),
            "{arch}: oldest first"
        );
        let stats = server.stop();
        assert_eq!(stats.parked, WAITERS as u64, "{arch}");
        assert!(stats.handed_on >= (WAITERS - 1) as u64, "{arch}: {stats:?}");
    }
}

#[test]
fn a_parked_batch_is_answered_with_its_failure_once_a_lock_wait_would_have_ended() {
    for arch in ARCHS {
        let bound = Duration::from_millis(300);
        let Held {
            server,
            db: _,
            mut holder,
            table,
            _dir,
        } = holding_account_5(arch, 1, bound);
        let mut other = Client::connect(&tcp(&server)).unwrap();
        let started = Instant::now();
        let err = update_account(&mut other, table, 5).unwrap_err();
        let waited = started.elapsed();
        assert!(waited >= bound, "{arch}: answered after {waited:?}: {err}");
        assert!(waited < Duration::from_secs(3), "{arch}: {waited:?}");
        assert!(err.is_retryable(), "{arch}: {err}");
        assert!(err.to_string().contains("same thread"), "{arch}: {err}");
        // The holder was served all along.
        update_account_in(&mut holder, table, 5);
        holder.commit().unwrap();
        update_account(&mut other, table, 5).unwrap();
        let stats = server.stop();
        assert_eq!((stats.parked, stats.unparked), (1, 0), "{arch}");
    }
}

#[test]
fn a_first_batch_that_waited_out_the_bound_for_another_worker_is_answered_not_parked() {
    for arch in ARCHS {
        let bound = Duration::from_millis(200);
        let Held {
            server,
            db,
            mut holder,
            table,
            _dir,
        } = holding_account_5(arch, 2, bound);
        // Connections are dealt to the workers in turn: this one's batch waits, on the other
        // worker, for the holder, and runs out of time. It has waited as long as a parked
        // batch may, so its failure is answered, not parked to wait (and time out) again.
        let mut other = Client::connect(&tcp(&server)).unwrap();
        let err = update_account(&mut other, table, 5).unwrap_err();
        assert!(err.is_retryable(), "{arch}: {err}");
        assert!(err.to_string().contains("timed out"), "{arch}: {err}");
        assert_eq!(db.lock_manager().unwrap().stats().timeouts, 1, "{arch}");
        holder.commit().unwrap();
        update_account(&mut other, table, 5).unwrap();
        let stats = server.stop();
        assert_eq!(stats.parked, 0, "{arch}");
    }
}

#[test]
fn a_batch_pipelined_behind_one_answered_at_the_bound_may_be_parked_in_turn() {
    for arch in ARCHS {
        let bound = Duration::from_millis(200);
        let Held {
            server,
            db: _,
            mut holder,
            table,
            _dir,
        } = holding_account_5(arch, 1, bound);
        // Two transactions of one batch each, sent at once: both meet the holder's lock. The
        // first is parked and answered its failure at the bound; the second is a request of
        // its own, parked too rather than refused at once.
        let mut bytes = hello();
        for _ in 0..2 {
            Request::Batch {
                autocommit: true,
                ops: vec![Op::Update {
                    table,
                    key: vec![Value::Int(5)],
                    set: vec![(2, Value::Int(7))],
                }],
            }
            .encode(&mut bytes);
        }
        let Endpoint::Tcp(addr) = tcp(&server) else {
            unreachable!()
        };
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&bytes).unwrap();
        let mut buf = protocol::FrameBuffer::new(protocol::DEFAULT_MAX_FRAME);
        let mut answers = Vec::new();
        while answers.len() < 3 {
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0, "{arch}: closed after {answers:?}");
            answers.extend(responses(&mut buf, &chunk[..n]));
        }
        for answer in &answers[1..] {
            assert!(
                matches!(answer, Response::Failed { message, .. } if message.contains("same thread")),
                "{arch}: {answer:?}"
            );
        }
        holder.commit().unwrap();
        drop(s);
        let stats = server.stop();
        assert_eq!((stats.parked, stats.unparked), (2, 0), "{arch}");
    }
}

#[test]
fn a_later_batch_that_meets_a_lock_of_the_same_worker_is_taken_back_and_parked() {
    for arch in ARCHS {
        let Held {
            server,
            db,
            mut holder,
            table,
            _dir,
        } = holding_account_5(arch, 1, LONG_WAIT);
        // The other's transaction has done something already (a lock of its own); its next
        // batch inserts an account, then meets the holder's lock. Waiting would block the
        // worker, and with it the holder's commit: the batch's work is taken back to where
        // it began, and the batch goes again once the holder has ended.
        let mut other = Client::connect(&tcp(&server)).unwrap();
        lock_account(&mut other, table, 6);
        let refused_before = db.lock_manager().unwrap().stats().same_thread;
        let insert = Op::Insert {
            table,
            row: vec![
                Value::Int(50_000),
                Value::Int(1),
                Value::Int(1),
                Value::Str(String::new()),
            ],
        };
        let update = Op::Update {
            table,
            key: vec![Value::Int(5)],
            set: vec![(2, Value::Int(7))],
        };
        std::thread::scope(|s| {
            let (done, finished) = std::sync::mpsc::channel();
            let other = &mut other;
            s.spawn(move || {
                let _ = done.send(other.batch(vec![insert, update], false));
            });
            let early = finished.recv_timeout(Duration::from_millis(300));
            assert!(early.is_err(), "{arch}: answered while parked: {early:?}");
            // The holder was served all along; it ends, and the batch runs again: its insert
            // again too, which finds no row in its way (the first was taken back).
            update_account_in(&mut holder, table, 5);
            holder.commit().unwrap();
            let late = finished.recv_timeout(Duration::from_secs(2));
            assert!(
                matches!(&late, Ok(Ok(r)) if r[..] == [OpResult::Inserted, OpResult::Found(true)]),
                "{arch}: {late:?}"
            );
        });
        other.commit().unwrap();
        // Counted as its transaction ended: it met the holder's lock (once, and again at
        // each sweep while parked).
        assert!(
            db.lock_manager().unwrap().stats().same_thread > refused_before,
            "{arch}"
        );
        let mut reader = Client::connect(&tcp(&server)).unwrap();
        assert_eq!(balance(&mut reader, table, 5), Value::Int(7), "{arch}");
        assert_eq!(balance(&mut reader, table, 50_000), Value::Int(1), "{arch}");
        drop(reader);
        let stats = server.stop();
        assert_eq!((stats.parked, stats.unparked), (1, 1), "{arch}");
    }
}

#[test]
fn a_later_batch_is_refused_not_parked_behind_a_transaction_whose_later_batch_is() {
    for arch in ARCHS {
        let Held {
            server,
            db: _,
            mut holder,
            table,
            _dir,
        } = holding_account_5(arch, 1, LONG_WAIT);
        let mut other = Client::connect(&tcp(&server)).unwrap();
        lock_account(&mut other, table, 6);
        // Each asks for the other's row. The other's batch is parked behind the holder; the
        // holder's, parked behind it, would wait for it as it waits for the holder (until the
        // bound, 5 s): refused at once instead, it ends the holder's transaction, and the
        // other's batch goes on.
        std::thread::scope(|s| {
            let (done, finished) = std::sync::mpsc::channel();
            let other = &mut other;
            s.spawn(move || {
                let _ = done.send(other.batch(vec![account_get(table, 5)], false));
            });
            let early = finished.recv_timeout(Duration::from_millis(300));
            assert!(early.is_err(), "{arch}: answered while parked: {early:?}");
            let started = Instant::now();
            let err = holder
                .batch(vec![account_get(table, 6)], false)
                .unwrap_err();
            assert!(started.elapsed() < Duration::from_secs(2), "{arch}: {err}");
            assert!(err.is_retryable(), "{arch}: {err}");
            assert!(err.to_string().contains("same thread"), "{arch}: {err}");
            assert!(!holder.in_transaction(), "{arch}");
            let late = finished.recv_timeout(Duration::from_secs(2));
            assert!(matches!(late, Ok(Ok(_))), "{arch}: {late:?}");
        });
        other.commit().unwrap();
        let stats = server.stop();
        assert_eq!((stats.parked, stats.unparked), (1, 1), "{arch}");
    }
}

#[test]
fn a_client_that_disconnects_mid_transaction_releases_its_locks_at_once() {
    for arch in ARCHS {
        let w = tpcb();
        let dir = tempfile::tempdir().unwrap();
        let (server, _db) = start(w.as_ref(), arch, &dir, |_| {});
        let mut holder = Client::connect(&tcp(&server)).unwrap();
        let table = account_table(&mut holder);
        lock_account(&mut holder, table, 9);
        drop(holder);
        let mut other = Client::connect(&tcp(&server)).unwrap();
        let started = Instant::now();
        update_account(&mut other, table, 9).unwrap();
        // The lock wait limit is 5 s: an update this fast found the lock released.
        assert!(started.elapsed() < Duration::from_secs(2), "{arch}");
        server.stop();
    }
}

#[test]
fn an_idle_interactive_transaction_times_out_and_releases_its_locks() {
    for arch in ARCHS {
        let w = tpcb();
        let dir = tempfile::tempdir().unwrap();
        let (server, _db) = start(w.as_ref(), arch, &dir, |c| {
            c.idle_timeout = Duration::from_millis(200);
        });
        let mut idler = Client::connect(&tcp(&server)).unwrap();
        let table = account_table(&mut idler);
        lock_account(&mut idler, table, 11);
        std::thread::sleep(Duration::from_millis(700));
        let mut other = Client::connect(&tcp(&server)).unwrap();
        let started = Instant::now();
        update_account(&mut other, table, 11).unwrap();
        assert!(started.elapsed() < Duration::from_secs(2), "{arch}");
        let err = idler
            .batch(vec![account_get(table, 11)], false)
            .unwrap_err();
        assert!(err.to_string().contains("idle"), "{arch}: {err}");
        // The connection goes on.
        idler.batch(vec![account_get(table, 11)], true).unwrap();
        server.stop();
    }
}

/// Writes `bytes` on a raw socket; returns what the server sent before closing.
fn raw_exchange(endpoint: &Endpoint, bytes: &[u8]) -> Vec<u8> {
    let Endpoint::Tcp(addr) = endpoint else {
        unreachable!()
    };
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(bytes).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    got
}

/// The responses whole in `buf` once `bytes` are added to it, decoded.
fn responses(buf: &mut protocol::FrameBuffer, bytes: &[u8]) -> Vec<Response> {
    buf.push(bytes);
    let mut answers = Vec::new();
    while let Some(frame) = buf.next_frame().unwrap() {
        answers.push(Response::decode(frame).unwrap());
    }
    answers
}

fn failure_in(bytes: &[u8]) -> (ErrorClass, String) {
    let mut buf = protocol::FrameBuffer::new(protocol::DEFAULT_MAX_FRAME);
    buf.push(bytes);
    let frame = buf.next_frame().unwrap().expect("a whole frame came back");
    match Response::decode(frame).unwrap() {
        Response::Failed { class, message } => (class, message),
        other => panic!("expected a failure, got {other:?}"),
    }
}

fn hello() -> Vec<u8> {
    let mut out = Vec::new();
    Request::Hello {
        magic: protocol::MAGIC,
        version: protocol::VERSION,
        max_frame: protocol::DEFAULT_MAX_FRAME,
    }
    .encode(&mut out);
    out
}

#[test]
fn a_bad_frame_gets_an_error_and_closes_its_connection_only() {
    for arch in ARCHS {
        let w = tpcb();
        let dir = tempfile::tempdir().unwrap();
        let (server, _db) = start(w.as_ref(), arch, &dir, |_| {});
        let endpoint = tcp(&server);
        let mut good = Client::connect(&endpoint).unwrap();
        let table = account_table(&mut good);

        // Not our protocol at all: its first four bytes read as a length far over the limit.
        let got = raw_exchange(&endpoint, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        let (class, message) = failure_in(&got);
        assert_eq!(class, ErrorClass::Protocol, "{arch}: {message}");
        assert!(message.contains("maximum"), "{arch}: {message}");

        // A request before the handshake.
        let mut begin = Vec::new();
        Request::Begin.encode(&mut begin);
        let (class, message) = failure_in(&raw_exchange(&endpoint, &begin));
        assert_eq!(class, ErrorClass::Protocol, "{arch}");
        assert!(message.contains("Hello"), "{arch}: {message}");

        // An unknown kind and a truncated body after a good handshake.
        for bad in [vec![1u8, 0, 0, 0, 0x42], vec![3u8, 0, 0, 0, 0x03, 9, 0]] {
            let mut bytes = hello();
            bytes.extend_from_slice(&bad);
            let got = raw_exchange(&endpoint, &bytes);
            let mut buf = protocol::FrameBuffer::new(protocol::DEFAULT_MAX_FRAME);
            buf.push(&got);
            let welcome = Response::decode(buf.next_frame().unwrap().unwrap()).unwrap();
            assert!(matches!(welcome, Response::Welcome { .. }), "{welcome:?}");
            let rest = buf.next_frame().unwrap().unwrap().to_vec();
            let mut framed = (rest.len() as u32).to_le_bytes().to_vec();
            framed.extend_from_slice(&rest);
            assert_eq!(failure_in(&framed).0, ErrorClass::Protocol, "{arch}");
        }

        // Everyone else is still served.
        update_account(&mut good, table, 3).unwrap();
        server.stop();
    }
}

#[test]
fn a_thousand_connections_are_held_at_once() {
    for arch in ARCHS {
        let w = tpcb();
        let dir = tempfile::tempdir().unwrap();
        let (server, _db) = start(w.as_ref(), arch, &dir, |_| {});
        let endpoint = tcp(&server);
        let mut clients: Vec<Client> = (0..1000)
            .map(|_| Client::connect(&endpoint).unwrap())
            .collect();
        assert_eq!(server.open_connections(), 1000, "{arch}");
        let table = account_table(&mut clients[0]);
        for (i, c) in clients.iter_mut().enumerate() {
            let got = c
                .batch(vec![account_get(table, 1 + i as i64)], true)
                .unwrap();
            assert!(matches!(&got[0], OpResult::Row(Some(_))), "{arch}");
        }
        drop(clients);
        let stats = server.stop();
        assert_eq!(stats.connections, 1000, "{arch}");
    }
}

#[test]
fn connections_over_the_maximum_are_refused_as_busy() {
    for arch in ARCHS {
        let w = tpcb();
        let dir = tempfile::tempdir().unwrap();
        let (server, _db) = start(w.as_ref(), arch, &dir, |c| c.max_connections = 2);
        let endpoint = tcp(&server);
        let _a = Client::connect(&endpoint).unwrap();
        let _b = Client::connect(&endpoint).unwrap();
        let err = Client::connect(&endpoint)
            .err()
            .expect("a third is refused");
        assert!(err.is_retryable(), "{arch}: {err}");
        assert!(err.to_string().contains("maximum of 2"), "{arch}: {err}");
        let stats = server.stop();
        assert_eq!(stats.refused, 1, "{arch}");
    }
}

#[test]
fn stopping_the_server_aborts_open_transactions() {
    for arch in ARCHS {
        let w = tpcb();
        let dir = tempfile::tempdir().unwrap();
        let (server, db) = start(w.as_ref(), arch, &dir, |_| {});
        let socket = dir.path().join("glass.sock");
        let mut client = Client::connect(&tcp(&server)).unwrap();
        let table = account_table(&mut client);
        update_account_in(&mut client, table, 2);
        server.stop();
        assert!(!socket.exists(), "{arch}: the socket file is left behind");
        assert!(
            client.commit().is_err(),
            "{arch}: a stopped server committed"
        );
        // The update was rolled back: the balance is what the load left.
        let account = db.table(ACCOUNT).unwrap();
        let row = workloads::util::with_txn(&db, |tx| {
            tx.get(&account, &[Value::Int(2)], Fetch::Cols(&[2]), false)
        })
        .unwrap()
        .unwrap();
        assert_eq!(row, vec![Value::Int(0)], "{arch}");
        assert_eq!(db.running_transactions(), 0, "{arch}");
    }
}

#[test]
fn tracing_charges_each_phase_and_counts_transactions() {
    use server::trace::Phase;
    for arch in ARCHS {
        let w = tpcb();
        let dir = tempfile::tempdir().unwrap();
        let (server, _db) = start(w.as_ref(), arch, &dir, |c| c.trace = true);
        let mut client = Client::connect(&tcp(&server)).unwrap();
        let mut terminal = {
            let conn = RemoteConnection::new(&mut client).unwrap();
            w.terminal(&conn, 0, 1, 5).unwrap()
        };
        for _ in 0..100 {
            terminal.next();
            let mut args = Vec::new();
            terminal.args(&mut args).unwrap();
            client.call("account_update", args).unwrap();
        }
        // One interactive transaction: a batch, then its commit.
        let table = account_table(&mut client);
        update_account_in(&mut client, table, 1);
        client.commit().unwrap();
        drop(client);
        let p = server.stop().phases;
        assert_eq!(p.transactions, 101, "{arch}: {p:?}");
        for phase in [
            Phase::SocketRead,
            Phase::Decode,
            Phase::ProcedureExecution,
            Phase::QueryExecution,
            Phase::Encode,
            Phase::NetworkSend,
        ] {
            assert!(
                p.get(phase) > 0,
                "{arch}: nothing charged to {phase:?}: {p:?}"
            );
        }
        let queued = p.get(Phase::RequestQueuing) + p.get(Phase::ResponseQueuing);
        match arch {
            Arch::Dedicated => assert!(queued > 0, "{p:?}"),
            Arch::Unified => assert_eq!(queued, 0, "{p:?}"),
        }
        // The engine's share is inside the threads' CPU time, not beside it.
        assert!(p.user_ns + p.system_ns > 0, "{p:?}");
        assert!(
            p.get(Phase::QueryExecution) < 2 * (p.user_ns + p.system_ns),
            "{arch}: {p:?}"
        );
    }
}

#[test]
fn without_tracing_nothing_is_charged() {
    let w = tpcb();
    let dir = tempfile::tempdir().unwrap();
    let (server, _db) = start(w.as_ref(), Arch::Unified, &dir, |_| {});
    let mut client = Client::connect(&tcp(&server)).unwrap();
    let table = account_table(&mut client);
    update_account(&mut client, table, 4).unwrap();
    drop(client);
    let p = server.stop().phases;
    assert_eq!(p, server::trace::Phases::default());
}

/// A server with only a shared-memory region (the kernel-bypass stand-in).
fn start_shm(w: &dyn Workload, dir: &tempfile::TempDir, slots: usize) -> (Server, Arc<Database>) {
    let region = dir.path().join("region");
    let (server, db) = start(w, Arch::Unified, dir, |c| {
        c.listen = vec![Endpoint::Shm(region.clone())];
        c.shm_slots = slots;
    });
    (server, db)
}

#[test]
fn shared_memory_serves_procedures_and_interactive_transactions() {
    let w = tpcb();
    let dir = tempfile::tempdir().unwrap();
    let (server, db) = start_shm(w.as_ref(), &dir, 4);
    let endpoint = server.endpoints()[0].clone();
    assert!(matches!(endpoint, Endpoint::Shm(_)));
    std::thread::scope(|s| {
        for i in 0..2 {
            let (w, endpoint) = (&w, endpoint.clone());
            s.spawn(move || {
                let mut client = Client::connect(&endpoint).unwrap();
                let mut terminal = {
                    let conn = RemoteConnection::new(&mut client).unwrap();
                    w.terminal(&conn, i, 2, i as u64).unwrap()
                };
                for n in 0..200 {
                    terminal.next();
                    if n % 2 == 0 {
                        let mut args = Vec::new();
                        terminal.args(&mut args).unwrap();
                        loop {
                            match client.call("account_update", args.clone()) {
                                Ok(values) => break terminal.returned(&values).unwrap(),
                                Err(e) if e.is_retryable() => {}
                                Err(e) => panic!("{e}"),
                            }
                        }
                    } else {
                        loop {
                            let r = terminal.run(&mut client.remote_tx(false));
                            match client::finish(&mut client, r) {
                                Ok(()) => break,
                                Err(e) if e.is_retryable() => {}
                                Err(e) => panic!("{e}"),
                            }
                        }
                    }
                }
            });
        }
    });
    let region = dir.path().join("region");
    let stats = server.stop();
    assert_eq!(stats.connections, 2);
    assert!(!region.exists(), "the region's file is left behind");
    let conditions = w.check(&db).unwrap();
    assert!(conditions.iter().all(|c| c.holds()), "{conditions:?}");
}

#[test]
fn a_shared_memory_client_that_goes_away_frees_its_slot_and_locks() {
    let w = tpcb();
    let dir = tempfile::tempdir().unwrap();
    let (server, _db) = start_shm(w.as_ref(), &dir, 1);
    let endpoint = server.endpoints()[0].clone();
    let mut holder = Client::connect(&endpoint).unwrap();
    let table = account_table(&mut holder);
    lock_account(&mut holder, table, 6);
    // The only slot is taken.
    let err = Client::connect(&endpoint).err().expect("no slot is free");
    assert!(err.to_string().contains("slots are taken"), "{err}");
    assert!(err.to_string().contains("--shm-slots"), "{err}");
    drop(holder);
    // The server frees the slot and aborts the transaction; a new client gets the slot and
    // the lock at once.
    let started = Instant::now();
    let mut other = loop {
        match Client::connect(&endpoint) {
            Ok(c) => break c,
            Err(_) if started.elapsed() < Duration::from_secs(2) => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("{e}"),
        }
    };
    update_account(&mut other, table, 6).unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    server.stop();
}

#[test]
fn a_malformed_request_in_shared_memory_gets_a_protocol_error() {
    use std::sync::atomic::Ordering;
    let w = tpcb();
    let dir = tempfile::tempdir().unwrap();
    let (server, _db) = start_shm(w.as_ref(), &dir, 1);
    let region = protocol::shm::Region::open(&dir.path().join("region")).unwrap();
    let slot = region.claim().unwrap();
    let seq = region.request_seq(slot).load(Ordering::Acquire);
    // A length past the buffer, then a frame whose length prefix lies.
    for (n, (bytes, len)) in [(vec![0u8; 8], u32::MAX), (vec![9, 0, 0, 0, 1], 5)]
        .into_iter()
        .enumerate()
    {
        let seq = seq + 1 + n as u64;
        assert!(region.write(slot, false, &bytes));
        region.request_len(slot).store(len, Ordering::Relaxed);
        region.request_seq(slot).store(seq, Ordering::Release);
        let started = Instant::now();
        while region.response_seq(slot).load(Ordering::Acquire) != seq {
            assert!(started.elapsed() < Duration::from_secs(5), "no answer");
            std::hint::spin_loop();
        }
        let mut got = Vec::new();
        let len = region.response_len(slot).load(Ordering::Relaxed) as usize;
        assert!(region.read(slot, true, len, &mut got));
        assert_eq!(failure_in(&got).0, ErrorClass::Protocol);
    }
    region
        .state(slot)
        .store(protocol::shm::RELEASED, Ordering::Release);
    server.stop();
}

#[test]
fn a_client_that_never_reads_cannot_stall_the_others() {
    for arch in ARCHS {
        let w = tpcb();
        let dir = tempfile::tempdir().unwrap();
        let (server, _db) = start(w.as_ref(), arch, &dir, |_| {});
        let endpoint = tcp(&server);
        let Endpoint::Tcp(addr) = endpoint.clone() else {
            unreachable!()
        };
        // A greeting, then 100,000 catalog requests sent without ever reading an answer:
        // megabytes of responses the server cannot deliver.
        let mut flood = TcpStream::connect(addr).unwrap();
        let mut bytes = hello();
        for _ in 0..100_000 {
            Request::Catalog.encode(&mut bytes);
        }
        let writer = std::thread::spawn(move || {
            // Blocks once both sides' buffers are full: the server stopped reading.
            let _ = flood.write_all(&bytes);
            flood
        });
        std::thread::sleep(Duration::from_millis(300));
        let mut good = Client::connect(&endpoint).unwrap();
        let table = account_table(&mut good);
        let started = Instant::now();
        for id in 1..=50 {
            update_account(&mut good, table, id).unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{arch}: {:?}",
            started.elapsed()
        );
        server.stop();
        drop(writer.join().unwrap());
    }
}

#[test]
fn pipelined_requests_are_answered_in_order_and_a_bad_frame_after_them_last() {
    for arch in ARCHS {
        let w = tpcb();
        let dir = tempfile::tempdir().unwrap();
        let (server, _db) = start(w.as_ref(), arch, &dir, |_| {});
        // Hello, Catalog, Begin, Commit sent at once, then a frame of an unknown kind.
        let mut bytes = hello();
        Request::Catalog.encode(&mut bytes);
        Request::Begin.encode(&mut bytes);
        Request::Commit.encode(&mut bytes);
        bytes.extend_from_slice(&[1, 0, 0, 0, 0x42]);
        let got = raw_exchange(&tcp(&server), &bytes);
        let mut buf = protocol::FrameBuffer::new(protocol::DEFAULT_MAX_FRAME);
        let answers = responses(&mut buf, &got);
        assert_eq!(answers.len(), 5, "{arch}: {answers:?}");
        assert!(matches!(answers[0], Response::Welcome { .. }), "{arch}");
        assert!(matches!(answers[1], Response::CatalogIs { .. }), "{arch}");
        assert_eq!(answers[2], Response::Done, "{arch}");
        assert_eq!(answers[3], Response::Done, "{arch}");
        assert!(
            matches!(
                &answers[4],
                Response::Failed {
                    class: ErrorClass::Protocol,
                    ..
                }
            ),
            "{arch}: {:?}",
            answers[4]
        );
        server.stop();
    }
}

/// A client that sends its requests and its end of the stream at once is answered, and its
/// connection closed: the server reads past the requests' short read to the end its readiness
/// event told of (`protocol::ReadOnce::drained` stops reading early otherwise).
#[test]
fn requests_sent_with_the_end_of_the_stream_are_answered_and_the_connection_closed() {
    for arch in ARCHS {
        let w = tpcb();
        let dir = tempfile::tempdir().unwrap();
        let (server, _db) = start(w.as_ref(), arch, &dir, |_| {});
        let Endpoint::Tcp(addr) = tcp(&server) else {
            unreachable!()
        };
        let mut requests = Vec::new();
        Request::Catalog.encode(&mut requests);
        Request::Begin.encode(&mut requests);
        // Many rounds, for the requests and the end of the stream to reach an idle server
        // together in some.
        for round in 0..50 {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(&hello()).unwrap();
            let mut buf = protocol::FrameBuffer::new(protocol::DEFAULT_MAX_FRAME);
            let welcome = loop {
                if let Some(frame) = buf.next_frame().unwrap() {
                    break Response::decode(frame).unwrap();
                }
                assert!(buf.read_from(&mut s).unwrap() > 0, "{arch}: no welcome");
            };
            assert!(matches!(welcome, Response::Welcome { .. }), "{arch}");
            s.write_all(&requests).unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got)
                .unwrap_or_else(|e| panic!("{arch}, round {round}: no end of stream: {e}"));
            let answers = responses(&mut buf, &got);
            assert_eq!(answers.len(), 2, "{arch}, round {round}: {answers:?}");
            assert!(matches!(answers[0], Response::CatalogIs { .. }), "{arch}");
            assert_eq!(answers[1], Response::Done, "{arch}, round {round}");
        }
        server.stop();
    }
}

/// Calls on one connection return each its own values, whatever the calls before it returned:
/// reads of rows, of a missing row, and scans of several rows, against the engine's own reads.
#[test]
fn each_call_returns_its_own_values_on_a_connection_that_made_others() {
    use engine::Connection;
    use workloads::ycsb::{CoreWorkload, Ycsb, YcsbConfig, USERTABLE};
    use workloads::Distribution;
    let w = Ycsb::new(YcsbConfig {
        record_count: 200,
        workload: CoreWorkload::from_letter('E').unwrap(),
        distribution: Distribution::Uniform,
        field_size: 12,
        field_count: 3,
    })
    .unwrap();
    let stored = |db: &Database, key: i64| {
        let mut row = None;
        let table = db.table(USERTABLE).unwrap();
        db.transaction(&mut |tx| {
            row = tx.get(&table, &[Value::Int(key)], Fetch::All, false)?;
            Ok(())
        })
        .unwrap();
        row
    };
    for arch in ARCHS {
        let dir = tempfile::tempdir().unwrap();
        let (server, db) = start(&w, arch, &dir, |_| {});
        let mut client = Client::connect(&tcp(&server)).unwrap();
        for (i, key) in [5i64, 17, 1000, 3, 199, 42].into_iter().enumerate() {
            let got = client.call("read", vec![Value::Int(key)]).unwrap();
            let expected: Vec<Value> = match stored(&db, key) {
                Some(row) => std::iter::once(Value::Int(1)).chain(row).collect(),
                None => vec![Value::Int(0)],
            };
            assert_eq!(got, expected, "{arch}: read of {key}");
            // A scan between reads returns more values than a read.
            let length = 1 + i as i64;
            let got = client
                .call("scan", vec![Value::Int(key), Value::Int(length)])
                .unwrap();
            let rows: Vec<Vec<Value>> = (key..200)
                .take(length as usize)
                .filter_map(|k| stored(&db, k))
                .collect();
            assert_eq!(
                got[0],
                Value::Int(rows.len() as i64),
                "{arch}: scan from {key}"
            );
            assert_eq!(got[1..], rows.concat()[..], "{arch}: scan from {key}");
        }
        drop(client);
        server.stop();
    }
}

/// A guest over shared memory that cannot start (no such program) fails the server's start
/// with an error naming the program, and leaves no region file behind in /dev/shm (nor in the
/// temporary directory, where /dev/shm is missing).
#[test]
fn a_guest_that_cannot_start_leaves_no_shared_memory_file() {
    let w = tpcb();
    let guests = || -> Vec<String> {
        let prefix = format!("glass-guest-{}-", std::process::id());
        ["/dev/shm".into(), std::env::temp_dir()]
            .iter()
            .filter_map(|dir| std::fs::read_dir(dir).ok())
            .flatten()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.starts_with(&prefix))
            .collect()
    };
    let db = Database::open(DbConfig::default()).unwrap();
    w.create_schema(&db).unwrap();
    for channel in [server::Channel::ShmPoll, server::Channel::ShmUds] {
        let config = ServerConfig {
            workers: 2,
            listen: vec![Endpoint::Tcp("127.0.0.1:0".parse().unwrap())],
            isolation: server::Isolation::Process,
            guest: Some(server::GuestConfig {
                program: "/nonexistent-glass-guest".into(),
                channel,
                ..server::GuestConfig::default()
            }),
            ..ServerConfig::default()
        };
        let err = match Server::start(Arc::clone(&db), w.as_ref(), config) {
            Ok(_) => panic!("a server started without its guests"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("/nonexistent-glass-guest"), "{err}");
        assert_eq!(guests(), Vec::<String>::new(), "over {channel}");
    }
}
