//! OTSTE: every transaction starts in the operate stage, holding every page it touches
//! pinned, with the buffer pool told to refuse a physical read. If every page is in memory
//! it commits in one stage. On its first miss the pool refuses the read before issuing it
//! (`StorageError::WouldRead`); the transaction then rolls back what it wrote and releases
//! its locks, keeping its pins, and carries on as TSTE: a fetch stage (which re-reads the
//! pages it already holds as hits and reads the rest), then the operate stage.
//!
//! The fetch stage starts the body again from the beginning rather than from the refused
//! access: the body is a closure, not a resumable program, and what it already touched is
//! pinned, so the repeat costs CPU but no I/O.

use storage::buffer::stage;

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
    let (io, fixes, refused) = (
        stage::io(),
        stage::counts().fixes,
        stage::counts().refused_reads,
    );
    stage::refuse_reads(true);
    let first = db.begin().map(|mut txn| {
        stage::set_tag(txn.id());
        let result = body(&mut txn);
        (txn, result)
    });
    stage::refuse_reads(false);
    let (txn, result) = first?;
    report.operate_reads += stage::io().since(&io).reads;
    if stage::counts().refused_reads == refused {
        report.operate_fixes += stage::counts().fixes - fixes;
        if result.is_ok() {
            ex.spin();
        }
        let result = super::finish(txn, result, report);
        stage::set_tag(0);
        report.pinned_pages = holding.release();
        return result;
    }
    // Converted: whatever the body made of the refusal, the attempt is taken back.
    report.converted = true;
    report.lock_wait_ns += txn.lock_wait_ns();
    report.lock_wait_io_ns += txn.lock_wait_io_ns();
    let _ = txn.abort();
    stage::set_tag(0);
    super::fetch(ex, db, body, report);
    let result = super::operate(ex, db, body, report);
    report.pinned_pages = holding.release();
    result
}
