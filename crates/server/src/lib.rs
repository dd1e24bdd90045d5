//! The Glass server: a workload's database served over TCP and Unix-domain sockets, in
//! Glass's own binary protocol (`protocol`), under one of two thread architectures.
//!
//! A client either calls a workload's transaction as a stored procedure (one round trip per
//! transaction), or runs an interactive transaction (Begin, batches of `Tx` operations,
//! Commit or Abort, with its locks held across round trips), or sends each operation as a
//! transaction of its own (the 2025 paper's simulation of interactive transactions).
//!
//! ```text
//!   dedicated (VoltDB)                          unified (PostgreSQL)
//!   ──────────────────                          ────────────────────
//!   network thread: epoll, read, write          acceptor ─► worker 1: epoll, read,
//!        │ request queues ▲ response queue                            run, write
//!        ▼                │                              └► worker 2: …
//!   workers: run on the engine
//! ```
//!
//! Files: `shm` (the shared-memory transport's spin-polling thread, the kernel-bypass stand-in),
//! `trace` (the eight phases' trace points), `handler` (the protocol state machine and the execution of each request, shared by
//! both architectures), `link` (sockets and their buffers), `dedicated` and `unified` (the
//! threads), `control` (the stop flag and counters the threads share).
//!
//! [`Server::start`] binds and spawns; [`Server::stop`] makes every thread finish its current
//! request, aborts the open interactive transactions, closes the sockets and joins.

mod control;
mod dedicated;
pub mod guest;
pub mod handler;
pub mod isolation;
pub mod link;
pub mod native;
mod shm;
pub mod trace;
mod unified;
pub mod vm;
pub mod wasm;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use engine::db::Database;
use mio::{Poll, Token, Waker};
use workloads::Workload;

pub use control::WorkerStats;
pub use isolation::{Channel, GuestConfig, Isolation};
pub use protocol::Endpoint;

/// The server's thread architecture (the 2025 paper's Table 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// A network thread with every socket, worker threads behind queues (VoltDB).
    Dedicated,
    /// Each worker owns its connections and does its own I/O (PostgreSQL).
    Unified,
}

impl std::str::FromStr for Arch {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "dedicated" => Ok(Arch::Dedicated),
            "unified" => Ok(Arch::Unified),
            _ => Err(format!(
                "architecture must be dedicated or unified, not {s:?}"
            )),
        }
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Arch::Dedicated => "dedicated",
            Arch::Unified => "unified",
        })
    }
}

/// How a server runs.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub arch: Arch,
    /// Threads that run transactions (at least one).
    pub workers: usize,
    /// Where to listen (at least one).
    pub listen: Vec<Endpoint>,
    /// Connections held at once; more are answered `Busy` and closed.
    pub max_connections: usize,
    /// An interactive transaction with no request for this long is aborted.
    pub idle_timeout: Duration,
    /// The largest frame the server accepts or sends.
    pub max_frame: u32,
    /// Requests queued per worker (dedicated) before the network thread waits.
    pub queue_depth: usize,
    /// Time the eight phases of each request (see [`trace`]); off, each trace point is a
    /// branch.
    pub trace: bool,
    /// Connections a shared-memory region holds (`Endpoint::Shm`).
    pub shm_slots: usize,
    /// Where stored procedures run (`isolation`).
    pub isolation: Isolation,
    /// How to start a procedure process, for the levels that run one.
    pub guest: Option<GuestConfig>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            arch: Arch::Dedicated,
            workers: 1,
            listen: Vec::new(),
            max_connections: 4096,
            idle_timeout: Duration::from_secs(10),
            max_frame: protocol::DEFAULT_MAX_FRAME,
            queue_depth: 1024,
            trace: false,
            shm_slots: 64,
            isolation: Isolation::Rust,
            guest: None,
        }
    }
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("listen on {endpoint}: {source}")]
    Bind {
        endpoint: Endpoint,
        source: std::io::Error,
    },
    #[error("{0}")]
    Config(String),
    #[error("set up the server's event loop: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Engine(#[from] engine::TxError),
}

/// A running server.
pub struct Server {
    endpoints: Vec<Endpoint>,
    control: Arc<control::Control>,
    /// Wakes each thread blocked in `poll` so it sees the stop flag at once.
    wakers: Vec<Arc<Waker>>,
    threads: Vec<JoinHandle<WorkerStats>>,
    /// Shared-memory regions' files, removed when the server stops.
    shm_paths: Vec<std::path::PathBuf>,
    /// Its transactions are bound to their threads while it runs.
    db: Arc<Database>,
}

