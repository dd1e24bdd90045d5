//! Latency against load (the 2025 paper's Figure 4): `glass latency` ramps the load offered to
//! a `glass serve` until latency climbs, for several client modes in the same run.
//!
//! ```text
//!   for each mode: a closed-loop run ─► its peak P (txn/s)
//!   for each step s (0.1 … 1.1), for each mode not yet saturated:
//!       an open-loop run at s·P ─► (achieved txn/s, median and p99 latency from each
//!                                   transaction's scheduled start)
//!       saturated once it achieves under 90% of what it was offered
//!   ─► a table, JSON, and latency-W.svg/png: median (solid) and p99 (dashed) latency against
//!      achieved throughput, a colour per mode
//! ```
//!
//! Steps alternate between the modes, so that a slow spell of the machine falls on both.
//!
//! Ctrl-C or SIGTERM (with the handler `glass latency` installs:
//! [`crate::driver::interrupt_flag`]) ends the run then measuring, which is left out, and the
//! sweep: the table, JSON and figure hold the points measured before it
//! ([`LatencyResult::interrupted`]).

use std::path::{Path, PathBuf};

use protocol::Endpoint;
use serde::Serialize;

use crate::plot::{line_figure, Line, Lines};
use crate::remote::{run_remote_uncut, Mode};
use crate::run::{BenchConfig, Status};

/// Fractions of a mode's closed-loop peak offered, in order.
pub const DEFAULT_STEPS: [f64; 9] = [0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 1.0, 1.1];

/// How far each run's seed moves from the last's: more than any run's terminals × rounds, so
/// no two runs draw the same inputs. Inputs leave state behind (Voter's phone numbers use up
/// their votes), and a run replaying the first one's calls would measure refusals.
const RUN_SEED_STRIDE: u64 = 1 << 20;

/// A step at which a mode achieving less than this share of its offered rate is saturated:
/// later steps would only lengthen its queue.
const SATURATED: f64 = 0.9;

pub struct LatencyConfig {
    /// Workload, data, connections (`threads`), warm-up and duration of every run.
    pub bench: BenchConfig,
    pub endpoint: Endpoint,
    pub modes: Vec<Mode>,
    /// Fractions of each mode's closed-loop peak to offer.
    pub steps: Vec<f64>,
    /// Where the figure goes.
    pub out: PathBuf,
    /// Also write the curves as JSON here.
    pub json: Option<PathBuf>,
}

/// One measured point.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub offered_tps: f64,
    pub achieved_tps: f64,
    pub p50_us: u64,
    pub p99_us: u64,
}

/// A mode's curve.
#[derive(Clone, Debug, Serialize)]
pub struct Curve {
    pub mode: &'static str,
    /// Closed-loop throughput with the same connections.
    pub peak_tps: f64,
    pub closed_p50_us: u64,
    pub closed_p99_us: u64,
    pub points: Vec<Point>,
}

#[derive(Debug, Serialize)]
pub struct LatencyResult {
    pub workload: String,
    pub server: String,
    pub connections: usize,
    pub duration_s: f64,
    pub curves: Vec<Curve>,
    /// Ended early by Ctrl-C or SIGTERM: the curves hold the points measured before it (a
    /// mode whose peak was not measured has no curve).
    pub interrupted: bool,
    /// The share of the machine's CPU time other processes took over the whole sweep
    /// ([`crate::machine_cpu`]), the server's counted as the sweep's own; `None` where the
    /// server is not on this machine (or `/proc` cannot say).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub others_cpu_share: Option<f64>,
}

