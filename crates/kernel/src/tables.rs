//! The rows of the nine TPC-C tables as plain structs, and their column order.
//!
//! Every column of clause 1.3 is here, plus the two the workloads crate adds to give HISTORY
//! a key (`d_next_h_id`, `h_id`). Key columns that the position of a row already says are not
//! stored: a district's row sits at `(w_id − 1) · 10 + d_id − 1`, so it holds no `d_id` or
//! `d_w_id`; an order line sits inside its district's vector at its order's `first_line +
//! ol_number − 1`, so it holds no `ol_o_id`, `ol_d_id`, `ol_w_id` or `ol_number`.
//!
//! Types follow the engine's schema: identifiers `u32` (a TPC-C id never exceeds 2^28), counts
//! and dates `i64`, money and rates `f64`, text [`FixedStr`] of the spec's maximum length.
//!
//! Column order ([`COLUMNS`]) is the workloads crate's TPC-C schema
//! (`crates/workloads/src/tpcc/schema.rs`); the equivalence test checks the two agree.

use crate::fixed::FixedStr;

/// Districts per warehouse (clause 1.2.1: fixed at ten).
pub const DISTRICTS_PER_WAREHOUSE: u32 = 10;

/// The nine tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    Warehouse,
    District,
    Customer,
    History,
    NewOrder,
    Order,
    OrderLine,
    Item,
    Stock,
}

impl Table {
    pub const ALL: [Table; 9] = [
        Table::Warehouse,
        Table::District,
        Table::Customer,
        Table::History,
        Table::NewOrder,
        Table::Order,
        Table::OrderLine,
        Table::Item,
        Table::Stock,
    ];

    /// The table's name in the engine's catalog.
    pub fn name(self) -> &'static str {
        match self {
            Table::Warehouse => "warehouse",
            Table::District => "district",
            Table::Customer => "customer",
            Table::History => "history",
            Table::NewOrder => "new_order",
            Table::Order => "orders",
            Table::OrderLine => "order_line",
            Table::Item => "item",
            Table::Stock => "stock",
        }
    }

    /// The column names, in row order.
    pub fn columns(self) -> &'static [&'static str] {
        COLUMNS[self as usize]
    }
}

/// Column names per table, in [`Table::ALL`] order.
pub const COLUMNS: [&[&str]; 9] = [
    &[
        "w_id",
        "w_name",
        "w_street_1",
        "w_street_2",
        "w_city",
        "w_state",
        "w_zip",
        "w_tax",
        "w_ytd",
    ],
    &[
        "d_id",
        "d_w_id",
        "d_name",
        "d_street_1",
        "d_street_2",
        "d_city",
        "d_state",
        "d_zip",
        "d_tax",
        "d_ytd",
        "d_next_o_id",
        "d_next_h_id",
    ],
    &[
        "c_id",
        "c_d_id",
        "c_w_id",
        "c_first",
        "c_middle",
        "c_last",
        "c_street_1",
        "c_street_2",
        "c_city",
        "c_state",
        "c_zip",
        "c_phone",
        "c_since",
        "c_credit",
        "c_credit_lim",
        "c_discount",
        "c_balance",
        "c_ytd_payment",
        "c_payment_cnt",
        "c_delivery_cnt",
        "c_data",
    ],
    &[
        "h_c_id", "h_c_d_id", "h_c_w_id", "h_d_id", "h_w_id", "h_date", "h_amount", "h_data",
        "h_id",
    ],
    &["no_o_id", "no_d_id", "no_w_id"],
    &[
        "o_id",
        "o_d_id",
        "o_w_id",
        "o_c_id",
        "o_entry_d",
        "o_carrier_id",
        "o_ol_cnt",
        "o_all_local",
    ],
    &[
        "ol_o_id",
        "ol_d_id",
        "ol_w_id",
        "ol_number",
        "ol_i_id",
        "ol_supply_w_id",
        "ol_delivery_d",
        "ol_quantity",
        "ol_amount",
        "ol_dist_info",
    ],
    &["i_id", "i_im_id", "i_name", "i_price", "i_data"],
    &[
        "s_i_id",
        "s_w_id",
        "s_quantity",
        "s_dist_01",
        "s_dist_02",
        "s_dist_03",
        "s_dist_04",
        "s_dist_05",
        "s_dist_06",
        "s_dist_07",
        "s_dist_08",
        "s_dist_09",
        "s_dist_10",
        "s_ytd",
        "s_order_cnt",
        "s_remote_cnt",
        "s_data",
    ],
];

