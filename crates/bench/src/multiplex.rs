//! One client thread for many connections: the client of `glass bench --server` over TCP,
//! Unix sockets and shared memory, as the 2025 paper's clients drive up to 512 connections
//! from one thread.
//! Every connection is a terminal with at most one transaction in flight; one `epoll` loop
//! starts each terminal's next transaction when its last one ended (closed loop), or when its
//! slot in the schedule comes (open loop, `DriverConfig::rate`: a slot waits for a free
//! connection, and its latency counts from the slot).
//!
//! A stored-procedure call is one frame out and one back, so a connection is a socket and a
//! frame buffer ([`Caller`]). An interactive (or autocommit) transaction runs its procedure
//! here, against [`client::RemoteTx`], which makes a round trip whenever it must hear from the
//! server, in the middle of the procedure's code. So each such connection runs on a stackful
//! coroutine of its own ([`Fiber`], `corosensei`): its [`client::Client`] is non-blocking, and
//! where it would block, its waiter suspends the coroutine; the loop resumes it when epoll
//! says its socket is ready. The workload's code stays the same blocking code that runs
//! embedded.
//!
//! Through shared memory (`shm://`, the kernel-bypass stand-in) every mode runs on a
//! coroutine whose client calls the procedure; no poll announces an answer in a slot, so
//! while any connection waits for one the loop spins, resuming each waiting coroutine to look
//! at its slot, and sleeps in epoll only when none waits.
//!
//! ```text
//!   connect all (blocking handshake, then non-blocking)
//!   loop until the measured time is over, nothing is in flight and nothing is left to flush:
//!     free connections take the next transaction: closed loop at once, open loop when a slot
//!       is due (slots due with no free connection queue up, oldest first); retries whose
//!       back-off is over start again
//!     a free coroutine idle in an open loop, or at the end, sends its read-only transaction's
//!       lazy commit (its locks would hold others up)
//!     epoll ─► Caller: read frames ─► Returned / Failed
//!              Fiber: resume ─► runs until it waits again, or its attempt ends
//!       (shared memory, while any waits: no epoll; resume each waiting Fiber to look)
//!     an attempt that ended: committed; user abort: rolled back; retryable: again after a
//!       back-off; anything else ends the run
//! ```
//!
//! Phases follow the threaded driver's: a transaction counts if it was started (or its slot
//! fell) in the measured phase.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use engine::{TxError, TxResult, Value};
use mio::event::Event;
use mio::net::{TcpStream, UnixStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use protocol::{Endpoint, FrameBuffer, Request, Response};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use workloads::{Receipt, Terminal};

use crate::acklog::AckLog;
use crate::driver::{backoff_delay, panic_message, DriverConfig, DriverError, DriverOutcome, Stop};
use crate::progress::ProgressLine;
use crate::remote::{run_attempt, Mode};
use crate::stats::{Outcome, RunStats};

enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Sock {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Sock::Tcp(s) => s,
            Sock::Unix(s) => s,
        }
    }
}

