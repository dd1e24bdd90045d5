//! The Glass client library: a blocking connection to a Glass server, for a program of one's
//! own or for `glass bench --server`.
//!
//! ```text
//!   Client::connect(endpoint)        Hello ─► Welcome (workload, procedure names)
//!   client.call("payment", args)     Call ─► Returned          one round trip per transaction
//!   RemoteTx (engine::Tx)            prefetch hints            none: kept as hinted reads
//!     interactive                      (and scan hints)          (and hinted scans)
//!                                    get (scan) a hinted read  none: answered from it
//!                                      (scan) answered
//!                                    get, scan, scan_index,    one round trip each: a Batch
//!                                      an update/delete the    of the writes still pending,
//!                                      client cannot answer    the hinted reads, then the
//!                                                              operation
//!                                    insert; update/delete     none: kept in the client as
//!                                      of a row held X-locked  pending writes
//!                                    read_committed            none: kept as a pending
//!                                                              request, sent first
//!                                    finish(Ok) / commit       Batch{autocommit} of the
//!                                                              pending writes (else Commit;
//!                                                              read-only: Commit ahead of
//!                                                              the next request)
//!                                    finish(Err) / abort       Abort if the server has a
//!                                                              transaction; pending writes
//!                                                              are dropped unsent
//!     autocommit                     every operation           one Batch{autocommit} each
//!   RemoteConnection                 engine::Connection: names from the server's catalog,
//!                                    `transaction` = RemoteTx + finish
//! ```
//!
//! Workload code written against [`engine::Tx`] runs unchanged through [`RemoteTx`]. A read
//! is one round trip, unless the procedure named its row beforehand in a hint
//! ([`Tx::prefetch`], [`Tx::prefetch_columns`], [`Tx::prefetch_for_update`]): the rows a
//! procedure knows from its input are independent reads, and the client *reads ahead*: it
//! keeps each hinted row's read (whole, shared, or exclusive where the hint says the row will
//! be updated) and sends them all in front of the next round trip's own operation, or alone
//! when the next read is one of them, then answers every read of those rows from what came
//! back (the columns asked for, if the lock it was read under suffices). So New-Order, whose
//! input names every row it reads, reads them in one round trip and commits in a second. A
//! hinted read is a real read: it takes its lock when it is sent, and its error fails the
//! transaction at that round trip. The transaction's own write of a row drops what was read
//! of it (the next read goes to the server); a hinted read sent after a deferred write of its
//! row travels behind it and sees it. Scans are hinted alike ([`Tx::prefetch_scan`]: a table's
//! rows under a key prefix): the scan travels whole in front of the next round trip and
//! answers the same scan later, until a row under its prefix is written; so Delivery's ten
//! districts scan in one round trip. [`Client::set_read_ahead`] turns this off
//! (`glass bench --server ... --no-prefetch`). Writes whose result the procedure cannot
//! observe are *deferred*: kept in the [`Client`] and sent in front of the next round trip,
//! in the same `Batch`, in the order made:
//!
//! * every `insert` (it returns `Ok(())` at once);
//! * an `update` or `delete` of a row the transaction holds exclusively and knows to exist
//!   (it returns `Ok(true)` at once): a row a `get` with `for_update` found, a row an
//!   earlier update found, or (see below) a row a for-update scan returned or the
//!   transaction inserted. A delete makes the row unknown again.
//!
//! Why this is safe: the server runs two-phase locking, so a row the transaction has locked
//! exclusively and seen cannot change or vanish until it ends, except by its own writes,
//! which the client tracks; the server's answer to such an update is known in advance. The
//! writes travel first in the batch of the next read, in order, so every read sees them
//! (read-your-writes), and the last writes travel with the commit (`Batch{autocommit}`: the
//! operations, then the commit, one round trip). The server's result of every deferred write
//! is checked when it comes back: `Inserted` for an insert, `Found(true)` for an update or
//! delete; anything else fails the transaction. (The bookkeeping is [`protocol::deferred`],
//! which a stored procedure's guest shares.)
//!
//! A read-only transaction commits lazily: [`finish`] acknowledges it at once, and its
//! `Commit` travels in front of the connection's next request, in the same round trip (two
//! frames out, two back). Its reads were made under their locks and a commit changes nothing
//! of it, so nothing is lost; its locks are held until that next request (or until the
//! connection closes or idles out, which aborts it: the same for a transaction that wrote
//! nothing), or until [`Client::flush`] sends it (a driver's worker does when it will be
//! quiet: waiting for its next slot, or done). So YCSB-C's interactive read under load is one
//! round trip, as the paper counts it, and Voter's vote two (its four hinted reads, then the
//! commit with its writes).
//!
//! What changes for the procedure: an insert's error (a duplicate key, say) is returned by
//! the next operation that makes a round trip (a read, an update of an unknown row, or the
//! commit), not by the insert. The transaction fails the same way, one call later: the server
//! has aborted it, and nothing of it lands. A procedure that ends with `Err` (a rollback)
//! sends none of its pending writes.
//!
//! The client does not know the tables' primary keys (the catalog names tables, not their
//! columns), so two cases rest on a guess, which is checked before the commit rather than
//! with it: a row a for-update scan of a table by a key prefix `P` returned (row `r` as
//! fetched) is taken to have the key `P` followed by `r`'s first values (as `P`, then the
//! columns fetched first, which is how a procedure names the rows it scanned); a row the
//! transaction inserted is taken to have the key `K` when every value of `K` is one of the
//! row's. An update or delete deferred on such a guess returns `Ok(true)`; if the row it
//! names turns out not to exist, the transaction fails with [`engine::TxError::Invalid`] at
//! the next round trip, and a commit with such writes pending sends them in a batch of their
//! own first and commits only once they all found their rows (one round trip more). A wrong
//! guess therefore never commits.
//!
//! A client blocks on its socket by default. [`Client::set_waiter`] makes the socket
//! non-blocking and hands every wait to a function of the caller's instead: a program that
//! runs many clients from one thread (on coroutines, as `glass bench --server` does for
//! interactive transactions) suspends the waiting one there and resumes it when its socket
//! is ready ([`Client::as_raw_fd`] names the socket to poll). A shared-memory client has no
//! socket: it spins on its slot, and with a waiter it calls the waiter at each turn of the
//! spin instead, so that one thread can look at many slots in turn.
//!
//! Errors come back as [`engine::TxError`], classified as the server classified them
//! ([`protocol::ErrorClass`]); a broken connection is [`engine::TxError::Connection`]. A
//! failed round trip ends the transaction: the server aborts it, and the client drops what
//! it had pending.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;

