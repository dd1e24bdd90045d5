//! The dedicated architecture (VoltDB's, the 2025 paper's Table 4): one network thread owns
//! every socket; worker threads run the requests it queues to them and queue the responses
//! back.
//!
//! ```text
//!                  ┌──── request queue 1 (bounded) ───► worker 1 ─┐
//!   network thread ┤                                              ├─► response queue ─┐
//!   epoll, accept, └──── request queue 2 (bounded) ───► worker 2 ─┘   (+ wake-up)      │
//!   read, write  ◄──────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! A connection's requests always go to the same worker (its id modulo the workers), which
//! keeps the connection's protocol state and open transaction: a transaction never changes
//! threads. A connection has at most one job queued or running: the frames its buffer held
//! when the last answer went out (up to 16), handled in order and answered in one write; so
//! the queues hold at most one job per connection. A worker wakes
//! the network thread only when it is asleep in `epoll_wait` (`asleep`), not per response.
//! A job whose frame is parked ([`Flow::Park`]: a batch that met a lock of another of the
//! worker's transactions, its work taken back) waits in its worker, with the answers so far,
//! until the transaction it would have waited for has ended (or a tick passes; of several
//! parked behind one holder, the oldest goes first and the others then wait for it:
//! [`HandOffs`]), and goes on from that frame.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};
use mio::{Events, Interest, Poll, Token, Waker};

use crate::control::{Control, Refused, WorkerStats};
use crate::handler::{ConnState, Flow, HandOffs, Shared};
use crate::link::{Fill, Link, Listener};
use crate::trace::{Phase, Tracer};

/// What the network thread queues to a worker.
pub(crate) enum Job {
    /// Frames (kind and body) of connection `conn`, in order: every whole frame its buffer
    /// held, so a client's pipelined requests (a read-only transaction's lazy commit and the
    /// next request) cost one hand-off and one write, not one each.
    Request { conn: usize, frames: Vec<Vec<u8>> },
    /// Connection `conn` is gone: drop its state, aborting its open transaction.
    Closed { conn: usize },
}

/// A worker's answer to one request.
pub(crate) struct Reply {
    conn: usize,
    bytes: Vec<u8>,
    close: bool,
}

/// The response queue and the network thread's wake-up.
pub(crate) struct Replies {
    pub sender: Sender<Reply>,
    pub waker: Arc<Waker>,
    /// The network thread is (about to be) blocked in `poll`.
    pub asleep: AtomicBool,
}

impl Replies {
    fn send(&self, reply: Reply, tracer: &mut Tracer) {
        let start = tracer.start_cpu();
        if self.sender.send(reply).is_ok() && self.asleep.swap(false, Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
        tracer.charge_cpu(Phase::ResponseQueuing, start);
    }
}

/// A request job being run, or put aside: its frames, the first not answered yet, the
/// answers so far, since when it has been parked ([`Flow::Park`]), and the transaction of
/// this worker its parked frame would have waited for (`None`: not named, as for a
/// deadlock's victim).
struct Pending {
    conn: usize,
    frames: Vec<Vec<u8>>,
    at: usize,
    bytes: Vec<u8>,
    since: Option<Instant>,
    behind: Option<u64>,
}

impl Pending {
    /// Whether to run it again now ([`crate::handler::parked_is_due`]).
    fn due(&self, sweep: bool, ended: &[u64]) -> bool {
        crate::handler::parked_is_due(self.behind, sweep, ended)
    }
}

/// Runs `job`'s frames from where it stopped: sends the reply once every frame is answered
/// (or a protocol error closes the connection), or gives the job back parked. `may_park`
/// says whether its parked frame may be parked again (the wait's bound has not passed; the
/// frames after it may be parked either way); the transactions of the worker that its
/// frames end are noted in `ended`.
#[allow(clippy::too_many_arguments)]
fn run_job<'db>(
    mut job: Pending,
    states: &mut HashMap<usize, ConnState<'db>>,
    shared: &'db Shared,
    replies: &Replies,
    stats: &mut WorkerStats,
    tracer: &mut Tracer,
    mut may_park: bool,
    ended: &mut Vec<u64>,
) -> Option<Pending> {
    let state = states.entry(job.conn).or_default();
    let mut close = false;
    while job.at < job.frames.len() {
        let frame = &job.frames[job.at];
        let open = state.open_transaction();
        let flow = state.handle_or_park(frame, shared, &mut job.bytes, tracer, may_park);
        if let Some(id) = open {
            if state.open_transaction() != Some(id) {
                ended.push(id);
            }
        }
        match flow {
            Flow::Park => {
                if job.since.is_none() {
                    stats.parked += 1;
                    job.since = Some(Instant::now());
                }
                job.behind = state.parked_behind();
                return Some(job);
            }
            // A protocol error: nothing after it is answered.
            Flow::Close => {
                close = true;
                break;
            }
            Flow::Continue => {}
        }
        if job.since.take().is_some() && may_park {
            stats.unparked += 1;
        }
        // The bound was the parked frame's: the next is a request of its own.
        may_park = true;
        job.at += 1;
    }
    if close {
        ended.extend(states.remove(&job.conn).and_then(|s| s.open_transaction()));
    }
    let reply = Reply {
        conn: job.conn,
        bytes: job.bytes,
        close,
    };
    replies.send(reply, tracer);
    None
}

