//! What each isolation level contains (`glass serve --isolation LEVEL`), shown with the hostile
//! procedure library (`workloads::hostile`): an endless loop, a memory bomb, an abort, a null
//! dereference, a wild write, opening a file and opening a socket.
//!
//! Under `process`, `container` and `vm` every attack is contained: the call fails with an error
//! naming the cause, the hostile transaction's write is rolled back, and the server goes on
//! serving. Under `rust` the engine shares the procedure's address space and rights: the file
//! and the socket open, and a crash takes the whole server down. These tests are the rows of
//! the containment table in `docs/ARCHITECTURE.md`.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use client::Client;
use engine::{TxError, Value};
use protocol::Endpoint;

/// A `glass serve hostile` on a Unix socket in `dir`, with `extra` flags; the server's own
/// address-space limit is `server_mib` (so that a memory bomb it does not contain ends it, not
/// the machine).
struct Server {
    child: Child,
    endpoint: Endpoint,
}

impl Server {
    fn start(dir: &Path, extra: &[&str], server_mib: u64) -> Server {
        let socket = dir.join("glass.sock");
        let mut command = Command::new(env!("CARGO_BIN_EXE_glass"));
        command
            .args(["serve", "hostile", "--unix", socket.to_str().unwrap()])
            .args(["--workers", "2", "--quiet"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let limit = server_mib << 20;
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe; it runs in the child before exec.
            unsafe {
                command.pre_exec(move || {
                    let rlim = libc::rlimit {
                        rlim_cur: limit,
                        rlim_max: limit,
                    };
                    libc::setrlimit(libc::RLIMIT_AS, &rlim);
                    let none = libc::rlimit {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    libc::setrlimit(libc::RLIMIT_CORE, &none);
                    Ok(())
                });
            }
        }
        let mut child = command.spawn().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(
            line.starts_with("listening on unix://"),
            "serve printed {line:?}"
        );
        Server {
            child,
            endpoint: Endpoint::Unix(socket),
        }
    }

    fn client(&self) -> Client {
        Client::connect(&self.endpoint).unwrap()
    }

    /// Whether the server process has ended, waiting up to `within` for it to.
    fn ended(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if start.elapsed() > within {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    /// Stops the server as a user would (SIGTERM), so that it stops its procedure processes
    /// and removes their cgroups; kills it if it does not stop.
    fn drop(&mut self) {
        // SAFETY: kill(2) on a child process we started and have not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        if self.ended(Duration::from_secs(10)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn bump(client: &mut Client, cell: i64) -> i64 {
    match client.call("bump", vec![Value::Int(cell)]).unwrap()[..] {
        [Value::Int(v)] => v,
        ref other => panic!("bump returned {other:?}"),
    }
}

/// Each attack, its arguments, and what the error of a contained one must say, with the
/// procedures' time limit `limit` (the limit is long enough that the memory bomb always meets
/// its memory limit first, even on a loaded machine: 2 s for a process, 15 s for an emulated
/// VM).
fn attacks(port: u16, limit: &str) -> Vec<(&'static str, Vec<Value>, String)> {
    let attacks: Vec<(&'static str, Vec<Value>, &str)> = vec![
        ("spin", vec![], ""),
        ("bomb", vec![], "SIGABRT"),
        ("crash", vec![], "SIGABRT"),
        ("null", vec![], "SIGSEGV"),
        ("wild_write", vec![], "SIGSEGV"),
        (
            "open_file",
            vec![Value::Str("/etc/hostname".into())],
            "Operation not permitted",
        ),
        (
            "open_socket",
            vec![Value::Int(i64::from(port))],
            "Operation not permitted",
        ),
    ];
    attacks
        .into_iter()
        .map(|(attack, args, cause)| match attack {
            "spin" => (attack, args, format!("ran past its {limit} ms limit")),
            _ => (attack, args, cause.to_string()),
        })
        .collect()
}

/// Runs every attack against a server at `level` over `channel`; each is refused with its
/// cause, its write rolled back, and the server keeps serving another client throughout.
fn every_attack_is_contained(level: &str, channel: &str) {
    every_attack_is_contained_with(level, channel, "2000", &[]);
}

/// [`every_attack_is_contained`] with the procedures' time limit `limit` (ms) and `extra`
/// flags for the server.
fn every_attack_is_contained_with(level: &str, channel: &str, limit: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut flags = vec![
        "--isolation",
        level,
        "--channel",
        channel,
        "--procedure-timeout-ms",
        limit,
        "--procedure-memory-mib",
        "256",
    ];
    flags.extend_from_slice(extra);
    let server = Server::start(dir.path(), &flags, 16 << 10);
    let mut bystander = server.client();
    let mut attacker = server.client();
    // Cell 1 is the one every hostile procedure writes first.
    let mut cell1 = bump(&mut bystander, 1);
    for (attack, args, cause) in attacks(port, limit) {
        let result = attacker.call(attack, args);
        let message = match result {
            Err(TxError::Contained(m)) | Err(TxError::Invalid(m)) => m,
            other => panic!("{level}/{channel}: {attack} was not contained: {other:?}"),
        };
        assert!(
            message.contains(&cause),
            "{level}/{channel}: {attack}: {message:?} does not say {cause:?}"
        );
        // The hostile transaction's write was rolled back; the server still serves, the
        // attacker's connection included.
        cell1 += 1;
        assert_eq!(
            bump(&mut bystander, 1),
            cell1,
            "{level}/{channel} after {attack}"
        );
        assert_eq!(bump(&mut attacker, 2), bump(&mut bystander, 2) - 1);
    }
}

#[test]
fn a_procedure_process_contains_every_attack() {
    every_attack_is_contained("process", "uds");
}

#[test]
fn a_container_contains_every_attack() {
    every_attack_is_contained("container", "shm-poll");
}

#[test]
fn every_channel_carries_calls_and_notices_a_dead_or_silent_guest() {
    for channel in ["tcp", "uds", "shm-uds", "shm-poll"] {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(
            dir.path(),
            &[
                "--isolation",
                "process",
                "--channel",
                channel,
                "--procedure-timeout-ms",
                "400",
            ],
            16 << 10,
        );
        let mut client = server.client();
        let first = bump(&mut client, 3);
        for _ in 0..50 {
            bump(&mut client, 3);
        }
        let mut expected = first + 51;
        assert_eq!(bump(&mut client, 3), expected, "{channel}");
        for (attack, cause) in [("crash", "SIGABRT"), ("spin", "ran past its")] {
            match client.call(attack, vec![]) {
                Err(TxError::Contained(m)) => assert!(m.contains(cause), "{channel}: {m}"),
                other => panic!("{channel}: {attack}: {other:?}"),
            }
            // A fresh guest answers the next call.
            expected += 1;
            assert_eq!(bump(&mut client, 3), expected, "{channel} after {attack}");
        }
    }
}

/// `--isolation none` loads the procedures as a shared library: built here once, into a target
/// directory of its own, by the same compiler from the same source as the server under test.
fn native_library() -> String {
    static LIBRARY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LIBRARY
        .get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let own = root.join("target/native-procedures");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
            let status = Command::new(cargo)
                .current_dir(&root)
                .args(["build", "-p", "procedures-native", "--target-dir"])
                .arg(&own)
                .status()
                .expect("run cargo to build the native procedures");
            let library = own.join("debug/libprocedures_native.so");
            assert!(
                status.success() && library.is_file(),
                "building the native procedures failed"
            );
            library.to_str().unwrap().to_string()
        })
        .clone()
}

#[test]
fn no_isolation_contains_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let library = native_library();
    let none = ["--isolation", "none", "--native-library", library.as_str()];
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    {
        let server = Server::start(dir.path(), &none, 16 << 10);
        let mut client = server.client();
        let first = bump(&mut client, 5);
        assert_eq!(bump(&mut client, 5), first + 1);
        let read = client
            .call("open_file", vec![Value::Str("/etc/hostname".into())])
            .unwrap();
        assert!(matches!(read[..], [Value::Int(n)] if n > 0), "{read:?}");
        let connected = client
            .call("open_socket", vec![Value::Int(i64::from(port))])
            .unwrap();
        assert_eq!(connected, vec![Value::Int(1)]);
    }
    for (attack, signal) in [("crash", libc::SIGABRT), ("null", libc::SIGSEGV)] {
        let mut server = Server::start(dir.path(), &none, 16 << 10);
        let mut client = server.client();
        assert!(client.call(attack, vec![]).is_err(), "{attack}");
        let status = server
            .ended(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("the server survived {attack}"));
        assert_eq!(status.signal(), Some(signal), "{attack}: {status:?}");
    }
}

#[test]
fn the_rust_level_contains_only_what_safe_rust_prevents() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    {
        let server = Server::start(dir.path(), &["--isolation", "rust"], 16 << 10);
        let mut client = server.client();
        // The procedure has the server's rights: the file and the socket open.
        let read = client
            .call("open_file", vec![Value::Str("/etc/hostname".into())])
            .unwrap();
        assert!(matches!(read[..], [Value::Int(n)] if n > 0), "{read:?}");
        let connected = client
            .call("open_socket", vec![Value::Int(i64::from(port))])
            .unwrap();
        assert_eq!(connected, vec![Value::Int(1)]);
        // An endless loop holds its worker for good: the call never returns.
        let endpoint = server.endpoint.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut spinner = Client::connect(&endpoint).unwrap();
            let _ = tx.send(spinner.call("spin", vec![]).is_ok());
        });
        assert!(rx.recv_timeout(Duration::from_millis(800)).is_err());
        // Nor can the server stop cleanly while it spins: kill it.
        let mut server = server;
        let _ = server.child.kill();
    }
    // A crash, a bad pointer or a wild write takes the whole server down.
    for (attack, signal) in [
        ("crash", libc::SIGABRT),
        ("null", libc::SIGSEGV),
        ("wild_write", libc::SIGSEGV),
        ("bomb", libc::SIGABRT),
    ] {
        let mut server = Server::start(dir.path(), &["--isolation", "rust"], 2 << 10);
        let mut client = server.client();
        assert!(client.call(attack, vec![]).is_err(), "{attack}");
        let status = server
            .ended(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("the server survived {attack}"));
        assert_eq!(status.signal(), Some(signal), "{attack}: {status:?}");
    }
}

