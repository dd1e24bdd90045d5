//! How far a server keeps stored procedures from its engine (`glass serve --isolation`), and
//! the host side of the procedure boundary (`protocol::guest`).
//!
//! ```text
//!   rust        worker thread ── procedure ── engine              one address space
//!   process     worker thread ── engine                           the procedure in a process
//!                   │ channel: Invoke, Results ▲ Ops, Returned     of its own, paired with
//!                   ▼                          │                  the worker; rlimits and a
//!               procedure process (glass guest)                   seccomp allow-list
//!   container   as process, and the guest also enters user, PID, mount, network and IPC
//!               namespaces and a cgroup (where the kernel allows)
//!   vm          as process, the guest in a virtual machine of its own (`crate::vm`: QEMU,
//!               KVM or its software emulation), over a virtio-serial port
//! ```
//!
//! Each worker thread that runs a procedure takes one of the guests the server started before
//! it listened (`prestart`), or starts its own, at its first call (a thread-local [`Guest`])
//! and keeps it; a guest that dies, runs past its time limit or breaks the boundary's
//! protocol is killed, its transaction is rolled back with a [`TxError::Contained`] naming the
//! cause, and the next call starts a fresh one. Nothing a guest sends is trusted: every frame is
//! decoded strictly, every length checked against the buffer, and its operations go through
//! the same checks as a client's.
//!
//! Channels, as in the 2025 paper's Figure 7:
//!
//! | channel    | carries frames over             | waits by |
//! |------------|---------------------------------|----------|
//! | `tcp`      | a loopback TCP connection       | a blocking read |
//! | `uds`      | a Unix-domain socket            | a blocking read |
//! | `shm-uds`  | a shared-memory buffer pair     | a blocking read of one byte on a Unix socket pair, written after each frame |
//! | `shm-poll` | a shared-memory buffer pair     | spinning on a sequence number, then yielding, then napping |
//! | `virtio`   | (`vm` only) a virtio-serial port, whose host end QEMU connects to a Unix socket | a blocking read |
//!
//! At `vm`, `tcp` is the guest's own TCP through QEMU's user-mode network to a Unix socket
//! (`crate::vm`).
//!
//! `shm-poll` spins for a bounded time only ([`SPIN`]), then yields and naps: this machine has
//! two cores, and a host and a guest that both spun without end would take both from the
//! client and each other. Where the worker and its guest can only run on one CPU between them
//! (a server pinned to a core, its guest inheriting the pin) neither spins: the peer it waits
//! for needs that CPU to answer. A guest given a core of its own (`--procedure-core`) spins, and
//! so does its pinned worker ([`spin_for`]). On a machine with cores to spare the spin could be
//! unbounded.
//!
//! Phase 5 (isolation overhead) of a call is its wall time less the engine's time on its
//! operations (phase 6) and the guest's own time in the procedure's code (phase 4, which the
//! guest reports): the serialization on both sides, the channel's system calls, and the
//! waits for the other side to be scheduled.

use std::cell::RefCell;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use engine::{Tx, TxError, TxResult, Value};
use protocol::guest::{
    answer_ops_with, check_returned_write, error_of, is_ops, GuestMsg, HostMsg, Spare,
};
use protocol::shm::Region;
use protocol::{ErrorClass, FrameBuffer, Op, OpResult, HEADER_LEN};

use crate::handler::{OpScratch, Shared};
use crate::trace::Tracer;

/// Where stored procedures run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// In the worker's thread, as native code loaded from a shared library (`dlopen`) and
    /// called through raw pointers: no isolation at all (the paper's "none").
    None,
    /// In the worker's thread, as Rust code compiled into the server: the language's
    /// isolation only (the paper's "language" level).
    Rust,
    /// In a process of its own per worker, behind a channel, with resource limits and a
    /// system-call allow-list.
    Process,
    /// As `Process`, inside Linux namespaces and a cgroup the guest builds for itself.
    Container,
    /// As `Process`, the guest in a virtual machine of its own (`crate::vm`).
    Vm,
    /// In the worker's thread, compiled to WebAssembly and run in a wasmtime sandbox with
    /// bounded memory and time (`wasm`).
    Wasm,
}

impl Isolation {
    pub const NAMES: [&'static str; 6] = ["none", "rust", "wasm", "process", "container", "vm"];

    /// Whether procedures run in a guest process (and so over a channel).
    pub fn out_of_process(self) -> bool {
        matches!(
            self,
            Isolation::Process | Isolation::Container | Isolation::Vm
        )
    }

    /// The channel a guest at this level uses unless told otherwise: `virtio` for `vm`, a
    /// Unix socket for the others.
    pub fn default_channel(self) -> Channel {
        match self {
            Isolation::Vm => Channel::Virtio,
            _ => Channel::Uds,
        }
    }

    /// Refuses a channel this level cannot use: a VM's guest reaches its host through its
    /// virtio port, its network card or a shared-memory device (polled), and the port exists
    /// only in a VM.
    pub fn check_channel(self, channel: Channel) -> Result<(), String> {
        match (self, channel) {
            (Isolation::Vm, Channel::Virtio | Channel::Tcp | Channel::ShmPoll) => Ok(()),
            (Isolation::Vm, other) => Err(format!(
                "isolation level vm reaches its guest over channel virtio, tcp or shm-poll, not \
                 {other} (a VM's shared memory has no socket to wake its guest with)"
            )),
            (level, Channel::Virtio) if level.out_of_process() => Err(format!(
                "channel virtio exists only in a virtual machine (--isolation vm), not with \
                 --isolation {level}"
            )),
            _ => Ok(()),
        }
    }
}

impl std::str::FromStr for Isolation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Isolation::None),
            "rust" => Ok(Isolation::Rust),
            "wasm" => Ok(Isolation::Wasm),
            "process" => Ok(Isolation::Process),
            "container" => Ok(Isolation::Container),
            "vm" => Ok(Isolation::Vm),
            _ => Err(format!(
                "isolation must be one of {}, not {s:?}",
                Isolation::NAMES.join(", ")
            )),
        }
    }
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Isolation::None => "none",
            Isolation::Rust => "rust",
            Isolation::Process => "process",
            Isolation::Container => "container",
            Isolation::Wasm => "wasm",
            Isolation::Vm => "vm",
        })
    }
}

