//! The crash campaign (`glass crash`): load each workload once, then over and over run it,
//! kill it with SIGKILL at a random moment, and check what is left — recovery, integrity,
//! the workload's consistency conditions and the ack log — exactly as a user would, with the
//! `glass` binary's own `bench` and `check` commands.
//!
//! ```text
//!   per lane (workload × embedded or through a server × durable or not), `jobs` at a time:
//!     glass load W --db LANE/db                                   once
//!     repeat:
//!       glass bench W --db LANE/db [--durable] --ack-log LANE/acks
//!                   --checkpoint-kib K --duration ∞ ...            killed (SIGKILL) after a
//!                                                                  random 0..max-run
//!       glass check W --db LANE/db --ack-log LANE/acks             must exit 0; its
//!                   --json LANE/check.json                         counts read from there
//! ```
//!
//! Every other round's bench takes its checkpoints on the background checkpointer thread
//! (`--background-checkpoints`), the others in its commits; two rounds in four run two page
//! cleaners (`--page-cleaners 2`), so that kills fall during their write-backs too (each
//! pairing of the two comes once in four rounds); four rounds in eight lock pages instead of
//! records (`--page-locking`); two rounds in five write the log in segments of 1 MiB
//! (`--log-segment-mib 1`: created, filled and unlinked behind checkpoints as the kills fall);
//! every third writes its pages back through the doublewrite file, half of those (by the
//! round's seed) with a ring of two slots (`--doublewrite-ring-mib 4`: gone round many times
//! as the kills fall);
//! and the rounds take the execution strategies conventional,
//! TSTE and OTSTE in turn (`--execution`: fetch stages that pin, and OTSTE's rollback before
//! it converts). With `pool_mib` smaller than the
//! data, the benches evict as they run: pages dirtied by transactions still open are written
//! back before those commit (steal), and recovery has to undo them. Checkpoints are due every few KiB of log (`checkpoint_kib`), so they fall during
//! read-only transactions, during other checkpoints' write-back, and the kill falls during
//! recovery too (a draw shorter than the bench's open). A durable lane keeps one ack log
//! across all its rounds: every commit acknowledged in any round must still be there after
//! every later crash. A non-durable lane starts a fresh ack log each round and counts the
//! commits it lost (its last unforced ones: allowed). A check that fails (or a bench that
//! died before its kill) stops its lane and keeps the evidence: the check's output and a copy
//! of the database, named in the report.
//!
//! With [`CampaignConfig::power_loss`], each lane's database lives on a `powercut` file system
//! mounted for the lane (`LANE/mnt`), and its power is cut after the load and after each kill,
//! before the check: what was not synced is lost (every unsynced block in odd rounds, each by
//! a coin toss in even ones), and so is any file no synced directory names.
//!
//! A lane may run its workload through a server instead ([`Via::Sp`], [`Via::Interactive`]):
//! each round serves the database (`glass serve W --db LANE/db --unix LANE/s.sock`, with the
//! round's flags), starts `glass bench W --server unix://… --mode sp|interactive --ack-log …`
//! once the socket is there (the database open and recovered), and kills the *server* at a
//! drawn moment after it started; the clients, their connections reset, fail and exit. A
//! client records a commit only once the server has answered it, so every durable receipt
//! must survive the server's kill as it survives the bench's.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::check_report::check_numbers;
use crate::progress::ProgressLine;

/// How a lane's workload runs, and so which process the kill hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// `glass bench --db`: the engine in the bench's own process.
    Embedded,
    /// `glass serve --db`, killed under `glass bench --server --mode sp` clients: each
    /// transaction one stored-procedure call.
    Sp,
    /// The same under interactive clients: each transaction's operations in batches over the
    /// wire, its commit a request of its own.
    Interactive,
}

impl Via {
    pub const ALL: [Via; 3] = [Via::Embedded, Via::Sp, Via::Interactive];

    pub fn name(self) -> &'static str {
        match self {
            Via::Embedded => "embedded",
            Via::Sp => "sp",
            Via::Interactive => "interactive",
        }
    }

    pub fn parse(name: &str) -> Option<Via> {
        Via::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// One workload run durably or not, embedded or through a server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Lane {
    pub workload: String,
    pub durable: bool,
    pub via: Via,
}

impl Lane {
    fn name(&self) -> String {
        let durable = if self.durable {
            "durable"
        } else {
            "not-durable"
        };
        match self.via {
            Via::Embedded => format!("{}-{durable}", self.workload),
            via => format!("{}-{durable}-{}", self.workload, via.name()),
        }
    }
}

