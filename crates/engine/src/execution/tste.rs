//! TSTE: every transaction runs a fetch stage first — no locks, no writes, every page it
//! touches read in and held pinned — then the operate stage, the conventional transaction,
//! which then finds its pages in memory unless they changed between the stages (a
//! mis-prefetch). The pins are released when the operate stage commits or aborts.

use super::{Body, Executor, Holding, TxnReport};
use crate::api::TxResult;
use crate::db::Database;

pub(super) fn run(
    ex: &Executor,
    db: &Database,
    body: &mut Body<'_>,
    report: &mut TxnReport,
) -> TxResult<()> {
    let holding = Holding::start(db);
    super::fetch(ex, db, body, report);
    let result = super::operate(ex, db, body, report);
    report.pinned_pages = holding.release();
    result
}
