//! TPC-C against the engine: loader cardinalities and ranges, each consistency condition
//! shown to fail on a database broken in that one way, and runs (one and several threads,
//! full and paper mixes) that end with every condition holding.

mod common;

use std::sync::Arc;

use engine::db::Database;
use engine::{Fetch, KeyRange, Tx, Value};
use workloads::tpcc::schema::{
    customer, district, history, new_order, order, order_line, stock, warehouse,
};
use workloads::tpcc::{Tables, Tpcc, TpccConfig};
use workloads::util::{everything, float, int, scan_all, with_txn};
use workloads::{Mix, Workload};

/// Reduced sizes so a load takes well under a second in the dev profile.
fn small(warehouses: u64, mix: Mix) -> Tpcc {
    Tpcc::new(TpccConfig {
        items: 1000,
        customers_per_district: 100,
        load_threads: 2,
        ..TpccConfig::new(warehouses, mix)
    })
    .unwrap()
}

fn count(db: &Arc<Database>, table: &engine::TableRef) -> usize {
    with_txn(db, |tx| scan_all(tx, table, &[0])).unwrap().len()
}

/// A full-form (or, with `paper`, the 2008 paper's) New-Order on warehouse 1 for customer
/// `c_id` of district `d_id`, entered 1, one line of `quantity` for each `(supply warehouse,
/// item)` in the order given.
fn new_order_input(
    d_id: i64,
    c_id: i64,
    lines: impl IntoIterator<Item = (i64, i64)>,
    quantity: i64,
    paper: bool,
) -> workloads::tpcc::input::NewOrderInput {
    use workloads::tpcc::input::{NewOrderInput, OrderLineInput};
    NewOrderInput {
        w_id: 1,
        d_id,
        c_id,
        lines: lines
            .into_iter()
            .map(|(supply_w_id, i_id)| OrderLineInput {
                i_id,
                supply_w_id,
                quantity,
            })
            .collect(),
        entry_d: 1,
        paper,
    }
}

/// Runs `body(thread, rng)` on `threads` threads at once, each with a generator seeded by its
/// number, and asserts that the lock manager chose no deadlock victim while they ran.
fn assert_no_deadlock_among(
    db: &Arc<Database>,
    threads: u64,
    body: impl Fn(u64, &mut rand::rngs::SmallRng) + Sync,
) {
    use rand::SeedableRng;
    let deadlocks = || db.lock_manager().unwrap().stats().deadlocks;
    let before = deadlocks();
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let body = &body;
            scope.spawn(move || body(thread, &mut rand::rngs::SmallRng::seed_from_u64(thread)));
        }
    });
    assert_eq!(
        deadlocks() - before,
        0,
        "deadlock victims among the {threads} threads; the last: {}",
        db.last_deadlock().unwrap_or_default()
    );
}

#[test]
fn load_populates_every_table_per_the_specification() {
    let w = small(2, Mix::Full);
    let db = common::loaded(&w, 2);
    let t = Tables::resolve(&db).unwrap();
    assert_eq!(count(&db, &t.item), 1000);
    assert_eq!(count(&db, &t.warehouse), 2);
    assert_eq!(count(&db, &t.stock), 2000);
    assert_eq!(count(&db, &t.district), 20);
    assert_eq!(count(&db, &t.customer), 2000);
    assert_eq!(count(&db, &t.history), 2000);
    assert_eq!(count(&db, &t.order), 2000);
    assert_eq!(count(&db, &t.new_order), 20 * 30);
    let lines = count(&db, &t.order_line);
    assert!(
        (2000 * 5..=2000 * 15).contains(&lines),
        "{lines} order lines"
    );

    with_txn(&db, |tx| {
        for r in scan_all(tx, &t.warehouse, &[warehouse::W_TAX, warehouse::W_YTD])? {
            assert!((0.0..=0.2).contains(&float(&r, 0)?));
            assert_eq!(float(&r, 1)?, 10_000.0, "300,000 scaled to 100 customers");
        }
        for r in scan_all(tx, &t.district, &[district::D_NEXT_O_ID, district::D_YTD])? {
            assert_eq!(int(&r, 0)?, 101);
            assert_eq!(float(&r, 1)?, 1_000.0);
        }
        for r in scan_all(tx, &t.stock, &[stock::S_QUANTITY])? {
            assert!((10..=100).contains(&int(&r, 0)?));
        }
        let customers = scan_all(
            tx,
            &t.customer,
            &[
                customer::C_CREDIT,
                customer::C_BALANCE,
                customer::C_LAST,
                customer::C_ID,
            ],
        )?;
        let bad_credit = customers
            .iter()
            .filter(|r| r[0] == Value::Str("BC".into()))
            .count();
        assert!((100..=320).contains(&bad_credit), "{bad_credit} BC of 2000");
        for r in &customers {
            assert_eq!(float(r, 1)?, -10.0);
            if int(r, 3)? == 1 {
                assert_eq!(r[2], Value::Str("BARBARBAR".into()));
            }
        }
        for r in scan_all(
            tx,
            &t.order,
            &[order::O_ID, order::O_CARRIER_ID, order::O_OL_CNT],
        )? {
            assert_eq!(
                r[1].is_null(),
                int(&r, 0)? > 70,
                "carrier null exactly for the last 30%"
            );
            assert!((5..=15).contains(&int(&r, 2)?));
        }
        Ok(())
    })
    .unwrap();
    common::assert_all_hold(&w.check(&db).unwrap());
}