/// What a campaign runs.
#[derive(Clone, Debug)]
pub struct CampaignConfig {
    /// The `glass` binary whose `load`, `bench` and `check` are run.
    pub exe: PathBuf,
    /// Working directory: one subdirectory per lane (database, ack log, evidence).
    pub dir: PathBuf,
    pub lanes: Vec<Lane>,
    /// Kills in all, spread evenly over the lanes.
    pub kills: u64,
    /// Lanes run at the same time.
    pub jobs: usize,
    /// Each kill falls at a uniformly drawn moment in `0..max_run` after the bench started.
    pub max_run: Duration,
    pub seed: u64,
    /// Bench threads.
    pub threads: usize,
    /// Fuzzy checkpoint interval of the benches.
    pub checkpoint_kib: u64,
    /// Buffer pool of the benches and checks, in MiB (`None`: their default, which holds
    /// the campaign's small data). A pool smaller than the data makes the benches evict:
    /// dirty pages of transactions still running are written (stolen) before their commit,
    /// so recovery must undo what reached the disk, not only redo what did not.
    pub pool_mib: Option<u64>,
    /// Tear the benches' page writes (`storage::file::TEAR_WRITES_ENV`): with the header new
    /// (what a kill inside a write leaves) in half the rounds, old (what a power loss may
    /// leave) in the others.
    pub tear_writes: bool,
    /// Run each lane's database on a file system in memory whose power is cut after every
    /// kill (and after the load): what was not synced is lost, in every other round all of
    /// it, in the others half of it block by block, as a page cache writing back in any order
    /// might leave it (`powercut`). Needs FUSE and root.
    pub power_loss: bool,
    /// Start no round after this long (the campaign then ends with fewer kills than asked).
    pub time_limit: Option<Duration>,
    /// Whether stderr is a terminal: a live progress line there if so, else a plain line as
    /// each lane ends.
    pub progress: bool,
    /// Set to end the campaign early (`glass crash` sets it on SIGINT or SIGTERM): each lane's
    /// running bench or server is killed at once and its round left uncounted, a load or a
    /// check that is running is cut short (a kill whose check was cut is counted as
    /// [`LaneResult::unchecked`]), no round starts after, and the lanes' power-cut file
    /// systems are unmounted. The result says it was interrupted.
    pub stop: Arc<AtomicBool>,
}

/// Why a round of a lane failed.
#[derive(Clone, Debug, Serialize)]
pub struct Failure {
    pub round: u64,
    pub what: String,
    /// Where the output and the copy of the database were kept.
    pub evidence: String,
}

/// What one lane found.
#[derive(Clone, Debug, Serialize)]
pub struct LaneResult {
    pub workload: String,
    pub durable: bool,
    pub via: Via,
    pub kills: u64,
    /// Kills of rounds that wrote pages back through a doublewrite file (every third).
    pub doublewrite_kills: u64,
    pub checks_passed: u64,
    /// Kills whose check the campaign's stop cut short (at most one a lane): counted in
    /// `kills`, neither passed nor failed. The database recovers from the kill at its next
    /// open, as from any other.
    pub unchecked: u64,
    /// Receipts of durable commits looked up after the last check, and how many were missing
    /// over all checks (must be 0).
    pub durable_receipts: u64,
    pub durable_missing: u64,
    /// Receipts of non-durable commits looked up, summed over rounds, and how many were lost.
    pub not_durable_receipts: u64,
    pub not_durable_missing: u64,
    /// Summed over the checks' recoveries (their `recovery:` line): transactions the kill left
    /// unfinished that recovery rolled back, the changes it undid for them, and the logged
    /// page changes it found written already (with a small pool, some a loser's: stolen).
    pub rolled_back: u64,
    pub undone: u64,
    pub found_on_disk: u64,
    /// Pages whose write a kill tore: rebuilt from the log by the checks' recoveries, and put
    /// back from the doublewrite file before them.
    pub torn_rebuilt: u64,
    pub torn_put_back: u64,
    /// With `power_loss`: the power cuts (one after the load, one after each kill), the
    /// blocks written since their file's last sync that they lost and kept, and the files and
    /// directories they took away because no synced directory named them.
    pub power_cuts: u64,
    pub cut_blocks_lost: u64,
    pub cut_blocks_kept: u64,
    pub cut_files_lost: u64,
    pub failures: Vec<Failure>,
}

impl LaneResult {
    /// A lane that has run no round yet.
    fn new(lane: &Lane) -> LaneResult {
        LaneResult {
            workload: lane.workload.clone(),
            durable: lane.durable,
            via: lane.via,
            kills: 0,
            doublewrite_kills: 0,
            checks_passed: 0,
            unchecked: 0,
            durable_receipts: 0,
            durable_missing: 0,
            not_durable_receipts: 0,
            not_durable_missing: 0,
            rolled_back: 0,
            undone: 0,
            found_on_disk: 0,
            torn_rebuilt: 0,
            torn_put_back: 0,
            power_cuts: 0,
            cut_blocks_lost: 0,
            cut_blocks_kept: 0,
            cut_files_lost: 0,
            failures: Vec::new(),
        }
    }

    fn count_cut(&mut self, cut: powercut::Cut) {
        self.power_cuts += 1;
        self.cut_blocks_lost += cut.blocks_lost;
        self.cut_blocks_kept += cut.blocks_kept;
        self.cut_files_lost += cut.files_lost;
    }
}

/// What a campaign found.
#[derive(Clone, Debug, Serialize)]
pub struct CampaignResult {
    pub lanes: Vec<LaneResult>,
    pub wall_s: f64,
    /// Ended early by [`CampaignConfig::stop`]: fewer kills than asked, and the rounds it
    /// cut short were not checked.
    pub interrupted: bool,
}

impl CampaignResult {
    pub fn kills(&self) -> u64 {
        self.lanes.iter().map(|l| l.kills).sum()
    }

    /// Databases that failed their check after a kill.
    pub fn lost(&self) -> usize {
        self.lanes.iter().map(|l| l.failures.len()).sum()
    }

    /// Kills whose check the stop cut short.
    pub fn unchecked(&self) -> u64 {
        self.lanes.iter().map(|l| l.unchecked).sum()
    }

    pub fn missing(&self) -> u64 {
        self.lanes.iter().map(|l| l.durable_missing).sum()
    }

