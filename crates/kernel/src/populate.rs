//! Population per clause 4.3.3.1, deterministic from a seed.
//!
//! | table      | rows                     | notable values                                   |
//! |------------|--------------------------|--------------------------------------------------|
//! | ITEM       | items (100,000)          | i_price 1.00–100.00, 10% "ORIGINAL" in i_data    |
//! | WAREHOUSE  | W                        | w_tax 0–0.2, w_ytd 300,000.00                    |
//! | STOCK      | W · items                | s_quantity 10–100, 10% "ORIGINAL" in s_data      |
//! | DISTRICT   | W · 10                   | d_tax 0–0.2, d_ytd 30,000.00, d_next_o_id = C+1  |
//! | CUSTOMER   | W · 10 · C (3,000)       | c_last from c_id−1 for c ≤ 1000, else NURand(255); 10% "BC" |
//! | HISTORY    | one per customer         | h_amount 10.00, h_id = c_id                      |
//! | ORDER      | W · 10 · C               | o_c_id a permutation; carrier NULL for the last 30% |
//! | ORDER-LINE | 5–15 per order           | delivered: amount 0.00; undelivered 0.01–9,999.99 |
//! | NEW-ORDER  | the last 30% of orders   |                                                  |
//!
//! The randomness is simplified (one `SmallRng` stream from the seed, a fixed C-Load) but
//! every cardinality, range and format is the specification's.

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::fixed::FixedStr;
use crate::kernel::{Kernel, Scale};
use crate::tables::{
    Address, Customer, District, DistrictRows, History, Item, Order, OrderLine, Stock, Warehouse,
    DISTRICTS_PER_WAREHOUSE,
};

const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];
const ALPHANUMERIC: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
/// C-Load for C_LAST (clause 2.1.6).
const C_LAST_LOAD: u32 = 157;
/// The load's timestamp (seconds since the epoch) for c_since, o_entry_d, ol_delivery_d.
const LOAD_DATE: i64 = 1_212_883_200;

/// The last name of number 0..=999: three syllables by its digits (clause 4.3.2.3).
pub fn last_name(number: u32) -> FixedStr<16> {
    let mut bytes = [0u8; 16];
    let mut len = 0;
    for digit in [number / 100 % 10, number / 10 % 10, number % 10] {
        let s = SYLLABLES[digit as usize].as_bytes();
        bytes[len..len + s.len()].copy_from_slice(s);
        len += s.len();
    }
    FixedStr::from_bytes(&bytes[..len]).unwrap_or_default()
}

fn a_string<const N: usize>(rng: &mut SmallRng, min: usize, max: usize) -> FixedStr<N> {
    let mut bytes = [0u8; N];
    let len = rng.gen_range(min..=max.min(N));
    for b in &mut bytes[..len] {
        *b = ALPHANUMERIC[rng.gen_range(0..ALPHANUMERIC.len())];
    }
    FixedStr::from_bytes(&bytes[..len]).unwrap_or_default()
}

fn n_string<const N: usize>(rng: &mut SmallRng, len: usize) -> FixedStr<N> {
    let mut bytes = [0u8; N];
    for b in &mut bytes[..len.min(N)] {
        *b = b'0' + rng.gen_range(0..10u8);
    }
    FixedStr::from_bytes(&bytes[..len.min(N)]).unwrap_or_default()
}

/// I_DATA / S_DATA: an a-string of 26–50, with "ORIGINAL" at a random place in 10% of rows.
fn data(rng: &mut SmallRng) -> FixedStr<50> {
    let mut s: FixedStr<50> = a_string(rng, 26, 50);
    if rng.gen_range(0..10) == 0 {
        let mut bytes = [0u8; 50];
        bytes[..s.len()].copy_from_slice(s.as_bytes());
        let at = rng.gen_range(0..=s.len() - 8);
        bytes[at..at + 8].copy_from_slice(b"ORIGINAL");
        s = FixedStr::from_bytes(&bytes[..s.len()]).unwrap_or_default();
    }
    s
}

fn address(rng: &mut SmallRng) -> Address {
    let mut zip = [0u8; 9];
    zip[..4].copy_from_slice(n_string::<4>(rng, 4).as_bytes());
    zip[4..].copy_from_slice(b"11111");
    let state = [b'A' + rng.gen_range(0..26u8), b'A' + rng.gen_range(0..26u8)];
    Address {
        street_1: a_string(rng, 10, 20),
        street_2: a_string(rng, 10, 20),
        city: a_string(rng, 10, 20),
        state: FixedStr::from_bytes(&state).unwrap_or_default(),
        zip: FixedStr::from_bytes(&zip).unwrap_or_default(),
    }
}

/// A rate in [min, max] ten-thousandths (w_tax, d_tax, c_discount).
fn rate(rng: &mut SmallRng, min: u32, max: u32) -> f64 {
    f64::from(rng.gen_range(min..=max)) / 10_000.0
}

