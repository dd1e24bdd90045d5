//! `glass ladder`: the removal ladder of the 2008 paper (Figures 1, 5–8), measured.
//!
//! ```text
//!   for each rung 0..=11 (up to --jobs at a time):
//!       valgrind --tool=callgrind --collect-atstart=no --instr-atstart=no
//!                --toggle-collect=*measured_txn* --toggle-collect=*Kernel*run_mix*
//!                glass ladder-child --rung K ...        ─► DIR/rung-K.callgrind.1..P
//!                                                         (one dump per phase)
//!   then 3 rounds of every rung, one at a time (so timings do not share the cores):
//!       glass ladder-child --rung K --txns 10×N         ─► µs per transaction (median of 3)
//!   ─► Profile::parse each dump ─► instructions/txn, by operation, by component
//!   ─► DIR/ladder.json, DIR/ladder.md, DIR/*.svg + *.png (report.rs, plot.rs)
//! ```
//!
//! The measured child is [`measure::run_rung`]: the same code natively and under callgrind.
//! If valgrind is missing the native timings are still measured and written, and the run
//! ends with an error naming valgrind and how to install it.

pub mod measure;
pub mod profile;
pub mod report;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{bail, Context};
use engine::Switch;
use parking_lot::Mutex;
use serde::Serialize;

use crate::callgrind::{Operation, Profile};
use measure::{Phase, RungOutcome};

/// Default measured transactions per phase and rung: the whole default ladder (3 phases ×
/// 12 rungs under callgrind, then three native rounds of ten times as many) takes about two
/// and a half minutes on 2 cores. Events that come in lumps (a 32 KiB leaf split costs some
/// 180 K instructions, and 1,000 New-Orders see about a dozen) average out over 4,000: at
/// 1,000, rung 8's New-Order count moved by 1 K from one build to the next.
pub const DEFAULT_TXNS: u64 = 4000;
/// Rungs 0..=11.
pub const RUNGS: usize = 12;
/// Native rounds (every rung once a round); each phase's median is reported.
pub const NATIVE_ROUNDS: usize = 3;
/// Native runs measure this many times the transactions callgrind counts (unless told
/// otherwise): they cost little (1,000 New-Orders take about 30 ms at rung 0), and a time
/// measured over a few milliseconds moves with whatever else the machine does, which the
/// instructions-vs-time figure, a difference of adjacent rungs, magnifies.
pub const NATIVE_TXNS_FACTOR: u64 = 10;

/// What `glass ladder tpcc` runs.
#[derive(Clone, Debug, Serialize)]
pub struct LadderConfig {
    pub phases: Vec<Phase>,
    /// Transactions per phase counted under callgrind.
    pub txns: u64,
    /// Transactions per phase and repetition timed natively.
    pub native_txns: u64,
    pub out: PathBuf,
    pub jobs: usize,
    /// TPC-C sizes (full: 100,000 items, 3,000 customers per district).
    pub items: u32,
    pub customers: u32,
    pub warmup: u64,
    pub seed: u64,
    /// The glass binary to run as the child (normally `current_exe()`).
    pub exe: PathBuf,
    /// Print progress on stderr.
    pub progress: bool,
}

impl LadderConfig {
    /// The phases for `--txn new-order|payment|mix` (mix measures all three).
    pub fn phases_for(txn: Phase) -> Vec<Phase> {
        match txn {
            Phase::Mix => vec![Phase::NewOrder, Phase::Payment, Phase::Mix],
            one => vec![one],
        }
    }
}

/// One phase of one rung, measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PhaseMeasure {
    pub phase: String,
    pub txns: u64,
    /// Callgrind's instruction count divided by the transactions run.
    pub instructions_per_txn: Option<f64>,
    /// Instructions per transaction by operation (Figures 5 and 6).
    pub by_operation: Vec<(String, f64)>,
    /// Instructions per transaction by component (Figure 8).
    pub by_component: Vec<(String, f64)>,
    /// Median of the native runs, µs per transaction.
    pub time_us_per_txn: Option<f64>,
    pub time_us_runs: Vec<f64>,
    pub retries: u64,
    pub rollbacks: u64,
}