/// What carries the boundary's frames between a worker and its guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    Tcp,
    Uds,
    ShmUds,
    ShmPoll,
    /// A virtio-serial port of a VM (`--isolation vm` only).
    Virtio,
}

impl Channel {
    pub const ALL: [Channel; 5] = [
        Channel::Tcp,
        Channel::Uds,
        Channel::ShmUds,
        Channel::ShmPoll,
        Channel::Virtio,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Channel::Tcp => "tcp",
            Channel::Uds => "uds",
            Channel::ShmUds => "shm-uds",
            Channel::ShmPoll => "shm-poll",
            Channel::Virtio => "virtio",
        }
    }
}

impl std::str::FromStr for Channel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Channel::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Channel::ALL.iter().map(|c| c.name()).collect();
                format!("channel must be one of {}, not {s:?}", names.join(", "))
            })
    }
}

impl std::fmt::Display for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How to start a guest and what it may do.
#[derive(Clone, Debug)]
pub struct GuestConfig {
    /// The program that serves as a guest (the `glass` binary), and the arguments that make
    /// it one for this server's workload (`guest --workload ycsb ...`); the channel's own
    /// arguments are appended.
    pub program: PathBuf,
    pub args: Vec<String>,
    pub channel: Channel,
    /// The longest the host waits for its guest's next message; past it the guest is killed.
    pub timeout: Duration,
    /// The guest's address-space limit (`RLIMIT_AS`), MiB.
    pub memory_mib: u64,
    /// The core guests run on; `None`: wherever the server may (they inherit its affinity).
    pub core: Option<usize>,
    /// `--isolation wasm`: the procedures' WebAssembly module.
    pub module: Option<PathBuf>,
    /// `--isolation wasm`: name the module's compiled functions in `/tmp/perf-PID.map`, for
    /// `perf` and `bench/isolation/callgrind-call.sh` (`--wasm-perfmap`).
    pub perfmap: bool,
    /// `--isolation none`: the procedures' shared library.
    pub library: Option<PathBuf>,
    /// `--isolation vm`: QEMU and the guest kernel, found and checked ([`crate::vm::Vm::find`]).
    pub vm: Option<crate::vm::Vm>,
}

impl Default for GuestConfig {
    fn default() -> Self {
        GuestConfig {
            program: PathBuf::from("glass"),
            args: Vec::new(),
            channel: Channel::Uds,
            timeout: Duration::from_secs(2),
            memory_mib: 1024,
            core: None,
            module: None,
            perfmap: false,
            library: None,
            vm: None,
        }
    }
}

/// The shared-memory buffer of a guest's channel: the largest frame either side sends.
pub const SHM_BUFFER: usize = 1 << 20;
/// How long a `shm-poll` side spins on the sequence number before it starts yielding, and how
/// long it yields before it naps between looks.
pub const SPIN: Duration = Duration::from_micros(50);
pub const YIELD: Duration = Duration::from_millis(2);
pub const NAP: Duration = Duration::from_micros(20);
/// The file descriptor a `shm-uds` guest finds its end of the wake-up socket pair on.
pub const WAKE_FD: i32 = 3;

/// Why a call could not finish across the boundary: the guest is then killed.
#[derive(Debug)]
enum Broken {
    /// No message within the time limit.
    Timeout,
    /// The channel closed: the guest exited or died.
    Closed,
    /// The guest broke the boundary's protocol, or the channel failed.
    Other(String),
}

/// The host's end of a channel.
enum Pipe {
    Stream {
        stream: Box<dyn Stream>,
        buffer: FrameBuffer,
    },
    Shm {
        region: Region,
        seq: u64,
        /// `shm-uds`: the host's end of the wake-up pair; `shm-poll`: none.
        wake: Option<UnixStream>,
        /// `shm-poll`: how long the host spins before it yields ([`spin_for`]).
        spin: Duration,
    },
}

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// Sends `frame` (one whole frame) to the other side of a shared-memory channel.
pub fn shm_send(
    region: &Region,
    response: bool,
    seq: u64,
    frame: &[u8],
    wake: Option<&mut UnixStream>,
) -> std::io::Result<()> {
    if !region.write(0, response, frame) {
        return Err(std::io::Error::other(format!(
            "a frame of {} bytes is larger than the channel's {}-byte buffer",
            frame.len(),
            region.buffer()
        )));
    }
    let (len, seq_at) = if response {
        (region.response_len(0), region.response_seq(0))
    } else {
        (region.request_len(0), region.request_seq(0))
    };
    len.store(frame.len() as u32, Ordering::Relaxed);
    seq_at.store(seq, Ordering::Release);
    if let Some(w) = wake {
        w.write_all(&[1])?;
    }
    Ok(())
}

