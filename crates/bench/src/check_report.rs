//! `glass check --json FILE`: what a check found, as one JSON object, for scripts, and for the
//! crash campaign, which reads its numbers here rather than from the lines `glass check`
//! prints for people.
//!
//! | field | meaning |
//! |---|---|
//! | `glass_version`, `timestamp` | the build that checked, and when (UTC, RFC 3339) |
//! | `workload`, `db` | what was checked, and where |
//! | `passed` | integrity clean, every condition holds and no acknowledged durable commit missing: exactly when `glass check` exits 0 |
//! | `error` | present only where no check could be made, and why (the open refused the database: damage in the middle of the log, a format from another build, a missing log segment, …); `recovery`, `integrity`, `conditions` and `acks` are then null |
//! | `recovery` | what the open's recovery did (`engine::recovery::RecoveryReport`'s fields): `{analysed, redone, on_disk, losers, undone, torn_rebuilt, doublewrite_restored, doublewrite_torn, doublewrite_us, analysis_us, redo_us, undo_us, checkpoint_pages, checkpoint_us, heaps_saved, heaps_walked, heap_pages_read, free_space_us}` (`doublewrite_us` to `undo_us`, and `checkpoint_us`: microseconds each part took; `checkpoint_pages`: the pages the checkpoint that ends the open wrote back; then the heaps whose free-space map the open took as the checkpoint saved it and those it rebuilt from their chains, the heap pages read for them and the microseconds); null where the database could not be opened |
//! | `integrity` | `engine::IntegrityReport`'s fields: `{pages, heaps, heap_pages, records, trees, tree_pages, empty_leaves, entries, unreached_pages, unlinked_leaves, pages_only, faults_total, faults: [{place, detail}]}`, the first 1,000 faults listed |
//! | `conditions` | each consistency condition, `{name, description, holds, detail}`; null where integrity faults kept them from being evaluated |
//! | `doublewrite` | `{batches, pages}`: what the check wrote back (what recovery changed) through the database's doublewrite file; null where it has none (a load's database) or no check could be made |
//! | `acks` | with `--ack-log`: `{runs, durable, durable_missing, not_durable, not_durable_missing, missing: [{line, table, key, present}]}`, the first 1,000 missing durable receipts listed; null without an ack log, or where integrity faults kept it from being looked up |

use std::time::SystemTime;

use serde_json::{json, Value};

use crate::report::{rfc3339_utc, ConditionResult};
use crate::run::{CheckOutcome, CHECK_FAULT_LIMIT};

/// The JSON object of a check of `workload` in `db`: `outcome` is what [`crate::run::run_check`]
/// returned, its error where it could make no check.
pub fn check_json(
    workload: &str,
    db: &str,
    outcome: Result<&CheckOutcome, &anyhow::Error>,
) -> Value {
    let mut object = json!({
        "glass_version": env!("CARGO_PKG_VERSION"),
        "timestamp": rfc3339_utc(SystemTime::now()),
        "workload": workload,
        "db": db,
    });
    let fields = object.as_object_mut().expect("an object");
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e) => {
            fields.insert("passed".into(), json!(false));
            fields.insert("error".into(), json!(format!("{e:#}")));
            for key in ["recovery", "integrity", "conditions", "acks", "doublewrite"] {
                fields.insert(key.into(), Value::Null);
            }
            return object;
        }
    };
    fields.insert("passed".into(), json!(outcome.passed()));
    fields.insert("recovery".into(), json!(outcome.recovery));
    fields.insert(
        "doublewrite".into(),
        outcome.doublewrite.map_or(
            Value::Null,
            |d| json!({"batches": d.batches, "pages": d.pages}),
        ),
    );
    fields.insert("integrity".into(), json!(outcome.integrity));
    fields.insert(
        "conditions".into(),
        outcome
            .conditions
            .as_ref()
            .map_or(Value::Null, |conditions| {
                json!(conditions
                    .iter()
                    .map(ConditionResult::from)
                    .collect::<Vec<_>>())
            }),
    );
    fields.insert(
        "acks".into(),
        outcome.acks.as_ref().map_or(Value::Null, |a| {
            json!({
                "runs": a.runs,
                "durable": a.durable,
                "durable_missing": a.durable_missing.len(),
                "not_durable": a.not_durable,
                "not_durable_missing": a.not_durable_missing,
                "missing": a
                    .durable_missing
                    .iter()
                    .take(CHECK_FAULT_LIMIT)
                    .map(|(line, r)| {
                        json!({"line": line, "table": r.table, "key": r.key, "present": r.present})
                    })
                    .collect::<Vec<_>>(),
            })
        }),
    );
    object
}

/// The numbers the crash campaign takes from a check's JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckNumbers {
    /// `passed`.
    pub passed: bool,
    /// Acknowledged durable receipts looked up, and those missing; non-durable ones, and those
    /// missing (allowed: a non-durable run's last unforced commits). `None` without `acks`.
    pub acks: Option<AckNumbers>,
    /// Logged page changes found on disk already.
    pub on_disk: u64,
    /// Transactions rolled back, and the changes undone for them.
    pub rolled_back: u64,
    pub undone: u64,
    /// Torn pages rebuilt from the log, and torn pages put back from the doublewrite file
    /// (not those put back only because the page file's copy was older).
    pub torn_rebuilt: u64,
    pub torn_put_back: u64,
}

