//! One client thread for many connections: the stored-procedure client of `glass bench
//! --server --mode sp`, as the 2025 paper's clients drive up to 512 connections. Every
//! connection is a terminal with at most one call in flight; one `epoll` loop sends each
//! terminal's next call when its last answer arrives (closed loop), or when its slot in the
//! schedule comes (open loop, `DriverConfig::rate`: a slot waits for a free connection, and
//! its latency counts from the slot).
//!
//! ```text
//!   connect all (blocking handshake, then non-blocking)
//!   loop until the measured time is over and no call is in flight:
//!     free connections take the next transaction: closed loop at once, open loop when a slot
//!       is due (slots due with no free connection queue up, oldest first)
//!     epoll ─► read frames ─► Returned: committed; Failed(user abort): rolled back;
//!              Failed(retryable): the same call again; anything else ends the run
//! ```
//!
//! Phases follow the threaded driver's: a transaction counts if it was started (or its slot
//! fell) in the measured phase. Interactive transactions need a thread each (the procedure
//! runs in the client), so they stay on the threaded driver.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use engine::{TxError, Value};
use mio::net::{TcpStream, UnixStream};
use mio::{Events, Interest, Poll, Token};
use protocol::{Endpoint, FrameBuffer, Request, Response};
use workloads::Terminal;

use crate::driver::{DriverConfig, DriverError, DriverOutcome, Stop};
use crate::progress::ProgressLine;
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

/// One connection and its terminal.
struct Conn {
    sock: Sock,
    input: FrameBuffer,
    out: Vec<u8>,
    written: usize,
    terminal: Box<dyn Terminal>,
    /// The call in flight: its type, when it started counting, whether it is measured,
    /// attempts so far, and its arguments (kept for a retry).
    call: Option<Call>,
}

struct Call {
    ty: usize,
    begin: Instant,
    measured: bool,
    attempts: u32,
    args: Vec<Value>,
}

