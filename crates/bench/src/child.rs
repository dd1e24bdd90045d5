//! Processes a command starts and must not outlive it: a crash campaign's benches and servers,
//! a sweep's `processes`, a figure command's `glass serve`.
//!
//! Each is put in a process group of its own, so that a Ctrl-C at the terminal (SIGINT to the
//! foreground group) reaches the command alone, which then ends its children in its own order
//! (a client's run first, then its server); and the kernel sends the child `on_our_death`
//! should the command die first (killed with SIGKILL, it runs no cleanup of its own), so that
//! no server listens and no bench runs on with nobody to stop it.

use std::process::Command;

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

#[cfg(test)]
mod tests {
    use super::*;

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