/// See [`CheckNumbers::acks`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckNumbers {
    pub durable: u64,
    pub durable_missing: u64,
    pub not_durable: u64,
    pub not_durable_missing: u64,
}

/// [`CheckNumbers`] from the JSON a check wrote; an error names what is missing or malformed.
pub fn check_numbers(text: &str) -> anyhow::Result<CheckNumbers> {
    let value: Value = serde_json::from_str(text)?;
    let number = |object: &Value, key: &str| -> anyhow::Result<u64> {
        object
            .get(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| anyhow::anyhow!("no whole number {key:?} in {object}"))
    };
    let passed = value
        .get("passed")
        .and_then(Value::as_bool)
        .ok_or_else(|| anyhow::anyhow!("no \"passed\" in the check's JSON"))?;
    let mut numbers = CheckNumbers {
        passed,
        ..CheckNumbers::default()
    };
    if let Some(r) = value.get("recovery").filter(|r| !r.is_null()) {
        numbers.on_disk = number(r, "on_disk")?;
        numbers.rolled_back = number(r, "losers")?;
        numbers.undone = number(r, "undone")?;
        numbers.torn_rebuilt = number(r, "torn_rebuilt")?;
        numbers.torn_put_back = number(r, "doublewrite_torn")?;
    }
    if let Some(a) = value.get("acks").filter(|a| !a.is_null()) {
        numbers.acks = Some(AckNumbers {
            durable: number(a, "durable")?,
            durable_missing: number(a, "durable_missing")?,
            not_durable: number(a, "not_durable")?,
            not_durable_missing: number(a, "not_durable_missing")?,
        });
    }
    Ok(numbers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acklog::AckReport;
    use engine::recovery::RecoveryReport;
    use engine::IntegrityReport;
    use workloads::{Condition, Receipt};

    fn outcome() -> CheckOutcome {
        CheckOutcome {
            integrity: IntegrityReport {
                pages: 70,
                heaps: 4,
                ..IntegrityReport::default()
            },
            conditions: Some(vec![Condition {
                name: "TPC-B balances".into(),
                description: "sums agree".into(),
                violation: None,
            }]),
            acks: Some(AckReport {
                runs: 2,
                durable: 500,
                durable_missing: Vec::new(),
                not_durable: 40,
                not_durable_missing: 3,
            }),
            recovery: Some(RecoveryReport {
                analysed: 341_810,
                redone: 150,
                on_disk: 196_156,
                losers: 1,
                undone: 19,
                torn_rebuilt: 2,
                doublewrite_restored: 5,
                doublewrite_torn: 3,
                ..RecoveryReport::default()
            }),
            doublewrite: Some(storage::DoublewriteStats {
                batches: 2,
                pages: 300,
                ..storage::DoublewriteStats::default()
            }),
        }
    }

    #[test]
    fn a_check_reads_back_as_the_numbers_the_campaign_counts() {
        let text = check_json("tpcb", "/d", Ok(&outcome())).to_string();
        assert_eq!(
            check_numbers(&text).unwrap(),
            CheckNumbers {
                passed: true,
                acks: Some(AckNumbers {
                    durable: 500,
                    durable_missing: 0,
                    not_durable: 40,
                    not_durable_missing: 3,
                }),
                on_disk: 196_156,
                rolled_back: 1,
                undone: 19,
                torn_rebuilt: 2,
                // Torn ones only: two of the five were put back for being older.
                torn_put_back: 3,
            }
        );
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["integrity"]["pages"], 70);
        assert_eq!(value["doublewrite"]["pages"], 300);
        assert_eq!(value["conditions"][0]["holds"], true);
        assert!(value.get("error").is_none(), "{value}");
    }

    #[test]
    fn a_lost_commit_fails_the_check_and_is_listed() {
        let mut lost = outcome();
        let acks = lost.acks.as_mut().unwrap();
        acks.durable_missing
            .push((17, Receipt::present("history", &[3, 9])));
        let value = check_json("tpcb", "/d", Ok(&lost));
        assert_eq!(value["passed"], false);
        assert_eq!(value["acks"]["durable_missing"], 1);
        assert_eq!(value["acks"]["missing"][0]["line"], 17);
        assert_eq!(value["acks"]["missing"][0]["key"], json!([3, 9]));
        let numbers = check_numbers(&value.to_string()).unwrap();
        assert!(!numbers.passed);
        assert_eq!(numbers.acks.unwrap().durable_missing, 1);
    }

    #[test]
    fn a_check_that_could_not_be_made_says_why_and_did_not_pass() {
        let e = anyhow::anyhow!("log damaged at LSN 4096");
        let value = check_json("tpcc", "/d", Err(&e));
        assert_eq!(value["passed"], false);
        assert_eq!(value["error"], "log damaged at LSN 4096");
        assert!(value["recovery"].is_null() && value["acks"].is_null());
        assert!(value["doublewrite"].is_null());
        assert_eq!(
            check_numbers(&value.to_string()).unwrap(),
            CheckNumbers::default()
        );
        assert!(check_numbers("{}").is_err());
        assert!(check_numbers("not json").is_err());
    }
}
