//! Conventional execution: the body runs once, as a two-phase-locking transaction that reads
//! each page when it first needs it, with whatever locks it holds by then.

use super::{Body, Executor, TxnReport};
use crate::api::TxResult;
use crate::db::Database;

pub(super) fn run(
    ex: &Executor,
    db: &Database,
    body: &mut Body<'_>,
    report: &mut TxnReport,
) -> TxResult<()> {
    super::operate(ex, db, body, report)
}
