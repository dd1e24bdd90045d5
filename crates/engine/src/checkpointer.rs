//! The background checkpointer ([`crate::DbConfig::background_checkpoints`]): a thread that
//! takes the fuzzy checkpoints commits make due, so that no transaction's commit waits for a
//! checkpoint's page writes and page-file sync.
//!
//! ```text
//!   commit ── log past the threshold ──► Database::maybe_checkpoint: claims the next
//!                                        threshold, sets `due`, wakes the thread (no wait)
//!   checkpointer: sleeps on `wake` ─► due ─► upgrades its Weak<Database> ─► checkpoint ─┐
//!        ▲──────────────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! The thread holds the database only while it takes a checkpoint (a `Weak` otherwise), so
//! dropping the last handle ends it; [`crate::Database::close`] stops and joins it before its
//! own sharp checkpoint. A checkpoint that fails keeps its error for the next commit to return,
//! as an in-line checkpoint's error was returned by the commit that took it.

use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::api::TxError;
use crate::db::Database;

/// The checkpointer thread's nice value (the workers run at 0).
#[cfg(target_os = "linux")]
const CHECKPOINTER_NICE: libc::c_int = 10;

#[derive(Default)]
struct State {
    /// A checkpoint is due (set by a commit, cleared by the thread as it starts one).
    due: bool,
    stop: bool,
    /// Checkpoints the thread has completed (for tests and reports).
    taken: u64,
}

/// Waits for a background thread to end, unless it is the calling thread (a thread that
/// drops the last handle on the database stops its own background threads; it ends when it
/// returns to its loop). What the thread returned, a panic included, is dropped.
pub(crate) fn join_unless_current(handle: JoinHandle<()>) {
    if handle.thread().id() != std::thread::current().id() {
        let _ = handle.join();
    }
}

/// Puts the calling thread below the workers: on a machine with no core to spare, a
/// checkpoint's page writes take less than a worker's share of the cores. (Not SCHED_IDLE:
/// starved, a checkpoint held its latch for hundreds of milliseconds while committers that had
/// to wait for it queued behind.)
#[cfg(target_os = "linux")]
pub(crate) fn lower_priority() {
    // SAFETY: setpriority on this thread's own id; a failure leaves the priority as is.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, CHECKPOINTER_NICE);
    }
}

/// Elsewhere (the engine compiled to WebAssembly for the sandboxed procedures, which start no
/// checkpointer) the thread keeps its priority.
#[cfg(not(target_os = "linux"))]
pub(crate) fn lower_priority() {}

/// What the database and its checkpointer thread share.
#[derive(Default)]
pub(crate) struct Checkpointer {
    state: Mutex<State>,
    wake: Condvar,
    /// The first error a background checkpoint met, for the next commit to return.
    failed: Mutex<Option<TxError>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Checkpointer {
    /// Starts the thread for `db`.
    pub(crate) fn start(db: &Arc<Database>) -> std::io::Result<()> {
        let weak: Weak<Database> = Arc::downgrade(db);
        let shared = Arc::clone(&db.checkpointer);
        let handle = std::thread::Builder::new()
            .name("glass-checkpointer".into())
            .spawn(move || shared.run(&weak))?;
        *db.checkpointer.thread.lock() = Some(handle);
        Ok(())
    }

    /// Whether a thread takes the checkpoints.
    pub(crate) fn is_running(&self) -> bool {
        self.thread.lock().is_some()
    }

    fn run(&self, db: &Weak<Database>) {
        lower_priority();
        loop {
            {
                let mut state = self.state.lock();
                while !state.due && !state.stop {
                    self.wake.wait(&mut state);
                }
                if state.stop {
                    return;
                }
                state.due = false;
            }
            let Some(db) = db.upgrade() else {
                return;
            };
            if let Err(e) = db.checkpoint_fuzzy() {
                self.failed.lock().get_or_insert(e);
            }
            self.state.lock().taken += 1;
        }
    }

    /// Asks for a checkpoint; returns at once. Asks made while one runs are one more.
    pub(crate) fn request(&self) {
        self.state.lock().due = true;
        self.wake.notify_one();
    }

    /// The error a background checkpoint met since the last call, if any.
    pub(crate) fn take_error(&self) -> Option<TxError> {
        self.failed.lock().take()
    }

    /// Checkpoints the thread has completed.
    pub(crate) fn taken(&self) -> u64 {
        self.state.lock().taken
    }

    /// Stops the thread after the checkpoint it is taking, and waits for it (unless called on
    /// the thread itself, which then ends when it returns to its loop).
    pub(crate) fn stop(&self) {
        self.state.lock().stop = true;
        self.wake.notify_one();
        let handle = self.thread.lock().take();
        if let Some(handle) = handle {
            join_unless_current(handle);
        }
    }

    /// Tells the thread to end without waiting for it (the database is being dropped).
    pub(crate) fn signal_stop(&self) {
        self.state.lock().stop = true;
        self.wake.notify_one();
    }
}
