//! `glass section3`: the 2025 paper's section 3 (*Communication is the New Bottleneck*) on
//! this machine, from one command: Figure 3 (where a server's CPU goes, by thread
//! architecture), Figure 5 (server CPU per transaction in each phase: interactive, stored
//! procedure, and stored procedure over the kernel-bypass stand-in), Figure 4 (latency
//! against load, stored procedures and interactive) and the end-to-end latency table, each
//! beside the paper's numbers.
//!
//! ```text
//!   this process (the clients) pinned to one core ─┬─ glass serve W ... --trace  (a child,
//!                                                  │   pinned to the other core), once per bar
//!   Figure 3  YCSB-C stored procedures: dedicated (1 worker) and unified (a worker per
//!             connection), the split of the server threads' CPU
//!   Figure 5  per workload: interactive and stored procedure over TCP (dedicated, `workers`
//!             workers: one, the server's core), stored procedure over shared memory (1
//!             connection)
//!   Figure 4  per workload: glass latency, stored procedures and interactive
//!   end to end  per workload and mode: the client's median latency at the highest load before
//!             latency climbs, split into transaction execution and server networking (the
//!             server's CPU per transaction, from Figure 5) and the rest (client↔server)
//! ```
//!
//! The server is a child process of this one, started as `glass serve` with the same binary
//! (`std::env::current_exe`); its trace comes back as the JSON of `--trace-json`.
//!
//! Ctrl-C or SIGTERM ([`crate::driver::interrupt_flag`]) ends it in order: the run then
//! measuring is left out, a figure it cut short with it (Figure 4's sweep keeps the points
//! measured before it, as `glass latency` does), nothing after it runs, and the report and
//! JSON hold what was measured, saying where it stopped ([`PaperReport::interrupted`]).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use protocol::Endpoint;
use serde_json::{json, Value as Json};
use workloads::{Distribution, Mix, WorkloadOptions};

use crate::driver::Stop;
use crate::latency::{run_latency, LatencyConfig, LatencyResult};
use crate::remote::{run_remote_uncut, Mode};
use crate::run::BenchConfig;

/// What a paper command (`glass section3`, `glass isolation`) measured and wrote.
#[derive(Clone, Debug)]
pub struct PaperReport {
    /// The report, as written to its Markdown file.
    pub text: String,
    /// Where Ctrl-C or SIGTERM ended it, if it did ("Figure 5"): what came after was not run.
    pub interrupted: Option<String>,
}

/// How the section runs.
#[derive(Clone, Debug)]
pub struct Section3Config {
    /// The `glass` binary to start servers with.
    pub exe: PathBuf,
    pub out: PathBuf,
    /// Seconds measured per run (and per point of Figure 4).
    pub duration: f64,
    pub warmup: f64,
    /// Client connections (TPC-C gets one warehouse per two, as the paper's).
    pub connections: usize,
    /// Worker threads of the servers of Figures 4 and 5 (one site per core, as VoltDB runs;
    /// Figure 3's unified server has a worker per connection, as PostgreSQL a backend).
    pub workers: usize,
    pub server_core: usize,
    pub client_core: usize,
    /// YCSB records (the paper's 10 M do not fit the load time of a short run).
    pub ycsb_records: u64,
    /// Which of ycsb, voter, tpcc to run (Figure 3 needs ycsb).
    pub workloads: Vec<String>,
}

/// Voter's scale: its largest, 9,990,000 voters, so that calls rarely repeat a phone number,
/// as the paper's (VoltDB's) random phone numbers do not. At scale 1 the 10,000 voters used up
/// their two votes each within the first run, and every later call was a read-only refusal:
/// one round trip in both models, so stored procedures could not come out ahead.
const VOTER_SCALE: u64 = 999;

/// A workload as the section runs it: its `glass` arguments and its options.
pub(crate) struct Spec {
    pub(crate) name: &'static str,
    args: Vec<String>,
    options: WorkloadOptions,
}

