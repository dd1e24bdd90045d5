//! Rows in, rows out: building a kernel from engine rows and reading its tables back as
//! engine rows, in the workloads crate's column order ([`crate::tables::COLUMNS`]).
//!
//! Rows are `engine::Value`s: identifiers, counts and dates `Int`, money and rates `Float`
//! (an `Int` is accepted and widened), text `Str`, `o_carrier_id` and `ol_delivery_d` may be
//! `Null`. [`Kernel::rows`] returns each table sorted by its primary key, the order an engine
//! scan returns.
//!
//! The kernel's layout needs dense key spaces, and [`Kernel::from_rows`] refuses rows that
//! break them (a gap, a duplicate, a district count other than ten, an order whose lines are
//! not exactly 1..=o_ol_cnt) with [`KernelError::Unsupported`]. Any database the TPC-C loader
//! produces, and any the two transactions then make of it, is dense.

use engine::{Row, Value};

use crate::error::KernelError;
use crate::fixed::FixedStr;
use crate::kernel::{Kernel, Scale};
use crate::tables::{
    Address, Customer, District, DistrictRows, History, Item, Order, OrderLine, Stock, Table,
    Warehouse, DISTRICTS_PER_WAREHOUSE,
};

fn column(row: &[Value], i: usize, table: Table) -> Result<&Value, KernelError> {
    row.get(i).ok_or_else(|| {
        KernelError::Invalid(format!(
            "{} row of {} columns has no column {i}",
            table.name(),
            row.len()
        ))
    })
}

fn int(row: &[Value], i: usize, table: Table) -> Result<i64, KernelError> {
    column(row, i, table)?
        .as_int()
        .ok_or_else(|| bad(table, i, "an integer"))
}

fn id(row: &[Value], i: usize, table: Table) -> Result<u32, KernelError> {
    u32::try_from(int(row, i, table)?).map_err(|_| bad(table, i, "an id in u32 range"))
}

fn float(row: &[Value], i: usize, table: Table) -> Result<f64, KernelError> {
    column(row, i, table)?
        .as_float()
        .ok_or_else(|| bad(table, i, "a number"))
}

fn text<const N: usize>(row: &[Value], i: usize, table: Table) -> Result<FixedStr<N>, KernelError> {
    let s = column(row, i, table)?
        .as_str()
        .ok_or_else(|| bad(table, i, "text"))?;
    FixedStr::new(s)
}

fn nullable_int(row: &[Value], i: usize, table: Table) -> Result<Option<i64>, KernelError> {
    match column(row, i, table)? {
        Value::Null => Ok(None),
        Value::Int(v) => Ok(Some(*v)),
        _ => Err(bad(table, i, "an integer or NULL")),
    }
}

fn bad(table: Table, i: usize, want: &str) -> KernelError {
    KernelError::Invalid(format!(
        "{}.{} is not {want}",
        table.name(),
        table.columns().get(i).unwrap_or(&"?")
    ))
}

fn address(row: &[Value], first: usize, table: Table) -> Result<Address, KernelError> {
    Ok(Address {
        street_1: text(row, first, table)?,
        street_2: text(row, first + 1, table)?,
        city: text(row, first + 2, table)?,
        state: text(row, first + 3, table)?,
        zip: text(row, first + 4, table)?,
    })
}

fn unsupported(what: String) -> KernelError {
    KernelError::Unsupported(what)
}

/// Puts `value` at `slots[at]`, refusing an out-of-range or repeated key.
fn place<T>(
    slots: &mut [Option<T>],
    at: Option<usize>,
    value: T,
    table: Table,
) -> Result<(), KernelError> {
    let slot = at
        .and_then(|at| slots.get_mut(at))
        .ok_or_else(|| unsupported(format!("{} key outside the dense key space", table.name())))?;
    if slot.replace(value).is_some() {
        return Err(unsupported(format!("duplicate {} key", table.name())));
    }
    Ok(())
}

