//! The New-Order transaction (clause 2.4.2), and the 2008 paper's form of it (Figure 4).
//!
//! Full form, in the specification's order except that D is taken before W (the lock order
//! Payment shares, see `payment`):
//! ```text
//! get D for update → update D (d_next_o_id + 1) → get W (w_tax) → get C
//! → insert O, NO → per line: get I (absent: UserAbort) → get S for update → update S
//!                            → insert OL
//! ```
//! Paper form: all items are read first, so an unused item aborts before any write; then
//! D, W, C, update D, per line S, update S, insert OL, and finally O and NO.
//!
//! Stock: `s_quantity − q` if that leaves at least 10, else `s_quantity − q + 91`;
//! `s_ytd += q`, `s_order_cnt += 1`, `s_remote_cnt += 1` for a remote supplier.

use engine::{Fetch, Tx, TxError, TxResult, Value};

use super::input::NewOrderInput;
use super::schema::{customer, district, item, stock, warehouse};
use super::Tables;
use crate::util::{float, int, string};

/// What the terminal would display for one line.
#[derive(Clone, Debug, PartialEq)]
pub struct NewOrderLine {
    pub i_name: String,
    pub i_price: f64,
    pub s_quantity: i64,
    /// 'B' if both I_DATA and S_DATA contain "ORIGINAL", else 'G'.
    pub brand_generic: char,
    pub ol_amount: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NewOrderOutput {
    pub o_id: i64,
    pub lines: Vec<NewOrderLine>,
    /// Σ ol_amount · (1 − c_discount) · (1 + w_tax + d_tax).
    pub total_amount: f64,
}

struct ItemRow {
    price: f64,
    name: String,
    original: bool,
}

fn get_item(tx: &mut dyn Tx, t: &Tables, i_id: i64) -> TxResult<ItemRow> {
    let cols = [item::I_PRICE, item::I_NAME, item::I_DATA];
    let row = tx
        .get(&t.item, &[Value::Int(i_id)], Fetch::Cols(&cols), false)?
        .ok_or_else(|| TxError::UserAbort(format!("item number {i_id} is not valid")))?;
    Ok(ItemRow {
        price: float(&row, 0)?,
        name: string(&row, 1)?.to_string(),
        original: string(&row, 2)?.contains("ORIGINAL"),
    })
}

/// Reads the district for update and advances d_next_o_id; returns (o_id, d_tax).
fn next_order_id(tx: &mut dyn Tx, t: &Tables, w_id: i64, d_id: i64) -> TxResult<(i64, f64)> {
    let key = [Value::Int(w_id), Value::Int(d_id)];
    let cols = [district::D_TAX, district::D_NEXT_O_ID];
    let row = tx
        .get(&t.district, &key, Fetch::Cols(&cols), true)?
        .ok_or_else(|| TxError::Invalid(format!("no district ({w_id}, {d_id})")))?;
    let (d_tax, o_id) = (float(&row, 0)?, int(&row, 1)?);
    tx.update(
        &t.district,
        &key,
        &[(district::D_NEXT_O_ID, Value::Int(o_id + 1))],
    )?;
    Ok((o_id, d_tax))
}

fn get_w_tax(tx: &mut dyn Tx, t: &Tables, w_id: i64) -> TxResult<f64> {
    let row = tx
        .get(
            &t.warehouse,
            &[Value::Int(w_id)],
            Fetch::Cols(&[warehouse::W_TAX]),
            false,
        )?
        .ok_or_else(|| TxError::Invalid(format!("no warehouse {w_id}")))?;
    float(&row, 0)
}

fn get_c_discount(tx: &mut dyn Tx, t: &Tables, input: &NewOrderInput) -> TxResult<f64> {
    let key = [
        Value::Int(input.w_id),
        Value::Int(input.d_id),
        Value::Int(input.c_id),
    ];
    let cols = [customer::C_DISCOUNT, customer::C_LAST, customer::C_CREDIT];
    let row = tx
        .get(&t.customer, &key, Fetch::Cols(&cols), false)?
        .ok_or_else(|| TxError::Invalid(format!("no customer {key:?}")))?;
    float(&row, 0)
}

fn insert_order(tx: &mut dyn Tx, t: &Tables, input: &NewOrderInput, o_id: i64) -> TxResult<()> {
    let all_local = i64::from(input.all_local());
    tx.insert(
        &t.order,
        &[
            Value::Int(o_id),
            Value::Int(input.d_id),
            Value::Int(input.w_id),
            Value::Int(input.c_id),
            Value::Int(input.entry_d),
            Value::Null,
            Value::Int(input.lines.len() as i64),
            Value::Int(all_local),
        ],
    )?;
    tx.insert(
        &t.new_order,
        &[
            Value::Int(o_id),
            Value::Int(input.d_id),
            Value::Int(input.w_id),
        ],
    )
}

/// Updates the stock of line `number` (1-based) and inserts its order line.
fn order_line(
    tx: &mut dyn Tx,
    t: &Tables,
    input: &NewOrderInput,
    o_id: i64,
    number: usize,
    item_row: &ItemRow,
) -> TxResult<NewOrderLine> {
    let line = &input.lines[number - 1];
    let dist_col = stock::S_DIST_01 + (input.d_id as usize - 1);
    let cols = [
        stock::S_QUANTITY,
        dist_col,
        stock::S_YTD,
        stock::S_ORDER_CNT,
        stock::S_REMOTE_CNT,
        stock::S_DATA,
    ];
    let key = [Value::Int(line.supply_w_id), Value::Int(line.i_id)];
    let row = tx
        .get(&t.stock, &key, Fetch::Cols(&cols), true)?
        .ok_or_else(|| TxError::Invalid(format!("no stock {key:?}")))?;
    let quantity = int(&row, 0)?;
    let dist_info = string(&row, 1)?.to_string();
    let new_quantity = if quantity >= line.quantity + 10 {
        quantity - line.quantity
    } else {
        quantity - line.quantity + 91
    };
    let remote = line.supply_w_id != input.w_id;
    tx.update(
        &t.stock,
        &key,
        &[
            (stock::S_QUANTITY, Value::Int(new_quantity)),
            (stock::S_YTD, Value::Int(int(&row, 2)? + line.quantity)),
            (stock::S_ORDER_CNT, Value::Int(int(&row, 3)? + 1)),
            (
                stock::S_REMOTE_CNT,
                Value::Int(int(&row, 4)? + i64::from(remote)),
            ),
        ],
    )?;
    let brand_generic = if item_row.original && string(&row, 5)?.contains("ORIGINAL") {
        'B'
    } else {
        'G'
    };
    let ol_amount = (line.quantity as f64 * item_row.price * 100.0).round() / 100.0;
    tx.insert(
        &t.order_line,
        &[
            Value::Int(o_id),
            Value::Int(input.d_id),
            Value::Int(input.w_id),
            Value::Int(number as i64),
            Value::Int(line.i_id),
            Value::Int(line.supply_w_id),
            Value::Null,
            Value::Int(line.quantity),
            Value::Float(ol_amount),
            Value::Str(dist_info),
        ],
    )?;
    Ok(NewOrderLine {
        i_name: item_row.name.clone(),
        i_price: item_row.price,
        s_quantity: new_quantity,
        brand_generic,
        ol_amount,
    })
}

/// Runs New-Order. An unused item number ends it with [`TxError::UserAbort`]; the caller
/// rolls back.
pub fn new_order(tx: &mut dyn Tx, t: &Tables, input: &NewOrderInput) -> TxResult<NewOrderOutput> {
    if !(1..=10).contains(&input.d_id) || input.lines.is_empty() {
        return Err(TxError::Invalid(format!("bad New-Order input {input:?}")));
    }
    let mut lines = Vec::with_capacity(input.lines.len());
    let (o_id, w_tax, d_tax, c_discount);
    if input.paper {
        let items = input
            .lines
            .iter()
            .map(|l| get_item(tx, t, l.i_id))
            .collect::<TxResult<Vec<_>>>()?;
        (o_id, d_tax) = next_order_id(tx, t, input.w_id, input.d_id)?;
        w_tax = get_w_tax(tx, t, input.w_id)?;
        c_discount = get_c_discount(tx, t, input)?;
        for (n, item_row) in items.iter().enumerate() {
            lines.push(order_line(tx, t, input, o_id, n + 1, item_row)?);
        }
        insert_order(tx, t, input, o_id)?;
    } else {
        (o_id, d_tax) = next_order_id(tx, t, input.w_id, input.d_id)?;
        w_tax = get_w_tax(tx, t, input.w_id)?;
        c_discount = get_c_discount(tx, t, input)?;
        insert_order(tx, t, input, o_id)?;
        for (n, line) in input.lines.iter().enumerate() {
            let item_row = get_item(tx, t, line.i_id)?;
            lines.push(order_line(tx, t, input, o_id, n + 1, &item_row)?);
        }
    }
    let sum: f64 = lines.iter().map(|l| l.ol_amount).sum();
    Ok(NewOrderOutput {
        o_id,
        lines,
        total_amount: sum * (1.0 - c_discount) * (1.0 + w_tax + d_tax),
    })
}
