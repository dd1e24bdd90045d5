//! The guest: a procedure process (`glass guest`, started by a server worker, never by hand).
//! It connects its channel, shuts itself in (resource limits, then for `container` Linux
//! namespaces and a cgroup, then a seccomp allow-list of system calls), opens the workload's
//! procedures against the tables its host names, and runs each call it is sent. Every
//! operation a procedure performs goes to the host as a message (`protocol::guest`): the guest
//! has no engine, only the procedure's code.
//!
//! What it applies, in order, and why:
//!
//! | step | what | contains |
//! |---|---|---|
//! | 1 | `RLIMIT_AS` (`--memory-mib`), `RLIMIT_CORE` 0 | a memory bomb fails its allocation and aborts; no core file is written |
//! | 2 | `container`: a cgroup with `memory` and `pids` limits, where `/sys/fs/cgroup` is writable | the same, counted by the kernel; no fork bomb |
//! | 3 | `container`: user, PID, mount, network, IPC and UTS namespaces (a fork makes the procedure PID 1 of its own) | it sees no other process and has no network but the channel it already holds |
//! | 4 | seccomp-bpf allow-list: reading and writing the open channel, memory, time, signals to itself, exit | opening a file or a socket, `kill`, `ptrace`, `exec` fail with `EPERM` |
//!
//! At `vm` the guest is first the VM's init (`crate::vm::enter_guest`), which forks the
//! procedure process; that process applies steps 1 and 4 inside the VM.
//!
//! A step the kernel refuses (no cgroup hierarchy, user namespaces switched off) is reported
//! on stderr, which the host keeps; the steps that matter for containment (1 and 4) must
//! succeed or the guest exits before running anything.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use protocol::deferred::Deferred;
use protocol::guest::{run_invocation, Catalog, Exchange, GuestMsg, HostMsg};
use protocol::shm::Region;
use protocol::{FrameBuffer, HEADER_LEN};
use workloads::Workload;

use crate::isolation::{shm_send, shm_wait, Channel, Isolation, SHM_BUFFER, WAKE_FD};

/// How a guest was started (its command line).
#[derive(Clone, Debug)]
pub struct GuestArgs {
    pub channel: Channel,
    /// The host's TCP address, Unix socket path, or shared-memory file.
    pub address: String,
    pub isolation: Isolation,
    pub memory_mib: u64,
    /// `shm-poll`: how long to spin on the channel before yielding (the host's
    /// [`crate::isolation::spin_for`], which knows where both sides run).
    pub spin: Duration,
}

/// Runs a guest until its host goes away. Errors are the guest's own set-up failures; a
/// procedure's failure is a message to the host, not an error here.
pub fn run(workload: Arc<dyn Workload>, args: &GuestArgs) -> Result<(), String> {
    let mut args = args.clone();
    if args.isolation == Isolation::Vm {
        // The VM's init: it returns in the procedure process, with what to connect to.
        args.address = crate::vm::enter_guest(args.channel)?;
    }
    let args = &args;
    limit_resources(args.memory_mib)?;
    let mut pipe = GuestPipe::connect(args)?;
    if args.isolation == Isolation::Container {
        enter_container(args.memory_mib);
    }
    enter_seccomp()?;
    serve(workload.as_ref(), &mut pipe)
}

fn serve(workload: &dyn Workload, pipe: &mut GuestPipe) -> Result<(), String> {
    let Some(HostMsg::Setup {
        workload: name,
        tables,
        indexes,
    }) = pipe.recv()?
    else {
        return Err("the host's first message was not Setup".to_string());
    };
    if name != workload.name() {
        return Err(format!(
            "the host serves {name}, this guest was started for {}",
            workload.name()
        ));
    }
    let procedures = workload
        .procedures(&Catalog::new(tables, indexes))
        .map_err(|e| format!("open the procedures: {e}"))?;
    pipe.send(&GuestMsg::Ready)?;
    let mut deferred = Deferred::default();
    loop {
        let (txn, args, timed) = match pipe.recv()? {
            None => return Ok(()),
            Some(HostMsg::Invoke { txn, args, timed }) => (txn, args, timed),
            Some(other) => return Err(format!("the host sent {other:?} outside a call")),
        };
        let reply = run_invocation(
            pipe,
            &mut deferred,
            txn,
            &args,
            timed,
            |tx, txn, args, out| procedures.call(tx, txn, args, out),
        );
        match reply {
            Some(reply) => pipe.send(&reply)?,
            None => return Ok(()),
        }
    }
}