/// Unwraps fully placed slots, refusing a gap.
fn dense<T>(slots: Vec<Option<T>>, table: Table) -> Result<Vec<T>, KernelError> {
    slots
        .into_iter()
        .collect::<Option<Vec<T>>>()
        .ok_or_else(|| unsupported(format!("{} has a gap in its key space", table.name())))
}

/// Position of 1-based id `id` among `count`.
fn slot(id: u32, count: usize) -> Option<usize> {
    let at = (id as usize).checked_sub(1)?;
    (at < count).then_some(at)
}

fn text_value<const N: usize>(v: &FixedStr<N>) -> Value {
    Value::Str(v.to_string_lossy())
}

fn ints<const K: usize>(values: [i64; K]) -> impl Iterator<Item = Value> {
    values.into_iter().map(Value::Int)
}

fn address_values(a: &Address) -> [Value; 5] {
    [
        text_value(&a.street_1),
        text_value(&a.street_2),
        text_value(&a.city),
        text_value(&a.state),
        text_value(&a.zip),
    ]
}

fn nullable(v: Option<i64>) -> Value {
    v.map_or(Value::Null, Value::Int)
}

const D: u32 = DISTRICTS_PER_WAREHOUSE;

impl Kernel {
    /// Builds a kernel from the rows of the nine tables; `rows(table)` is asked once per
    /// table for all its rows, in the column order of [`Table::columns`], in any row order.
    pub fn from_rows(mut rows: impl FnMut(Table) -> Vec<Row>) -> Result<Kernel, KernelError> {
        // WAREHOUSE and ITEM fix the scale; the other dense tables must agree with it.
        let t = Table::Warehouse;
        let warehouse_rows = rows(t);
        let w_count = warehouse_rows.len();
        let mut warehouses = vec![None; w_count];
        for r in &warehouse_rows {
            let row = Warehouse {
                name: text(r, 1, t)?,
                address: address(r, 2, t)?,
                tax: float(r, 7, t)?,
                ytd: float(r, 8, t)?,
            };
            place(&mut warehouses, slot(id(r, 0, t)?, w_count), row, t)?;
        }
        let warehouses = dense(warehouses, t)?;

        let t = Table::Item;
        let item_rows = rows(t);
        let i_count = item_rows.len();
        let mut items = vec![None; i_count];
        for r in &item_rows {
            let row = Item {
                im_id: int(r, 1, t)?,
                name: text(r, 2, t)?,
                price: float(r, 3, t)?,
                data: text(r, 4, t)?,
            };
            place(&mut items, slot(id(r, 0, t)?, i_count), row, t)?;
        }
        let items = dense(items, t)?;

        let t = Table::Customer;
        let customer_rows = rows(t);
        let districts_count = w_count * D as usize;
        if districts_count == 0 || !customer_rows.len().is_multiple_of(districts_count) {
            return Err(unsupported(format!(
                "{} customers do not fill {districts_count} districts evenly",
                customer_rows.len()
            )));
        }
        let scale = Scale {
            warehouses: u32::try_from(w_count).map_err(|_| unsupported("warehouses".into()))?,
            items: u32::try_from(i_count).map_err(|_| unsupported("items".into()))?,
            customers_per_district: u32::try_from(customer_rows.len() / districts_count)
                .map_err(|_| unsupported("customers".into()))?,
        };
        scale.validate()?;
        let c_count = scale.customers_per_district as usize;
        let district_slot = |w: u32, d: u32| -> Option<usize> {
            Some(slot(w, w_count)? * D as usize + slot(d, D as usize)?)
        };
        let mut customers = vec![None; customer_rows.len()];
        for r in &customer_rows {
            let row = Customer {
                first: text(r, 3, t)?,
                middle: text(r, 4, t)?,
                last: text(r, 5, t)?,
                address: address(r, 6, t)?,
                phone: text(r, 11, t)?,
                since: int(r, 12, t)?,
                credit: text(r, 13, t)?,
                credit_lim: float(r, 14, t)?,
                discount: float(r, 15, t)?,
                balance: float(r, 16, t)?,
                ytd_payment: float(r, 17, t)?,
                payment_cnt: int(r, 18, t)?,
                delivery_cnt: int(r, 19, t)?,
                data: text(r, 20, t)?,
            };
            let at = district_slot(id(r, 2, t)?, id(r, 1, t)?)
                .zip(slot(id(r, 0, t)?, c_count))
                .map(|(d, c)| d * c_count + c);
            place(&mut customers, at, row, t)?;
        }
        let customers = dense(customers, t)?;

        let t = Table::District;
        let mut districts = vec![None; districts_count];
        for r in &rows(t) {
            let row = District {
                name: text(r, 2, t)?,
                address: address(r, 3, t)?,
                tax: float(r, 8, t)?,
                ytd: float(r, 9, t)?,
                next_o_id: id(r, 10, t)?,
                next_h_id: int(r, 11, t)?,
            };
            place(
                &mut districts,
                district_slot(id(r, 1, t)?, id(r, 0, t)?),
                row,
                t,
            )?;
        }
        let districts = dense(districts, t)?;

        let t = Table::Stock;
        let mut stock = vec![None; scale.stock_rows()];
        for r in &rows(t) {
            let mut dist = [FixedStr::default(); 10];
            for (d, slot) in dist.iter_mut().enumerate() {
                *slot = text(r, 3 + d, t)?;
            }
            let row = Stock {
                quantity: int(r, 2, t)?,
                dist,
                ytd: int(r, 13, t)?,
                order_cnt: int(r, 14, t)?,
                remote_cnt: int(r, 15, t)?,
                data: text(r, 16, t)?,
            };
            let at = slot(id(r, 1, t)?, w_count)
                .zip(slot(id(r, 0, t)?, i_count))
                .map(|(w, i)| w * i_count + i);
            place(&mut stock, at, row, t)?;
        }
        let stock = dense(stock, t)?;

        let district_rows = Self::growing_tables(&mut rows, &districts, district_slot)?;
        let kernel = Kernel {
            scale,
            warehouses,
            districts,
            customers,
            items,
            stock,
            district_rows,
        };
        kernel
            .check_invariants()
            .map_err(|e| unsupported(e.to_string()))?;
        Ok(kernel)
    }