impl Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.read(buf),
            Sock::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Sock {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.write(buf),
            Sock::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A stored-procedure connection: its socket, the frames on their way, its terminal and the
/// arguments of the call in flight (kept for a retry).
struct Caller {
    sock: Sock,
    input: FrameBuffer,
    out: Vec<u8>,
    written: usize,
    terminal: Box<dyn Terminal>,
    args: Vec<Value>,
    /// Take each committed call's receipts (for an ack log).
    acking: bool,
}

/// What the loop asks of a [`Fiber`]'s coroutine.
enum Go {
    /// Draw the next transaction ([`Terminal::next`]).
    Draw,
    /// Run an attempt of the drawn transaction.
    Attempt,
    /// Send a read-only transaction's lazy commit, if one waits ([`client::Client::flush`]).
    Flush,
    /// The socket it waited on is ready (or may be).
    Ready,
    /// The run is over: return.
    Stop,
}

/// What a [`Fiber`]'s coroutine answers.
enum Yielded {
    Drawn(usize),
    /// Its socket would block: resume it with [`Go::Ready`] when epoll reports the socket.
    Waiting,
    /// The attempt ended: how, the round trips it made, and, if it committed and receipts
    /// are asked for, what it wrote.
    Ended(TxResult<()>, u64, Vec<Receipt>),
    Flushed(TxResult<()>),
}

/// A connection whose procedure runs here (interactive or autocommit): a coroutine that
/// owns the connection's [`client::Client`] and terminal.
struct Fiber {
    co: Coroutine<Go, Yielded, TxResult<()>>,
    /// Suspended in its client's waiter, until its socket is ready.
    waiting: bool,
}

/// A coroutine's stack: mapped at once, committed as touched. A procedure's deepest call
/// (a TPC-C New-Order through the client) uses a small part of it.
const FIBER_STACK: usize = 256 * 1024;

/// The [`Yielder`] of the coroutine that runs a client, for its waiter.
struct Park(*const Yielder<Go, Yielded>);

// SAFETY: a `Park` is made inside a coroutine's body, handed only to that coroutine's own
// client (whose waiter runs inside that body, on the thread resuming it), and dropped before
// the body returns. The client, hence the `Park`, never leaves the coroutine, which never
// leaves the loop's thread (`Coroutine` is not `Send`); `Send` is asked only because a
// `client::Waiter` may be handed to clients that do move between threads.
unsafe impl Send for Park {}

impl Park {
    fn wait(&self) -> std::io::Result<()> {
        // SAFETY: see the `Send` impl: the yielder lives as long as the body that made this
        // `Park`, and this runs only within that body.
        match unsafe { (*self.0).suspend(Yielded::Waiting) } {
            Go::Ready => Ok(()),
            _ => Err(std::io::Error::other("the run stopped while waiting")),
        }
    }
}

impl Fiber {
    fn new(
        mut client: client::Client,
        mut terminal: Box<dyn Terminal>,
        mode: Mode,
        procedures: Vec<String>,
        acking: bool,
    ) -> std::io::Result<Fiber> {
        let stack = DefaultStack::new(FIBER_STACK)?;
        let co = Coroutine::with_stack(stack, move |y: &Yielder<Go, Yielded>, mut go: Go| {
            let park = Park(y);
            client.set_waiter(Some(Box::new(move |_| park.wait())))?;
            let mut args = Vec::new();
            let mut ty = 0;
            let result = loop {
                let answer = match go {
                    Go::Draw => {
                        ty = terminal.next();
                        Yielded::Drawn(ty)
                    }
                    Go::Attempt => {
                        let Some(procedure) = procedures.get(ty) else {
                            break Err(TxError::Invalid(format!("no transaction type {ty}")));
                        };
                        let (result, trips) =
                            run_attempt(&mut client, mode, procedure, &mut *terminal, &mut args);
                        let mut receipts = Vec::new();
                        if acking && result.is_ok() {
                            terminal.receipts(&mut receipts);
                        }
                        Yielded::Ended(result, trips, receipts)
                    }
                    Go::Flush => Yielded::Flushed(client.flush()),
                    Go::Ready => {
                        break Err(TxError::Invalid(
                            "a client coroutine was resumed with nothing to wait for".into(),
                        ))
                    }
                    Go::Stop => break Ok(()),
                };
                go = y.suspend(answer);
            };
            // The waiter holds this body's yielder: it goes before the body ends.
            let _ = client.set_waiter(None);
            result
        });
        Ok(Fiber { co, waiting: false })
    }

    fn resume(&mut self, go: Go) -> Result<Yielded, TxError> {
        // Returned, or unwound by a panic (which `resume` passes on): resuming it would be a
        // bug.
        if self.co.done() {
            return Err(TxError::Invalid(
                "a client coroutine that had returned was resumed".into(),
            ));
        }
        match self.co.resume(go) {
            CoroutineResult::Yield(y) => {
                self.waiting = matches!(y, Yielded::Waiting);
                Ok(y)
            }
            CoroutineResult::Return(r) => {
                self.waiting = false;
                Err(r.err().unwrap_or_else(|| {
                    TxError::Invalid("a client coroutine returned in the middle of a run".into())
                }))
            }
        }
    }
}

enum Link {
    Caller(Caller),
    Fiber(Fiber),
}

/// Something a connection finished.
enum Done {
    /// An attempt ended: how, its round trips, and the receipts of a commit (if asked for).
    Attempt(TxResult<()>, u64, Vec<Receipt>),
    /// A lazy commit went out (or none was waiting).
    Flushed(TxResult<()>),
}

impl Link {
    /// Draws the connection's next transaction; returns its type.
    fn draw(&mut self) -> Result<usize, TxError> {
        match self {
            Link::Caller(c) => Ok(c.terminal.next()),
            Link::Fiber(f) => match f.resume(Go::Draw)? {
                Yielded::Drawn(ty) => Ok(ty),
                _ => Err(TxError::Invalid("a client coroutine did not draw".into())),
            },
        }
    }

    /// Starts an attempt of the drawn transaction (`procedure`); `first` for its first.
    /// Returns what ended at once, if the attempt did.
    fn attempt(&mut self, procedure: &str, first: bool) -> Result<Option<Done>, TxError> {
        match self {
            Link::Caller(c) => {
                if first {
                    c.args.clear();
                    c.terminal.args(&mut c.args)?;
                }
                Request::Call {
                    procedure: procedure.to_string(),
                    args: c.args.clone(),
                }
                .encode(&mut c.out);
                flush(c)?;
                Ok(None)
            }
            Link::Fiber(f) => {
                let y = f.resume(Go::Attempt)?;
                Ok(done(y))
            }
        }
    }

    /// Sends what the connection held back for its next request (a lazy commit). Returns
    /// what ended at once.
    fn flush(&mut self) -> Result<Option<Done>, TxError> {
        match self {
            Link::Caller(_) => Ok(Some(Done::Flushed(Ok(())))),
            Link::Fiber(f) => {
                let y = f.resume(Go::Flush)?;
                Ok(done(y))
            }
        }
    }

    /// Epoll reported the connection's socket. Returns what ended.
    fn ready(&mut self, event: &Event) -> Result<Option<Done>, TxError> {
        match self {
            Link::Caller(c) => c.ready(event),
            // Resumed if it waits; an edge from a read it made without waiting is nothing.
            Link::Fiber(_) => self.look(),
        }
    }

    /// A coroutine waiting for its answer looks again (its socket is ready, or, through
    /// shared memory, where nothing announces an answer, it is its turn). Returns what ended.
    fn look(&mut self) -> Result<Option<Done>, TxError> {
        match self {
            Link::Fiber(f) if f.waiting => {
                let y = f.resume(Go::Ready)?;
                Ok(done(y))
            }
            _ => Ok(None),
        }
    }

    /// A coroutine suspended until its answer comes (through shared memory, nothing but a
    /// look announces it).
    fn waiting(&self) -> bool {
        matches!(self, Link::Fiber(f) if f.waiting)
    }

    /// Ends a coroutine's body (a caller has none).
    fn stop(&mut self) {
        if let Link::Fiber(f) = self {
            if !f.co.done() && !f.waiting {
                let _ = f.resume(Go::Stop);
            }
        }
    }
}

/// What a coroutine's answer means to the loop: `None` while it waits.
fn done(y: Yielded) -> Option<Done> {
    match y {
        Yielded::Ended(result, trips, receipts) => Some(Done::Attempt(result, trips, receipts)),
        Yielded::Flushed(result) => Some(Done::Flushed(result)),
        Yielded::Waiting => None,
        Yielded::Drawn(_) => Some(Done::Attempt(
            Err(TxError::Invalid(
                "a client coroutine drew when asked to run".into(),
            )),
            0,
            Vec::new(),
        )),
    }
}

impl Caller {
    fn ready(&mut self, event: &Event) -> Result<Option<Done>, TxError> {
        flush(self)?;
        // A short read is the last until the next readable event (see
        // `protocol::ReadOnce::drained`), unless the server closed its end.
        let to_the_end = event.is_read_closed() || event.is_error();
        let mut readable = event.is_readable() || to_the_end;
        while readable {
            match self.input.read_once(&mut self.sock) {
                Ok(read) if read.bytes == 0 => {
                    return Err(TxError::Connection(
                        "the server closed the connection".into(),
                    ))
                }
                Ok(read) => readable = !read.drained() || to_the_end,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TxError::Connection(e.to_string())),
            }
        }
        let Some(frame) = self
            .input
            .next_frame()
            .map_err(|e| TxError::Connection(e.to_string()))?
        else {
            return Ok(None);
        };
        let result =
            match Response::decode(frame).map_err(|e| TxError::Connection(e.to_string()))? {
                Response::Returned { values } => self.terminal.returned(&values),
                Response::Failed { class, message } => Err(class.into_tx_error(message)),
                other => return Err(TxError::Connection(format!("unexpected {other:?}"))),
            };
        let mut receipts = Vec::new();
        if self.acking && result.is_ok() {
            self.terminal.receipts(&mut receipts);
        }
        // One call in flight: a second frame answers none.
        if self
            .input
            .next_frame()
            .map_err(|e| TxError::Connection(e.to_string()))?
            .is_some()
        {
            return Err(TxError::Connection("an answer to no call".into()));
        }
        Ok(Some(Done::Attempt(result, 1, receipts)))
    }
}