impl Exchange for GuestPipe {
    fn exchange(&mut self, message: &GuestMsg) -> Result<Option<HostMsg>, String> {
        self.send(message)?;
        self.recv()
    }
}

/// The guest's end of its channel, and the buffers its messages are encoded into and copied
/// out to, kept from message to message (a row's answer is a kilobyte: grown afresh, its
/// buffer was reallocated some eight times a message).
struct GuestPipe {
    link: Link,
    out: Vec<u8>,
    frame: Vec<u8>,
}

enum Link {
    Stream {
        stream: Box<dyn ReadWrite>,
        buffer: FrameBuffer,
    },
    Shm {
        region: Region,
        seq: u64,
        wake: Option<UnixStream>,
        /// The parent's process id: when it changes, the parent is gone.
        host: u32,
        spin: Duration,
    },
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

impl GuestPipe {
    fn connect(args: &GuestArgs) -> Result<GuestPipe, String> {
        let connect_err = |e: std::io::Error| format!("connect to {}: {e}", args.address);
        let buffer = FrameBuffer::new(SHM_BUFFER as u32);
        let link = match args.channel {
            Channel::Tcp => {
                let s = TcpStream::connect(&args.address).map_err(connect_err)?;
                s.set_nodelay(true).map_err(connect_err)?;
                Link::Stream {
                    stream: Box::new(s),
                    buffer,
                }
            }
            Channel::Uds => Link::Stream {
                stream: Box::new(UnixStream::connect(&args.address).map_err(connect_err)?),
                buffer,
            },
            Channel::Virtio => Link::Stream {
                stream: Box::new(
                    std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(&args.address)
                        .map_err(connect_err)?,
                ),
                buffer,
            },
            Channel::ShmUds | Channel::ShmPoll => {
                let region = Region::open(&PathBuf::from(&args.address))
                    .map_err(|e| format!("map {}: {e}", args.address))?;
                let wake = if args.channel == Channel::ShmUds {
                    use std::os::fd::FromRawFd;
                    // SAFETY: the host put its pair's other end on WAKE_FD before exec, and
                    // nothing else in this process uses that descriptor.
                    Some(unsafe { UnixStream::from_raw_fd(WAKE_FD) })
                } else {
                    None
                };
                Link::Shm {
                    region,
                    seq: 0,
                    wake,
                    // Read at the first wait, after the guest has shut itself in: a PID
                    // namespace gives it another parent.
                    host: 0,
                    spin: args.spin,
                }
            }
        };
        Ok(GuestPipe {
            link,
            out: Vec::with_capacity(4096),
            frame: Vec::with_capacity(4096),
        })
    }

    fn send(&mut self, message: &GuestMsg) -> Result<(), String> {
        let out = &mut self.out;
        out.clear();
        message.encode(out);
        match &mut self.link {
            Link::Stream { stream, .. } => stream.write_all(out),
            Link::Shm {
                region, seq, wake, ..
            } => shm_send(region, true, *seq, out, wake.as_mut()),
        }
        .map_err(|e| format!("write to the host: {e}"))
    }

