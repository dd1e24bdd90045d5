//! The kernel's transactions and population, checked against the TPC-C rules directly.

use kernel::{
    generate_inputs_for, FixedStr, Kernel, KernelError, KernelInput, LineInput, NewOrderInput,
    PaymentInput, Scale, MAX_LINES,
};

const SCALE: Scale = Scale {
    warehouses: 2,
    items: 1_000,
    customers_per_district: 30,
};

fn kernel() -> Kernel {
    Kernel::populate(SCALE, 42).unwrap()
}

fn order(w_id: u32, d_id: u32, c_id: u32, lines: &[(u32, u32, u32)]) -> NewOrderInput {
    let mut input = NewOrderInput {
        w_id,
        d_id,
        c_id,
        lines: [LineInput::default(); MAX_LINES],
        line_count: lines.len() as u8,
        entry_d: 1_000,
    };
    for (slot, &(i_id, supply_w_id, quantity)) in input.lines.iter_mut().zip(lines) {
        *slot = LineInput {
            i_id,
            supply_w_id,
            quantity,
        };
    }
    input
}

fn payment(w_id: u32, d_id: u32, c_id: u32, h_amount: f64) -> PaymentInput {
    PaymentInput {
        w_id,
        d_id,
        c_w_id: w_id,
        c_d_id: d_id,
        c_id,
        h_amount,
        h_date: 2_000,
    }
}

#[test]
fn population_has_the_specified_cardinalities_and_is_deterministic() {
    let k = kernel();
    k.check_invariants().unwrap();
    assert_eq!(k, Kernel::populate(SCALE, 42).unwrap());
    assert_ne!(k, Kernel::populate(SCALE, 43).unwrap());
    let c = SCALE.customers_per_district;
    for w in 1..=2 {
        assert_eq!(k.warehouse(w).unwrap().ytd, 300_000.0);
        for d in 1..=10 {
            let district = k.district(w, d).unwrap();
            assert_eq!(district.next_o_id, c + 1);
            assert_eq!(district.ytd, 30_000.0);
            assert!((0.0..=0.2).contains(&district.tax));
            let rows = k.district_rows(w, d).unwrap();
            assert_eq!(rows.orders.len(), c as usize);
            assert_eq!(rows.history.len(), c as usize);
            assert_eq!(
                rows.new_orders,
                (c - 8..=c).collect::<Vec<_>>(),
                "last 30% undelivered"
            );
            let mut owners: Vec<u32> = rows.orders.iter().map(|o| o.c_id).collect();
            owners.sort_unstable();
            assert_eq!(
                owners,
                (1..=c).collect::<Vec<_>>(),
                "o_c_id is a permutation"
            );
            for o in &rows.orders {
                assert!((5..=15).contains(&o.ol_cnt));
            }
            let lines = rows.order_lines.len();
            assert!((5 * c as usize..=15 * c as usize).contains(&lines));
        }
        assert!(k.stock(w, SCALE.items).is_some());
        assert!(k.stock(w, SCALE.items + 1).is_none());
    }
    assert!(k.warehouse(3).is_none());
    let bc = (1..=c)
        .filter(|&c_id| k.customer(1, 1, c_id).unwrap().credit.as_bytes() == b"BC")
        .count();
    assert!(bc < c as usize, "most customers have good credit");
    assert_eq!(k.customer(1, 1, 1).unwrap().last.as_bytes(), b"BARBARBAR");
    assert_eq!(
        k.customer(1, 1, 30).unwrap().last.as_bytes(),
        b"BARABLEEING"
    );
    let originals = (1..=SCALE.items)
        .filter(|&i| kernel::original::contains_original(k.item(i).unwrap().data.as_bytes()))
        .count();
    assert!(
        (50..=150).contains(&originals),
        "about 10% ORIGINAL: {originals}"
    );
}

#[test]
fn new_order_advances_the_order_id_and_appends_order_new_order_and_lines() {
    let mut k = kernel();
    let lines = [(1, 1, 3), (2, 1, 4), (3, 1, 5)];
    let first = k.new_order(&order(1, 4, 7, &lines)).unwrap();
    let second = k.new_order(&order(1, 4, 8, &lines)).unwrap();
    assert_eq!(first.o_id, 31);
    assert_eq!(second.o_id, 32);
    assert_eq!(k.district(1, 4).unwrap().next_o_id, 33);
    assert_eq!(
        k.district(1, 5).unwrap().next_o_id,
        31,
        "other districts untouched"
    );
    let rows = k.district_rows(1, 4).unwrap();
    let o = rows.order(32).unwrap();
    assert_eq!(
        (o.c_id, o.ol_cnt, o.all_local, o.carrier_id),
        (8, 3, true, None)
    );
    assert_eq!(rows.new_orders.last(), Some(&32));
    let line = rows.order_line(32, 2).unwrap();
    assert_eq!((line.i_id, line.supply_w_id, line.quantity), (2, 1, 4));
    assert_eq!(
        line.dist_info,
        k.stock(1, 2).unwrap().dist[3],
        "s_dist_04 of district 4"
    );
    assert!(rows.order_line(32, 4).is_none());
    assert!(rows.order(33).is_none());
    k.check_invariants().unwrap();
}

