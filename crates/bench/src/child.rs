//! Processes a command starts and must not outlive it: a crash campaign's benches and servers,
//! a sweep's `processes`, a figure command's `glass serve`.
//!
//! Each is put in a process group of its own, so that a Ctrl-C at the terminal (SIGINT to the
//! foreground group) reaches the command alone, which then ends its children in its own order
//! (a client's run first, then its server); and the kernel sends the child `on_our_death`
//! should the command die first (killed with SIGKILL, it runs no cleanup of its own), so that
//! no server listens and no bench runs on with nobody to stop it.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Ties the process `command` starts to this one, as the module says: its own process group,
/// and `on_our_death` (a signal number: `libc::SIGKILL`, or `libc::SIGTERM` for a child that
/// ends in order) when this process dies.
///
/// The kernel sends `on_our_death` when the *thread* that started the child ends: start
/// children from a thread that lives as long as they should.
pub fn owned(command: &mut Command, on_our_death: i32) -> &mut Command {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    command.process_group(0);
    // SAFETY: the closure runs in the child between fork and exec and calls only prctl,
    // getppid and _exit, which are async-signal-safe, on no memory shared with the parent.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, on_our_death) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before the prctl: nobody would end this process.
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    command
}

/// Sends `signal` to the process `pid` (a child this process started and has not reaped).
pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) takes no memory; a child not yet waited for keeps its pid.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

/// Runs `command` to its end, as [`Command::output`] does, unless `stop` is set first: the
/// child is then killed (SIGKILL) and reaped, and the answer is `None`. So a Ctrl-C that sets
/// `stop` does not wait out a load or a check that may take minutes.
pub fn output_unless_stopped(
    command: &mut Command,
    stop: &AtomicBool,
) -> std::io::Result<Option<Output>> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Both pipes drained as the child writes, so that neither fills and blocks it.
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if stop.load(Ordering::Relaxed) {
            let _ = child.kill();
            child.wait()?;
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The pipes close with the child (unless it left a process of its own holding them).
    let (stdout, stderr) = (stdout.join(), stderr.join());
    Ok(status.map(|status| Output {
        status,
        stdout: stdout.unwrap_or_default(),
        stderr: stderr.unwrap_or_default(),
    }))
}

/// Reads `pipe` to its end on a thread of its own: what it read, once joined.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_run_to_its_end_gives_what_it_wrote_and_its_status() {
        let stop = AtomicBool::new(false);
        let out = output_unless_stopped(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            &stop,
        )
        .unwrap()
        .expect("not stopped");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
    }

    #[test]
    fn a_stop_kills_the_child_at_once() {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let setter = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            setter.store(true, Ordering::Relaxed);
        });
        let started = std::time::Instant::now();
        let out = output_unless_stopped(Command::new("sleep").arg("600"), &stop).unwrap();
        assert!(out.is_none());
        // Killed, not waited out (a generous bound: the sleep is ten minutes).
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{:?}",
            started.elapsed()
        );
    }

    /// An owned child is in a group of its own (Ctrl-C at the terminal does not reach it), and
    /// dies with the thread that started it.
    #[test]
    fn an_owned_child_has_its_own_group_and_dies_with_its_parent() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let child = owned(Command::new("sleep").arg("600"), libc::SIGKILL)
                .spawn()
                .unwrap();
            tx.send(child.id()).unwrap();
            // The thread ends here, without waiting: the kernel kills the child.
            std::mem::forget(child);
        })
        .join()
        .unwrap();
        let pid = rx.recv().unwrap() as libc::pid_t;
        // SAFETY: getpgid and waitpid on our own child.
        let group = unsafe { libc::getpgid(pid) };
        assert!(group == pid || group == -1, "group {group} of {pid}");
        let mut status = 0;
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFSIGNALED(status), "{status:#x}");
        assert_eq!(libc::WTERMSIG(status), libc::SIGKILL);
    }
}
