//! The Payment transaction (clause 2.5.2), and the 2008 paper's form (Figure 4).
//!
//! Both forms: read-modify-write D (d_ytd and the history counter, see `schema`); find the
//! customer (by id, or the middle of those with the last name sorted by c_first) and
//! read-modify-write it: c_balance, c_ytd_payment, c_payment_cnt, and for bad credit ("BC")
//! the payment prepended to c_data (kept to 500 characters); read-modify-write W (w_ytd);
//! insert HISTORY with h_data = w_name + 4 spaces + d_name. The procedure reads each row in
//! place ([`Tx::update_with`]); the address fields the terminal shows are not copied out.
//!
//! The warehouse comes last but for the history row that needs its name. Every Payment of a
//! warehouse writes that one row and every New-Order reads it (see `new_order`), so under
//! two-phase locking its lock decides how many of them run at once: taken at the end, it is
//! held for the history insert and the commit instead of the whole transaction. The
//! specification lists W first and Figure 4 D, W, C; the reads and writes, and so the result,
//! are the same in any order, and on one thread so is the cost. On one warehouse with two
//! threads it took Glass's lock waits on the warehouse row from three in four of all waits to
//! one in five (docs/performance.md, "The warehouse row last"). A client that reads ahead on
//! hints (`client::RemoteTx`) still reads W with D in its first round trip, as the hints
//! below ask, and so holds W's lock throughout.
//!
//! Lock order: every TPC-C transaction here that writes the district takes it before the
//! warehouse (New-Order too), so New-Order and Payment cannot deadlock on that pair.

use arrayvec::ArrayString;
use engine::{Fetch, KeyRange, Tx, TxError, TxResult, Value};

use super::input::{CustomerSelector, PaymentInput};
use super::schema::{customer, district, warehouse};
use super::Tables;
use crate::util::int;

/// C_CREDIT: "GC" or "BC".
pub type Credit = ArrayString<2>;

#[derive(Clone, Debug, PartialEq)]
pub struct PaymentOutput {
    pub c_id: i64,
    pub c_balance: f64,
    pub c_credit: Credit,
    /// The history row's id in the payment's district (its key is `(w_id, d_id, h_id)`).
    pub h_id: i64,
}

/// `text` in a fixed-capacity string; an error naming `what` if it does not fit.
fn fixed<const N: usize>(text: &str, what: &str) -> TxResult<ArrayString<N>> {
    ArrayString::from(text).map_err(|_| {
        TxError::Invalid(format!(
            "{what} has {} bytes, more than the {N} the schema allows",
            text.len()
        ))
    })
}

/// Cuts `data` to at most `max` bytes, at a character boundary.
fn truncate_to(data: &mut String, max: usize) {
    data.truncate(data.floor_char_boundary(max));
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

/// Runs Payment.
pub fn payment(tx: &mut dyn Tx, t: &Tables, input: &PaymentInput) -> TxResult<PaymentOutput> {
    let amount = input.h_amount;
    // H_DATA: w_name, four spaces, d_name.
    let mut h_data = String::with_capacity(24);
    let mut d_name = ArrayString::<10>::new();
    let mut h_id = 0;
    let d_key = [Value::Int(input.w_id), Value::Int(input.d_id)];
    let w_key = [Value::Int(input.w_id)];
    // The rows it updates, all known from the input unless the customer is chosen by name
    // (see `Tx::prefetch_for_update`).
    let (w, d) = (input.w_id, input.d_id);
    tx.prefetch_for_update(&[(&t.district, &[w, d]), (&t.warehouse, &[w])], None);
    if let CustomerSelector::ById(c_id) = &input.customer {
        // C_DATA only for a customer with bad credit (one in ten), which the row tells.
        tx.prefetch_for_update(
            &[(&t.customer, &[input.c_w_id, input.c_d_id, *c_id])],
            Some(&[
                customer::C_CREDIT,
                customer::C_BALANCE,
                customer::C_YTD_PAYMENT,
                customer::C_PAYMENT_CNT,
            ]),
        );
    }
    let found = tx.update_with(&t.district, &d_key, &mut |r, set| {
        d_name = fixed(r.str(district::D_NAME)?, "D_NAME")?;
        h_id = r.int(district::D_NEXT_H_ID)?;
        let d_ytd = r.float(district::D_YTD)? + amount;
        set.float(district::D_YTD, d_ytd);
        set.int(district::D_NEXT_H_ID, h_id + 1);
        Ok(())
    })?;
    if !found {
        return Err(TxError::Invalid(format!("no district {d_key:?}")));
    }

    let c_id = resolve_customer(tx, t, input.c_w_id, input.c_d_id, &input.customer)?;
    let c_key = [
        Value::Int(input.c_w_id),
        Value::Int(input.c_d_id),
        Value::Int(c_id),
    ];
    let mut c_credit = Credit::new();
    let mut c_balance = 0.0;
    let found = tx.update_with(&t.customer, &c_key, &mut |r, set| {
        c_credit = fixed(r.str(customer::C_CREDIT)?, "C_CREDIT")?;
        c_balance = r.float(customer::C_BALANCE)? - amount;
        set.float(customer::C_BALANCE, c_balance);
        let ytd = r.float(customer::C_YTD_PAYMENT)? + amount;
        set.float(customer::C_YTD_PAYMENT, ytd);
        let count = r.int(customer::C_PAYMENT_CNT)? + 1;
        set.int(customer::C_PAYMENT_CNT, count);
        if c_credit.as_str() == "BC" {
            let mut data = format!(
                "{} {} {} {} {} {:.2} | ",
                c_id, input.c_d_id, input.c_w_id, input.d_id, input.w_id, amount
            );
            data.push_str(r.str(customer::C_DATA)?);
            truncate_to(&mut data, 500);
            set.set(customer::C_DATA, Value::Str(data));
        }
        Ok(())
    })?;
    if !found {
        return Err(TxError::Invalid(format!("no customer {c_key:?}")));
    }
    let found = tx.update_with(&t.warehouse, &w_key, &mut |r, set| {
        h_data.push_str(r.str(warehouse::W_NAME)?);
        let w_ytd = r.float(warehouse::W_YTD)? + amount;
        set.float(warehouse::W_YTD, w_ytd);
        Ok(())
    })?;
    if !found {
        return Err(TxError::Invalid(format!("no warehouse {}", input.w_id)));
    }
    h_data.push_str("    ");
    h_data.push_str(&d_name);
    tx.insert(
        &t.history,
        &[
            Value::Int(c_id),
            Value::Int(input.c_d_id),
            Value::Int(input.c_w_id),
            Value::Int(input.d_id),
            Value::Int(input.w_id),
            Value::Int(input.h_date),
            Value::Float(amount),
            Value::Str(h_data),
            Value::Int(h_id),
        ],
    )?;
    Ok(PaymentOutput {
        c_id,
        c_balance,
        c_credit,
        h_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_data_is_cut_at_a_character_boundary() {
        // '€' is three bytes: cutting at 4 would split it.
        let mut data = "ab€cd".to_string();
        truncate_to(&mut data, 4);
        assert_eq!(data, "ab");
        let mut ascii = "x".repeat(600);
        truncate_to(&mut ascii, 500);
        assert_eq!(ascii.len(), 500);
    }

    #[test]
    fn an_oversized_fixed_column_is_an_error_naming_it() {
        assert_eq!(fixed::<2>("BC", "C_CREDIT").unwrap().as_str(), "BC");
        let err = fixed::<2>("BCX", "C_CREDIT").unwrap_err().to_string();
        assert!(err.contains("C_CREDIT") && err.contains("3 bytes"), "{err}");
    }
}