/// One way to break the database, and the condition it must violate.
type Breakage = fn(&mut dyn Tx, &Tables) -> engine::TxResult<()>;

fn first_key(
    tx: &mut dyn Tx,
    table: &engine::TableRef,
    cols: &[usize],
    reverse: bool,
) -> Vec<Value> {
    tx.scan(
        table,
        everything(),
        Some(1),
        reverse,
        Fetch::Cols(cols),
        false,
    )
    .unwrap()
    .remove(0)
}

fn add_float(
    tx: &mut dyn Tx,
    table: &engine::TableRef,
    key: &[Value],
    col: usize,
    delta: f64,
) -> engine::TxResult<()> {
    let row = tx.get(table, key, Fetch::Cols(&[col]), true)?.unwrap();
    assert!(tx.update(table, key, &[(col, Value::Float(float(&row, 0)? + delta))])?);
    Ok(())
}

fn add_int(
    tx: &mut dyn Tx,
    table: &engine::TableRef,
    key: &[Value],
    col: usize,
    delta: i64,
) -> engine::TxResult<()> {
    let row = tx.get(table, key, Fetch::Cols(&[col]), true)?.unwrap();
    assert!(tx.update(table, key, &[(col, Value::Int(int(&row, 0)? + delta))])?);
    Ok(())
}

/// A copy of order line (1, 1, 5, 1) inserted into district `d_id` of warehouse 1.
fn line_moved_to_district(tx: &mut dyn Tx, t: &Tables, d_id: i64) -> engine::TxResult<()> {
    let key = [W1, D1, Value::Int(5), Value::Int(1)];
    let mut line = tx.get(&t.order_line, &key, Fetch::All, false)?.unwrap();
    line[order_line::OL_D_ID] = Value::Int(d_id);
    tx.insert(&t.order_line, &line)
}

const W1: Value = Value::Int(1);
const D1: Value = Value::Int(1);

fn breakages() -> Vec<(u32, &'static str, Breakage)> {
    vec![
        (1, "w_ytd + 1", |tx, t| {
            add_float(tx, &t.warehouse, &[W1], warehouse::W_YTD, 1.0)
        }),
        (2, "d_next_o_id + 1", |tx, t| {
            add_int(tx, &t.district, &[W1, D1], district::D_NEXT_O_ID, 1)
        }),
        (3, "a new-order row deleted in the middle", |tx, t| {
            assert!(tx.delete(&t.new_order, &[W1, D1, Value::Int(80)])?);
            Ok(())
        }),
        (4, "an order line deleted", |tx, t| {
            assert!(tx.delete(&t.order_line, &[W1, D1, Value::Int(5), Value::Int(1)])?);
            Ok(())
        }),
        (5, "a carrier set on an undelivered order", |tx, t| {
            assert!(tx.update(
                &t.order,
                &[W1, D1, Value::Int(90)],
                &[(order::O_CARRIER_ID, Value::Int(3))]
            )?);
            Ok(())
        }),
        // The check reads the growing tables a district at a time in turns; rows of a
        // district the DISTRICT table lacks, before the first or after the last, are read too.
        (
            5,
            "a new-order row of district 12, which has no DISTRICT row",
            |tx, t| tx.insert(&t.new_order, &[Value::Int(5), Value::Int(12), W1]),
        ),
        (
            6,
            "an order line of district 0, which has no DISTRICT row",
            |tx, t| line_moved_to_district(tx, t, 0),
        ),
        (
            6,
            "an order line of district 12, which has no DISTRICT row",
            |tx, t| line_moved_to_district(tx, t, 12),
        ),
        (6, "o_ol_cnt + 1", |tx, t| {
            add_int(tx, &t.order, &[W1, D1, Value::Int(10)], order::O_OL_CNT, 1)
        }),
        (7, "a delivered line's delivery date cleared", |tx, t| {
            let key = [W1, D1, Value::Int(3), Value::Int(2)];
            assert!(tx.update(
                &t.order_line,
                &key,
                &[(order_line::OL_DELIVERY_D, Value::Null)]
            )?);
            Ok(())
        }),
        (8, "a history amount changed", |tx, t| {
            let key = first_key(
                tx,
                &t.history,
                &[history::H_W_ID, history::H_D_ID, history::H_ID],
                false,
            );
            add_float(tx, &t.history, &key, history::H_AMOUNT, 5.0)
        }),
        (9, "d_ytd + 1", |tx, t| {
            add_float(tx, &t.district, &[W1, D1], district::D_YTD, 1.0)
        }),
        (10, "c_balance + 1", |tx, t| {
            add_float(
                tx,
                &t.customer,
                &[W1, D1, Value::Int(7)],
                customer::C_BALANCE,
                1.0,
            )
        }),
        (11, "c_delivery_cnt + 1", |tx, t| {
            add_int(
                tx,
                &t.customer,
                &[W1, D1, Value::Int(7)],
                customer::C_DELIVERY_CNT,
                1,
            )
        }),
        (12, "c_ytd_payment + 1", |tx, t| {
            add_float(
                tx,
                &t.customer,
                &[W1, D1, Value::Int(7)],
                customer::C_YTD_PAYMENT,
                1.0,
            )
        }),
    ]
}