fn failed(terminal: usize, txn: &str, source: TxError) -> DriverError {
    DriverError::Txn {
        txn: txn.to_string(),
        terminal,
        source,
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
        Endpoint::Shm(_) => {
            return Err(TxError::Invalid(
                "one client thread cannot spin on many shared-memory slots: use a thread per \
                 connection for shm://"
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

/// Drives `terminals`, a connection each to `endpoint`, from this thread, as stored-procedure
/// calls of `procedures` (indexed like the terminals' types).
pub fn drive_multiplexed(
    terminals: Vec<Box<dyn Terminal>>,
    endpoint: &Endpoint,
    workload: &str,
    procedures: &[&str],
    config: &DriverConfig,
    progress: &mut ProgressLine,
) -> Result<DriverOutcome, DriverError> {
    if terminals.is_empty() {
        return Err(DriverError::NoTerminals);
    }
    let mut poll =
        Poll::new().map_err(|e| failed(0, "connect", TxError::Connection(e.to_string())))?;
    let mut conns = Vec::with_capacity(terminals.len());
    for (i, terminal) in terminals.into_iter().enumerate() {
        let mut sock = connect(endpoint, workload).map_err(|e| failed(i, "connect", e))?;
        poll.registry()
            .register(
                sock.source(),
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| failed(i, "connect", TxError::Connection(e.to_string())))?;
        conns.push(Conn {
            sock,
            input: FrameBuffer::new(protocol::DEFAULT_MAX_FRAME),
            out: Vec::new(),
            written: 0,
            terminal,
            call: None,
        });
    }
    let mut stats = RunStats::new(procedures.len());
    let mut events = Events::with_capacity(conns.len().max(16));
    let started = Instant::now();
    let measure_from = started + config.warmup;
    let mut measure_end = match config.stop {
        Stop::Duration(d) => Some(measure_from + d),
        Stop::Txns(_) => None,
    };
    let mut measured_done = 0u64;
    let mut next_slot = 0u64;
    let mut backlog: VecDeque<Instant> = VecDeque::new();
    let mut free: Vec<usize> = (0..conns.len()).collect();
    let mut in_flight = 0usize;
    let mut last_progress = Instant::now();
    let budget = match config.stop {
        Stop::Txns(n) => Some(n),
        Stop::Duration(_) => None,
    };
    let mut started_measured = 0u64;
    loop {
        let now = Instant::now();
        let stopping = measure_end.is_some_and(|end| now >= end)
            || budget.is_some_and(|n| started_measured >= n);
        if stopping && in_flight == 0 {
            break;
        }
        // Start transactions on free connections.
        if !stopping {
            if let Some(rate) = config.rate {
                while started + Duration::from_secs_f64(next_slot as f64 / rate) <= now {
                    backlog.push_back(started + Duration::from_secs_f64(next_slot as f64 / rate));
                    next_slot += 1;
                }
            }
            while let Some(&id) = free.last() {
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
                free.pop();
                let c = &mut conns[id];
                let ty = c.terminal.next();
                let Some(name) = procedures.get(ty) else {
                    return Err(DriverError::BadType {
                        terminal: id,
                        ty,
                        types: procedures.len(),
                    });
                };
                let mut args = Vec::new();
                c.terminal
                    .args(&mut args)
                    .map_err(|e| failed(id, name, e))?;
                send(c, name, &args).map_err(|e| failed(id, name, e))?;
                c.call = Some(Call {
                    ty,
                    begin,
                    measured,
                    attempts: 0,
                    args,
                });
                in_flight += 1;
            }
        }
        let timeout = match config.rate {
            Some(rate) if !stopping => {
                let due = started + Duration::from_secs_f64(next_slot as f64 / rate);
                Some(
                    due.saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(10)),
                )
            }
            _ => Some(Duration::from_millis(10)),
        };
        poll.poll(&mut events, timeout)
            .map_err(|e| failed(0, "poll", TxError::Connection(e.to_string())))?;
        for event in events.iter() {
            let id = event.token().0;
            let c = &mut conns[id];
            flush(c).map_err(|e| failed(id, "send", e))?;
            // A short read is the last until the next readable event (see
            // `protocol::ReadOnce::drained`), unless the server closed its end.
            let to_the_end = event.is_read_closed() || event.is_error();
            let mut readable = event.is_readable() || to_the_end;
            while readable {
                match c.input.read_once(&mut c.sock) {
                    Ok(read) if read.bytes == 0 => {
                        return Err(failed(
                            id,
                            "read",
                            TxError::Connection("the server closed the connection".into()),
                        ))
                    }
                    Ok(read) => readable = !read.drained() || to_the_end,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(failed(id, "read", TxError::Connection(e.to_string()))),
                }
            }
            while let Some(frame) = c
                .input
                .next_frame()
                .map_err(|e| failed(id, "read", TxError::Connection(e.to_string())))?
            {
                let response = Response::decode(frame)
                    .map_err(|e| failed(id, "read", TxError::Connection(e.to_string())))?;
                let Some(mut call) = c.call.take() else {
                    return Err(failed(
                        id,
                        "read",
                        TxError::Connection("an answer to no call".into()),
                    ));
                };
                let name = procedures[call.ty];
                let outcome = match response {
                    Response::Returned { values } => {
                        c.terminal
                            .returned(&values)
                            .map_err(|e| failed(id, name, e))?;
                        Outcome::Committed
                    }
                    Response::Failed { class, message } => match class.into_tx_error(message) {
                        TxError::UserAbort(_) => Outcome::RolledBack,
                        e if e.is_retryable() && call.attempts + 1 < config.retry_limit => {
                            call.attempts += 1;
                            if call.measured {
                                stats.by_type[call.ty].aborts += 1;
                            }
                            send(c, name, &call.args).map_err(|e| failed(id, name, e))?;
                            c.call = Some(call);
                            continue;
                        }
                        e => return Err(failed(id, name, e)),
                    },
                    other => {
                        return Err(failed(
                            id,
                            name,
                            TxError::Connection(format!("unexpected {other:?}")),
                        ))
                    }
                };
                if call.measured {
                    stats.by_type[call.ty].record(outcome, call.begin.elapsed());
                    measured_done += 1;
                }
                in_flight -= 1;
                free.push(id);
            }
        }
        if last_progress.elapsed() >= Duration::from_millis(500) {
            last_progress = Instant::now();
            let elapsed = Instant::now().saturating_duration_since(measure_from);
            progress.update(|| {
                format!(
                    "{measured_done} txns, {:.0} txn/s",
                    measured_done as f64 / elapsed.as_secs_f64().max(1e-3)
                )
            });
        }
        if budget.is_some() && measure_end.is_none() && budget.is_some_and(|n| measured_done >= n) {
            measure_end = Some(Instant::now());
        }
    }
    let end = measure_end.unwrap_or_else(Instant::now);
    Ok(DriverOutcome {
        stats,
        elapsed: end.saturating_duration_since(measure_from),
    })
}

/// Queues a call and sends what the socket takes.
fn send(c: &mut Conn, procedure: &str, args: &[Value]) -> Result<(), TxError> {
    Request::Call {
        procedure: procedure.to_string(),
        args: args.to_vec(),
    }
    .encode(&mut c.out);
    flush(c)
}

fn flush(c: &mut Conn) -> Result<(), TxError> {
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