    /// The host's next message; `None` when it has gone.
    fn recv(&mut self) -> Result<Option<HostMsg>, String> {
        match &mut self.link {
            Link::Stream { stream, buffer } => loop {
                if let Some(frame) = buffer.next_frame().map_err(|e| e.to_string())? {
                    return HostMsg::decode(frame).map(Some).map_err(|e| e.to_string());
                }
                match buffer.read_from(stream) {
                    Ok(0) => return Ok(None),
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(None),
                    Err(e) => return Err(format!("read from the host: {e}")),
                }
            },
            Link::Shm {
                region,
                seq,
                wake,
                host,
                spin,
            } => {
                let next = *seq + 1;
                let asked = region.request_seq(0);
                match wake {
                    Some(w) => {
                        let mut byte = [0u8; 1];
                        match w.read(&mut byte) {
                            Ok(1) => {}
                            Ok(_) => return Ok(None),
                            Err(e) => return Err(format!("read from the host: {e}")),
                        }
                    }
                    None => {
                        if *host == 0 {
                            // SAFETY: getppid has no preconditions.
                            *host = unsafe { libc::getppid() } as u32;
                        }
                        let host = *host;
                        // SAFETY: getppid has no preconditions.
                        let gone = || unsafe { libc::getppid() } as u32 != host;
                        if !shm_wait(asked, next, *spin, gone) {
                            return Ok(None);
                        }
                    }
                }
                if asked.load(std::sync::atomic::Ordering::Acquire) != next {
                    return Err("the host woke its guest without a message".to_string());
                }
                *seq = next;
                let len = region
                    .request_len(0)
                    .load(std::sync::atomic::Ordering::Relaxed) as usize;
                let frame = &mut self.frame;
                if len < HEADER_LEN || !region.read(0, false, len, frame) {
                    return Err(format!("the host sent a frame of {len} bytes"));
                }
                HostMsg::decode(&frame[HEADER_LEN..])
                    .map(Some)
                    .map_err(|e| e.to_string())
            }
        }
    }
}

/// Step 1: the address-space limit, and no core files.
fn limit_resources(memory_mib: u64) -> Result<(), String> {
    let set = |resource, limit: u64, what: &str| {
        let rlim = libc::rlimit {
            rlim_cur: limit,
            rlim_max: limit,
        };
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(resource, &rlim) } != 0 {
            return Err(format!("set {what}: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    };
    set(libc::RLIMIT_CORE, 0, "RLIMIT_CORE")?;
    set(libc::RLIMIT_AS, memory_mib << 20, "RLIMIT_AS")
}

/// Steps 2 and 3: a cgroup and namespaces, each where the kernel allows; what was and was not
/// applied goes to stderr.
fn enter_container(memory_mib: u64) {
    let mut applied = Vec::new();
    let mut refused = Vec::new();
    match enter_cgroup(memory_mib) {
        Ok(path) => applied.push(format!("cgroup {path}")),
        Err(e) => refused.push(format!("cgroup: {e}")),
    }
    let flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWPID;
    // SAFETY: unshare changes only this process's namespaces; it is single-threaded here
    // (a user namespace requires it).
    if unsafe { libc::unshare(flags) } == 0 {
        applied.push("user, mount, network, IPC, UTS and PID namespaces".to_string());
        // The PID namespace takes effect for children: fork, and let the child (PID 1 of the
        // new namespace) run the procedures while this process waits and passes on how it
        // ended.
        pid_one();
    } else {
        refused.push(format!("namespaces: {}", std::io::Error::last_os_error()));
    }
    eprintln!(
        "glass guest {}: container: applied {}; not applied: {}",
        std::process::id(),
        if applied.is_empty() {
            "nothing".to_string()
        } else {
            applied.join("; ")
        },
        if refused.is_empty() {
            "nothing".to_string()
        } else {
            refused.join("; ")
        }
    );
}

/// Makes this process's procedures run as PID 2 of the new PID namespace: forks its init
/// (PID 1), which forks the process that returns. Each parent waits for its child and ends as
/// it ended. PID 2, not 1, because the kernel ignores a signal a namespace's init sends itself
/// without a handler, so an abort in PID 1 would not end it as it ends any other process.
fn pid_one() {
    relay_after_fork(); // the outer process, in the host's namespace, waits for PID 1
    relay_after_fork(); // PID 1 waits for PID 2, which returns
}

/// Forks; returns in the child (which dies with its parent), and in the parent waits for the
/// child and ends as it ended: by the same signal, or (in a namespace's init, which cannot
/// raise one on itself) with status 128 + the signal, which the parent above turns back into
/// the signal.
fn relay_after_fork() {
    // SAFETY: single-threaded, so fork is safe; the child continues with a copy of everything.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: prctl with PR_SET_PDEATHSIG only sets this process's attribute.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
        return;
    }
    if pid < 0 {
        eprintln!(
            "glass guest: fork into the PID namespace: {}",
            std::io::Error::last_os_error()
        );
        std::process::exit(1);
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            std::process::exit(1);
        }
    }
    let signal = if libc::WIFSIGNALED(status) {
        libc::WTERMSIG(status)
    } else if libc::WEXITSTATUS(status) > 128 {
        libc::WEXITSTATUS(status) - 128
    } else {
        std::process::exit(libc::WEXITSTATUS(status));
    };
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } == 1 {
        std::process::exit(128 + signal);
    }
    // SAFETY: restores the default action and raises the signal the child died of, so the
    // host sees the same death.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
    std::process::exit(128 + signal);
}

/// A cgroup of this process's own with memory and process-count limits: cgroup v2 where
/// `/sys/fs/cgroup` is unified, v1's `memory` and `pids` hierarchies otherwise.
fn enter_cgroup(memory_mib: u64) -> Result<String, String> {
    let pid = std::process::id();
    let name = format!("glass-guest-{pid}");
    let root = PathBuf::from("/sys/fs/cgroup");
    let write = |path: PathBuf, value: String| {
        std::fs::write(&path, value).map_err(|e| format!("{}: {e}", path.display()))
    };
    let bytes = (memory_mib << 20).to_string();
    if root.join("cgroup.controllers").exists() {
        let dir = root.join(&name);
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        write(dir.join("memory.max"), bytes)?;
        write(dir.join("pids.max"), "16".to_string())?;
        write(dir.join("cgroup.procs"), pid.to_string())?;
        return Ok(dir.display().to_string());
    }
    let memory = root.join("memory").join(&name);
    let pids = root.join("pids").join(&name);
    std::fs::create_dir(&memory).map_err(|e| format!("{}: {e}", memory.display()))?;
    write(memory.join("memory.limit_in_bytes"), bytes)?;
    write(memory.join("cgroup.procs"), pid.to_string())?;
    if std::fs::create_dir(&pids).is_ok() {
        write(pids.join("pids.max"), "16".to_string())?;
        write(pids.join("cgroup.procs"), pid.to_string())?;
    }
    Ok(format!("{} (v1: memory, pids)", memory.display()))
}

/// Removes the cgroups a guest with process id `pid` made for itself (it cannot once dead;
/// its host does, [`crate::isolation`]).
pub(crate) fn remove_cgroups(pid: u32) {
    let name = format!("glass-guest-{pid}");
    let root = PathBuf::from("/sys/fs/cgroup");
    for dir in [
        root.join(&name),
        root.join("memory").join(&name),
        root.join("pids").join(&name),
    ] {
        // The guest's own children die after it (their parent-death signal): a cgroup stays
        // busy until the last has gone.
        for _ in 0..100 {
            match std::fs::remove_dir(&dir) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                _ => break,
            }
        }
    }
}