use engine::{Connection, IndexRef, TableRef, Tx, TxError, TxResult, Value};
use parking_lot::Mutex;
use protocol::boundary::{BoundaryTx, Crossing};
use protocol::deferred::{self, Deferred};
use protocol::{
    Endpoint, FrameBuffer, Op, OpResult, Request, Response, DEFAULT_MAX_FRAME, MAGIC, VERSION,
};

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// The shared-memory transport: requests and responses exchanged through a slot of a
    /// mapped region, both sides spin-polling (see [`protocol::shm`]).
    Shm(ShmLink),
}

/// A client's slot in a server's shared-memory region.
struct ShmLink {
    region: protocol::shm::Region,
    slot: usize,
    /// The last request's sequence number.
    seq: u64,
    response: Vec<u8>,
}

/// How long a client waits for the server to answer through shared memory.
const SHM_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

impl ShmLink {
    fn connect(path: &std::path::Path) -> TxResult<ShmLink> {
        let region = protocol::shm::Region::open(path).map_err(|e| broken("connect", e))?;
        let slot = region.claim().map_err(|e| broken("connect", e))?;
        // The slot's sequence goes on from where its last client left it.
        let seq = region.request_seq(slot).load(Ordering::Acquire);
        Ok(ShmLink {
            region,
            slot,
            seq,
            response: Vec::new(),
        })
    }

