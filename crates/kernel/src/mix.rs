//! The measured phase: a slice of prepared inputs run back to back.
//!
//! The ladder runs [`Kernel::run_mix`] under callgrind with
//! `--toggle-collect='*Kernel*run_mix*'`, so only the transactions are counted: inputs are
//! generated, and vectors reserved ([`Kernel::reserve_for`]), before it is called.

use std::hint::black_box;

use crate::input::KernelInput;
use crate::kernel::Kernel;

impl Kernel {
    /// Runs every input in order; returns how many committed. Each output is passed through
    /// `black_box`, so the work that produces it cannot be optimised away.
    #[inline(never)]
    pub fn run_mix(&mut self, inputs: &[KernelInput]) -> u64 {
        let mut committed = 0u64;
        for input in inputs {
            let ok = match input {
                KernelInput::NewOrder(i) => black_box(self.new_order(i)).is_ok(),
                KernelInput::Payment(i) => black_box(self.payment(i)).is_ok(),
            };
            committed += u64::from(ok);
        }
        committed
    }

    /// Reserves exactly the room `inputs` will take in each district's vectors, so the
    /// measured phase never grows (and copies) one.
    pub fn reserve_for(&mut self, inputs: &[KernelInput]) {
        let mut wanted = vec![(0usize, 0usize, 0usize); self.district_rows.len()];
        for input in inputs {
            match input {
                KernelInput::NewOrder(i) => {
                    if let Ok(at) = self.district_at(i.w_id, i.d_id) {
                        wanted[at].0 += 1;
                        wanted[at].1 += i.line_count as usize;
                    }
                }
                KernelInput::Payment(i) => {
                    if let Ok(at) = self.district_at(i.w_id, i.d_id) {
                        wanted[at].2 += 1;
                    }
                }
            }
        }
        for (rows, (orders, lines, payments)) in self.district_rows.iter_mut().zip(wanted) {
            rows.orders.reserve(orders);
            rows.order_lines.reserve(lines);
            rows.new_orders.reserve(orders);
            rows.history.reserve(payments);
        }
    }
}