/// How long each side of a `shm-poll` channel spins before it yields: [`SPIN`] where the
/// worker and its guest can run at once, on two CPUs, and nothing where they have one CPU
/// between them, which the side that spins would take from the peer it waits for.
/// `worker_cpus` is the worker's affinity; `guest_core` the core the guest is pinned to, if
/// any (without one it inherits the worker's).
pub fn spin_for(worker_cpus: &[usize], guest_core: Option<usize>) -> Duration {
    let cpus = match guest_core {
        Some(core) if !worker_cpus.contains(&core) => worker_cpus.len() + 1,
        _ => worker_cpus.len(),
    };
    if cpus > 1 {
        SPIN
    } else {
        Duration::ZERO
    }
}

/// The CPUs the calling thread may run on (its affinity); all of them where it cannot be read.
pub fn thread_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set, and sched_getaffinity writes at most
    // its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let got =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if got != 0 {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        return (0..n).collect();
    }
    // SAFETY: CPU_ISSET reads within the set for every index below CPU_SETSIZE.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Waits until `seq_at` reaches `seq` (true), spinning for `spin`, then yielding, then
/// napping, looking at `give_up` now and then (a dead peer, a deadline) once past the spin
/// (false if it says so). The clock is first read after 64 looks: an answer that comes
/// sooner, as a spinning peer's does, costs no clock read.
pub fn shm_wait(
    seq_at: &AtomicU64,
    seq: u64,
    spin: Duration,
    mut give_up: impl FnMut() -> bool,
) -> bool {
    let mut start = None;
    let mut looks = 0u32;
    loop {
        if seq_at.load(Ordering::Acquire) == seq {
            return true;
        }
        looks = looks.wrapping_add(1);
        if !looks.is_multiple_of(64) {
            std::hint::spin_loop();
            continue;
        }
        let waited = start.get_or_insert_with(Instant::now).elapsed();
        if waited < spin {
            continue;
        }
        if give_up() {
            return false;
        }
        if waited < YIELD {
            std::thread::yield_now();
        } else {
            std::thread::sleep(NAP);
        }
    }
}

/// One worker's guest: the process, its channel, and where its stderr goes.
pub(crate) struct Guest {
    child: Child,
    pipe: Pipe,
    /// The guest's stderr (an unlinked file), read when it dies to say why.
    stderr: std::fs::File,
    timeout: Duration,
    out: Vec<u8>,
    frame: Vec<u8>,
    /// The lists the guest's operations are decoded into and run with, kept from one to the
    /// next, call after call.
    spare: Spare,
    scratch: OpScratch,
}

static GUESTS_STARTED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static GUEST: RefCell<Option<Guest>> = const { RefCell::new(None) };
}

/// Runs procedure `txn` in this worker's guest (started now if it has none): the host's half
/// of [`crate::handler`]'s call when procedures are isolated.
pub(crate) fn call(
    shared: &Shared,
    tx: &mut dyn Tx,
    txn: usize,
    args: &[Value],
    out: &mut Vec<Value>,
    tracer: &mut Tracer,
) -> TxResult<()> {
    GUEST.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let ready = shared.started.lock().ok().and_then(|mut g| g.pop());
            *slot = Some(match ready {
                Some(guest) => guest,
                None => Guest::start(shared).map_err(|e| {
                    TxError::Contained(format!("the procedure process could not start: {e}"))
                })?,
            });
        }
        let guest = slot.as_mut().expect("started above");
        match guest.call(shared, tx, txn, args, out, tracer) {
            Ok(result) => result,
            Err(broken) => {
                let mut guest = slot.take().expect("in use above");
                Err(TxError::Contained(guest.stop(shared, txn, broken)))
            }
        }
    })
}

/// Starts `workers` guests for `shared`'s workload before the server listens: a server whose
/// procedures cannot run says so at once, and no worker's first call waits for its guest to
/// start (a VM's boot takes seconds). Each worker takes one at its first call; one that dies
/// meanwhile is replaced then, as at any call.
///
/// The guests die with the thread that started them (`PR_SET_PDEATHSIG`): the caller's thread
/// must outlive the server, as `glass serve`'s main thread does.
pub(crate) fn prestart(shared: &Shared, workers: usize) -> Result<(), String> {
    let mut started = Vec::with_capacity(workers.max(1));
    for _ in 0..workers.max(1) {
        started.push(Guest::start(shared)?);
    }
    if let Ok(mut pool) = shared.started.lock() {
        *pool = started;
    }
    Ok(())
}

