//! Population (clause 4.3.3.1).
//!
//! ITEM once; then per warehouse, in parallel across up to `load_threads` threads (one where
//! the database allows no more, `Switches::max_threads`; warehouse
//! w is loaded by thread (w − 1) mod threads, each with its own random stream seeded by w):
//!
//! | table      | rows per warehouse (spec) | notable values                                  |
//! |------------|---------------------------|-------------------------------------------------|
//! | WAREHOUSE  | 1                         | w_tax 0–0.2, w_ytd 300,000.00 (10 · d_ytd)      |
//! | STOCK      | items (100,000)           | s_quantity 10–100, 10% ORIGINAL in s_data       |
//! | DISTRICT   | 10                        | d_ytd 30,000.00 (10.00 per customer), next 3001 |
//! | CUSTOMER   | 10 · customers (30,000)   | c_last by c_id ≤ 1000 else NURand(255), 10% BC  |
//! | HISTORY    | one per customer          | h_amount 10.00                                  |
//! | ORDER      | 10 · customers            | o_c_id a permutation, carrier null for last 30% |
//! | ORDER-LINE | 5–15 per order            | delivered: amount 0; undelivered: 0.01–9999.99  |
//! | NEW-ORDER  | last 30% of orders        |                                                 |
//!
//! Rows are committed in batches of about 1000 ([`crate::util::BatchLoader`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use engine::db::Database;
use engine::{TxResult, Value};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::random::{self, NuRandConstants, A_C_LAST};
use super::{Tables, TpccConfig, DISTRICTS_PER_WAREHOUSE};
use crate::util::{load_partitions, now_seconds, BatchLoader};

/// Rows the loader will insert (for progress), counting order lines at their mean of 10.
pub fn total_rows(config: &TpccConfig) -> u64 {
    let c = config.customers_per_district as u64;
    let per_district = c /* customers */ + c /* history */ + c /* orders */ + 10 * c
        + config.new_orders_per_district() as u64
        + 1;
    config.items as u64
        + config.warehouses
            * (1 + config.items as u64 + DISTRICTS_PER_WAREHOUSE as u64 * per_district)
}