#[test]
fn each_consistency_condition_detects_its_breakage() {
    let w = small(1, Mix::Full);
    for (number, what, breakage) in breakages() {
        let db = common::loaded(&w, 1);
        let t = Tables::resolve(&db).unwrap();
        with_txn(&db, |tx| breakage(tx, &t)).unwrap();
        let conditions = w.check(&db).unwrap();
        assert_eq!(conditions.len(), 12);
        let c = &conditions[number as usize - 1];
        assert_eq!(c.name, format!("TPC-C 3.3.2.{number}"));
        assert!(!c.holds(), "condition {number} missed: {what}");
        assert!(c.violation.as_ref().unwrap().contains("violation"), "{c:?}");
    }
}

#[test]
fn a_single_terminal_run_keeps_every_condition() {
    let w: Arc<dyn Workload> = Arc::new(small(1, Mix::Full));
    let db = common::loaded(w.as_ref(), 1);
    let out = common::run(&db, &w, 1, 600);
    // Every type ran; New-Order's rollbacks are about 1%.
    assert!(out.committed.iter().all(|c| *c > 0), "{out:?}");
    let new_orders = out.committed[0] + out.user_aborts[0];
    assert!(out.user_aborts[0] <= new_orders / 20, "{out:?}");
    assert_eq!(out.user_aborts[1..].iter().sum::<u64>(), 0);
    common::assert_all_hold(&w.check(&db).unwrap());
}

/// A stripped, one-thread database with `w` loaded and the load ended (`finish_load`, where
/// the main-memory indexes choose between hash and dense maps).
fn stripped_loaded(w: &dyn Workload) -> Arc<Database> {
    use engine::switches::{Preset, Switches};
    let db = Database::open(engine::db::DbConfig {
        switches: Switches::preset(Preset::Stripped),
        threads: 1,
        ..engine::db::DbConfig::default()
    })
    .unwrap();
    w.create_schema(&db).unwrap();
    w.load(&db, &|_, _| {}).unwrap();
    db.finish_load();
    db
}

/// The stripped engine on the full mix: its main-memory indexes are chosen when the load ends
/// (`Database::finish_load`), dense maps for the keys that fill their leaves (stock, items,
/// orders, order lines) and hash maps for the others, and Delivery's deletes, Order-Status's
/// and Stock-Level's scans and New-Order's inserts all run on them.
#[test]
fn a_stripped_run_of_the_full_mix_on_dense_indexes_keeps_every_condition() {
    let w: Arc<dyn Workload> = Arc::new(small(1, Mix::Full));
    let db = stripped_loaded(w.as_ref());
    let out = common::run(&db, &w, 1, 1500);
    assert!(out.committed.iter().all(|c| *c > 0), "{out:?}");
    db.check_invariants().unwrap();
    common::assert_all_hold(&w.check(&db).unwrap());
}

/// A stripped database takes one writer at a time: loading three warehouses with two load
/// threads must fall back to one (parallel loading had corrupted its unlatched indexes).
#[test]
fn a_stripped_database_loads_several_warehouses_one_at_a_time() {
    let w: Arc<dyn Workload> = Arc::new(small(3, Mix::Paper));
    let db = stripped_loaded(w.as_ref());
    db.check_invariants().unwrap();
    let t = Tables::resolve(&db).unwrap();
    assert_eq!(count(&db, &t.stock), 3 * 1000);
    assert_eq!(count(&db, &t.district), 3 * 10);
    let out = common::run(&db, &w, 1, 300);
    assert_eq!(out.committed.iter().sum::<u64>(), 300, "{out:?}");
    common::assert_all_hold(&w.check(&db).unwrap());
}

#[test]
fn concurrent_terminals_keep_every_condition() {
    for mix in [Mix::Full, Mix::Paper] {
        let w: Arc<dyn Workload> = Arc::new(small(2, mix));
        let db = common::loaded(w.as_ref(), 4);
        let out = common::run(&db, &w, 4, 250);
        let done: u64 = out.committed.iter().sum::<u64>() + out.user_aborts.iter().sum::<u64>();
        assert_eq!(done, 1000, "{out:?}");
        if mix == Mix::Paper {
            assert_eq!(out.committed[2..].iter().sum::<u64>(), 0);
            assert_eq!(out.user_aborts[0], 0);
        }
        common::assert_all_hold(&w.check(&db).unwrap());
    }
}

#[test]
fn new_orders_and_deliveries_move_the_district_state() {
    use workloads::tpcc::input::DeliveryInput;
    let w = small(1, Mix::Full);
    let db = common::loaded(&w, 1);
    let t = Tables::resolve(&db).unwrap();
    let input = new_order_input(4, 9, (1..=5).map(|i| (1, i * 7)), 3, false);
    let out = with_txn(&db, |tx| {
        workloads::tpcc::new_order::new_order(tx, &t, &input)
    })
    .unwrap();
    assert_eq!(out.o_id, 101);
    assert_eq!(out.lines.len(), 5);
    assert!(out.total_amount > 0.0);
    // An unused item rolls the whole order back.
    let mut bad = input.clone();
    bad.lines[4].i_id = 1001;
    let mut txn = db.begin().unwrap();
    let err = workloads::tpcc::new_order::new_order(&mut txn, &t, &bad).unwrap_err();
    assert!(matches!(err, engine::TxError::UserAbort(_)), "{err}");
    txn.abort().unwrap();
    let next = with_txn(&db, |tx| {
        let r = tx.get(
            &t.district,
            &[W1, Value::Int(4)],
            Fetch::Cols(&[district::D_NEXT_O_ID]),
            false,
        )?;
        int(&r.unwrap(), 0)
    })
    .unwrap();
    assert_eq!(next, 102, "the rolled-back order took no number");
    // Delivery takes the oldest new-order of every district.
    let d = DeliveryInput {
        w_id: 1,
        carrier_id: 5,
        delivery_d: 2,
    };
    let out = with_txn(&db, |tx| workloads::tpcc::delivery::delivery(tx, &t, &d)).unwrap();
    assert_eq!(out.delivered, vec![Some(71); 10]);
    let left = with_txn(&db, |tx| {
        tx.scan(
            &t.new_order,
            KeyRange::prefix(&[W1, Value::Int(4)]),
            None,
            false,
            Fetch::Cols(&[new_order::NO_O_ID]),
            false,
        )
    })
    .unwrap();
    assert_eq!(left.len(), 30, "29 loaded + the new one");
    common::assert_all_hold(&w.check(&db).unwrap());
}

