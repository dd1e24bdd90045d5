//! An integrity verification's progress: each pass reported in order from its start to its
//! end, every table in turn, and the verification's findings the same as without progress.

mod common;

use std::cell::RefCell;

use engine::integrity::{IntegrityStep, PROGRESS_PAGES_WALKED};
use engine::{Preset, Tx, Value};

/// A step as reported, owned.
#[derive(Clone, Debug, PartialEq)]
enum Seen {
    Pages(u64, u64),
    Structures(String, usize, usize, u64),
    Agreement(String, usize, usize, u64),
}

#[test]
fn verification_reports_every_pass_and_table_from_start_to_end() {
    let db = common::open(Preset::Full, 1);
    const ACCOUNTS: u64 = 20_000;
    common::load_accounts(&db, ACCOUNTS as i64);
    common::index_accounts_by_owner(&db);
    let receipts = db.create_table(common::receipts_schema()).unwrap();
    db.run(|tx| {
        (0..10).try_for_each(|seq| tx.insert(&receipts, &[Value::Int(seq), Value::Int(1)]))
    })
    .unwrap();

    let seen = RefCell::new(Vec::new());
    let report = db.verify_integrity_with_progress(10, &|step| {
        seen.borrow_mut().push(match step {
            IntegrityStep::Pages { done, total } => Seen::Pages(done, total),
            IntegrityStep::Structures {
                table,
                n,
                tables,
                pages,
            } => Seen::Structures(table.to_string(), n, tables, pages),
            IntegrityStep::Agreement {
                table,
                n,
                tables,
                done,
            } => Seen::Agreement(table.to_string(), n, tables, done),
        })
    });
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(
        format!("{report:?}"),
        format!("{:?}", db.verify_integrity(10)),
        "reporting progress changed what was found"
    );
    let seen = seen.into_inner();

    // Pass 1, then pass 2, then pass 3.
    let pass = |s: &Seen| match s {
        Seen::Pages(..) => 1,
        Seen::Structures(..) => 2,
        Seen::Agreement(..) => 3,
    };
    assert!(
        seen.windows(2).all(|w| pass(&w[0]) <= pass(&w[1])),
        "{seen:?}"
    );

    // Pass 1: from no page to every page, never back.
    let pages: Vec<(u64, u64)> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Pages(done, total) => Some((*done, *total)),
            _ => None,
        })
        .collect();
    assert!(report.pages > 1, "{report:?}");
    assert_eq!(pages.first(), Some(&(0, report.pages)));
    assert_eq!(pages.last(), Some(&(report.pages, report.pages)));
    assert!(pages
        .windows(2)
        .all(|w| w[0].0 <= w[1].0 && w[1].1 == report.pages));

    // Pass 2: each table in turn, in one stretch, from no page walked to all of its heap's
    // and B+-trees' pages, never back; together, every page the report counts.
    let structures: Vec<(&str, usize, usize, u64)> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Structures(t, n, tables, pages) => Some((t.as_str(), *n, *tables, *pages)),
            _ => None,
        })
        .collect();
    let mut walked = 0;
    for (n, table) in [(1, "accounts"), (2, "receipts")] {
        let reports: Vec<u64> = structures
            .iter()
            .skip_while(|s| s.0 != table)
            .take_while(|s| s.0 == table)
            .map(|s| {
                assert_eq!((s.1, s.2), (n, 2), "{s:?}");
                s.3
            })
            .collect();
        assert_eq!(
            reports.len(),
            structures.iter().filter(|s| s.0 == table).count(),
            "{table}'s walk reported in more than one stretch: {structures:?}"
        );
        assert_eq!(reports.first(), Some(&0), "{table}: {reports:?}");
        assert!(reports.windows(2).all(|w| w[0] <= w[1]), "{reports:?}");
        walked += reports.last().unwrap();
    }
    assert_eq!(structures.first().map(|s| s.0), Some("accounts"));
    assert_eq!(walked, (report.heap_pages + report.tree_pages) as u64);
    // At its start, every `PROGRESS_PAGES_WALKED` pages and at its end.
    let accounts: Vec<u64> = structures
        .iter()
        .filter(|s| s.0 == "accounts")
        .map(|s| s.3)
        .collect();
    let pages = *accounts.last().unwrap();
    assert!(pages > PROGRESS_PAGES_WALKED, "{pages} pages");
    assert_eq!(
        accounts.len() as u64,
        2 + pages / PROGRESS_PAGES_WALKED,
        "{accounts:?}"
    );

    // Pass 3: each table from nothing compared to its records and every index's entries.
    for (n, table, compared) in [(1, "accounts", 3 * ACCOUNTS), (2, "receipts", 2 * 10)] {
        let done: Vec<u64> = seen
            .iter()
            .filter_map(|s| match s {
                Seen::Agreement(t, i, 2, done) if t == table && *i == n => Some(*done),
                _ => None,
            })
            .collect();
        assert_eq!(done.first(), Some(&0), "{table}: {done:?}");
        assert_eq!(done.last(), Some(&compared), "{table}: {done:?}");
        assert!(done.windows(2).all(|w| w[0] <= w[1]), "{table}: {done:?}");
    }
    let accounts_reports = seen
        .iter()
        .filter(|s| matches!(s, Seen::Agreement(t, ..) if t == "accounts"))
        .count();
    assert!(
        accounts_reports > 3,
        "60,000 comparisons reported {accounts_reports} times"
    );
}

#[test]
fn steps_read_as_lines_for_a_user() {
    let pages = IntegrityStep::Pages {
        done: 409_600,
        total: 817_969,
    };
    assert_eq!(pages.to_string(), "verifying pages: 409600 of 817969 (50%)");
    let structures = IntegrityStep::Structures {
        table: "stock",
        n: 9,
        tables: 9,
        pages: 8192,
    };
    assert_eq!(
        structures.to_string(),
        "verifying heaps and B+-trees: table stock (9 of 9), 8192 pages walked"
    );
    let agreement = IntegrityStep::Agreement {
        table: "order_line",
        n: 8,
        tables: 9,
        done: 4096,
    };
    assert_eq!(
        agreement.to_string(),
        "verifying indexes against records: table order_line (8 of 9), 4096 compared"
    );
}
