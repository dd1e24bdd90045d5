//! The unified architecture (PostgreSQL's, the 2025 paper's Table 4): each worker thread owns
//! its connections and reads, runs and answers their requests itself. An acceptor thread
//! hands each new connection to the next worker.
//!
//! ```text
//!   acceptor ──(new socket, round robin)──► worker 1: epoll ─► read ─► run ─► write ─┐
//!                                          worker 2: …                              │
//!                                              ▲────────────────────────────────────┘
//! ```
//!
//! A request is served start to finish on one thread: no queue and no hand-off. While a
//! worker runs one transaction its other connections wait, so a lock request that would wait
//! for another of its connections' open transactions is refused at once (the server binds
//! transactions to their threads: `txn::lock::LockConfig::thread_bound`). The request is
//! parked instead ([`Flow::Park`]: a first batch rolled back, a later one taken back to where
//! it began) and handled again once the transaction it would have waited for has ended (of
//! several parked behind one holder, the oldest; the others then wait for it:
//! [`HandOffs`]). A longer cycle through another worker's waiting transaction is found in the
//! wait-for graph, and the lock wait's bound ([`engine::DbConfig::lock_wait_timeout`]) is the
//! backstop, for parked requests too.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::channel::Receiver;
use mio::{Events, Interest, Poll, Token, Waker};

use crate::control::{Control, Refused, WorkerStats};
use crate::handler::{ConnState, Flow, HandOffs, Shared};
use crate::link::{Fill, Link, Listener, Stream};
use crate::trace::Tracer;

const WAKER: Token = Token(usize::MAX);

/// A worker's connection: its socket and its protocol state.
struct Conn<'db> {
    link: Link,
    state: ConnState<'db>,
    /// A protocol error was answered: close once the answer is sent.
    closing: bool,
    /// A request put aside ([`Flow::Park`]); the connection's later requests wait in its
    /// buffer behind it.
    parked: Option<Parked>,
}

/// A request put aside: its frame, since when, and the transaction of this worker it would
/// have waited for (`None`: not named, as for a deadlock's victim).
struct Parked {
    frame: Vec<u8>,
    since: Instant,
    behind: Option<u64>,
}

impl Parked {
    /// Whether to run it again now ([`crate::handler::parked_is_due`]).
    fn due(&self, sweep: bool, ended: &[u64]) -> bool {
        crate::handler::parked_is_due(self.behind, sweep, ended)
    }
}

/// Handles `frame` for `conn` (parking it where [`ConnState::handle_or_park`] says so),
/// noting in `ended` the connection's transaction if the request ended it.
fn handle<'db>(
    state: &mut ConnState<'db>,
    frame: &[u8],
    shared: &'db Shared,
    output: &mut Vec<u8>,
    tracer: &mut Tracer,
    may_park: bool,
    ended: &mut Vec<u64>,
) -> Flow {
    let open = state.open_transaction();
    let flow = state.handle_or_park(frame, shared, output, tracer, may_park);
    if let Some(id) = open {
        if state.open_transaction() != Some(id) {
            ended.push(id);
        }
    }
    flow
}