impl LatencyResult {
    pub fn render(&self) -> String {
        let mut out = format!(
            "latency against load: {} on {} with {} connections ({} s a point)\n",
            self.workload, self.server, self.connections, self.duration_s
        );
        out.push_str(&format!(
            "{:<12} {:>12} {:>12} {:>10} {:>10}\n",
            "mode", "offered/s", "achieved/s", "p50 µs", "p99 µs"
        ));
        for c in &self.curves {
            for p in &c.points {
                out.push_str(&format!(
                    "{:<12} {:>12.0} {:>12.0} {:>10} {:>10}\n",
                    c.mode, p.offered_tps, p.achieved_tps, p.p50_us, p.p99_us
                ));
            }
            out.push_str(&format!(
                "{:<12} {:>12} {:>12.0} {:>10} {:>10}   (closed loop: the peak)\n",
                c.mode, "-", c.peak_tps, c.closed_p50_us, c.closed_p99_us
            ));
        }
        if self.interrupted {
            out.push_str(
                "interrupted (Ctrl-C or SIGTERM): the run then measuring is left out, and the \
                 steps after it were not run\n",
            );
        }
        if let Some(line) = self
            .others_cpu_share
            .and_then(crate::machine_cpu::report_note)
        {
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    /// The figure: median (solid) and p99 (dashed) latency against achieved throughput.
    pub fn figure(&self) -> Lines {
        let mut lines = Vec::new();
        for (i, c) in self.curves.iter().enumerate() {
            let at = |f: fn(&Point) -> u64| -> Vec<(f64, f64)> {
                c.points
                    .iter()
                    .map(|p| (p.achieved_tps, f(p) as f64))
                    .collect()
            };
            lines.push(Line {
                name: format!("{} median", c.mode),
                points: at(|p| p.p50_us),
                ranges: Vec::new(),
                color: i,
                dashed: false,
            });
            lines.push(Line {
                name: format!("{} p99", c.mode),
                points: at(|p| p.p99_us),
                ranges: Vec::new(),
                color: i,
                dashed: true,
            });
        }
        Lines {
            title: format!(
                "{}: latency against throughput ({} connections)",
                self.workload, self.connections
            ),
            x_label: "achieved throughput (txn/s)".into(),
            y_label: "latency (µs)".into(),
            lines,
        }
    }
}

/// Runs the sweep; prints a status line per run.
pub fn run_latency(config: &LatencyConfig) -> anyhow::Result<LatencyResult> {
    if config.modes.is_empty() {
        anyhow::bail!(crate::UsageError("--modes names no mode".into()));
    }
    if config.steps.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
        anyhow::bail!(crate::UsageError(
            "--steps must be positive fractions of the peak".into()
        ));
    }
    let status = Status::new(config.bench.quiet);
    let quiet = BenchConfig {
        quiet: true,
        ..config.bench.clone()
    };
    let mut runs = 0u64;
    let mut next_run = |c: BenchConfig| {
        runs += 1;
        BenchConfig {
            seed: c.seed.wrapping_add(runs.wrapping_mul(RUN_SEED_STRIDE)),
            ..c
        }
    };
    let measure = |c: &BenchConfig, mode: Mode| run_remote_uncut(c, &config.endpoint, mode);
    let cpu = crate::local_server::watch(&config.endpoint);
    let mut curves = Vec::new();
    let mut interrupted = false;
    for &mode in &config.modes {
        status.say(format_args!(
            "{}: closed loop, for the peak...",
            mode.name()
        ));
        let Some(r) = measure(&next_run(quiet.clone()), mode)? else {
            status.say(format_args!("{}: interrupted; left out", mode.name()));
            interrupted = true;
            break;
        };
        let peak_tps = peak_to_scale(mode, r.tps)?;
        curves.push(Curve {
            mode: mode.name(),
            peak_tps,
            closed_p50_us: r.p50_us,
            closed_p99_us: r.p99_us,
            points: Vec::new(),
        });
    }
    let mut saturated = vec![false; curves.len()];
    if !interrupted {
        'steps: for &step in &config.steps {
            for (i, &mode) in config.modes.iter().enumerate() {
                if saturated[i] {
                    continue;
                }
                let rate = step * curves[i].peak_tps;
                let open = next_run(BenchConfig {
                    rate: Some(rate.max(1.0)),
                    ..quiet.clone()
                });
                let Some(r) = measure(&open, mode)? else {
                    status.say(format_args!(
                        "{}: offered {rate:.0}/s: interrupted; left out",
                        mode.name()
                    ));
                    interrupted = true;
                    break 'steps;
                };
                status.say(format_args!(
                    "{}: offered {:.0}/s, achieved {:.0}/s, p50 {} µs, p99 {} µs",
                    mode.name(),
                    rate,
                    r.tps,
                    r.p50_us,
                    r.p99_us
                ));
                curves[i].points.push(Point {
                    offered_tps: rate,
                    achieved_tps: r.tps,
                    p50_us: r.p50_us,
                    p99_us: r.p99_us,
                });
                saturated[i] = r.tps < SATURATED * rate;
            }
        }
    }
    let result = LatencyResult {
        workload: config.bench.workload.clone(),
        server: config.endpoint.to_string(),
        connections: config.bench.threads,
        duration_s: match config.bench.stop {
            crate::driver::Stop::Duration(d) => d.as_secs_f64(),
            crate::driver::Stop::Txns(_) => 0.0,
        },
        curves,
        interrupted,
        others_cpu_share: cpu.and_then(|w| w.share()),
    };
    write_outputs(config, &result)?;
    Ok(result)
}

fn write_outputs(config: &LatencyConfig, result: &LatencyResult) -> anyhow::Result<()> {
    if let Some(path) = &config.json {
        let text = serde_json::to_string_pretty(result)?;
        std::fs::write(path, text + "\n")
            .map_err(|e| anyhow::anyhow!("write {}: {e}", path.display()))?;
    }
    std::fs::create_dir_all(&config.out)
        .map_err(|e| anyhow::anyhow!("create {}: {e}", config.out.display()))?;
    let name = format!("latency-{}", result.workload);
    // Interrupted before its first open-loop point, it has no line to draw.
    let drawn = result.curves.iter().any(|c| !c.points.is_empty());
    if drawn && line_figure(&result.figure(), &config.out, &name)? {
        let path: &Path = &config.out;
        eprintln!("wrote {}/{name}.svg and .png", path.display());
    }
    Ok(())
}

/// A closed loop's peak, which every step is a fraction of: one that completed nothing (a
/// stalled server, a measured time too short for a busy machine) leaves no load to offer.
fn peak_to_scale(mode: Mode, tps: f64) -> anyhow::Result<f64> {
    if tps > 0.0 {
        return Ok(tps);
    }
    anyhow::bail!(
        "{}: the closed loop for the peak completed no transaction in its measured time, so \
         no step has a load to offer (lengthen --duration, or look at the server)",
        mode.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peak_of_nothing_is_an_error_naming_the_mode_not_a_curve_of_zeros() {
        assert_eq!(
            peak_to_scale(Mode::StoredProcedure, 1234.0).unwrap(),
            1234.0
        );
        for nothing in [0.0, f64::NAN] {
            let e = peak_to_scale(Mode::Interactive, nothing)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("interactive: ") && e.contains("--duration"),
                "{e}"
            );
        }
    }
}
