//! The twelve consistency conditions of clause 3.3.2, checked on the database as it is.
//!
//! All tables are read in one transaction (columns the conditions need only), a page of rows
//! at a time ([`crate::util::TableScan`]; those of many rows in the order they are stored,
//! each heap page once), and folded into per-warehouse,
//! per-district, per-order and per-customer aggregates; each condition then compares two of
//! them and, when violated, names the first offending rows and the count.
//!
//! | # | condition                                                                 |
//! |---|---------------------------------------------------------------------------|
//! | 1 | W_YTD = Σ D_YTD per warehouse                                             |
//! | 2 | D_NEXT_O_ID − 1 = max(O_ID) = max(NO_O_ID) per district                   |
//! | 3 | max(NO_O_ID) − min(NO_O_ID) + 1 = count(NEW-ORDER) per district           |
//! | 4 | Σ O_OL_CNT = count(ORDER-LINE) per district                               |
//! | 5 | O_CARRIER_ID is null ⇔ a NEW-ORDER row exists, per order                  |
//! | 6 | O_OL_CNT = count(ORDER-LINE) per order                                    |
//! | 7 | OL_DELIVERY_D is null ⇔ O_CARRIER_ID is null, per order line              |
//! | 8 | W_YTD = Σ H_AMOUNT per warehouse                                          |
//! | 9 | D_YTD = Σ H_AMOUNT per district                                           |
//! |10 | C_BALANCE = Σ delivered OL_AMOUNT − Σ H_AMOUNT per customer               |
//! |11 | count(ORDER) − count(NEW-ORDER) = delivered at load + Σ C_DELIVERY_CNT    |
//! |12 | C_BALANCE + C_YTD_PAYMENT = Σ delivered OL_AMOUNT per customer            |
//!
//! Condition 11 is stated in the specification as "= 2100" right after population; each
//! Delivery removes one NEW-ORDER row and adds one to a customer's C_DELIVERY_CNT, so the
//! form above holds at any time and equals the specification's at load.
//! Money is compared to the cent ([`crate::util::money_eq`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use engine::db::Database;
use engine::{Tx, TxResult};

use super::schema::{customer as c, district as d, history as h, order as o};
use super::schema::{new_order as no, order_line as ol, warehouse as w};
use super::{Tables, TpccConfig};
use crate::util::{float, int, is_null, money_eq, with_txn, CheckProgress, TableScan};
use crate::workload::Condition;

type District = (i64, i64);
/// (w_id, d_id, o_id).
pub type OrderKey = (i64, i64, i64);
/// (w_id, d_id, c_id).
pub type CustomerKey = (i64, i64, i64);

#[derive(Default)]
struct DistrictAgg {
    d_ytd: f64,
    next_o_id: i64,
    max_o_id: Option<i64>,
    order_count: i64,
    ol_cnt_sum: i64,
    ol_rows: i64,
    no_ids: Vec<i64>,
    history_sum: f64,
    delivery_cnt_sum: i64,
    seen: bool,
}

struct OrderAgg {
    c_id: i64,
    carrier_null: bool,
    ol_cnt: i64,
    ol_rows: i64,
    /// Lines whose null-ness of ol_delivery_d disagrees with o_carrier_id.
    mismatched_lines: i64,
    delivered_amount: f64,
}

#[derive(Default)]
struct CustomerAgg {
    balance: f64,
    ytd_payment: f64,
    history_sum: f64,
    delivered_amount: f64,
    seen: bool,
}

/// Everything the conditions compare.
#[derive(Default)]
pub struct Snapshot {
    warehouses: BTreeMap<i64, (f64, f64, f64)>, // w_ytd, Σ d_ytd, Σ h_amount
    districts: BTreeMap<District, DistrictAgg>,
    orders: BTreeMap<OrderKey, OrderAgg>,
    new_orders: BTreeSet<OrderKey>,
    customers: BTreeMap<CustomerKey, CustomerAgg>,
    orphan_lines: i64,
}

