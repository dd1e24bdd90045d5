//! Input generation for the five TPC-C transactions (clauses 2.4.1, 2.5.1, 2.6.1, 2.7.1,
//! 2.8.1) and for the 2008 paper's variant, plus the transaction mix (clause 5.2.3).
//!
//! Inputs are drawn by `Terminal::next` and kept unchanged while the transaction is retried.

use engine::{TxResult, Value};
use rand::Rng;

use super::random::{self, NuRandConstants, A_C_ID, A_C_LAST, A_OL_I_ID};
use super::TpccConfig;
use crate::Mix;

/// The transaction types, in `txn_names` order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnType {
    NewOrder = 0,
    Payment = 1,
    OrderStatus = 2,
    Delivery = 3,
    StockLevel = 4,
}

pub const TXN_NAMES: [&str; 5] = [
    "new_order",
    "payment",
    "order_status",
    "delivery",
    "stock_level",
];

impl TxnType {
    /// Draws a type: 45/43/4/4/4 for the full mix (the spec's minimum percentages for the
    /// last four, New-Order taking the rest), 50/50 New-Order/Payment for the paper's,
    /// 43/43/4.7/4.7/4.6 for Charm's.
    pub fn draw(rng: &mut impl Rng, mix: Mix) -> TxnType {
        match mix {
            Mix::Paper => {
                if rng.gen_bool(0.5) {
                    TxnType::NewOrder
                } else {
                    TxnType::Payment
                }
            }
            Mix::Full => match rng.gen_range(0..100) {
                0..=44 => TxnType::NewOrder,
                45..=87 => TxnType::Payment,
                88..=91 => TxnType::OrderStatus,
                92..=95 => TxnType::Delivery,
                _ => TxnType::StockLevel,
            },
            Mix::Charm => match rng.gen_range(0..1000) {
                0..=429 => TxnType::NewOrder,
                430..=859 => TxnType::Payment,
                860..=906 => TxnType::OrderStatus,
                907..=953 => TxnType::Delivery,
                _ => TxnType::StockLevel,
            },
        }
    }
}