/// The guest kernel `bench/vm/prepare.sh` fetched (`.ci/run` runs it), or why the `vm` rows
/// cannot run here.
fn vm_guest() -> Result<String, String> {
    let dir = std::env::var("GLASS_VM_GUEST")
        .unwrap_or_else(|_| format!("{}/../../target/vm-guest", env!("CARGO_MANIFEST_DIR")));
    if !Path::new(&dir).join("vmlinuz").is_file() {
        return Err(format!("no guest kernel in {dir} (bench/vm/prepare.sh)"));
    }
    let qemu = Command::new("qemu-system-x86_64").arg("--version").output();
    if !qemu.is_ok_and(|o| o.status.success()) {
        return Err("no qemu-system-x86_64 (bench/vm/prepare.sh)".to_string());
    }
    Ok(dir)
}

/// The `vm` rows run the guests under QEMU's software emulation (`--vm-accel tcg`): the
/// boundary and the containment are a VM's either way, and this project's machines have a
/// `/dev/kvm` that opens but does not boot a guest (nested virtualization).
#[test]
fn a_virtual_machine_contains_every_attack() {
    a_virtual_machine_contains_every_attack_over("virtio");
}

/// The same with the guest's channel in memory shared with its VM (`ivshmem-plain`, polled
/// by both sides, the paper's `vm_shm`): no QEMU code on a message's path, so the host
/// notices a dead guest by QEMU's exit and a silent one by its time limit alone.
#[test]
fn a_virtual_machine_over_shared_memory_contains_every_attack() {
    a_virtual_machine_contains_every_attack_over("shm-poll");
}