/// Serves one connection after a readiness event (or after its parked request was
/// answered): reads and answers its requests until it has none or one is parked. Returns
/// whether to keep the connection; notes in `ended` the transactions its requests ended.
fn service<'db>(
    conn: &mut Conn<'db>,
    shared: &'db Shared,
    stats: &mut WorkerStats,
    tracer: &mut Tracer,
    ended: &mut Vec<u64>,
) -> bool {
    loop {
        let closed = conn.link.fill(tracer) == Fill::Closed;
        while !conn.closing && conn.parked.is_none() && conn.link.has_room() {
            let Link { input, output, .. } = &mut conn.link;
            match input.next_frame() {
                Ok(Some(frame)) => {
                    stats.requests += 1;
                    match handle(&mut conn.state, frame, shared, output, tracer, true, ended) {
                        Flow::Continue => {}
                        Flow::Close => conn.closing = true,
                        Flow::Park => {
                            stats.parked += 1;
                            conn.parked = Some(Parked {
                                frame: frame.to_vec(),
                                since: Instant::now(),
                                behind: conn.state.parked_behind(),
                            });
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    crate::control::protocol_failure(&e, output);
                    conn.closing = true;
                }
            }
        }
        if conn.link.flush(tracer).is_err() {
            return false;
        }
        if conn.closing {
            return conn.link.unsent() > 0;
        }
        if closed {
            // The peer closed its end: its requests are answered (a parked one too); keep
            // the connection only while an answer waits.
            return conn.link.unsent() > 0 || conn.parked.is_some();
        }
        if !conn.link.can_read() {
            return true;
        }
    }
}

/// Handles `conn`'s parked request again: parked again while the wait's `bound` has not
/// passed since it was first parked, else answered (as its failure, if it fails again);
/// once answered, the requests behind it are served. Returns whether to keep the connection.
fn retry_parked<'db>(
    conn: &mut Conn<'db>,
    shared: &'db Shared,
    stats: &mut WorkerStats,
    tracer: &mut Tracer,
    (bound, now): (Duration, Instant),
    ended: &mut Vec<u64>,
) -> bool {
    let Some(mut parked) = conn.parked.take() else {
        return true;
    };
    let may_park = now.duration_since(parked.since) < bound;
    let output = &mut conn.link.output;
    match handle(
        &mut conn.state,
        &parked.frame,
        shared,
        output,
        tracer,
        may_park,
        ended,
    ) {
        Flow::Park => {
            parked.behind = conn.state.parked_behind();
            conn.parked = Some(parked);
            return true;
        }
        Flow::Close => conn.closing = true,
        Flow::Continue => {}
    }
    if may_park {
        stats.unparked += 1;
    }
    service(conn, shared, stats, tracer, ended)
}

/// One worker: serves the connections it is handed until told to stop.
pub(crate) fn worker(
    shared: &Shared,
    control: &Control,
    mut poll: Poll,
    incoming: Receiver<Stream>,
) -> WorkerStats {
    let mut stats = WorkerStats::default();
    let mut tracer = Tracer::new(control.config.trace);
    let mut events = Events::with_capacity(256);
    let mut conns: HashMap<usize, Conn<'_>> = HashMap::new();
    let mut next_id = 0usize;
    let mut last_sweep = Instant::now();
    let mut parking = Parking::new(shared.db.config().lock_wait_timeout);
    while !control.stop.load(Ordering::Acquire) {
        if poll.poll(&mut events, Some(control.tick())).is_err() {
            // EINTR from a signal: poll again.
            continue;
        }
        for event in events.iter() {
            if event.token() == WAKER {
                continue;
            }
            let id = event.token().0;
            let keep = match conns.get_mut(&id) {
                Some(conn) => {
                    conn.link.note_event(event);
                    let keep = service(conn, shared, &mut stats, &mut tracer, &mut parking.ended);
                    parking.note(id, conn);
                    keep
                }
                None => true,
            };
            if !keep {
                parking
                    .ended
                    .extend(drop_conn(&mut conns, id, &poll, control));
            }
            // Those parked behind a transaction this event ended go now, before the other
            // events' requests can take what it let go of.
            let mut worker = (&mut stats, &mut tracer);
            parking.run_due(&mut conns, false, shared, &mut worker, (&poll, control));
        }
        // Connections the acceptor handed over (it wakes this worker after each).
        while let Ok(mut stream) = incoming.try_recv() {
            let id = next_id;
            next_id += 1;
            let token = Token(id);
            if poll
                .registry()
                .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
                .is_err()
            {
                control.open.fetch_sub(1, Ordering::AcqRel);
                continue;
            }
            stats.connections += 1;
            let mut conn = Conn {
                link: Link::new(stream, shared.max_frame),
                state: ConnState::default(),
                closing: false,
                parked: None,
            };
            // Bytes may have arrived before the registration.
            if service(
                &mut conn,
                shared,
                &mut stats,
                &mut tracer,
                &mut parking.ended,
            ) {
                parking.note(id, &conn);
                conns.insert(id, conn);
            } else {
                let _ = poll.registry().deregister(&mut conn.link.stream);
                control.open.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let now = Instant::now();
        let sweep = now.duration_since(last_sweep) >= control.tick();
        if sweep {
            last_sweep = now;
            for conn in conns.values_mut() {
                let open = conn.state.open_transaction();
                if conn.state.expire(now, control.config.idle_timeout) {
                    stats.timed_out += 1;
                    parking.ended.extend(open);
                }
            }
        }
        let mut worker = (&mut stats, &mut tracer);
        parking.run_due(&mut conns, sweep, shared, &mut worker, (&poll, control));
    }
    // Dropping the connections aborts their open transactions.
    control.open.fetch_sub(conns.len(), Ordering::AcqRel);
    drop(conns);
    tracer.finish_into(&mut stats);
    stats
}

/// A worker's parked requests: the connections that have one, and the transactions of the
/// worker that ended since they last looked.
struct Parking {
    /// How long a parked request waits at most: as long as a lock wait may.
    bound: Duration,
    conns: Vec<usize>,
    ended: Vec<u64>,
    /// `ended` as a pass over the parked requests found it (swapped, not taken: both vectors
    /// keep their room from pass to pass).
    now_ended: Vec<u64>,
    hand_offs: HandOffs,
}

impl Parking {
    fn new(bound: Duration) -> Parking {
        Parking {
            bound,
            conns: Vec::new(),
            ended: Vec::new(),
            now_ended: Vec::new(),
            hand_offs: HandOffs::default(),
        }
    }

    /// Notes connection `id`'s parked request, if it has one.
    fn note(&mut self, id: usize, conn: &Conn<'_>) {
        if conn.parked.is_some() && !self.conns.contains(&id) {
            self.conns.push(id);
        }
    }

    /// Runs the parked requests that are due, oldest first: those whose holder has ended, and
    /// at a `sweep` all of them (the holder may be another worker's, or the bound past).
    /// Running one may end another's wait in turn (a commit sent behind it).
    fn run_due<'db>(
        &mut self,
        conns: &mut HashMap<usize, Conn<'db>>,
        mut sweep: bool,
        shared: &'db Shared,
        (stats, tracer): &mut (&mut WorkerStats, &mut Tracer),
        (poll, control): (&Poll, &Control),
    ) {
        while sweep || !self.ended.is_empty() {
            std::mem::swap(&mut self.ended, &mut self.now_ended);
            self.ended.clear();
            self.conns
                .retain(|id| conns.get(id).is_some_and(|c| c.parked.is_some()));
            let mut due: Vec<(Instant, usize)> = self
                .conns
                .iter()
                .filter_map(|&id| {
                    let p = conns.get(&id)?.parked.as_ref()?;
                    p.due(sweep, &self.now_ended).then_some((p.since, id))
                })
                .collect();
            sweep = false;
            due.sort_unstable();
            self.hand_offs.clear();
            let now = Instant::now();
            for (_, id) in due {
                let Some(conn) = conns.get_mut(&id) else {
                    continue;
                };
                let behind = conn.parked.as_ref().and_then(|p| p.behind);
                if let Some(successor) = self.hand_offs.successor(behind) {
                    if let Some(p) = conn.parked.as_mut() {
                        p.behind = Some(successor);
                        stats.handed_on += 1;
                    }
                    continue;
                }
                let at = (self.bound, now);
                if !retry_parked(conn, shared, stats, tracer, at, &mut self.ended) {
                    self.ended.extend(drop_conn(conns, id, poll, control));
                } else if conn.parked.is_none() {
                    self.hand_offs.note(behind, conn.state.open_transaction());
                }
            }
        }
    }
}

/// Drops connection `id`, aborting its open transaction; returns that transaction's id.
fn drop_conn(
    conns: &mut HashMap<usize, Conn<'_>>,
    id: usize,
    poll: &Poll,
    control: &Control,
) -> Option<u64> {
    let mut conn = conns.remove(&id)?;
    let _ = poll.registry().deregister(&mut conn.link.stream);
    control.open.fetch_sub(1, Ordering::AcqRel);
    conn.state.open_transaction()
}

/// Accepts connections and deals them to the workers in turn.
pub(crate) fn acceptor(
    control: &Control,
    mut poll: Poll,
    mut listeners: Vec<Listener>,
    workers: Vec<(crossbeam::channel::Sender<Stream>, Arc<Waker>)>,
) -> WorkerStats {
    let mut refused = Refused::default();
    let mut events = Events::with_capacity(64);
    for (i, l) in listeners.iter_mut().enumerate() {
        if poll
            .registry()
            .register(l, Token(i), Interest::READABLE)
            .is_err()
        {
            return WorkerStats::default();
        }
    }
    let mut next = 0usize;
    while !control.stop.load(Ordering::Acquire) {
        let polled = poll.poll(&mut events, Some(control.tick()));
        refused.sweep();
        if polled.is_err() {
            continue;
        }
        for event in events.iter() {
            let Some(listener) = listeners.get(event.token().0) else {
                continue;
            };
            loop {
                let stream = match listener.accept() {
                    Ok(s) => s,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    // A connection reset before it was accepted, or out of descriptors: the
                    // next readiness event tries again.
                    Err(_) => break,
                };
                if !control.admit() {
                    refused.refuse(stream, control.config.max_connections);
                    continue;
                }
                let (sender, waker) = &workers[next % workers.len()];
                next += 1;
                if sender.send(stream).is_err() {
                    control.open.fetch_sub(1, Ordering::AcqRel);
                    continue;
                }
                let _ = waker.wake();
            }
        }
    }
    WorkerStats {
        refused: refused.count,
        ..WorkerStats::default()
    }
}