    pub fn holds(&self) -> bool {
        self.lost() == 0 && self.missing() == 0
    }

    /// The table printed at the end.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "| workload | durable | via | kills (through the doublewrite file) | checks passed | failed | durable receipts | missing | non-durable receipts | lost (allowed) | rolled back (changes) | torn pages rebuilt from the log / put back from the doublewrite file |\n\
             |---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for l in &self.lanes {
            out.push_str(&format!(
                "| {} | {} | {} | {} ({}) | {} | {} | {} | {} | {} | {} | {} ({}) | {} / {} |\n",
                l.workload,
                if l.durable { "yes" } else { "no" },
                l.via.name(),
                l.kills,
                l.doublewrite_kills,
                l.checks_passed,
                l.failures.len(),
                l.durable_receipts,
                l.durable_missing,
                l.not_durable_receipts,
                l.not_durable_missing,
                l.rolled_back,
                l.undone,
                l.torn_rebuilt,
                l.torn_put_back
            ));
        }
        if self.lanes.iter().any(|l| l.power_cuts > 0) {
            out.push_str(
                "\n| workload | durable | via | power cuts | unsynced blocks lost | unsynced blocks kept | files lost |\n\
                 |---|---|---|---:|---:|---:|---:|\n",
            );
            for l in &self.lanes {
                out.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {} | {} |\n",
                    l.workload,
                    if l.durable { "yes" } else { "no" },
                    l.via.name(),
                    l.power_cuts,
                    l.cut_blocks_lost,
                    l.cut_blocks_kept,
                    l.cut_files_lost
                ));
            }
        }
        if self.interrupted {
            out.push_str(
                "\ninterrupted: the rounds running then were killed and not checked (a check \
                 or load running then was cut short)",
            );
            match self.unchecked() {
                0 => out.push('\n'),
                n => out.push_str(&format!(
                    "; {n} of the kills counted below {} not checked, {} check cut short\n",
                    if n == 1 { "was" } else { "were" },
                    if n == 1 { "its" } else { "their" },
                )),
            }
        }
        out.push_str(&format!(
            "\n{} kills in {:.0} s: {} database{} failed {} check, {} acknowledged durable commit{} missing\n",
            self.kills(),
            self.wall_s,
            self.lost(),
            if self.lost() == 1 { "" } else { "s" },
            if self.lost() == 1 { "its" } else { "their" },
            self.missing(),
            if self.missing() == 1 { "" } else { "s" },
        ));
        for l in &self.lanes {
            for f in &l.failures {
                out.push_str(&format!(
                    "✗ {} {} {} round {}: {} (kept in {})\n",
                    l.workload,
                    if l.durable { "durable" } else { "not durable" },
                    l.via.name(),
                    f.round,
                    f.what,
                    f.evidence
                ));
            }
        }
        out
    }
}

/// The lanes of `workloads`, each run every way of `vias`, durable and not.
pub fn lanes_of(workloads: &[String], vias: &[Via]) -> Vec<Lane> {
    let mut lanes = Vec::new();
    for workload in workloads {
        for &via in vias {
            for durable in [true, false] {
                let lane = Lane {
                    workload: workload.clone(),
                    durable,
                    via,
                };
                // Named twice, a lane would run twice at once on one database.
                if !lanes.contains(&lane) {
                    lanes.push(lane);
                }
            }
        }
    }
    lanes
}

/// The arguments that pick a workload's data and run in a campaign: small data, and for
/// YCSB the core workload with inserts (D), since only inserts leave receipts.
fn workload_args(workload: &str) -> Vec<String> {
    match workload {
        "ycsb" => vec!["--scale".into(), "10000".into()],
        _ => Vec::new(),
    }
}

fn run_args(workload: &str) -> Vec<String> {
    match workload {
        "ycsb" => vec!["--ycsb-workload".into(), "D".into()],
        _ => Vec::new(),
    }
}

/// The execution strategy of a round's bench: conventional, TSTE and OTSTE in turn (three
/// rounds, against the rotations of eight rounds above: every pairing once in 24), so that
/// kills fall in fetch stages holding pins and in OTSTE's rollbacks before its conversion.
fn execution_of(round: u64) -> &'static str {
    ["conventional", "tste", "otste"][(round % 3) as usize]
}

/// `--pool-mib N` for the benches and checks, when the campaign names a pool.
fn pool_args(pool_mib: Option<u64>) -> Vec<String> {
    pool_mib.map_or_else(Vec::new, |mib| vec!["--pool-mib".into(), mib.to_string()])
}