impl Guest {
    fn start(shared: &Shared) -> Result<Guest, String> {
        let config = shared
            .guest
            .as_ref()
            .ok_or("isolated procedures need a guest program (GuestConfig)")?;
        let n = GUESTS_STARTED.fetch_add(1, Ordering::Relaxed);
        let name = format!("glass-guest-{}-{n}", std::process::id());
        let stderr = tempfile::tempfile().map_err(|e| format!("a file for its stderr: {e}"))?;
        let mut command = Command::new(&config.program);
        command
            .args(&config.args)
            .arg("--channel")
            .arg(config.channel.name())
            .arg("--isolation")
            .arg(shared.isolation.to_string())
            .arg("--memory-mib")
            .arg(config.memory_mib.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr.try_clone().map_err(|e| e.to_string())?);
        let deadline = Instant::now() + config.timeout.max(Duration::from_secs(10));
        let spawn_err = |e: std::io::Error| format!("start {}: {e}", config.program.display());
        // A VM's guest answers its setup only once the machine has booted: its channel's
        // reads wait up to the boot budget until then (a stream's read timeout, or the time
        // limit of a shared-memory wait).
        let booting = match &config.vm {
            Some(vm) if shared.isolation == Isolation::Vm => Some(vm),
            _ => None,
        };
        let mut booting_stream: Option<UnixStream> = None;
        // A shared-memory region's file, removed once the guest has mapped it, or when the
        // start fails on the way: a guest that never started leaves nothing in /dev/shm.
        let mut region_file: Option<RemoveOnDrop> = None;
        let (child, pipe) = match config.channel {
            channel if shared.isolation == Isolation::Vm => {
                let vm = booting
                    .ok_or("isolation level vm needs QEMU and a guest kernel (GuestConfig::vm)")?;
                let initrd = vm.initramfs(&config.program)?;
                let mut args = config.args.clone();
                args.extend(
                    [
                        "--channel",
                        channel.name(),
                        "--isolation",
                        "vm",
                        "--memory-mib",
                        &config.memory_mib.to_string(),
                        "--address",
                        crate::vm::PORT,
                    ]
                    .map(String::from),
                );
                let console = |command: &mut Command| -> Result<(), String> {
                    command
                        .stdin(Stdio::null())
                        .stdout(stderr.try_clone().map_err(|e| e.to_string())?)
                        .stderr(stderr.try_clone().map_err(|e| e.to_string())?);
                    Ok(())
                };
                if channel == Channel::ShmPoll {
                    // The region becomes the VM's shared-memory device; the guest maps it
                    // from sysfs. Both sides poll, as between processes.
                    let path = shm_dir().join(&name);
                    let region = Region::create_padded(&path, 1, SHM_BUFFER, true)
                        .map_err(|e| e.to_string())?;
                    region_file = Some(RemoveOnDrop(path.clone()));
                    let spin = spin_for(&thread_cpus(), config.core);
                    args.extend(["--spin-us".to_string(), spin.as_micros().to_string()]);
                    let mut command = vm.command(
                        &initrd,
                        crate::vm::Link::Memory(&path),
                        config.memory_mib,
                        &args,
                    )?;
                    console(&mut command)?;
                    let child = spawn(&mut command, None, config.core)
                        .map_err(|e| format!("start {}: {e}", vm.qemu.display()))?;
                    let pipe = Pipe::Shm {
                        region,
                        seq: 0,
                        wake: None,
                        spin,
                    };
                    (child, pipe)
                } else {
                    let path = std::env::temp_dir().join(format!("{name}.sock"));
                    let link = if channel == Channel::Tcp {
                        crate::vm::Link::Network(&path)
                    } else {
                        crate::vm::Link::Serial(&path)
                    };
                    let mut command = vm.command(&initrd, link, config.memory_mib, &args)?;
                    console(&mut command)?;
                    let (child, stream) =
                        start_on_unix_socket(&path, &mut command, config.core, deadline, &vm.qemu)?;
                    stream
                        .set_read_timeout(Some(vm.boot_budget().max(config.timeout)))
                        .map_err(|e| e.to_string())?;
                    booting_stream = Some(stream.try_clone().map_err(|e| e.to_string())?);
                    let pipe = Pipe::Stream {
                        stream: Box::new(stream),
                        buffer: FrameBuffer::new(SHM_BUFFER as u32),
                    };
                    (child, pipe)
                }
            }
            Channel::Tcp => {
                let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
                let address = listener.local_addr().map_err(|e| e.to_string())?;
                command.arg("--address").arg(address.to_string());
                let mut child = spawn(&mut command, None, config.core).map_err(spawn_err)?;
                let stream = accept(&listener, &mut child, deadline, |l| {
                    l.accept().map(|(s, _)| s)
                })?;
                stream.set_nodelay(true).map_err(|e| e.to_string())?;
                stream
                    .set_read_timeout(Some(config.timeout))
                    .map_err(|e| e.to_string())?;
                let pipe = Pipe::Stream {
                    stream: Box::new(stream),
                    buffer: FrameBuffer::new(SHM_BUFFER as u32),
                };
                (child, pipe)
            }
            Channel::Uds => {
                let path = std::env::temp_dir().join(format!("{name}.sock"));
                command.arg("--address").arg(&path);
                let (child, stream) = start_on_unix_socket(
                    &path,
                    &mut command,
                    config.core,
                    deadline,
                    &config.program,
                )?;
                stream
                    .set_read_timeout(Some(config.timeout))
                    .map_err(|e| e.to_string())?;
                let pipe = Pipe::Stream {
                    stream: Box::new(stream),
                    buffer: FrameBuffer::new(SHM_BUFFER as u32),
                };
                (child, pipe)
            }
            Channel::ShmUds | Channel::ShmPoll => {
                let path = shm_dir().join(&name);
                let region = Region::create(&path, 1, SHM_BUFFER).map_err(|e| e.to_string())?;
                region_file = Some(RemoveOnDrop(path.clone()));
                // The guest inherits the affinity of the thread that starts it (a worker, or
                // the server's main thread when prestarted: the server is pinned as a whole).
                let spin = spin_for(&thread_cpus(), config.core);
                command.arg("--address").arg(&path);
                if config.channel == Channel::ShmPoll {
                    command.arg("--spin-us").arg(spin.as_micros().to_string());
                }
                let (wake, theirs) = if config.channel == Channel::ShmUds {
                    let (mine, theirs) = UnixStream::pair().map_err(|e| e.to_string())?;
                    mine.set_read_timeout(Some(config.timeout))
                        .map_err(|e| e.to_string())?;
                    (Some(mine), Some(theirs))
                } else {
                    (None, None)
                };
                let child = spawn(&mut command, theirs.as_ref(), config.core);
                drop(theirs);
                let child = child.map_err(spawn_err);
                // The guest maps the region before it answers Setup; the name can go then.
                (
                    child?,
                    Pipe::Shm {
                        region,
                        seq: 0,
                        wake,
                        spin,
                    },
                )
            }
            Channel::Virtio => {
                return Err(
                    "channel virtio exists only in a virtual machine (--isolation vm)".to_string(),
                )
            }
        };
        let mut guest = Guest {
            child,
            pipe,
            stderr,
            timeout: booting.map_or(config.timeout, |vm| vm.boot_budget().max(config.timeout)),
            out: Vec::new(),
            frame: Vec::new(),
            spare: Spare::default(),
            scratch: OpScratch::default(),
        };
        let setup = HostMsg::Setup {
            workload: shared.workload.to_string(),
            tables: shared.tables.clone(),
            indexes: shared.indexes.clone(),
        };
        let ready = guest.send(&setup).and_then(|()| guest.recv());
        drop(region_file);
        guest.timeout = config.timeout;
        if let Some(vm) = booting {
            match &ready {
                Ok(GuestMsg::Ready) => {
                    if let Some(stream) = booting_stream {
                        stream
                            .set_read_timeout(Some(config.timeout))
                            .map_err(|e| e.to_string())?
                    }
                }
                Err(Broken::Timeout) => {
                    let said = guest.last_words();
                    let hint = if vm.accel == crate::vm::Accel::Kvm {
                        " (a machine whose /dev/kvm opens but cannot run a guest, as under \
                         nested virtualization it does not support, stalls so: --vm-accel tcg \
                         emulates the machine instead)"
                    } else {
                        ""
                    };
                    return Err(guest.stop_quietly(format!(
                        "its virtual machine did not boot and answer within {} s{hint}{said}",
                        vm.boot_budget().max(config.timeout).as_secs()
                    )));
                }
                _ => {}
            }
        }
        match ready {
            Ok(GuestMsg::Ready) => Ok(guest),
            Ok(other) => {
                let why = format!("it answered its setup with {other:?}");
                Err(guest.stop_quietly(why))
            }
            Err(broken) => {
                let why = guest.why(broken, "during its setup");
                Err(why)
            }
        }
    }

