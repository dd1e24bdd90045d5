//! TPC-C (revision 5.11) and the 2008 paper's variant of it.
//!
//! ```text
//!  WAREHOUSE(W) ─┬─ DISTRICT(W·10) ── CUSTOMER(W·30k) ─┬─ HISTORY(W·30k+)
//!                │                                      └─ ORDER(W·30k+) ─┬─ NEW-ORDER(W·9k)
//!                └─ STOCK(W·100k) ── ITEM(100k)                            └─ ORDER-LINE(W·300k+)
//! ```
//!
//! Files: `schema` (tables, columns, keys), `random` (NURand, names, strings), `load`
//! (population, clause 4.3.3), `input` (inputs and the mix), one file per transaction, and
//! `check` (the consistency conditions of clause 3.3.2).
//!
//! Terminal `i` of `n` is bound to home warehouse `(i mod W) + 1` and, for Stock-Level, to
//! district `((i div W) mod 10) + 1` (clause 2.8.1.1 fixes a terminal's district), except
//! under the Charm mix, whose terminals draw both afresh for each transaction (the paper ran
//! each transaction as a process of its own).
//!
//! Sizes: [`TpccConfig::new`] gives the specification's cardinalities. `items` and
//! `customers_per_district` can be reduced (e.g. by tests, to load in well under a second);
//! everything else scales with them: orders per district = customers per district, the last
//! 30% of them are undelivered (900 of 3000 at full size).

pub mod check;
pub mod delivery;
pub mod input;
pub mod load;
pub mod new_order;
pub mod order_status;
pub mod payment;
pub mod random;
pub mod schema;
pub mod stock_level;

use std::sync::Arc;

