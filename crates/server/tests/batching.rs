//! The client's deferred writes against a real server: an interactive transaction's inserts,
//! and its updates and deletes of rows it holds, travel with its next read or its commit.
//! Round trips per transaction fall (TPC-C New-Order, Payment, Delivery; TPC-B; Voter), the
//! database stays consistent, alone and under concurrency, an insert's error surfaces at the
//! next round trip and rolls back the whole transaction, a transaction reads its own deferred
//! writes, and a rollback sends none of them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use client::{Client, RemoteConnection};
use engine::db::{Database, DbConfig};
use engine::{Fetch, IndexRef, KeyRange, Row, TableRef, Tx, TxError, TxResult, Value};
use protocol::Endpoint;
use server::{Arch, Server, ServerConfig};
use workloads::tpcb::{Tpcb, TpcbConfig, ACCOUNT, HISTORY};
use workloads::tpcc::{Tpcc, TpccConfig};
use workloads::voter::{Voter, VoterConfig};
use workloads::{Mix, Workload};

/// A loaded in-memory database of `w` served on a free TCP port, `workers` unified workers.
fn start(w: &dyn Workload, workers: usize) -> (Server, Arc<Database>) {
    let db = Database::open(DbConfig {
        threads: workers.max(2),
        lock_wait_timeout: Duration::from_secs(5),
        ..DbConfig::default()
    })
    .unwrap();
    w.create_schema(&db).unwrap();
    w.load(&db, &|_, _| {}).unwrap();
    let config = ServerConfig {
        arch: Arch::Unified,
        workers,
        listen: vec![Endpoint::Tcp("127.0.0.1:0".parse().unwrap())],
        ..ServerConfig::default()
    };
    let server = Server::start(Arc::clone(&db), w, config).unwrap();
    (server, db)
}

fn tpcc() -> Arc<dyn Workload> {
    Arc::new(
        Tpcc::new(TpccConfig {
            items: 1000,
            customers_per_district: 100,
            load_threads: 1,
            ..TpccConfig::new(2, Mix::Full)
        })
        .unwrap(),
    )
}

fn tpcb() -> Arc<dyn Workload> {
    Arc::new(
        Tpcb::new(TpcbConfig {
            accounts_per_branch: 1000,
            ..TpcbConfig::new(2)
        })
        .unwrap(),
    )
}

fn assert_consistent(w: &dyn Workload, db: &Arc<Database>) {
    let conditions = w.check(db).unwrap();
    assert!(
        conditions.iter().all(|c| c.holds()),
        "{}: {conditions:?}",
        w.name()
    );
}

/// A `Tx` that counts the operations it passes on: the round trips a client that sends
/// each operation alone would make (a read-modify-write through the default `update_with`
/// counts as its read and its update).
struct Counting<'a> {
    inner: &'a mut dyn Tx,
    ops: u64,
}