pub(crate) fn specs(config: &Section3Config) -> Vec<Spec> {
    let warehouses = (config.connections / 2).max(1) as u64;
    vec![
        Spec {
            name: "ycsb",
            args: vec![
                "ycsb".into(),
                "--scale".into(),
                config.ycsb_records.to_string(),
                "--ycsb-workload".into(),
                "C".into(),
            ],
            options: WorkloadOptions {
                scale: config.ycsb_records,
                ycsb_workload: 'C',
                ycsb_distribution: Distribution::standard_for('C'),
                ..WorkloadOptions::default()
            },
        },
        Spec {
            name: "voter",
            args: vec!["voter".into(), "--scale".into(), VOTER_SCALE.to_string()],
            options: WorkloadOptions {
                scale: VOTER_SCALE,
                ..WorkloadOptions::default()
            },
        },
        Spec {
            name: "tpcc",
            args: vec![
                "tpcc".into(),
                "--scale".into(),
                warehouses.to_string(),
                "--mix".into(),
                "full".into(),
            ],
            options: WorkloadOptions {
                scale: warehouses,
                mix: Mix::Full,
                ..WorkloadOptions::default()
            },
        },
    ]
}

/// Checks that the server's and the clients' cores exist, and pins this process's clients
/// (the calling thread and threads it creates later) to theirs.
pub(crate) fn pin_clients(config: &Section3Config) -> anyhow::Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if config.server_core >= cores || config.client_core >= cores {
        anyhow::bail!(crate::UsageError(format!(
            "cores {} and {} do not both exist: this machine has {cores}",
            config.server_core, config.client_core
        )));
    }
    pin_to(config.client_core).context("pin the clients to their core")
}

/// Pins the calling thread (and threads it creates later) to `core`.
fn pin_to(core: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET and sched_setaffinity read and
    // write only the set given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A `glass serve` child.
pub(crate) struct ServerProc {
    child: Child,
    /// Kept open (and read at the end): a closed pipe would fail the server's last prints.
    stdout: BufReader<std::process::ChildStdout>,
    pub(crate) endpoint: Endpoint,
    trace: PathBuf,
}

impl ServerProc {
    /// Starts `glass serve ARGS EXTRA --trace`, pinned to the server core; waits for its
    /// address.
    pub(crate) fn start(
        config: &Section3Config,
        spec: &Spec,
        extra: &[&str],
        tag: &str,
    ) -> anyhow::Result<Self> {
        let trace = config.out.join(format!("trace-{}-{tag}.json", spec.name));
        let mut cmd = Command::new(&config.exe);
        cmd.arg("serve")
            .args(&spec.args)
            .args(extra)
            .arg("--trace")
            .arg("--trace-json")
            .arg(&trace)
            .arg("--quiet")
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        // Its stderr goes to an unlinked file, read only if it fails to start: what it said
        // (a library not built, a port taken) is then the error, not just its silence.
        let mut stderr = tempfile::tempfile().context("a file for the server's stderr")?;
        cmd.stderr(stderr.try_clone().context("the server's stderr")?);
        let core = config.server_core;
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: between fork and exec the closure only calls sched_setaffinity, which
            // is async-signal-safe.
            unsafe {
                cmd.pre_exec(move || pin_to(core));
            }
        }
        // Its own process group and SIGTERM should this command die (see `crate::child`):
        // a Ctrl-C or a kill of the figure command leaves no server listening.
        let mut child = crate::child::owned(&mut cmd, libc::SIGTERM)
            .spawn()
            .with_context(|| format!("start {} serve", config.exe.display()))?;
        let mut stdout = BufReader::new(child.stdout.take().context("the server's stdout")?);
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .context("read where the server listens")?;
        let Some(address) = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|rest| rest.split_whitespace().next())
        else {
            let _ = child.kill();
            let status = child.wait().context("wait for the server")?;
            let mut said = String::new();
            use std::io::{Read, Seek};
            let _ = stderr.rewind();
            let _ = stderr.read_to_string(&mut said);
            let said = said.lines().rev().find(|l| !l.trim().is_empty());
            anyhow::bail!(
                "`{} serve {} {}` did not start ({status}): {}",
                config.exe.display(),
                spec.args.join(" "),
                extra.join(" "),
                match said {
                    Some(said) => said.trim().to_string(),
                    None => format!("it printed {line:?}, not where it listens"),
                }
            );
        };
        let endpoint: Endpoint = address.parse().map_err(|e: String| anyhow::anyhow!(e))?;
        Ok(ServerProc {
            child,
            stdout,
            endpoint,
            trace,
        })
    }

    /// Stops the server (SIGTERM) and returns its trace.
    pub(crate) fn stop(mut self) -> anyhow::Result<Json> {
        crate::child::signal(self.child.id(), libc::SIGTERM);
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut self.stdout, &mut rest);
        let status = self.child.wait().context("wait for the server")?;
        if !status.success() {
            anyhow::bail!("the server exited with {status}: {}", rest.trim_end());
        }
        let text = std::fs::read_to_string(&self.trace)
            .with_context(|| format!("read {}", self.trace.display()))?;
        Ok(serde_json::from_str(&text)?)
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn bench_config(
    config: &Section3Config,
    spec: &Spec,
    connections: usize,
) -> BenchConfig {
    let mut b = BenchConfig::new(spec.name);
    b.options = spec.options.clone();
    b.threads = connections;
    b.stop = Stop::Duration(Duration::from_secs_f64(config.duration));
    b.warmup = Duration::from_secs_f64(config.warmup);
    b.quiet = true;
    b
}

