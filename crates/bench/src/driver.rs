//! The embedded closed-loop driver.
//!
//! N worker threads, one [`Terminal`] each, run transactions back to back with no think time:
//!
//! ```text
//!   worker i:  loop {
//!       if phase == Stop or the txn budget is spent: break
//!       ty = terminal.next()                      draw type and input
//!       loop {                                    attempts of one transaction
//!           executor.execute(attempt, terminal)   begin -> run -> commit | abort
//!             Ok            -> record commit;   break
//!             UserAbort     -> record rollback; break
//!             Retry         -> aborts += 1; backoff; again (at most `retry_limit` times)
//!             other error   -> stop every worker, report it
//!       }
//!   }
//!
//!   coordinator:  Warmup --(warm-up elapsed)--> Measure --(duration elapsed | budget spent
//!                                                           | a worker failed
//!                                                           | interrupted)--> Stop
//! ```
//!
//! A transaction is recorded if the phase was `Measure` when it was drawn; transactions drawn
//! during the warm-up run to completion but are not counted. With a transaction budget
//! (`Stop::Txns(n)`) every measured transaction first takes a ticket from a shared counter,
//! so exactly `n` transactions are measured across all workers.
//!
//! The driver knows nothing of the engine: an [`Executor`] performs one attempt (begin, run,
//! commit or abort). [`EmbeddedExecutor`](crate::embedded::EmbeddedExecutor) does so against
//! an in-process [`Database`](engine::db::Database); other
//! executors (a server connection, two-stage execution) plug in at the same seam.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam::utils::CachePadded;

use engine::{TxError, TxResult};
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use workloads::Terminal;

use crate::progress::ProgressLine;
use crate::stats::{Outcome, RunStats};

/// Runs one attempt of a terminal's drawn transaction: begin, `terminal.run`, then commit, or
/// abort if `run` (or the commit) failed. Returns the error that ended the attempt.
pub trait Executor: Sync {
    fn execute(&self, attempt: Attempt, terminal: &mut dyn Terminal) -> TxResult<()>;

    /// Worker `worker` has nothing to run for a while: it waits for its next slot (open
    /// loop), or it is done. An executor that holds something back for the worker's next
    /// request (a client's lazy commit, whose locks others may wait for) sends it now.
    fn idle(&self, worker: usize) {
        let _ = worker;
    }

    /// The measured phase begins (called by the coordinator once a round, as it tells the
    /// workers; at the start where there is no warm-up).
    fn measuring(&self) {}
}

/// Which attempt an executor runs: the worker running it (an executor may keep a connection
/// per worker), the type [`Terminal::next`] drew, and whether it counts (it was drawn in the
/// measured phase; an executor keeping statistics of its own counts only those).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub worker: usize,
    pub txn: usize,
    pub measured: bool,
}

/// Set to end the runs of this process early: `glass bench`, `scale`, `charm` and `latency`
/// set it on SIGINT or SIGTERM.
static INTERRUPT: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// The flag that ends a run early, for a signal handler to set: the measured phase ends where
/// it is ([`DriverOutcome::interrupted`], its figures over the time measured), no further
/// round starts, and a run still warming up ends with [`DriverError::Interrupted`].
pub fn interrupt_flag() -> Arc<AtomicBool> {
    Arc::clone(INTERRUPT.get_or_init(Default::default))
}

/// Whether [`interrupt_flag`] has been set.
pub fn interrupted() -> bool {
    INTERRUPT.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// Whether `e` (with its causes) is a run's warm-up ended by [`interrupt_flag`]
/// ([`DriverError::Interrupted`]): a sweep then stops as it does for a measured phase cut
/// short, rather than failing.
pub fn is_interruption(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|cause| matches!(cause.downcast_ref(), Some(DriverError::Interrupted)))
}

/// When the measured phase ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// After this much wall-clock time.
    Duration(Duration),
    /// After this many completed transactions, across all workers.
    Txns(u64),
}

