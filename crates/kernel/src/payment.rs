//! Payment (clause 2.5.2) on the kernel, for a customer chosen by id (the paper's form; the
//! customer may be at another warehouse or district, as clause 2.5.1.2 allows).
//!
//! ```text
//! check ids                                     ── abort here: nothing written
//! W: w_ytd += amount      D: d_ytd += amount, d_next_h_id++
//! C: c_balance −= amount, c_ytd_payment += amount, c_payment_cnt++
//!    credit "BC": c_data = "c_id c_d_id c_w_id d_id w_id amount | " + c_data, first 500
//! append HISTORY (h_data = w_name + 4 spaces + d_name)
//! ```

use crate::error::KernelError;
use crate::fixed::{Cursor, FixedStr};
use crate::input::{PaymentInput, PaymentOutput};
use crate::kernel::Kernel;
use crate::tables::History;

impl Kernel {
    /// Runs Payment. A bad id ends it with [`KernelError::Invalid`] before any write.
    pub fn payment(&mut self, input: &PaymentInput) -> Result<PaymentOutput, KernelError> {
        let d_at = self.district_at(input.w_id, input.d_id)?;
        let c_at = self.customer_at(self.district_at(input.c_w_id, input.c_d_id)?, input.c_id)?;
        let amount = input.h_amount;

        let warehouse = &mut self.warehouses[input.w_id as usize - 1];
        warehouse.ytd += amount;
        let district = &mut self.districts[d_at];
        district.ytd += amount;
        let h_id = district.next_h_id;
        district.next_h_id += 1;

        let customer = &mut self.customers[c_at];
        customer.balance -= amount;
        customer.ytd_payment += amount;
        customer.payment_cnt += 1;
        if customer.credit.as_bytes() == b"BC" {
            let mut note = Cursor::<96>::new();
            for id in [
                input.c_id,
                input.c_d_id,
                input.c_w_id,
                input.d_id,
                input.w_id,
            ] {
                note.push_int(i64::from(id));
                note.push(b" ");
            }
            note.push_money(amount);
            note.push(b" | ");
            customer.data.prepend_truncating(note.as_bytes());
        }
        let output = PaymentOutput {
            c_id: input.c_id,
            c_balance: customer.balance,
            c_credit: customer.credit,
        };

        let mut h_data = Cursor::<24>::new();
        h_data.push(self.warehouses[input.w_id as usize - 1].name.as_bytes());
        h_data.push(b"    ");
        h_data.push(self.districts[d_at].name.as_bytes());
        self.district_rows[d_at].history.push(History {
            c_id: input.c_id,
            c_d_id: input.c_d_id,
            c_w_id: input.c_w_id,
            date: input.h_date,
            amount,
            data: FixedStr::from_bytes(h_data.as_bytes()).unwrap_or_default(),
            h_id,
        });
        Ok(output)
    }
}
