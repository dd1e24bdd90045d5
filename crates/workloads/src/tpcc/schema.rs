//! The nine TPC-C tables (clause 1.3) with every column, their primary keys, and the two
//! secondary indexes the transactions need.
//!
//! Column positions are constants (`customer::C_BALANCE`), so procedures name columns, not
//! numbers. Types: identifiers and counts are `Int`; money and rates `Float`; dates `Int`
//! seconds since the Unix epoch; text `Str` of the spec's maximum length.
//!
//! Two columns go beyond the specification, both to give HISTORY a primary key (the spec's
//! HISTORY has none, and the engine stores every table under one):
//!
//! | table    | extra column  | meaning                                               |
//! |----------|---------------|-------------------------------------------------------|
//! | DISTRICT | `d_next_h_id` | next history number in this district (like d_next_o_id) |
//! | HISTORY  | `h_id`        | that number; key (h_w_id, h_d_id, h_id)               |
//!
//! Payment already reads the district for update and writes it, so numbering its history
//! row costs no extra operation.
//!
//! Packed integer keys (`int_key`, for `btree-keys=off`), in bits:
//!
//! | key part  | bits | limit                          |
//! |-----------|------|--------------------------------|
//! | w_id      | 16   | 65,535 warehouses              |
//! | d_id      | 4    | 10 districts (15 max)          |
//! | c_id      | 16   | 65,535 customers per district  |
//! | o_id      | 28   | 268 million orders per district|
//! | ol_number | 4    | 15 lines                       |
//! | i_id      | 20   | 1,048,575 items                |
//! | h_id      | 44   |                                |

use engine::{IndexSchema, TableSchema};

pub const WAREHOUSE: &str = "warehouse";
pub const DISTRICT: &str = "district";
pub const CUSTOMER: &str = "customer";
pub const HISTORY: &str = "history";
pub const NEW_ORDER: &str = "new_order";
pub const ORDER: &str = "orders";
pub const ORDER_LINE: &str = "order_line";
pub const ITEM: &str = "item";
pub const STOCK: &str = "stock";
/// CUSTOMER by (c_w_id, c_d_id, c_last, c_first), non-unique.
pub const CUSTOMER_BY_NAME: &str = "customer_by_name";
/// ORDER by (o_w_id, o_d_id, o_c_id, o_id), unique.
pub const ORDER_BY_CUSTOMER: &str = "orders_by_customer";

pub const W_BITS: u8 = 16;
pub const D_BITS: u8 = 4;
pub const C_BITS: u8 = 16;
pub const O_BITS: u8 = 28;
pub const OL_BITS: u8 = 4;
pub const I_BITS: u8 = 20;
pub const H_BITS: u8 = 44;
const _: () = assert!(W_BITS + D_BITS + C_BITS + O_BITS <= 64);
const _: () = assert!(W_BITS + D_BITS + O_BITS + OL_BITS <= 64);
const _: () = assert!(W_BITS + D_BITS + H_BITS <= 64);
const _: () = assert!(W_BITS + I_BITS <= 64);

pub mod warehouse {
    pub const W_ID: usize = 0;
    pub const W_NAME: usize = 1;
    pub const W_STREET_1: usize = 2;
    pub const W_STREET_2: usize = 3;
    pub const W_CITY: usize = 4;
    pub const W_STATE: usize = 5;
    pub const W_ZIP: usize = 6;
    pub const W_TAX: usize = 7;
    pub const W_YTD: usize = 8;
}

pub mod district {
    pub const D_ID: usize = 0;
    pub const D_W_ID: usize = 1;
    pub const D_NAME: usize = 2;
    pub const D_STREET_1: usize = 3;
    pub const D_STREET_2: usize = 4;
    pub const D_CITY: usize = 5;
    pub const D_STATE: usize = 6;
    pub const D_ZIP: usize = 7;
    pub const D_TAX: usize = 8;
    pub const D_YTD: usize = 9;
    pub const D_NEXT_O_ID: usize = 10;
    pub const D_NEXT_H_ID: usize = 11;
}

pub mod customer {
    pub const C_ID: usize = 0;
    pub const C_D_ID: usize = 1;
    pub const C_W_ID: usize = 2;
    pub const C_FIRST: usize = 3;
    pub const C_MIDDLE: usize = 4;
    pub const C_LAST: usize = 5;
    pub const C_STREET_1: usize = 6;
    pub const C_STREET_2: usize = 7;
    pub const C_CITY: usize = 8;
    pub const C_STATE: usize = 9;
    pub const C_ZIP: usize = 10;
    pub const C_PHONE: usize = 11;
    pub const C_SINCE: usize = 12;
    pub const C_CREDIT: usize = 13;
    pub const C_CREDIT_LIM: usize = 14;
    pub const C_DISCOUNT: usize = 15;
    pub const C_BALANCE: usize = 16;
    pub const C_YTD_PAYMENT: usize = 17;
    pub const C_PAYMENT_CNT: usize = 18;
    pub const C_DELIVERY_CNT: usize = 19;
    pub const C_DATA: usize = 20;
}