/// One connection and the transaction it runs.
struct Conn {
    link: Link,
    call: Option<Call>,
}

struct Call {
    ty: usize,
    begin: Instant,
    measured: bool,
    attempts: u32,
}

/// A timer in the epoll set: the loop wakes when an open loop's next slot, or a retry, is due,
/// to the microsecond, where an epoll timeout counts whole milliseconds (a slot due in 150 µs
/// would wait a millisecond, and count it as latency).
struct Alarm {
    fd: std::os::fd::OwnedFd,
    /// When it was last set to ring.
    set_for: Option<Instant>,
}

/// The alarm's token: no connection's.
const ALARM: Token = Token(usize::MAX);

impl Alarm {
    fn new(poll: &Poll) -> std::io::Result<Alarm> {
        use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        use std::os::fd::AsRawFd;
        poll.registry()
            .register(&mut SourceFd(&fd.as_raw_fd()), ALARM, Interest::READABLE)?;
        Ok(Alarm { fd, set_for: None })
    }

    /// Rings at `at` (at once if that has passed). Setting the timer again clears its count,
    /// so a ring is never read.
    fn set(&mut self, at: Instant) -> std::io::Result<()> {
        use rustix::time::{timerfd_settime, Itimerspec, TimerfdTimerFlags, Timespec};
        if self.set_for == Some(at) {
            return Ok(());
        }
        // A zero value would disarm it: the earliest is a nanosecond from now.
        let after = at
            .saturating_duration_since(Instant::now())
            .max(Duration::from_nanos(1));
        let value = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: Timespec {
                tv_sec: after.as_secs() as _,
                tv_nsec: after.subsec_nanos() as _,
            },
        };
        timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &value)?;
        self.set_for = Some(at);
        Ok(())
    }
}

