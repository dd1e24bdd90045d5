//! The kernel and the engine, given the same database and the same inputs, end in the same
//! logical state and give the same answers.
//!
//! One warehouse (reduced to 2,000 items and 60 customers per district so that loading is
//! quick) is loaded into an in-memory engine database by the workloads crate's TPC-C loader;
//! the kernel is built from that database's rows. Then the same sequence of the paper's
//! New-Order and Payment inputs (plus a few New-Orders with an unused item, which must roll
//! back on both sides) runs through the workloads crate's procedures on the engine — one
//! transaction each, begin, run, commit — and through the kernel. Every output is compared
//! as it comes, and at the end every row of all nine tables.

use std::sync::Arc;

use engine::{Database, DbConfig, Fetch, Row, Tx, TxError};
use kernel::{generate_inputs_for, Kernel, KernelError, KernelInput, Scale, Table};
use workloads::tpcc::input as wl;
use workloads::tpcc::{new_order, payment, schema, Tables, Tpcc, TpccConfig};
use workloads::{Mix, Workload};

const SCALE: Scale = Scale {
    warehouses: 1,
    items: 2_000,
    customers_per_district: 60,
};
const TRANSACTIONS: usize = 400;

fn load_engine() -> (Arc<Database>, Tables) {
    let mut config = TpccConfig::new(u64::from(SCALE.warehouses), Mix::Paper);
    config.items = i64::from(SCALE.items);
    config.customers_per_district = i64::from(SCALE.customers_per_district);
    config.load_threads = 1;
    let tpcc = Tpcc::new(config).expect("config");
    let db = Database::open(DbConfig::default()).expect("open database");
    tpcc.create_schema(&db).expect("create schema");
    tpcc.load(&db, &|_, _| {}).expect("load");
    let tables = Tables::resolve(&db).expect("resolve tables");
    (db, tables)
}

fn engine_rows(db: &Database, table: Table) -> Vec<Row> {
    let handle = db.table(table.name()).expect("table");
    db.run(|tx| {
        tx.scan(
            &handle,
            workloads::util::everything(),
            None,
            false,
            Fetch::All,
            false,
        )
    })
    .expect("scan")
}

fn to_engine_new_order(i: &kernel::NewOrderInput) -> wl::NewOrderInput {
    wl::NewOrderInput {
        w_id: i64::from(i.w_id),
        d_id: i64::from(i.d_id),
        c_id: i64::from(i.c_id),
        lines: i
            .lines()
            .iter()
            .map(|l| wl::OrderLineInput {
                i_id: i64::from(l.i_id),
                supply_w_id: i64::from(l.supply_w_id),
                quantity: i64::from(l.quantity),
            })
            .collect(),
        entry_d: i.entry_d,
        paper: true,
    }
}

fn to_engine_payment(i: &kernel::PaymentInput) -> wl::PaymentInput {
    wl::PaymentInput {
        w_id: i64::from(i.w_id),
        d_id: i64::from(i.d_id),
        c_w_id: i64::from(i.c_w_id),
        c_d_id: i64::from(i.c_d_id),
        customer: wl::CustomerSelector::ById(i64::from(i.c_id)),
        h_amount: i.h_amount,
        h_date: i.h_date,
    }
}

