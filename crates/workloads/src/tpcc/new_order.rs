//! The New-Order transaction (clause 2.4.2), and the 2008 paper's form of it (Figure 4).
//!
//! Full form, in the specification's order except that every line's stock is updated before
//! D is taken and the order lines are inserted, and C and W are read last:
//! ```text
//! per line, by stock key: read I (absent: UserAbort) → read-modify-write S
//! → read-modify-write D (d_next_o_id + 1) → insert O, NO
//! → per line, by number: insert OL → read C → read W (w_tax)
//! ```
//! Paper form: all items are read first, so an unused item aborts before any write; then
//! D, C, per line S, per line OL, O and NO, and finally W.
//!
//! The district row is the one every New-Order and Payment of a district writes, so the full
//! form takes it after the stock updates, which need nothing from it (an order line's number
//! and its stock's S_DIST_xx come from the input): its exclusive lock is held for the inserts,
//! the customer, the warehouse and the commit only, not also for ten or so stock rows. No
//! other transaction holds a district row while it waits for a stock row (Payment touches no
//! stock, Stock-Level holds neither past the read that takes it), so no cycle comes of it.
//!
//! The stock rows are updated in the order of their keys (supply warehouse, item; the line
//! number breaks ties), not as the terminal entered the lines: every New-Order locks its stock
//! rows in that one order, and Stock-Level reads its items in it too, so two of them never
//! wait for each other's stock rows in a cycle (two threads on one warehouse met about a dozen
//! such deadlocks a second before). Each order line keeps the number of its place in the
//! input, the order lines are inserted by number (appended at the end of the index, as the
//! terminal's order would), and the output lists the lines in the input's order: the
//! specification fixes what each line does, not the order the lines are processed in.
//!
//! W_TAX only enters the total the terminal shows, so the warehouse row, which every Payment
//! of the warehouse writes, is read last and its shared lock held for the commit only (see
//! `payment`, which writes it last). An unused item rolls back before reaching it. A client
//! that reads ahead on hints reads W in its first round trip (`prefetch_rows`) and holds its
//! lock throughout.
//!
//! The customer's row (C_DISCOUNT, also only for the total) is read after the inserts too, in
//! the full form: its insert into NEW-ORDER checks the key after its own, the next district's
//! oldest new order, which a running Delivery has locked (to delete it, or as the key after
//! one it deleted); a New-Order that held its customer's shared lock while it waited there
//! deadlocked with that Delivery whenever the Delivery went on to pay the same customer.
//! Payment also takes C before W, so the two still agree on D, then C, then W. A client that
//! reads ahead on hints reads C in its first round trip, as it does W.
//!
//! Reads and read-modify-writes go through [`Tx::read_with`] and [`Tx::update_with`] (a stock
//! row's through [`Tx::update_columns_with`], of the six columns it uses out of seventeen):
//! the procedure looks at the stored row in place and the engine finds each row once. A
//! client-side form counts a read-modify-write as two round trips (read for update, update).
//!
//! Stock: `s_quantity − q` if that leaves at least 10, else `s_quantity − q + 91`;
//! `s_ytd += q`, `s_order_cnt += 1`, `s_remote_cnt += 1` for a remote supplier.

use arrayvec::{ArrayString, ArrayVec};
use engine::{TableRef, Tx, TxError, TxResult, Value};

use super::input::NewOrderInput;
use super::schema::{customer, district, item, stock, warehouse};
use super::Tables;

/// An item's name as the terminal shows it. The schema holds I_NAME to 24 bytes (clause 1.3.1
/// gives 24 characters; the loader writes ASCII), so it is kept inline and a line of output
/// allocates nothing.
pub type ItemName = ArrayString<24>;