/// One worker: runs the requests of the connections routed to it.
pub(crate) fn worker(
    shared: &Shared,
    control: &Control,
    jobs: Receiver<Job>,
    replies: &Replies,
) -> WorkerStats {
    let mut stats = WorkerStats::default();
    let mut tracer = Tracer::new(control.config.trace);
    let mut states: HashMap<usize, ConnState<'_>> = HashMap::new();
    // Jobs put aside, oldest first: at most one a connection (it has at most one in flight).
    let mut parked: Vec<Pending> = Vec::new();
    let mut last_sweep = Instant::now();
    // How long a parked request waits at most: as long as a lock wait may.
    let bound = shared.db.config().lock_wait_timeout;
    // The transactions of this worker that ended since parked jobs last looked.
    let mut ended: Vec<u64> = Vec::new();
    let mut now_ended: Vec<u64> = Vec::new();
    let mut hand_offs = HandOffs::default();
    loop {
        // Taking a waiting job is queuing work; waiting for one is not.
        let start = tracer.start_cpu();
        let job = match jobs.try_recv() {
            Ok(job) => {
                tracer.charge_cpu(Phase::RequestQueuing, start);
                Ok(job)
            }
            Err(_) => jobs.recv_timeout(control.tick()),
        };
        match job {
            Ok(Job::Request { conn, frames }) => {
                stats.requests += frames.len() as u64;
                let job = Pending {
                    conn,
                    frames,
                    at: 0,
                    bytes: Vec::new(),
                    since: None,
                    behind: None,
                };
                let (s, sh) = (&mut stats, &mut tracer);
                if let Some(job) =
                    run_job(job, &mut states, shared, replies, s, sh, true, &mut ended)
                {
                    parked.push(job);
                }
            }
            Ok(Job::Closed { conn }) => {
                ended.extend(states.remove(&conn).and_then(|s| s.open_transaction()));
                parked.retain(|p| p.conn != conn);
            }
            Err(RecvTimeoutError::Timeout) => {}
            // The network thread stopped.
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        let sweep = now.duration_since(last_sweep) >= control.tick();
        if sweep {
            last_sweep = now;
            for state in states.values_mut() {
                let open = state.open_transaction();
                if state.expire(now, control.config.idle_timeout) {
                    stats.timed_out += 1;
                    ended.extend(open);
                }
            }
        }
        // Parked jobs go again, oldest first, once what they wait for has ended; all of them
        // at each sweep (the holder may be another worker's, or the bound past).
        let mut sweep = sweep;
        while sweep || !ended.is_empty() {
            // Swapped, not taken: both vectors keep their room from pass to pass.
            std::mem::swap(&mut ended, &mut now_ended);
            ended.clear();
            if parked.is_empty() {
                break;
            }
            let (due, waiting): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut parked)
                .into_iter()
                .partition(|p| p.due(sweep, &now_ended));
            parked = waiting;
            sweep = false;
            hand_offs.clear();
            for mut job in due {
                let behind = job.behind;
                if let Some(successor) = hand_offs.successor(behind) {
                    job.behind = Some(successor);
                    stats.handed_on += 1;
                    parked.push(job);
                    continue;
                }
                let may_park = job
                    .since
                    .is_none_or(|since| now.duration_since(since) < bound);
                let conn = job.conn;
                let (s, sh) = (&mut stats, &mut tracer);
                if let Some(job) = run_job(
                    job,
                    &mut states,
                    shared,
                    replies,
                    s,
                    sh,
                    may_park,
                    &mut ended,
                ) {
                    parked.push(job);
                } else {
                    let open = states.get(&conn).and_then(|s| s.open_transaction());
                    hand_offs.note(behind, open);
                }
            }
            // Kept oldest first.
            parked.sort_by_key(|p| p.since);
        }
    }
    drop(states);
    tracer.finish_into(&mut stats);
    stats
}

