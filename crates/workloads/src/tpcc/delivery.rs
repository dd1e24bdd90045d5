//! The Delivery transaction (clause 2.7.4), run in deferred mode's single database
//! transaction over all ten districts of the home warehouse.
//!
//! Per district: the oldest NEW-ORDER row (ascending scan, limit 1, for update); none → the
//! district is skipped; else delete it, read the order's o_c_id and set its o_carrier_id (one
//! read-modify-write), set ol_delivery_d on its
//! lines and sum their ol_amount, add the sum to the customer's c_balance and increment
//! c_delivery_cnt.
//!
//! The work runs in phases across the districts rather than district by district: first the
//! ten new-order scans, then the orders, then the order lines (with the customers), then the
//! customers, each phase's reads and scans named in hints ([`Tx::prefetch_scan`],
//! [`Tx::prefetch_for_update`]) before it starts. Each phase's reads are independent of one
//! another, so a form that reads ahead on hints (a client over the network,
//! `client::RemoteTx`) sends each phase in one round trip instead of one per district;
//! embedded, the hints let the engine start loading the rows early. The rows read and
//! written are the specification's.

use engine::{Fetch, KeyRange, TableRef, Tx, TxError, TxResult, Value};

use super::input::DeliveryInput;
use super::schema::{customer, new_order, order, order_line};
use super::{Tables, DISTRICTS_PER_WAREHOUSE};
use crate::util::int;

#[derive(Clone, Debug, PartialEq)]
pub struct DeliveryOutput {
    /// Per district (index d_id − 1): the order delivered, or None if none was waiting.
    pub delivered: Vec<Option<i64>>,
}

/// The columns of an order Delivery reads and sets, and of its customer: a form that reads
/// ahead on hints reads only these, for update (a customer row is some 650 bytes, most of them
/// C_DATA, which Delivery does not touch).
const ORDER_COLUMNS: [usize; 2] = [order::O_C_ID, order::O_CARRIER_ID];
const CUSTOMER_COLUMNS: [usize; 2] = [customer::C_BALANCE, customer::C_DELIVERY_CNT];

pub fn delivery(tx: &mut dyn Tx, t: &Tables, input: &DeliveryInput) -> TxResult<DeliveryOutput> {
    let w = input.w_id;
    // Phase 1: each district's oldest new order.
    for d in 1..=DISTRICTS_PER_WAREHOUSE {
        tx.prefetch_scan(&t.new_order, &[w, d], Some(1), true);
    }
    let mut delivered = Vec::with_capacity(DISTRICTS_PER_WAREHOUSE as usize);
    for d in 1..=DISTRICTS_PER_WAREHOUSE {
        let prefix = [Value::Int(w), Value::Int(d)];
        let oldest = tx.scan(
            &t.new_order,
            KeyRange::prefix(&prefix),
            Some(1),
            false,
            Fetch::Cols(&[new_order::NO_O_ID]),
            true,
        )?;
        delivered.push(match oldest.first() {
            Some(row) => Some(int(row, 0)?),
            None => None,
        });
    }
    // (d, o_id) of each district with an order to deliver.
    let orders: Vec<(i64, i64)> = (1..=DISTRICTS_PER_WAREHOUSE)
        .zip(&delivered)
        .filter_map(|(d, o)| o.map(|o_id| (d, o_id)))
        .collect();

    // Phase 2: each order's new-order row goes; its customer is read and its carrier set.
    let order_keys: Vec<[i64; 3]> = orders.iter().map(|&(d, o)| [w, d, o]).collect();
    let hints: Vec<(&TableRef, &[i64])> = order_keys.iter().map(|k| (&t.order, &k[..])).collect();
    tx.prefetch_for_update(&hints, Some(&ORDER_COLUMNS));
    let mut customers = Vec::with_capacity(orders.len());
    for &(d, o_id) in &orders {
        let o_key = [Value::Int(w), Value::Int(d), Value::Int(o_id)];
        tx.delete(&t.new_order, &o_key)?;
        // The order's customer read and its carrier set in one visit to the row.
        let mut c_id = None;
        let found = tx.update_columns_with(&t.order, &o_key, &ORDER_COLUMNS, &mut |r, set| {
            c_id = Some(r.int(order::O_C_ID)?);
            set.int(order::O_CARRIER_ID, input.carrier_id);
            Ok(())
        })?;
        match c_id {
            Some(c_id) if found => customers.push([w, d, c_id]),
            _ => {
                return Err(TxError::Invalid(format!(
                    "new-order without order {o_key:?}"
                )))
            }
        }
    }

    // Phase 3: each order's lines are delivered and summed.
    for key in &order_keys {
        tx.prefetch_scan(&t.order_line, key, None, true);
    }
    let hints: Vec<(&TableRef, &[i64])> = customers.iter().map(|k| (&t.customer, &k[..])).collect();
    tx.prefetch_for_update(&hints, Some(&CUSTOMER_COLUMNS));
    let mut amounts = Vec::with_capacity(orders.len());
    let mut numbers = Vec::with_capacity(15);
    for &(d, o_id) in &orders {
        let o_key = [Value::Int(w), Value::Int(d), Value::Int(o_id)];
        // Each line's number and amount read where it is stored, the line locked for the
        // update that follows.
        let mut amount = 0.0;
        numbers.clear();
        tx.scan_columns_with(
            &t.order_line,
            KeyRange::prefix(&o_key),
            None,
            false,
            &[order_line::OL_NUMBER, order_line::OL_AMOUNT],
            true,
            &mut |line| {
                numbers.push(line.int(order_line::OL_NUMBER)?);
                amount += line.float(order_line::OL_AMOUNT)?;
                Ok(())
            },
        )?;
        for &number in &numbers {
            let ol_key = [
                Value::Int(w),
                Value::Int(d),
                Value::Int(o_id),
                Value::Int(number),
            ];
            tx.update(
                &t.order_line,
                &ol_key,
                &[(order_line::OL_DELIVERY_D, Value::Int(input.delivery_d))],
            )?;
        }
        amounts.push(amount);
    }

    // Phase 4: each customer is paid.
    for (c, amount) in customers.iter().zip(amounts) {
        let c_key = c.map(Value::Int);
        let found =
            tx.update_columns_with(&t.customer, &c_key, &CUSTOMER_COLUMNS, &mut |r, set| {
                let balance = r.float(customer::C_BALANCE)? + amount;
                set.float(customer::C_BALANCE, balance);
                let count = r.int(customer::C_DELIVERY_CNT)? + 1;
                set.int(customer::C_DELIVERY_CNT, count);
                Ok(())
            })?;
        if !found {
            return Err(TxError::Invalid(format!(
                "order of missing customer {c_key:?}"
            )));
        }
    }
    Ok(DeliveryOutput { delivered })
}