#[test]
fn payment_by_last_name_picks_the_middle_customer() {
    use workloads::tpcc::input::{CustomerSelector, PaymentInput};
    let w = small(1, Mix::Full);
    let db = common::loaded(&w, 1);
    let t = Tables::resolve(&db).unwrap();
    // Customer c_id ≤ 100 carries last name number c_id − 1, unique in the reduced load.
    let input = PaymentInput {
        w_id: 1,
        d_id: 2,
        c_w_id: 1,
        c_d_id: 2,
        customer: CustomerSelector::ByLastName(workloads::tpcc::random::last_name(41)),
        h_amount: 12.5,
        h_date: 3,
    };
    let out = with_txn(&db, |tx| workloads::tpcc::payment::payment(tx, &t, &input)).unwrap();
    assert_eq!(out.c_id, 42);
    assert!((out.c_balance - (-22.5)).abs() < 1e-9);
    common::assert_all_hold(&w.check(&db).unwrap());
}

/// Stock-Level counts each item of the district's last 20 orders once, by its stock at the
/// home warehouse: checked against the same count made from whole-table scans, for every
/// district and several thresholds (items repeat across orders: 1,000 items in the reduced
/// load, some 200 lines).
#[test]
fn stock_level_counts_the_distinct_items_of_the_last_twenty_orders_below_the_threshold() {
    use std::collections::{BTreeSet, HashMap};
    use workloads::tpcc::input::StockLevelInput;
    let w = small(1, Mix::Full);
    let db = common::loaded(&w, 1);
    let t = Tables::resolve(&db).unwrap();
    let (next, lines, quantity) = with_txn(&db, |tx| {
        let next: HashMap<i64, i64> =
            scan_all(tx, &t.district, &[district::D_ID, district::D_NEXT_O_ID])?
                .iter()
                .map(|r| Ok((int(r, 0)?, int(r, 1)?)))
                .collect::<engine::TxResult<_>>()?;
        let lines = scan_all(
            tx,
            &t.order_line,
            &[
                order_line::OL_D_ID,
                order_line::OL_O_ID,
                order_line::OL_I_ID,
            ],
        )?
        .iter()
        .map(|r| Ok((int(r, 0)?, int(r, 1)?, int(r, 2)?)))
        .collect::<engine::TxResult<Vec<_>>>()?;
        let quantity: HashMap<i64, i64> =
            scan_all(tx, &t.stock, &[stock::S_I_ID, stock::S_QUANTITY])?
                .iter()
                .map(|r| Ok((int(r, 0)?, int(r, 1)?)))
                .collect::<engine::TxResult<_>>()?;
        Ok((next, lines, quantity))
    })
    .unwrap();
    let mut repeated = false;
    for d_id in 1..=10 {
        let last = next[&d_id];
        let items: Vec<i64> = lines
            .iter()
            .filter(|&&(d, o, _)| d == d_id && (last - 20..last).contains(&o))
            .map(|&(_, _, i)| i)
            .collect();
        let distinct: BTreeSet<i64> = items.iter().copied().collect();
        repeated |= distinct.len() < items.len();
        for threshold in [10, 15, 20, 50, 101] {
            let expected = distinct.iter().filter(|i| quantity[i] < threshold).count();
            let input = StockLevelInput {
                w_id: 1,
                d_id,
                threshold,
            };
            let out = with_txn(&db, |tx| {
                workloads::tpcc::stock_level::stock_level(tx, &t, &input)
            })
            .unwrap();
            assert_eq!(
                out.low_stock, expected,
                "district {d_id}, threshold {threshold}"
            );
        }
    }
    assert!(repeated, "some district's last orders share an item");
}

/// The warehouses one terminal's first 300 transactions name (each input's first argument).
fn warehouses_drawn(w: &Tpcc) -> std::collections::BTreeSet<i64> {
    let db = common::loaded(w, 1);
    let mut terminal = w.terminal(db.as_ref(), 0, 1, 7).unwrap();
    let mut args = Vec::new();
    (0..300)
        .map(|_| {
            terminal.next();
            args.clear();
            terminal.args(&mut args).unwrap();
            args[0].as_int().unwrap()
        })
        .collect()
}

#[test]
fn only_the_charm_mix_draws_a_home_warehouse_for_each_transaction() {
    // The Charm paper's transactions were processes of their own: one thread uses every
    // warehouse. TPC-C's terminal keeps its home (remote payments aside, which name the home
    // warehouse first).
    assert_eq!(
        warehouses_drawn(&small(3, Mix::Charm)),
        [1, 2, 3].into(),
        "the Charm mix"
    );
    assert_eq!(
        warehouses_drawn(&small(3, Mix::Full)),
        [1].into(),
        "the full mix"
    );
}