impl Tx for Counting<'_> {
    fn get(
        &mut self,
        table: &TableRef,
        key: &[Value],
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Option<Row>> {
        self.ops += 1;
        self.inner.get(table, key, fetch, for_update)
    }

    fn update(
        &mut self,
        table: &TableRef,
        key: &[Value],
        set: &[(usize, Value)],
    ) -> TxResult<bool> {
        self.ops += 1;
        self.inner.update(table, key, set)
    }

    fn insert(&mut self, table: &TableRef, row: &[Value]) -> TxResult<()> {
        self.ops += 1;
        self.inner.insert(table, row)
    }

    fn delete(&mut self, table: &TableRef, key: &[Value]) -> TxResult<bool> {
        self.ops += 1;
        self.inner.delete(table, key)
    }

    fn scan(
        &mut self,
        table: &TableRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<Row>> {
        self.ops += 1;
        self.inner
            .scan(table, range, limit, reverse, fetch, for_update)
    }

    fn scan_index(
        &mut self,
        index: &IndexRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<Row>> {
        self.ops += 1;
        self.inner
            .scan_index(index, range, limit, reverse, fetch, for_update)
    }

    // Hints are passed on, not counted: a client reads what they name with its next trip.
    fn prefetch(&mut self, rows: &[(&TableRef, &[i64])]) {
        self.inner.prefetch(rows)
    }

    fn prefetch_columns(&mut self, rows: &[(&TableRef, &[i64])], columns: &[usize]) {
        self.inner.prefetch_columns(rows, columns)
    }

    fn prefetch_for_update(&mut self, rows: &[(&TableRef, &[i64])], columns: Option<&[usize]>) {
        self.inner.prefetch_for_update(rows, columns)
    }

    fn prefetch_scan(
        &mut self,
        table: &TableRef,
        prefix: &[i64],
        limit: Option<usize>,
        for_update: bool,
    ) {
        self.inner.prefetch_scan(table, prefix, limit, for_update)
    }
}

/// Per transaction type: attempts that ended (committed or rolled back), the round trips
/// they made, and the round trips one per operation plus the commit or abort would make.
#[derive(Default, Debug, Clone, Copy)]
struct Trips {
    ended: u64,
    made: u64,
    unbatched: u64,
}

impl Trips {
    fn made(&self) -> f64 {
        self.made as f64 / self.ended as f64
    }

    fn unbatched(&self) -> f64 {
        self.unbatched as f64 / self.ended as f64
    }
}

/// Runs `count` transactions of terminal `id` interactively on one new connection, retrying
/// retryable failures; returns the round trips by transaction name.
fn run_interactive(
    w: &dyn Workload,
    endpoint: &Endpoint,
    id: usize,
    terminals: usize,
    count: usize,
) -> BTreeMap<&'static str, Trips> {
    run_interactive_with(w, endpoint, id, terminals, count, true)
}

/// [`run_interactive`], the client reading ahead on hints or not.
fn run_interactive_with(
    w: &dyn Workload,
    endpoint: &Endpoint,
    id: usize,
    terminals: usize,
    count: usize,
    read_ahead: bool,
) -> BTreeMap<&'static str, Trips> {
    let mut client = Client::connect(endpoint).unwrap();
    client.set_read_ahead(read_ahead);
    let mut terminal = {
        let conn = RemoteConnection::new(&mut client).unwrap();
        w.terminal(&conn, id, terminals, 7 + id as u64).unwrap()
    };
    let mut trips: BTreeMap<&'static str, Trips> = BTreeMap::new();
    for _ in 0..count {
        let kind = terminal.next();
        loop {
            let before = client.round_trips();
            let mut tx = client.remote_tx(false);
            let mut counting = Counting {
                inner: &mut tx,
                ops: 0,
            };
            let result = terminal.run(&mut counting);
            let ops = counting.ops;
            let result = client::finish(&mut client, result);
            assert!(!client.in_transaction() && !client.has_pending());
            match result {
                Ok(()) | Err(TxError::UserAbort(_)) => {
                    let t = trips.entry(w.txn_names()[kind]).or_default();
                    t.ended += 1;
                    t.made += client.round_trips() - before;
                    t.unbatched += ops + 1;
                    break;
                }
                Err(e) if e.is_retryable() => {}
                Err(e) => panic!("{}: {e}", w.txn_names()[kind]),
            }
        }
    }
    trips
}

fn report(w: &dyn Workload, trips: &BTreeMap<&'static str, Trips>) {
    for (name, t) in trips {
        eprintln!(
            "{} {name:<14} {:>4} ended   round trips {:>6.2}   one per operation {:>6.2}",
            w.name(),
            t.ended,
            t.made(),
            t.unbatched()
        );
    }
}

