//! The page cleaners ([`crate::DbConfig::page_cleaners`]): threads that write back the dirty
//! pages the buffer pool's clock is about to take, so that a transaction whose miss needs a
//! frame finds a clean one and reads at once, instead of first writing the victim (and
//! forcing the log up to its LSN) while it waits.
//!
//! ```text
//!   frames:  ... [ swept since the last round ] hand ──[ cleaned ahead ]──[ to clean ] ...
//!                 └ `moved`: the clock's pace ─┘       └──────── lead = 2 × pace ────────┘
//! ```
//!
//! Every [`CLEANER_INTERVAL`] a round reads the clock hand. The frames it swept since the last
//! round are the pool's pace of replacement; the cleaner keeps a lead of twice that pace (a
//! running mean, at least [`MIN_LEAD`] frames, at most a quarter of the pool) cleaned ahead
//! of the hand, and writes the dirty frames between what it cleaned before and the new lead
//! ([`storage::buffer::BufferPool::clean_frames`]: those the clock would take as they are —
//! unpinned, unlatched, not referenced since it last passed). A round that had to clean more
//! than half its lead fell behind: the next one starts at once. (PostgreSQL's background
//! writer paces itself the same way, by recent allocations times a multiplier of 2.)
//!
//! A page write is synchronous, so one cleaner cleans at most one page per device latency.
//! With several, each paces itself alike and writes the frames of the range whose index is
//! its own number modulo their count: their writes are on the device at once (InnoDB runs
//! several page cleaners for the same reason).
//!
//! Like the checkpointer it runs below the workers' priority and holds the database only
//! during a round. The first write that fails stops it; [`crate::Database::close`] returns
//! that error (nothing is lost: the page stays dirty, and the miss that takes it writes it
//! or fails the same way).

use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::api::TxError;
use crate::db::Database;

/// The pause between rounds that kept up.
pub const CLEANER_INTERVAL: Duration = Duration::from_millis(5);

/// The least lead the cleaner keeps ahead of the hand, in frames.
pub const MIN_LEAD: usize = 32;

#[derive(Default)]
struct State {
    stop: bool,
    /// Rounds completed and pages written (for tests and reports).
    rounds: u64,
    written: u64,
}

/// What the database and its cleaner threads share.
#[derive(Default)]
pub(crate) struct Cleaner {
    state: Mutex<State>,
    wake: Condvar,
    /// The first error a round met; the thread that met it stopped there.
    failed: Mutex<Option<TxError>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// Where the cleaner stands against the clock hand, from round to round.
pub(crate) struct Pace {
    frames: usize,
    /// The hand at the last round.
    hand: usize,
    /// Frames from the hand on that the cleaner has already looked at.
    ahead: usize,
    /// Frames the hand sweeps a round, a running mean (×16 for precision).
    pace16: usize,
}

/// A round's orders: clean `count` frames from `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Round {
    pub start: usize,
    pub count: usize,
    /// The round fell behind the hand: start the next one at once.
    pub behind: bool,
}

impl Pace {
    pub(crate) fn new(frames: usize, hand: usize) -> Pace {
        Pace {
            frames,
            hand,
            ahead: 0,
            pace16: 0,
        }
    }

    /// The next round, given where the hand is now.
    pub(crate) fn round(&mut self, hand: usize) -> Round {
        let n = self.frames.max(1);
        let moved = (hand + n - self.hand % n) % n;
        self.hand = hand;
        self.pace16 = self.pace16 - self.pace16 / 4 + moved * 16 / 4;
        let lead = (2 * self.pace16 / 16).clamp(MIN_LEAD.min(n), (n / 4).max(MIN_LEAD.min(n)));
        let ahead = self.ahead.saturating_sub(moved);
        let count = lead.saturating_sub(ahead);
        self.ahead = ahead + count;
        Round {
            start: (hand + ahead) % n,
            count,
            behind: count * 2 > lead,
        }
    }
}