/// Street, city, state and zip: shared by WAREHOUSE, DISTRICT and CUSTOMER.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Address {
    pub street_1: FixedStr<20>,
    pub street_2: FixedStr<20>,
    pub city: FixedStr<20>,
    pub state: FixedStr<2>,
    pub zip: FixedStr<9>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Warehouse {
    pub name: FixedStr<10>,
    pub address: Address,
    pub tax: f64,
    pub ytd: f64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct District {
    pub name: FixedStr<10>,
    pub address: Address,
    pub tax: f64,
    pub ytd: f64,
    pub next_o_id: u32,
    pub next_h_id: i64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Customer {
    pub first: FixedStr<16>,
    pub middle: FixedStr<2>,
    pub last: FixedStr<16>,
    pub address: Address,
    pub phone: FixedStr<16>,
    pub since: i64,
    pub credit: FixedStr<2>,
    pub credit_lim: f64,
    pub discount: f64,
    pub balance: f64,
    pub ytd_payment: f64,
    pub payment_cnt: i64,
    pub delivery_cnt: i64,
    pub data: FixedStr<500>,
}

/// A HISTORY row; `h_d_id`/`h_w_id` are those of the district vector holding it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct History {
    pub c_id: u32,
    pub c_d_id: u32,
    pub c_w_id: u32,
    pub date: i64,
    pub amount: f64,
    pub data: FixedStr<24>,
    pub h_id: i64,
}

/// An ORDER row; its `o_id` is its district's `first_o_id` plus its position.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Order {
    pub c_id: u32,
    /// Where its lines start in the district's order-line vector.
    pub first_line: u32,
    pub entry_d: i64,
    pub carrier_id: Option<i64>,
    pub ol_cnt: u8,
    pub all_local: bool,
}

/// An ORDER-LINE row; its key is implied by its position (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OrderLine {
    pub i_id: u32,
    pub supply_w_id: u32,
    pub quantity: i64,
    pub amount: f64,
    pub delivery_d: Option<i64>,
    pub dist_info: FixedStr<24>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Item {
    pub im_id: i64,
    pub name: FixedStr<24>,
    pub price: f64,
    pub data: FixedStr<50>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stock {
    pub quantity: i64,
    pub ytd: i64,
    pub order_cnt: i64,
    pub remote_cnt: i64,
    /// S_DIST_01 .. S_DIST_10 at `d_id − 1`.
    pub dist: [FixedStr<24>; 10],
    pub data: FixedStr<50>,
}

/// The growing tables of one district: its orders (dense by o_id), their lines, its
/// undelivered orders and its payment history, each an append-only vector.
///
/// ```text
///   orders:      [o first_o_id] [o +1] [o +2] ...           o_id = first_o_id + position
///                     │ first_line, ol_cnt
///                     ▼
///   order_lines: [l1 .. l_cnt][l1 .. l_cnt] ...              (w, d, o_id, n) → one index
///   new_orders:  o_ids ascending (undelivered)
///   history:     rows in h_id order
/// ```
///
/// Invariants: order `k`'s lines are `order_lines[first_line .. first_line + ol_cnt]`, and
/// the orders' line ranges tile `order_lines` in order; `new_orders` is strictly ascending and
/// every entry names an order of this district.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DistrictRows {
    pub first_o_id: u32,
    pub orders: Vec<Order>,
    pub order_lines: Vec<OrderLine>,
    pub new_orders: Vec<u32>,
    pub history: Vec<History>,
}

impl DistrictRows {
    /// The order with this id, if the district has it.
    #[inline]
    pub fn order(&self, o_id: u32) -> Option<&Order> {
        self.orders.get(o_id.checked_sub(self.first_o_id)? as usize)
    }

    /// Line `number` (1-based) of order `o_id`.
    #[inline]
    pub fn order_line(&self, o_id: u32, number: u32) -> Option<&OrderLine> {
        let order = self.order(o_id)?;
        if number == 0 || number > u32::from(order.ol_cnt) {
            return None;
        }
        self.order_lines
            .get(order.first_line as usize + number as usize - 1)
    }
}
