//! The embedded executor: transactions run in-process against a [`Database`].

use std::sync::Arc;

use engine::db::Database;
use engine::TxResult;
use workloads::Terminal;

use crate::driver::{Attempt, Executor};

/// Runs each attempt in a transaction of an in-process [`Database`].
pub struct EmbeddedExecutor {
    pub db: Arc<Database>,
}

impl Executor for EmbeddedExecutor {
    fn execute(&self, _attempt: Attempt, terminal: &mut dyn Terminal) -> TxResult<()> {
        let mut txn = self.db.begin()?;
        match terminal.run(&mut txn) {
            Ok(()) => txn.commit(),
            Err(e) => {
                // The attempt already failed; an abort error would only hide its cause.
                let _ = txn.abort();
                Err(e)
            }
        }
    }
}