/// How the driver runs.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    /// Time run before measuring; its transactions are not recorded.
    pub warmup: Duration,
    pub stop: Stop,
    /// Attempts of one transaction aborted with `Retry` before the run fails.
    pub retry_limit: u32,
    /// Seed of the backoff jitter (worker i uses `seed + i`).
    pub seed: u64,
    /// Open loop: transactions start on a schedule of this many a second (all workers
    /// together, evenly spaced from the run's start), each taken by the next free worker,
    /// and a transaction's latency counts from its scheduled start, so time spent waiting
    /// for a free worker is latency too (no coordinated omission). `None`: closed loop, each
    /// worker starting its next transaction when its last one ends.
    pub rate: Option<f64>,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            warmup: Duration::ZERO,
            stop: Stop::Duration(Duration::from_secs(10)),
            retry_limit: 1000,
            seed: 0,
            rate: None,
        }
    }
}

/// Why a run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// A transaction failed with an error that is neither a retry nor a rollback.
    /// Its message leaves the cause to the error chain (`{:#}` prints each cause once).
    #[error("{txn} transaction on terminal {terminal} failed")]
    Txn {
        txn: String,
        terminal: usize,
        #[source]
        source: TxError,
    },
    /// A transaction kept being chosen as a deadlock victim (a livelock, or a lock bug).
    #[error("{txn} transaction on terminal {terminal} was aborted {attempts} times in a row without committing (last: {last})")]
    RetryLimit {
        txn: String,
        terminal: usize,
        attempts: u32,
        last: String,
    },
    /// `Terminal::next` returned a type the workload does not name.
    #[error("terminal {terminal} drew transaction type {ty}, but the workload has only {types}")]
    BadType {
        terminal: usize,
        ty: usize,
        types: usize,
    },
    /// A worker thread panicked (a bug in the workload or the engine).
    #[error("terminal {terminal} panicked: {message}")]
    Panicked { terminal: usize, message: String },
    #[error("a run needs at least one terminal")]
    NoTerminals,
    /// [`interrupt_flag`] was set before the measured phase began.
    #[error("interrupted during the warm-up: nothing was measured")]
    Interrupted,
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct DriverOutcome {
    /// Merged over all workers, indexed like `txn_names`.
    pub stats: RunStats,
    /// Wall-clock length of the measured phase.
    pub elapsed: Duration,
    /// The measured phase was ended early by [`interrupt_flag`].
    pub interrupted: bool,
}

const PHASE_WARMUP: u8 = 0;
const PHASE_MEASURE: u8 = 1;
const PHASE_STOP: u8 = 2;

/// State shared by the coordinator and the workers, laid out so that a transaction writes no
/// cache line another worker reads: every worker reads `phase` and `failed` before each
/// transaction, and they change only when the run does; each worker counts its completed
/// transactions in a line of its own, which the coordinator sums. (One counter for all had
/// every transaction of every worker take that line, and the line with `phase` beside it,
/// from the others: a shared write per transaction outside the engine, where `glass
/// profile`'s shared-write counter does not look.)
struct Shared {
    /// `PHASE_WARMUP` -> `PHASE_MEASURE` -> `PHASE_STOP`, set by the coordinator (and by a
    /// failing worker, straight to `PHASE_STOP`).
    phase: CachePadded<AtomicU8>,
    failed: CachePadded<AtomicBool>,
    /// Tickets handed out for measured transactions (used with `Stop::Txns`, where every
    /// measured transaction takes one: shared by design).
    tickets: CachePadded<AtomicU64>,
    /// Open loop: the next slot of the schedule, and when slot 0 was.
    slots: CachePadded<AtomicU64>,
    started: Instant,
    /// Measured transactions completed so far by each worker (for the progress line),
    /// written only by that worker.
    completed: Box<[CachePadded<AtomicU64>]>,
    /// Workers still running.
    running: AtomicU64,
    /// The first error a worker hit; protects nothing else.
    error: Mutex<Option<DriverError>>,
}

impl Shared {
    /// The state of a run of `workers` workers, measuring from the start if `no_warmup`.
    fn new(workers: usize, no_warmup: bool) -> Shared {
        Shared {
            phase: CachePadded::new(AtomicU8::new(if no_warmup {
                PHASE_MEASURE
            } else {
                PHASE_WARMUP
            })),
            failed: CachePadded::new(AtomicBool::new(false)),
            tickets: CachePadded::new(AtomicU64::new(0)),
            slots: CachePadded::new(AtomicU64::new(0)),
            started: Instant::now(),
            completed: (0..workers)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            running: AtomicU64::new(workers as u64),
            error: Mutex::new(None),
        }
    }