/// Runs one input on both; panics on any difference in outcome or output.
fn run_both(db: &Database, tables: &Tables, k: &mut Kernel, input: &KernelInput, n: usize) {
    match input {
        KernelInput::NewOrder(i) => {
            let engine = db.run(|tx: &mut engine::Transaction<'_>| {
                new_order::new_order(tx as &mut dyn Tx, tables, &to_engine_new_order(i))
            });
            match (engine, k.new_order(i)) {
                (Ok(e), Ok(kout)) => {
                    assert_eq!(e.o_id, i64::from(kout.o_id), "#{n} o_id");
                    assert_eq!(e.total_amount, kout.total_amount, "#{n} total");
                    assert_eq!(e.lines.len(), usize::from(kout.line_count));
                    for (el, kl) in e.lines.iter().zip(&kout.lines) {
                        assert_eq!(el.i_name.as_bytes(), kl.i_name.as_bytes(), "#{n} i_name");
                        assert_eq!(el.i_price, kl.i_price, "#{n} i_price");
                        assert_eq!(el.s_quantity, kl.s_quantity, "#{n} s_quantity");
                        assert_eq!(el.brand_generic as u8, kl.brand_generic, "#{n} brand");
                        assert_eq!(el.ol_amount, kl.ol_amount, "#{n} ol_amount");
                    }
                }
                (Err(TxError::UserAbort(_)), Err(KernelError::UnusedItem(_))) => {}
                (e, kout) => panic!("#{n}: engine {e:?}, kernel {kout:?}"),
            }
        }
        KernelInput::Payment(i) => {
            let engine = db
                .run(|tx: &mut engine::Transaction<'_>| {
                    payment::payment(tx as &mut dyn Tx, tables, &to_engine_payment(i))
                })
                .expect("engine payment");
            let kout = k.payment(i).expect("kernel payment");
            assert_eq!(engine.c_id, i64::from(kout.c_id), "#{n} c_id");
            assert_eq!(engine.c_balance, kout.c_balance, "#{n} c_balance");
            assert_eq!(
                engine.c_credit.as_bytes(),
                kout.c_credit.as_bytes(),
                "#{n} credit"
            );
        }
    }
}

fn assert_same_tables(db: &Database, k: &Kernel, when: &str) {
    for table in Table::ALL {
        let engine = engine_rows(db, table);
        let mine = k.rows(table);
        assert_eq!(
            engine.len(),
            mine.len(),
            "{when}: {} row count",
            table.name()
        );
        for (e, m) in engine.iter().zip(&mine) {
            assert_eq!(e, m, "{when}: first differing {} row", table.name());
        }
    }
}

#[test]
fn kernel_columns_are_the_workloads_schema() {
    let tables = schema::tables();
    for table in Table::ALL {
        let schema = tables
            .iter()
            .find(|t| t.name == table.name())
            .unwrap_or_else(|| panic!("workloads schema has no {}", table.name()));
        let names: Vec<&str> = schema.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, table.columns(), "{}", table.name());
    }
    assert_eq!(tables.len(), Table::ALL.len());
}

#[test]
fn kernel_and_engine_end_in_the_same_state() {
    let (db, tables) = load_engine();
    let mut k = Kernel::from_rows(|table| engine_rows(&db, table)).expect("kernel from rows");
    k.check_invariants().expect("kernel invariants after load");
    assert_eq!(k.scale(), SCALE);
    assert_same_tables(&db, &k, "after load");

    let mut inputs = generate_inputs_for(11, TRANSACTIONS, SCALE);
    // A few New-Orders whose last item is unused: both sides must roll back.
    for n in (0..inputs.len()).step_by(80) {
        if let KernelInput::NewOrder(mut i) = inputs[n] {
            i.lines[usize::from(i.line_count) - 1].i_id = SCALE.items + 1;
            inputs.insert(n, KernelInput::NewOrder(i));
        }
    }
    for (n, input) in inputs.iter().enumerate() {
        run_both(&db, &tables, &mut k, input, n);
    }
    k.check_invariants()
        .expect("kernel invariants after the mix");
    assert_same_tables(&db, &k, "after the mix");

    // The run exercised what it should: orders were added and a bad-credit customer paid.
    let d1 = k.district(1, 1).expect("district");
    assert!(d1.next_o_id > SCALE.customers_per_district + 1);
    let bc_paid = (1..=10).any(|d| {
        (1..=SCALE.customers_per_district).any(|c| {
            let c = k.customer(1, d, c).expect("customer");
            c.credit.as_bytes() == b"BC" && c.payment_cnt > 1
        })
    });
    assert!(
        bc_paid,
        "some bad-credit customer paid (so c_data was rewritten)"
    );
}