/// One traced run: a server, a closed-loop client, the server's trace and the client's rate;
/// `None` where Ctrl-C or SIGTERM cut the run short (the server is then killed, its trace
/// unread).
fn traced(
    config: &Section3Config,
    spec: &Spec,
    server_args: &[&str],
    mode: Mode,
    connections: usize,
    tag: &str,
) -> anyhow::Result<Option<(Json, f64)>> {
    eprintln!("section 3: {} {tag}...", spec.name);
    let server = ServerProc::start(config, spec, server_args, tag)?;
    let Some(result) = run_remote_uncut(
        &bench_config(config, spec, connections),
        &server.endpoint,
        mode,
    )?
    else {
        return Ok(None);
    };
    let trace = server.stop()?;
    Ok(Some((trace, result.tps)))
}

fn f(v: &Json) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// Server CPU per transaction (µs): (transaction execution, server networking).
fn server_split(trace: &Json) -> (f64, f64) {
    let s = &trace["split_us_per_txn"];
    let txn = f(&s["transaction processing"]);
    (txn, f(&s["glass networking layer"]) + f(&s["kernel"]))
}

/// The paper's numbers, for the report.
const PAPER_FIG3: &str = "VoltDB (dedicated): transaction processing under 25%, DBMS networking \
    layer 39-40%, kernel the rest; PostgreSQL (unified): 55%, 4.3%, about 40% (YCSB-C, 48 \
    connections)";
const PAPER_FIG5: &str = "transaction processing's share of server CPU with stored procedures: \
    YCSB 33%, Voter 48%, TPC-C 70%; with DPDK and F-Stack 53.8%, 72%, 91%";
/// The paper's end-to-end table (µs): total, client↔server, server networking, execution.
const PAPER_E2E: [(&str, &str, [u32; 4]); 6] = [
    ("sp", "ycsb", [410, 312, 64, 34]),
    ("sp", "voter", [425, 343, 40, 42]),
    ("sp", "tpcc", [483, 312, 42, 129]),
    ("interactive", "ycsb", [410, 312, 64, 34]),
    ("interactive", "voter", [688, 572, 67, 49]),
    ("interactive", "tpcc", [1471, 710, 310, 451]),
];

/// The point of a curve at the highest load before latency climbs: the last point that
/// achieved at least 90% of its offer with a median under three times the curve's lowest.
fn knee(latency: &LatencyResult, mode: &str) -> Option<(f64, u64)> {
    let curve = latency.curves.iter().find(|c| c.mode == mode)?;
    let floor = curve.points.iter().map(|p| p.p50_us).min()?;
    curve
        .points
        .iter()
        .filter(|p| p.achieved_tps >= 0.9 * p.offered_tps && p.p50_us <= 3 * floor)
        .max_by(|a, b| a.achieved_tps.total_cmp(&b.achieved_tps))
        .map(|p| (p.achieved_tps, p.p50_us))
}