/// An amount in [min, max] cents.
fn money(rng: &mut SmallRng, min: u32, max: u32) -> f64 {
    f64::from(rng.gen_range(min..=max)) / 100.0
}

impl Kernel {
    /// A freshly loaded TPC-C database of `scale`, the same for the same seed.
    pub fn populate(scale: Scale, seed: u64) -> Result<Kernel, crate::KernelError> {
        scale.validate()?;
        let mut rng = SmallRng::seed_from_u64(seed);
        let rng = &mut rng;
        let items = (0..scale.items)
            .map(|_| Item {
                im_id: rng.gen_range(1..=10_000),
                name: a_string(rng, 14, 24),
                price: money(rng, 100, 10_000),
                data: data(rng),
            })
            .collect();
        let mut kernel = Kernel {
            scale,
            warehouses: Vec::with_capacity(scale.warehouses as usize),
            districts: Vec::with_capacity(scale.districts()),
            customers: Vec::with_capacity(scale.customers()),
            items,
            stock: Vec::with_capacity(scale.stock_rows()),
            district_rows: Vec::with_capacity(scale.districts()),
        };
        let c_per = scale.customers_per_district;
        let first_undelivered = c_per - scale.new_orders_per_district() + 1;
        for w in 1..=scale.warehouses {
            kernel.warehouses.push(Warehouse {
                name: a_string(rng, 6, 10),
                address: address(rng),
                tax: rate(rng, 0, 2000),
                ytd: 300_000.0,
            });
            for _ in 0..scale.items {
                let mut dist = [FixedStr::default(); 10];
                for d in &mut dist {
                    *d = a_string(rng, 24, 24);
                }
                kernel.stock.push(Stock {
                    quantity: rng.gen_range(10..=100),
                    ytd: 0,
                    order_cnt: 0,
                    remote_cnt: 0,
                    dist,
                    data: data(rng),
                });
            }
            for d in 1..=DISTRICTS_PER_WAREHOUSE {
                kernel.districts.push(District {
                    name: a_string(rng, 6, 10),
                    address: address(rng),
                    tax: rate(rng, 0, 2000),
                    ytd: 30_000.0,
                    next_o_id: c_per + 1,
                    next_h_id: i64::from(c_per) + 1,
                });
                let mut rows = DistrictRows {
                    first_o_id: 1,
                    ..DistrictRows::default()
                };
                for c in 1..=c_per {
                    let last = if c <= 1000 {
                        c - 1
                    } else {
                        ((rng.gen_range(0..=255) | rng.gen_range(0..=999)) + C_LAST_LOAD) % 1000
                    };
                    kernel.customers.push(Customer {
                        first: a_string(rng, 8, 16),
                        middle: FixedStr::new("OE").unwrap_or_default(),
                        last: last_name(last),
                        address: address(rng),
                        phone: n_string(rng, 16),
                        since: LOAD_DATE,
                        credit: FixedStr::new(if rng.gen_range(0..10) == 0 {
                            "BC"
                        } else {
                            "GC"
                        })
                        .unwrap_or_default(),
                        credit_lim: 50_000.0,
                        discount: rate(rng, 0, 5000),
                        balance: -10.0,
                        ytd_payment: 10.0,
                        payment_cnt: 1,
                        delivery_cnt: 0,
                        data: a_string(rng, 300, 500),
                    });
                    rows.history.push(History {
                        c_id: c,
                        c_d_id: d,
                        c_w_id: w,
                        date: LOAD_DATE,
                        amount: 10.0,
                        data: a_string(rng, 12, 24),
                        h_id: i64::from(c),
                    });
                }
                let mut owners: Vec<u32> = (1..=c_per).collect();
                owners.shuffle(rng);
                for (o_id, c_id) in (1..=c_per).zip(owners) {
                    let delivered = o_id < first_undelivered;
                    let ol_cnt = rng.gen_range(5..=15u8);
                    rows.orders.push(Order {
                        c_id,
                        first_line: rows.order_lines.len() as u32,
                        entry_d: LOAD_DATE,
                        carrier_id: delivered.then(|| rng.gen_range(1..=10)),
                        ol_cnt,
                        all_local: true,
                    });
                    for _ in 0..ol_cnt {
                        rows.order_lines.push(OrderLine {
                            i_id: rng.gen_range(1..=scale.items),
                            supply_w_id: w,
                            quantity: 5,
                            amount: if delivered {
                                0.0
                            } else {
                                money(rng, 1, 999_999)
                            },
                            delivery_d: delivered.then_some(LOAD_DATE),
                            dist_info: a_string(rng, 24, 24),
                        });
                    }
                    if !delivered {
                        rows.new_orders.push(o_id);
                    }
                }
                kernel.district_rows.push(rows);
            }
        }
        Ok(kernel)
    }
}