/// Builds a [`Snapshot`] from rows fed one by one, in this order: warehouses, districts,
/// customers, history, orders, new-orders, order lines (each aggregate is keyed by what came
/// before it). The engine's reader below feeds it from scans; a database kept elsewhere (the
/// optimal kernel) feeds it from its own structures, so both are judged by the same
/// [`conditions`].
#[derive(Default)]
pub struct SnapshotBuilder {
    s: Snapshot,
    /// The order lines fed last, all of one order, not yet added to it.
    lines: LineRun,
}

/// Consecutive ORDER-LINE rows of one order (a New-Order inserts its lines together, so they
/// come so in a table read as stored, and in key order): summed here and added to the order
/// once, instead of a look-up of the order in a map of millions for every line.
#[derive(Default)]
struct LineRun {
    order: Option<OrderKey>,
    /// The order's O_CARRIER_ID is null; `None`: there is no such order.
    carrier_null: Option<bool>,
    rows: i64,
    mismatched: i64,
    delivered_amount: f64,
}

impl SnapshotBuilder {
    pub fn new() -> SnapshotBuilder {
        SnapshotBuilder::default()
    }

    pub fn warehouse(&mut self, w_id: i64, w_ytd: f64) {
        self.s.warehouses.insert(w_id, (w_ytd, 0.0, 0.0));
    }

    pub fn district(&mut self, w_id: i64, d_id: i64, d_ytd: f64, next_o_id: i64) {
        let d = self.s.districts.entry((w_id, d_id)).or_default();
        d.seen = true;
        d.d_ytd = d_ytd;
        d.next_o_id = next_o_id;
        if let Some(w) = self.s.warehouses.get_mut(&w_id) {
            w.1 += d_ytd;
        }
    }

    pub fn customer(&mut self, key: CustomerKey, balance: f64, ytd_payment: f64, deliveries: i64) {
        let c = self.s.customers.entry(key).or_default();
        c.seen = true;
        c.balance = balance;
        c.ytd_payment = ytd_payment;
        self.s
            .districts
            .entry((key.0, key.1))
            .or_default()
            .delivery_cnt_sum += deliveries;
    }

    /// A HISTORY row of district (`w_id`, `d_id`) paid by customer `customer`.
    pub fn history(&mut self, w_id: i64, d_id: i64, customer: CustomerKey, amount: f64) {
        self.s.warehouses.entry(w_id).or_insert((0.0, 0.0, 0.0)).2 += amount;
        self.s
            .districts
            .entry((w_id, d_id))
            .or_default()
            .history_sum += amount;
        self.s.customers.entry(customer).or_default().history_sum += amount;
    }

    pub fn order(&mut self, key: OrderKey, c_id: i64, carrier_null: bool, ol_cnt: i64) {
        let d = self.s.districts.entry((key.0, key.1)).or_default();
        d.max_o_id = d.max_o_id.max(Some(key.2));
        d.order_count += 1;
        d.ol_cnt_sum += ol_cnt;
        self.s.orders.insert(
            key,
            OrderAgg {
                c_id,
                carrier_null,
                ol_cnt,
                ol_rows: 0,
                mismatched_lines: 0,
                delivered_amount: 0.0,
            },
        );
    }

    pub fn new_order(&mut self, key: OrderKey) {
        self.s
            .districts
            .entry((key.0, key.1))
            .or_default()
            .no_ids
            .push(key.2);
        self.s.new_orders.insert(key);
    }

    /// An ORDER-LINE row of order `order`; `delivered`: OL_DELIVERY_D is not null.
    pub fn order_line(&mut self, order: OrderKey, delivered: bool, amount: f64) {
        if self.lines.order != Some(order) {
            self.add_lines();
            self.lines.order = Some(order);
            self.lines.carrier_null = self.s.orders.get(&order).map(|o| o.carrier_null);
        }
        let run = &mut self.lines;
        run.rows += 1;
        if Some(delivered) == run.carrier_null {
            run.mismatched += 1;
        }
        if delivered {
            run.delivered_amount += amount;
        }
    }