    fn send(&mut self, message: &HostMsg) -> Result<(), Broken> {
        self.out.clear();
        message.encode(&mut self.out);
        self.send_out()
    }

    /// Sends the whole frame in `out`.
    fn send_out(&mut self) -> Result<(), Broken> {
        match &mut self.pipe {
            Pipe::Stream { stream, .. } => stream
                .write_all(&self.out)
                .map_err(|e| Broken::Other(format!("write to the channel: {e}"))),
            Pipe::Shm {
                region, seq, wake, ..
            } => {
                *seq += 1;
                shm_send(region, false, *seq, &self.out, wake.as_mut())
                    .map_err(|e| Broken::Other(format!("write to the channel: {e}")))
            }
        }
    }

    fn recv(&mut self) -> Result<GuestMsg, Broken> {
        let frame = self.recv_frame()?;
        GuestMsg::decode(&self.frame[frame])
            .map_err(|e| Broken::Other(format!("it sent a malformed message: {e}")))
    }

    /// Receives the guest's next frame into `frame` and returns where its kind and body lie
    /// there (after the length prefix), undecoded.
    fn recv_frame(&mut self) -> Result<std::ops::Range<usize>, Broken> {
        match &mut self.pipe {
            Pipe::Stream { stream, buffer } => loop {
                match buffer.next_frame() {
                    Ok(Some(frame)) => {
                        self.frame.clear();
                        self.frame.extend_from_slice(frame);
                        return Ok(0..frame.len());
                    }
                    Ok(None) => {}
                    Err(e) => return Err(Broken::Other(format!("it sent a bad frame: {e}"))),
                }
                match buffer.read_from(stream) {
                    Ok(0) => return Err(Broken::Closed),
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        return Err(Broken::Timeout)
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                        return Err(Broken::Closed)
                    }
                    Err(e) => return Err(Broken::Other(format!("read the channel: {e}"))),
                }
            },
            Pipe::Shm {
                region,
                seq,
                wake,
                spin,
            } => {
                let answered = region.response_seq(0);
                match wake {
                    Some(w) => {
                        let mut byte = [0u8; 1];
                        match w.read(&mut byte) {
                            Ok(1) => {}
                            Ok(_) => return Err(Broken::Closed),
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) =>
                            {
                                return Err(Broken::Timeout)
                            }
                            Err(e) => return Err(Broken::Other(format!("read the channel: {e}"))),
                        }
                        if answered.load(Ordering::Acquire) != *seq {
                            return Err(Broken::Other(
                                "it woke its host without answering".to_string(),
                            ));
                        }
                    }
                    None => {
                        // The time limit counts from the end of the spin, when `shm_wait`
                        // first asks whether to give up: an answer within the spin reads
                        // no clock for it.
                        let timeout = self.timeout;
                        let mut deadline = None;
                        let child = &mut self.child;
                        let mut dead = false;
                        let waited = shm_wait(answered, *seq, *spin, || {
                            dead = !matches!(child.try_wait(), Ok(None));
                            let now = Instant::now();
                            dead || now > *deadline.get_or_insert(now + timeout)
                        });
                        if !waited {
                            return Err(if dead {
                                Broken::Closed
                            } else {
                                Broken::Timeout
                            });
                        }
                    }
                }
                let len = region.response_len(0).load(Ordering::Relaxed) as usize;
                if len < HEADER_LEN || !region.read(0, true, len, &mut self.frame) {
                    return Err(Broken::Other(format!(
                        "it sent a frame of {len} bytes (buffer {})",
                        region.buffer()
                    )));
                }
                let body_len = u32::from_le_bytes(self.frame[..HEADER_LEN].try_into().unwrap());
                if body_len as usize != len - HEADER_LEN {
                    return Err(Broken::Other(format!(
                        "its frame's length prefix says {body_len}, its length {len}"
                    )));
                }
                Ok(HEADER_LEN..len)
            }
        }
    }

    /// One procedure call across the boundary. `Ok` carries the procedure's own outcome;
    /// `Err` means the guest must go.
    fn call(
        &mut self,
        shared: &Shared,
        tx: &mut dyn Tx,
        txn: usize,
        args: &[Value],
        out: &mut Vec<Value>,
        tracer: &mut Tracer,
    ) -> Result<TxResult<()>, Broken> {
        let start = tracer.start();
        let mut engine_ns = 0u64;
        // An operation that failed dooms the transaction: its error is the call's, whatever
        // the procedure does with it.
        let mut failed_op: Option<TxError> = None;
        self.send(&HostMsg::Invoke {
            txn: txn as u16,
            args: args.to_vec(),
            timed: tracer.on(),
        })?;
        loop {
            let frame = self.recv_frame()?;
            let frame = &self.frame[frame];
            if is_ops(frame) {
                // The operations run as they are decoded, and each answer is encoded as it
                // returns: a read of a whole row straight from the engine's record
                // (`handler::answer_op`), its encoding counted as query execution.
                self.out.clear();
                match &failed_op {
                    Some(e) => failed_reply(e).encode(&mut self.out),
                    None => {
                        let timed = tracer.on();
                        let answered =
                            answer_ops_with(frame, &mut self.spare, &mut self.out, |op, out| {
                                let t = timed.then(Instant::now);
                                let ran = crate::handler::answer_op(
                                    tx,
                                    shared,
                                    op,
                                    &mut self.scratch,
                                    out,
                                );
                                if let Some(t) = t {
                                    engine_ns += t.elapsed().as_nanos() as u64;
                                }
                                ran
                            });
                        match answered {
                            Ok(None) => {}
                            Ok(Some(e)) => failed_op = Some(e),
                            Err(why) => return Err(Broken::Other(format!("it sent {why}"))),
                        }
                    }
                }
                self.send_out()?;
                continue;
            }
            let message = GuestMsg::decode(frame)
                .map_err(|e| Broken::Other(format!("it sent a malformed message: {e}")))?;
            match message {
                end @ (GuestMsg::Returned { .. } | GuestMsg::Failed { .. }) => {
                    return Ok(finish_call(
                        end,
                        failed_op,
                        out,
                        tracer,
                        start,
                        engine_ns,
                        |op| crate::handler::run_op(tx, shared, op, &mut self.scratch),
                    ));
                }
                // `Ops` were answered above.
                other @ (GuestMsg::Ready | GuestMsg::Ops { .. }) => {
                    return Err(Broken::Other(format!(
                        "it sent {other:?} in the middle of a call"
                    )))
                }
            }
        }
    }

    /// Kills the guest for `broken` during procedure `txn`, and says why in words.
    fn stop(&mut self, shared: &Shared, txn: usize, broken: Broken) -> String {
        let procedure = shared
            .procedure_names
            .get(txn)
            .map_or("?", String::as_str)
            .to_string();
        let timeout = self.timeout;
        match broken {
            Broken::Timeout => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                format!(
                    "procedure {procedure} ran past its {} ms limit; its process was killed \
                     and the transaction rolled back",
                    timeout.as_millis()
                )
            }
            other => format!(
                "procedure {procedure}: {}; the transaction was rolled back",
                self.why(other, "")
            ),
        }
    }

    /// Kills the guest (if it still runs) and describes how it ended.
    fn why(&mut self, broken: Broken, when: &str) -> String {
        let when = if when.is_empty() {
            String::new()
        } else {
            format!(" {when}")
        };
        match broken {
            Broken::Timeout => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                format!(
                    "its process did not answer within {} ms{when}",
                    self.timeout.as_millis()
                )
            }
            Broken::Closed => {
                // It closed the channel: it is exiting, or has died.
                let status = wait_briefly(&mut self.child);
                let said = self.last_words();
                format!("its process {}{when}{said}", describe(status))
            }
            Broken::Other(what) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                format!("{what}{when}; its process was killed")
            }
        }
    }

    fn stop_quietly(&mut self, why: String) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        why
    }

    /// The last line the guest wrote to its stderr, as ` (it said: ...)`, or nothing.
    fn last_words(&mut self) -> String {
        use std::io::Seek;
        let mut text = String::new();
        if self.stderr.seek(std::io::SeekFrom::Start(0)).is_err()
            || self.stderr.read_to_string(&mut text).is_err()
        {
            return String::new();
        }
        said(&text)
    }
}

