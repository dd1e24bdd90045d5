//! New-Order (clause 2.4.2) on the kernel, in the paper's form: all ten items local, no
//! rollback drawn (an unused item number still aborts it, before any write).
//!
//! ```text
//! check every line (item exists, supplier exists)          ── abort here: nothing written
//! W: w_tax   D: d_tax, d_next_o_id++   C: c_discount, c_last, c_credit
//! per line: I: price, name, data   S: quantity rule, ytd, order_cnt, remote_cnt, dist_xx
//!           brand-generic, ol_amount, append ORDER-LINE
//! append ORDER and NEW-ORDER; total = Σ ol_amount · (1 − c_discount) · (1 + w_tax + d_tax)
//! ```
//!
//! Stock: `s_quantity − q` if that leaves at least 10, else `s_quantity − q + 91`.
//! Arithmetic is the same, in the same order, as the workloads crate's procedure, so the two
//! leave bit-identical floats.

use crate::error::KernelError;
use crate::input::{LineOutput, NewOrderInput, NewOrderOutput, MAX_LINES};
use crate::kernel::Kernel;
use crate::original::contains_original;
use crate::tables::{Order, OrderLine};

impl Kernel {
    /// Runs New-Order. An unused item number ends it with [`KernelError::UnusedItem`] and a
    /// bad id with [`KernelError::Invalid`]; either way nothing was written.
    pub fn new_order(&mut self, input: &NewOrderInput) -> Result<NewOrderOutput, KernelError> {
        let count = input.line_count as usize;
        if count == 0 || count > MAX_LINES {
            return Err(KernelError::Invalid(format!("{count} order lines")));
        }
        let lines = &input.lines[..count];
        let d_at = self.district_at(input.w_id, input.d_id)?;
        let c_at = self.customer_at(d_at, input.c_id)?;
        let mut all_local = true;
        for line in lines {
            if line.i_id.wrapping_sub(1) >= self.scale.items {
                return Err(KernelError::UnusedItem(line.i_id));
            }
            if line.supply_w_id.wrapping_sub(1) >= self.scale.warehouses {
                return Err(KernelError::Invalid(format!(
                    "no supplying warehouse {}",
                    line.supply_w_id
                )));
            }
            all_local &= line.supply_w_id == input.w_id;
        }

        let w_tax = self.warehouses[input.w_id as usize - 1].tax;
        let district = &mut self.districts[d_at];
        let d_tax = district.tax;
        let o_id = district.next_o_id;
        district.next_o_id += 1;
        let customer = &self.customers[c_at];
        let mut output = NewOrderOutput {
            o_id,
            c_last: customer.last,
            c_credit: customer.credit,
            c_discount: customer.discount,
            w_tax,
            d_tax,
            lines: [LineOutput::default(); MAX_LINES],
            line_count: count as u8,
            total_amount: 0.0,
        };

        let dist_at = input.d_id as usize - 1;
        let rows = &mut self.district_rows[d_at];
        let first_line = rows.order_lines.len() as u32;
        let mut sum = 0.0;
        for (line, shown) in lines.iter().zip(output.lines.iter_mut()) {
            let item = &self.items[line.i_id as usize - 1];
            let stock_at = (line.supply_w_id as usize - 1) * self.scale.items as usize
                + line.i_id as usize
                - 1;
            let stock = &mut self.stock[stock_at];
            let q = i64::from(line.quantity);
            stock.quantity = if stock.quantity >= q + 10 {
                stock.quantity - q
            } else {
                stock.quantity - q + 91
            };
            stock.ytd += q;
            stock.order_cnt += 1;
            stock.remote_cnt += i64::from(line.supply_w_id != input.w_id);
            let brand =
                contains_original(item.data.as_bytes()) && contains_original(stock.data.as_bytes());
            let amount = (q as f64 * item.price * 100.0).round() / 100.0;
            rows.order_lines.push(OrderLine {
                i_id: line.i_id,
                supply_w_id: line.supply_w_id,
                quantity: q,
                amount,
                delivery_d: None,
                dist_info: stock.dist[dist_at],
            });
            *shown = LineOutput {
                i_name: item.name,
                i_price: item.price,
                s_quantity: stock.quantity,
                brand_generic: if brand { b'B' } else { b'G' },
                ol_amount: amount,
            };
            sum += amount;
        }
        rows.orders.push(Order {
            c_id: input.c_id,
            first_line,
            entry_d: input.entry_d,
            carrier_id: None,
            ol_cnt: count as u8,
            all_local,
        });
        rows.new_orders.push(o_id);
        output.total_amount = sum * (1.0 - output.c_discount) * (1.0 + w_tax + d_tax);
        Ok(output)
    }
}