/// Delivery deletes each district's oldest new order while New-Order appends at the other
/// end: the leaves it empties leave the new-order index instead of piling up in front of
/// every Delivery's scan for the oldest order and every New-Order's next-key lookup (a
/// million transactions had Delivery fixing 4,407 index pages instead of 640).
#[test]
fn deliveries_leave_no_run_of_empty_leaves_in_the_new_order_index() {
    // A thousand customers a district: 300 new orders each at load. Without the unlinking,
    // this run left 18 empty leaves in the trees; unlinking all but parents' leftmost
    // children, 1; with those and the drained inner nodes taken out too, none (and the pages
    // unlinked, which the pool allocates again).
    let w: Arc<dyn Workload> = Arc::new(
        Tpcc::new(TpccConfig {
            items: 1000,
            customers_per_district: 1000,
            load_threads: 2,
            ..TpccConfig::new(1, Mix::Full)
        })
        .unwrap(),
    );
    let db = common::loaded(w.as_ref(), 1);
    let out = common::run(&db, &w, 1, 12_000);
    let delivery = w.txn_names().iter().position(|n| *n == "delivery").unwrap();
    // Ten new orders a Delivery: every district's new orders from the load, and more.
    let delivered = out.committed[delivery] * 10;
    assert!(delivered >= 3_600, "only {delivered} new orders delivered");
    let report = db.verify_integrity(10);
    assert!(report.is_clean(), "{:?}", report.faults);
    assert!(
        report.empty_leaves == 0,
        "{} empty leaves still in the trees",
        report.empty_leaves
    );
    let reuse = db.pool().unwrap().reuse_stats();
    assert!(
        reuse.retired >= 2,
        "only {} leaves left the trees",
        reuse.retired
    );
    // The pages no structure reaches are those unlinked and not yet allocated again.
    assert!(
        report.unreached_pages <= reuse.waiting,
        "{} pages unreached, {reuse:?}",
        report.unreached_pages
    );
    common::assert_all_hold(&w.check(&db).unwrap());
}

/// A transaction that notes the table of each row it reads, updates, inserts or deletes, in
/// order, and passes everything on to the engine's.
struct Recorder<'a> {
    inner: &'a mut dyn Tx,
    seen: Recording,
}

/// What a [`Recorder`] saw, each in order.
#[derive(Default)]
struct Recording {
    /// The table of each row read, updated, inserted or deleted and of each scan.
    touched: Vec<String>,
    /// The keys of the rows updated, with their tables.
    updated: Vec<(String, Vec<Value>)>,
    /// The rows inserted, with their tables.
    inserted: Vec<(String, Vec<Value>)>,
    /// The keys of the rows hinted for update, with their tables.
    hinted_for_update: Vec<(String, Vec<i64>)>,
}