impl Server {
    /// Binds every endpoint and starts the threads. `workload` names the procedures. With
    /// procedures out of the server's process, each worker's guest is started here first, by
    /// the calling thread, and dies with it: call from a thread that outlives the server.
    pub fn start(
        db: Arc<Database>,
        workload: &dyn Workload,
        config: ServerConfig,
    ) -> Result<Server, ServerError> {
        if config.workers == 0 {
            return Err(ServerError::Config(
                "a server needs at least one worker".into(),
            ));
        }
        if config.listen.is_empty() {
            return Err(ServerError::Config(
                "a server needs an address or a Unix socket to listen on".into(),
            ));
        }
        let mut listeners = Vec::new();
        let mut regions = Vec::new();
        let mut endpoints = Vec::new();
        for endpoint in &config.listen {
            if let Endpoint::Shm(path) = endpoint {
                let region = protocol::shm::Region::create(
                    path,
                    config.shm_slots,
                    config.max_frame as usize,
                )
                .map_err(|e| ServerError::Bind {
                    endpoint: endpoint.clone(),
                    source: std::io::Error::other(e.to_string()),
                })?;
                regions.push(region);
                endpoints.push(endpoint.clone());
                continue;
            }
            let l = link::Listener::bind(endpoint).map_err(|source| ServerError::Bind {
                endpoint: endpoint.clone(),
                source,
            })?;
            endpoints.push(l.endpoint()?);
            listeners.push(l);
        }
        if config.isolation != Isolation::Rust && config.guest.is_none() {
            return Err(ServerError::Config(format!(
                "isolation {} runs procedures outside the server's own code: it needs a guest \
                 program or module",
                config.isolation
            )));
        }
        let shared = handler::Shared::new(db, workload, config.max_frame)?
            .isolated(config.isolation, config.guest.clone())
            .map_err(|e| ServerError::Config(format!("isolation {}: {e}", config.isolation)))?;
        // The module instantiated once, or each worker's guest started, now: a server whose
        // procedures cannot run says so before it listens, not at its first call.
        let probed = match (&shared.wasm, config.isolation.out_of_process()) {
            (Some(wasm), _) => wasm::probe(&shared, wasm),
            (None, true) => isolation::prestart(&shared, config.workers),
            (None, false) => Ok(()),
        };
        probed.map_err(|e| {
            ServerError::Config(format!(
                "isolation {}: a procedure process or sandbox: {e}",
                config.isolation
            ))
        })?;
        let shared = Arc::new(shared);
        let db = Arc::clone(&shared.db);
        // A worker keeps its connections' open transactions and runs one request at a time:
        // a lock wait for a transaction of the same worker is a deadlock through the thread,
        // refused at once instead of waiting out the lock timeout.
        if let Some(locks) = db.lock_manager() {
            locks.set_thread_bound(true);
        }
        let control = Arc::new(control::Control::new(config.clone()));
        let mut threads = Vec::new();
        let mut wakers = Vec::new();
        let spawn = |name: String| std::thread::Builder::new().name(name);
        // Shared-memory regions: a spin-polling thread each, whatever the architecture.
        let mut shm_paths = Vec::new();
        for (i, region) in regions.into_iter().enumerate() {
            shm_paths.push(region.path().to_path_buf());
            let (shared, control) = (Arc::clone(&shared), Arc::clone(&control));
            threads.push(
                spawn(format!("glass-shm-{i}"))
                    .spawn(move || shm::poller(&shared, &control, region))?,
            );
        }
        if listeners.is_empty() {
            return Ok(Server {
                endpoints,
                control,
                wakers,
                threads,
                shm_paths,
                db,
            });
        }
        match config.arch {
            Arch::Unified => {
                let mut handoff = Vec::new();
                for i in 0..config.workers {
                    let poll = Poll::new()?;
                    let waker = Arc::new(Waker::new(poll.registry(), Token(usize::MAX))?);
                    let (sender, receiver) = crossbeam::channel::unbounded();
                    handoff.push((sender, Arc::clone(&waker)));
                    wakers.push(waker);
                    let (shared, control) = (Arc::clone(&shared), Arc::clone(&control));
                    threads.push(
                        spawn(format!("glass-worker-{i}"))
                            .spawn(move || unified::worker(&shared, &control, poll, receiver))?,
                    );
                }
                let poll = Poll::new()?;
                let waker = Arc::new(Waker::new(poll.registry(), Token(usize::MAX))?);
                wakers.push(waker);
                let control2 = Arc::clone(&control);
                threads.push(
                    spawn("glass-acceptor".into())
                        .spawn(move || unified::acceptor(&control2, poll, listeners, handoff))?,
                );
            }
            Arch::Dedicated => {
                let poll = Poll::new()?;
                let (replies, reply_queue) = dedicated::replies(&poll, listeners.len())?;
                let mut queues = Vec::new();
                for i in 0..config.workers {
                    let (sender, receiver) = crossbeam::channel::bounded(config.queue_depth.max(1));
                    queues.push(sender);
                    let (shared, control, replies) = (
                        Arc::clone(&shared),
                        Arc::clone(&control),
                        Arc::clone(&replies),
                    );
                    threads.push(
                        spawn(format!("glass-worker-{i}")).spawn(move || {
                            dedicated::worker(&shared, &control, receiver, &replies)
                        })?,
                    );
                }
                let control2 = Arc::clone(&control);
                let max_frame = config.max_frame;
                let replies2 = Arc::clone(&replies);
                threads.push(spawn("glass-network".into()).spawn(move || {
                    dedicated::network(
                        &control2,
                        max_frame,
                        poll,
                        listeners,
                        queues,
                        &replies2,
                        reply_queue,
                    )
                })?);
                wakers.push(Arc::clone(&replies.waker));
            }
        }
        Ok(Server {
            endpoints,
            control,
            wakers,
            threads,
            shm_paths,
            db,
        })
    }

    /// Where the server listens (a TCP port of 0 replaced by the one chosen).
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.control.open.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Stops the server: each thread finishes the request it is running, open interactive
    /// transactions are aborted, sockets are closed (a Unix socket's file removed). Returns
    /// what the threads counted.
    pub fn stop(self) -> WorkerStats {
        self.control
            .stop
            .store(true, std::sync::atomic::Ordering::Release);
        for w in &self.wakers {
            let _ = w.wake();
        }
        let mut total = WorkerStats::default();
        for t in self.threads {
            if let Ok(stats) = t.join() {
                total += stats;
            }
        }
        for path in &self.shm_paths {
            let _ = std::fs::remove_file(path);
        }
        if let Some(locks) = self.db.lock_manager() {
            locks.set_thread_bound(false);
        }
        total
    }
}