/// What a guest last wrote to its stderr that says why it stopped, as ` (it said: ...)`, or
/// nothing. A panic ends with a note on backtraces: the line before it is the one that says.
pub(crate) fn said(stderr: &str) -> String {
    let line = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.starts_with("note: run with `RUST_BACKTRACE"));
    match line {
        Some(line) => format!(" (it said: {})", line.trim()),
        None => String::new(),
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        crate::guest::remove_cgroups(self.child.id());
    }
}

/// Ends a call on the guest's `Returned` or `Failed`: runs the writes a `Returned` carried
/// (with `run`, each checked as a deferred write: see [`protocol::deferred`]), charges the
/// call's phases, and returns the procedure's outcome, or the error of an operation that
/// failed in the engine (which dooms the call whatever the procedure did with it).
pub(crate) fn finish_call(
    end: GuestMsg,
    failed_op: Option<TxError>,
    out: &mut Vec<Value>,
    tracer: &mut Tracer,
    start: Option<Instant>,
    mut engine_ns: u64,
    mut run: impl FnMut(&Op) -> TxResult<OpResult>,
) -> TxResult<()> {
    match end {
        GuestMsg::Returned {
            writes,
            values,
            busy_ns,
        } => {
            let written = match failed_op {
                Some(e) => Err(e),
                None => {
                    let t = tracer.start();
                    let written = writes.iter().try_for_each(|op| {
                        let result = run(op)?;
                        check_returned_write(op, &result)
                    });
                    if let Some(t) = t {
                        engine_ns += t.elapsed().as_nanos() as u64;
                    }
                    written
                }
            };
            tracer.charge_isolated(start, engine_ns, busy_ns);
            written.map(|()| out.extend(values))
        }
        GuestMsg::Failed {
            class,
            message,
            busy_ns,
        } => {
            tracer.charge_isolated(start, engine_ns, busy_ns);
            Err(failed_op.unwrap_or_else(|| error_of(class, message)))
        }
        other => Err(TxError::Contained(format!(
            "the procedure ended its call with {other:?}"
        ))),
    }
}

