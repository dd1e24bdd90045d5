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
//! transactions to their threads: `txn::lock::LockConfig::thread_bound`). Where it was a
//! transaction's first batch, the request is parked ([`Flow::Park`]) and handled again once
//! a transaction of this worker has ended; a later batch's refusal is answered. A longer cycle
//! through another worker's waiting transaction is found in the wait-for graph, and the lock
//! wait's bound ([`engine::DbConfig::lock_wait_timeout`]) is the backstop, for parked requests
//! too.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::channel::Receiver;
use mio::{Events, Interest, Poll, Token, Waker};

use crate::control::{Control, Refused, WorkerStats};
use crate::handler::{ConnState, Flow, Shared};
use crate::link::{Fill, Link, Listener, Stream};
use crate::trace::Tracer;

const WAKER: Token = Token(usize::MAX);

/// A worker's connection: its socket and its protocol state.
struct Conn<'db> {
    link: Link,
    state: ConnState<'db>,
    /// A protocol error was answered: close once the answer is sent.
    closing: bool,
    /// A request put aside ([`Flow::Park`]), and since when; the connection's later
    /// requests wait in its buffer behind it.
    parked: Option<(Vec<u8>, Instant)>,
}

/// What serving a connection did: whether to keep it, and whether a transaction of the
/// worker ended (a request parked behind it may now go on).
struct Served {
    keep: bool,
    ended: bool,
}

/// Handles `frame` for `conn`, parking it where [`ConnState::handle_or_park`] says so.
fn handle<'db>(
    conn: &mut Conn<'db>,
    frame: &[u8],
    shared: &'db Shared,
    tracer: &mut Tracer,
    may_park: bool,
    ended: &mut bool,
) -> Flow {
    let open = conn.state.in_transaction();
    let flow = conn
        .state
        .handle_or_park(frame, shared, &mut conn.link.output, tracer, may_park);
    if open && !conn.state.in_transaction() {
        *ended = true;
    }
    if flow == Flow::Close {
        conn.closing = true;
    }
    flow
}

/// Serves one connection after a readiness event (or after its parked request was
/// answered): reads and answers its requests until it has none or one is parked.
fn service<'db>(
    conn: &mut Conn<'db>,
    shared: &'db Shared,
    stats: &mut WorkerStats,
    tracer: &mut Tracer,
) -> Served {
    let mut ended = false;
    loop {
        let closed = conn.link.fill(tracer) == Fill::Closed;
        while !conn.closing && conn.parked.is_none() && conn.link.has_room() {
            let Link { input, output, .. } = &mut conn.link;
            match input.next_frame() {
                Ok(Some(frame)) => {
                    stats.requests += 1;
                    let open = conn.state.in_transaction();
                    match conn
                        .state
                        .handle_or_park(frame, shared, output, tracer, true)
                    {
                        Flow::Continue => {}
                        Flow::Close => conn.closing = true,
                        Flow::Park => {
                            stats.parked += 1;
                            conn.parked = Some((frame.to_vec(), Instant::now()));
                        }
                    }
                    ended |= open && !conn.state.in_transaction();
                }
                Ok(None) => break,
                Err(e) => {
                    crate::control::protocol_failure(&e, output);
                    conn.closing = true;
                }
            }
        }
        if conn.link.flush(tracer).is_err() {
            return Served { keep: false, ended };
        }
        if conn.closing {
            let keep = conn.link.unsent() > 0;
            return Served { keep, ended };
        }
        if closed {
            // The peer closed its end: its requests are answered (a parked one too); keep
            // the connection only while an answer waits.
            let keep = conn.link.unsent() > 0 || conn.parked.is_some();
            return Served { keep, ended };
        }
        if !conn.link.can_read() {
            return Served { keep: true, ended };
        }
    }
}

/// Handles `conn`'s parked request again: parked again while the wait's `bound` has not
/// passed since it was first parked, else answered (as its failure, if it fails again);
/// once answered, the requests behind it are served.
fn retry_parked<'db>(
    conn: &mut Conn<'db>,
    shared: &'db Shared,
    stats: &mut WorkerStats,
    tracer: &mut Tracer,
    bound: Duration,
    now: Instant,
) -> Served {
    let Some((frame, since)) = conn.parked.take() else {
        return Served {
            keep: true,
            ended: false,
        };
    };
    let may_park = now.duration_since(since) < bound;
    let mut ended = false;
    if handle(conn, &frame, shared, tracer, may_park, &mut ended) == Flow::Park {
        conn.parked = Some((frame, since));
        return Served { keep: true, ended };
    }
    if may_park {
        stats.unparked += 1;
    }
    let served = service(conn, shared, stats, tracer);
    Served {
        keep: served.keep,
        ended: ended || served.ended,
    }
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
    // How long a parked request waits at most: as long as a lock wait may.
    let bound = shared.db.config().lock_wait_timeout;
    while !control.stop.load(Ordering::Acquire) {
        if poll.poll(&mut events, Some(control.tick())).is_err() {
            // EINTR from a signal: poll again.
            continue;
        }
        let mut ended = false;
        for event in events.iter() {
            if event.token() == WAKER {
                continue;
            }
            let id = event.token().0;
            let keep = match conns.get_mut(&id) {
                Some(conn) => {
                    conn.link.note_event(event);
                    let served = service(conn, shared, &mut stats, &mut tracer);
                    ended |= served.ended;
                    served.keep
                }
                None => true,
            };
            if !keep {
                ended |= drop_conn(&mut conns, id, &poll, control);
            }
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
            if service(&mut conn, shared, &mut stats, &mut tracer).keep {
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
                if conn.state.expire(now, control.config.idle_timeout) {
                    stats.timed_out += 1;
                    ended = true;
                }
            }
        }
        // Parked requests go again, oldest first, when a transaction of this worker has
        // ended; and at each sweep (the holder may be another worker's, or the bound past).
        // Running one may end another's wait in turn (a commit sent behind it).
        while ended || sweep {
            let retry_all = sweep && !ended;
            ended = false;
            let mut parked: Vec<(Instant, usize)> = conns
                .iter()
                .filter_map(|(&id, c)| c.parked.as_ref().map(|(_, since)| (*since, id)))
                .collect();
            if parked.is_empty() {
                break;
            }
            parked.sort_unstable();
            for (_, id) in parked {
                let Some(conn) = conns.get_mut(&id) else {
                    continue;
                };
                let served = retry_parked(conn, shared, &mut stats, &mut tracer, bound, now);
                ended |= served.ended;
                if !served.keep {
                    ended |= drop_conn(&mut conns, id, &poll, control);
                }
            }
            if retry_all {
                break;
            }
        }
    }
    // Dropping the connections aborts their open transactions.
    control.open.fetch_sub(conns.len(), Ordering::AcqRel);
    drop(conns);
    tracer.finish_into(&mut stats);
    stats
}

/// Drops connection `id` (aborting its open transaction); returns whether it had one.
fn drop_conn(
    conns: &mut HashMap<usize, Conn<'_>>,
    id: usize,
    poll: &Poll,
    control: &Control,
) -> bool {
    let Some(mut conn) = conns.remove(&id) else {
        return false;
    };
    let _ = poll.registry().deregister(&mut conn.link.stream);
    control.open.fetch_sub(1, Ordering::AcqRel);
    conn.state.in_transaction()
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