#[test]
fn stock_follows_the_quantity_rule_and_counts_remote_orders() {
    let mut k = kernel();
    let before = *k.stock(1, 10).unwrap();
    // Order enough to cross the threshold: each time, the rule says subtract, and add 91
    // when fewer than 10 would be left.
    let mut expected = before.quantity;
    for n in 0..30 {
        let out = k.new_order(&order(1, 1, 1, &[(10, 1, 9)])).unwrap();
        expected = if expected >= 9 + 10 {
            expected - 9
        } else {
            expected - 9 + 91
        };
        assert_eq!(out.lines[0].s_quantity, expected, "order {n}");
        assert!((10..=100).contains(&expected));
    }
    let after = *k.stock(1, 10).unwrap();
    assert_eq!(after.quantity, expected);
    assert_eq!(after.ytd, before.ytd + 270);
    assert_eq!(after.order_cnt, before.order_cnt + 30);
    assert_eq!(after.remote_cnt, before.remote_cnt);
    // Supplied by warehouse 2 for warehouse 1: remote.
    let out = k
        .new_order(&order(1, 1, 1, &[(10, 2, 1), (11, 1, 1)]))
        .unwrap();
    assert_eq!(k.stock(2, 10).unwrap().remote_cnt, 1);
    assert_eq!(k.stock(1, 11).unwrap().remote_cnt, 0);
    let o = k.district_rows(1, 1).unwrap().order(out.o_id).unwrap();
    assert!(!o.all_local);
}

#[test]
fn total_is_the_taxed_discounted_sum_of_line_amounts() {
    let mut k = kernel();
    let lines = [(5, 1, 2), (6, 1, 7), (7, 1, 10)];
    let out = k.new_order(&order(1, 2, 3, &lines)).unwrap();
    let c = k.customer(1, 2, 3).unwrap();
    let (w_tax, d_tax) = (k.warehouse(1).unwrap().tax, k.district(1, 2).unwrap().tax);
    let mut sum = 0.0;
    for (n, &(i_id, _, q)) in lines.iter().enumerate() {
        let item = k.item(i_id).unwrap();
        let amount = (f64::from(q) * item.price * 100.0).round() / 100.0;
        assert_eq!(out.lines[n].ol_amount, amount);
        assert_eq!(out.lines[n].i_price, item.price);
        assert_eq!(out.lines[n].i_name, item.name);
        sum += amount;
    }
    let total = sum * (1.0 - c.discount) * (1.0 + w_tax + d_tax);
    assert_eq!(out.total_amount, total);
    assert!(out.total_amount > 0.0);
    assert_eq!(
        (out.c_discount, out.c_last, out.c_credit),
        (c.discount, c.last, c.credit)
    );
}

#[test]
fn brand_generic_needs_original_in_both_item_and_stock() {
    let mut k = kernel();
    let original = |k: &Kernel, i: u32| {
        (
            kernel::original::contains_original(k.item(i).unwrap().data.as_bytes()),
            kernel::original::contains_original(k.stock(1, i).unwrap().data.as_bytes()),
        )
    };
    let mut seen = [false; 2];
    for i in 1..=SCALE.items {
        let (in_item, in_stock) = original(&k, i);
        let out = k.new_order(&order(1, 1, 1, &[(i, 1, 1)])).unwrap();
        let want = if in_item && in_stock { b'B' } else { b'G' };
        assert_eq!(out.lines[0].brand_generic, want, "item {i}");
        seen[usize::from(want == b'B')] = true;
    }
    assert_eq!(seen, [true, true], "both brands occur in 1000 items");
}

