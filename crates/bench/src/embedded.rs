//! The embedded executor: transactions run in-process against a [`Database`], conventionally
//! or under one of the engine's two-stage strategies ([`engine::execution`]).

use std::sync::Arc;

use engine::db::Database;
use engine::execution::Executor as Strategies;
use engine::TxResult;
use parking_lot::Mutex;
use storage::buffer::Handoffs;
use workloads::Terminal;

use crate::driver::{Attempt, Executor};

/// Runs each attempt in a transaction of an in-process [`Database`].
pub struct EmbeddedExecutor {
    pub db: Arc<Database>,
    /// The execution strategy and its per-type totals; `None`: begin, run, commit, as
    /// conventional execution does, with no accounting.
    pub strategies: Option<Strategies>,
    /// The pool's page-latch handoffs when the first measured phase began (where the pool
    /// counts them: `BufferPool::track_handoffs`).
    pub handoffs_from: Mutex<Option<Handoffs>>,
}

impl EmbeddedExecutor {
    /// Conventional execution, without accounting.
    pub fn new(db: Arc<Database>) -> EmbeddedExecutor {
        EmbeddedExecutor::with(db, None)
    }

    /// Under `strategies`, if any.
    pub fn with(db: Arc<Database>, strategies: Option<Strategies>) -> EmbeddedExecutor {
        EmbeddedExecutor {
            db,
            strategies,
            handoffs_from: Mutex::new(None),
        }
    }

    /// The handoffs counted since the first measured phase began; `None` where the pool does
    /// not count them.
    pub fn handoffs_measured(&self) -> Option<Handoffs> {
        let now = self.db.pool()?.handoffs()?;
        let from = (*self.handoffs_from.lock()).unwrap_or_default();
        Some(now.since(&from))
    }
}

impl Executor for EmbeddedExecutor {
    fn execute(&self, attempt: Attempt, terminal: &mut dyn Terminal) -> TxResult<()> {
        if let Some(strategies) = &self.strategies {
            let mut body = |tx: &mut dyn engine::Tx| terminal.run(tx);
            return strategies
                .run(&self.db, attempt.txn, attempt.measured, &mut body)
                .map(drop);
        }
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

    fn measuring(&self) {
        let counted = self.db.pool().and_then(|p| p.handoffs());
        let mut from = self.handoffs_from.lock();
        if from.is_none() {
            *from = counted;
        }
    }
}