#[test]
fn tpcc_interactively_takes_fewer_round_trips_and_stays_consistent() {
    let w = tpcc();
    let (server, db) = start(w.as_ref(), 1);
    let endpoint = server.endpoints()[0].clone();
    let trips = run_interactive(w.as_ref(), &endpoint, 0, 1, 300);
    report(w.as_ref(), &trips);
    let new_order = trips["new_order"];
    let payment = trips["payment"];
    assert!(new_order.ended >= 50 && payment.ended >= 50, "{trips:?}");
    // Measured 2.17 (23.9 reading one row a trip, 46.8 at one round trip per operation) and
    // 3.26 (4.6, 8.6), seed 7: New-Order's hints name every row it reads, Payment's every row
    // but a customer chosen by name (a scan, then its read).
    assert!(new_order.made() <= 3.0, "{trips:?}");
    assert!(payment.made() <= 4.0, "{trips:?}");
    if let Some(stock_level) = trips.get("stock_level") {
        // The district, the order lines, then every stock row at once (was some 190).
        assert!(stock_level.made() <= 3.0, "{trips:?}");
    }
    for (name, t) in &trips {
        assert!(t.made <= t.unbatched, "{name}: {t:?}");
    }
    if let Some(delivery) = trips.get("delivery") {
        // Measured 5 (41 district by district, 23 phased without scan hints; one per
        // operation some 170): the ten new-order scans (hinted), the orders (hinted), the ten
        // order-line scans and the customers (hinted), the writes kept on a guess of their
        // keys (checked before the commit), and the commit.
        assert!(delivery.made() <= 5.0, "{trips:?}");
    }
    server.stop();
    assert_consistent(w.as_ref(), &db);
}

#[test]
fn two_clients_on_one_tpcc_warehouse_leave_it_consistent() {
    let w = tpcc();
    let (server, db) = start(w.as_ref(), 2);
    let endpoint = server.endpoints()[0].clone();
    std::thread::scope(|s| {
        // Terminals 0 and 2 of 2 warehouses: both at warehouse 1 (districts 1 and 2).
        for id in [0, 2] {
            let (w, endpoint) = (&w, endpoint.clone());
            s.spawn(move || {
                let trips = run_interactive(w.as_ref(), &endpoint, id, 4, 200);
                let ended: u64 = trips.values().map(|t| t.ended).sum();
                assert_eq!(ended, 200);
            });
        }
    });
    server.stop();
    assert_consistent(w.as_ref(), &db);
}

#[test]
fn tpcb_and_voter_take_fewer_round_trips() {
    let w = tpcb();
    let (server, db) = start(w.as_ref(), 1);
    let trips = run_interactive(w.as_ref(), &server.endpoints()[0].clone(), 0, 1, 100);
    report(w.as_ref(), &trips);
    let t = trips["account_update"];
    // The three reads for update its hint names in one trip, and the commit with the four
    // writes (4 with a trip per read, 8 with one per operation).
    assert_eq!(t.made(), 2.0, "{t:?}");
    assert_eq!(t.unbatched(), 8.0, "{t:?}");
    server.stop();
    assert_consistent(w.as_ref(), &db);

    let w: Arc<dyn Workload> = Arc::new(Voter::new(VoterConfig::new(1)).unwrap());
    let (server, db) = start(w.as_ref(), 1);
    let trips = run_interactive(w.as_ref(), &server.endpoints()[0].clone(), 0, 1, 200);
    report(w.as_ref(), &trips);
    for (name, t) in &trips {
        // The four reads its hints name, then the commit with the writes (the paper's 2).
        assert!(t.made() <= 2.0, "{name}: {t:?}");
        assert!(t.made < t.unbatched, "{name}: {t:?}");
    }
    server.stop();
    assert_consistent(w.as_ref(), &db);
}

struct Tables {
    account: TableRef,
    history: TableRef,
}

fn tables(client: &mut Client) -> Tables {
    let catalog = client.catalog().unwrap();
    let id = |name: &str| catalog.tables.iter().find(|(n, _)| n == name).unwrap().1;
    Tables {
        account: TableRef {
            name: ACCOUNT.into(),
            id: id(ACCOUNT),
        },
        history: TableRef {
            name: HISTORY.into(),
            id: id(HISTORY),
        },
    }
}

const A_BALANCE: usize = 2;

fn history_row(t_id: i64, seq: i64) -> Vec<Value> {
    vec![
        Value::Int(t_id),
        Value::Int(seq),
        Value::Int(1),
        Value::Int(1),
        Value::Int(5),
        Value::Int(0),
        Value::Str("x".repeat(22)),
    ]
}

