//! What a server's threads share besides the database: the stop flag, the count of open
//! connections, the configuration, and what each thread counted.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use protocol::{ErrorClass, ProtocolError, Response};

use crate::link::Stream;
use crate::ServerConfig;

/// The longest a thread sleeps before it looks at the stop flag and at idle transactions.
const MAX_TICK: Duration = Duration::from_millis(100);

pub(crate) struct Control {
    pub config: ServerConfig,
    /// Set once to make every thread finish.
    pub stop: AtomicBool,
    /// Connections admitted and not yet closed.
    pub open: AtomicUsize,
}

impl Control {
    pub fn new(config: ServerConfig) -> Control {
        Control {
            config,
            stop: AtomicBool::new(false),
            open: AtomicUsize::new(0),
        }
    }

    /// How long a thread may wait for events.
    pub fn tick(&self) -> Duration {
        MAX_TICK
            .min(self.config.idle_timeout / 2)
            .max(Duration::from_millis(1))
    }

    /// Counts a new connection in, unless the server holds its maximum.
    pub fn admit(&self) -> bool {
        let max = self.config.max_connections;
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }
}

/// What one thread counted; summed into the server's report when it stops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Connections served.
    pub connections: u64,
    /// Requests answered.
    pub requests: u64,
    /// Interactive transactions aborted for idling past the limit.
    pub timed_out: u64,
    /// Connections refused because the server held its maximum.
    pub refused: u64,
    /// Autocommit batches outside a transaction that wrote and committed, each a transaction
    /// of its own. The autocommit mode sends every step of a procedure so, and a procedure
    /// cut into separately committed steps can break the workload's conditions; an
    /// interactive client whose transaction fits one batch sends one too (the server cannot
    /// tell them apart).
    pub lone_writes: u64,
    /// Requests put aside because a lock they needed was held by another transaction of
    /// their worker (or they were a deadlock's victim), and of those, the ones run again and
    /// answered before the wait's bound passed (the rest were answered once it had, with
    /// their failure if they failed again: [`crate::handler::Flow::Park`]).
    pub parked: u64,
    pub unparked: u64,
    /// Times a parked request was not run when its holder ended, because an older one parked
    /// behind the same holder ran first and took its place: it waits for that one instead
    /// ([`crate::handler::HandOffs`]).
    pub handed_on: u64,
    /// Where the time went, with `ServerConfig::trace` (else zeros).
    pub phases: crate::trace::Phases,
}

impl std::ops::AddAssign for WorkerStats {
    fn add_assign(&mut self, o: WorkerStats) {
        self.connections += o.connections;
        self.requests += o.requests;
        self.timed_out += o.timed_out;
        self.refused += o.refused;
        self.lone_writes += o.lone_writes;
        self.parked += o.parked;
        self.unparked += o.unparked;
        self.handed_on += o.handed_on;
        self.phases += o.phases;
    }
}

/// Appends the `Failed{Protocol}` frame that answers a frame the buffer refused.
pub(crate) fn protocol_failure(e: &ProtocolError, out: &mut Vec<u8>) {
    Response::Failed {
        class: ErrorClass::Protocol,
        message: e.to_string(),
    }
    .encode(out);
}

/// Connections over the limit, told why and closed gently. Closing a socket with unread bytes
/// (the client's Hello) would reset the connection, and a reset may discard the answer before
/// the client reads it. So a refused socket is answered, shut for writing (the answer is
/// followed by an end of stream), and kept while its input is drained: until the client closes
/// it, or for [`REFUSED_LINGER`] at most.
#[derive(Default)]
pub(crate) struct Refused {
    streams: Vec<(Stream, Instant)>,
    /// Connections refused so far.
    pub count: u64,
}

/// The longest a refused connection is kept to be drained.
const REFUSED_LINGER: Duration = Duration::from_secs(1);

impl Refused {
    /// Answers `stream` with a `Busy` failure (best effort: the socket is new, so its send
    /// buffer has room for one small frame) and keeps it to drain.
    pub fn refuse(&mut self, mut stream: Stream, max: usize) {
        let mut out = Vec::new();
        Response::Failed {
            class: ErrorClass::Busy,
            message: format!("the server holds its maximum of {max} connections; try again later"),
        }
        .encode(&mut out);
        let _ = stream.write(&out);
        stream.shutdown_write();
        self.count += 1;
        self.streams.push((stream, Instant::now()));
    }

    /// Reads and drops what refused connections sent; closes those the client closed and those
    /// kept long enough.
    pub fn sweep(&mut self) {
        let mut buf = [0u8; 512];
        let now = Instant::now();
        self.streams.retain_mut(|(stream, since)| {
            if now.duration_since(*since) >= REFUSED_LINGER {
                return false;
            }
            loop {
                match stream.read(&mut buf) {
                    Ok(0) => return false,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return false,
                }
            }
        });
    }
}
