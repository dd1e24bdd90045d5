//! Transaction inputs and outputs (plain, fixed-size: no heap per transaction), and the
//! generator of the paper's 50/50 mix.
//!
//! The generator follows clauses 2.4.1 and 2.5.1 as the 2008 paper narrows them (§4.1):
//! New-Order orders exactly ten items, all supplied by the home warehouse, and never rolls
//! back; Payment pays for a customer chosen by id at the home warehouse and district.
//! Ids are NURand (c_id: A = 1023, i_id: A = 8191) with fixed C constants.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::fixed::FixedStr;
use crate::kernel::Scale;
use crate::tables::DISTRICTS_PER_WAREHOUSE;

/// Most lines a New-Order may have (clause 2.4.1.3).
pub const MAX_LINES: usize = 15;
/// Lines of the paper's New-Order.
pub const PAPER_LINES: usize = 10;

/// One order line as entered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineInput {
    pub i_id: u32,
    pub supply_w_id: u32,
    pub quantity: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewOrderInput {
    pub w_id: u32,
    pub d_id: u32,
    pub c_id: u32,
    /// The first `line_count` entries are the order's lines.
    pub lines: [LineInput; MAX_LINES],
    pub line_count: u8,
    pub entry_d: i64,
}

impl NewOrderInput {
    /// The order's lines.
    pub fn lines(&self) -> &[LineInput] {
        &self.lines[..(self.line_count as usize).min(MAX_LINES)]
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaymentInput {
    pub w_id: u32,
    pub d_id: u32,
    pub c_w_id: u32,
    pub c_d_id: u32,
    pub c_id: u32,
    pub h_amount: f64,
    pub h_date: i64,
}

/// One transaction of the mix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KernelInput {
    NewOrder(NewOrderInput),
    Payment(PaymentInput),
}

/// What the terminal shows for one order line.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LineOutput {
    pub i_name: FixedStr<24>,
    pub i_price: f64,
    /// The stock quantity after the update.
    pub s_quantity: i64,
    /// b'B' if both I_DATA and S_DATA contain "ORIGINAL", else b'G'.
    pub brand_generic: u8,
    pub ol_amount: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NewOrderOutput {
    pub o_id: u32,
    pub c_last: FixedStr<16>,
    pub c_credit: FixedStr<2>,
    pub c_discount: f64,
    pub w_tax: f64,
    pub d_tax: f64,
    /// The first `line_count` entries are meaningful.
    pub lines: [LineOutput; MAX_LINES],
    pub line_count: u8,
    /// Σ ol_amount · (1 − c_discount) · (1 + w_tax + d_tax).
    pub total_amount: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaymentOutput {
    pub c_id: u32,
    pub c_balance: f64,
    pub c_credit: FixedStr<2>,
}

/// NURand's run-time C constants (clause 2.1.6); any fixed values in range will do.
const C_FOR_C_ID: u32 = 259;
const C_FOR_I_ID: u32 = 7911;
/// Seconds since the epoch of the first generated transaction (2008-06-09, SIGMOD 2008).
const FIRST_DATE: i64 = 1_212_969_600;

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y − x + 1)) + x.
fn nurand(rng: &mut SmallRng, a: u32, x: u32, y: u32, c: u32) -> u32 {
    (((rng.gen_range(0..=a) | rng.gen_range(x..=y)) + c) % (y - x + 1)) + x
}

/// `count` inputs of the paper's mix for the specification's sizes.
pub fn generate_inputs(seed: u64, count: usize, warehouses: u32) -> Vec<KernelInput> {
    generate_inputs_for(seed, count, Scale::spec(warehouses))
}

/// `count` inputs of the paper's mix for a database of `scale` (the first `count` of
/// [`InputGenerator::new`]`(seed, scale)`).
pub fn generate_inputs_for(seed: u64, count: usize, scale: Scale) -> Vec<KernelInput> {
    InputGenerator::new(seed, scale).take(count).collect()
}

/// The paper's mix for a database of `scale`, one input at a time (an endless iterator): each
/// picks a home warehouse uniformly, then New-Order or Payment with probability ½. The same
/// seed gives the same sequence.
pub struct InputGenerator {
    rng: SmallRng,
    scale: Scale,
    /// Inputs drawn so far (dates advance by one second per input).
    drawn: i64,
}

impl InputGenerator {
    pub fn new(seed: u64, scale: Scale) -> InputGenerator {
        InputGenerator {
            rng: SmallRng::seed_from_u64(seed),
            scale,
            drawn: 0,
        }
    }

    /// The next input.
    pub fn draw(&mut self) -> KernelInput {
        let (scale, rng) = (self.scale, &mut self.rng);
        let customers = scale.customers_per_district.max(1);
        let items = scale.items.max(1);
        let w_id = rng.gen_range(1..=scale.warehouses.max(1));
        let d_id = rng.gen_range(1..=DISTRICTS_PER_WAREHOUSE);
        let c_id = nurand(rng, 1023, 1, customers, C_FOR_C_ID);
        let date = FIRST_DATE + self.drawn;
        self.drawn += 1;
        if rng.gen_bool(0.5) {
            let mut lines = [LineInput::default(); MAX_LINES];
            for line in &mut lines[..PAPER_LINES] {
                *line = LineInput {
                    i_id: nurand(rng, 8191, 1, items, C_FOR_I_ID),
                    supply_w_id: w_id,
                    quantity: rng.gen_range(1..=10),
                };
            }
            KernelInput::NewOrder(NewOrderInput {
                w_id,
                d_id,
                c_id,
                lines,
                line_count: PAPER_LINES as u8,
                entry_d: date,
            })
        } else {
            KernelInput::Payment(PaymentInput {
                w_id,
                d_id,
                c_w_id: w_id,
                c_d_id: d_id,
                c_id,
                h_amount: rng.gen_range(100..=500_000) as f64 / 100.0,
                h_date: date,
            })
        }
    }
}

impl Iterator for InputGenerator {
    type Item = KernelInput;

    fn next(&mut self) -> Option<KernelInput> {
        Some(self.draw())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_is_half_new_order_with_ten_local_lines() {
        let scale = Scale::spec(3);
        let inputs = generate_inputs(7, 20_000, 3);
        assert_eq!(
            inputs,
            generate_inputs(7, 20_000, 3),
            "deterministic from the seed"
        );
        let mut new_orders = 0;
        for input in &inputs {
            match input {
                KernelInput::NewOrder(no) => {
                    new_orders += 1;
                    assert_eq!(no.lines().len(), 10);
                    for l in no.lines() {
                        assert_eq!(l.supply_w_id, no.w_id);
                        assert!((1..=scale.items).contains(&l.i_id));
                        assert!((1..=10).contains(&l.quantity));
                    }
                    assert!((1..=3000).contains(&no.c_id));
                }
                KernelInput::Payment(p) => {
                    assert_eq!((p.c_w_id, p.c_d_id), (p.w_id, p.d_id));
                    assert!((1.0..=5000.0).contains(&p.h_amount));
                    assert!((1..=3000).contains(&p.c_id));
                }
            }
        }
        assert!((9_700..=10_300).contains(&new_orders), "{new_orders}");
    }
}