/// Runs the section; writes `section3.md`, `section3.json` and the figures into `out`.
pub fn run_section3(config: &Section3Config) -> anyhow::Result<PaperReport> {
    std::fs::create_dir_all(&config.out)
        .with_context(|| format!("create {}", config.out.display()))?;
    pin_clients(config)?;
    let watch = crate::machine_cpu::Watch::start();
    let c = config.connections;
    let specs: Vec<Spec> = specs(config)
        .into_iter()
        .filter(|s| config.workloads.iter().any(|w| w == s.name))
        .collect();
    if specs.first().map(|s| s.name) != Some("ycsb") {
        anyhow::bail!(crate::UsageError(
            "section3 needs ycsb among its workloads (Figure 3 is YCSB-C's)".into()
        ));
    }
    let mut report = String::new();
    let mut all = json!({
        "connections": c,
        "workers": config.workers,
        "duration_s": config.duration,
        "server_core": config.server_core,
        "client_core": config.client_core,
    });

    let shm_path = std::env::temp_dir().join(format!("glass-section3-{}", std::process::id()));
    // Where Ctrl-C or SIGTERM ended the measuring, if it did.
    let cut = measure(config, &specs, &shm_path, &mut report, &mut all)?;
    match &cut {
        Some(cut) => {
            eprintln!(
                "section 3: interrupted during {}; nothing after it ran",
                cut.during
            );
            report.push_str(&format!(
                "**Interrupted (Ctrl-C or SIGTERM) during {}**: the run then measuring is left \
                 out{}, and nothing after it ran.\n",
                cut.during, cut.kept
            ));
            all["interrupted"] = json!({ "during": cut.during });
        }
        None => all["interrupted"] = json!(false),
    }
    report.push_str(&format!(
        "\nThis machine: server pinned to core {}, clients to core {}; TCP over loopback (the \
         paper: two 16-vCPU machines, 60 µs between them, 512 connections, VoltDB's Java \
         procedures over SQL). Over loopback the receiving side's kernel path runs inside the \
         sender's write, so the server's \"network send\" carries part of the client's \
         receive. Shared memory stands in for DPDK and F-Stack.\n",
        config.server_core, config.client_core
    ));
    let idle = crate::cpu_idle::CpuIdle::probe();
    if let Some(line) = idle.note(true) {
        report.push_str(&format!("\n{line}.\n"));
    }
    all["cpu_idle"] = serde_json::to_value(&idle)?;
    let others = watch.share();
    if let Some(line) = others.and_then(crate::machine_cpu::report_note) {
        report.push_str(&format!("\n{line}.\n"));
    }
    all["others_cpu_share"] = json!(others);
    write(&config.out.join("section3.md"), &report)?;
    write(
        &config.out.join("section3.json"),
        &(serde_json::to_string_pretty(&all)? + "\n"),
    )?;
    let _ = std::fs::remove_file(&shm_path);
    Ok(PaperReport {
        text: report,
        interrupted: cut.map(|c| c.during),
    })
}

/// Where Ctrl-C or SIGTERM ended the section's measuring, and what it kept of that part.
struct Cut {
    during: String,
    kept: &'static str,
}

impl Cut {
    /// A figure of closed-loop runs, which needs every run: it is left out whole.
    fn figure(name: &str) -> Cut {
        Cut {
            during: name.to_string(),
            kept: ", with the rest of the figure",
        }
    }
}

