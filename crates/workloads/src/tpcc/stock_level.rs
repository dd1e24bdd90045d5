//! The Stock-Level transaction (clause 2.8.2): read-only.
//!
//! Count the distinct items among the order lines of the district's last 20 orders
//! (o_id in [d_next_o_id − 20, d_next_o_id)) whose stock at the home warehouse is below the
//! threshold.
//!
//! It runs at isolation level 1 (read committed), the level clause 3.4.0.1 asks of it
//! ([`Tx::read_committed`]): each read's shared locks go as the read ends. Held to commit,
//! as they were, its district row's lock made every New-Order and Payment of the district
//! wait out the whole Stock-Level (counted on the main command: about 2,100 waits and 330 ms
//! of its 12 s of thread time a run), and its 200 stock rows' locks the New-Orders that
//! update them. A client and a sandbox pass the request on to the engine; where an
//! implementation keeps every lock (the trait's default), it runs serializable, which is
//! stronger.

use std::ops::Bound;

use engine::{Fetch, KeyRange, TableRef, Tx, TxError, TxResult, Value};

use super::input::StockLevelInput;
use super::schema::{district, order_line, stock};
use super::Tables;
use crate::util::int;

#[derive(Clone, Debug, PartialEq)]
pub struct StockLevelOutput {
    pub low_stock: usize,
}

pub fn stock_level(
    tx: &mut dyn Tx,
    t: &Tables,
    input: &StockLevelInput,
) -> TxResult<StockLevelOutput> {
    let (w, d) = (input.w_id, input.d_id);
    tx.read_committed();
    let row = tx
        .get(
            &t.district,
            &[Value::Int(w), Value::Int(d)],
            Fetch::Cols(&[district::D_NEXT_O_ID]),
            false,
        )?
        .ok_or_else(|| TxError::Invalid(format!("no district ({w}, {d})")))?;
    let next = int(&row, 0)?;
    let low = [Value::Int(w), Value::Int(d), Value::Int(next - 20)];
    let high = [Value::Int(w), Value::Int(d), Value::Int(next - 1)];
    // Each line's item read where it is stored, nothing copied out but the number (20
    // orders of at most 15 lines).
    let mut items = Vec::with_capacity(20 * 15);
    tx.scan_columns_with(
        &t.order_line,
        KeyRange {
            low: Bound::Included(&low),
            high: Bound::Included(&high),
        },
        None,
        false,
        &[order_line::OL_I_ID],
        false,
        &mut |r| {
            items.push(r.int(order_line::OL_I_ID)?);
            Ok(())
        },
    )?;
    // The distinct items, ascending: an unstable sort of some 200 integers and a dedup (a
    // `BTreeSet` built from them sorted them stably and allocated its nodes: 2.6% of a
    // Stock-Level's instructions more).
    items.sort_unstable();
    items.dedup();
    // Every stock row it reads, known now (see `Tx::prefetch_columns`): their loads overlap,
    // and a client reads them all in one round trip.
    let keys: Vec<[i64; 2]> = items.iter().map(|&i_id| [w, i_id]).collect();
    let rows: Vec<(&TableRef, &[i64])> = keys.iter().map(|k| (&t.stock, &k[..])).collect();
    tx.prefetch_columns(&rows, &[stock::S_QUANTITY]);
    // Each quantity read where it is stored, nothing copied out (a client fetches the one
    // column the hint named).
    let mut low_stock = 0;
    for i_id in items {
        tx.read_columns_with(
            &t.stock,
            &[Value::Int(w), Value::Int(i_id)],
            &[stock::S_QUANTITY],
            false,
            &mut |s| {
                if s.int(stock::S_QUANTITY)? < input.threshold {
                    low_stock += 1;
                }
                Ok(())
            },
        )?;
    }
    Ok(StockLevelOutput { low_stock })
}