use engine::db::Database;
use engine::{Connection, IndexRef, TableRef, Tx, TxError, TxResult, Value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::util::{drawn, int, CheckProgress};
use crate::workload::{Condition, Interactions, Procedures, Receipt, Terminal, Workload};
use crate::Mix;
use input::{InputContext, TpccInput, TXN_NAMES};
use random::NuRandConstants;

pub const DISTRICTS_PER_WAREHOUSE: i64 = 10;
/// Seeds of the NURand constants: fixed, so that a later process running against a database
/// loaded earlier knows C-Load and picks a C-Run that obeys the delta rule.
const C_LOAD_SEED: u64 = 0x7C_C10AD;
const C_RUN_SEED: u64 = 0x7C_C2B17;

/// TPC-C sizes and mix.
#[derive(Clone, Debug, PartialEq)]
pub struct TpccConfig {
    pub warehouses: u64,
    pub mix: Mix,
    /// Rows of ITEM (100,000 in the specification).
    pub items: i64,
    /// Customers, and orders, per district (3,000 in the specification).
    pub customers_per_district: i64,
    /// Threads loading warehouses in parallel (at most one per warehouse).
    pub load_threads: usize,
}

/// The most warehouses TPC-C holds: warehouse ids have `W_BITS` bits in the keys.
pub const MAX_WAREHOUSES: u64 = (1 << schema::W_BITS) - 1;

impl TpccConfig {
    /// The specification's sizes.
    pub fn new(warehouses: u64, mix: Mix) -> Self {
        TpccConfig {
            warehouses,
            mix,
            items: 100_000,
            customers_per_district: 3_000,
            load_threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
        }
    }

    /// Orders loaded undelivered per district (the last 30%: 900 of 3000).
    pub fn new_orders_per_district(&self) -> i64 {
        self.customers_per_district * 3 / 10
    }

    /// Orders loaded delivered per district (2100 of 3000).
    pub fn delivered_per_district(&self) -> i64 {
        self.customers_per_district - self.new_orders_per_district()
    }

    fn validate(&self) -> Result<(), String> {
        let max_w = MAX_WAREHOUSES;
        if self.warehouses == 0 || self.warehouses > max_w {
            return Err(format!(
                "TPC-C needs 1..={max_w} warehouses, not {}",
                self.warehouses
            ));
        }
        if self.items < 1 || self.items + 1 >= 1 << schema::I_BITS {
            return Err(format!("item count {} out of range", self.items));
        }
        if self.customers_per_district < 10 || self.customers_per_district >= 1 << schema::C_BITS {
            return Err(format!(
                "customers per district {} out of range 10..65535",
                self.customers_per_district
            ));
        }
        Ok(())
    }
}

/// Handles of the tables and indexes, resolved once per terminal.
#[derive(Clone, Debug)]
pub struct Tables {
    pub warehouse: TableRef,
    pub district: TableRef,
    pub customer: TableRef,
    pub history: TableRef,
    pub new_order: TableRef,
    pub order: TableRef,
    pub order_line: TableRef,
    pub item: TableRef,
    pub stock: TableRef,
    pub customer_by_name: IndexRef,
    pub order_by_customer: IndexRef,
}

impl Tables {
    pub fn resolve(db: &dyn Connection) -> TxResult<Tables> {
        Ok(Tables {
            warehouse: db.table(schema::WAREHOUSE)?,
            district: db.table(schema::DISTRICT)?,
            customer: db.table(schema::CUSTOMER)?,
            history: db.table(schema::HISTORY)?,
            new_order: db.table(schema::NEW_ORDER)?,
            order: db.table(schema::ORDER)?,
            order_line: db.table(schema::ORDER_LINE)?,
            item: db.table(schema::ITEM)?,
            stock: db.table(schema::STOCK)?,
            customer_by_name: db.index(schema::CUSTOMER_BY_NAME)?,
            order_by_customer: db.index(schema::ORDER_BY_CUSTOMER)?,
        })
    }
}

/// The TPC-C workload.
pub struct Tpcc {
    pub config: TpccConfig,
    /// C-Load: used by the loader for C_LAST (and recorded for the delta rule).
    pub load_constants: NuRandConstants,
    /// C-Run: shared by every terminal of this workload.
    pub run_constants: NuRandConstants,
}

impl Tpcc {
    pub fn new(config: TpccConfig) -> Result<Tpcc, String> {
        config.validate()?;
        let load_constants = NuRandConstants::for_load(&mut SmallRng::seed_from_u64(C_LOAD_SEED));
        let run_constants =
            NuRandConstants::for_run(&load_constants, &mut SmallRng::seed_from_u64(C_RUN_SEED));
        Ok(Tpcc {
            config,
            load_constants,
            run_constants,
        })
    }

    /// The terminal's home warehouse and district.
    pub fn home_of(&self, terminal: usize) -> (i64, i64) {
        let w = self.config.warehouses as usize;
        let home_w = (terminal % w) as i64 + 1;
        let home_d = ((terminal / w) as i64 % DISTRICTS_PER_WAREHOUSE) + 1;
        (home_w, home_d)
    }
}

impl Workload for Tpcc {
    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn txn_names(&self) -> &'static [&'static str] {
        &TXN_NAMES
    }

    fn interactions(&self) -> Vec<Interactions> {
        // Both mixes average ten order lines per New-Order.
        let lines_mean = 10;
        vec![
            Interactions {
                name: TXN_NAMES[0],
                round_trips: 2 + lines_mean + 1,
                note: "get W, D, C (1); update D + insert O, NO + get item, stock of line 1 (1); \
                       per further line: update stock + insert OL of the previous line + get \
                       item, stock of this one (lines-1); last stock update + OL insert (1); \
                       commit (1): lines + 3, 8-18 for 5-15 lines, 13 for the mean 10 (the \
                       paper's 10-line variant reads all items in round trip 1: also 13)",
            },
            Interactions {
                name: TXN_NAMES[1],
                round_trips: 4,
                note: "get W, D (+ C by id) (1); by last name: scan customer index, then get \
                       the middle one (1); update D, C, W + insert H (1); commit (1): 4 by \
                       name (60%), 3 by id",
            },
            Interactions {
                name: TXN_NAMES[2],
                round_trips: 4,
                note: "customer by id or name (1); newest order via order-by-customer index \
                       (1); its order lines (1); commit (1)",
            },
            Interactions {
                name: TXN_NAMES[3],
                round_trips: 5,
                note: "oldest new-order of all ten districts (1); delete them + get orders + \
                       scan their order lines (1); update orders, order lines + get customers \
                       (1); update customers (1); commit (1)",
            },
            Interactions {
                name: TXN_NAMES[4],
                round_trips: 4,
                note: "get D (1); order lines of the last 20 orders (1); stock of their \
                       distinct items (1); commit (1)",
            },
        ]
    }

    fn create_schema(&self, db: &Database) -> TxResult<()> {
        for table in schema::tables() {
            db.create_table(table)?;
        }
        for index in schema::indexes() {
            db.create_index(index)?;
        }
        Ok(())
    }

    fn load(&self, db: &Arc<Database>, progress: &(dyn Fn(u64, u64) + Sync)) -> TxResult<()> {
        load::load(db, &self.config, &self.load_constants, progress)
    }

    fn terminal(
        &self,
        db: &dyn Connection,
        id: usize,
        _terminals: usize,
        seed: u64,
    ) -> TxResult<Box<dyn Terminal>> {
        let (home_w_id, home_d_id) = self.home_of(id);
        Ok(Box::new(TpccTerminal {
            tables: Arc::new(Tables::resolve(db)?),
            context: InputContext {
                config: self.config.clone(),
                constants: self.run_constants,
                home_w_id,
                home_d_id,
            },
            rng: SmallRng::seed_from_u64(seed),
            input: None,
            written: Written::Nothing,
        }))
    }

    fn check_with_progress(
        &self,
        db: &Arc<Database>,
        progress: CheckProgress<'_>,
    ) -> TxResult<Vec<Condition>> {
        check::check(db, &self.config, progress)
    }

    fn procedures(&self, conn: &dyn Connection) -> TxResult<Box<dyn Procedures>> {
        Ok(Box::new(TpccProcedures {
            tables: Tables::resolve(conn)?,
        }))
    }
}