/// Account `id`'s balance and whether history row `(t_id, seq)` exists, each read in a
/// transaction of its own.
fn balance_and_history(client: &mut Client, t: &Tables, id: i64, h: (i64, i64)) -> (i64, bool) {
    let mut tx = client.remote_tx(true);
    let row = tx
        .get(&t.account, &[Value::Int(id)], Fetch::All, false)
        .unwrap()
        .unwrap();
    let history = tx
        .get(
            &t.history,
            &[Value::Int(h.0), Value::Int(h.1)],
            Fetch::All,
            false,
        )
        .unwrap();
    (row[A_BALANCE].as_int().unwrap(), history.is_some())
}

#[test]
fn a_deferred_inserts_duplicate_key_surfaces_at_the_next_read_and_rolls_back_everything() {
    let w = tpcb();
    let (server, db) = start(w.as_ref(), 1);
    let mut client = Client::connect(&server.endpoints()[0].clone()).unwrap();
    let t = tables(&mut client);
    let h = (1_000_000, 1);
    let (before, exists) = balance_and_history(&mut client, &t, 7, h);
    assert!(!exists);

    let trips = client.round_trips();
    let mut tx = client.remote_tx(false);
    let row = tx
        .get(&t.account, &[Value::Int(7)], Fetch::All, true)
        .unwrap()
        .unwrap();
    let balance = row[A_BALANCE].as_int().unwrap();
    // Deferred: answered at once.
    assert!(tx
        .update(
            &t.account,
            &[Value::Int(7)],
            &[(A_BALANCE, Value::Int(balance + 100))]
        )
        .unwrap());
    tx.insert(&t.history, &history_row(h.0, h.1)).unwrap();
    tx.insert(&t.history, &history_row(h.0, h.1)).unwrap();
    assert_eq!(client.round_trips(), trips + 1, "only the read went out");
    assert!(client.has_pending());
    let mut tx = client.remote_tx(false);
    let err = tx
        .get(&t.account, &[Value::Int(8)], Fetch::All, false)
        .unwrap_err();
    assert!(matches!(err, TxError::DuplicateKey(_)), "{err}");
    assert_eq!(client.round_trips(), trips + 2);
    assert!(!client.in_transaction());
    assert!(!client.has_pending());
    // The caller ends the attempt: nothing is left to abort, nothing is sent.
    assert!(matches!(
        client::finish(&mut client, Err(err)),
        Err(TxError::DuplicateKey(_))
    ));
    assert_eq!(client.round_trips(), trips + 2);

    // Neither the update nor the first insert landed.
    assert_eq!(balance_and_history(&mut client, &t, 7, h), (before, false));
    drop(client);
    server.stop();
    assert_consistent(w.as_ref(), &db);
}

#[test]
fn a_transaction_reads_its_deferred_writes_and_commits_them() {
    let w = tpcb();
    let (server, _db) = start(w.as_ref(), 1);
    let mut client = Client::connect(&server.endpoints()[0].clone()).unwrap();
    let t = tables(&mut client);
    let h = (1_000_001, 1);
    let (before, _) = balance_and_history(&mut client, &t, 9, h);

    let trips = client.round_trips();
    let mut tx = client.remote_tx(false);
    tx.get(&t.account, &[Value::Int(9)], Fetch::All, true)
        .unwrap()
        .unwrap();
    assert!(tx
        .update(
            &t.account,
            &[Value::Int(9)],
            &[(A_BALANCE, Value::Int(before + 55))]
        )
        .unwrap());
    tx.insert(&t.history, &history_row(h.0, h.1)).unwrap();
    let got = tx
        .get(
            &t.account,
            &[Value::Int(9)],
            Fetch::Cols(&[A_BALANCE]),
            false,
        )
        .unwrap()
        .unwrap();
    assert_eq!(got, vec![Value::Int(before + 55)], "reads its own update");
    let inserted = tx
        .get(
            &t.history,
            &[Value::Int(h.0), Value::Int(h.1)],
            Fetch::All,
            false,
        )
        .unwrap();
    assert_eq!(
        inserted,
        Some(history_row(h.0, h.1)),
        "reads its own insert"
    );
    // A second update of the row it holds: deferred again, sent with the commit.
    assert!(tx
        .update(
            &t.account,
            &[Value::Int(9)],
            &[(A_BALANCE, Value::Int(before + 56))]
        )
        .unwrap());
    assert_eq!(client.round_trips(), trips + 3);
    assert!(client.has_pending());
    client::finish(&mut client, Ok(())).unwrap();
    assert_eq!(
        client.round_trips(),
        trips + 4,
        "the commit takes the writes along"
    );
    assert!(!client.in_transaction() && !client.has_pending());

    assert_eq!(
        balance_and_history(&mut client, &t, 9, h),
        (before + 56, true)
    );
    server.stop();
}