pub mod history {
    pub const H_C_ID: usize = 0;
    pub const H_C_D_ID: usize = 1;
    pub const H_C_W_ID: usize = 2;
    pub const H_D_ID: usize = 3;
    pub const H_W_ID: usize = 4;
    pub const H_DATE: usize = 5;
    pub const H_AMOUNT: usize = 6;
    pub const H_DATA: usize = 7;
    pub const H_ID: usize = 8;
}

pub mod new_order {
    pub const NO_O_ID: usize = 0;
    pub const NO_D_ID: usize = 1;
    pub const NO_W_ID: usize = 2;
}

pub mod order {
    pub const O_ID: usize = 0;
    pub const O_D_ID: usize = 1;
    pub const O_W_ID: usize = 2;
    pub const O_C_ID: usize = 3;
    pub const O_ENTRY_D: usize = 4;
    pub const O_CARRIER_ID: usize = 5;
    pub const O_OL_CNT: usize = 6;
    pub const O_ALL_LOCAL: usize = 7;
}

pub mod order_line {
    pub const OL_O_ID: usize = 0;
    pub const OL_D_ID: usize = 1;
    pub const OL_W_ID: usize = 2;
    pub const OL_NUMBER: usize = 3;
    pub const OL_I_ID: usize = 4;
    pub const OL_SUPPLY_W_ID: usize = 5;
    pub const OL_DELIVERY_D: usize = 6;
    pub const OL_QUANTITY: usize = 7;
    pub const OL_AMOUNT: usize = 8;
    pub const OL_DIST_INFO: usize = 9;
}

pub mod item {
    pub const I_ID: usize = 0;
    pub const I_IM_ID: usize = 1;
    pub const I_NAME: usize = 2;
    pub const I_PRICE: usize = 3;
    pub const I_DATA: usize = 4;
}

pub mod stock {
    pub const S_I_ID: usize = 0;
    pub const S_W_ID: usize = 1;
    pub const S_QUANTITY: usize = 2;
    /// S_DIST_01 .. S_DIST_10 are at `S_DIST_01 + d_id - 1`.
    pub const S_DIST_01: usize = 3;
    pub const S_YTD: usize = 13;
    pub const S_ORDER_CNT: usize = 14;
    pub const S_REMOTE_CNT: usize = 15;
    pub const S_DATA: usize = 16;
}

/// The nine tables, in load order.
pub fn tables() -> Vec<TableSchema> {
    let mut stock = TableSchema::new(STOCK)
        .int("s_i_id")
        .int("s_w_id")
        .int("s_quantity");
    for d in 1..=10 {
        stock = stock.string(&format!("s_dist_{d:02}"), 24);
    }
    let stock = stock
        .int("s_ytd")
        .int("s_order_cnt")
        .int("s_remote_cnt")
        .string("s_data", 50)
        .key(&["s_w_id", "s_i_id"])
        .int_key(&[W_BITS, I_BITS]);
    vec![
        TableSchema::new(ITEM)
            .int("i_id")
            .int("i_im_id")
            .string("i_name", 24)
            .float("i_price")
            .string("i_data", 50)
            .key(&["i_id"])
            .int_key(&[I_BITS]),
        TableSchema::new(WAREHOUSE)
            .int("w_id")
            .string("w_name", 10)
            .string("w_street_1", 20)
            .string("w_street_2", 20)
            .string("w_city", 20)
            .string("w_state", 2)
            .string("w_zip", 9)
            .float("w_tax")
            .float("w_ytd")
            .key(&["w_id"])
            .int_key(&[W_BITS]),
        stock,
        TableSchema::new(DISTRICT)
            .int("d_id")
            .int("d_w_id")
            .string("d_name", 10)
            .string("d_street_1", 20)
            .string("d_street_2", 20)
            .string("d_city", 20)
            .string("d_state", 2)
            .string("d_zip", 9)
            .float("d_tax")
            .float("d_ytd")
            .int("d_next_o_id")
            .int("d_next_h_id")
            .key(&["d_w_id", "d_id"])
            .int_key(&[W_BITS, D_BITS]),
        TableSchema::new(CUSTOMER)
            .int("c_id")
            .int("c_d_id")
            .int("c_w_id")
            .string("c_first", 16)
            .string("c_middle", 2)
            .string("c_last", 16)
            .string("c_street_1", 20)
            .string("c_street_2", 20)
            .string("c_city", 20)
            .string("c_state", 2)
            .string("c_zip", 9)
            .string("c_phone", 16)
            .int("c_since")
            .string("c_credit", 2)
            .float("c_credit_lim")
            .float("c_discount")
            .float("c_balance")
            .float("c_ytd_payment")
            .int("c_payment_cnt")
            .int("c_delivery_cnt")
            .string("c_data", 500)
            .key(&["c_w_id", "c_d_id", "c_id"])
            .int_key(&[W_BITS, D_BITS, C_BITS]),
        TableSchema::new(HISTORY)
            .int("h_c_id")
            .int("h_c_d_id")
            .int("h_c_w_id")
            .int("h_d_id")
            .int("h_w_id")
            .int("h_date")
            .float("h_amount")
            .string("h_data", 24)
            .int("h_id")
            .key(&["h_w_id", "h_d_id", "h_id"])
            .int_key(&[W_BITS, D_BITS, H_BITS]),
        TableSchema::new(ORDER)
            .int("o_id")
            .int("o_d_id")
            .int("o_w_id")
            .int("o_c_id")
            .int("o_entry_d")
            .int("o_carrier_id")
            .nullable()
            .int("o_ol_cnt")
            .int("o_all_local")
            .key(&["o_w_id", "o_d_id", "o_id"])
            .int_key(&[W_BITS, D_BITS, O_BITS]),
        TableSchema::new(NEW_ORDER)
            .int("no_o_id")
            .int("no_d_id")
            .int("no_w_id")
            .key(&["no_w_id", "no_d_id", "no_o_id"])
            .int_key(&[W_BITS, D_BITS, O_BITS]),
        TableSchema::new(ORDER_LINE)
            .int("ol_o_id")
            .int("ol_d_id")
            .int("ol_w_id")
            .int("ol_number")
            .int("ol_i_id")
            .int("ol_supply_w_id")
            .int("ol_delivery_d")
            .nullable()
            .int("ol_quantity")
            .float("ol_amount")
            .string("ol_dist_info", 24)
            .key(&["ol_w_id", "ol_d_id", "ol_o_id", "ol_number"])
            .int_key(&[W_BITS, D_BITS, O_BITS, OL_BITS]),
    ]
}