/// The five transactions as stored procedures. What each returns:
///
/// ```text
///   new_order     o_id total_amount
///   payment       c_id c_balance h_id
///   order_status  c_id c_balance o_id|NULL carrier_id|NULL lines
///   delivery      the order delivered in districts 1..=10, each an o_id or NULL
///   stock_level   low_stock
/// ```
struct TpccProcedures {
    tables: Tables,
}

impl Procedures for TpccProcedures {
    fn call(
        &self,
        tx: &mut dyn Tx,
        txn: usize,
        args: &[Value],
        out: &mut Vec<Value>,
    ) -> TxResult<()> {
        let t = &self.tables;
        let opt = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
        match TpccInput::from_args(txn, args)? {
            TpccInput::NewOrder(i) => {
                let o = new_order::new_order(tx, t, &i)?;
                out.extend([Value::Int(o.o_id), Value::Float(o.total_amount)]);
            }
            TpccInput::Payment(i) => {
                let o = payment::payment(tx, t, &i)?;
                out.extend([
                    Value::Int(o.c_id),
                    Value::Float(o.c_balance),
                    Value::Int(o.h_id),
                ]);
            }
            TpccInput::OrderStatus(i) => {
                let o = order_status::order_status(tx, t, &i)?;
                out.extend([
                    Value::Int(o.c_id),
                    Value::Float(o.c_balance),
                    opt(o.order.map(|(o_id, _)| o_id)),
                    opt(o.order.and_then(|(_, carrier)| carrier)),
                    Value::Int(o.lines.len() as i64),
                ]);
            }
            TpccInput::Delivery(i) => {
                let o = delivery::delivery(tx, t, &i)?;
                out.extend(o.delivered.into_iter().map(opt));
            }
            TpccInput::StockLevel(i) => {
                let o = stock_level::stock_level(tx, t, &i)?;
                out.push(Value::Int(o.low_stock as i64));
            }
        }
        Ok(())
    }
}