/// Measures Figures 3, 5 and 4 and the end-to-end table into `report` and `all`; returns the
/// part Ctrl-C or SIGTERM ended, if it did.
fn measure(
    config: &Section3Config,
    specs: &[Spec],
    shm_path: &Path,
    report: &mut String,
    all: &mut Json,
) -> anyhow::Result<Option<Cut>> {
    let c = config.connections;
    let per_connection = c.to_string();
    let workers = config.workers.max(1).to_string();
    // Figure 3: YCSB-C stored procedures under each architecture.
    let ycsb = &specs[0];
    let tcp = ["--listen", "127.0.0.1:0"];
    let mut fig3 = Vec::new();
    for (arch, w) in [("dedicated", "1"), ("unified", per_connection.as_str())] {
        let args = [&tcp[..], &["--arch", arch, "--workers", w]].concat();
        let Some((trace, tps)) = traced(config, ycsb, &args, Mode::StoredProcedure, c, arch)?
        else {
            return Ok(Some(Cut::figure("Figure 3")));
        };
        let s = &trace["split_us_per_txn"];
        let parts = [
            f(&s["transaction processing"]),
            f(&s["glass networking layer"]),
            f(&s["kernel"]),
        ];
        let total: f64 = parts.iter().sum::<f64>().max(1e-9);
        fig3.push((
            arch,
            w.to_string(),
            tps,
            parts.map(|p| 100.0 * p / total),
            trace,
        ));
    }
    report.push_str(&format!(
        "## Figure 3: where the server's CPU goes (YCSB-C stored procedures, {c} connections)\n\n\
         | architecture | workers | txn/s | transaction processing | Glass's networking layer | kernel |\n\
         |---|---:|---:|---:|---:|---:|\n"
    ));
    for (arch, w, tps, p, _) in &fig3 {
        report.push_str(&format!(
            "| {arch} | {w} | {tps:.0} | {:.1}% | {:.1}% | {:.1}% |\n",
            p[0], p[1], p[2]
        ));
    }
    report.push_str(&format!("\nThe paper: {PAPER_FIG3}.\n\n"));
    crate::plot::stacked_bars(
        "Figure 3: the server's CPU, YCSB-C stored procedures",
        "share of server CPU (%)",
        fig3.iter().map(|x| x.0.to_string()).collect(),
        [
            "transaction processing",
            "Glass's networking layer",
            "kernel",
        ]
        .iter()
        .enumerate()
        .map(|(i, n)| (n.to_string(), fig3.iter().map(|x| x.3[i]).collect()))
        .collect(),
        &config.out,
        "section3-fig3",
    )?;
    all["figure3"] = Json::Array(
        fig3.iter()
            .map(|(arch, w, tps, _, trace)| json!({"arch": arch, "workers": w, "tps": tps, "trace": trace}))
            .collect(),
    );

    // Figure 5: phases per transaction, three bars per workload.
    let dedicated = [
        &tcp[..],
        &["--arch", "dedicated", "--workers", workers.as_str()],
    ]
    .concat();
    let shm_arg = shm_path.to_string_lossy().to_string();
    let shm = ["--shm", shm_arg.as_str(), "--workers", "1"];
    let mut fig5: Vec<(String, Json, f64)> = Vec::new();
    // The figure's labels: "ycsb int", "ycsb sp", "ycsb shm" (the table's are spelled out).
    let mut fig5_short: Vec<String> = Vec::new();
    for spec in specs {
        for (label, tag, args, mode, conns) in [
            ("interactive", "int", &dedicated[..], Mode::Interactive, c),
            (
                "stored procedure",
                "sp",
                &dedicated[..],
                Mode::StoredProcedure,
                c,
            ),
            (
                "sp, shared memory",
                "shm",
                &shm[..],
                Mode::StoredProcedure,
                1,
            ),
        ] {
            let Some((trace, tps)) = traced(config, spec, args, mode, conns, tag)? else {
                return Ok(Some(Cut::figure("Figure 5")));
            };
            fig5.push((format!("{} {label}", spec.name), trace, tps));
            fig5_short.push(format!("{} {tag}", spec.name));
        }
    }
    let phase_names = [
        "socket read",
        "request queuing",
        "procedure execution",
        "query execution",
        "response queuing",
        "network send",
        "decode (protocol)",
        "encode (protocol)",
    ];
    report.push_str(&format!(
        "## Figure 5: server CPU per transaction in each phase (µs)\n\n\
         Interactive and stored procedure: TCP over loopback, the dedicated architecture with \
         {workers} worker{}, {c} connections. Shared memory: the stand-in for the paper's \
         kernel bypass (DPDK cannot run here), one connection. \"Other\" is the rest of the \
         server threads' CPU: the event loop and, mostly, the kernel (epoll, wake-ups).\n\n\
         | run | txn/s | read | queue in | procedure | query | queue out | send | codec | other | total | transaction processing |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        if config.workers == 1 { "" } else { "s" }
    ));
    let mut series: Vec<(String, Vec<f64>)> = [
        "read",
        "queue in",
        "procedure",
        "query",
        "queue out",
        "send",
        "codec",
        "other",
    ]
    .iter()
    .map(|n| (n.to_string(), Vec::new()))
    .collect();
    for (label, trace, tps) in &fig5 {
        let us = &trace["us_per_txn"];
        let v: Vec<f64> = phase_names.iter().map(|n| f(&us[*n])).collect();
        let busy = f(&trace["user_us_per_txn"]) + f(&trace["system_us_per_txn"])
            - f(&trace["idle_poll_us_per_txn"]);
        let named: f64 = v.iter().sum();
        let other = (busy - named).max(0.0);
        let (txn, _) = server_split(trace);
        report.push_str(&format!(
            "| {label} | {tps:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {other:.2} | {busy:.2} | {:.0}% |\n",
            v[0], v[1], v[2], v[3], v[4], v[5], v[6] + v[7], 100.0 * txn / busy.max(1e-9)
        ));
        let cells = [v[0], v[1], v[2], v[3], v[4], v[5], v[6] + v[7], other];
        for (s, cell) in series.iter_mut().zip(cells) {
            s.1.push(cell);
        }
    }
    report.push_str(&format!("\nThe paper: {PAPER_FIG5}.\n\n"));
    crate::plot::stacked_bars(
        "Figure 5: server CPU per transaction by phase",
        "µs per transaction (int: interactive, shm: the bypass stand-in)",
        fig5_short,
        series,
        &config.out,
        "section3-fig5",
    )?;
    all["figure5"] = Json::Array(
        fig5.iter()
            .map(|(label, trace, tps)| json!({"run": label, "tps": tps, "trace": trace}))
            .collect(),
    );

    // Figure 4 and the end-to-end table.
    report.push_str(&format!(
        "## Figure 4: latency against load (stored procedures and interactive, {c} connections)\n\n\
         Figures: `latency-ycsb`, `latency-voter`, `latency-tpcc` (median solid, p99 dashed).\n\n\
         | workload | mode | peak txn/s (closed loop) | at the knee: txn/s | median µs |\n\
         |---|---|---:|---:|---:|\n"
    ));
    let mut e2e = Vec::new();
    let mut curves = Vec::new();
    let mut cut = None;
    for spec in specs {
        eprintln!("section 3: {} latency against load...", spec.name);
        let server = ServerProc::start(config, spec, &dedicated, "latency")?;
        let latency = run_latency(&LatencyConfig {
            bench: bench_config(config, spec, c),
            endpoint: server.endpoint.clone(),
            modes: vec![Mode::StoredProcedure, Mode::Interactive],
            steps: crate::latency::DEFAULT_STEPS.to_vec(),
            out: config.out.clone(),
            json: None,
        })?;
        server.stop()?;
        for curve in &latency.curves {
            let k = knee(&latency, curve.mode);
            report.push_str(&format!(
                "| {} | {} | {:.0} | {} | {} |\n",
                spec.name,
                curve.mode,
                curve.peak_tps,
                k.map_or("-".into(), |(t, _)| format!("{t:.0}")),
                k.map_or("-".into(), |(_, l)| l.to_string()),
            ));
            let label = if curve.mode == "sp" {
                "stored procedure"
            } else {
                "interactive"
            };
            let trace = fig5
                .iter()
                .find(|(l, _, _)| *l == format!("{} {label}", spec.name))
                .map(|x| &x.1);
            if let (Some((_, p50)), Some(trace)) = (k, trace) {
                let (txn, net) = server_split(trace);
                e2e.push((curve.mode, spec.name, p50 as f64, txn, net));
            }
        }
        curves.push(serde_json::to_value(&latency)?);
        if latency.interrupted {
            cut = Some(Cut {
                during: format!("Figure 4 ({})", spec.name),
                kept: "; its curves hold the points measured before it",
            });
            break;
        }
    }
    all["figure4"] = Json::Array(curves);
    report.push_str(
        "\nThe paper: YCSB-C the same in both models; Voter's stored procedures up to 72% lower \
         latency and 23% more throughput; TPC-C's stored-procedure peak 2.1× the interactive \
         one, at 3.5× lower latency.\n\n",
    );
    report.push_str(
        "## End to end: a transaction's median latency at the highest load before it climbs (µs)\n\n\
         Transaction execution and server networking are the server's CPU per transaction \
         (Figure 5's runs); client↔server is the rest of the client's median: both kernels' \
         loopback path, the client, and waiting.\n\n\
         | mode | workload | total | client↔server | server networking | transaction execution | the paper: total, client↔server, server networking, execution |\n\
         |---|---|---:|---:|---:|---:|---|\n",
    );
    for (mode, workload, total, txn, net) in &e2e {
        let paper = PAPER_E2E
            .iter()
            .find(|(m, w, _)| m == mode && w == workload)
            .map_or("-".to_string(), |(_, _, v)| {
                format!("{}, {}, {}, {}", v[0], v[1], v[2], v[3])
            });
        report.push_str(&format!(
            "| {mode} | {workload} | {total:.0} | {:.0} | {net:.1} | {txn:.1} | {paper} |\n",
            (total - txn - net).max(0.0)
        ));
    }
    all["end_to_end"] = Json::Array(
        e2e.iter()
            .map(|(m, w, total, txn, net)| {
                json!({"mode": m, "workload": w, "total_us": total, "execution_us": txn,
                       "server_networking_us": net})
            })
            .collect(),
    );
    Ok(cut)
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("write {}", path.display()))
}