    /// Sends one frame and waits until its answer is there: spinning, or with a `waiter`,
    /// calling it ([`Wait::Answer`]) each time the answer is not there yet. Returns the
    /// answer's kind and body.
    fn exchange(&mut self, frame: &[u8], waiter: &mut Option<Waiter>) -> TxResult<&[u8]> {
        let (r, slot) = (&self.region, self.slot);
        if !r.write(slot, false, frame) {
            return Err(TxError::Invalid(format!(
                "a request of {} bytes does not fit the shared-memory buffer of {}",
                frame.len(),
                r.buffer()
            )));
        }
        r.request_len(slot)
            .store(frame.len() as u32, Ordering::Relaxed);
        self.seq += 1;
        r.request_seq(slot).store(self.seq, Ordering::Release);
        let started = std::time::Instant::now();
        let mut spins = 0u32;
        while r.response_seq(slot).load(Ordering::Acquire) != self.seq {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) && started.elapsed() > SHM_PATIENCE {
                return Err(broken(
                    "read a response",
                    format!("no answer through shared memory in {SHM_PATIENCE:?}"),
                ));
            }
            match waiter {
                Some(w) => w(Wait::Answer).map_err(|e| broken("wait for the server", e))?,
                // Another thread may need this core.
                None if spins.is_multiple_of(1024) => std::thread::yield_now(),
                None => std::hint::spin_loop(),
            }
        }
        let len = r.response_len(slot).load(Ordering::Relaxed) as usize;
        if !r.read(slot, true, len, &mut self.response) {
            return Err(broken(
                "read a response",
                "a response length past the buffer",
            ));
        }
        match protocol::frame_len(&self.response, u32::MAX) {
            Ok(Some(total)) if total == self.response.len() => Ok(&self.response[4..]),
            _ => Err(broken(
                "read a response",
                "a malformed frame in shared memory",
            )),
        }
    }
}