/// The `OpFailed` answer to an operation that failed with `e`.
pub(crate) fn failed_reply(e: &TxError) -> HostMsg {
    HostMsg::OpFailed {
        class: ErrorClass::of(e),
        message: ErrorClass::message_of(e),
    }
}

/// A file removed when this goes (a shared-memory region's name, once its guest has mapped
/// it or failed to start).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Where shared-memory channels' files go: `/dev/shm` where it exists.
fn shm_dir() -> PathBuf {
    let dev_shm = PathBuf::from("/dev/shm");
    if dev_shm.is_dir() {
        dev_shm
    } else {
        std::env::temp_dir()
    }
}

/// Spawns the guest: it dies with the thread that started it (`PR_SET_PDEATHSIG`), a
/// `shm-uds` guest finds its end of the wake-up pair on [`WAKE_FD`], and with `core` it runs
/// on that core only.
fn spawn(
    command: &mut Command,
    wake: Option<&UnixStream>,
    core: Option<usize>,
) -> std::io::Result<Child> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let wake_fd = wake.map(|w| w.as_raw_fd());
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // async-signal-safe functions (prctl, dup2, sched_setaffinity).
    unsafe {
        command.pre_exec(move || {
            if let Some(core) = core {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(core, &mut set);
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(fd) = wake_fd {
                // dup2 clears close-on-exec on the new descriptor.
                if libc::dup2(fd, WAKE_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    command.spawn()
}

/// Listens on a Unix socket at `path`, starts `command` (the guest, or the VM that runs it,
/// `program` in errors), and accepts its connection; the socket's name goes once connected.
fn start_on_unix_socket(
    path: &std::path::Path,
    command: &mut Command,
    core: Option<usize>,
    deadline: Instant,
    program: &std::path::Path,
) -> Result<(Child, UnixStream), String> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).map_err(|e| e.to_string())?;
    let accepted = spawn(command, None, core)
        .map_err(|e| format!("start {}: {e}", program.display()))
        .and_then(|mut child| {
            accept(&listener, &mut child, deadline, |l| {
                l.accept().map(|(s, _)| s)
            })
            .map(|s| (child, s))
        });
    let _ = std::fs::remove_file(path);
    accepted
}

/// Accepts the guest's connection, giving up if it dies or `deadline` passes.
fn accept<L: AsNonBlocking, S>(
    listener: &L,
    child: &mut Child,
    deadline: Instant,
    accept: impl Fn(&L) -> std::io::Result<S>,
) -> Result<S, String> {
    listener.non_blocking().map_err(|e| e.to_string())?;
    loop {
        match accept(listener) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(format!("accept its connection: {e}")),
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("it {} before connecting", describe(Some(status))));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err("it did not connect within its start-up time".to_string());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

trait AsNonBlocking {
    fn non_blocking(&self) -> std::io::Result<()>;
}

impl AsNonBlocking for TcpListener {
    fn non_blocking(&self) -> std::io::Result<()> {
        self.set_nonblocking(true)
    }
}

impl AsNonBlocking for UnixListener {
    fn non_blocking(&self) -> std::io::Result<()> {
        self.set_nonblocking(true)
    }
}

/// The child's exit status, waiting a little for it to finish dying.
fn wait_briefly(child: &mut Child) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// "died of SIGSEGV (a bad memory access)", "exited with status 1", ...
pub(crate) fn describe(status: Option<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    let Some(status) = status else {
        return "closed its channel and was killed".to_string();
    };
    if let Some(signal) = status.signal() {
        let what = match signal {
            libc::SIGSEGV => "SIGSEGV, a bad memory access",
            libc::SIGBUS => "SIGBUS, a bad memory access",
            libc::SIGABRT => "SIGABRT, an abort: a panic, an abort call or a failed allocation",
            libc::SIGKILL => "SIGKILL: killed, by its limits or the kernel's out-of-memory killer",
            libc::SIGSYS => "SIGSYS, a forbidden system call",
            libc::SIGILL => "SIGILL, an illegal instruction",
            libc::SIGFPE => "SIGFPE, an arithmetic fault",
            _ => "",
        };
        return if what.is_empty() {
            format!("died of signal {signal}")
        } else {
            format!("died of {what}")
        };
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "ended".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_channels_parse_from_their_names_and_refuse_the_rest() {
        for name in Isolation::NAMES {
            assert_eq!(name.parse::<Isolation>().unwrap().to_string(), name);
        }
        assert!("sandbox".parse::<Isolation>().is_err());
        // A VM takes its port and nothing else, and only a VM has one.
        assert_eq!(Isolation::Vm.default_channel(), Channel::Virtio);
        assert!(Isolation::Vm.check_channel(Channel::Virtio).is_ok());
        assert!(Isolation::Vm.check_channel(Channel::Tcp).is_ok());
        assert!(Isolation::Vm.check_channel(Channel::ShmPoll).is_ok());
        assert!(Isolation::Vm.check_channel(Channel::ShmUds).is_err());
        assert!(Isolation::Vm.check_channel(Channel::Uds).is_err());
        assert!(Isolation::Process.check_channel(Channel::Virtio).is_err());
        assert!(Isolation::Container.check_channel(Channel::ShmPoll).is_ok());
        for c in Channel::ALL {
            assert_eq!(c.name().parse::<Channel>().unwrap(), c);
        }
        let e = "pipe".parse::<Channel>().unwrap_err();
        assert!(e.contains("shm-poll"), "{e}");
    }

    #[test]
    fn a_guests_failure_keeps_its_class() {
        assert!(error_of(ErrorClass::Retry, "deadlock".into()).is_retryable());
        assert!(matches!(
            error_of(ErrorClass::UserAbort, "item".into()),
            TxError::UserAbort(m) if m == "item"
        ));
        assert!(matches!(
            error_of(ErrorClass::Contained, "x".into()),
            TxError::Contained(_)
        ));
    }

    #[test]
    fn a_guests_last_words_skip_the_backtrace_note() {
        let panic = "thread 'main' panicked at src/x.rs:1:1:\nmemory allocation of 64 bytes failed\n\
                     note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            said(panic),
            " (it said: memory allocation of 64 bytes failed)"
        );
        assert_eq!(said("\n  \n"), "");
    }

    #[test]
    fn exits_are_described_by_their_signal() {
        use std::os::unix::process::ExitStatusExt;
        let segv = std::process::ExitStatus::from_raw(libc::SIGSEGV);
        assert!(describe(Some(segv)).contains("SIGSEGV"));
        let code = std::process::ExitStatus::from_raw(3 << 8);
        assert_eq!(describe(Some(code)), "exited with status 3");
    }

    #[test]
    fn shm_poll_spins_only_where_the_worker_and_its_guest_have_two_cpus() {
        // One core between them: whoever spins keeps the other from answering.
        assert_eq!(spin_for(&[0], None), Duration::ZERO);
        assert_eq!(spin_for(&[0], Some(0)), Duration::ZERO);
        // A guest on a core of its own, the worker pinned to another: both may spin.
        assert_eq!(spin_for(&[0], Some(2)), SPIN);
        // An unpinned worker on two CPUs, its guest inheriting them or pinned among them.
        assert_eq!(spin_for(&[0, 1], None), SPIN);
        assert_eq!(spin_for(&[0, 1], Some(1)), SPIN);
        let mine = thread_cpus();
        assert!(!mine.is_empty());
        assert!(mine.len() <= std::thread::available_parallelism().unwrap().get());
    }

    #[test]
    fn a_shared_memory_frame_goes_across_and_a_silent_peer_is_given_up_on() {
        let dir = tempfile::tempdir().unwrap();
        let region = Region::create(&dir.path().join("r"), 1, 4096).unwrap();
        let mut frame = Vec::new();
        GuestMsg::Ready.encode(&mut frame);
        shm_send(&region, true, 1, &frame, None).unwrap();
        assert!(shm_wait(region.response_seq(0), 1, SPIN, || false));
        let len = region.response_len(0).load(Ordering::Relaxed) as usize;
        let mut back = Vec::new();
        assert!(region.read(0, true, len, &mut back));
        assert_eq!(
            GuestMsg::decode(&back[HEADER_LEN..]).unwrap(),
            GuestMsg::Ready
        );
        // Nobody will answer sequence 2: the wait ends when `give_up` says so.
        let start = Instant::now();
        let r = shm_wait(region.response_seq(0), 2, SPIN, || {
            start.elapsed() > Duration::from_millis(5)
        });
        assert!(!r);
        let big = vec![0u8; 8192];
        assert!(shm_send(&region, false, 1, &big, None).is_err());
    }
}