/// How the client side runs each connection's transactions.
#[derive(Clone, Copy)]
pub struct ClientSide<'a> {
    pub mode: Mode,
    /// Interactive transactions read ahead what their procedures hint
    /// ([`client::Client::set_read_ahead`]).
    pub read_ahead: bool,
    /// Where each acknowledged commit's receipts go (`--ack-log`), if anywhere: appended as
    /// the commit's answer is taken, before the connection's next transaction.
    pub ack_log: Option<&'a AckLog>,
}

/// What a multiplexed run measured.
#[derive(Debug)]
pub struct Multiplexed {
    pub outcome: DriverOutcome,
    /// Per transaction type: attempts that ended (committed or rolled back) and their round
    /// trips.
    pub trips: Vec<(u64, u64)>,
}

fn failed(terminal: usize, txn: &str, source: TxError) -> DriverError {
    DriverError::Txn {
        txn: txn.to_string(),
        terminal,
        source,
    }
}

/// Runs `f`, which calls into connection `id`'s workload code (its terminal, or a procedure on
/// its coroutine), for `what`. A panic there, a bug in the workload or the client, ends the run
/// as a worker thread's panic ends the threaded driver's run: as [`DriverError::Panicked`], not
/// as a panic out of `glass bench`. Unwind safety: after a panic the run ends, and nothing of
/// the connection is used again but [`Link::stop`], which leaves an unwound coroutine alone.
fn guard<T>(
    id: usize,
    what: &str,
    f: impl FnOnce() -> Result<T, TxError>,
) -> Result<T, DriverError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result.map_err(|e| failed(id, what, e)),
        Err(payload) => Err(DriverError::Panicked {
            terminal: id,
            message: panic_message(&*payload),
        }),
    }
}