impl Drop for ShmLink {
    fn drop(&mut self) {
        self.region
            .state(self.slot)
            .store(protocol::shm::RELEASED, Ordering::Release);
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Shm(_) => Err(std::io::ErrorKind::Unsupported.into()),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Shm(_) => Err(std::io::ErrorKind::Unsupported.into()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn broken(what: &str, e: impl std::fmt::Display) -> TxError {
    TxError::Connection(format!("{what}: {e}"))
}

/// What a non-blocking client waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// The server's answer: the socket has something to read.
    Readable,
    /// Room in the socket's send buffer.
    Writable,
    /// The server's answer through shared memory, which no poll announces: the waiter
    /// returns when it is worth looking again (after the others had their turn).
    Answer,
}

/// Waits until the client's socket may be ready for what it names (returning early is
/// harmless: the client tries again and waits again); an error breaks the connection. The
/// client waits for an answer right after sending its request, before trying to read: a
/// waiter must therefore see readiness that came about after the request went out, which
/// a level-triggered poll does, and an edge-triggered one does too unless something else
/// consumed the socket's edge after the send (`glass bench`'s loop polls only once every
/// coroutine it runs has suspended).
pub type Waiter = Box<dyn FnMut(Wait) -> std::io::Result<()> + Send>;

fn wait(waiter: &mut Option<Waiter>, what: Wait) -> TxResult<()> {
    match waiter {
        Some(w) => w(what).map_err(|e| broken("wait for the server", e)),
        None => Err(broken(
            "wait for the server",
            "the socket would block and no waiter is set",
        )),
    }
}

/// A blocking connection to a Glass server.
pub struct Client {
    stream: Stream,
    input: FrameBuffer,
    out: Vec<u8>,
    workload: String,
    procedures: Vec<String>,
    /// Requests answered so far: the round trips this connection made.
    round_trips: u64,
    /// The server holds an open transaction of this connection.
    in_transaction: bool,
    /// The interactive transaction's writes not sent yet, and what it knows of its rows.
    deferred: Deferred,
    /// The open interactive transaction wrote (or deferred a write): it cannot commit
    /// lazily.
    wrote: bool,
    /// A read-only transaction was acknowledged, its `Commit` not sent yet: it travels in
    /// front of the next request, in the same round trip (see [`finish`]).
    commit_pending: bool,
    /// Whether a [`RemoteTx`] reads the rows its procedure's hints name in front of its next
    /// round trip (see [`Client::set_read_ahead`]).
    read_ahead: bool,
    /// Set: the socket is non-blocking and every wait goes here (see
    /// [`Client::set_waiter`]).
    waiter: Option<Waiter>,
}

impl Client {
    /// Connects and greets the server.
    pub fn connect(endpoint: &Endpoint) -> TxResult<Client> {
        let stream = match endpoint {
            Endpoint::Tcp(addr) => {
                let s = TcpStream::connect(addr)
                    .map_err(|e| broken(&format!("connect to {endpoint}"), e))?;
                s.set_nodelay(true)
                    .map_err(|e| broken("set TCP_NODELAY", e))?;
                Stream::Tcp(s)
            }
            Endpoint::Unix(path) => Stream::Unix(
                UnixStream::connect(path)
                    .map_err(|e| broken(&format!("connect to {endpoint}"), e))?,
            ),
            Endpoint::Shm(path) => Stream::Shm(ShmLink::connect(path)?),
        };
        let mut client = Client {
            stream,
            input: FrameBuffer::new(DEFAULT_MAX_FRAME),
            out: Vec::new(),
            workload: String::new(),
            procedures: Vec::new(),
            round_trips: 0,
            in_transaction: false,
            deferred: Deferred::default(),
            wrote: false,
            commit_pending: false,
            read_ahead: true,
            waiter: None,
        };
        match client.request(&Request::Hello {
            magic: MAGIC,
            version: VERSION,
            max_frame: DEFAULT_MAX_FRAME,
        })? {
            Response::Welcome {
                workload,
                procedures,
                max_frame,
                ..
            } => {
                client.workload = workload;
                client.procedures = procedures;
                client.input.set_max_frame(max_frame.max(1));
                client.round_trips = 0;
                Ok(client)
            }
            // Refused: the server is full (Busy), or speaks another version.
            Response::Failed { class, message } => Err(class.into_tx_error(message)),
            other => Err(unexpected("Hello", &other)),
        }
    }

    /// The workload the server serves.
    pub fn workload(&self) -> &str {
        &self.workload
    }

    /// The server's procedure names.
    pub fn procedures(&self) -> &[String] {
        &self.procedures
    }

    /// Round trips made since the handshake.
    pub fn round_trips(&self) -> u64 {
        self.round_trips
    }

    /// Whether an interactive [`RemoteTx`] acts on its procedure's hints ([`Tx::prefetch`] and
    /// its kin) by reading the rows they name in front of its next round trip (on by
    /// default), or ignores them: every read is then a round trip of its own.
    pub fn set_read_ahead(&mut self, on: bool) {
        self.read_ahead = on;
    }

    /// With `Some`, the socket turns non-blocking and the client, instead of blocking, calls
    /// the waiter whenever its socket would block, then tries again; with `None`, it blocks
    /// again. Through shared memory, where a client spins on its slot, the waiter is called
    /// instead of each turn of the spin ([`Wait::Answer`]): one thread can then look at many
    /// slots in turn.
    pub fn set_waiter(&mut self, waiter: Option<Waiter>) -> TxResult<()> {
        let nonblocking = waiter.is_some();
        match &self.stream {
            Stream::Tcp(s) => s.set_nonblocking(nonblocking),
            Stream::Unix(s) => s.set_nonblocking(nonblocking),
            Stream::Shm(_) => Ok(()),
        }
        .map_err(|e| broken("configure the socket", e))?;
        self.waiter = waiter;
        Ok(())
    }

    /// The socket's descriptor, to poll for a [`Waiter`]; `None` for shared memory.
    pub fn as_raw_fd(&self) -> Option<RawFd> {
        match &self.stream {
            Stream::Tcp(s) => Some(s.as_raw_fd()),
            Stream::Unix(s) => Some(s.as_raw_fd()),
            Stream::Shm(_) => None,
        }
    }

    /// Whether the server holds an open transaction of this connection.
    pub fn in_transaction(&self) -> bool {
        self.in_transaction
    }

    /// Sends one request and waits for its response: one round trip. A `Failed` response is
    /// returned as it came (see `Client::expect`). A raw request knows nothing of the writes
    /// a [`RemoteTx`] deferred: use [`Client::batch`], [`Client::commit`] or
    /// [`Client::abort`] while [`Client::has_pending`].
    pub fn request(&mut self, request: &Request) -> TxResult<Response> {
        self.out.clear();
        if std::mem::take(&mut self.commit_pending) {
            // The last read-only transaction's commit, ahead of this request. Shared memory
            // holds one frame a slot: there it is an exchange of its own.
            if let Stream::Shm(link) = &mut self.stream {
                let mut commit = Vec::new();
                Request::Commit.encode(&mut commit);
                link.exchange(&commit, &mut self.waiter)?;
            } else {
                Request::Commit.encode(&mut self.out);
                request.encode(&mut self.out);
                let response = self.send_and_receive(2)?;
                self.round_trips += 1;
                return Ok(response);
            }
        }
        request.encode(&mut self.out);
        if let Stream::Shm(link) = &mut self.stream {
            let frame = link.exchange(&self.out, &mut self.waiter)?;
            self.round_trips += 1;
            return Response::decode(frame).map_err(|e| broken("read a response", e));
        }
        let response = self.send_and_receive(1)?;
        self.round_trips += 1;
        Ok(response)
    }

    /// Sends what `out` holds (`frames` requests) and reads as many responses; returns the
    /// last. The first of two is a read-only transaction's lazy commit: whatever it says (a
    /// read-only transaction that could not commit released its locks all the same, and it
    /// changed nothing), only a broken connection is an error.
    fn send_and_receive(&mut self, frames: usize) -> TxResult<Response> {
        let mut sent = 0;
        while sent < self.out.len() {
            match self.stream.write(&self.out[sent..]) {
                Ok(0) => return Err(broken("send a request", "the server stopped reading")),
                Ok(n) => sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    wait(&mut self.waiter, Wait::Writable)?
                }
                Err(e) => return Err(broken("send a request", e)),
            }
        }
        let mut answered = 0;
        // A non-blocking client waits before its first read: the answer is hardly ever there
        // yet, and a read that finds nothing is a system call for nothing (see `Waiter` for
        // why its readiness cannot be missed).
        if self.waiter.is_some() && self.input.buffered() == 0 {
            wait(&mut self.waiter, Wait::Readable)?;
        }
        loop {
            match self.input.next_frame() {
                Ok(Some(frame)) => {
                    let response =
                        Response::decode(frame).map_err(|e| broken("read a response", e))?;
                    answered += 1;
                    if answered == frames {
                        return Ok(response);
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => return Err(broken("read a response", e)),
            }
            match self.input.read_from(&mut self.stream) {
                Ok(0) => {
                    return Err(broken(
                        "read a response",
                        "the server closed the connection",
                    ))
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    wait(&mut self.waiter, Wait::Readable)?
                }
                Err(e) => return Err(broken("read a response", e)),
            }
        }
    }

    /// [`Client::request`], with a `Failed` response turned into its error. A failure ends
    /// any open transaction on the server.
    fn expect(&mut self, request: &Request) -> TxResult<Response> {
        match self.request(request)? {
            Response::Failed { class, message } => {
                self.in_transaction = false;
                self.deferred.clear();
                Err(class.into_tx_error(message))
            }
            other => Ok(other),
        }
    }

    /// Calls a stored procedure: one transaction, one round trip. Returns what it returned.
    /// Refused, with nothing sent, while an interactive transaction has writes pending.
    pub fn call(&mut self, procedure: &str, args: Vec<Value>) -> TxResult<Vec<Value>> {
        if self.has_pending() {
            return Err(TxError::Invalid(
                "an interactive transaction has writes pending: commit or abort it before a Call"
                    .to_string(),
            ));
        }
        let request = Request::Call {
            procedure: procedure.to_string(),
            args,
        };
        match self.expect(&request)? {
            Response::Returned { values } => Ok(values),
            other => Err(unexpected("Call", &other)),
        }
    }

    /// Sends a read-only transaction's lazy commit now, if one waits for the next request
    /// (see [`finish`]): for a client that will be quiet for a while, whose read locks others
    /// may be waiting for.
    pub fn flush(&mut self) -> TxResult<()> {
        if !std::mem::take(&mut self.commit_pending) {
            return Ok(());
        }
        // As ahead of a request, its answer is not the transaction's: it was acknowledged.
        match self.request(&Request::Commit)? {
            Response::Done | Response::Failed { .. } => Ok(()),
            other => Err(unexpected("Commit", &other)),
        }
    }

    /// Whether an interactive transaction ([`RemoteTx`]) has writes not sent yet.
    pub fn has_pending(&self) -> bool {
        self.deferred.has_pending()
    }

    /// Runs `ops` in the open transaction (beginning one if none is open); with `commit`, the
    /// transaction then commits (a batch outside a transaction is then a transaction of its
    /// own). Writes a [`RemoteTx`] deferred travel first, in the same batch, and their
    /// results are checked here; the results returned are `ops`' alone. Deferred writes on a
    /// guessed key (see the crate's documentation) are sent, and checked, before a commit.
    pub fn batch(&mut self, ops: Vec<Op>, commit: bool) -> TxResult<Vec<OpResult>> {
        self.batch_ops(ops, commit).map(|(_, results)| results)
    }

    /// [`Client::batch`], giving `ops` back with their results.
    fn batch_ops(&mut self, mut ops: Vec<Op>, commit: bool) -> TxResult<(Vec<Op>, Vec<OpResult>)> {
        if commit && self.deferred.has_guessed() {
            self.batch(Vec::new(), false)?;
        }
        let (pending, expect) = self.deferred.take();
        let deferred = pending.len();
        if deferred > 0 {
            let mine = std::mem::replace(&mut ops, pending);
            ops.extend(mine);
        }
        let count = ops.len();
        let request = Request::Batch {
            autocommit: commit,
            ops,
        };
        let response = self.expect(&request);
        let Request::Batch { mut ops, .. } = request else {
            unreachable!()
        };
        let mut results = match response {
            Ok(Response::Results { results }) if results.len() == count => {
                self.in_transaction = !commit;
                if commit {
                    self.deferred.clear();
                }
                results
            }
            Ok(other) => return Err(self.lost(deferred, unexpected("Batch", &other))),
            Err(e) => return Err(self.lost(deferred, e)),
        };
        if let Err(e) = deferred::check(&ops[..deferred], &expect, &results[..deferred]) {
            return Err(self.lost(deferred, e));
        }
        results.drain(..deferred);
        if commit {
            ops.drain(..deferred);
        } else {
            self.deferred.sent(ops.drain(..deferred), &expect);
        }
        Ok((ops, results))
    }

    /// A batch failed, with `deferred` pending writes in it: the transaction knows nothing
    /// for sure any more. If writes were lost, whatever the server still holds open is
    /// aborted, so that it cannot commit without them (a `Failed` answer has ended it
    /// already). Returns `e`, the cause.
    fn lost(&mut self, deferred: usize, e: TxError) -> TxError {
        self.deferred.clear();
        if deferred > 0 && self.in_transaction {
            let _ = self.end(Request::Abort);
        }
        e
    }

    /// A transaction run through [`engine::Tx`] on this connection: with `autocommit`, each
    /// operation a transaction of its own; without it, one transaction for them all, ended
    /// with [`finish`] (see [`RemoteTx`]).
    pub fn remote_tx(&mut self, autocommit: bool) -> RemoteTx<'_> {
        BoundaryTx::new(ClientCrossing {
            client: self,
            autocommit,
        })
    }

    /// Begins an interactive transaction explicitly (a first batch also does).
    pub fn begin(&mut self) -> TxResult<()> {
        match self.expect(&Request::Begin)? {
            Response::Done => {
                self.in_transaction = true;
                Ok(())
            }
            other => Err(unexpected("Begin", &other)),
        }
    }

    /// Commits the open transaction. With writes pending, they travel with the commit in one
    /// `Batch{autocommit}` (which is a transaction of its own if the server has none open);
    /// if any of them rests on a guessed key (see the crate's documentation), they are sent
    /// first and the commit follows once all have found their rows.
    pub fn commit(&mut self) -> TxResult<()> {
        if self.has_pending() {
            return self.batch(Vec::new(), true).map(drop);
        }
        self.end(Request::Commit)
    }

    /// Aborts the open transaction. Pending writes are dropped unsent; if nothing else
    /// reached the server (no transaction is open there), nothing is sent.
    pub fn abort(&mut self) -> TxResult<()> {
        let pending = self.has_pending();
        self.deferred.clear();
        if pending && !self.in_transaction {
            return Ok(());
        }
        self.end(Request::Abort)
    }

    /// Drops the pending writes and what the transaction knows of its rows, sending nothing.
    fn discard(&mut self) {
        self.deferred.clear();
    }

    fn end(&mut self, request: Request) -> TxResult<()> {
        let response = self.expect(&request);
        self.in_transaction = false;
        self.deferred.clear();
        match response? {
            Response::Done => Ok(()),
            other => Err(unexpected("Commit/Abort", &other)),
        }
    }

    /// The server's tables and indexes with their ids.
    pub fn catalog(&mut self) -> TxResult<Catalog> {
        match self.expect(&Request::Catalog)? {
            Response::CatalogIs { tables, indexes } => Ok(Catalog { tables, indexes }),
            other => Err(unexpected("Catalog", &other)),
        }
    }
}

/// The server's names: tables and indexes, each with the id operations name it by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Catalog {
    pub tables: Vec<(String, u32)>,
    pub indexes: Vec<(String, u32)>,
}

fn unexpected(request: &str, response: &Response) -> TxError {
    TxError::Connection(format!(
        "the server answered {request} with an unexpected {response:?}"
    ))
}

/// A transaction run from the client through [`engine::Tx`].
///
/// With `autocommit` each operation is a transaction of its own, one round trip (the 2025
/// paper's simulation of interactive transactions); nothing is deferred.
///
/// Without it the operations belong to one transaction, which the caller ends with
/// [`finish`] (or [`Client::commit`] / [`Client::abort`]). Each read is one round trip;
/// inserts, and updates and deletes of rows the transaction holds exclusively and knows to
/// exist, are deferred: kept in the [`Client`] and sent in front of the next round trip, or
/// with the commit (see the crate's documentation). So an insert returns `Ok(())` at once,
/// and its error (a [`TxError::DuplicateKey`], say) is returned by the next call that makes a
/// round trip — the next read, or the commit — which fails the transaction as the insert
/// would have, one call later.
///
/// It is [`protocol::boundary`]'s transaction over a [`ClientCrossing`]: made by
/// [`Client::remote_tx`].
pub type RemoteTx<'c> = BoundaryTx<ClientCrossing<'c>>;

/// How a [`RemoteTx`]'s operations cross to the server: each crossing one `Batch`, which
/// carries the writes the client deferred in front ([`Client::batch`]).
pub struct ClientCrossing<'c> {
    client: &'c mut Client,
    autocommit: bool,
}