/// Runs the campaign.
pub fn run_campaign(config: &CampaignConfig) -> anyhow::Result<CampaignResult> {
    if config.lanes.is_empty() {
        bail!(crate::UsageError("a campaign needs a workload".into()));
    }
    if config.kills == 0 {
        bail!(crate::UsageError("--kills must be at least 1".into()));
    }
    fs::create_dir_all(&config.dir)
        .with_context(|| format!("create directory {}", config.dir.display()))?;
    let started = Instant::now();
    let lanes = config.lanes.len() as u64;
    let done = AtomicU64::new(0);
    let lost = AtomicU64::new(0);
    let next = AtomicU64::new(0);
    let lanes_done = AtomicU64::new(0);
    let results: Mutex<Vec<Option<anyhow::Result<LaneResult>>>> =
        Mutex::new((0..config.lanes.len()).map(|_| None).collect());
    let progress = Mutex::new(ProgressLine::with_enabled(config.progress));
    let report = || {
        progress.lock().update(|| {
            format!(
                "crash campaign: {}/{} kills checked, {} failed, {:.0} s",
                done.load(Ordering::Relaxed),
                config.kills,
                lost.load(Ordering::Relaxed),
                started.elapsed().as_secs_f64()
            )
        })
    };
    std::thread::scope(|s| {
        for _ in 0..config.jobs.clamp(1, config.lanes.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(lane) = config.lanes.get(i) else {
                    break;
                };
                let kills = kills_of_lane(config.kills, lanes, i as u64);
                let seed = config.seed.wrapping_add(i as u64 * 1_000_003);
                let deadline = config.time_limit.map(|t| started + t);
                let r = run_lane(config, lane, kills, seed, deadline, &|round| {
                    // A round whose run died before its kill failed without a check.
                    done.fetch_add(u64::from(round != RoundOutcome::Died), Ordering::Relaxed);
                    lost.fetch_add(u64::from(round != RoundOutcome::Passed), Ordering::Relaxed);
                    report();
                });
                if !config.progress {
                    // Redirected, a long campaign still says how far it got, a line a lane.
                    let finished = lanes_done.fetch_add(1, Ordering::Relaxed) + 1;
                    eprintln!(
                        "[{finished}/{lanes}] {}: {}; {}/{} kills checked so far, {:.0} s",
                        lane.name(),
                        match &r {
                            Ok(l) => format!(
                                "{} kills, {} checks passed, {} failed{}",
                                l.kills,
                                l.checks_passed,
                                l.failures.len(),
                                if l.unchecked > 0 {
                                    format!(", {} unchecked (stopped)", l.unchecked)
                                } else {
                                    String::new()
                                }
                            ),
                            Err(e) => format!("stopped: {e:#}"),
                        },
                        done.load(Ordering::Relaxed),
                        config.kills,
                        started.elapsed().as_secs_f64()
                    );
                }
                results.lock()[i] = Some(r);
            });
        }
    });
    progress.lock().finish();
    let lanes = results
        .into_inner()
        .into_iter()
        .map(|r| r.expect("every lane ran"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(CampaignResult {
        lanes,
        wall_s: started.elapsed().as_secs_f64(),
        interrupted: config.stop.load(Ordering::Relaxed),
    })
}

/// Lane `i`'s share of `kills` spread evenly over `lanes`: the first `kills % lanes` lanes
/// take one more.
fn kills_of_lane(kills: u64, lanes: u64, i: u64) -> u64 {
    kills / lanes + u64::from(i < kills % lanes)
}

fn run_lane(
    config: &CampaignConfig,
    lane: &Lane,
    kills: u64,
    seed: u64,
    deadline: Option<Instant>,
    tick: &(dyn Fn(RoundOutcome) + Sync),
) -> anyhow::Result<LaneResult> {
    let dir = config.dir.join(lane.name());
    let acks = dir.join("acks");
    if config.stop.load(Ordering::Relaxed) {
        return Ok(LaneResult::new(lane));
    }
    fs::create_dir_all(&dir).with_context(|| format!("create directory {}", dir.display()))?;
    // With power cuts, the database lives in memory, on a file system mounted for the lane
    // (its ack log, outputs and evidence stay on the disk).
    let mounted = if config.power_loss {
        let mnt = dir.join("mnt");
        powercut::clear_stale_mount(&mnt);
        fs::create_dir_all(&mnt).with_context(|| format!("create directory {}", mnt.display()))?;
        Some(powercut::Mounted::mount(&mnt)?)
    } else {
        None
    };
    let db = match &mounted {
        Some(m) => m.path().join("db"),
        None => dir.join("db"),
    };
    // The cuts draw from a generator of their own, so that the rounds' draws stay the same.
    let mut cut_rng = SmallRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut result = LaneResult::new(lane);
    if !db.join(crate::manifest::MANIFEST_FILE).exists() {
        let _ = fs::remove_dir_all(&db);
        // A new database: receipts an earlier campaign left in this lane name commits of the
        // one it replaces (a power-cut lane's lives in memory, so every campaign loads it
        // again), and looked up in this one they would count as lost.
        fs::File::create(&acks).with_context(|| format!("empty the ack log {}", acks.display()))?;
        let Some(out) = crate::child::output_unless_stopped(
            owned_by_campaign(&mut Command::new(&config.exe))
                .args(["load", &lane.workload, "--db"])
                .arg(&db)
                .args(workload_args(&lane.workload))
                .stdin(Stdio::null()),
            &config.stop,
        )
        .with_context(|| format!("run {} load", config.exe.display()))?
        else {
            // Stopped: a load cut short is no database; the next campaign loads it again.
            let _ = fs::remove_dir_all(&db);
            return Ok(result);
        };
        if !out.status.success() {
            bail!(
                "loading {} into {} failed: {}",
                lane.workload,
                db.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        // A finished load must survive the power going at once.
        if let Some(m) = &mounted {
            result.count_cut(m.cut(0.0, &mut cut_rng)?);
        }
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    for round in 1..=kills {
        if deadline.is_some_and(|d| Instant::now() >= d) || config.stop.load(Ordering::Relaxed) {
            break;
        }
        prepare_ack_log(&acks, lane.durable)?;
        let seed = rng.gen::<u32>();
        let kill_after = config.max_run.mul_f64(rng.gen::<f64>());
        let round_run = Round {
            config,
            lane,
            dir: &dir,
            db: &db,
            number: round,
            seed,
            kill_after,
        };
        let died = match lane.via {
            Via::Embedded => round_run.bench_and_kill()?,
            Via::Sp | Via::Interactive => round_run.serve_and_kill()?,
        };
        let died = match died {
            RoundEnd::Stopped => break,
            RoundEnd::Killed => None,
            RoundEnd::Died(what) => Some(what),
        };
        result.kills += 1;
        if round_run.doublewrite() {
            result.doublewrite_kills += 1;
        }
        // The power goes with the kill: odd rounds lose everything unsynced, even rounds
        // keep each unsynced block (each file's size, each directory's entries) by a coin.
        if let Some(m) = &mounted {
            let keep = if round.is_multiple_of(2) { 0.5 } else { 0.0 };
            result.count_cut(m.cut(keep, &mut cut_rng)?);
        }
        if let Some(what) = died {
            result
                .failures
                .push(keep_evidence(&dir, &db, round, &what)?);
            tick(RoundOutcome::Died);
            break;
        }
        let json = dir.join("check.json");
        let _ = fs::remove_file(&json);
        let Some(out) = crate::child::output_unless_stopped(
            owned_by_campaign(&mut Command::new(&config.exe))
                .args(["check", &lane.workload, "--db"])
                .arg(&db)
                .arg("--ack-log")
                .arg(&acks)
                .arg("--json")
                .arg(&json)
                .args(pool_args(config.pool_mib))
                .stdin(Stdio::null()),
            &config.stop,
        )
        .with_context(|| format!("run {} check", config.exe.display()))?
        else {
            // Stopped: the round stays unchecked (its kill was one more crash, which the next
            // open recovers from, as it recovers from a check cut short), and says so.
            result.unchecked += 1;
            break;
        };
        let mut text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The check's numbers from its JSON; a check that wrote none (or none readable)
        // failed, whatever its exit status.
        let numbers = match fs::read_to_string(&json)
            .map_err(anyhow::Error::from)
            .and_then(|t| check_numbers(&t))
        {
            Ok(numbers) => Some(numbers),
            Err(e) => {
                text.push_str(&format!("\n(no readable {}: {e:#})", json.display()));
                None
            }
        };
        let acked = numbers.and_then(|n| n.acks);
        if let Some(a) = acked {
            if lane.durable {
                result.durable_receipts = a.durable;
                result.durable_missing = result.durable_missing.max(a.durable_missing);
            } else {
                result.not_durable_receipts += a.not_durable;
                result.not_durable_missing += a.not_durable_missing;
            }
        }
        if let Some(found) = numbers {
            result.found_on_disk += found.on_disk;
            result.rolled_back += found.rolled_back;
            result.undone += found.undone;
            result.torn_rebuilt += found.torn_rebuilt;
            result.torn_put_back += found.torn_put_back;
        }
        if out.status.success() && numbers.is_some_and(|n| n.passed) && acked.is_some() {
            result.checks_passed += 1;
            tick(RoundOutcome::Passed);
        } else {
            let what = format!("the check failed ({}): {}", out.status, tail(&text));
            let failure = keep_evidence(&dir, &db, round, &what)?;
            fs::write(Path::new(&failure.evidence).join("check.txt"), &text)?;
            result.failures.push(failure);
            tick(RoundOutcome::CheckFailed);
            break;
        }
    }
    Ok(result)
}

/// How a round ended, for the progress line: its kill checked (and passed or failed), or its
/// run dead before the kill (a failure, with no check).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RoundOutcome {
    Passed,
    CheckFailed,
    Died,
}

/// How a round's run ended.
enum RoundEnd {
    /// Killed at its drawn moment.
    Killed,
    /// Exited by itself before that: why the round failed.
    Died(String),
    /// Killed early because the campaign was stopped: not to be checked.
    Stopped,
}

/// A process the campaign starts: Ctrl-C at the terminal reaches the campaign alone, which then
/// kills its round's processes and ends in order, and the kernel kills the process should the
/// campaign die first (a campaign killed with SIGKILL leaves no bench running for its
/// 100,000 s). See [`crate::child`].
fn owned_by_campaign(command: &mut Command) -> &mut Command {
    crate::child::owned(command, libc::SIGKILL)
}

/// One round of a lane: its run, killed `kill_after` it started.
struct Round<'a> {
    config: &'a CampaignConfig,
    lane: &'a Lane,
    dir: &'a Path,
    /// The database: in `dir`, or on the lane's power-cut file system.
    db: &'a Path,
    number: u64,
    seed: u32,
    kill_after: Duration,
}

impl Round<'_> {
    /// The round's database flags, for its bench or its server: durability, checkpoints, the
    /// pool, and the rounds' rotation of checkpointer, page cleaners, page locking, the
    /// doublewrite file and the log's segment size.
    fn db_args(&self) -> Vec<String> {
        let mut args = vec!["--db".to_string(), self.db.display().to_string()];
        args.extend(workload_args(&self.lane.workload));
        args.extend(run_args(&self.lane.workload));
        args.push("--checkpoint-kib".into());
        args.push(self.config.checkpoint_kib.to_string());
        args.extend(pool_args(self.config.pool_mib));
        if self.lane.durable {
            args.push("--durable".into());
        }
        // Every other round takes its checkpoints on the checkpointer thread, so kills fall
        // in its checkpoints too.
        if self.number.is_multiple_of(2) {
            args.push("--background-checkpoints".into());
        }
        // Two rounds in four write pages back on page cleaners beside the misses.
        if self.number % 4 >= 2 {
            args.extend(["--page-cleaners".into(), "2".into()]);
        }
        // Four rounds in eight lock pages instead of records.
        if self.number % 8 >= 4 {
            args.push("--page-locking".into());
        }
        // Every third round writes pages back through a doublewrite file (no full-page images
        // are then logged: the file alone must repair what a kill or a cut tears); the others
        // without one, so that images repair it.
        args.push("--doublewrite".into());
        args.push(if self.doublewrite() { "on" } else { "off" }.into());
        // Half of those, drawn by the round's seed (a lane of a short campaign has one such
        // round), keep a ring of two slots, which a round's write-backs go round many times:
        // kills fall as a slot is taken again, after the page file's sync that its batch must
        // wait for.
        if self.doublewrite() && self.seed % 2 == 1 {
            args.extend(["--doublewrite-ring-mib".into(), "4".into()]);
        }
        // Two rounds in five write the log in segments of 1 MiB (the default's 64 MiB are
        // more than a round writes), so that kills fall as segments are created, filled and
        // unlinked behind checkpoints.
        if self.number % 5 >= 3 {
            args.extend(["--log-segment-mib".into(), "1".into()]);
        }
        args
    }

    /// Whether the round writes pages back through a doublewrite file.
    fn doublewrite(&self) -> bool {
        self.number % 3 == 2
    }

    /// A log file of the round's, for a child's output.
    fn log(&self, name: &str) -> anyhow::Result<(PathBuf, fs::File)> {
        let path = self.dir.join(name);
        let file = fs::File::create(&path).with_context(|| format!("create {}", path.display()))?;
        Ok((path, file))
    }

    /// Makes `command`, the process to be killed, tear its page writes if the campaign asks.
    fn tearing(&self, command: &mut Command) {
        if self.config.tear_writes {
            // Three rounds in six each way, across the other rotations (checkpointer,
            // doublewrite file): every lane promises to survive a power loss's tear as well as
            // a kill's.
            let how = if self.number % 6 < 3 {
                "header-old"
            } else {
                "header-new"
            };
            command.env(storage::file::TEAR_WRITES_ENV, how);
        }
    }

    /// Runs the bench on the database and kills it; says why the round failed if the bench
    /// exited by itself first.
    fn bench_and_kill(&self) -> anyhow::Result<RoundEnd> {
        let (log, log_file) = self.log("bench.log")?;
        let exe = &self.config.exe;
        let mut child = Command::new(exe);
        self.tearing(&mut child);
        let mut child = owned_by_campaign(&mut child)
            .args(["bench", &self.lane.workload])
            .args(self.db_args())
            .args(["--duration", "100000", "--warmup", "0", "--quiet"])
            .args(["--threads", &self.config.threads.to_string()])
            .args(["--seed", &self.seed.to_string()])
            .arg("--ack-log")
            .arg(self.dir.join("acks"))
            .args(["--execution", execution_of(self.number)])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("run {} bench", exe.display()))?;
        let kill_at = Instant::now() + self.kill_after;
        let mut end = RoundEnd::Killed;
        while Instant::now() < kill_at {
            if let Some(status) = child.try_wait()? {
                return Ok(RoundEnd::Died(format!(
                    "the bench exited before its kill ({status}): {}",
                    tail(&fs::read_to_string(&log).unwrap_or_default())
                )));
            }
            if self.config.stop.load(Ordering::Relaxed) {
                end = RoundEnd::Stopped;
                break;
            }
            std::thread::sleep(Duration::from_millis(2).min(kill_at - Instant::now()));
        }
        child.kill().context("kill the bench")?; // SIGKILL
        child.wait()?;
        Ok(end)
    }

    /// Serves the database, starts the clients once it listens, and kills the server; the
    /// clients, their server gone, fail and exit (or are killed after a while). Says why the
    /// round failed if the server or the clients exited by themselves before the kill.
    fn serve_and_kill(&self) -> anyhow::Result<RoundEnd> {
        let (server_log, server_file) = self.log("serve.log")?;
        let (client_log, client_file) = self.log("bench.log")?;
        let exe = &self.config.exe;
        let socket = self.dir.join("s.sock");
        let _ = fs::remove_file(&socket);
        let threads = self.config.threads.to_string();
        let mut server = Command::new(exe);
        self.tearing(&mut server);
        let mut server = owned_by_campaign(&mut server)
            .args(["serve", &self.lane.workload])
            .args(self.db_args())
            .arg("--unix")
            .arg(&socket)
            .args(["--workers", &threads, "--quiet"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(server_file)
            .spawn()
            .with_context(|| format!("run {} serve", exe.display()))?;
        let mut client_file = Some(client_file);
        let mut clients: Option<std::process::Child> = None;
        let kill_at = Instant::now() + self.kill_after;
        let mut end = RoundEnd::Killed;
        while Instant::now() < kill_at {
            if let Some(status) = server.try_wait()? {
                end = RoundEnd::Died(format!(
                    "the server exited before its kill ({status}): {}",
                    tail(&fs::read_to_string(&server_log).unwrap_or_default())
                ));
                break;
            }
            // The socket is bound once the database is open (recovered) and served.
            if let (None, true) = (&clients, socket.exists()) {
                let mut bench = Command::new(exe);
                owned_by_campaign(&mut bench)
                    .args(["bench", &self.lane.workload])
                    .args(workload_args(&self.lane.workload))
                    .args(run_args(&self.lane.workload))
                    .arg("--server")
                    .arg(format!("unix://{}", socket.display()))
                    .args(["--mode", self.lane.via.name(), "--threads", &threads])
                    .args(["--duration", "100000", "--warmup", "0", "--quiet"])
                    .args(["--seed", &self.seed.to_string()])
                    .arg("--ack-log")
                    .arg(self.dir.join("acks"));
                if self.lane.durable {
                    // The server forces its commits: the receipts are durable ones.
                    bench.arg("--durable");
                }
                let log_file = client_file.take().expect("the clients start once");
                clients = Some(
                    bench
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(log_file)
                        .spawn()
                        .with_context(|| format!("run {} bench --server", exe.display()))?,
                );
            }
            if let Some(status) = clients
                .as_mut()
                .map(|c| c.try_wait())
                .transpose()?
                .flatten()
            {
                end = RoundEnd::Died(format!(
                    "the clients exited before the server's kill ({status}): {}",
                    tail(&fs::read_to_string(&client_log).unwrap_or_default())
                ));
                break;
            }
            if self.config.stop.load(Ordering::Relaxed) {
                end = RoundEnd::Stopped;
                break;
            }
            std::thread::sleep(Duration::from_millis(2).min(kill_at - Instant::now()));
        }
        server.kill().context("kill the server")?; // SIGKILL
        server.wait()?;
        if let Some(mut clients) = clients {
            // Their connections reset, the clients stop with an error; one stuck is killed.
            let give_up = Instant::now() + Duration::from_secs(30);
            while clients.try_wait()?.is_none() && Instant::now() < give_up {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = clients.kill();
            clients.wait()?;
        }
        Ok(end)
    }
}

/// Makes the ack log a round's bench appends to exist before the bench starts: a kill can
/// fall before the bench has opened it (while it starts or recovers), and the check then
/// reads it all the same. An empty file is an ack log of no runs to both. A lane that is not
/// durable starts each round from an empty one (its receipts may be lost by design, so each
/// round checks its own); a durable lane keeps every round's.
fn prepare_ack_log(acks: &Path, durable: bool) -> anyhow::Result<()> {
    fs::OpenOptions::new()
        .create(true)
        .append(durable)
        .write(!durable)
        .truncate(!durable)
        .open(acks)
        .with_context(|| format!("create the ack log {}", acks.display()))?;
    Ok(())
}

/// The last lines of a command's output, on one line.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}

/// Keeps what a post-mortem needs in a folder of its own: `failed-round-N` in the lane's
/// directory, or `failed-round-N-2`, `-3`, … where an earlier campaign in the same directory
/// kept its own round N's (which is then neither overwritten nor mixed with this one's). In
/// it: `WHAT.txt` (why the round failed), a copy of the database in `db/`, and the round's
/// outputs and ack log as the lane left them (`bench.log`, `serve.log`, `check.json`,
/// `acks`, those that exist).
fn keep_evidence(dir: &Path, db: &Path, round: u64, what: &str) -> anyhow::Result<Failure> {
    let copy = new_evidence_dir(dir, round)?;
    let mut note = fs::File::create(copy.join("WHAT.txt"))?;
    writeln!(note, "{what}")?;
    // A power cut can take the database's directory itself: that is said, not copied.
    match fs::read_dir(db) {
        Ok(entries) => {
            fs::create_dir(copy.join("db"))?;
            for entry in entries {
                let entry = entry?;
                if entry.file_type()?.is_file() {
                    fs::copy(entry.path(), copy.join("db").join(entry.file_name()))?;
                }
            }
        }
        Err(e) => writeln!(note, "(no copy of {}: {e})", db.display())?,
    }
    for name in ["bench.log", "serve.log", "check.json", "acks"] {
        let from = dir.join(name);
        if from.is_file() {
            fs::copy(&from, copy.join(name))
                .with_context(|| format!("copy {} aside", from.display()))?;
        }
    }
    Ok(Failure {
        round,
        what: what.to_string(),
        evidence: copy.display().to_string(),
    })
}

/// Creates the first of `failed-round-N`, `failed-round-N-2`, … that does not exist yet.
fn new_evidence_dir(dir: &Path, round: u64) -> anyhow::Result<PathBuf> {
    for n in 1u64.. {
        let name = match n {
            1 => format!("failed-round-{round}"),
            n => format!("failed-round-{round}-{n}"),
        };
        let path = dir.join(name);
        match fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("create {}", path.display())),
        }
    }
    unreachable!("some name is free")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rounds_ack_log_exists_before_its_bench_starts() {
        let dir = tempfile::tempdir().unwrap();
        let acks = dir.path().join("acks");
        // Absent: created empty, which both the bench and the check take as no runs.
        prepare_ack_log(&acks, true).unwrap();
        assert_eq!(fs::read(&acks).unwrap(), b"");
        assert!(crate::acklog::parse_bytes(b"").unwrap().runs.is_empty());
        // A durable lane keeps what earlier rounds recorded; one that is not starts afresh.
        fs::write(&acks, "glass-ack-log 1\nrun tpcb durable\n").unwrap();
        prepare_ack_log(&acks, true).unwrap();
        assert_eq!(
            fs::read_to_string(&acks).unwrap(),
            "glass-ack-log 1\nrun tpcb durable\n"
        );
        prepare_ack_log(&acks, false).unwrap();
        assert_eq!(fs::read(&acks).unwrap(), b"");
    }

    #[test]
    fn a_failed_round_keeps_its_evidence_beside_an_earlier_campaigns_of_the_same_round() {
        let lane = tempfile::tempdir().unwrap();
        let db = lane.path().join("db");
        fs::create_dir(&db).unwrap();
        fs::write(db.join("glass.db"), "pages of the first").unwrap();
        fs::write(db.join("wal-000001.log"), "a segment only the first has").unwrap();
        fs::write(lane.path().join("bench.log"), "the first bench").unwrap();
        fs::write(lane.path().join("acks"), "receipts of the first").unwrap();
        let first = keep_evidence(lane.path(), &db, 3, "first").unwrap();
        // A later campaign in the same directory, its database another one, fails its round 3.
        fs::remove_dir_all(&db).unwrap();
        fs::create_dir(&db).unwrap();
        fs::write(db.join("glass.db"), "pages of the second").unwrap();
        fs::write(lane.path().join("bench.log"), "the second bench").unwrap();
        fs::remove_file(lane.path().join("acks")).unwrap();
        let second = keep_evidence(lane.path(), &db, 3, "second").unwrap();
        assert_eq!(
            first.evidence,
            lane.path().join("failed-round-3").display().to_string()
        );
        assert_eq!(
            second.evidence,
            lane.path().join("failed-round-3-2").display().to_string()
        );
        let read = |f: &Failure, name: &str| fs::read_to_string(Path::new(&f.evidence).join(name));
        assert_eq!(read(&first, "WHAT.txt").unwrap(), "first\n");
        assert_eq!(read(&first, "db/glass.db").unwrap(), "pages of the first");
        assert_eq!(read(&first, "bench.log").unwrap(), "the first bench");
        assert_eq!(read(&first, "acks").unwrap(), "receipts of the first");
        assert_eq!(read(&second, "WHAT.txt").unwrap(), "second\n");
        assert_eq!(read(&second, "db/glass.db").unwrap(), "pages of the second");
        assert_eq!(read(&second, "bench.log").unwrap(), "the second bench");
        // Nothing of the first campaign's in the second's folder.
        assert!(read(&second, "db/wal-000001.log").is_err());
        assert!(read(&second, "acks").is_err());
        // A database a power cut took away entirely is said to be gone, not copied.
        fs::remove_dir_all(&db).unwrap();
        let third = keep_evidence(lane.path(), &db, 3, "third").unwrap();
        assert!(third.evidence.ends_with("failed-round-3-3"));
        assert!(read(&third, "WHAT.txt").unwrap().contains("(no copy of"));
    }

    #[test]
    fn lanes_cover_each_workload_way_and_durability_once() {
        let lanes = lanes_of(
            &["tpcb".to_string(), "voter".to_string(), "tpcb".to_string()],
            &[Via::Embedded, Via::Interactive, Via::Interactive],
        );
        assert_eq!(lanes.len(), 8);
        let names: Vec<String> = lanes.iter().map(Lane::name).collect();
        assert_eq!(
            names[..4],
            [
                "tpcb-durable",
                "tpcb-not-durable",
                "tpcb-durable-interactive",
                "tpcb-not-durable-interactive"
            ]
        );
        for via in Via::ALL {
            assert_eq!(Via::parse(via.name()), Some(via));
        }
        assert_eq!(Via::parse("server"), None);
    }

    /// A kill whose check a stop cut short is said to be unchecked, not left to be inferred
    /// from kills that outnumber checks.
    #[test]
    fn an_interrupted_campaign_names_the_kills_it_did_not_check() {
        let lanes = lanes_of(&["tpcb".to_string()], &[Via::Embedded]);
        let mut result = CampaignResult {
            lanes: lanes.iter().map(LaneResult::new).collect(),
            wall_s: 3.0,
            interrupted: true,
        };
        result.lanes[0].kills = 3;
        result.lanes[0].checks_passed = 3;
        result.lanes[1].kills = 2;
        result.lanes[1].checks_passed = 1;
        let text = result.render();
        assert!(text.contains("interrupted: the rounds running"), "{text}");
        assert!(!text.contains("not checked,"), "{text}");
        result.lanes[1].unchecked = 1;
        assert_eq!(result.unchecked(), 1);
        let text = result.render();
        assert!(
            text.contains("; 1 of the kills counted below was not checked, its check cut short"),
            "{text}"
        );
        assert!(result.holds(), "an unchecked kill is no failure");
        assert!(text.contains("5 kills in 3 s"), "{text}");
    }

    #[test]
    fn kills_spread_over_lanes_add_up() {
        let lanes = lanes_of(
            &["tpcc".into(), "tpcb".into(), "voter".into()],
            &[Via::Embedded],
        );
        assert_eq!(lanes.len(), 6);
        assert!(lanes[0].durable && !lanes[1].durable);
        let n = lanes.len() as u64;
        for kills in [1u64, 5, 6, 20, 1001] {
            let each: Vec<u64> = (0..n).map(|i| kills_of_lane(kills, n, i)).collect();
            assert_eq!(each.iter().sum::<u64>(), kills);
            assert!(each.iter().max().unwrap() - each.iter().min().unwrap() <= 1);
        }
    }
}