/// The most frames of one connection handed to a worker at once.
const MAX_FRAMES_PER_JOB: usize = 16;

/// The network thread's view of a connection.
struct NetConn {
    link: Link,
    /// A request of this connection is queued or running.
    in_flight: bool,
    /// Close once the output is sent.
    closing: bool,
    /// The peer closed its end: answer the requests it sent before, then close.
    ended: bool,
}

/// The network thread: accepts, reads frames and queues them, writes the replies.
pub(crate) fn network(
    control: &Control,
    max_frame: u32,
    mut poll: Poll,
    mut listeners: Vec<Listener>,
    workers: Vec<Sender<Job>>,
    replies: &Replies,
    reply_queue: Receiver<Reply>,
) -> WorkerStats {
    let mut stats = WorkerStats::default();
    let mut tracer = Tracer::new(control.config.trace);
    let mut events = Events::with_capacity(256);
    // Tokens: listeners first, then the waker (see `replies`), then connections.
    let first_conn = listeners.len() + 1;
    for (i, l) in listeners.iter_mut().enumerate() {
        if poll
            .registry()
            .register(l, Token(i), Interest::READABLE)
            .is_err()
        {
            return stats;
        }
    }
    let mut conns: HashMap<usize, NetConn> = HashMap::new();
    let mut next_id = first_conn;
    let mut dirty: Vec<usize> = Vec::new();
    let mut refused = Refused::default();
    while !control.stop.load(Ordering::Acquire) {
        replies.asleep.store(true, Ordering::SeqCst);
        let timeout = if reply_queue.is_empty() {
            Some(control.tick())
        } else {
            Some(std::time::Duration::ZERO)
        };
        let polled = poll.poll(&mut events, timeout);
        replies.asleep.store(false, Ordering::SeqCst);
        refused.sweep();
        if polled.is_err() {
            continue;
        }
        dirty.clear();
        for event in events.iter() {
            let t = event.token().0;
            if t < listeners.len() {
                accept(
                    control,
                    &listeners[t],
                    &poll,
                    &mut conns,
                    &mut next_id,
                    max_frame,
                    &mut stats,
                    &mut refused,
                    &mut dirty,
                );
            } else if let Some(c) = conns.get_mut(&t) {
                c.link.note_event(event);
                dirty.push(t);
            }
        }
        loop {
            let start = tracer.start_cpu();
            let Ok(reply) = reply_queue.try_recv() else {
                break;
            };
            tracer.charge_cpu(Phase::ResponseQueuing, start);
            if let Some(c) = conns.get_mut(&reply.conn) {
                c.link.output.extend_from_slice(&reply.bytes);
                c.in_flight = false;
                c.closing |= reply.close;
                dirty.push(reply.conn);
            }
        }
        for &id in &dirty {
            let Some(c) = conns.get_mut(&id) else {
                continue;
            };
            if !pump(id, c, &workers, &mut tracer) {
                if let Some(mut c) = conns.remove(&id) {
                    let _ = poll.registry().deregister(&mut c.link.stream);
                    control.open.fetch_sub(1, Ordering::AcqRel);
                    // Ids are never reused, so a worker that already dropped the state (after
                    // a protocol error it answered) finds nothing to drop.
                    let _ = workers[id % workers.len()].send(Job::Closed { conn: id });
                }
            }
        }
    }
    control.open.fetch_sub(conns.len(), Ordering::AcqRel);
    stats.refused = refused.count;
    tracer.finish_into(&mut stats);
    // Dropping `workers` (the request queues' senders) stops the workers, which drop their
    // connections' states and so abort the open transactions.
    stats
}