/// Opens a connection: a blocking handshake, then non-blocking.
fn connect(endpoint: &Endpoint, workload: &str) -> Result<Sock, TxError> {
    let broken = |what: &str, e: &dyn std::fmt::Display| {
        TxError::Connection(format!("{what} {endpoint}: {e}"))
    };
    let mut hello = Vec::new();
    Request::Hello {
        magic: protocol::MAGIC,
        version: protocol::VERSION,
        max_frame: protocol::DEFAULT_MAX_FRAME,
    }
    .encode(&mut hello);
    fn handshake<S: Read + Write>(s: &mut S, hello: &[u8]) -> std::io::Result<Vec<u8>> {
        s.write_all(hello)?;
        let mut buf = FrameBuffer::new(protocol::DEFAULT_MAX_FRAME);
        loop {
            if let Some(frame) = buf
                .next_frame()
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?
            {
                return Ok(frame.to_vec());
            }
            if buf.read_from(s)? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
    let (frame, sock) = match endpoint {
        Endpoint::Tcp(addr) => {
            let mut s = std::net::TcpStream::connect(addr).map_err(|e| broken("connect to", &e))?;
            s.set_nodelay(true)
                .map_err(|e| broken("set TCP_NODELAY on", &e))?;
            let frame = handshake(&mut s, &hello).map_err(|e| broken("greet", &e))?;
            s.set_nonblocking(true)
                .map_err(|e| broken("configure", &e))?;
            (frame, Sock::Tcp(TcpStream::from_std(s)))
        }
        Endpoint::Unix(path) => {
            let mut s = std::os::unix::net::UnixStream::connect(path)
                .map_err(|e| broken("connect to", &e))?;
            let frame = handshake(&mut s, &hello).map_err(|e| broken("greet", &e))?;
            s.set_nonblocking(true)
                .map_err(|e| broken("configure", &e))?;
            (frame, Sock::Unix(UnixStream::from_std(s)))
        }
        // A shared-memory connection runs through `client::Client` (see `open`).
        Endpoint::Shm(_) => {
            return Err(TxError::Invalid(
                "a stored-procedure caller needs a socket; shared memory runs through a client"
                    .into(),
            ))
        }
    };
    match Response::decode(&frame).map_err(|e| broken("greet", &e))? {
        Response::Welcome { workload: w, .. } if w == workload => Ok(sock),
        Response::Welcome { workload: w, .. } => Err(TxError::Invalid(format!(
            "the server at {endpoint} serves {w}, not {workload}"
        ))),
        Response::Failed { class, message } => Err(class.into_tx_error(message)),
        other => Err(broken("greet", &format!("unexpected {other:?}"))),
    }
}

/// Drives `terminals`, a connection each to `endpoint`, from this thread, running the
/// transactions of `procedures` (indexed like the terminals' types) as `side` says.
pub fn drive_multiplexed(
    terminals: Vec<Box<dyn Terminal>>,
    endpoint: &Endpoint,
    workload: &str,
    procedures: &[&str],
    side: ClientSide<'_>,
    config: &DriverConfig,
    progress: &mut ProgressLine,
) -> Result<Multiplexed, DriverError> {
    if terminals.is_empty() {
        return Err(DriverError::NoTerminals);
    }
    let poll_failed = |e: std::io::Error| failed(0, "poll", TxError::Connection(e.to_string()));
    let mut poll = Poll::new().map_err(poll_failed)?;
    let mut conns = Vec::with_capacity(terminals.len());
    for (i, terminal) in terminals.into_iter().enumerate() {
        let link = open(endpoint, workload, procedures, side, terminal, &poll, i)
            .map_err(|e| failed(i, "connect", e))?;
        conns.push(Conn { link, call: None });
    }
    let mut mux = Mux {
        procedures,
        config,
        ack_log: side.ack_log,
        stats: RunStats::new(procedures.len()),
        trips: vec![(0, 0); procedures.len()],
        conns,
        free: Vec::new(),
        lazy: Vec::new(),
        in_flight: 0,
        settled: VecDeque::new(),
        retries: Vec::new(),
        rng: SmallRng::seed_from_u64(config.seed),
        measured_done: 0,
        spin: matches!(endpoint, Endpoint::Shm(_)),
        fruitless: 0,
    };
    mux.free = (0..mux.conns.len()).rev().collect();
    let result = mux.run(&mut poll, progress);
    for c in &mut mux.conns {
        c.link.stop();
    }
    let outcome = result?;
    Ok(Multiplexed {
        outcome,
        trips: mux.trips,
    })
}

/// Opens connection `i` and registers it with `poll`.
fn open(
    endpoint: &Endpoint,
    workload: &str,
    procedures: &[&str],
    side: ClientSide<'_>,
    terminal: Box<dyn Terminal>,
    poll: &Poll,
    i: usize,
) -> Result<Link, TxError> {
    let acking = side.ack_log.is_some();
    let interest = Interest::READABLE | Interest::WRITABLE;
    let register = |e: std::io::Error| TxError::Connection(format!("register with epoll: {e}"));
    // A shared-memory connection has no socket for a frame caller: it runs every mode on a
    // coroutine, whose client calls the procedure and spins through the loop.
    if side.mode == Mode::StoredProcedure && !matches!(endpoint, Endpoint::Shm(_)) {
        let mut sock = connect(endpoint, workload)?;
        poll.registry()
            .register(sock.source(), Token(i), interest)
            .map_err(register)?;
        return Ok(Link::Caller(Caller {
            sock,
            input: FrameBuffer::new(protocol::DEFAULT_MAX_FRAME),
            out: Vec::new(),
            written: 0,
            terminal,
            args: Vec::new(),
            acking,
        }));
    }
    let mut client = client::Client::connect(endpoint)?;
    if client.workload() != workload {
        return Err(TxError::Invalid(format!(
            "the server at {endpoint} serves {}, not {workload}",
            client.workload()
        )));
    }
    client.set_read_ahead(side.read_ahead);
    // Shared memory has no socket: the loop looks at a waiting coroutine's slot every turn.
    if let Some(fd) = client.as_raw_fd() {
        poll.registry()
            .register(&mut SourceFd(&fd), Token(i), interest)
            .map_err(register)?;
    }
    let procedures = procedures.iter().map(|p| p.to_string()).collect();
    Fiber::new(client, terminal, side.mode, procedures, acking)
        .map(Link::Fiber)
        .map_err(|e| TxError::Invalid(format!("map a client coroutine's stack: {e}")))
}

/// The loop's state.
struct Mux<'a> {
    procedures: &'a [&'a str],
    config: &'a DriverConfig,
    ack_log: Option<&'a AckLog>,
    stats: RunStats,
    trips: Vec<(u64, u64)>,
    conns: Vec<Conn>,
    /// Connections with nothing in flight, the next to start last.
    free: Vec<usize>,
    /// Connections with nothing in flight whose last transaction may have left a lazy
    /// commit to send; they start the next transactions first (the commit rides along), and
    /// send it alone when they would sit idle.
    lazy: Vec<usize>,
    /// Connections with a transaction or a lazy commit under way (or a retry waiting).
    in_flight: usize,
    /// What connections finished, not yet accounted.
    settled: VecDeque<(usize, Done)>,
    /// Retries waiting out their back-off: when, and which connection.
    retries: Vec<(Instant, usize)>,
    rng: SmallRng,
    measured_done: u64,
    /// The connections are shared-memory slots, which the loop spins on ([`Mux::look_all`]).
    spin: bool,
    /// Turns of the spin in a row in which no answer came.
    fruitless: u32,
}