impl Tx for Recorder<'_> {
    fn get(
        &mut self,
        table: &engine::TableRef,
        key: &[Value],
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> engine::TxResult<Option<engine::Row>> {
        self.seen.touched.push(table.name.clone());
        self.inner.get(table, key, fetch, for_update)
    }
    fn read_with(
        &mut self,
        table: &engine::TableRef,
        key: &[Value],
        for_update: bool,
        f: &mut engine::ReadFn<'_>,
    ) -> engine::TxResult<bool> {
        self.seen.touched.push(table.name.clone());
        self.inner.read_with(table, key, for_update, f)
    }
    fn update_with(
        &mut self,
        table: &engine::TableRef,
        key: &[Value],
        f: &mut engine::UpdateFn<'_>,
    ) -> engine::TxResult<bool> {
        self.seen.touched.push(table.name.clone());
        self.seen.updated.push((table.name.clone(), key.to_vec()));
        self.inner.update_with(table, key, f)
    }
    fn update(
        &mut self,
        table: &engine::TableRef,
        key: &[Value],
        set: &[(usize, Value)],
    ) -> engine::TxResult<bool> {
        self.seen.touched.push(table.name.clone());
        self.seen.updated.push((table.name.clone(), key.to_vec()));
        self.inner.update(table, key, set)
    }
    fn prefetch_for_update(
        &mut self,
        rows: &[(&engine::TableRef, &[i64])],
        columns: Option<&[usize]>,
    ) {
        for (table, key) in rows {
            self.seen
                .hinted_for_update
                .push((table.name.clone(), key.to_vec()));
        }
        self.inner.prefetch_for_update(rows, columns);
    }
    fn insert(&mut self, table: &engine::TableRef, row: &[Value]) -> engine::TxResult<()> {
        self.seen.touched.push(table.name.clone());
        self.seen.inserted.push((table.name.clone(), row.to_vec()));
        self.inner.insert(table, row)
    }
    fn delete(&mut self, table: &engine::TableRef, key: &[Value]) -> engine::TxResult<bool> {
        self.seen.touched.push(table.name.clone());
        self.inner.delete(table, key)
    }
    fn scan(
        &mut self,
        table: &engine::TableRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> engine::TxResult<Vec<engine::Row>> {
        self.seen.touched.push(table.name.clone());
        self.inner
            .scan(table, range, limit, reverse, fetch, for_update)
    }
    fn scan_index(
        &mut self,
        index: &engine::IndexRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> engine::TxResult<Vec<engine::Row>> {
        self.seen.touched.push(index.name.clone());
        self.inner
            .scan_index(index, range, limit, reverse, fetch, for_update)
    }
    fn read_committed(&mut self) {
        self.inner.read_committed();
    }
}

/// The tables one committed run of `body` touched, in order.
fn touched(db: &Arc<Database>, body: impl Fn(&mut dyn Tx) -> engine::TxResult<()>) -> Vec<String> {
    recorded(db, body).touched
}

/// What one committed run of `body` touched (see [`Recording`]).
fn recorded(db: &Arc<Database>, body: impl Fn(&mut dyn Tx) -> engine::TxResult<()>) -> Recording {
    let mut seen = Recording::default();
    with_txn(db, |tx| {
        let mut recorder = Recorder {
            inner: tx,
            seen: Recording::default(),
        };
        body(&mut recorder)?;
        seen = recorder.seen;
        Ok(())
    })
    .unwrap();
    seen
}

#[test]
fn new_order_and_payment_reach_the_warehouse_row_last() {
    use workloads::tpcc::input::{CustomerSelector, PaymentInput};
    use workloads::tpcc::schema::{CUSTOMER, DISTRICT, HISTORY, WAREHOUSE};
    // Every Payment of a warehouse writes its row and every New-Order reads it: reached last,
    // its lock is held for the end of each transaction only (see `payment`'s notes).
    let w = small(1, Mix::Full);
    let db = common::loaded(&w, 1);
    let t = Tables::resolve(&db).unwrap();
    for paper in [false, true] {
        let input = new_order_input(3, 5, (1..=6).map(|i| (1, i * 11)), 2, paper);
        let order = touched(&db, |tx| {
            workloads::tpcc::new_order::new_order(tx, &t, &input).map(drop)
        });
        assert_eq!(
            order.last().map(String::as_str),
            Some(WAREHOUSE),
            "{order:?}"
        );
        assert_eq!(
            order.iter().filter(|n| *n == WAREHOUSE).count(),
            1,
            "{order:?}"
        );
        assert!(
            order.len() > 20,
            "district, customer, items, stock, inserts: {order:?}"
        );
        if !paper {
            // The customer after every insert (see `new_orders_and_deliveries_never_deadlock`).
            assert_eq!(order[order.len() - 2], CUSTOMER, "{order:?}");
        }
    }
    for customer in [
        CustomerSelector::ById(7),
        CustomerSelector::ByLastName(workloads::tpcc::random::last_name(6)),
    ] {
        let input = PaymentInput {
            w_id: 1,
            d_id: 2,
            c_w_id: 1,
            c_d_id: 2,
            customer,
            h_amount: 10.0,
            h_date: 4,
        };
        let order = touched(&db, |tx| {
            workloads::tpcc::payment::payment(tx, &t, &input).map(drop)
        });
        // The district before the warehouse (New-Order's lock order too), the history row
        // after it (its H_DATA holds W_NAME).
        let at = |name: &str| order.iter().position(|n| n == name);
        assert_eq!(at(DISTRICT), Some(0), "{order:?}");
        assert_eq!(order[order.len() - 2..], [WAREHOUSE, HISTORY], "{order:?}");
        assert_eq!(
            order.iter().filter(|n| *n == WAREHOUSE).count(),
            1,
            "{order:?}"
        );
    }
    common::assert_all_hold(&w.check(&db).unwrap());
}

#[test]
fn new_order_takes_its_stock_rows_in_key_order_and_keeps_the_line_numbers() {
    use workloads::tpcc::schema::{item, order_line, ORDER_LINE, STOCK};
    // Every New-Order locks its stock rows by (supply warehouse, item), the order Stock-Level
    // reads its items in too, so neither waits for the other in a cycle; the order lines keep
    // the terminal's numbers and the output its order.
    let w = small(2, Mix::Full);
    let db = common::loaded(&w, 2);
    let t = Tables::resolve(&db).unwrap();
    // Out of order, a remote line before home ones, and an item twice.
    let entered = [(1, 500), (2, 7), (1, 30), (1, 500), (1, 2), (2, 1)];
    for paper in [false, true] {
        let input = new_order_input(4, 9, entered, 3, paper);
        let output = std::cell::RefCell::new(None);
        let seen = recorded(&db, |tx| {
            let out = workloads::tpcc::new_order::new_order(tx, &t, &input)?;
            *output.borrow_mut() = Some(out);
            Ok(())
        });
        let mut sorted = entered.to_vec();
        sorted.sort_unstable();
        let stock_updates: Vec<(i64, i64)> = seen
            .updated
            .iter()
            .filter(|(table, _)| table == STOCK)
            .map(|(_, key)| match key[..] {
                [Value::Int(w), Value::Int(i)] => (w, i),
                _ => panic!("a stock key of two integers: {key:?}"),
            })
            .collect();
        assert_eq!(stock_updates, sorted, "paper: {paper}");
        let stock_hints: Vec<(i64, i64)> = seen
            .hinted_for_update
            .iter()
            .filter(|(table, _)| table == STOCK)
            .map(|(_, key)| (key[0], key[1]))
            .collect();
        assert_eq!(stock_hints, sorted, "paper: {paper}");
        // The order lines inserted by number, as the index appends them.
        let numbers: Vec<&Value> = seen
            .inserted
            .iter()
            .filter(|(table, _)| table == ORDER_LINE)
            .map(|(_, row)| &row[order_line::OL_NUMBER])
            .collect();
        let expected: Vec<Value> = (1..=entered.len() as i64).map(Value::Int).collect();
        assert_eq!(
            numbers,
            expected.iter().collect::<Vec<_>>(),
            "paper: {paper}"
        );
        // The output and the stored lines in the input's order.
        let output = output.into_inner().unwrap();
        let o_id = output.o_id;
        for (n, &(supply_w_id, i_id)) in entered.iter().enumerate() {
            let name = with_txn(&db, |tx| {
                let row = tx
                    .get(&t.item, &[Value::Int(i_id)], Fetch::All, false)?
                    .unwrap();
                Ok(row[item::I_NAME].clone())
            })
            .unwrap();
            assert_eq!(
                Value::Str(output.lines[n].i_name.to_string()),
                name,
                "line {n}"
            );
            let key = [
                Value::Int(1),
                Value::Int(4),
                Value::Int(o_id),
                Value::Int(n as i64 + 1),
            ];
            let stored = with_txn(&db, |tx| tx.get(&t.order_line, &key, Fetch::All, false))
                .unwrap()
                .unwrap();
            assert_eq!(int(&stored, order_line::OL_I_ID).unwrap(), i_id, "line {n}");
            assert_eq!(
                int(&stored, order_line::OL_SUPPLY_W_ID).unwrap(),
                supply_w_id,
                "line {n}"
            );
        }
    }
    common::assert_all_hold(&w.check(&db).unwrap());
}

#[test]
fn new_order_takes_its_district_after_its_stock_in_the_full_form_only() {
    use workloads::tpcc::schema::{DISTRICT, STOCK};
    // Full form: the district, which every New-Order and Payment of it writes, is locked
    // after the stock rows, so it is not held through them. The paper's form keeps its
    // order (the district before the stock). A client locks the hinted rows in the hints'
    // order, so the hints follow the form's.
    let w = small(1, Mix::Full);
    let db = common::loaded(&w, 1);
    let t = Tables::resolve(&db).unwrap();
    for paper in [false, true] {
        let input = new_order_input(6, 8, (1..=7).map(|i| (1, i * 13)), 4, paper);
        let seen = recorded(&db, |tx| {
            workloads::tpcc::new_order::new_order(tx, &t, &input).map(drop)
        });
        for (what, tables) in [
            (
                "updates",
                seen.updated.iter().map(|(t, _)| t).collect::<Vec<_>>(),
            ),
            (
                "hints",
                seen.hinted_for_update.iter().map(|(t, _)| t).collect(),
            ),
        ] {
            let district = tables.iter().position(|t| *t == DISTRICT);
            let stock: Vec<usize> = (tables.iter().enumerate())
                .filter(|(_, t)| **t == STOCK)
                .map(|(i, _)| i)
                .collect();
            assert_eq!(stock.len(), 7, "{what}, paper {paper}: {tables:?}");
            let district = district.unwrap_or_else(|| panic!("{what}: {tables:?}"));
            if paper {
                assert!(district < stock[0], "{what}, paper: {tables:?}");
            } else {
                assert!(district > stock[6], "{what}, full: {tables:?}");
            }
        }
    }
    common::assert_all_hold(&w.check(&db).unwrap());
}

#[test]
fn new_orders_and_stock_levels_on_one_warehouse_never_deadlock() {
    use rand::Rng;
    use workloads::tpcc::input::StockLevelInput;
    // Four threads on one warehouse, New-Orders drawing their lines from 40 items (so that
    // most pairs share stock rows) and Stock-Levels reading them: with the lines taken as
    // entered, two New-Orders, or a New-Order and a Stock-Level, lock shared stock rows in
    // opposite orders and one of them is chosen as a deadlock victim.
    let w = small(1, Mix::Full);
    let db = common::loaded(&w, 1);
    let t = Tables::resolve(&db).unwrap();
    assert_no_deadlock_among(&db, 4, |thread, rng| {
        for _ in 0..150 {
            let d_id = rng.gen_range(1..=10);
            if thread % 2 == 0 {
                let lines: Vec<_> = (0..rng.gen_range(5..=15))
                    .map(|_| (1, rng.gen_range(1..=40)))
                    .collect();
                let input = new_order_input(d_id, rng.gen_range(1..=100), lines, 1, false);
                with_txn(&db, |tx| {
                    workloads::tpcc::new_order::new_order(tx, &t, &input).map(drop)
                })
                .unwrap();
            } else {
                let input = StockLevelInput {
                    w_id: 1,
                    d_id,
                    threshold: 15,
                };
                with_txn(&db, |tx| {
                    workloads::tpcc::stock_level::stock_level(tx, &t, &input).map(drop)
                })
                .unwrap();
            }
        }
    });
    common::assert_all_hold(&w.check(&db).unwrap());
}

#[test]
fn new_orders_and_deliveries_never_deadlock() {
    use rand::Rng;
    use workloads::tpcc::input::DeliveryInput;
    use workloads::tpcc::schema::order;
    // A New-Order's insert into NEW-ORDER checks the key after its own, the next district's
    // oldest new order, which a running Delivery holds. A New-Order that had read its
    // customer before it waited there held that customer shared, and the Delivery, going on
    // to pay the same customer for an older order, waited for it: a deadlock. Three threads
    // of New-Orders here order for the customers the Deliveries of a fourth will pay; the
    // Deliveries stop before a district runs out of new orders (with none left, a Delivery's
    // scan locks the next district's first key, and a New-Order into the empty district waits
    // for that: another story).
    let w = small(1, Mix::Full);
    let db = common::loaded(&w, 1);
    let t = Tables::resolve(&db).unwrap();
    let deliveries = 25;
    let first = w.config.customers_per_district - w.config.new_orders_per_district() + 1;
    let payees: Vec<Vec<i64>> = (1..=10)
        .map(|d| {
            (first..first + deliveries)
                .map(|o| {
                    let key = [Value::Int(1), Value::Int(d), Value::Int(o)];
                    let row = with_txn(&db, |tx| {
                        tx.get(&t.order, &key, Fetch::Cols(&[order::O_C_ID]), false)
                    });
                    int(&row.unwrap().unwrap(), 0).unwrap()
                })
                .collect()
        })
        .collect();
    assert_no_deadlock_among(&db, 4, |thread, rng| {
        if thread == 0 {
            for _ in 0..deliveries {
                let input = DeliveryInput {
                    w_id: 1,
                    carrier_id: rng.gen_range(1..=10),
                    delivery_d: 2,
                };
                with_txn(&db, |tx| {
                    workloads::tpcc::delivery::delivery(tx, &t, &input).map(drop)
                })
                .unwrap();
            }
            return;
        }
        for _ in 0..500 {
            let d_id = rng.gen_range(1..=10);
            let c_ids = &payees[d_id as usize - 1];
            let c_id = c_ids[rng.gen_range(0..c_ids.len())];
            let lines: Vec<_> = (0..5).map(|_| (1, rng.gen_range(1..=1000))).collect();
            let input = new_order_input(d_id, c_id, lines, 1, false);
            with_txn(&db, |tx| {
                workloads::tpcc::new_order::new_order(tx, &t, &input).map(drop)
            })
            .unwrap();
        }
    });
    common::assert_all_hold(&w.check(&db).unwrap());
}

#[test]
fn a_new_order_does_not_wait_for_a_running_delivery_of_the_next_district() {
    use workloads::tpcc::input::DeliveryInput;
    use workloads::tpcc::schema::order;
    // A New-Order inserts its NEW-ORDER row at the end of its district's; the key after it
    // is the next district's oldest left, which a running Delivery has locked (its scan took
    // the oldest, its delete of that one the key after it). Those locks guard the next
    // district's rows, not the end of this one's, so the New-Order goes ahead while the
    // Delivery is still open (it waited for the whole Delivery when a lock guarded the whole
    // gap below its key).
    let w = small(1, Mix::Full);
    let db = common::loaded(&w, 1);
    let t = Tables::resolve(&db).unwrap();
    // The oldest undelivered order of district 3 is paid by the Delivery: order for
    // someone else, so that the two meet at no customer row.
    let oldest = w.config.customers_per_district - w.config.new_orders_per_district() + 1;
    let payee = with_txn(&db, |tx| {
        let key = [Value::Int(1), Value::Int(3), Value::Int(oldest)];
        tx.get(&t.order, &key, Fetch::Cols(&[order::O_C_ID]), false)
    })
    .unwrap()
    .unwrap();
    let c_id = if int(&payee, 0).unwrap() == 1 { 2 } else { 1 };
    let mut delivery = db.begin().unwrap();
    let input = DeliveryInput {
        w_id: 1,
        carrier_id: 3,
        delivery_d: 2,
    };
    let out = workloads::tpcc::delivery::delivery(&mut delivery, &t, &input).unwrap();
    assert!(out.delivered.iter().all(Option::is_some));
    let (sent, got) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let input = new_order_input(3, c_id, (1..=5).map(|i| (1, i * 13)), 1, false);
            let out = with_txn(&db, |tx| {
                workloads::tpcc::new_order::new_order(tx, &t, &input)
            });
            sent.send(out.map(|o| o.o_id)).unwrap();
        });
        let done = got.recv_timeout(std::time::Duration::from_secs(20));
        // Commit either way, so that a New-Order still waiting can finish.
        delivery.commit().unwrap();
        let o_id = done
            .expect("the New-Order waited for the open Delivery")
            .unwrap();
        assert_eq!(o_id, w.config.customers_per_district + 1);
    });
    common::assert_all_hold(&w.check(&db).unwrap());
}