#[test]
fn a_rollback_sends_none_of_its_deferred_writes() {
    let w = tpcb();
    let (server, db) = start(w.as_ref(), 1);
    let mut client = Client::connect(&server.endpoints()[0].clone()).unwrap();
    let t = tables(&mut client);
    let h = (1_000_002, 1);
    let (before, _) = balance_and_history(&mut client, &t, 11, h);

    // A transaction open on the server: the rollback is one Abort, the writes stay here.
    let trips = client.round_trips();
    let mut tx = client.remote_tx(false);
    tx.get(&t.account, &[Value::Int(11)], Fetch::All, true)
        .unwrap()
        .unwrap();
    assert!(tx
        .update(
            &t.account,
            &[Value::Int(11)],
            &[(A_BALANCE, Value::Int(before + 1))]
        )
        .unwrap());
    tx.insert(&t.history, &history_row(h.0, h.1)).unwrap();
    assert_eq!(client.round_trips(), trips + 1);
    let err = client::finish(&mut client, Err(TxError::UserAbort("no".into()))).unwrap_err();
    assert!(matches!(err, TxError::UserAbort(_)), "{err}");
    assert_eq!(client.round_trips(), trips + 2, "the read and the Abort");
    assert!(!client.in_transaction() && !client.has_pending());

    // Only deferred writes: the server never saw the transaction, nothing is sent.
    let trips = client.round_trips();
    let mut tx = client.remote_tx(false);
    tx.insert(&t.history, &history_row(h.0, h.1)).unwrap();
    tx.insert(&t.history, &history_row(h.0, h.1 + 1)).unwrap();
    assert_eq!(client.round_trips(), trips);
    let err = client::finish(&mut client, Err(TxError::UserAbort("no".into()))).unwrap_err();
    assert!(matches!(err, TxError::UserAbort(_)), "{err}");
    assert_eq!(client.round_trips(), trips, "nothing sent");
    assert!(!client.in_transaction() && !client.has_pending());

    assert_eq!(balance_and_history(&mut client, &t, 11, h), (before, false));
    assert_eq!(
        balance_and_history(&mut client, &t, 11, (h.0, h.1 + 1)),
        (before, false)
    );
    drop(client);
    server.stop();
    assert_consistent(w.as_ref(), &db);
}

