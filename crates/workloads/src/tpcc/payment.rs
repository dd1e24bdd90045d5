//! The Payment transaction (clause 2.5.2), and the 2008 paper's form (Figure 4).
//!
//! Both forms follow Figure 4's order: get D and W for update; find the customer (by id, or
//! the middle of those with the last name sorted by c_first) and read it for update; update
//! c_balance, c_ytd_payment, c_payment_cnt, and for bad credit ("BC") prepend the payment to
//! c_data (kept to 500 characters); update d_ytd (and the history counter, see `schema`) and
//! w_ytd; insert HISTORY with h_data = w_name + 4 spaces + d_name.
//!
//! Lock order: every TPC-C transaction here that writes the district takes it before the
//! warehouse (New-Order too), so New-Order and Payment cannot deadlock on that pair.

use engine::{Fetch, KeyRange, Row, Tx, TxError, TxResult, Value};

use super::input::{CustomerSelector, PaymentInput};
use super::schema::{customer, district, warehouse};
use super::Tables;
use crate::util::{float, int, string};

#[derive(Clone, Debug, PartialEq)]
pub struct PaymentOutput {
    pub c_id: i64,
    pub c_balance: f64,
    pub c_credit: String,
}

/// Finds a customer by last name: of those in (w, d) with `last`, sorted by c_first, the
/// one at position ⌈n/2⌉. Returns its c_id.
pub fn customer_by_last_name(
    tx: &mut dyn Tx,
    t: &Tables,
    w_id: i64,
    d_id: i64,
    last: &str,
) -> TxResult<i64> {
    let prefix = [
        Value::Int(w_id),
        Value::Int(d_id),
        Value::Str(last.to_string()),
    ];
    let rows = tx.scan_index(
        &t.customer_by_name,
        KeyRange::prefix(&prefix),
        None,
        false,
        Fetch::Cols(&[customer::C_ID]),
        false,
    )?;
    if rows.is_empty() {
        return Err(TxError::Invalid(format!(
            "no customer named {last} in district ({w_id}, {d_id})"
        )));
    }
    int(&rows[(rows.len() - 1) / 2], 0)
}

/// Resolves a selector to a c_id.
pub fn resolve_customer(
    tx: &mut dyn Tx,
    t: &Tables,
    w_id: i64,
    d_id: i64,
    selector: &CustomerSelector,
) -> TxResult<i64> {
    match selector {
        CustomerSelector::ById(id) => Ok(*id),
        CustomerSelector::ByLastName(last) => customer_by_last_name(tx, t, w_id, d_id, last),
    }
}

const W_COLS: [usize; 7] = [
    warehouse::W_NAME,
    warehouse::W_STREET_1,
    warehouse::W_STREET_2,
    warehouse::W_CITY,
    warehouse::W_STATE,
    warehouse::W_ZIP,
    warehouse::W_YTD,
];
const D_COLS: [usize; 8] = [
    district::D_NAME,
    district::D_STREET_1,
    district::D_STREET_2,
    district::D_CITY,
    district::D_STATE,
    district::D_ZIP,
    district::D_YTD,
    district::D_NEXT_H_ID,
];
const C_COLS: [usize; 16] = [
    customer::C_FIRST,
    customer::C_MIDDLE,
    customer::C_LAST,
    customer::C_STREET_1,
    customer::C_STREET_2,
    customer::C_CITY,
    customer::C_STATE,
    customer::C_ZIP,
    customer::C_PHONE,
    customer::C_SINCE,
    customer::C_CREDIT,
    customer::C_CREDIT_LIM,
    customer::C_DISCOUNT,
    customer::C_BALANCE,
    customer::C_YTD_PAYMENT,
    customer::C_PAYMENT_CNT,
];
// Positions inside the fetched C_COLS row, then C_DATA appended.
const C_CREDIT_AT: usize = 10;
const C_BALANCE_AT: usize = 13;
const C_YTD_AT: usize = 14;
const C_CNT_AT: usize = 15;
const C_DATA_AT: usize = 16;

fn get_for_update(
    tx: &mut dyn Tx,
    t: &engine::TableRef,
    key: &[Value],
    cols: &[usize],
) -> TxResult<Row> {
    tx.get(t, key, Fetch::Cols(cols), true)?
        .ok_or_else(|| TxError::Invalid(format!("no row {key:?} in {}", t.name)))
}

/// Runs Payment.
pub fn payment(tx: &mut dyn Tx, t: &Tables, input: &PaymentInput) -> TxResult<PaymentOutput> {
    let w_key = [Value::Int(input.w_id)];
    let d_key = [Value::Int(input.w_id), Value::Int(input.d_id)];
    let d_row = get_for_update(tx, &t.district, &d_key, &D_COLS)?;
    let w_row = get_for_update(tx, &t.warehouse, &w_key, &W_COLS)?;
    let c_id = resolve_customer(tx, t, input.c_w_id, input.c_d_id, &input.customer)?;
    let c_key = [
        Value::Int(input.c_w_id),
        Value::Int(input.c_d_id),
        Value::Int(c_id),
    ];
    let mut c_cols = C_COLS.to_vec();
    c_cols.push(customer::C_DATA);
    let c_row = get_for_update(tx, &t.customer, &c_key, &c_cols)?;

    let c_credit = string(&c_row, C_CREDIT_AT)?.to_string();
    let c_balance = float(&c_row, C_BALANCE_AT)? - input.h_amount;
    let mut c_set = vec![
        (customer::C_BALANCE, Value::Float(c_balance)),
        (
            customer::C_YTD_PAYMENT,
            Value::Float(float(&c_row, C_YTD_AT)? + input.h_amount),
        ),
        (
            customer::C_PAYMENT_CNT,
            Value::Int(int(&c_row, C_CNT_AT)? + 1),
        ),
    ];
    if c_credit == "BC" {
        let mut data = format!(
            "{} {} {} {} {} {:.2} | ",
            c_id, input.c_d_id, input.c_w_id, input.d_id, input.w_id, input.h_amount
        );
        data.push_str(string(&c_row, C_DATA_AT)?);
        data.truncate(500);
        c_set.push((customer::C_DATA, Value::Str(data)));
    }
    let w_ytd = float(&w_row, 6)? + input.h_amount;
    let d_ytd = float(&d_row, 6)? + input.h_amount;
    let h_id = int(&d_row, 7)?;
    tx.update(&t.customer, &c_key, &c_set)?;
    let d_set = [
        (district::D_YTD, Value::Float(d_ytd)),
        (district::D_NEXT_H_ID, Value::Int(h_id + 1)),
    ];
    let w_set = [(warehouse::W_YTD, Value::Float(w_ytd))];
    tx.update(&t.district, &d_key, &d_set)?;
    tx.update(&t.warehouse, &w_key, &w_set)?;
    let h_data = format!("{}    {}", string(&w_row, 0)?, string(&d_row, 0)?);
    tx.insert(
        &t.history,
        &[
            Value::Int(c_id),
            Value::Int(input.c_d_id),
            Value::Int(input.c_w_id),
            Value::Int(input.d_id),
            Value::Int(input.w_id),
            Value::Int(input.h_date),
            Value::Float(input.h_amount),
            Value::Str(h_data),
            Value::Int(h_id),
        ],
    )?;
    Ok(PaymentOutput {
        c_id,
        c_balance,
        c_credit,
    })
}