/// One rung, measured.
#[derive(Clone, Debug, Serialize)]
pub struct RungResult {
    pub rung: usize,
    /// The switch this rung turns off (`None` for rung 0; "optimal" for rung 11).
    pub switch: Option<String>,
    pub removes: String,
    pub phases: Vec<PhaseMeasure>,
    /// Why the callgrind run failed, if it did.
    pub callgrind_error: Option<String>,
    pub native_error: Option<String>,
    pub callgrind_s: Option<f64>,
    pub load_s: Option<f64>,
}

impl RungResult {
    pub fn phase(&self, phase: Phase) -> Option<&PhaseMeasure> {
        self.phases.iter().find(|p| p.phase == phase.name())
    }
}

/// The whole ladder.
#[derive(Clone, Debug, Serialize)]
pub struct LadderResult {
    pub glass_version: String,
    pub timestamp: String,
    pub config: LadderConfig,
    /// `valgrind --version`, or why it could not be run.
    pub valgrind: Result<String, String>,
    pub rungs: Vec<RungResult>,
    pub wall_s: f64,
}

/// The switch name and what rung `k` removes.
pub fn rung_label(k: usize) -> (Option<&'static str>, &'static str) {
    match k {
        0 => (None, "nothing: the full engine"),
        1..=10 => {
            let s = Switch::LADDER[k - 1];
            (Some(s.name()), s.removes())
        }
        _ => (
            Some("optimal"),
            "the engine itself: a hand-coded kernel of the same transactions",
        ),
    }
}

/// `valgrind --version`, or an error naming valgrind and how to install it.
pub fn valgrind_version() -> Result<String, String> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(out) if out.status.success() => {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        }
        _ => Err(
            "valgrind is not installed (or not on PATH): instructions per transaction \
                  need callgrind; install it with `apt-get install valgrind` (Debian/Ubuntu), \
                  `dnf install valgrind` (Fedora) or `brew install valgrind` (Linux only)"
                .to_string(),
        ),
    }
}

fn child_args(config: &LadderConfig, rung: usize, txns: u64) -> Vec<String> {
    let phases: Vec<&str> = config.phases.iter().map(|p| p.name()).collect();
    vec![
        "ladder-child".into(),
        "--rung".into(),
        rung.to_string(),
        "--phases".into(),
        phases.join(","),
        "--txns".into(),
        txns.to_string(),
        "--warmup".into(),
        config.warmup.to_string(),
        "--items".into(),
        config.items.to_string(),
        "--customers".into(),
        config.customers.to_string(),
        "--seed".into(),
        config.seed.to_string(),
    ]
}

/// The valgrind arguments that count only the measured functions, starting instrumentation
/// by client request, writing `out` (and one `out.N` per dump).
pub fn callgrind_args(out: &Path) -> Vec<String> {
    vec![
        "--tool=callgrind".into(),
        format!("--callgrind-out-file={}", out.display()),
        "--collect-atstart=no".into(),
        "--instr-atstart=no".into(),
        "--toggle-collect=*measured_txn*".into(),
        "--toggle-collect=*Kernel*run_mix*".into(),
    ]
}

