//! The Order-Status transaction (clause 2.6.2): read-only.
//!
//! Find the customer (by id, or the middle one by last name), its most recent order through
//! the order-by-customer index (reverse scan, limit 1), and that order's lines.

use engine::{Fetch, KeyRange, Tx, TxError, TxResult, Value};

use super::input::OrderStatusInput;
use super::payment::resolve_customer;
use super::schema::{customer, order, order_line};
use super::Tables;
use crate::util::{float, int, is_null};

#[derive(Clone, Debug, PartialEq)]
pub struct OrderStatusOutput {
    pub c_id: i64,
    pub c_balance: f64,
    /// The newest order's id and carrier (None: undelivered), if the customer has an order.
    pub order: Option<(i64, Option<i64>)>,
    /// (ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, delivered)
    pub lines: Vec<(i64, i64, i64, f64, bool)>,
}

pub fn order_status(
    tx: &mut dyn Tx,
    t: &Tables,
    input: &OrderStatusInput,
) -> TxResult<OrderStatusOutput> {
    let c_id = resolve_customer(tx, t, input.w_id, input.d_id, &input.customer)?;
    let c_key = [
        Value::Int(input.w_id),
        Value::Int(input.d_id),
        Value::Int(c_id),
    ];
    let cols = [
        customer::C_BALANCE,
        customer::C_FIRST,
        customer::C_MIDDLE,
        customer::C_LAST,
    ];
    let c_row = tx
        .get(&t.customer, &c_key, Fetch::Cols(&cols), false)?
        .ok_or_else(|| TxError::Invalid(format!("no customer {c_key:?}")))?;
    let c_balance = float(&c_row, 0)?;
    let orders = tx.scan_index(
        &t.order_by_customer,
        KeyRange::prefix(&c_key),
        Some(1),
        true,
        Fetch::Cols(&[order::O_ID, order::O_CARRIER_ID, order::O_ENTRY_D]),
        false,
    )?;
    let Some(o_row) = orders.first() else {
        return Ok(OrderStatusOutput {
            c_id,
            c_balance,
            order: None,
            lines: Vec::new(),
        });
    };
    let o_id = int(o_row, 0)?;
    let carrier = if is_null(o_row, 1)? {
        None
    } else {
        Some(int(o_row, 1)?)
    };
    let ol_prefix = [
        Value::Int(input.w_id),
        Value::Int(input.d_id),
        Value::Int(o_id),
    ];
    // Each line's columns read where it is stored, nothing copied out but the five values.
    let mut lines = Vec::with_capacity(15);
    tx.scan_columns_with(
        &t.order_line,
        KeyRange::prefix(&ol_prefix),
        None,
        false,
        &[
            order_line::OL_I_ID,
            order_line::OL_SUPPLY_W_ID,
            order_line::OL_QUANTITY,
            order_line::OL_AMOUNT,
            order_line::OL_DELIVERY_D,
        ],
        false,
        &mut |r| {
            lines.push((
                r.int(order_line::OL_I_ID)?,
                r.int(order_line::OL_SUPPLY_W_ID)?,
                r.int(order_line::OL_QUANTITY)?,
                r.float(order_line::OL_AMOUNT)?,
                !r.is_null(order_line::OL_DELIVERY_D)?,
            ));
            Ok(())
        },
    )?;
    Ok(OrderStatusOutput {
        c_id,
        c_balance,
        order: Some((o_id, carrier)),
        lines,
    })
}
