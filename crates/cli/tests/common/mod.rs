//! What the command-line tests share: running the built `glass` binary and reading its output.
// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs the built `glass` binary with `args` and waits for it.
pub fn glass(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_glass"))
        .args(args)
        .output()
        .expect("run the glass binary")
}

/// A finished command's stdout then stderr, as text (lossily).
pub fn output_text(out: &Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

/// Output bytes as text (lossily).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A temporary path as the `&str` an argument list needs.
pub fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

/// The JSON a command wrote to `path` (`--json`).
pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Waits up to `within` for `child` to exit and returns its status; past that, kills it (with
/// its process group, where it leads one) and panics, naming `what`.
pub fn wait_or_kill(
    child: &mut std::process::Child,
    within: std::time::Duration,
    what: &str,
) -> std::process::ExitStatus {
    let give_up = std::time::Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > give_up {
            // SAFETY: kill(2) of the process group of a child this test started (refused
            // harmlessly where it leads none), then of the child itself.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not end within {within:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Sends `signal` to `child` (SIGINT is what Ctrl-C sends).
pub fn signal(child: &std::process::Child, signal: i32) {
    // SAFETY: a plain kill(2) of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
}

/// Whether a process still runs whose command line holds `needle` (a test's temporary path:
/// what it started and should have ended).
pub fn running_with(needle: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(needle))
            .unwrap_or(false)
    })
}

/// A `glass` command running in the background, its stdout and stderr going to files: for
/// tests that watch what it says and then signal it.
pub struct Running {
    pub child: std::process::Child,
    stdout: std::path::PathBuf,
    stderr: std::path::PathBuf,
}

impl Running {
    /// Starts `glass ARGS`, its outputs in files of `dir`.
    pub fn start(dir: &Path, args: &[&str]) -> Running {
        let (stdout, stderr) = (dir.join("stdout.txt"), dir.join("stderr.txt"));
        let child = Command::new(env!("CARGO_BIN_EXE_glass"))
            .args(args)
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("start the glass binary");
        Running {
            child,
            stdout,
            stderr,
        }
    }

    /// Waits until its stderr holds `needle`; panics if it ends first or 300 s pass.
    pub fn wait_for(&mut self, needle: &str) {
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(300);
        while !std::fs::read_to_string(&self.stderr)
            .unwrap()
            .contains(needle)
        {
            let ended = self.child.try_wait().unwrap();
            assert!(
                ended.is_none(),
                "it ended ({ended:?}) before saying {needle:?}: {}",
                std::fs::read_to_string(&self.stderr).unwrap()
            );
            assert!(
                std::time::Instant::now() < give_up,
                "it never said {needle:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Sends it SIGINT (as Ctrl-C does) `after` from now and waits (at most 60 s) for it to
    /// end: its exit status, stdout and stderr.
    pub fn interrupt(
        mut self,
        after: std::time::Duration,
    ) -> (std::process::ExitStatus, String, String) {
        std::thread::sleep(after);
        signal(&self.child, libc::SIGINT);
        let status = wait_or_kill(
            &mut self.child,
            std::time::Duration::from_secs(60),
            "it, after Ctrl-C,",
        );
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        (status, read(&self.stdout), read(&self.stderr))
    }
}