#[test]
fn an_update_on_a_wrongly_guessed_key_fails_the_transaction_before_it_commits() {
    let w = tpcb();
    let (server, _db) = start(w.as_ref(), 1);
    let mut client = Client::connect(&server.endpoints()[0].clone()).unwrap();
    let t = tables(&mut client);
    let h = (1_000_003, 1);
    // Account 1's balance is a key no account has.
    let mut tx = client.remote_tx(true);
    assert!(tx
        .update(
            &t.account,
            &[Value::Int(1)],
            &[(A_BALANCE, Value::Int(999_999))]
        )
        .unwrap());
    let (before, _) = balance_and_history(&mut client, &t, 2, h);

    let trips = client.round_trips();
    let mut tx = client.remote_tx(false);
    // Not held: the server answers, with the writes pending so far.
    tx.insert(&t.history, &history_row(h.0, h.1)).unwrap();
    assert!(!tx
        .update(
            &t.account,
            &[Value::Int(5_000_000)],
            &[(A_BALANCE, Value::Int(1))]
        )
        .unwrap());
    tx.get(&t.account, &[Value::Int(2)], Fetch::All, true)
        .unwrap()
        .unwrap();
    assert!(tx
        .update(
            &t.account,
            &[Value::Int(2)],
            &[(A_BALANCE, Value::Int(before + 3))]
        )
        .unwrap());
    // The first account, scanned for update with only its balance fetched: the client
    // takes the balance for the key, and defers the update.
    let rows = tx
        .scan(
            &t.account,
            KeyRange {
                low: std::ops::Bound::Unbounded,
                high: std::ops::Bound::Unbounded,
            },
            Some(1),
            false,
            Fetch::Cols(&[A_BALANCE]),
            true,
        )
        .unwrap();
    assert_eq!(rows, vec![vec![Value::Int(999_999)]]);
    assert!(tx
        .update(
            &t.account,
            &[Value::Int(999_999)],
            &[(A_BALANCE, Value::Int(0))]
        )
        .unwrap());
    assert_eq!(client.round_trips(), trips + 3);
    // The commit sends the writes first, finds the guess wrong, and aborts.
    let err = client::finish(&mut client, Ok(())).unwrap_err();
    assert!(matches!(err, TxError::Invalid(_)), "{err}");
    assert!(err.to_string().contains("no such row"), "{err}");
    assert_eq!(
        client.round_trips(),
        trips + 5,
        "the writes, then the abort"
    );
    assert!(!client.in_transaction() && !client.has_pending());
    assert_eq!(balance_and_history(&mut client, &t, 2, h), (before, false));
    server.stop();
}