/// What the terminal would display for one line.
#[derive(Clone, Debug, PartialEq)]
pub struct NewOrderLine {
    pub i_name: ItemName,
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

/// Whether a data column (I_DATA, S_DATA) contains "ORIGINAL" (clause 2.4.2.2), by the
/// kernel's search, which reads every eighth byte (the kernel and the procedures do this
/// useful work the same way). `str::contains` sets up a two-way searcher on every call: about
/// three times the instructions on these 26–50 byte texts; `memchr`'s prebuilt searcher and
/// a `memchr` scan for 'O' were no cheaper than that.
fn is_original(data: &str) -> bool {
    kernel::original::contains_original(data.as_bytes())
}

#[derive(Clone, Copy, Default)]
struct ItemRow {
    price: f64,
    name: ItemName,
    original: bool,
}

/// Reads item `i_id` into `out`; an unused number ends the transaction ([`TxError::UserAbort`]).
fn read_item(tx: &mut dyn Tx, t: &Tables, i_id: i64, out: &mut ItemRow) -> TxResult<()> {
    let found = tx.read_with(&t.item, &[Value::Int(i_id)], false, &mut |r| {
        out.price = r.float(item::I_PRICE)?;
        let name = r.str(item::I_NAME)?;
        out.name = ItemName::from(name).map_err(|_| {
            TxError::Invalid(format!(
                "item {i_id}: I_NAME has {} bytes, more than the 24 the schema allows",
                name.len()
            ))
        })?;
        out.original = is_original(r.str(item::I_DATA)?);
        Ok(())
    })?;
    if !found {
        return Err(TxError::UserAbort(format!(
            "item number {i_id} is not valid"
        )));
    }
    Ok(())
}

/// Advances the district's d_next_o_id (read and written in one step); returns
/// (o_id, d_tax).
fn next_order_id(tx: &mut dyn Tx, t: &Tables, w_id: i64, d_id: i64) -> TxResult<(i64, f64)> {
    let (mut o_id, mut d_tax) = (0, 0.0);
    let found = tx.update_with(
        &t.district,
        &[Value::Int(w_id), Value::Int(d_id)],
        &mut |r, set| {
            d_tax = r.float(district::D_TAX)?;
            o_id = r.int(district::D_NEXT_O_ID)?;
            set.int(district::D_NEXT_O_ID, o_id + 1);
            Ok(())
        },
    )?;
    if !found {
        return Err(TxError::Invalid(format!("no district ({w_id}, {d_id})")));
    }
    Ok((o_id, d_tax))
}

fn get_w_tax(tx: &mut dyn Tx, t: &Tables, w_id: i64) -> TxResult<f64> {
    let mut w_tax = 0.0;
    let found = tx.read_with(&t.warehouse, &[Value::Int(w_id)], false, &mut |r| {
        w_tax = r.float(warehouse::W_TAX)?;
        Ok(())
    })?;
    if !found {
        return Err(TxError::Invalid(format!("no warehouse {w_id}")));
    }
    Ok(w_tax)
}

/// Reads the customer's c_discount (c_last and c_credit, which the terminal displays, are
/// read in the same step).
fn get_c_discount(tx: &mut dyn Tx, t: &Tables, input: &NewOrderInput) -> TxResult<f64> {
    let key = [
        Value::Int(input.w_id),
        Value::Int(input.d_id),
        Value::Int(input.c_id),
    ];
    let mut discount = 0.0;
    let found = tx.read_with(&t.customer, &key, false, &mut |r| {
        discount = r.float(customer::C_DISCOUNT)?;
        r.str(customer::C_LAST)?;
        r.str(customer::C_CREDIT)?;
        Ok(())
    })?;
    if !found {
        return Err(TxError::Invalid(format!("no customer {key:?}")));
    }
    Ok(discount)
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

/// The columns of a stock row that New-Order reads (and writes) for an order of district
/// `d_id` (1 to 10, checked by [`new_order`]): S_DIST_xx is the district's. A client reads only
/// these, for update, ahead of the updates (see `prefetch_rows`).
fn stock_columns(d_id: i64) -> [usize; 6] {
    [
        stock::S_QUANTITY,
        stock::S_DIST_01 + (d_id as usize - 1),
        stock::S_YTD,
        stock::S_ORDER_CNT,
        stock::S_REMOTE_CNT,
        stock::S_DATA,
    ]
}

/// What updating a line's stock row gave its order line and its output.
#[derive(Clone, Copy, Default)]
struct StockedLine {
    /// S_QUANTITY after the update.
    s_quantity: i64,
    /// Whether S_DATA contains "ORIGINAL".
    original: bool,
    /// The district's S_DIST_xx, which becomes OL_DIST_INFO.
    dist_info: DistInfo,
}

/// S_DIST_xx, which the schema holds to 24 bytes (clause 1.3.1), kept inline.
type DistInfo = ArrayString<24>;

/// Updates the stock row of line `n` (0-based) with the line's quantity; what the line's order
/// line needs goes to `out`.
fn update_stock(
    tx: &mut dyn Tx,
    t: &Tables,
    input: &NewOrderInput,
    n: usize,
    out: &mut StockedLine,
) -> TxResult<()> {
    let line = &input.lines[n];
    let columns = stock_columns(input.d_id);
    let dist_col = columns[1];
    let key = [Value::Int(line.supply_w_id), Value::Int(line.i_id)];
    let remote = i64::from(line.supply_w_id != input.w_id);
    let found = tx.update_columns_with(&t.stock, &key, &columns, &mut |r, set| {
        let quantity = r.int(stock::S_QUANTITY)?;
        out.s_quantity = if quantity >= line.quantity + 10 {
            quantity - line.quantity
        } else {
            quantity - line.quantity + 91
        };
        let dist = r.str(dist_col)?;
        out.dist_info = DistInfo::from(dist).map_err(|_| {
            TxError::Invalid(format!(
                "stock {key:?}: S_DIST has {} bytes, more than the 24 the schema allows",
                dist.len()
            ))
        })?;
        out.original = is_original(r.str(stock::S_DATA)?);
        set.int(stock::S_QUANTITY, out.s_quantity);
        let ytd = r.int(stock::S_YTD)? + line.quantity;
        set.int(stock::S_YTD, ytd);
        let order_cnt = r.int(stock::S_ORDER_CNT)? + 1;
        set.int(stock::S_ORDER_CNT, order_cnt);
        let remote_cnt = r.int(stock::S_REMOTE_CNT)? + remote;
        set.int(stock::S_REMOTE_CNT, remote_cnt);
        Ok(())
    })?;
    if !found {
        return Err(TxError::Invalid(format!("no stock {key:?}")));
    }
    Ok(())
}

/// Inserts the order line of line `n` (0-based; its OL_NUMBER is `n + 1`) and says what the
/// terminal shows for it. `scratch` is the order line's OL_DIST_INFO string, reused from line
/// to line.
fn insert_order_line(
    tx: &mut dyn Tx,
    t: &Tables,
    (input, o_id, n): (&NewOrderInput, i64, usize),
    item: &ItemRow,
    stocked: &StockedLine,
    scratch: &mut String,
) -> TxResult<NewOrderLine> {
    let line = &input.lines[n];
    let brand_generic = if item.original && stocked.original {
        'B'
    } else {
        'G'
    };
    let ol_amount = (line.quantity as f64 * item.price * 100.0).round() / 100.0;
    scratch.clear();
    scratch.push_str(&stocked.dist_info);
    let mut row = [
        Value::Int(o_id),
        Value::Int(input.d_id),
        Value::Int(input.w_id),
        Value::Int(n as i64 + 1),
        Value::Int(line.i_id),
        Value::Int(line.supply_w_id),
        Value::Null,
        Value::Int(line.quantity),
        Value::Float(ol_amount),
        Value::Str(std::mem::take(scratch)),
    ];
    tx.insert(&t.order_line, &row)?;
    if let Value::Str(text) = &mut row[9] {
        std::mem::swap(scratch, text);
    }
    Ok(NewOrderLine {
        i_name: item.name,
        i_price: item.price,
        s_quantity: stocked.s_quantity,
        brand_generic,
        ol_amount,
    })
}

/// Updates the stock of every line in `order` (see [`stock_order`]), each after its item is
/// read into `items` (an unused item ends the transaction there) unless `items_read` says the
/// caller read them all first, as the paper's form does. What each line's order line needs
/// from its stock goes to `stocked`.
fn update_stocks(
    tx: &mut dyn Tx,
    t: &Tables,
    input: &NewOrderInput,
    order: &StockOrder,
    items: &mut [ItemRow; MAX_LINES],
    items_read: bool,
    stocked: &mut [StockedLine; MAX_LINES],
) -> TxResult<()> {
    for &n in order {
        if !items_read {
            read_item(tx, t, input.lines[n].i_id, &mut items[n])?;
        }
        update_stock(tx, t, input, n, &mut stocked[n])?;
    }
    Ok(())
}

/// Inserts the order lines of order `o_id` by their numbers (the order the index appends them
/// in), from each line's item and stock. The lines come back in the input's order.
fn insert_order_lines(
    tx: &mut dyn Tx,
    t: &Tables,
    (input, o_id): (&NewOrderInput, i64),
    items: &[ItemRow; MAX_LINES],
    stocked: &[StockedLine; MAX_LINES],
) -> TxResult<Vec<NewOrderLine>> {
    let mut scratch = String::new();
    let mut lines = Vec::with_capacity(input.lines.len());
    for (n, (item, stocked)) in items.iter().zip(&stocked[..input.lines.len()]).enumerate() {
        lines.push(insert_order_line(
            tx,
            t,
            (input, o_id, n),
            item,
            stocked,
            &mut scratch,
        )?);
    }
    Ok(lines)
}

/// Most lines a New-Order has (clause 2.4.1.3: 5 to 15); more is refused as bad input.
pub const MAX_LINES: usize = 15;

/// The indices of `input`'s lines in the order their stock rows are updated, and locked: by
/// supply warehouse, then item, then line number (see the module's notes). At most
/// [`MAX_LINES`] lines (checked by [`new_order`]).
fn stock_order(input: &NewOrderInput) -> StockOrder {
    // Each line's (warehouse, item, line) packed into one word where they fit, as TPC-C's
    // always do: fewer instructions to sort than triples (the line number fits in 4 bits).
    let packed: Option<ArrayVec<u64, MAX_LINES>> = (input.lines.iter().enumerate())
        .map(|(n, l)| {
            let w = u64::try_from(l.supply_w_id).ok().filter(|&w| w < 1 << 24)?;
            let i = u64::try_from(l.i_id).ok().filter(|&i| i < 1 << 36)?;
            Some(w << 40 | i << 4 | n as u64)
        })
        .collect();
    if let Some(mut keys) = packed {
        keys.sort_unstable();
        return keys.iter().map(|&k| (k & 0xF) as usize).collect();
    }
    let mut keys: ArrayVec<(i64, i64, usize), MAX_LINES> = (input.lines.iter().enumerate())
        .map(|(n, l)| (l.supply_w_id, l.i_id, n))
        .collect();
    keys.sort_unstable();
    keys.into_iter().map(|(_, _, n)| n).collect()
}

/// The lines' indices in [`stock_order`].
type StockOrder = ArrayVec<usize, MAX_LINES>;

/// Tells the engine every row New-Order will read or update, all known from the input: the
/// warehouse and each line's item whole (see [`Tx::prefetch`]), the district whole to update;
/// of each line's stock (to update) and of the customer only the columns it uses (see
/// [`Tx::prefetch_columns`], [`Tx::prefetch_for_update`]). A client sends all of these reads
/// in one round trip.
fn prefetch_rows(tx: &mut dyn Tx, t: &Tables, input: &NewOrderInput, order: &StockOrder) {
    let items: ArrayVec<[i64; 1], MAX_LINES> = input.lines.iter().map(|l| [l.i_id]).collect();
    // In the order the stock rows are updated: a client locks them in the hints' order.
    let stocks: ArrayVec<[i64; 2], MAX_LINES> = order
        .iter()
        .map(|&n| [input.lines[n].supply_w_id, input.lines[n].i_id])
        .collect();
    let (w, d) = (input.w_id, input.d_id);
    let (district, warehouse, customer) = ([w, d], [w], [w, d, input.c_id]);
    let stock_rows: ArrayVec<(&TableRef, &[i64]), MAX_LINES> =
        stocks.iter().map(|k| (&t.stock, &k[..])).collect();
    let stock_columns = stock_columns(input.d_id);
    // A client takes the hinted rows' locks in the hints' order, so the hints name the stock
    // rows and the district in the order the form updates them (a client's New-Order and an
    // embedded one of the same form then never wait for each other in a cycle), and the
    // district before the warehouse: Payment locks the district first, and with the warehouse
    // first a New-Order holding it shared and a Payment holding the district would wait for
    // each other.
    if !input.paper {
        tx.prefetch_for_update(&stock_rows, Some(&stock_columns));
    }
    tx.prefetch_for_update(&[(&t.district, &district)], None);
    let mut rows: ArrayVec<(&TableRef, &[i64]), { 1 + MAX_LINES }> = ArrayVec::new();
    rows.extend(items.iter().map(|k| (&t.item, &k[..])));
    rows.push((&t.warehouse, &warehouse));
    tx.prefetch(&rows);
    if input.paper {
        tx.prefetch_for_update(&stock_rows, Some(&stock_columns));
    }
    tx.prefetch_columns(
        &[(&t.customer, &customer)],
        &[customer::C_DISCOUNT, customer::C_LAST, customer::C_CREDIT],
    );
}

/// Tells the engine the keys of the rows New-Order is about to insert (order, new-order and
/// every order line): an insert's first read is its index slot, as a lookup's is (see
/// [`Tx::prefetch_inserts`]).
fn prefetch_inserts(tx: &mut dyn Tx, t: &Tables, input: &NewOrderInput, o_id: i64) {
    let (w, d) = (input.w_id, input.d_id);
    let lines: ArrayVec<[i64; 4], MAX_LINES> = (1..=input.lines.len())
        .map(|n| [w, d, o_id, n as i64])
        .collect();
    let order = [w, d, o_id];
    let mut rows: ArrayVec<(&TableRef, &[i64]), { 2 + MAX_LINES }> = ArrayVec::new();
    rows.push((&t.order, &order));
    rows.push((&t.new_order, &order));
    rows.extend(lines.iter().map(|k| (&t.order_line, &k[..])));
    tx.prefetch_inserts(&rows);
}

/// Runs New-Order. An unused item number ends it with [`TxError::UserAbort`]; the caller
/// rolls back.
pub fn new_order(tx: &mut dyn Tx, t: &Tables, input: &NewOrderInput) -> TxResult<NewOrderOutput> {
    if !(1..=10).contains(&input.d_id) || !(1..=MAX_LINES).contains(&input.lines.len()) {
        return Err(TxError::Invalid(format!("bad New-Order input {input:?}")));
    }
    let (o_id, w_tax, d_tax, c_discount, lines);
    let order = stock_order(input);
    prefetch_rows(tx, t, input, &order);
    // Every line is in `order`, a permutation of the lines, so every one used is filled in.
    let mut items = [ItemRow::default(); MAX_LINES];
    let mut stocked = [StockedLine::default(); MAX_LINES];
    if input.paper {
        for (line, item) in input.lines.iter().zip(&mut items) {
            read_item(tx, t, line.i_id, item)?;
        }
        (o_id, d_tax) = next_order_id(tx, t, input.w_id, input.d_id)?;
        prefetch_inserts(tx, t, input, o_id);
        c_discount = get_c_discount(tx, t, input)?;
        update_stocks(tx, t, input, &order, &mut items, true, &mut stocked)?;
        lines = insert_order_lines(tx, t, (input, o_id), &items, &stocked)?;
        insert_order(tx, t, input, o_id)?;
        w_tax = get_w_tax(tx, t, input.w_id)?;
    } else {
        update_stocks(tx, t, input, &order, &mut items, false, &mut stocked)?;
        (o_id, d_tax) = next_order_id(tx, t, input.w_id, input.d_id)?;
        prefetch_inserts(tx, t, input, o_id);
        insert_order(tx, t, input, o_id)?;
        lines = insert_order_lines(tx, t, (input, o_id), &items, &stocked)?;
        c_discount = get_c_discount(tx, t, input)?;
        w_tax = get_w_tax(tx, t, input.w_id)?;
    }
    let sum: f64 = lines.iter().map(|l| l.ol_amount).sum();
    Ok(NewOrderOutput {
        o_id,
        lines,
        total_amount: sum * (1.0 - c_discount) * (1.0 + w_tax + d_tax),
    })
}