    /// Adds the run of order lines fed last to its order and district.
    fn add_lines(&mut self) {
        let run = std::mem::take(&mut self.lines);
        let Some(order) = run.order else {
            return;
        };
        self.s
            .districts
            .entry((order.0, order.1))
            .or_default()
            .ol_rows += run.rows;
        match self.s.orders.get_mut(&order) {
            Some(o) => {
                o.ol_rows += run.rows;
                o.mismatched_lines += run.mismatched;
                o.delivered_amount += run.delivered_amount;
            }
            None => self.s.orphan_lines += run.rows,
        }
    }

    /// The snapshot, with each customer's delivered amount summed from its orders.
    pub fn build(mut self) -> Snapshot {
        self.add_lines();
        let s = &mut self.s;
        for ((w, d, _), o) in &s.orders {
            s.customers
                .entry((*w, *d, o.c_id))
                .or_default()
                .delivered_amount += o.delivered_amount;
        }
        self.s
    }
}

/// The scans [`read`] makes, one per table, resolved once.
struct Scans<'p> {
    warehouse: TableScan<'p>,
    district: TableScan<'p>,
    customer: TableScan<'p>,
    history: TableScan<'p>,
    order: TableScan<'p>,
    new_order: TableScan<'p>,
    order_line: TableScan<'p>,
}

impl<'p> Scans<'p> {
    fn new(db: &Database, t: &Tables, progress: CheckProgress<'p>) -> TxResult<Scans<'p>> {
        let scan = |table, cols: &[usize]| {
            TableScan::new(db, table, cols).map(|s| s.reporting_to(progress))
        };
        Ok(Scans {
            warehouse: scan(&t.warehouse, &[w::W_ID, w::W_YTD])?,
            district: scan(&t.district, &[d::D_W_ID, d::D_ID, d::D_YTD, d::D_NEXT_O_ID])?,
            customer: scan(
                &t.customer,
                &[
                    c::C_W_ID,
                    c::C_D_ID,
                    c::C_ID,
                    c::C_BALANCE,
                    c::C_YTD_PAYMENT,
                    c::C_DELIVERY_CNT,
                ],
            )?,
            history: scan(
                &t.history,
                &[
                    h::H_W_ID,
                    h::H_D_ID,
                    h::H_C_W_ID,
                    h::H_C_D_ID,
                    h::H_C_ID,
                    h::H_AMOUNT,
                ],
            )?,
            order: scan(
                &t.order,
                &[
                    o::O_W_ID,
                    o::O_D_ID,
                    o::O_ID,
                    o::O_C_ID,
                    o::O_CARRIER_ID,
                    o::O_OL_CNT,
                ],
            )?,
            new_order: scan(&t.new_order, &[no::NO_W_ID, no::NO_D_ID, no::NO_O_ID])?,
            order_line: scan(
                &t.order_line,
                &[
                    ol::OL_W_ID,
                    ol::OL_D_ID,
                    ol::OL_O_ID,
                    ol::OL_DELIVERY_D,
                    ol::OL_AMOUNT,
                ],
            )?,
        })
    }
}

/// Folds every table into a [`Snapshot`], a page of rows at a time ([`TableScan`]): memory
/// grows with the orders, not with their lines.
fn read(tx: &mut dyn Tx, scans: &Scans<'_>) -> TxResult<Snapshot> {
    let mut b = SnapshotBuilder::new();
    scans.warehouse.for_each(tx, |r| {
        b.warehouse(int(r, 0)?, float(r, 1)?);
        Ok(())
    })?;
    scans.district.for_each(tx, |r| {
        b.district(int(r, 0)?, int(r, 1)?, float(r, 2)?, int(r, 3)?);
        Ok(())
    })?;
    // The tables of many rows are read as they are stored (`TableScan::for_each_stored`):
    // each heap page once, in order. In key order a district after another, a pool smaller
    // than ORDER-LINE read each of its pages once per district (its rows of one moment, from
    // every district, share a page).
    scans.customer.for_each_stored(tx, |r| {
        let key = (int(r, 0)?, int(r, 1)?, int(r, 2)?);
        b.customer(key, float(r, 3)?, float(r, 4)?, int(r, 5)?);
        Ok(())
    })?;
    scans.history.for_each_stored(tx, |r| {
        let customer = (int(r, 2)?, int(r, 3)?, int(r, 4)?);
        b.history(int(r, 0)?, int(r, 1)?, customer, float(r, 5)?);
        Ok(())
    })?;
    scans.order.for_each_stored(tx, |r| {
        let key = (int(r, 0)?, int(r, 1)?, int(r, 2)?);
        b.order(key, int(r, 3)?, is_null(r, 4)?, int(r, 5)?);
        Ok(())
    })?;
    scans.new_order.for_each_stored(tx, |r| {
        b.new_order((int(r, 0)?, int(r, 1)?, int(r, 2)?));
        Ok(())
    })?;
    scans.order_line.for_each_stored(tx, |r| {
        let key = (int(r, 0)?, int(r, 1)?, int(r, 2)?);
        let delivered = !is_null(r, 3)?;
        // The amount is read only where it counts (a delivered line), as before.
        let amount = if delivered { float(r, 4)? } else { 0.0 };
        b.order_line(key, delivered, amount);
        Ok(())
    })?;
    Ok(b.build())
}

/// Collects violations: the count and the first few.
struct Violations {
    count: usize,
    examples: Vec<String>,
}

impl Violations {
    fn new() -> Self {
        Violations {
            count: 0,
            examples: Vec::new(),
        }
    }