    /// Measured transactions completed so far, all workers together.
    fn completed(&self) -> u64 {
        self.completed
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}

/// Runs `terminals` (one worker thread each) through `executor` and returns the merged
/// statistics of the measured phase. `txn_names` names the types `Terminal::next` returns;
/// `progress` shows elapsed time, completed transactions and throughput while it runs.
pub fn drive(
    terminals: Vec<Box<dyn Terminal>>,
    executor: &dyn Executor,
    txn_names: &[&str],
    config: &DriverConfig,
    progress: &mut ProgressLine,
) -> Result<DriverOutcome, DriverError> {
    if terminals.is_empty() {
        return Err(DriverError::NoTerminals);
    }
    let shared = Shared::new(terminals.len(), config.warmup.is_zero());
    let started = Instant::now();
    let mut measure_start = if config.warmup.is_zero() {
        executor.measuring();
        Some(started)
    } else {
        None
    };

    let mut merged = RunStats::new(txn_names.len());
    let mut cut_short = false;
    let elapsed = std::thread::scope(|scope| {
        let handles: Vec<_> = terminals
            .into_iter()
            .enumerate()
            .map(|(id, terminal)| {
                let shared = &shared;
                scope.spawn(move || {
                    let _finished = WorkerExit(shared);
                    worker(id, terminal, executor, txn_names, config, shared)
                })
            })
            .collect();

        // Coordinator: advance the phases and draw the progress line.
        let mut last_sample = (Instant::now(), 0u64);
        // Throughput over the last half second; `None` until the first such sample.
        let mut tps: Option<f64> = None;
        loop {
            std::thread::sleep(Duration::from_millis(10));
            let now = Instant::now();
            if shared.running.load(Ordering::Acquire) == 0 {
                break;
            }
            if interrupted() && shared.phase.load(Ordering::Acquire) != PHASE_STOP {
                shared.phase.store(PHASE_STOP, Ordering::Release);
                cut_short = true;
            }
            if cut_short {
                // The workers finish their transactions; no phase follows.
                continue;
            }
            match measure_start {
                None => {
                    if now.duration_since(started) >= config.warmup {
                        shared.phase.store(PHASE_MEASURE, Ordering::Release);
                        executor.measuring();
                        measure_start = Some(now);
                        last_sample = (now, 0);
                    } else {
                        let left = config.warmup - now.duration_since(started);
                        progress.update(|| format!("warming up: {:.1} s left", left.as_secs_f64()));
                    }
                }
                Some(begin) => {
                    let done = shared.completed();
                    let since = now.duration_since(last_sample.0);
                    if since >= Duration::from_millis(500) {
                        tps = Some((done - last_sample.1) as f64 / since.as_secs_f64());
                        last_sample = (now, done);
                    }
                    let measured = now.duration_since(begin);
                    if let Stop::Duration(d) = config.stop {
                        if measured >= d {
                            shared.phase.store(PHASE_STOP, Ordering::Release);
                        }
                    }
                    progress.update(|| {
                        let position = match config.stop {
                            Stop::Duration(d) => {
                                format!("{:.1}/{:.0} s", measured.as_secs_f64(), d.as_secs_f64())
                            }
                            Stop::Txns(n) => format!("{done}/{n} txns"),
                        };
                        let rate =
                            tps.unwrap_or_else(|| done as f64 / measured.as_secs_f64().max(1e-3));
                        format!("running: {position}  {done} done  {rate:.0} txn/s")
                    });
                }
            }
        }
        let end = Instant::now();

        for (id, handle) in handles.into_iter().enumerate() {
            match handle.join() {
                Ok(stats) => merged.merge(&stats),
                Err(payload) => {
                    shared.error.lock().get_or_insert(DriverError::Panicked {
                        terminal: id,
                        message: panic_message(&*payload),
                    });
                }
            }
        }
        end.duration_since(measure_start.unwrap_or(end))
    });
    progress.finish();

    if let Some(e) = shared.error.into_inner() {
        return Err(e);
    }
    if cut_short && measure_start.is_none() {
        return Err(DriverError::Interrupted);
    }
    merged.check_invariants();
    Ok(DriverOutcome {
        stats: merged,
        elapsed,
        interrupted: cut_short,
    })
}

/// What a panic said, from its payload (`panic!` with a literal or a formatted message).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// Marks a worker finished when its thread ends, normally or by a panic (in which case it
/// also stops the other workers, so a run with a transaction budget cannot wait forever).
struct WorkerExit<'a>(&'a Shared);