#[test]
fn a_new_order_and_a_payment_do_not_wait_for_an_open_stock_level_of_their_district() {
    use workloads::tpcc::input::{CustomerSelector, PaymentInput, StockLevelInput};
    // Stock-Level reads at isolation level 1: its locks on the district row and the stock
    // rows go as each read ends. Held to its commit, as they were, the district's shared
    // lock kept every New-Order and Payment of the district waiting for it.
    let w = small(1, Mix::Full);
    let db = common::loaded(&w, 1);
    let t = Tables::resolve(&db).unwrap();
    let mut stock_level = db.begin().unwrap();
    let input = StockLevelInput {
        w_id: 1,
        d_id: 3,
        threshold: 20,
    };
    workloads::tpcc::stock_level::stock_level(&mut stock_level, &t, &input).unwrap();
    let (sent, got) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let input = new_order_input(3, 7, (1..=5).map(|i| (1, i * 17)), 1, false);
            let new_order = with_txn(&db, |tx| {
                workloads::tpcc::new_order::new_order(tx, &t, &input)
            });
            let input = PaymentInput {
                w_id: 1,
                d_id: 3,
                c_w_id: 1,
                c_d_id: 3,
                customer: CustomerSelector::ById(7),
                h_amount: 10.0,
                h_date: 4,
            };
            let payment = with_txn(&db, |tx| workloads::tpcc::payment::payment(tx, &t, &input));
            sent.send(new_order.and(payment).map(drop)).unwrap();
        });
        let done = got.recv_timeout(std::time::Duration::from_secs(20));
        // Commit either way, so that a transaction still waiting can finish.
        stock_level.commit().unwrap();
        done.expect("a New-Order or a Payment waited for the open Stock-Level")
            .unwrap();
    });
    common::assert_all_hold(&w.check(&db).unwrap());
}
