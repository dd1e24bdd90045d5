//! Glass's optimal kernel: rung 11 of the removal ladder.
//!
//! The 2008 paper's TPC-C variant (§4.1, Figure 4) — New-Order with ten items from the home
//! warehouse and Payment by customer id, 50/50 — hand-coded on plain in-memory structures:
//! no engine API, no catalog, buffer pool, locks, latches or log. It does the same useful
//! work as the workloads crate's procedures on the engine and leaves the same logical
//! database (`tests/equivalence.rs` checks this row by row).
//!
//! ```text
//!   Kernel::populate(scale, seed) ─┐
//!   Kernel::from_rows(|table| …)  ─┴─► Kernel ──► new_order(&input) / payment(&input)
//!                                         │        run_mix(&inputs)   (the measured phase)
//!                                         └─────► rows(table)         (compare with the engine)
//! ```
//!
//! Files: `tables` (rows and column order), `fixed` (inline strings), `kernel` (layout and
//! lookups), `new_order`, `payment`, `original` (the brand-generic test), `input` (inputs,
//! outputs, the mix generator), `mix` (the measured phase), `populate` (clause 4.3.3),
//! `rows` (engine rows in and out).

pub mod error;
pub mod fixed;
pub mod input;
pub mod kernel;
pub mod mix;
pub mod new_order;
pub mod original;
pub mod payment;
pub mod populate;
#[cfg(feature = "engine-rows")]
pub mod rows;
pub mod tables;

pub use error::KernelError;
pub use fixed::FixedStr;
pub use input::{
    generate_inputs, generate_inputs_for, InputGenerator, KernelInput, LineInput, LineOutput,
    NewOrderInput, NewOrderOutput, PaymentInput, PaymentOutput, MAX_LINES, PAPER_LINES,
};
pub use kernel::{Kernel, Scale};
pub use tables::{Table, COLUMNS, DISTRICTS_PER_WAREHOUSE};