#[test]
fn payment_moves_money_and_appends_history() {
    let mut k = kernel();
    let (w0, d0) = (k.warehouse(2).unwrap().ytd, k.district(2, 9).unwrap().ytd);
    let c0 = *k.customer(2, 9, 17).unwrap();
    let out = k.payment(&payment(2, 9, 17, 123.45)).unwrap();
    assert_eq!(k.warehouse(2).unwrap().ytd, w0 + 123.45);
    assert_eq!(k.district(2, 9).unwrap().ytd, d0 + 123.45);
    assert_eq!(k.district(2, 9).unwrap().next_h_id, 32);
    let c = k.customer(2, 9, 17).unwrap();
    assert_eq!(c.balance, c0.balance - 123.45);
    assert_eq!(out.c_balance, c.balance);
    assert_eq!(c.ytd_payment, c0.ytd_payment + 123.45);
    assert_eq!(c.payment_cnt, c0.payment_cnt + 1);
    let h = k
        .district_rows(2, 9)
        .unwrap()
        .history
        .last()
        .copied()
        .unwrap();
    assert_eq!(
        (h.c_id, h.c_d_id, h.c_w_id, h.amount, h.h_id, h.date),
        (17, 9, 2, 123.45, 31, 2_000)
    );
    let mut h_data = k.warehouse(2).unwrap().name.as_bytes().to_vec();
    h_data.extend_from_slice(b"    ");
    h_data.extend_from_slice(k.district(2, 9).unwrap().name.as_bytes());
    assert_eq!(h.data.as_bytes(), &h_data[..]);
}

#[test]
fn payment_prepends_to_c_data_only_for_bad_credit() {
    let mut k = kernel();
    let bc = (1..=30).find(|&c| k.customer(1, 3, c).unwrap().credit.as_bytes() == b"BC");
    let gc = (1..=30).find(|&c| k.customer(1, 3, c).unwrap().credit.as_bytes() == b"GC");
    let (bc, gc) = (bc.expect("a BC customer"), gc.expect("a GC customer"));
    let old_gc = k.customer(1, 3, gc).unwrap().data;
    k.payment(&payment(1, 3, gc, 5.5)).unwrap();
    assert_eq!(k.customer(1, 3, gc).unwrap().data, old_gc);
    let old = k.customer(1, 3, bc).unwrap().data.to_string_lossy();
    k.payment(&payment(1, 3, bc, 1234.5)).unwrap();
    let mut want = format!("{bc} 3 1 3 1 1234.50 | {old}");
    want.truncate(500);
    assert_eq!(k.customer(1, 3, bc).unwrap().data.to_string_lossy(), want);
    // Repeated payments keep c_data at 500 characters.
    for _ in 0..40 {
        k.payment(&payment(1, 3, bc, 0.01)).unwrap();
    }
    let data = k.customer(1, 3, bc).unwrap().data;
    assert_eq!(data.len(), 500);
    assert!(data
        .to_string_lossy()
        .starts_with(&format!("{bc} 3 1 3 1 0.01 | ")));
    k.check_invariants().unwrap();
}

#[test]
fn bad_input_aborts_before_any_write() {
    let mut k = kernel();
    let before = k.clone();
    let unused = k.new_order(&order(1, 1, 1, &[(1, 1, 1), (SCALE.items + 1, 1, 1)]));
    assert_eq!(
        unused.unwrap_err(),
        KernelError::UnusedItem(SCALE.items + 1)
    );
    assert!(
        k.new_order(&order(1, 1, 1, &[(1, 3, 1)])).is_err(),
        "no warehouse 3"
    );
    assert!(
        k.new_order(&order(1, 11, 1, &[(1, 1, 1)])).is_err(),
        "no district 11"
    );
    assert!(
        k.new_order(&order(1, 1, 31, &[(1, 1, 1)])).is_err(),
        "no customer 31"
    );
    assert!(k.new_order(&order(1, 1, 1, &[])).is_err(), "no lines");
    assert!(k.payment(&payment(0, 1, 1, 1.0)).is_err());
    assert!(k.payment(&payment(1, 1, 0, 1.0)).is_err());
    assert_eq!(k, before);
}

#[test]
fn run_mix_commits_everything_and_keeps_the_invariants() {
    let mut k = kernel();
    let inputs = generate_inputs_for(5, 2_000, SCALE);
    k.reserve_for(&inputs);
    let capacity: Vec<usize> = (1..=10)
        .map(|d| k.district_rows(1, d).unwrap().order_lines.capacity())
        .collect();
    assert_eq!(k.run_mix(&inputs), 2_000);
    k.check_invariants().unwrap();
    let after: Vec<usize> = (1..=10)
        .map(|d| k.district_rows(1, d).unwrap().order_lines.capacity())
        .collect();
    assert_eq!(capacity, after, "reserve_for made room for every line");
    let new_orders = inputs
        .iter()
        .filter(|i| matches!(i, KernelInput::NewOrder(_)))
        .count();
    let orders: usize = (1..=2)
        .flat_map(|w| (1..=10).map(move |d| (w, d)))
        .map(|(w, d)| k.district_rows(w, d).unwrap().orders.len() - 30)
        .sum();
    assert_eq!(orders, new_orders);
    // The same inputs on the same population give the same database.
    let mut again = kernel();
    again.run_mix(&inputs);
    assert_eq!(again, k);
    let _ = FixedStr::<2>::new("ok").unwrap();
}
