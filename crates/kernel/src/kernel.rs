//! The kernel: a TPC-C database held in plain vectors, with every "index" a computed
//! position.
//!
//! ```text
//!   warehouses[w−1]                         items[i−1]
//!   districts[(w−1)·10 + d−1]  ─┐           stock[(w−1)·items + i−1]
//!   customers[district · C + c−1]│
//!   district_rows[district] ◄───┘  orders, order lines, new orders, history (append-only)
//! ```
//!
//! There is no engine underneath: no catalog, buffer pool, locks, latches or log, and a
//! transaction is one function call on `&mut self` (so one thread at a time, by the borrow
//! checker). A transaction validates its whole input before its first write, so an abort
//! leaves nothing to undo.
//!
//! Invariants (checked by [`Kernel::check_invariants`]): the dense vectors have exactly the
//! lengths [`Scale`] gives; every district's `next_o_id` is one past its last order; each
//! [`DistrictRows`] keeps its own invariants.

use crate::error::KernelError;
use crate::tables::{
    Customer, District, DistrictRows, Item, Stock, Warehouse, DISTRICTS_PER_WAREHOUSE,
};

/// The population's dense key spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scale {
    pub warehouses: u32,
    /// Rows of ITEM (100,000 in the specification).
    pub items: u32,
    /// Customers, and initial orders, per district (3,000 in the specification).
    pub customers_per_district: u32,
}

impl Scale {
    /// The specification's sizes for `warehouses` warehouses.
    pub fn spec(warehouses: u32) -> Scale {
        Scale {
            warehouses,
            items: 100_000,
            customers_per_district: 3_000,
        }
    }

    pub fn districts(&self) -> usize {
        self.warehouses as usize * DISTRICTS_PER_WAREHOUSE as usize
    }

    pub fn customers(&self) -> usize {
        self.districts() * self.customers_per_district as usize
    }

    pub fn stock_rows(&self) -> usize {
        self.warehouses as usize * self.items as usize
    }

    /// Orders loaded undelivered per district (the last 30%: 900 of 3000).
    pub fn new_orders_per_district(&self) -> u32 {
        self.customers_per_district * 3 / 10
    }

    pub(crate) fn validate(&self) -> Result<(), KernelError> {
        if self.warehouses == 0 || self.items == 0 || self.customers_per_district == 0 {
            return Err(KernelError::Invalid(format!("empty scale {self:?}")));
        }
        Ok(())
    }
}

/// A TPC-C database on plain in-memory structures.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub(crate) scale: Scale,
    pub(crate) warehouses: Vec<Warehouse>,
    pub(crate) districts: Vec<District>,
    pub(crate) customers: Vec<Customer>,
    pub(crate) items: Vec<Item>,
    pub(crate) stock: Vec<Stock>,
    pub(crate) district_rows: Vec<DistrictRows>,
}

impl Kernel {
    pub fn scale(&self) -> Scale {
        self.scale
    }

    /// Position of district (w, d), checked.
    #[inline]
    pub(crate) fn district_at(&self, w_id: u32, d_id: u32) -> Result<usize, KernelError> {
        if w_id.wrapping_sub(1) >= self.scale.warehouses
            || d_id.wrapping_sub(1) >= DISTRICTS_PER_WAREHOUSE
        {
            return Err(KernelError::Invalid(format!(
                "no district ({w_id}, {d_id})"
            )));
        }
        Ok((w_id as usize - 1) * DISTRICTS_PER_WAREHOUSE as usize + d_id as usize - 1)
    }

    /// Position of customer c of the district at `district`, checked.
    #[inline]
    pub(crate) fn customer_at(&self, district: usize, c_id: u32) -> Result<usize, KernelError> {
        if c_id.wrapping_sub(1) >= self.scale.customers_per_district {
            return Err(KernelError::Invalid(format!("no customer {c_id}")));
        }
        Ok(district * self.scale.customers_per_district as usize + c_id as usize - 1)
    }