impl Crossing for ClientCrossing<'_> {
    const PEER: &'static str = "the server";

    fn deferred(&mut self) -> &mut Deferred {
        &mut self.client.deferred
    }

    fn defers(&self) -> bool {
        !self.autocommit
    }

    fn reads_ahead(&self) -> bool {
        !self.autocommit && self.client.read_ahead
    }

    fn cross(&mut self, ops: Vec<Op>) -> TxResult<(Vec<Op>, Vec<OpResult>)> {
        self.client.batch_ops(ops, self.autocommit)
    }

    fn wrote(&mut self) {
        self.client.wrote = true;
    }
}

/// A connection as workload code sees a database ([`engine::Connection`]): table and index
/// names resolved from the server's catalog, transactions run through [`RemoteTx`].
pub struct RemoteConnection<'c> {
    client: Mutex<&'c mut Client>,
    tables: HashMap<String, u32>,
    indexes: HashMap<String, u32>,
}

impl<'c> RemoteConnection<'c> {
    /// Borrows a connected client, reading the server's catalog once.
    pub fn new(client: &'c mut Client) -> TxResult<RemoteConnection<'c>> {
        let catalog = client.catalog()?;
        Ok(RemoteConnection {
            client: Mutex::new(client),
            tables: catalog.tables.into_iter().collect(),
            indexes: catalog.indexes.into_iter().collect(),
        })
    }
}

impl Connection for RemoteConnection<'_> {
    fn table(&self, name: &str) -> TxResult<TableRef> {
        let id = *self
            .tables
            .get(name)
            .ok_or_else(|| TxError::Invalid(format!("the server has no table named {name}")))?;
        Ok(TableRef {
            name: name.to_string(),
            id,
        })
    }

