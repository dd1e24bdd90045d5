//! The Delivery transaction (clause 2.7.4), run in deferred mode's single database
//! transaction over all ten districts of the home warehouse.
//!
//! Per district: the oldest NEW-ORDER row (ascending scan, limit 1, for update); none → the
//! district is skipped; else delete it, set the order's o_carrier_id, set ol_delivery_d on its
//! lines and sum their ol_amount, add the sum to the customer's c_balance and increment
//! c_delivery_cnt.

use engine::{Fetch, KeyRange, Tx, TxError, TxResult, Value};

use super::input::DeliveryInput;
use super::schema::{customer, new_order, order, order_line};
use super::{Tables, DISTRICTS_PER_WAREHOUSE};
use crate::util::{float, int};

#[derive(Clone, Debug, PartialEq)]
pub struct DeliveryOutput {
    /// Per district (index d_id − 1): the order delivered, or None if none was waiting.
    pub delivered: Vec<Option<i64>>,
}

pub fn delivery(tx: &mut dyn Tx, t: &Tables, input: &DeliveryInput) -> TxResult<DeliveryOutput> {
    let w = input.w_id;
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
        let Some(no_row) = oldest.first() else {
            delivered.push(None);
            continue;
        };
        let o_id = int(no_row, 0)?;
        let o_key = [Value::Int(w), Value::Int(d), Value::Int(o_id)];
        tx.delete(&t.new_order, &o_key)?;
        let o_row = tx
            .get(&t.order, &o_key, Fetch::Cols(&[order::O_C_ID]), true)?
            .ok_or_else(|| TxError::Invalid(format!("new-order without order {o_key:?}")))?;
        let c_id = int(&o_row, 0)?;
        tx.update(
            &t.order,
            &o_key,
            &[(order::O_CARRIER_ID, Value::Int(input.carrier_id))],
        )?;
        let lines = tx.scan(
            &t.order_line,
            KeyRange::prefix(&o_key),
            None,
            false,
            Fetch::Cols(&[order_line::OL_NUMBER, order_line::OL_AMOUNT]),
            true,
        )?;
        let mut amount = 0.0;
        for line in &lines {
            let number = int(line, 0)?;
            amount += float(line, 1)?;
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
        let c_key = [Value::Int(w), Value::Int(d), Value::Int(c_id)];
        let found = tx.update_with(&t.customer, &c_key, &mut |r, set| {
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
        delivered.push(Some(o_id));
    }
    Ok(DeliveryOutput { delivered })
}