    /// Position of the stock row (w, i); callers have checked both ids.
    #[inline]
    pub(crate) fn stock_at(&self, w_id: u32, i_id: u32) -> usize {
        (w_id as usize - 1) * self.scale.items as usize + i_id as usize - 1
    }

    pub fn warehouse(&self, w_id: u32) -> Option<&Warehouse> {
        self.warehouses.get(w_id.checked_sub(1)? as usize)
    }

    pub fn district(&self, w_id: u32, d_id: u32) -> Option<&District> {
        Some(&self.districts[self.district_at(w_id, d_id).ok()?])
    }

    pub fn customer(&self, w_id: u32, d_id: u32, c_id: u32) -> Option<&Customer> {
        let at = self
            .customer_at(self.district_at(w_id, d_id).ok()?, c_id)
            .ok()?;
        Some(&self.customers[at])
    }

    pub fn item(&self, i_id: u32) -> Option<&Item> {
        self.items.get(i_id.checked_sub(1)? as usize)
    }

    pub fn stock(&self, w_id: u32, i_id: u32) -> Option<&Stock> {
        if w_id.wrapping_sub(1) >= self.scale.warehouses || i_id.wrapping_sub(1) >= self.scale.items
        {
            return None;
        }
        Some(&self.stock[self.stock_at(w_id, i_id)])
    }

    /// The orders, order lines, new orders and history of district (w, d).
    pub fn district_rows(&self, w_id: u32, d_id: u32) -> Option<&DistrictRows> {
        Some(&self.district_rows[self.district_at(w_id, d_id).ok()?])
    }

    /// Makes room for `orders` more orders (of `lines_per_order` lines) and `payments` more
    /// history rows in every district, so that the transactions that follow never grow a
    /// vector (growing copies it, and that copy would be counted against the transactions).
    pub fn reserve(&mut self, orders: usize, lines_per_order: usize, payments: usize) {
        for rows in &mut self.district_rows {
            rows.orders.reserve(orders);
            rows.order_lines.reserve(orders * lines_per_order);
            rows.new_orders.reserve(orders);
            rows.history.reserve(payments);
        }
    }

    /// Checks every structural invariant; O(database).
    pub fn check_invariants(&self) -> Result<(), KernelError> {
        let s = self.scale;
        s.validate()?;
        let corrupt = |what: String| Err(KernelError::Corrupt(what));
        if self.warehouses.len() != s.warehouses as usize
            || self.districts.len() != s.districts()
            || self.district_rows.len() != s.districts()
            || self.customers.len() != s.customers()
            || self.items.len() != s.items as usize
            || self.stock.len() != s.stock_rows()
        {
            return corrupt(format!("table sizes do not match {s:?}"));
        }
        for (at, (district, rows)) in self.districts.iter().zip(&self.district_rows).enumerate() {
            let end = rows.first_o_id as u64 + rows.orders.len() as u64;
            if u64::from(district.next_o_id) != end {
                return corrupt(format!(
                    "district {at}: next_o_id {} but orders end at {end}",
                    district.next_o_id
                ));
            }
            let mut next_line = 0u32;
            for (k, order) in rows.orders.iter().enumerate() {
                if order.first_line != next_line {
                    return corrupt(format!("district {at}: order {k} lines not contiguous"));
                }
                next_line += u32::from(order.ol_cnt);
            }
            if next_line as usize != rows.order_lines.len() {
                return corrupt(format!("district {at}: stray order lines"));
            }
            let mut previous = None;
            for &o_id in &rows.new_orders {
                if previous.is_some_and(|p| p >= o_id) || rows.order(o_id).is_none() {
                    return corrupt(format!("district {at}: new order {o_id} out of place"));
                }
                previous = Some(o_id);
            }
        }
        for c in &self.customers {
            c.data.check_invariants()?;
        }
        Ok(())
    }
}