/// The two secondary indexes.
pub fn indexes() -> Vec<IndexSchema> {
    use engine::schema::IndexKind;
    vec![
        IndexSchema {
            name: CUSTOMER_BY_NAME.to_string(),
            table: CUSTOMER.to_string(),
            columns: vec![
                customer::C_W_ID,
                customer::C_D_ID,
                customer::C_LAST,
                customer::C_FIRST,
            ],
            unique: false,
            kind: IndexKind::BTree,
            int_key_bits: None,
        },
        IndexSchema {
            name: ORDER_BY_CUSTOMER.to_string(),
            table: ORDER.to_string(),
            columns: vec![order::O_W_ID, order::O_D_ID, order::O_C_ID, order::O_ID],
            unique: true,
            kind: IndexKind::BTree,
            int_key_bits: Some(vec![W_BITS, D_BITS, C_BITS, O_BITS]),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The column constants agree with the schema definitions.
    #[test]
    fn column_constants_match_the_schema() {
        let tables = tables();
        let find = |name: &str| tables.iter().find(|t| t.name == name).unwrap().clone();
        let c = find(CUSTOMER);
        assert_eq!(c.columns.len(), 21);
        assert_eq!(c.column("c_balance"), Some(customer::C_BALANCE));
        assert_eq!(c.column("c_data"), Some(customer::C_DATA));
        assert_eq!(c.column("c_delivery_cnt"), Some(customer::C_DELIVERY_CNT));
        let s = find(STOCK);
        assert_eq!(s.columns.len(), 17);
        assert_eq!(s.column("s_dist_10"), Some(stock::S_DIST_01 + 9));
        assert_eq!(s.column("s_data"), Some(stock::S_DATA));
        let d = find(DISTRICT);
        assert_eq!(d.column("d_next_h_id"), Some(district::D_NEXT_H_ID));
        let h = find(HISTORY);
        assert_eq!(h.column("h_id"), Some(history::H_ID));
        let o = find(ORDER);
        assert_eq!(o.column("o_all_local"), Some(order::O_ALL_LOCAL));
        assert!(o.columns[order::O_CARRIER_ID].nullable);
        let ol = find(ORDER_LINE);
        assert_eq!(ol.column("ol_dist_info"), Some(order_line::OL_DIST_INFO));
        assert!(ol.columns[order_line::OL_DELIVERY_D].nullable);
        assert_eq!(find(WAREHOUSE).column("w_ytd"), Some(warehouse::W_YTD));
        assert_eq!(find(ITEM).column("i_data"), Some(item::I_DATA));
        assert_eq!(find(NEW_ORDER).primary_key, vec![2, 1, 0]);
        for t in &tables {
            let bits = t.int_key_bits.as_ref().unwrap();
            assert_eq!(bits.len(), t.primary_key.len(), "{}", t.name);
            assert!(bits.iter().map(|b| u32::from(*b)).sum::<u32>() <= 64);
        }
        assert_eq!(tables.len(), 9);
    }
}