    fn index(&self, name: &str) -> TxResult<IndexRef> {
        let id = *self
            .indexes
            .get(name)
            .ok_or_else(|| TxError::Invalid(format!("the server has no index named {name}")))?;
        Ok(IndexRef {
            name: name.to_string(),
            id,
        })
    }

    fn transaction(&self, body: &mut dyn FnMut(&mut dyn Tx) -> TxResult<()>) -> TxResult<()> {
        let mut client = self.client.lock();
        let result = body(&mut client.remote_tx(false));
        finish(&mut client, result)
    }
}

/// Ends an interactive transaction after its body: commits if the body succeeded, else aborts
/// what the server still holds open and returns the body's error.
///
/// The commit sends the writes [`RemoteTx`] deferred with it (`Batch{autocommit}`, one round
/// trip), or `Commit` if none are pending; with neither writes pending nor a transaction open
/// it sends nothing. An abort drops the pending writes unsent, and sends `Abort` only if the
/// server holds a transaction open.
pub fn finish(client: &mut Client, result: TxResult<()>) -> TxResult<()> {
    let wrote = std::mem::take(&mut client.wrote);
    match result {
        Ok(()) if client.in_transaction() && !client.has_pending() && !wrote => {
            // Read-only: its reads are done under their locks, and a commit can neither
            // fail nor change anything; it only releases the locks. So it is acknowledged
            // now and its Commit travels ahead of the next request.
            client.in_transaction = false;
            client.deferred.clear();
            client.commit_pending = true;
            Ok(())
        }
        Ok(()) if client.in_transaction() || client.has_pending() => client.commit(),
        Ok(()) => Ok(()),
        Err(e) => {
            client.discard();
            if client.in_transaction() {
                // The attempt already failed; an abort error would only hide its cause.
                let _ = client.abort();
            }
            Err(e)
        }
    }
}