/// Reads, queues the next frame if none is in flight, and writes; returns whether to keep
/// the connection.
fn pump(id: usize, c: &mut NetConn, workers: &[Sender<Job>], tracer: &mut Tracer) -> bool {
    if c.link.fill(tracer) == Fill::Closed {
        c.ended = true;
    }
    if !c.in_flight && !c.closing && c.link.has_room() {
        // Every whole frame buffered goes in one job (a bounded number, so that one client's
        // pipeline cannot hold a worker for long).
        let mut frames = Vec::new();
        while frames.len() < MAX_FRAMES_PER_JOB {
            match c.link.input.next_frame() {
                Ok(Some(frame)) => frames.push(frame.to_vec()),
                Ok(None) => break,
                // A framing error is the stream's end, and comes back on every call: frames
                // before it are answered first, and the next pump finds it again.
                Err(_) if !frames.is_empty() => break,
                Err(e) => {
                    crate::control::protocol_failure(&e, &mut c.link.output);
                    c.closing = true;
                    break;
                }
            }
        }
        if !frames.is_empty() {
            let job = Job::Request { conn: id, frames };
            // Blocks while the worker's queue is full: back-pressure on every client.
            let start = tracer.start_cpu();
            let sent = workers[id % workers.len()].send(job);
            tracer.charge_cpu(Phase::RequestQueuing, start);
            if sent.is_err() {
                return false;
            }
            c.in_flight = true;
        }
    }
    if c.link.flush(tracer).is_err() {
        return false;
    }
    if c.closing || c.ended {
        // The frames left whole in the buffer go out when the job in flight comes back.
        return c.link.unsent() > 0 || c.in_flight;
    }
    true
}

#[allow(clippy::too_many_arguments)]
fn accept(
    control: &Control,
    listener: &Listener,
    poll: &Poll,
    conns: &mut HashMap<usize, NetConn>,
    next_id: &mut usize,
    max_frame: u32,
    stats: &mut WorkerStats,
    refused: &mut Refused,
    dirty: &mut Vec<usize>,
) {
    loop {
        let mut stream = match listener.accept() {
            Ok(s) => s,
            Err(_) => return,
        };
        if !control.admit() {
            refused.refuse(stream, control.config.max_connections);
            continue;
        }
        let id = *next_id;
        *next_id += 1;
        if poll
            .registry()
            .register(
                &mut stream,
                Token(id),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            control.open.fetch_sub(1, Ordering::AcqRel);
            continue;
        }
        stats.connections += 1;
        conns.insert(
            id,
            NetConn {
                link: Link::new(stream, max_frame),
                in_flight: false,
                closing: false,
                ended: false,
            },
        );
        dirty.push(id);
    }
}

/// Builds the response queue and the network thread's waker.
pub(crate) fn replies(
    poll: &Poll,
    waker_token: usize,
) -> std::io::Result<(Arc<Replies>, Receiver<Reply>)> {
    let (sender, receiver) = crossbeam::channel::unbounded();
    let waker = Arc::new(Waker::new(poll.registry(), Token(waker_token))?);
    Ok((
        Arc::new(Replies {
            sender,
            waker,
            asleep: AtomicBool::new(false),
        }),
        receiver,
    ))
}