/// Runs `exe args` (under valgrind if `valgrind`), returning the child's JSON outcome.
fn run_child(exe: &Path, args: &[String], valgrind: Option<&Path>) -> anyhow::Result<RungOutcome> {
    let mut command = match valgrind {
        Some(out) => {
            let mut c = Command::new("valgrind");
            c.args(callgrind_args(out)).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    command.args(args);
    // Killed with this process (`crate::child`): a rung under valgrind runs for minutes, and
    // a ladder killed outright would leave it running to its end.
    let output = crate::child::owned(&mut command, libc::SIGKILL)
        .output()
        .with_context(|| format!("start {}", exe.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
        bail!(
            "child run failed ({}): {}",
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .context("the child printed no result")?;
    serde_json::from_str(line).context("parse the child's result")
}

/// Per-transaction costs of one dump.
/// Named values per transaction.
type Split = Vec<(String, f64)>;

fn attribute(profile: &Profile, txns: u64) -> (f64, Split, Split) {
    let per = |v: u64| v as f64 / txns.max(1) as f64;
    let ops = profile.by_operation();
    let by_operation = Operation::ALL
        .iter()
        .map(|op| {
            (
                op.name().to_string(),
                per(ops.get(op).copied().unwrap_or(0)),
            )
        })
        .collect();
    let comps = profile.by_component();
    let by_component = crate::callgrind::Component::ALL
        .iter()
        .map(|c| {
            (
                c.name().to_string(),
                per(comps.get(c).copied().unwrap_or(0)),
            )
        })
        .collect();
    (per(profile.total), by_operation, by_component)
}

fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    (!v.is_empty()).then(|| v[v.len() / 2])
}

/// Progress lines: tasks of two kinds (0: callgrind, run `parallel` at a time; 1: native,
/// one at a time), each kind's remaining time estimated from its own mean.
struct Progress {
    enabled: bool,
    started: Instant,
    parallel: usize,
    /// Per kind: (total, done, seconds spent).
    kinds: Mutex<[(usize, usize, f64); 2]>,
}

impl Progress {
    fn finished(&self, kind: usize, what: &str, took: f64) {
        let (done, total, left) = {
            let mut kinds = self.kinds.lock();
            kinds[kind].1 += 1;
            kinds[kind].2 += took;
            let mut left = 0.0;
            for (i, (total, done, spent)) in kinds.iter().enumerate() {
                // Before any native run finishes, guess 2 s per rung and round.
                let mean = if *done > 0 { spent / *done as f64 } else { 2.0 };
                let lanes = if i == 0 { self.parallel.max(1) } else { 1 };
                left += mean * (total - done) as f64 / lanes as f64;
            }
            let done: usize = kinds.iter().map(|k| k.1).sum();
            let total: usize = kinds.iter().map(|k| k.0).sum();
            (done, total, left)
        };
        if self.enabled {
            eprintln!(
                "[{done}/{total}] {what} in {took:.1} s; {:.0} s elapsed, about {left:.0} s left",
                self.started.elapsed().as_secs_f64(),
            );
        }
    }
}

/// Runs the ladder and writes its table, JSON and figures into `config.out`. Returns the
/// result; a missing valgrind is reported in it (and by [`LadderResult::valgrind`]).
pub fn run_ladder(config: &LadderConfig) -> anyhow::Result<LadderResult> {
    let started = Instant::now();
    std::fs::create_dir_all(&config.out)
        .with_context(|| format!("create directory {}", config.out.display()))?;
    let valgrind = valgrind_version();
    let say = |line: String| {
        if config.progress {
            eprintln!("{line}");
        }
    };
    let mut rungs: Vec<RungResult> = (0..RUNGS)
        .map(|k| {
            let (switch, removes) = rung_label(k);
            RungResult {
                rung: k,
                switch: switch.map(str::to_string),
                removes: removes.to_string(),
                phases: config
                    .phases
                    .iter()
                    .map(|p| PhaseMeasure {
                        phase: p.name().to_string(),
                        txns: config.txns,
                        ..PhaseMeasure::default()
                    })
                    .collect(),
                callgrind_error: None,
                native_error: None,
                callgrind_s: None,
                load_s: None,
            }
        })
        .collect();
    let callgrind_tasks = if valgrind.is_ok() { RUNGS } else { 0 };
    let progress = Progress {
        enabled: config.progress,
        started,
        parallel: config.jobs,
        kinds: Mutex::new([(callgrind_tasks, 0, 0.0), (RUNGS * NATIVE_ROUNDS, 0, 0.0)]),
    };

    if let Err(why) = &valgrind {
        say(format!("warning: {why}; measuring native time only"));
    } else {
        say(format!(
            "ladder: {} rungs under callgrind ({} at a time), {} transactions per phase ({}), then natively",
            RUNGS,
            config.jobs,
            config.txns,
            config.phases.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
        ));
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<(usize, anyhow::Result<RungOutcome>, f64)>> = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..config.jobs.clamp(1, RUNGS) {
                scope.spawn(|| loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= RUNGS {
                        break;
                    }
                    let t0 = Instant::now();
                    let out = config.out.join(format!("rung-{k}.callgrind"));
                    for stale in dump_paths(&out, config.phases.len() + 1) {
                        let _ = std::fs::remove_file(stale);
                    }
                    let outcome =
                        run_child(&config.exe, &child_args(config, k, config.txns), Some(&out));
                    let took = t0.elapsed().as_secs_f64();
                    let label = rung_label(k).0.unwrap_or("full");
                    progress.finished(0, &format!("rung {k} ({label}) under callgrind"), took);
                    results.lock().push((k, outcome, took));
                });
            }
        });
        for (k, outcome, took) in results.into_inner() {
            let rung = &mut rungs[k];
            rung.callgrind_s = Some(took);
            let out = config.out.join(format!("rung-{k}.callgrind"));
            let filled = outcome.and_then(|o| fill_instructions(rung, &o, &out));
            if let Err(e) = filled {
                rung.callgrind_error = Some(format!("{e:#}"));
            }
        }
    }

    // Native timing in rounds, each running every rung once: a slow spell of this shared
    // machine then falls on every rung of one round alike, instead of on all repetitions of
    // one rung (which Figure 8, a difference of adjacent rungs, would show as a component).
    for round in 1..=NATIVE_ROUNDS {
        for (k, rung) in rungs.iter_mut().enumerate() {
            if rung.native_error.is_some() {
                continue;
            }
            let t0 = Instant::now();
            let args = child_args(config, k, config.native_txns);
            match run_child(&config.exe, &args, None) {
                Ok(outcome) => {
                    rung.load_s.get_or_insert(outcome.load_s);
                    for (measure, phase) in rung.phases.iter_mut().zip(&outcome.phases) {
                        if measure.time_us_runs.is_empty() {
                            // Retries and rollbacks are the native runs' once there are any.
                            (measure.retries, measure.rollbacks) = (0, 0);
                        }
                        measure
                            .time_us_runs
                            .push(phase.elapsed_ns as f64 / 1e3 / phase.txns.max(1) as f64);
                        measure.retries += phase.retries;
                        measure.rollbacks += phase.rollbacks;
                    }
                }
                Err(e) => rung.native_error = Some(format!("{e:#}")),
            }
            let label = rung_label(k).0.unwrap_or("full");
            progress.finished(
                1,
                &format!("rung {k} ({label}) natively, round {round} of {NATIVE_ROUNDS}"),
                t0.elapsed().as_secs_f64(),
            );
        }
    }
    for measure in rungs.iter_mut().flat_map(|r| r.phases.iter_mut()) {
        measure.time_us_per_txn = median(&measure.time_us_runs);
    }

    let result = LadderResult {
        glass_version: env!("CARGO_PKG_VERSION").to_string(),
        timestamp: crate::report::rfc3339_utc(std::time::SystemTime::now()),
        config: config.clone(),
        valgrind,
        rungs,
        wall_s: started.elapsed().as_secs_f64(),
    };
    report::write_all(&result, &config.out)?;
    Ok(result)
}

/// `out.1` .. `out.count`.
fn dump_paths(out: &Path, count: usize) -> Vec<PathBuf> {
    (1..=count)
        .map(|n| PathBuf::from(format!("{}.{n}", out.display())))
        .collect()
}

/// Reads the dumps of one callgrind run (one per phase, in order) into `rung`.
fn fill_instructions(
    rung: &mut RungResult,
    outcome: &RungOutcome,
    out: &Path,
) -> anyhow::Result<()> {
    let paths = dump_paths(out, outcome.phases.len());
    for ((measure, phase), path) in rung.phases.iter_mut().zip(&outcome.phases).zip(paths) {
        let profile = Profile::read(&path)?;
        if let Some(trigger) = &profile.trigger {
            if !trigger.ends_with(phase.phase.name()) {
                bail!(
                    "{} holds the dump '{trigger}', expected {}",
                    path.display(),
                    phase.phase.name()
                );
            }
        }
        let (per_txn, by_operation, by_component) = attribute(&profile, phase.txns);
        if profile.total == 0 {
            bail!(
                "{} counted no instructions (was the measured function renamed or inlined?)",
                path.display()
            );
        }
        // Every record created gets an index entry: a transaction that creates records with
        // no "insert index" cost means an index insert's entry point went unnamed in
        // `callgrind::operation_of` (renamed, or a new one), and its cost into "other".
        let cost = |name: &str| {
            by_operation
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, c)| *c)
        };
        if cost(Operation::CreateRecord.name()) > Some(0.0)
            && cost(Operation::InsertIndex.name()) == Some(0.0)
        {
            bail!(
                "{}: records were created but no index insert was counted \
                 (an index insert's entry point is missing from callgrind::operation_of)",
                path.display()
            );
        }
        measure.instructions_per_txn = Some(per_txn);
        measure.by_operation = by_operation;
        measure.by_component = by_component;
        measure.retries = phase.retries;
        measure.rollbacks = phase.rollbacks;
    }
    Ok(())
}