impl Mux<'_> {
    /// Through shared memory: every coroutine waiting for an answer looks at its slot. Returns
    /// whether any was waiting. A spin that finds nothing for a while lets another thread
    /// have the core, as a shared-memory client's own spin does.
    fn look_all(&mut self) -> Result<bool, DriverError> {
        let mut waiting = false;
        let before = self.settled.len();
        for (id, c) in self.conns.iter_mut().enumerate() {
            if !c.link.waiting() {
                continue;
            }
            waiting = true;
            let what = match &c.call {
                Some(call) => self.procedures[call.ty],
                None => "commit",
            };
            if let Some(done) = guard(id, what, || c.link.look())? {
                self.settled.push_back((id, done));
            }
        }
        if waiting && self.settled.len() == before {
            self.fruitless = self.fruitless.wrapping_add(1);
            if self.fruitless.is_multiple_of(1024) {
                std::thread::yield_now();
            }
        } else {
            self.fruitless = 0;
        }
        Ok(waiting)
    }

    fn run(
        &mut self,
        poll: &mut Poll,
        progress: &mut ProgressLine,
    ) -> Result<DriverOutcome, DriverError> {
        let config = self.config;
        let poll_failed = |e: std::io::Error| failed(0, "poll", TxError::Connection(e.to_string()));
        let mut alarm = Alarm::new(poll).map_err(poll_failed)?;
        let mut events = Events::with_capacity(self.conns.len().max(16));
        let started = Instant::now();
        let measure_from = started + config.warmup;
        let mut measure_end = match config.stop {
            Stop::Duration(d) => Some(measure_from + d),
            Stop::Txns(_) => None,
        };
        let budget = match config.stop {
            Stop::Txns(n) => Some(n),
            Stop::Duration(_) => None,
        };
        let mut next_slot = 0u64;
        let mut backlog: VecDeque<Instant> = VecDeque::new();
        let mut last_progress = Instant::now();
        let mut started_measured = 0u64;
        // When `driver::interrupt_flag` ended the run early.
        let mut cut_at: Option<Instant> = None;
        loop {
            let now = Instant::now();
            if cut_at.is_none() && crate::driver::interrupted() {
                cut_at = Some(now);
                measure_end = Some(measure_end.map_or(now, |end| end.min(now)));
            }
            let stopping = measure_end.is_some_and(|end| now >= end)
                || budget.is_some_and(|n| started_measured >= n);
            // Retries whose back-off is over.
            let mut i = 0;
            while i < self.retries.len() {
                if self.retries[i].0 <= now {
                    let (_, id) = self.retries.swap_remove(i);
                    self.attempt(id, false)?;
                } else {
                    i += 1;
                }
            }
            // Start transactions on free connections.
            if !stopping {
                if let Some(rate) = config.rate {
                    while started + Duration::from_secs_f64(next_slot as f64 / rate) <= now {
                        backlog
                            .push_back(started + Duration::from_secs_f64(next_slot as f64 / rate));
                        next_slot += 1;
                    }
                }
                while let Some(id) = self.lazy.last().or(self.free.last()).copied() {
                    let begin = match config.rate {
                        Some(_) => match backlog.pop_front() {
                            Some(at) => at,
                            None => break,
                        },
                        None => now,
                    };
                    let measured = begin >= measure_from;
                    if measured {
                        if budget.is_some_and(|n| started_measured >= n) {
                            break;
                        }
                        started_measured += 1;
                    }
                    if self.lazy.pop().is_none() {
                        self.free.pop();
                    }
                    self.begin(id, begin, measured)?;
                }
            }
            // Connections that will sit idle send what they held back.
            if config.rate.is_some() || stopping {
                while let Some(id) = self.lazy.pop() {
                    self.in_flight += 1;
                    let link = &mut self.conns[id].link;
                    if let Some(done) = guard(id, "commit", || link.flush())? {
                        self.settled.push_back((id, done));
                    }
                }
            }
            self.settle()?;
            if stopping && self.in_flight == 0 && self.settled.is_empty() && self.lazy.is_empty() {
                break;
            }
            // The next thing due that no socket will announce: a slot, or a retry.
            let mut due = self.retries.iter().map(|r| r.0).min();
            if let (Some(rate), false) = (config.rate, stopping) {
                let slot = started + Duration::from_secs_f64(next_slot as f64 / rate);
                due = Some(due.map_or(slot, |d| d.min(slot)));
            }
            if let Some(at) = due {
                alarm.set(at).map_err(poll_failed)?;
            }
            // Through shared memory nothing announces an answer: while any connection waits
            // for one, the loop spins, looking at each; otherwise it sleeps in epoll until
            // the alarm (or a socket) wakes it.
            if !(self.spin && self.look_all()?) {
                match poll.poll(&mut events, Some(Duration::from_millis(10))) {
                    Ok(()) => {}
                    // A signal (Ctrl-C, which the next turn of the loop sees as the interrupt
                    // flag): no events this time.
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => events.clear(),
                    Err(e) => return Err(poll_failed(e)),
                }
                for event in events.iter() {
                    let id = event.token().0;
                    let Some(c) = self.conns.get_mut(id) else {
                        continue;
                    };
                    let what = match &c.call {
                        Some(call) => self.procedures[call.ty],
                        None => "read",
                    };
                    if let Some(done) = guard(id, what, || c.link.ready(event))? {
                        self.settled.push_back((id, done));
                    }
                }
            }
            self.settle()?;
            if last_progress.elapsed() >= Duration::from_millis(500) {
                last_progress = Instant::now();
                let elapsed = Instant::now().saturating_duration_since(measure_from);
                let done = self.measured_done;
                progress.update(|| {
                    format!(
                        "{done} txns, {:.0} txn/s",
                        done as f64 / elapsed.as_secs_f64().max(1e-3)
                    )
                });
            }
            if measure_end.is_none() && budget.is_some_and(|n| self.measured_done >= n) {
                measure_end = Some(Instant::now());
            }
        }
        if cut_at.is_some_and(|at| at < measure_from) {
            return Err(DriverError::Interrupted);
        }
        let end = measure_end.unwrap_or_else(Instant::now);
        Ok(DriverOutcome {
            stats: std::mem::replace(&mut self.stats, RunStats::new(0)),
            elapsed: end.saturating_duration_since(measure_from),
            interrupted: cut_at.is_some_and(|at| Some(at) == measure_end),
        })
    }

    /// Draws connection `id`'s next transaction and starts it.
    fn begin(&mut self, id: usize, begin: Instant, measured: bool) -> Result<(), DriverError> {
        let c = &mut self.conns[id];
        let ty = guard(id, "draw", || c.link.draw())?;
        if ty >= self.procedures.len() {
            return Err(DriverError::BadType {
                terminal: id,
                ty,
                types: self.procedures.len(),
            });
        }
        c.call = Some(Call {
            ty,
            begin,
            measured,
            attempts: 0,
        });
        self.in_flight += 1;
        self.attempt(id, true)
    }

    /// Starts an attempt of connection `id`'s transaction.
    fn attempt(&mut self, id: usize, first: bool) -> Result<(), DriverError> {
        let c = &mut self.conns[id];
        let name = match &c.call {
            Some(call) => self.procedures[call.ty],
            None => {
                return Err(failed(
                    id,
                    "retry",
                    TxError::Invalid("no transaction".into()),
                ))
            }
        };
        if let Some(done) = guard(id, name, || c.link.attempt(name, first))? {
            self.settled.push_back((id, done));
        }
        Ok(())
    }

    /// Accounts for what connections finished.
    fn settle(&mut self) -> Result<(), DriverError> {
        while let Some((id, done)) = self.settled.pop_front() {
            let c = &mut self.conns[id];
            let (result, trips) = match done {
                Done::Flushed(result) => {
                    result.map_err(|e| failed(id, "commit", e))?;
                    self.in_flight -= 1;
                    self.free.push(id);
                    continue;
                }
                Done::Attempt(result, trips, receipts) => {
                    if let (Ok(()), Some(log), false) = (&result, self.ack_log, receipts.is_empty())
                    {
                        log.record(&receipts).map_err(|e| {
                            let e = storage::StorageError::io(
                                "append to the ack log (the commit itself succeeded)",
                                e,
                            );
                            failed(id, "ack", TxError::Storage(e))
                        })?;
                    }
                    (result, trips)
                }
            };
            let Some(call) = c.call.as_mut() else {
                return Err(failed(
                    id,
                    "read",
                    TxError::Connection("an answer to no transaction".into()),
                ));
            };
            let name = self.procedures[call.ty];
            let outcome = match result {
                Ok(()) => Outcome::Committed,
                Err(TxError::UserAbort(_)) => Outcome::RolledBack,
                Err(e) if e.is_retryable() => {
                    call.attempts += 1;
                    if call.measured {
                        self.stats.by_type[call.ty].aborts += 1;
                    }
                    if call.attempts >= self.config.retry_limit {
                        return Err(DriverError::RetryLimit {
                            txn: name.to_string(),
                            terminal: id,
                            attempts: call.attempts,
                            last: e.to_string(),
                        });
                    }
                    let at = Instant::now() + backoff_delay(call.attempts, &mut self.rng);
                    self.retries.push((at, id));
                    continue;
                }
                Err(e) => return Err(failed(id, name, e)),
            };
            let call = c.call.take().expect("checked above");
            let t = &mut self.trips[call.ty];
            t.0 += 1;
            t.1 += trips;
            if call.measured {
                self.stats.by_type[call.ty].record(outcome, call.begin.elapsed());
                self.measured_done += 1;
            }
            self.in_flight -= 1;
            match c.link {
                Link::Fiber(_) => self.lazy.push(id),
                Link::Caller(_) => self.free.push(id),
            }
        }
        Ok(())
    }
}

fn flush(c: &mut Caller) -> Result<(), TxError> {
    while c.written < c.out.len() {
        match c.sock.write(&c.out[c.written..]) {
            Ok(0) => return Err(TxError::Connection("the server stopped reading".into())),
            Ok(n) => c.written += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(TxError::Connection(e.to_string())),
        }
    }
    c.out.clear();
    c.written = 0;
    Ok(())
}