impl Cleaner {
    /// Starts `count` cleaner threads for `db` (which has a pool).
    pub(crate) fn start(db: &Arc<Database>, count: usize) -> std::io::Result<()> {
        for k in 0..count {
            let weak: Weak<Database> = Arc::downgrade(db);
            let shared = Arc::clone(&db.cleaner);
            let handle = std::thread::Builder::new()
                .name(format!("glass-cleaner-{k}"))
                .spawn(move || shared.run(&weak, (k, count)))?;
            db.cleaner.threads.lock().push(handle);
        }
        Ok(())
    }

    /// One cleaner's loop: its rounds write the frames `share` picks ([`Pace`] per thread).
    fn run(&self, db: &Weak<Database>, share: (usize, usize)) {
        crate::checkpointer::lower_priority();
        let mut pace: Option<Pace> = None;
        let mut behind = false;
        loop {
            {
                let mut state = self.state.lock();
                if !behind && !state.stop {
                    self.wake.wait_for(&mut state, CLEANER_INTERVAL);
                }
                if state.stop {
                    return;
                }
            }
            let Some(db) = db.upgrade() else {
                return;
            };
            let Some(pool) = db.pool() else {
                return;
            };
            let hand = pool.clock_hand();
            let pace = pace.get_or_insert_with(|| Pace::new(pool.frames(), hand));
            let round = pace.round(hand);
            behind = round.behind;
            match pool.clean_frames(round.start, round.count, share) {
                Ok(written) => {
                    let mut state = self.state.lock();
                    state.rounds += 1;
                    state.written += written as u64;
                }
                Err(e) => {
                    self.failed.lock().get_or_insert(TxError::Storage(e));
                    return;
                }
            }
        }
    }

    /// Rounds completed and pages written so far.
    pub(crate) fn progress(&self) -> (u64, u64) {
        let state = self.state.lock();
        (state.rounds, state.written)
    }

    /// The error that stopped the thread, if any.
    pub(crate) fn take_error(&self) -> Option<TxError> {
        self.failed.lock().take()
    }

    /// Stops the threads after their rounds, and waits for them.
    pub(crate) fn stop(&self) {
        self.signal_stop();
        let handles = std::mem::take(&mut *self.threads.lock());
        for handle in handles {
            crate::checkpointer::join_unless_current(handle);
        }
    }

    /// Tells the threads to end without waiting for them (the database is being dropped).
    pub(crate) fn signal_stop(&self) {
        self.state.lock().stop = true;
        self.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cleaner_keeps_twice_the_hands_pace_ahead_and_cleans_only_the_new_part() {
        let mut pace = Pace::new(10_000, 0);
        // A still hand: the least lead, once.
        assert_eq!(
            pace.round(0),
            Round {
                start: 0,
                count: MIN_LEAD,
                behind: true
            }
        );
        assert_eq!(pace.round(0).count, 0);
        // The hand sweeps 400 frames a round: the lead grows towards 800 as the mean learns
        // it, and each round starts where the last one's cleaning ended.
        let mut hand = 0;
        let mut cleaned_to = MIN_LEAD;
        for _ in 0..30 {
            hand += 400;
            let round = pace.round(hand % 10_000);
            if round.count > 0 {
                assert_eq!(round.start, cleaned_to.max(hand) % 10_000);
                cleaned_to = cleaned_to.max(hand) + round.count;
            }
        }
        let lead = cleaned_to - hand;
        assert!((760..=800).contains(&lead), "lead {lead}");
        // Steady: a round cleans what the hand swept, under half its lead.
        hand += 400;
        let round = pace.round(hand % 10_000);
        assert!(
            !round.behind && round.count >= 380 && round.count <= 420,
            "{round:?}"
        );
    }

    #[test]
    fn the_lead_stays_within_a_quarter_of_the_pool() {
        let mut pace = Pace::new(1_000, 0);
        let mut hand = 0;
        for _ in 0..20 {
            hand += 900;
            let round = pace.round(hand % 1_000);
            assert!(round.count <= 250, "{round:?}");
        }
        // A pool smaller than the least lead: at most all of it.
        let mut tiny = Pace::new(8, 0);
        assert_eq!(tiny.round(0).count, 8);
    }
}