/// One TPC-C terminal.
pub struct TpccTerminal {
    tables: Arc<Tables>,
    context: InputContext,
    rng: SmallRng,
    input: Option<TpccInput>,
    /// What the last successful run wrote that a receipt can name.
    written: Written,
}

/// The keys a committed TPC-C transaction's receipts name.
enum Written {
    Nothing,
    /// New-Order: the order's id (in the input's district).
    Order(i64),
    /// Payment: the history row's id (in the input's district).
    History(i64),
    /// Delivery: per district, the order delivered, if one was waiting.
    Delivered(Vec<Option<i64>>),
}

impl TpccTerminal {
    /// The input drawn by the last `next` (for tests and tracing).
    pub fn input(&self) -> Option<&TpccInput> {
        self.input.as_ref()
    }
}

impl Terminal for TpccTerminal {
    fn next(&mut self) -> usize {
        if self.context.config.mix == crate::Mix::Charm {
            self.context.home_w_id = self
                .rng
                .gen_range(1..=self.context.config.warehouses as i64);
            self.context.home_d_id = self.rng.gen_range(1..=DISTRICTS_PER_WAREHOUSE);
        }
        let input = self.context.draw(&mut self.rng, crate::util::now_seconds());
        let kind = input.txn_type() as usize;
        self.input = Some(input);
        kind
    }

    fn run(&mut self, tx: &mut dyn Tx) -> TxResult<()> {
        let t = &self.tables;
        self.written = Written::Nothing;
        self.written = match &self.input {
            None => return Err(TxError::Invalid("Terminal::run before next".to_string())),
            Some(TpccInput::NewOrder(i)) => Written::Order(new_order::new_order(tx, t, i)?.o_id),
            Some(TpccInput::Payment(i)) => Written::History(payment::payment(tx, t, i)?.h_id),
            Some(TpccInput::OrderStatus(i)) => {
                order_status::order_status(tx, t, i)?;
                Written::Nothing
            }
            Some(TpccInput::Delivery(i)) => {
                Written::Delivered(delivery::delivery(tx, t, i)?.delivered)
            }
            Some(TpccInput::StockLevel(i)) => {
                stock_level::stock_level(tx, t, i)?;
                Written::Nothing
            }
        };
        Ok(())
    }

    fn receipts(&self, out: &mut Vec<Receipt>) {
        match (&self.written, &self.input) {
            (Written::Order(o_id), Some(TpccInput::NewOrder(i))) => {
                out.push(Receipt::present(schema::ORDER, &[i.w_id, i.d_id, *o_id]));
            }
            (Written::History(h_id), Some(TpccInput::Payment(i))) => {
                out.push(Receipt::present(schema::HISTORY, &[i.w_id, i.d_id, *h_id]));
            }
            (Written::Delivered(orders), Some(TpccInput::Delivery(i))) => {
                for (d, o_id) in orders.iter().enumerate() {
                    if let Some(o_id) = o_id {
                        let key = [i.w_id, d as i64 + 1, *o_id];
                        out.push(Receipt::absent(schema::NEW_ORDER, &key));
                    }
                }
            }
            _ => {}
        }
    }

    fn args(&self, out: &mut Vec<Value>) -> TxResult<()> {
        let input = drawn(&self.input, "args")?;
        input.to_args(out);
        Ok(())
    }

    fn returned(&mut self, values: &[Value]) -> TxResult<()> {
        // What `TpccProcedures` returns.
        self.written = match drawn(&self.input, "returned")? {
            TpccInput::NewOrder(_) => Written::Order(int(values, 0)?),
            TpccInput::Payment(_) => Written::History(int(values, 2)?),
            TpccInput::Delivery(_) => Written::Delivered(
                values
                    .iter()
                    .map(|v| match v {
                        Value::Null => Ok(None),
                        Value::Int(o_id) => Ok(Some(*o_id)),
                        other => Err(TxError::Invalid(format!(
                            "delivery returned {other:?} for a district's order"
                        ))),
                    })
                    .collect::<TxResult<_>>()?,
            ),
            _ => Written::Nothing,
        };
        Ok(())
    }
}