/// One order line as entered.
#[derive(Clone, Debug, PartialEq)]
pub struct OrderLineInput {
    pub i_id: i64,
    pub supply_w_id: i64,
    pub quantity: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NewOrderInput {
    pub w_id: i64,
    pub d_id: i64,
    pub c_id: i64,
    pub lines: Vec<OrderLineInput>,
    pub entry_d: i64,
    /// The 2008 paper's form: read all items first (Figure 4), no rollback drawn.
    pub paper: bool,
}

impl NewOrderInput {
    pub fn all_local(&self) -> bool {
        self.lines.iter().all(|l| l.supply_w_id == self.w_id)
    }
}

/// How Payment and Order-Status find their customer.
#[derive(Clone, Debug, PartialEq)]
pub enum CustomerSelector {
    ById(i64),
    /// The middle one (position ⌈n/2⌉) of those with this last name, sorted by C_FIRST.
    ByLastName(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct PaymentInput {
    pub w_id: i64,
    pub d_id: i64,
    pub c_w_id: i64,
    pub c_d_id: i64,
    pub customer: CustomerSelector,
    pub h_amount: f64,
    pub h_date: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OrderStatusInput {
    pub w_id: i64,
    pub d_id: i64,
    pub customer: CustomerSelector,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DeliveryInput {
    pub w_id: i64,
    pub carrier_id: i64,
    pub delivery_d: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StockLevelInput {
    pub w_id: i64,
    pub d_id: i64,
    pub threshold: i64,
}

/// A drawn transaction with its input.
#[derive(Clone, Debug, PartialEq)]
pub enum TpccInput {
    NewOrder(NewOrderInput),
    Payment(PaymentInput),
    OrderStatus(OrderStatusInput),
    Delivery(DeliveryInput),
    StockLevel(StockLevelInput),
}

impl TpccInput {
    pub fn txn_type(&self) -> TxnType {
        match self {
            TpccInput::NewOrder(_) => TxnType::NewOrder,
            TpccInput::Payment(_) => TxnType::Payment,
            TpccInput::OrderStatus(_) => TxnType::OrderStatus,
            TpccInput::Delivery(_) => TxnType::Delivery,
            TpccInput::StockLevel(_) => TxnType::StockLevel,
        }
    }

    /// The input as its stored procedure's arguments (the procedure is named by
    /// [`TpccInput::txn_type`]):
    ///
    /// ```text
    ///   new_order     w_id d_id c_id entry_d paper(0|1) n (i_id supply_w_id quantity)×n
    ///   payment       w_id d_id c_w_id c_d_id customer h_amount h_date
    ///   order_status  w_id d_id customer
    ///   delivery      w_id carrier_id delivery_d
    ///   stock_level   w_id d_id threshold
    /// ```
    ///
    /// `customer` is an integer (by id) or a string (by last name).
    pub fn to_args(&self, out: &mut Vec<Value>) {
        let customer = |c: &CustomerSelector| match c {
            CustomerSelector::ById(id) => Value::Int(*id),
            CustomerSelector::ByLastName(name) => Value::Str(name.clone()),
        };
        match self {
            TpccInput::NewOrder(i) => {
                out.extend(
                    [
                        i.w_id,
                        i.d_id,
                        i.c_id,
                        i.entry_d,
                        i64::from(i.paper),
                        i.lines.len() as i64,
                    ]
                    .map(Value::Int),
                );
                for l in &i.lines {
                    out.extend([l.i_id, l.supply_w_id, l.quantity].map(Value::Int));
                }
            }
            TpccInput::Payment(i) => {
                out.extend([i.w_id, i.d_id, i.c_w_id, i.c_d_id].map(Value::Int));
                out.extend([
                    customer(&i.customer),
                    Value::Float(i.h_amount),
                    Value::Int(i.h_date),
                ]);
            }
            TpccInput::OrderStatus(i) => out.extend([
                Value::Int(i.w_id),
                Value::Int(i.d_id),
                customer(&i.customer),
            ]),
            TpccInput::Delivery(i) => {
                out.extend([i.w_id, i.carrier_id, i.delivery_d].map(Value::Int))
            }
            TpccInput::StockLevel(i) => out.extend([i.w_id, i.d_id, i.threshold].map(Value::Int)),
        }
    }

    /// The input of procedure `txn` (an index into [`TXN_NAMES`]) from its arguments
    /// ([`TpccInput::to_args`]).
    pub fn from_args(txn: usize, args: &[Value]) -> TxResult<TpccInput> {
        let name = *TXN_NAMES
            .get(txn)
            .ok_or_else(|| crate::util::no_procedure("tpcc", txn))?;
        let mut a = crate::util::Args::new(name, args);
        let customer = |a: &mut crate::util::Args<'_>| -> TxResult<CustomerSelector> {
            Ok(match a.value()? {
                Value::Str(name) => CustomerSelector::ByLastName(name.clone()),
                other => CustomerSelector::ById(other.as_int().ok_or_else(|| {
                    engine::TxError::Invalid(format!(
                        "procedure {name}: the customer must be an id or a last name, not \
                         {other:?}"
                    ))
                })?),
            })
        };
        let input = match txn {
            0 => {
                let (w_id, d_id, c_id, entry_d, paper) =
                    (a.int()?, a.int()?, a.int()?, a.int()?, a.bool()?);
                // Clause 2.4.1.3: 5 to 15 lines.
                let count = a.count(15)?;
                let mut lines = Vec::with_capacity(count);
                for _ in 0..count {
                    lines.push(OrderLineInput {
                        i_id: a.int()?,
                        supply_w_id: a.int()?,
                        quantity: a.int()?,
                    });
                }
                TpccInput::NewOrder(NewOrderInput {
                    w_id,
                    d_id,
                    c_id,
                    lines,
                    entry_d,
                    paper,
                })
            }
            1 => TpccInput::Payment(PaymentInput {
                w_id: a.int()?,
                d_id: a.int()?,
                c_w_id: a.int()?,
                c_d_id: a.int()?,
                customer: customer(&mut a)?,
                h_amount: a.float()?,
                h_date: a.int()?,
            }),
            2 => TpccInput::OrderStatus(OrderStatusInput {
                w_id: a.int()?,
                d_id: a.int()?,
                customer: customer(&mut a)?,
            }),
            3 => TpccInput::Delivery(DeliveryInput {
                w_id: a.int()?,
                carrier_id: a.int()?,
                delivery_d: a.int()?,
            }),
            _ => TpccInput::StockLevel(StockLevelInput {
                w_id: a.int()?,
                d_id: a.int()?,
                threshold: a.int()?,
            }),
        };
        a.finish()?;
        Ok(input)
    }
}

/// What a terminal knows when drawing inputs.
#[derive(Clone, Debug)]
pub struct InputContext {
    pub config: TpccConfig,
    pub constants: NuRandConstants,
    /// The terminal's home warehouse and (for Stock-Level) district.
    pub home_w_id: i64,
    pub home_d_id: i64,
}

impl InputContext {
    fn district(&self, rng: &mut impl Rng) -> i64 {
        rng.gen_range(1..=super::DISTRICTS_PER_WAREHOUSE)
    }

    fn customer_id(&self, rng: &mut impl Rng) -> i64 {
        random::nurand(
            rng,
            A_C_ID,
            1,
            self.config.customers_per_district,
            self.constants.c_id,
        )
    }

    fn item_id(&self, rng: &mut impl Rng) -> i64 {
        random::nurand(rng, A_OL_I_ID, 1, self.config.items, self.constants.ol_i_id)
    }

    fn last_name(&self, rng: &mut impl Rng) -> String {
        // With fewer than 1000 customers per district only names 0..n-1 exist.
        let max = (self.config.customers_per_district - 1).min(999);
        random::last_name(random::nurand(rng, A_C_LAST, 0, max, self.constants.c_last))
    }

    /// A warehouse other than the home one (callers ensure W > 1).
    fn remote_warehouse(&self, rng: &mut impl Rng) -> i64 {
        let w = rng.gen_range(1..self.config.warehouses as i64);
        if w >= self.home_w_id {
            w + 1
        } else {
            w
        }
    }

    fn customer_selector(&self, rng: &mut impl Rng) -> CustomerSelector {
        if rng.gen_range(1..=100) <= 60 {
            CustomerSelector::ByLastName(self.last_name(rng))
        } else {
            CustomerSelector::ById(self.customer_id(rng))
        }
    }

    /// Clause 2.4.1 (full) or the paper's ten local items.
    pub fn new_order(&self, rng: &mut impl Rng, now: i64) -> NewOrderInput {
        let paper = self.config.mix == Mix::Paper;
        let d_id = self.district(rng);
        let c_id = self.customer_id(rng);
        let (count, rollback) = if paper {
            (10, false)
        } else {
            (rng.gen_range(5..=15), rng.gen_range(1..=100) == 1)
        };
        let multi = self.config.warehouses > 1 && !paper;
        let lines = (0..count)
            .map(|n| {
                let i_id = if rollback && n == count - 1 {
                    self.config.items + 1 // unused: "not found" forces the rollback
                } else {
                    self.item_id(rng)
                };
                let supply_w_id = if multi && rng.gen_range(1..=100) == 1 {
                    self.remote_warehouse(rng)
                } else {
                    self.home_w_id
                };
                OrderLineInput {
                    i_id,
                    supply_w_id,
                    quantity: rng.gen_range(1..=10),
                }
            })
            .collect();
        NewOrderInput {
            w_id: self.home_w_id,
            d_id,
            c_id,
            lines,
            entry_d: now,
            paper,
        }
    }

    /// Clause 2.5.1 (full) or the paper's local, by-id payment.
    pub fn payment(&self, rng: &mut impl Rng, now: i64) -> PaymentInput {
        let d_id = self.district(rng);
        let h_amount = random::money(rng, 100, 500_000);
        if self.config.mix == Mix::Paper {
            return PaymentInput {
                w_id: self.home_w_id,
                d_id,
                c_w_id: self.home_w_id,
                c_d_id: d_id,
                customer: CustomerSelector::ById(self.customer_id(rng)),
                h_amount,
                h_date: now,
            };
        }
        let remote = rng.gen_range(1..=100) > 85 && self.config.warehouses > 1;
        let (c_w_id, c_d_id) = if remote {
            (self.remote_warehouse(rng), self.district(rng))
        } else {
            (self.home_w_id, d_id)
        };
        PaymentInput {
            w_id: self.home_w_id,
            d_id,
            c_w_id,
            c_d_id,
            customer: self.customer_selector(rng),
            h_amount,
            h_date: now,
        }
    }

    pub fn order_status(&self, rng: &mut impl Rng) -> OrderStatusInput {
        OrderStatusInput {
            w_id: self.home_w_id,
            d_id: self.district(rng),
            customer: self.customer_selector(rng),
        }
    }

    pub fn delivery(&self, rng: &mut impl Rng, now: i64) -> DeliveryInput {
        DeliveryInput {
            w_id: self.home_w_id,
            carrier_id: rng.gen_range(1..=10),
            delivery_d: now,
        }
    }

    pub fn stock_level(&self, rng: &mut impl Rng) -> StockLevelInput {
        StockLevelInput {
            w_id: self.home_w_id,
            d_id: self.home_d_id,
            threshold: rng.gen_range(10..=20),
        }
    }

    /// Draws a transaction type by the mix and its input.
    pub fn draw(&self, rng: &mut impl Rng, now: i64) -> TpccInput {
        match TxnType::draw(rng, self.config.mix) {
            TxnType::NewOrder => TpccInput::NewOrder(self.new_order(rng, now)),
            TxnType::Payment => TpccInput::Payment(self.payment(rng, now)),
            TxnType::OrderStatus => TpccInput::OrderStatus(self.order_status(rng)),
            TxnType::Delivery => TpccInput::Delivery(self.delivery(rng, now)),
            TxnType::StockLevel => TpccInput::StockLevel(self.stock_level(rng)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn context(warehouses: u64, mix: Mix) -> InputContext {
        let mut rng = SmallRng::seed_from_u64(9);
        let load = NuRandConstants::for_load(&mut rng);
        InputContext {
            config: TpccConfig::new(warehouses, mix),
            constants: NuRandConstants::for_run(&load, &mut rng),
            home_w_id: 2.min(warehouses as i64),
            home_d_id: 3,
        }
    }

    const DRAWS: usize = 100_000;

    fn within(count: usize, draws: usize, percent: f64, slack: f64) -> bool {
        let p = count as f64 * 100.0 / draws as f64;
        (p - percent).abs() <= slack
    }

    #[test]
    fn new_order_rolls_back_one_percent_and_uses_one_percent_remote_items() {
        let ctx = context(4, Mix::Full);
        let mut rng = SmallRng::seed_from_u64(1);
        let (mut rollbacks, mut lines, mut remote) = (0, 0, 0);
        for _ in 0..DRAWS {
            let input = ctx.new_order(&mut rng, 0);
            assert!((5..=15).contains(&input.lines.len()));
            assert!((1..=10).contains(&input.d_id));
            assert!((1..=3000).contains(&input.c_id));
            for (n, line) in input.lines.iter().enumerate() {
                assert!((1..=10).contains(&line.quantity));
                assert!((1..=4).contains(&line.supply_w_id));
                if line.i_id == 100_001 {
                    assert_eq!(n, input.lines.len() - 1, "only the last item is unused");
                    rollbacks += 1;
                } else {
                    assert!((1..=100_000).contains(&line.i_id));
                }
                lines += 1;
                if line.supply_w_id != input.w_id {
                    remote += 1;
                }
            }
        }
        assert!(within(rollbacks, DRAWS, 1.0, 0.2), "{rollbacks} rollbacks");
        assert!(
            within(remote, lines, 1.0, 0.1),
            "{remote} of {lines} remote"
        );
    }

    #[test]
    fn a_single_warehouse_never_draws_remote_work() {
        let ctx = context(1, Mix::Full);
        let mut rng = SmallRng::seed_from_u64(2);
        for _ in 0..10_000 {
            let no = ctx.new_order(&mut rng, 0);
            assert!(no.all_local());
            let p = ctx.payment(&mut rng, 0);
            assert_eq!((p.c_w_id, p.c_d_id), (1, p.d_id));
        }
    }

    #[test]
    fn payment_is_fifteen_percent_remote_and_sixty_percent_by_name() {
        let ctx = context(3, Mix::Full);
        let mut rng = SmallRng::seed_from_u64(3);
        let (mut remote, mut by_name) = (0, 0);
        for _ in 0..DRAWS {
            let p = ctx.payment(&mut rng, 0);
            assert!((1.0..=5000.0).contains(&p.h_amount));
            if p.c_w_id != p.w_id {
                remote += 1;
            } else {
                assert_eq!(p.c_d_id, p.d_id);
            }
            match p.customer {
                CustomerSelector::ByLastName(name) => {
                    by_name += 1;
                    assert!(name.len() >= 9);
                }
                CustomerSelector::ById(id) => assert!((1..=3000).contains(&id)),
            }
        }
        assert!(within(remote, DRAWS, 15.0, 0.5), "{remote} remote");
        assert!(within(by_name, DRAWS, 60.0, 0.5), "{by_name} by name");
        let mut by_name = 0;
        for _ in 0..DRAWS {
            if matches!(
                ctx.order_status(&mut rng).customer,
                CustomerSelector::ByLastName(_)
            ) {
                by_name += 1;
            }
        }
        assert!(within(by_name, DRAWS, 60.0, 0.5), "{by_name} by name");
    }

    #[test]
    fn the_paper_variant_orders_ten_local_items_and_pays_by_id() {
        let ctx = context(5, Mix::Paper);
        let mut rng = SmallRng::seed_from_u64(4);
        let mut new_orders = 0;
        for _ in 0..20_000 {
            match ctx.draw(&mut rng, 0) {
                TpccInput::NewOrder(no) => {
                    new_orders += 1;
                    assert_eq!(no.lines.len(), 10);
                    assert!(no.all_local() && no.paper);
                    assert!(no.lines.iter().all(|l| l.i_id <= 100_000));
                }
                TpccInput::Payment(p) => {
                    assert_eq!((p.c_w_id, p.c_d_id), (p.w_id, p.d_id));
                    assert!(matches!(p.customer, CustomerSelector::ById(_)));
                }
                other => panic!("the paper's mix drew {other:?}"),
            }
        }
        assert!(within(new_orders, 20_000, 50.0, 1.5), "{new_orders}");
    }

    #[test]
    fn the_full_mix_has_the_specified_proportions() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut counts = [0usize; 5];
        for _ in 0..DRAWS {
            counts[TxnType::draw(&mut rng, Mix::Full) as usize] += 1;
        }
        for (count, percent) in counts.iter().zip([45.0, 43.0, 4.0, 4.0, 4.0]) {
            assert!(within(*count, DRAWS, percent, 0.5), "{counts:?}");
        }
    }

    #[test]
    fn stock_level_uses_the_terminal_district() {
        let ctx = context(2, Mix::Full);
        let mut rng = SmallRng::seed_from_u64(6);
        for _ in 0..1000 {
            let s = ctx.stock_level(&mut rng);
            assert_eq!((s.w_id, s.d_id), (2, 3));
            assert!((10..=20).contains(&s.threshold));
            let d = ctx.delivery(&mut rng, 7);
            assert!((1..=10).contains(&d.carrier_id));
        }
    }
}