/// Step 4: the system calls a guest needs, and no others (`EPERM`).
fn enter_seccomp() -> Result<(), String> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    let allowed = [
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_readv,
        libc::SYS_writev,
        libc::SYS_recvfrom,
        libc::SYS_sendto,
        libc::SYS_recvmsg,
        libc::SYS_sendmsg,
        libc::SYS_poll,
        libc::SYS_ppoll,
        libc::SYS_close,
        libc::SYS_futex,
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_mprotect,
        libc::SYS_brk,
        libc::SYS_madvise,
        libc::SYS_clock_gettime,
        libc::SYS_clock_nanosleep,
        libc::SYS_nanosleep,
        libc::SYS_sched_yield,
        libc::SYS_getpid,
        libc::SYS_gettid,
        libc::SYS_getppid,
        libc::SYS_getrandom,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigaction,
        libc::SYS_sigaltstack,
        libc::SYS_restart_syscall,
        libc::SYS_exit,
        libc::SYS_exit_group,
    ];
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> =
        allowed.into_iter().map(|s| (s, Vec::new())).collect();
    // Signals to itself only (abort raises SIGABRT with tgkill).
    let own = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        std::process::id() as u64,
    )
    .map_err(|e| e.to_string())?;
    rules.insert(
        libc::SYS_tgkill,
        vec![SeccompRule::new(vec![own]).map_err(|e| e.to_string())?],
    );
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        std::env::consts::ARCH
            .try_into()
            .map_err(|e| format!("seccomp on {}: {e:?}", std::env::consts::ARCH))?,
    )
    .map_err(|e| format!("seccomp filter: {e}"))?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e| format!("seccomp filter: {e:?}"))?;
    seccompiler::apply_filter(&program).map_err(|e| format!("apply seccomp: {e}"))
}