    /// ORDER, ORDER-LINE, NEW-ORDER and HISTORY, split by district.
    fn growing_tables(
        rows: &mut impl FnMut(Table) -> Vec<Row>,
        districts: &[District],
        district_slot: impl Fn(u32, u32) -> Option<usize>,
    ) -> Result<Vec<DistrictRows>, KernelError> {
        let n = districts.len();
        let out_of_space = |t: Table| unsupported(format!("{} row of no district", t.name()));

        let t = Table::Order;
        let mut orders: Vec<Vec<(u32, Order)>> = vec![Vec::new(); n];
        for r in &rows(t) {
            let at = district_slot(id(r, 2, t)?, id(r, 1, t)?).ok_or_else(|| out_of_space(t))?;
            let ol_cnt = u8::try_from(int(r, 6, t)?).map_err(|_| bad(t, 6, "a line count"))?;
            let order = Order {
                c_id: id(r, 3, t)?,
                first_line: 0,
                entry_d: int(r, 4, t)?,
                carrier_id: nullable_int(r, 5, t)?,
                ol_cnt,
                all_local: int(r, 7, t)? != 0,
            };
            orders[at].push((id(r, 0, t)?, order));
        }

        let t = Table::OrderLine;
        let mut lines: Vec<Vec<(u32, u32, OrderLine)>> = vec![Vec::new(); n];
        for r in &rows(t) {
            let at = district_slot(id(r, 2, t)?, id(r, 1, t)?).ok_or_else(|| out_of_space(t))?;
            let line = OrderLine {
                i_id: id(r, 4, t)?,
                supply_w_id: id(r, 5, t)?,
                delivery_d: nullable_int(r, 6, t)?,
                quantity: int(r, 7, t)?,
                amount: float(r, 8, t)?,
                dist_info: text(r, 9, t)?,
            };
            lines[at].push((id(r, 0, t)?, id(r, 3, t)?, line));
        }

        let t = Table::NewOrder;
        let mut new_orders: Vec<Vec<u32>> = vec![Vec::new(); n];
        for r in &rows(t) {
            let at = district_slot(id(r, 2, t)?, id(r, 1, t)?).ok_or_else(|| out_of_space(t))?;
            new_orders[at].push(id(r, 0, t)?);
        }

        let t = Table::History;
        let mut history: Vec<Vec<History>> = vec![Vec::new(); n];
        for r in &rows(t) {
            let at = district_slot(id(r, 4, t)?, id(r, 3, t)?).ok_or_else(|| out_of_space(t))?;
            history[at].push(History {
                c_id: id(r, 0, t)?,
                c_d_id: id(r, 1, t)?,
                c_w_id: id(r, 2, t)?,
                date: int(r, 5, t)?,
                amount: float(r, 6, t)?,
                data: text(r, 7, t)?,
                h_id: int(r, 8, t)?,
            });
        }

        let mut out = Vec::with_capacity(n);
        for (at, district) in districts.iter().enumerate() {
            let mut these = std::mem::take(&mut orders[at]);
            these.sort_unstable_by_key(|(o_id, _)| *o_id);
            let first_o_id = these.first().map_or(district.next_o_id, |(o_id, _)| *o_id);
            let mut these_lines = std::mem::take(&mut lines[at]);
            these_lines.sort_unstable_by_key(|(o_id, number, _)| (*o_id, *number));
            let mut rows = DistrictRows {
                first_o_id,
                orders: Vec::with_capacity(these.len()),
                order_lines: Vec::with_capacity(these_lines.len()),
                new_orders: std::mem::take(&mut new_orders[at]),
                history: std::mem::take(&mut history[at]),
            };
            let mut next_line = these_lines.into_iter();
            for (k, (o_id, mut order)) in these.into_iter().enumerate() {
                if o_id as usize != first_o_id as usize + k {
                    return Err(unsupported(format!(
                        "district {at}: order ids not consecutive at {o_id}"
                    )));
                }
                order.first_line = rows.order_lines.len() as u32;
                for number in 1..=u32::from(order.ol_cnt) {
                    match next_line.next() {
                        Some((o, n, line)) if o == o_id && n == number => {
                            rows.order_lines.push(line)
                        }
                        _ => {
                            return Err(unsupported(format!(
                                "district {at}: order {o_id} lacks line {number}"
                            )))
                        }
                    }
                }
                rows.orders.push(order);
            }
            if next_line.next().is_some() {
                return Err(unsupported(format!(
                    "district {at}: order lines of no order"
                )));
            }
            rows.new_orders.sort_unstable();
            rows.history.sort_unstable_by_key(|h| h.h_id);
            out.push(rows);
        }
        Ok(out)
    }

