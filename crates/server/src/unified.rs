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
//! transactions to their threads: `txn::lock::LockConfig::thread_bound`); a longer cycle
//! through another worker's waiting transaction is found in the wait-for graph, and the lock
//! wait's bound ([`engine::DbConfig::lock_wait_timeout`]) is the backstop.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

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
}

/// Serves one connection after a readiness event; returns whether to keep it.
fn service<'db>(
    conn: &mut Conn<'db>,
    shared: &'db Shared,
    stats: &mut WorkerStats,
    tracer: &mut Tracer,
) -> bool {
    loop {
        let closed = conn.link.fill(tracer) == Fill::Closed;
        while !conn.closing && conn.link.has_room() {
            let Link { input, output, .. } = &mut conn.link;
            match input.next_frame() {
                Ok(Some(frame)) => {
                    stats.requests += 1;
                    if conn.state.handle(frame, shared, output, tracer) == Flow::Close {
                        conn.closing = true;
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
            // The peer closed its end: its requests are answered; keep the connection only
            // while the answers wait for room in the socket.
            return conn.link.unsent() > 0;
        }
        if !conn.link.can_read() {
            return true;
        }
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
                    service(conn, shared, &mut stats, &mut tracer)
                }
                None => true,
            };
            if !keep {
                if let Some(mut conn) = conns.remove(&id) {
                    let _ = poll.registry().deregister(&mut conn.link.stream);
                    control.open.fetch_sub(1, Ordering::AcqRel);
                }
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
            };
            // Bytes may have arrived before the registration.
            if service(&mut conn, shared, &mut stats, &mut tracer) {
                conns.insert(id, conn);
            } else {
                let _ = poll.registry().deregister(&mut conn.link.stream);
                control.open.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let now = Instant::now();
        if now.duration_since(last_sweep) >= control.tick() {
            last_sweep = now;
            for conn in conns.values_mut() {
                if conn.state.expire(now, control.config.idle_timeout) {
                    stats.timed_out += 1;
                }
            }
        }
    }
    // Dropping the connections aborts their open transactions.
    control.open.fetch_sub(conns.len(), Ordering::AcqRel);
    drop(conns);
    tracer.finish_into(&mut stats);
    stats
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