    fn add(&mut self, what: impl FnOnce() -> String) {
        self.count += 1;
        if self.examples.len() < 3 {
            self.examples.push(what());
        }
    }

    fn into_condition(self, number: u32, description: &str) -> Condition {
        Condition {
            name: format!("TPC-C 3.3.2.{number}"),
            description: description.to_string(),
            violation: (self.count > 0).then(|| {
                format!(
                    "{} violation(s), e.g. {}",
                    self.count,
                    self.examples.join("; ")
                )
            }),
        }
    }
}

/// Evaluates the twelve conditions on a snapshot.
pub fn conditions(s: &Snapshot, config: &TpccConfig) -> Vec<Condition> {
    let mut out = Vec::with_capacity(12);

    let mut v = Violations::new();
    for (w, (w_ytd, d_sum, _)) in &s.warehouses {
        if !money_eq(*w_ytd, *d_sum) {
            v.add(|| format!("warehouse {w}: w_ytd {w_ytd:.2} vs sum(d_ytd) {d_sum:.2}"));
        }
    }
    out.push(v.into_condition(1, "W_YTD = sum(D_YTD)"));

    let mut v = Violations::new();
    for (k, d) in s.districts.iter().filter(|(_, d)| d.seen) {
        let max_no = d.no_ids.iter().max().copied();
        let expected = d.next_o_id - 1;
        if d.max_o_id != Some(expected) || max_no.is_some_and(|m| m != expected) {
            v.add(|| {
                format!(
                    "district {k:?}: d_next_o_id - 1 = {expected}, max(o_id) = {:?}, \
                     max(no_o_id) = {max_no:?}",
                    d.max_o_id
                )
            });
        }
    }
    out.push(v.into_condition(2, "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)"));

    let mut v = Violations::new();
    for (k, d) in &s.districts {
        if let (Some(max), Some(min)) = (d.no_ids.iter().max(), d.no_ids.iter().min()) {
            let count = d.no_ids.len() as i64;
            if max - min + 1 != count {
                v.add(|| format!("district {k:?}: new-orders {min}..={max} but {count} rows"));
            }
        }
    }
    out.push(v.into_condition(3, "max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW-ORDER)"));

    let mut v = Violations::new();
    for (k, d) in &s.districts {
        if d.ol_cnt_sum != d.ol_rows {
            v.add(|| {
                format!(
                    "district {k:?}: sum(o_ol_cnt) {} vs {} order lines",
                    d.ol_cnt_sum, d.ol_rows
                )
            });
        }
    }
    out.push(v.into_condition(4, "sum(O_OL_CNT) = count(ORDER-LINE)"));

    let mut v = Violations::new();
    for (k, o) in &s.orders {
        if o.carrier_null != s.new_orders.contains(k) {
            v.add(|| {
                format!(
                    "order {k:?}: carrier null = {}, new-order row = {}",
                    o.carrier_null, !o.carrier_null
                )
            });
        }
    }
    for k in s.new_orders.iter().filter(|k| !s.orders.contains_key(k)) {
        v.add(|| format!("new-order {k:?} has no order"));
    }
    out.push(v.into_condition(5, "O_CARRIER_ID null iff a NEW-ORDER row exists"));

    let mut v = Violations::new();
    for (k, o) in &s.orders {
        if o.ol_cnt != o.ol_rows {
            v.add(|| format!("order {k:?}: o_ol_cnt {} vs {} lines", o.ol_cnt, o.ol_rows));
        }
    }
    if s.orphan_lines > 0 {
        let n = s.orphan_lines;
        v.add(|| format!("{n} order lines without an order"));
    }
    out.push(v.into_condition(6, "O_OL_CNT = count(ORDER-LINE) per order"));

    let mut v = Violations::new();
    for (k, o) in s.orders.iter().filter(|(_, o)| o.mismatched_lines > 0) {
        v.add(|| {
            format!(
                "order {k:?}: {} line(s) whose ol_delivery_d null-ness differs from the carrier's",
                o.mismatched_lines
            )
        });
    }
    out.push(v.into_condition(7, "OL_DELIVERY_D null iff O_CARRIER_ID null"));

    let mut v = Violations::new();
    for (w, (w_ytd, _, h_sum)) in &s.warehouses {
        if !money_eq(*w_ytd, *h_sum) {
            v.add(|| format!("warehouse {w}: w_ytd {w_ytd:.2} vs sum(h_amount) {h_sum:.2}"));
        }
    }
    out.push(v.into_condition(8, "W_YTD = sum(H_AMOUNT)"));

    let mut v = Violations::new();
    for (k, d) in s.districts.iter().filter(|(_, d)| d.seen) {
        if !money_eq(d.d_ytd, d.history_sum) {
            v.add(|| {
                format!(
                    "district {k:?}: d_ytd {:.2} vs sum(h_amount) {:.2}",
                    d.d_ytd, d.history_sum
                )
            });
        }
    }
    out.push(v.into_condition(9, "D_YTD = sum(H_AMOUNT)"));

    let mut v = Violations::new();
    for (k, c) in &s.customers {
        let expected = c.delivered_amount - c.history_sum;
        if !c.seen || !money_eq(c.balance, expected) {
            v.add(|| {
                format!(
                    "customer {k:?}: c_balance {:.2} vs {expected:.2}",
                    c.balance
                )
            });
        }
    }
    out.push(v.into_condition(10, "C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT)"));

    let mut v = Violations::new();
    let delivered_at_load = config.delivered_per_district();
    for (k, d) in s.districts.iter().filter(|(_, d)| d.seen) {
        let lhs = d.order_count - d.no_ids.len() as i64;
        let rhs = delivered_at_load + d.delivery_cnt_sum;
        if lhs != rhs {
            v.add(|| {
                format!(
                    "district {k:?}: count(order) - count(new-order) = {lhs}, \
                     {delivered_at_load} + sum(c_delivery_cnt) = {rhs}"
                )
            });
        }
    }
    out.push(v.into_condition(
        11,
        "count(ORDER) - count(NEW-ORDER) = delivered at load + sum(C_DELIVERY_CNT)",
    ));

    let mut v = Violations::new();
    for (k, c) in s.customers.iter().filter(|(_, c)| c.seen) {
        if !money_eq(c.balance + c.ytd_payment, c.delivered_amount) {
            v.add(|| {
                format!(
                    "customer {k:?}: c_balance + c_ytd_payment {:.2} vs delivered {:.2}",
                    c.balance + c.ytd_payment,
                    c.delivered_amount
                )
            });
        }
    }
    out.push(v.into_condition(12, "C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT)"));
    out
}

pub fn check(
    db: &Arc<Database>,
    config: &TpccConfig,
    progress: CheckProgress<'_>,
) -> TxResult<Vec<Condition>> {
    let scans = Scans::new(db, &Tables::resolve(db)?, progress)?;
    let snapshot = with_txn(db, |tx| read(tx, &scans))?;
    Ok(conditions(&snapshot, config))
}