    /// The rows of `table`, sorted by primary key, in [`Table::columns`] order.
    pub fn rows(&self, table: Table) -> Vec<Row> {
        let mut out = Vec::new();
        let district_ids = (1..=self.scale.warehouses)
            .flat_map(|w| (1..=D).map(move |d| (i64::from(w), i64::from(d))));
        match table {
            Table::Warehouse => {
                for (w, row) in (1..).zip(&self.warehouses) {
                    let mut r = vec![Value::Int(w), text_value(&row.name)];
                    r.extend(address_values(&row.address));
                    r.extend([Value::Float(row.tax), Value::Float(row.ytd)]);
                    out.push(r);
                }
            }
            Table::District => {
                for ((w, d), row) in district_ids.zip(&self.districts) {
                    let mut r = vec![Value::Int(d), Value::Int(w), text_value(&row.name)];
                    r.extend(address_values(&row.address));
                    r.extend([
                        Value::Float(row.tax),
                        Value::Float(row.ytd),
                        Value::Int(i64::from(row.next_o_id)),
                        Value::Int(row.next_h_id),
                    ]);
                    out.push(r);
                }
            }
            Table::Customer => {
                let per = self.scale.customers_per_district as usize;
                for ((w, d), customers) in district_ids.zip(self.customers.chunks(per)) {
                    for (c, row) in (1..).zip(customers) {
                        let mut r = vec![
                            Value::Int(c),
                            Value::Int(d),
                            Value::Int(w),
                            text_value(&row.first),
                            text_value(&row.middle),
                            text_value(&row.last),
                        ];
                        r.extend(address_values(&row.address));
                        r.extend([
                            text_value(&row.phone),
                            Value::Int(row.since),
                            text_value(&row.credit),
                            Value::Float(row.credit_lim),
                            Value::Float(row.discount),
                            Value::Float(row.balance),
                            Value::Float(row.ytd_payment),
                            Value::Int(row.payment_cnt),
                            Value::Int(row.delivery_cnt),
                            text_value(&row.data),
                        ]);
                        out.push(r);
                    }
                }
            }
            Table::History => {
                for ((w, d), rows) in district_ids.zip(&self.district_rows) {
                    for h in &rows.history {
                        let mut r: Row = ints([
                            i64::from(h.c_id),
                            i64::from(h.c_d_id),
                            i64::from(h.c_w_id),
                            d,
                            w,
                            h.date,
                        ])
                        .collect();
                        r.extend([
                            Value::Float(h.amount),
                            text_value(&h.data),
                            Value::Int(h.h_id),
                        ]);
                        out.push(r);
                    }
                }
            }
            Table::NewOrder => {
                for ((w, d), rows) in district_ids.zip(&self.district_rows) {
                    for &o_id in &rows.new_orders {
                        out.push(ints([i64::from(o_id), d, w]).collect());
                    }
                }
            }
            Table::Order => {
                for ((w, d), rows) in district_ids.zip(&self.district_rows) {
                    for (o_id, o) in (i64::from(rows.first_o_id)..).zip(&rows.orders) {
                        let mut r: Row = ints([o_id, d, w, i64::from(o.c_id), o.entry_d]).collect();
                        r.extend([
                            nullable(o.carrier_id),
                            Value::Int(i64::from(o.ol_cnt)),
                            Value::Int(i64::from(o.all_local)),
                        ]);
                        out.push(r);
                    }
                }
            }
            Table::OrderLine => {
                for ((w, d), rows) in district_ids.zip(&self.district_rows) {
                    for (o_id, o) in (i64::from(rows.first_o_id)..).zip(&rows.orders) {
                        let first = o.first_line as usize;
                        let these = &rows.order_lines[first..first + usize::from(o.ol_cnt)];
                        for (number, l) in (1..).zip(these) {
                            let mut r: Row = ints([
                                o_id,
                                d,
                                w,
                                number,
                                i64::from(l.i_id),
                                i64::from(l.supply_w_id),
                            ])
                            .collect();
                            r.extend([
                                nullable(l.delivery_d),
                                Value::Int(l.quantity),
                                Value::Float(l.amount),
                                text_value(&l.dist_info),
                            ]);
                            out.push(r);
                        }
                    }
                }
            }
            Table::Item => {
                for (i, row) in (1..).zip(&self.items) {
                    out.push(vec![
                        Value::Int(i),
                        Value::Int(row.im_id),
                        text_value(&row.name),
                        Value::Float(row.price),
                        text_value(&row.data),
                    ]);
                }
            }
            Table::Stock => {
                let per = self.scale.items as usize;
                for (w, stock) in (1..).zip(self.stock.chunks(per)) {
                    for (i, row) in (1..).zip(stock) {
                        let mut r = vec![Value::Int(i), Value::Int(w), Value::Int(row.quantity)];
                        r.extend(row.dist.iter().map(text_value));
                        r.extend([
                            Value::Int(row.ytd),
                            Value::Int(row.order_cnt),
                            Value::Int(row.remote_cnt),
                            text_value(&row.data),
                        ]);
                        out.push(r);
                    }
                }
            }
        }
        out
    }
}