fn a_virtual_machine_contains_every_attack_over(channel: &str) {
    let dir = match vm_guest() {
        Ok(dir) => dir,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let accel = ["--vm-accel", "tcg", "--vm-guest", dir.as_str()];
    every_attack_is_contained_with("vm", channel, "15000", &accel);
}

#[test]
fn a_vm_is_refused_with_what_it_lacks_and_takes_only_its_own_channel() {
    let serve = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_glass"))
            .args(["serve", "hostile", "--unix", "/tmp/x.sock"])
            .args(extra)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{extra:?}");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().to_str().unwrap();
    let err = serve(&[
        "--isolation",
        "vm",
        "--vm-accel",
        "tcg",
        "--vm-guest",
        missing,
    ]);
    assert!(
        err.contains("bench/vm/prepare.sh") || err.contains("qemu-system-x86_64"),
        "{err}"
    );
    let err = serve(&["--isolation", "vm", "--channel", "shm-uds"]);
    assert!(
        err.contains("over channel virtio, tcp or shm-poll"),
        "{err}"
    );
    let err = serve(&["--isolation", "process", "--channel", "virtio"]);
    assert!(err.contains("only in a virtual machine"), "{err}");
}

/// Ctrl-C ends `glass isolation` in order: the workload then measuring is left out, none
/// after it runs, and the workloads measured before it are written, saying so; it exits 130.
#[test]
fn ctrl_c_ends_the_isolation_command_with_the_workloads_measured() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, stderr) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args([
            "isolation",
            "--workloads",
            "ycsb,voter,tpcc",
            "--levels",
            "rust",
            "--ycsb-records",
            "2000",
            "--connections",
            "2",
            "--duration",
            "0.5",
            "--warmup",
            "0.1",
            "--steps",
            "0.5",
            "--rounds",
            "1",
            "--out",
            dir.path().to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    // YCSB is done; the signal falls in Voter's runs.
    let give_up = Instant::now() + Duration::from_secs(300);
    while !read(&stderr).contains("isolation: voter") {
        assert!(child.try_wait().unwrap().is_none(), "{}", read(&stderr));
        assert!(Instant::now() < give_up, "{}", read(&stderr));
        std::thread::sleep(Duration::from_millis(20));
    }
    // SIGINT, as Ctrl-C sends it. SAFETY: a plain kill(2) of the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = child.wait().unwrap();
    let (printed, said) = (read(&stdout), read(&stderr));
    assert_eq!(status.code(), Some(130), "{status}: {printed}{said}");
    assert!(
        said.contains("isolation: interrupted during voter; left out, nothing after it ran"),
        "{said}"
    );
    assert!(!said.contains("isolation: tpcc"), "{said}");
    let md = read(&dir.path().join("isolation.md"));
    assert!(md.contains("## ycsb:"), "{md}");
    assert!(!md.contains("## voter:"), "{md}");
    assert!(
        md.contains("Interrupted (Ctrl-C or SIGTERM) during voter"),
        "{md}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&read(&dir.path().join("isolation.json"))).unwrap();
    assert_eq!(json["interrupted"]["during"], "voter", "{json}");
    let workloads = json["workloads"].as_array().unwrap();
    assert_eq!(workloads.len(), 1, "{json}");
    assert_eq!(workloads[0]["workload"], "ycsb", "{json}");
}

#[test]
fn the_isolation_command_writes_figures_6_and_7_with_the_papers_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args([
            "isolation",
            "--workloads",
            "ycsb",
            "--levels",
            "rust,process:uds",
            "--ycsb-records",
            "2000",
            "--connections",
            "2",
            "--duration",
            "0.3",
            "--warmup",
            "0.1",
            "--steps",
            "0.5",
            "--rounds",
            "2",
            "--out",
            dir.path().to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let md = std::fs::read_to_string(dir.path().join("isolation.md")).unwrap();
    assert!(md.contains("Figure 7") && md.contains("Figure 6"), "{md}");
    assert!(
        md.contains("58%, 70% and 63%"),
        "the paper's numbers beside ours: {md}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("isolation.json")).unwrap())
            .unwrap();
    // How the machine's idle CPUs wait, which every crossing's wake-ups pay for, is recorded.
    assert!(json["cpu_idle"].is_object(), "{}", json["cpu_idle"]);
    assert_eq!(json["interrupted"], false, "{json}");
    // The share of the machine's CPU others took while it measured (its servers and their
    // procedure processes are its own): a fraction, whatever else this machine runs.
    let others = json["others_cpu_share"].as_f64().expect("others_cpu_share");
    assert!((0.0..=1.0).contains(&others), "{others}");
    let levels = json["workloads"][0]["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    let phase = |i: usize, name: &str| levels[i]["trace"]["us_per_txn"][name].as_f64().unwrap();
    // In the server, no boundary; in a process, every call crosses one.
    assert_eq!(phase(0, "isolation overhead"), 0.0);
    assert!(phase(1, "isolation overhead") > 0.0, "{}", levels[1]);
    for level in levels {
        assert!(level["tps"].as_f64().unwrap() > 0.0, "{level}");
        // Two rounds, the reported throughput their median (the higher of two).
        let rounds: Vec<f64> = level["tps_rounds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        assert_eq!(rounds.len(), 2, "{level}");
        let most = rounds.iter().cloned().fold(0.0, f64::max);
        assert_eq!(level["tps"].as_f64().unwrap(), most, "{level}");
        assert!(!level["points"].as_array().unwrap().is_empty(), "{level}");
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args(["isolation", "--levels", "rust:tcp"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    // A server that cannot start says why, through the command that started it: here a VM
    // level with no guest kernel where it is told to look (or, first, no QEMU).
    let missing = dir.path().join("no-guest");
    let failed = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args(["isolation", "--workloads", "ycsb", "--ycsb-records", "1000"])
        .args(["--levels", "vm", "--vm-accel", "tcg", "--vm-guest"])
        .arg(&missing)
        .args(["--out", dir.path().to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{err}");
    assert!(
        err.contains("did not start")
            && (err.contains(missing.to_str().unwrap()) || err.contains("qemu-system-x86_64")),
        "{err}"
    );
}

#[test]
fn every_workload_runs_at_every_level_and_stays_consistent() {
    let module = wasm_module();
    let library = native_library();
    for workload in ["tpcc", "tpcb", "ycsb", "voter"] {
        for level in ["none", "rust", "wasm", "container"] {
            let extra = match level {
                "none" => vec!["--native-library", library.as_str()],
                "rust" => vec![],
                "wasm" => vec!["--wasm-module", module.as_str()],
                _ => vec!["--channel", "uds"],
            };
            runs_and_stays_consistent(workload, level, &extra);
        }
    }
    // Each channel of a procedure process, with a different workload each.
    for (workload, channel) in [
        ("tpcc", "uds"),
        ("tpcb", "shm-uds"),
        ("ycsb", "tcp"),
        ("voter", "shm-poll"),
    ] {
        runs_and_stays_consistent(workload, "process", &["--channel", channel]);
    }
}

/// Every workload with each worker's guest in a VM (under QEMU's emulation, as
/// `a_virtual_machine_contains_every_attack` says why).
#[test]
fn every_workload_runs_in_a_virtual_machine_and_stays_consistent() {
    let dir = match vm_guest() {
        Ok(dir) => dir,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    // Each channel: the virtio-serial port, TCP over the guest's network, and memory the VM
    // shares with its worker.
    for (workload, channel) in [
        ("tpcc", "virtio"),
        ("tpcb", "tcp"),
        ("ycsb", "shm-poll"),
        ("voter", "shm-poll"),
    ] {
        let extra = [
            "--channel",
            channel,
            "--vm-accel",
            "tcg",
            "--vm-guest",
            dir.as_str(),
        ];
        runs_and_stays_consistent(workload, "vm", &extra);
    }
}

/// A `glass serve WORKLOAD --isolation LEVEL` with `extra` flags and two workers, driven by a
/// one-second `glass bench --server` of stored-procedure calls: calls commit, and the server's
/// consistency check holds when it stops.
fn runs_and_stays_consistent(workload: &str, level: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("glass.sock");
    let socket_arg = socket.to_str().unwrap();
    let scale = if workload == "ycsb" { "2000" } else { "1" };
    let mut child = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args(["serve", workload, "--scale", scale, "--unix", socket_arg])
        .args(["--workers", "2", "--isolation", level])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("listening on unix://"),
        "{workload} at {level}: {line:?}"
    );
    let bench = Command::new(env!("CARGO_BIN_EXE_glass"))
        .args(["bench", workload, "--scale", scale, "--server"])
        .arg(format!("unix://{socket_arg}"))
        .args(["--mode", "sp", "--connections", "3", "--duration", "1"])
        .args(["--warmup", "0", "--quiet"])
        .output()
        .unwrap();
    assert!(
        bench.status.success(),
        "{workload} at {level}: {}",
        String::from_utf8_lossy(&bench.stderr)
    );
    let said = String::from_utf8_lossy(&bench.stdout);
    // "... (N committed, ...": some calls went through the guest and committed.
    let committed = said
        .split(" committed")
        .next()
        .and_then(|before| before.rsplit(['(', ' ']).next())
        .and_then(|n| n.parse::<u64>().ok());
    assert!(
        committed.is_some_and(|n| n > 0),
        "{workload} at {level}: {said}"
    );
    // SAFETY: kill(2) on a child process we started and have not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "{workload} at {level} {extra:?}: {status:?} {rest}"
    );
    assert!(
        rest.contains("conditions hold"),
        "{workload} at {level}: {rest}"
    );
}

/// `--isolation wasm` needs the procedures built for WebAssembly: where `.ci/run` (or a user,
/// as the README says) built them, or else built here once, into a target directory of their
/// own so that this build never waits on the one running the tests.
fn wasm_module() -> String {
    static MODULE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MODULE
        .get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let built = root.join("target/wasm32-wasip1/release/procedures_wasm.wasm");
            if built.is_file() {
                return built.to_str().unwrap().to_string();
            }
            let own = root.join("target/wasm-procedures");
            let module = own.join("wasm32-wasip1/release/procedures_wasm.wasm");
            let installed = Command::new("rustup")
                .args(["target", "list", "--installed"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).contains("wasm32-wasip1"))
                .unwrap_or(false);
            if !installed {
                let added = Command::new("rustup")
                    .args(["target", "add", "wasm32-wasip1"])
                    .status()
                    .expect("run rustup to add the wasm32-wasip1 target");
                assert!(added.success(), "rustup target add wasm32-wasip1 failed");
            }
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
            let status = Command::new(cargo)
                .current_dir(&root)
                .args(["build", "--release", "-p", "procedures-wasm"])
                .args(["--target", "wasm32-wasip1", "--target-dir"])
                .arg(&own)
                .status()
                .expect("run cargo to build the WebAssembly procedures");
            assert!(
                status.success() && module.is_file(),
                "building the WebAssembly procedures failed"
            );
            module.to_str().unwrap().to_string()
        })
        .clone()
}

/// A server of the hostile procedures at `--isolation wasm`, with `extra` flags.
fn wasm_server(dir: &Path, extra: &[&str]) -> Server {
    let module = wasm_module();
    let mut args = vec!["--isolation", "wasm", "--wasm-module", &module];
    args.extend_from_slice(extra);
    Server::start(dir, &args, 16 << 10)
}

#[test]
fn a_webassembly_sandbox_contains_every_attack() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = wasm_server(
        dir.path(),
        &[
            "--procedure-timeout-ms",
            "2000",
            "--procedure-memory-mib",
            "256",
        ],
    );
    let mut bystander = server.client();
    let mut attacker = server.client();
    let mut cell1 = bump(&mut bystander, 1);
    let refused = [
        ("spin", vec![], "ran past its 2000 ms limit"),
        ("bomb", vec![], "memory allocation"),
        ("crash", vec![], "an abort"),
        ("wild_write", vec![], "outside its sandbox"),
        (
            "open_file",
            vec![Value::Str("/etc/hostname".into())],
            "read /etc/hostname",
        ),
        (
            "open_socket",
            vec![Value::Int(i64::from(port))],
            "connect to 127.0.0.1",
        ),
    ];
    for (attack, args, cause) in refused {
        let message = match attacker.call(attack, args) {
            Err(TxError::Contained(m)) | Err(TxError::Invalid(m)) => m,
            other => panic!("wasm: {attack} was not contained: {other:?}"),
        };
        assert!(
            message.contains(cause),
            "wasm: {attack}: {message:?} does not say {cause:?}"
        );
        cell1 += 1;
        assert_eq!(bump(&mut bystander, 1), cell1, "wasm after {attack}");
    }
    // A null pointer is address 0 of the sandbox's own memory: the read succeeds, reaches
    // nothing of the server's, and its transaction commits like any other.
    let read = attacker.call("null", vec![]).unwrap();
    assert_eq!(read.len(), 1, "{read:?}");
    cell1 += 1;
    assert_eq!(
        bump(&mut bystander, 1),
        cell1 + 1,
        "the null read's bump committed"
    );
}

#[test]
fn a_webassembly_server_names_its_compiled_functions_in_a_perf_map_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let server = wasm_server(dir.path(), &["--wasm-perfmap"]);
    let map = PathBuf::from(format!("/tmp/perf-{}.map", server.child.id()));
    let mut client = server.client();
    let before = bump(&mut client, 1);
    assert_eq!(
        bump(&mut client, 1),
        before + 1,
        "the module runs with its map"
    );
    let text = std::fs::read_to_string(&map).unwrap_or_default();
    let _ = std::fs::remove_file(&map);
    // "START LENGTH NAME", hexadecimal, one line per compiled function.
    let invoke = text
        .lines()
        .find(|l| l.ends_with(" glass_invoke"))
        .unwrap_or_else(|| panic!("{} names no glass_invoke:\n{text}", map.display()));
    let mut fields = invoke.split(' ');
    let start = fields.next().unwrap().trim_start_matches("0x");
    let length = fields.next().unwrap();
    assert!(u64::from_str_radix(start, 16).unwrap() > 0, "{invoke}");
    assert!(u64::from_str_radix(length, 16).unwrap() > 0, "{invoke}");
}