#[test]
fn a_read_only_transaction_commits_with_the_next_request_in_one_round_trip() {
    let w = tpcb();
    let (server, _db) = start(w.as_ref(), 2);
    let endpoint = server.endpoints()[0].clone();
    let mut reader = Client::connect(&endpoint).unwrap();
    let t = tables(&mut reader);
    let read = |client: &mut Client, id: i64| {
        let mut tx = client.remote_tx(false);
        let r = tx
            .get(&t.account, &[Value::Int(id)], Fetch::All, false)
            .map(drop);
        client::finish(client, r)
    };
    // Each read-only transaction is one round trip: its commit rides on the next request.
    let before = reader.round_trips();
    for id in 1..=10 {
        read(&mut reader, id).unwrap();
    }
    assert_eq!(reader.round_trips() - before, 10);
    // Its locks are held until that next request: a writer waits for them...
    read(&mut reader, 42).unwrap();
    let started = std::time::Instant::now();
    let writer = std::thread::spawn({
        let (endpoint, id) = (endpoint.clone(), t.account.id);
        move || {
            let mut w = Client::connect(&endpoint).unwrap();
            let op = protocol::Op::Update {
                table: id,
                key: vec![Value::Int(42)],
                set: vec![(A_BALANCE as u16, Value::Int(9))],
            };
            w.batch(vec![op], true).unwrap();
            started.elapsed()
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    // ...and gets them once the reader's next request carries the commit.
    read(&mut reader, 1).unwrap();
    let waited = writer.join().unwrap();
    assert!(waited >= Duration::from_millis(250), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    // A transaction that wrote commits at once, in its own round trip.
    let before = reader.round_trips();
    let mut tx = reader.remote_tx(false);
    let r = tx
        .update(&t.account, &[Value::Int(3)], &[(A_BALANCE, Value::Int(1))])
        .map(drop);
    client::finish(&mut reader, r).unwrap();
    assert_eq!(
        reader.round_trips() - before,
        2,
        "the update, then its commit"
    );
    server.stop();
}

/// Reading ahead is what makes the few trips: with it off every read is a trip of its own, and
/// the database ends the same.
#[test]
fn without_read_ahead_each_read_is_a_round_trip() {
    let w = tpcc();
    let (server, db) = start(w.as_ref(), 1);
    let endpoint = server.endpoints()[0].clone();
    let ahead = run_interactive(w.as_ref(), &endpoint, 0, 1, 60);
    let trips = run_interactive_with(w.as_ref(), &endpoint, 0, 1, 60, false);
    report(w.as_ref(), &trips);
    let (with, without) = (ahead["new_order"], trips["new_order"]);
    assert!(
        without.made() >= 15.0 && with.made() <= 3.0,
        "{with:?} {without:?}"
    );
    server.stop();
    assert_consistent(w.as_ref(), &db);
}

/// What a hinted read returned answers the reads that follow, without a trip; it sees the
/// writes deferred before it was sent; an update of the row drops it, so the next read goes
/// to the server and sees the update; a shared hint does not answer a read for update.
#[test]
fn hinted_reads_answer_later_reads_and_a_write_makes_them_stale() {
    let w = tpcb();
    let (server, _db) = start(w.as_ref(), 1);
    let mut client = Client::connect(&server.endpoints()[0].clone()).unwrap();
    let t = tables(&mut client);
    let (a, b, c) = (11, 12, 13);
    let balance = |client: &mut Client, id| balance_and_history(client, &t, id, (0, 0)).0;
    let (ba, bb, bc) = (
        balance(&mut client, a),
        balance(&mut client, b),
        balance(&mut client, c),
    );

    let trips = client.round_trips();
    let mut tx = client.remote_tx(false);
    tx.prefetch_for_update(&[(&t.account, &[a])], None);
    tx.prefetch(&[(&t.account, &[b]), (&t.account, &[c])]);
    let row = tx
        .get(&t.account, &[Value::Int(a)], Fetch::All, true)
        .unwrap()
        .unwrap();
    assert_eq!(row[A_BALANCE], Value::Int(ba));
    // B and C came with it: answered here, the columns asked for.
    let got = tx
        .get(
            &t.account,
            &[Value::Int(b)],
            Fetch::Cols(&[A_BALANCE]),
            false,
        )
        .unwrap();
    assert_eq!(got, Some(vec![Value::Int(bb)]));
    assert_eq!(client.round_trips(), trips + 1, "one trip for three reads");

    // A was read for update: its update is deferred, and its answer dropped.
    let mut tx = client.remote_tx(false);
    assert!(tx
        .update(
            &t.account,
            &[Value::Int(a)],
            &[(A_BALANCE, Value::Int(ba + 7))]
        )
        .unwrap());
    assert_eq!(client.round_trips(), trips + 1);
    let mut tx = client.remote_tx(false);
    let got = tx
        .get(
            &t.account,
            &[Value::Int(a)],
            Fetch::Cols(&[A_BALANCE]),
            false,
        )
        .unwrap();
    assert_eq!(
        got,
        Some(vec![Value::Int(ba + 7)]),
        "the update, from the server"
    );
    assert_eq!(client.round_trips(), trips + 2);
    // C was read shared: a read of it for update goes to the server.
    let mut tx = client.remote_tx(false);
    let got = tx
        .get(
            &t.account,
            &[Value::Int(c)],
            Fetch::Cols(&[A_BALANCE]),
            true,
        )
        .unwrap();
    assert_eq!(got, Some(vec![Value::Int(bc)]));
    assert_eq!(client.round_trips(), trips + 3);

    // A hint of a row after a deferred write to it: the read travels behind the write.
    let mut tx = client.remote_tx(false);
    assert!(tx
        .update(
            &t.account,
            &[Value::Int(c)],
            &[(A_BALANCE, Value::Int(bc + 1))]
        )
        .unwrap());
    tx.prefetch(&[(&t.account, &[c])]);
    let got = tx
        .get(
            &t.account,
            &[Value::Int(c)],
            Fetch::Cols(&[A_BALANCE]),
            false,
        )
        .unwrap();
    assert_eq!(got, Some(vec![Value::Int(bc + 1)]));
    assert_eq!(client.round_trips(), trips + 4);
    client::finish(&mut client, Ok(())).unwrap();
    assert_eq!(balance(&mut client, a), ba + 7);
    assert_eq!(balance(&mut client, c), bc + 1);

    // Hints outside a transaction's reads (autocommit) are ignored: nothing is sent for them.
    let trips = client.round_trips();
    let mut tx = client.remote_tx(true);
    tx.prefetch(&[(&t.account, &[a])]);
    tx.get(&t.account, &[Value::Int(b)], Fetch::All, false)
        .unwrap();
    assert_eq!(client.round_trips(), trips + 1);
    server.stop();
}