pub fn load(
    db: &Arc<Database>,
    config: &TpccConfig,
    constants: &NuRandConstants,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> TxResult<()> {
    let tables = Tables::resolve(db)?;
    let total = total_rows(config);
    let done = AtomicU64::new(0);
    let report = |rows: u64| {
        let now = done.fetch_add(rows, Ordering::Relaxed) + rows;
        progress(now.min(total), total);
    };
    let mut rng = SmallRng::seed_from_u64(0x17E5);
    let mut loader = BatchLoader::new(db, &report);
    for i_id in 1..=config.items {
        let row = vec![
            Value::Int(i_id),
            Value::Int(rng.gen_range(1..=10_000)),
            Value::Str(random::a_string(&mut rng, 14, 24)),
            Value::Float(random::money(&mut rng, 100, 10_000)),
            Value::Str(random::data_with_original(&mut rng, 26, 50)),
        ];
        loader.push(&tables.item, row)?;
    }
    loader.flush()?;
    // No TPC-C transaction writes ITEM, and every New-Order reads ten of its rows: read-only,
    // those reads take no record locks, which every thread's New-Orders otherwise shared
    // (one lock head per item for all warehouses; see `Database::set_read_only`).
    db.set_read_only(super::schema::ITEM, true)?;

    // Without latches or locks (the stripped preset) the tables take one writer at a time:
    // parallel loading there corrupted the unlatched indexes.
    let threads = config
        .load_threads
        .min(db.config().switches.max_threads())
        .clamp(1, config.warehouses as usize);
    let now = now_seconds();
    load_partitions(db, &report, threads, config.warehouses, |loader, w| {
        load_warehouse(loader, &tables, config, constants, w, now)
    })?;
    progress(total, total);
    Ok(())
}

/// D_YTD at load: 30,000.00 at full size, i.e. the 10.00 of each customer's history row (so
/// that condition 9 holds when `customers_per_district` is reduced).
pub fn district_ytd(config: &TpccConfig) -> f64 {
    10.0 * config.customers_per_district as f64
}

fn address(rng: &mut SmallRng) -> [Value; 5] {
    [
        Value::Str(random::a_string(rng, 10, 20)),
        Value::Str(random::a_string(rng, 10, 20)),
        Value::Str(random::a_string(rng, 10, 20)),
        Value::Str(random::state(rng)),
        Value::Str(random::zip(rng)),
    ]
}

fn load_warehouse(
    loader: &mut BatchLoader<'_>,
    t: &Tables,
    config: &TpccConfig,
    constants: &NuRandConstants,
    w: i64,
    now: i64,
) -> TxResult<()> {
    let mut rng =
        SmallRng::seed_from_u64(0xC0FFEE ^ (w as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut row = vec![Value::Int(w), Value::Str(random::a_string(&mut rng, 6, 10))];
    row.extend(address(&mut rng));
    row.push(Value::Float(random::rate(&mut rng, 0, 2000)));
    // 300,000.00 at full size: ten districts' d_ytd, so that conditions 1 and 8 hold.
    row.push(Value::Float(10.0 * district_ytd(config)));
    loader.push(&t.warehouse, row)?;

    for i_id in 1..=config.items {
        let mut row = vec![
            Value::Int(i_id),
            Value::Int(w),
            Value::Int(rng.gen_range(10..=100)),
        ];
        for _ in 0..10 {
            row.push(Value::Str(random::a_string(&mut rng, 24, 24)));
        }
        row.extend([
            Value::Int(0),
            Value::Int(0),
            Value::Int(0),
            Value::Str(random::data_with_original(&mut rng, 26, 50)),
        ]);
        loader.push(&t.stock, row)?;
    }

    let customers = config.customers_per_district;
    let first_undelivered = config.delivered_per_district() + 1;
    for d in 1..=DISTRICTS_PER_WAREHOUSE {
        let mut row = vec![
            Value::Int(d),
            Value::Int(w),
            Value::Str(random::a_string(&mut rng, 6, 10)),
        ];
        row.extend(address(&mut rng));
        row.extend([
            Value::Float(random::rate(&mut rng, 0, 2000)),
            Value::Float(district_ytd(config)),
            Value::Int(customers + 1),
            Value::Int(customers + 1),
        ]);
        loader.push(&t.district, row)?;

        for c in 1..=customers {
            let last = if c <= 1000 {
                random::last_name(c - 1)
            } else {
                random::last_name(random::nurand(&mut rng, A_C_LAST, 0, 999, constants.c_last))
            };
            let mut row = vec![
                Value::Int(c),
                Value::Int(d),
                Value::Int(w),
                Value::Str(random::a_string(&mut rng, 8, 16)),
                Value::Str("OE".to_string()),
                Value::Str(last),
            ];
            row.extend(address(&mut rng));
            row.extend([
                Value::Str(random::n_string(&mut rng, 16, 16)),
                Value::Int(now),
                Value::Str(
                    if rng.gen_range(0..10) == 0 {
                        "BC"
                    } else {
                        "GC"
                    }
                    .to_string(),
                ),
                Value::Float(50_000.0),
                Value::Float(random::rate(&mut rng, 0, 5000)),
                Value::Float(-10.0),
                Value::Float(10.0),
                Value::Int(1),
                Value::Int(0),
                Value::Str(random::a_string(&mut rng, 300, 500)),
            ]);
            loader.push(&t.customer, row)?;
            loader.push(
                &t.history,
                vec![
                    Value::Int(c),
                    Value::Int(d),
                    Value::Int(w),
                    Value::Int(d),
                    Value::Int(w),
                    Value::Int(now),
                    Value::Float(10.0),
                    Value::Str(random::a_string(&mut rng, 12, 24)),
                    Value::Int(c),
                ],
            )?;
        }

        let mut owners: Vec<i64> = (1..=customers).collect();
        owners.shuffle(&mut rng);
        for (o, c_id) in (1..=customers).zip(owners) {
            let delivered = o < first_undelivered;
            let lines = rng.gen_range(5..=15);
            loader.push(
                &t.order,
                vec![
                    Value::Int(o),
                    Value::Int(d),
                    Value::Int(w),
                    Value::Int(c_id),
                    Value::Int(now),
                    if delivered {
                        Value::Int(rng.gen_range(1..=10))
                    } else {
                        Value::Null
                    },
                    Value::Int(lines),
                    Value::Int(1),
                ],
            )?;
            for n in 1..=lines {
                loader.push(
                    &t.order_line,
                    vec![
                        Value::Int(o),
                        Value::Int(d),
                        Value::Int(w),
                        Value::Int(n),
                        Value::Int(rng.gen_range(1..=config.items)),
                        Value::Int(w),
                        if delivered {
                            Value::Int(now)
                        } else {
                            Value::Null
                        },
                        Value::Int(5),
                        Value::Float(if delivered {
                            0.0
                        } else {
                            random::money(&mut rng, 1, 999_999)
                        }),
                        Value::Str(random::a_string(&mut rng, 24, 24)),
                    ],
                )?;
            }
            if !delivered {
                loader.push(
                    &t.new_order,
                    vec![Value::Int(o), Value::Int(d), Value::Int(w)],
                )?;
            }
        }
    }
    Ok(())
}
