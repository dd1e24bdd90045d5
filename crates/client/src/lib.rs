//! The Glass client library: a blocking connection to a Glass server, for a program of one's
//! own or for `glass bench --server`.
//!
//! ```text
//!   Client::connect(endpoint)        Hello ─► Welcome (workload, procedure names)
//!   client.call("payment", args)     Call ─► Returned          one round trip per transaction
//!   RemoteTx (engine::Tx)            Batch ─► Results          one round trip per operation;
//!                                    … Commit ─► Done          the first batch begins
//!   RemoteConnection                 engine::Connection: names from the server's catalog,
//!                                    `transaction` = RemoteTx + Commit
//! ```
//!
//! Workload code written against [`engine::Tx`] runs unchanged through [`RemoteTx`], each
//! operation a round trip (the Tx API cannot say which operations are independent, so none are
//! batched yet). Errors come back as [`engine::TxError`], classified as the server classified
//! them ([`protocol::ErrorClass`]); a broken connection is [`engine::TxError::Connection`].

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;

use engine::{Connection, Fetch, IndexRef, KeyRange, Row, TableRef, Tx, TxError, TxResult, Value};
use parking_lot::Mutex;
use protocol::{
    Endpoint, FrameBuffer, Op, OpResult, Request, Response, ScanSource, DEFAULT_MAX_FRAME, MAGIC,
    VERSION,
};

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn broken(what: &str, e: impl std::fmt::Display) -> TxError {
    TxError::Connection(format!("{what}: {e}"))
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
        };
        let mut client = Client {
            stream,
            input: FrameBuffer::new(DEFAULT_MAX_FRAME),
            out: Vec::new(),
            workload: String::new(),
            procedures: Vec::new(),
            round_trips: 0,
            in_transaction: false,
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

    /// Whether the server holds an open transaction of this connection.
    pub fn in_transaction(&self) -> bool {
        self.in_transaction
    }

    /// Sends one request and waits for its response: one round trip. A `Failed` response is
    /// returned as it came (see [`Client::expect`]).
    pub fn request(&mut self, request: &Request) -> TxResult<Response> {
        self.out.clear();
        request.encode(&mut self.out);
        self.stream
            .write_all(&self.out)
            .map_err(|e| broken("send a request", e))?;
        loop {
            match self.input.next_frame() {
                Ok(Some(frame)) => {
                    self.round_trips += 1;
                    return Response::decode(frame).map_err(|e| broken("read a response", e));
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
                Err(class.into_tx_error(message))
            }
            other => Ok(other),
        }
    }

    /// Calls a stored procedure: one transaction, one round trip. Returns what it returned.
    pub fn call(&mut self, procedure: &str, args: Vec<Value>) -> TxResult<Vec<Value>> {
        let request = Request::Call {
            procedure: procedure.to_string(),
            args,
        };
        match self.expect(&request)? {
            Response::Returned { values } => Ok(values),
            other => Err(unexpected("Call", &other)),
        }
    }

    /// Runs `ops` in the open transaction (beginning one if none is open); with `commit`, the
    /// transaction then commits (a batch outside a transaction is then a transaction of its
    /// own).
    pub fn batch(&mut self, ops: Vec<Op>, commit: bool) -> TxResult<Vec<OpResult>> {
        let count = ops.len();
        let request = Request::Batch {
            autocommit: commit,
            ops,
        };
        match self.expect(&request)? {
            Response::Results { results } if results.len() == count => {
                self.in_transaction = !commit;
                Ok(results)
            }
            other => Err(unexpected("Batch", &other)),
        }
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

    /// Commits the open transaction.
    pub fn commit(&mut self) -> TxResult<()> {
        self.finish(Request::Commit)
    }

    /// Aborts the open transaction.
    pub fn abort(&mut self) -> TxResult<()> {
        self.finish(Request::Abort)
    }

    fn finish(&mut self, request: Request) -> TxResult<()> {
        let response = self.expect(&request);
        self.in_transaction = false;
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

/// A transaction run from the client through [`engine::Tx`]: each operation one round trip.
/// With `autocommit` each operation is a transaction of its own (the 2025 paper's simulation
/// of interactive transactions); without it they belong to one transaction, which the caller
/// ends with [`Client::commit`] or [`Client::abort`].
pub struct RemoteTx<'c> {
    client: &'c mut Client,
    autocommit: bool,
}

impl<'c> RemoteTx<'c> {
    pub fn new(client: &'c mut Client, autocommit: bool) -> Self {
        RemoteTx { client, autocommit }
    }

    fn one(&mut self, op: Op) -> TxResult<OpResult> {
        let mut results = self.client.batch(vec![op], self.autocommit)?;
        results
            .pop()
            .ok_or_else(|| TxError::Connection("the server returned no result".to_string()))
    }
}

fn columns(fetch: Fetch<'_>) -> TxResult<Option<Vec<u16>>> {
    match fetch {
        Fetch::All => Ok(None),
        Fetch::Cols(cols) => cols
            .iter()
            .map(|&c| u16::try_from(c).map_err(|_| TxError::Invalid(format!("no column {c}"))))
            .collect::<TxResult<Vec<u16>>>()
            .map(Some),
    }
}

fn owned(b: std::ops::Bound<&[Value]>) -> std::ops::Bound<Vec<Value>> {
    match b {
        std::ops::Bound::Included(v) => std::ops::Bound::Included(v.to_vec()),
        std::ops::Bound::Excluded(v) => std::ops::Bound::Excluded(v.to_vec()),
        std::ops::Bound::Unbounded => std::ops::Bound::Unbounded,
    }
}

fn wrong(op: &str, result: &OpResult) -> TxError {
    TxError::Connection(format!("the server answered {op} with {result:?}"))
}

impl Tx for RemoteTx<'_> {
    fn get(
        &mut self,
        table: &TableRef,
        key: &[Value],
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Option<Row>> {
        let op = Op::Get {
            table: table.id,
            key: key.to_vec(),
            columns: columns(fetch)?,
            for_update,
        };
        match self.one(op)? {
            OpResult::Row(row) => Ok(row),
            other => Err(wrong("Get", &other)),
        }
    }

    fn update(
        &mut self,
        table: &TableRef,
        key: &[Value],
        set: &[(usize, Value)],
    ) -> TxResult<bool> {
        let set = set
            .iter()
            .map(|(c, v)| {
                u16::try_from(*c)
                    .map(|c| (c, v.clone()))
                    .map_err(|_| TxError::Invalid(format!("no column {c}")))
            })
            .collect::<TxResult<Vec<_>>>()?;
        let op = Op::Update {
            table: table.id,
            key: key.to_vec(),
            set,
        };
        match self.one(op)? {
            OpResult::Found(found) => Ok(found),
            other => Err(wrong("Update", &other)),
        }
    }

    fn insert(&mut self, table: &TableRef, row: &[Value]) -> TxResult<()> {
        let op = Op::Insert {
            table: table.id,
            row: row.to_vec(),
        };
        match self.one(op)? {
            OpResult::Inserted => Ok(()),
            other => Err(wrong("Insert", &other)),
        }
    }

    fn delete(&mut self, table: &TableRef, key: &[Value]) -> TxResult<bool> {
        let op = Op::Delete {
            table: table.id,
            key: key.to_vec(),
        };
        match self.one(op)? {
            OpResult::Found(found) => Ok(found),
            other => Err(wrong("Delete", &other)),
        }
    }

    fn scan(
        &mut self,
        table: &TableRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<Row>> {
        self.scan_source(
            ScanSource::Table(table.id),
            range,
            limit,
            reverse,
            fetch,
            for_update,
        )
    }

    fn scan_index(
        &mut self,
        index: &IndexRef,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<Row>> {
        self.scan_source(
            ScanSource::Index(index.id),
            range,
            limit,
            reverse,
            fetch,
            for_update,
        )
    }
}

impl RemoteTx<'_> {
    fn scan_source(
        &mut self,
        source: ScanSource,
        range: KeyRange<'_>,
        limit: Option<usize>,
        reverse: bool,
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> TxResult<Vec<Row>> {
        let op = Op::Scan {
            source,
            low: owned(range.low),
            high: owned(range.high),
            limit: limit.map(|l| u32::try_from(l).unwrap_or(u32::MAX)),
            reverse,
            columns: columns(fetch)?,
            for_update,
        };
        match self.one(op)? {
            OpResult::Rows(rows) => Ok(rows),
            other => Err(wrong("Scan", &other)),
        }
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
        let result = body(&mut RemoteTx::new(&mut client, false));
        finish(&mut client, result)
    }
}

/// Ends an interactive transaction after its body: commits if the body succeeded, else aborts
/// what the server still holds open and returns the body's error.
pub fn finish(client: &mut Client, result: TxResult<()>) -> TxResult<()> {
    match result {
        Ok(()) if client.in_transaction() => client.commit(),
        Ok(()) => Ok(()),
        Err(e) => {
            if client.in_transaction() {
                // The attempt already failed; an abort error would only hide its cause.
                let _ = client.abort();
            }
            Err(e)
        }
    }
}