impl Drop for WorkerExit<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.failed.store(true, Ordering::Release);
            self.0.phase.store(PHASE_STOP, Ordering::Release);
        }
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One worker's loop; returns its statistics of the measured phase.
fn worker(
    id: usize,
    mut terminal: Box<dyn Terminal>,
    executor: &dyn Executor,
    txn_names: &[&str],
    config: &DriverConfig,
    shared: &Shared,
) -> RunStats {
    let mut stats = RunStats::new(txn_names.len());
    let mut rng = SmallRng::seed_from_u64(config.seed.wrapping_add(id as u64));
    let fail = |e: DriverError| {
        shared.failed.store(true, Ordering::Release);
        shared.phase.store(PHASE_STOP, Ordering::Release);
        shared.error.lock().get_or_insert(e);
    };
    loop {
        // Open loop: wait for this transaction's slot in the schedule.
        let scheduled = match config.rate {
            Some(rate) => {
                let slot = shared.slots.fetch_add(1, Ordering::Relaxed);
                let at = shared.started + Duration::from_secs_f64(slot as f64 / rate);
                if at > Instant::now() {
                    executor.idle(id);
                }
                if !wait_until(at, shared) {
                    break;
                }
                Some(at)
            }
            None => None,
        };
        let phase = shared.phase.load(Ordering::Acquire);
        if phase == PHASE_STOP || shared.failed.load(Ordering::Acquire) {
            break;
        }
        let measured = phase == PHASE_MEASURE;
        if measured {
            if let Stop::Txns(n) = config.stop {
                if shared.tickets.fetch_add(1, Ordering::AcqRel) >= n {
                    shared.phase.store(PHASE_STOP, Ordering::Release);
                    break;
                }
            }
        }

        let ty = terminal.next();
        if ty >= txn_names.len() {
            fail(DriverError::BadType {
                terminal: id,
                ty,
                types: txn_names.len(),
            });
            break;
        }
        let begin = scheduled.unwrap_or_else(Instant::now);
        let mut attempts = 0u32;
        let outcome = loop {
            match executor.execute(
                Attempt {
                    worker: id,
                    txn: ty,
                    measured,
                },
                terminal.as_mut(),
            ) {
                Ok(()) => break Ok(Outcome::Committed),
                Err(TxError::UserAbort(_)) => break Ok(Outcome::RolledBack),
                Err(TxError::Retry(why)) => {
                    attempts += 1;
                    if measured {
                        stats.by_type[ty].aborts += 1;
                    }
                    if attempts >= config.retry_limit {
                        break Err(DriverError::RetryLimit {
                            txn: txn_names[ty].to_string(),
                            terminal: id,
                            attempts,
                            last: why,
                        });
                    }
                    if shared.failed.load(Ordering::Acquire) {
                        // Another worker failed: the run is over, do not retry.
                        return stats;
                    }
                    backoff(attempts, &mut rng);
                }
                Err(source) => {
                    break Err(DriverError::Txn {
                        txn: txn_names[ty].to_string(),
                        terminal: id,
                        source,
                    })
                }
            }
        };
        match outcome {
            Ok(outcome) => {
                if measured {
                    stats.by_type[ty].record(outcome, begin.elapsed());
                    // This worker's own counter: a load and a store, no locked instruction.
                    let mine = &shared.completed[id];
                    mine.store(mine.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                }
            }
            Err(e) => {
                fail(e);
                break;
            }
        }
    }
    executor.idle(id);
    stats
}

/// Sleeps until `at` (in steps, watching for the run's end); returns whether the run goes on.
fn wait_until(at: Instant, shared: &Shared) -> bool {
    loop {
        if shared.phase.load(Ordering::Acquire) == PHASE_STOP
            || shared.failed.load(Ordering::Acquire)
        {
            return false;
        }
        let now = Instant::now();
        if now >= at {
            return true;
        }
        std::thread::sleep((at - now).min(Duration::from_millis(10)));
    }
}

/// Sleeps before attempt `attempts + 1`: exponential from 10 µs, capped at 10 ms, with
/// jitter so two deadlock victims do not collide again in lockstep.
fn backoff(attempts: u32, rng: &mut SmallRng) {
    std::thread::sleep(backoff_delay(attempts, rng));
}

/// How long to wait before retry `attempts` of a transaction: randomised, doubling from
/// 10 µs up to 10 ms.
pub(crate) fn backoff_delay(attempts: u32, rng: &mut SmallRng) -> Duration {
    let cap_us = (10u64 << attempts.min(10)).min(10_000);
    Duration::from_micros(rng.gen_range(cap_us / 2..=cap_us))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a worker writes at every transaction (its completed count) lies on a cache line
    /// no other worker writes, apart from what every worker reads at every transaction
    /// (`phase`, `failed`); the coordinator's sum sees every worker's count.
    #[test]
    fn no_two_workers_write_one_line_per_transaction() {
        let shared = Shared::new(4, true);
        let line = |p: *const u8| p as usize / 64;
        let counters: Vec<usize> = shared
            .completed
            .iter()
            .map(|c| line((&**c as *const AtomicU64).cast()))
            .collect();
        let read_by_all = [
            line((&*shared.phase as *const AtomicU8).cast()),
            line((&*shared.failed as *const AtomicBool).cast()),
        ];
        for (i, a) in counters.iter().enumerate() {
            assert!(
                !read_by_all.contains(a),
                "worker {i}'s count shares a line with the phase"
            );
            for (j, b) in counters.iter().enumerate().skip(i + 1) {
                assert_ne!(a, b, "workers {i} and {j} count on one line");
            }
        }
        for (i, c) in shared.completed.iter().enumerate() {
            c.store(i as u64 + 1, Ordering::Relaxed);
        }
        assert_eq!(shared.completed(), 1 + 2 + 3 + 4);
    }
    use engine::Tx;
    use std::sync::atomic::AtomicUsize;

    /// Counts attempts: begin, run, and commits only when `run` succeeded.
    #[derive(Default)]
    struct CountingExecutor {
        attempts: AtomicUsize,
        commits: AtomicUsize,
    }

    impl Executor for CountingExecutor {
        fn execute(&self, _attempt: Attempt, terminal: &mut dyn Terminal) -> TxResult<()> {
            self.attempts.fetch_add(1, Ordering::Relaxed);
            // The test terminals only count what they are asked to do: they never call the engine.
            terminal.run(&mut crate::optimal::NoEngine)?;
            self.commits.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    /// Type 0 commits; type 1 asks for a rollback; type 2 fails with `Retry` on its first
    /// attempt and commits on the second; types cycle 0, 1, 2, 0, ...
    struct ScriptedTerminal {
        draws: u64,
        ty: usize,
        attempt: u32,
        /// Fail every attempt of type 2 with this error instead.
        always: Option<fn() -> TxError>,
    }

    impl ScriptedTerminal {
        fn boxed(always: Option<fn() -> TxError>) -> Box<dyn Terminal> {
            Box::new(ScriptedTerminal {
                draws: 0,
                ty: 0,
                attempt: 0,
                always,
            })
        }
    }

    impl Terminal for ScriptedTerminal {
        fn next(&mut self) -> usize {
            self.ty = (self.draws % 3) as usize;
            self.draws += 1;
            self.attempt = 0;
            self.ty
        }
        fn run(&mut self, _tx: &mut dyn Tx) -> TxResult<()> {
            self.attempt += 1;
            match self.ty {
                0 => Ok(()),
                1 => Err(TxError::UserAbort("scripted rollback".into())),
                _ => match self.always {
                    Some(make) => Err(make()),
                    None if self.attempt == 1 => Err(TxError::Retry("scripted deadlock".into())),
                    None => Ok(()),
                },
            }
        }
    }

    const NAMES: [&str; 3] = ["Commit", "Rollback", "RetryOnce"];

    /// A terminal whose every transaction takes `ms` milliseconds and commits.
    struct Slow(u64);

    impl Terminal for Slow {
        fn next(&mut self) -> usize {
            0
        }
        fn run(&mut self, _tx: &mut dyn Tx) -> TxResult<()> {
            std::thread::sleep(Duration::from_millis(self.0));
            Ok(())
        }
    }

    fn open_loop(rate: f64, workers: usize) -> (DriverOutcome, f64) {
        let config = DriverConfig {
            stop: Stop::Duration(Duration::from_millis(600)),
            rate: Some(rate),
            ..DriverConfig::default()
        };
        let terminals = (0..workers)
            .map(|_| Box::new(Slow(5)) as Box<dyn Terminal>)
            .collect();
        let out = drive(
            terminals,
            &CountingExecutor::default(),
            &["Slow"],
            &config,
            &mut ProgressLine::with_enabled(false),
        )
        .unwrap();
        let tps = out.stats.overall().count() as f64 / out.elapsed.as_secs_f64();
        (out, tps)
    }

    /// Counts `idle` calls per worker.
    #[derive(Default)]
    struct IdleCounting {
        idle: [AtomicUsize; 2],
    }

    impl Executor for IdleCounting {
        fn execute(&self, _attempt: Attempt, terminal: &mut dyn Terminal) -> TxResult<()> {
            terminal.run(&mut crate::optimal::NoEngine)
        }

        fn idle(&self, worker: usize) {
            self.idle[worker].fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_worker_says_when_it_will_be_quiet_done_or_waiting_for_its_slot() {
        let run = |rate: Option<f64>| {
            let exec = IdleCounting::default();
            let config = DriverConfig {
                stop: Stop::Duration(Duration::from_millis(300)),
                rate,
                ..DriverConfig::default()
            };
            let terminals = (0..2)
                .map(|_| Box::new(Slow(1)) as Box<dyn Terminal>)
                .collect();
            drive(
                terminals,
                &exec,
                &["Slow"],
                &config,
                &mut ProgressLine::with_enabled(false),
            )
            .unwrap();
            exec.idle.map(|n| n.into_inner())
        };
        // Closed loop: once each, at the end.
        assert_eq!(run(None), [1, 1]);
        // Open loop well below capacity: before nearly every slot, and at the end.
        let open = run(Some(100.0));
        assert!(open.iter().all(|&n| n >= 10), "{open:?}");
    }

    #[test]
    fn an_open_loop_below_capacity_runs_at_its_rate_with_the_service_time_as_latency() {
        // Two workers of 5 ms serve up to 400 a second; 100 are offered.
        let (out, tps) = open_loop(100.0, 2);
        assert!((60.0..=140.0).contains(&tps), "{tps}");
        let p50 = out.stats.overall().latency().p50_us;
        assert!((4_000..15_000).contains(&p50), "{p50} µs");
    }

    #[test]
    fn an_open_loop_over_capacity_counts_the_wait_for_a_worker_as_latency() {
        // 1,000 a second offered to 400 a second of capacity: the backlog grows, and with it
        // the latency measured from each transaction's scheduled start.
        let (out, tps) = open_loop(1000.0, 2);
        assert!(tps <= 450.0, "{tps}");
        let latency = out.stats.overall().latency();
        assert!(latency.p99_us > 100_000, "{latency:?}");
    }

    fn terminals(n: usize, always: Option<fn() -> TxError>) -> Vec<Box<dyn Terminal>> {
        (0..n).map(|_| ScriptedTerminal::boxed(always)).collect()
    }

    #[test]
    fn txn_budget_is_exact_and_counts_add_up() {
        let exec = CountingExecutor::default();
        let config = DriverConfig {
            stop: Stop::Txns(300),
            ..DriverConfig::default()
        };
        let out = drive(
            terminals(3, None),
            &exec,
            &NAMES,
            &config,
            &mut ProgressLine::with_enabled(false),
        )
        .unwrap();
        let s = &out.stats;
        assert_eq!(s.txn_count(), 300);
        let sum: u64 = s.by_type.iter().map(|t| t.count()).sum();
        assert_eq!(sum, 300);
        // Each terminal cycles through the three types, so each type got about a third.
        for t in &s.by_type {
            assert!((90..=110).contains(&t.count()), "{:?}", t.count());
        }
        // Type 1 only rolls back, types 0 and 2 only commit.
        assert_eq!(s.by_type[1].rollbacks, s.by_type[1].count());
        assert_eq!(s.by_type[1].commits, 0);
        assert_eq!(s.by_type[0].rollbacks + s.by_type[2].rollbacks, 0);
        // Type 2 was retried exactly once per transaction, and only type 2.
        assert_eq!(s.by_type[2].aborts, s.by_type[2].count());
        assert_eq!(s.by_type[0].aborts + s.by_type[1].aborts, 0);
        // The executor saw every attempt: one per transaction plus one per retry.
        assert_eq!(
            exec.attempts.load(Ordering::Relaxed) as u64,
            300 + s.by_type[2].aborts
        );
        let overall = s.overall();
        assert_eq!(overall.count(), 300);
        assert_eq!(overall.latency_us.len(), 300);
    }

    #[test]
    fn duration_run_stops_on_time_and_skips_warmup() {
        let exec = CountingExecutor::default();
        let config = DriverConfig {
            warmup: Duration::from_millis(100),
            stop: Stop::Duration(Duration::from_millis(200)),
            ..DriverConfig::default()
        };
        let begin = Instant::now();
        let out = drive(
            terminals(2, None),
            &exec,
            &NAMES,
            &config,
            &mut ProgressLine::with_enabled(false),
        )
        .unwrap();
        let wall = begin.elapsed();
        assert!(wall >= Duration::from_millis(300), "{wall:?}");
        assert!(wall < Duration::from_secs(5), "{wall:?}");
        assert!(
            out.elapsed >= Duration::from_millis(200),
            "{:?}",
            out.elapsed
        );
        assert!(out.elapsed < Duration::from_secs(4), "{:?}", out.elapsed);
        let measured = out.stats.txn_count();
        assert!(measured > 0);
        // Warm-up transactions ran but were not recorded.
        let attempts = exec.attempts.load(Ordering::Relaxed) as u64;
        let retries: u64 = out.stats.by_type.iter().map(|t| t.aborts).sum();
        assert!(
            attempts > measured + retries,
            "{attempts} vs {measured} + {retries}"
        );
    }

    #[test]
    fn fatal_error_stops_the_run_and_names_the_transaction() {
        let exec = CountingExecutor::default();
        let config = DriverConfig {
            stop: Stop::Duration(Duration::from_secs(30)),
            ..DriverConfig::default()
        };
        let begin = Instant::now();
        let err = drive(
            terminals(2, Some(|| TxError::Invalid("no such table".into()))),
            &exec,
            &NAMES,
            &config,
            &mut ProgressLine::with_enabled(false),
        )
        .unwrap_err();
        assert!(begin.elapsed() < Duration::from_secs(5));
        assert!(matches!(err, DriverError::Txn { .. }));
        // As the command line prints it: the chain, each cause once.
        let message = format!("{:#}", anyhow::Error::new(err).context("run tpcb"));
        assert!(message.contains("RetryOnce"), "{message}");
        assert_eq!(message.matches("no such table").count(), 1, "{message}");
    }

    #[test]
    fn endless_retries_end_with_an_error() {
        let exec = CountingExecutor::default();
        let config = DriverConfig {
            stop: Stop::Duration(Duration::from_secs(30)),
            retry_limit: 5,
            ..DriverConfig::default()
        };
        let err = drive(
            terminals(1, Some(|| TxError::Retry("always a victim".into()))),
            &exec,
            &NAMES,
            &config,
            &mut ProgressLine::with_enabled(false),
        )
        .unwrap_err();
        match err {
            DriverError::RetryLimit {
                attempts, ref txn, ..
            } => {
                assert_eq!(attempts, 5);
                assert_eq!(txn, "RetryOnce");
            }
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn a_bad_type_or_a_panic_is_an_error_not_a_hang() {
        struct Bad;
        impl Terminal for Bad {
            fn next(&mut self) -> usize {
                7
            }
            fn run(&mut self, _: &mut dyn Tx) -> TxResult<()> {
                Ok(())
            }
        }
        struct Panicky;
        impl Terminal for Panicky {
            fn next(&mut self) -> usize {
                0
            }
            fn run(&mut self, _: &mut dyn Tx) -> TxResult<()> {
                panic!("procedure bug")
            }
        }
        let exec = CountingExecutor::default();
        let config = DriverConfig {
            stop: Stop::Txns(10),
            ..DriverConfig::default()
        };
        let mut quiet = ProgressLine::with_enabled(false);
        let err = drive(vec![Box::new(Bad)], &exec, &NAMES, &config, &mut quiet).unwrap_err();
        assert!(matches!(err, DriverError::BadType { ty: 7, .. }), "{err}");
        let err = drive(vec![Box::new(Panicky)], &exec, &NAMES, &config, &mut quiet).unwrap_err();
        assert!(err.to_string().contains("procedure bug"), "{err}");
        assert!(matches!(
            drive(Vec::new(), &exec, &NAMES, &config, &mut quiet),
            Err(DriverError::NoTerminals)
        ));
    }
}
