//! A connection's socket and its two buffers, for non-blocking, edge-triggered I/O: frames in
//! ([`protocol::FrameBuffer`]) and bytes out (a `Vec` and how much of it is written).
//!
//! Under edge-triggered readiness a socket reports readable once per arrival, so a link that
//! stops reading before the kernel says `WouldBlock` must remember that it may have more: it
//! does (`readable`), and reads again once it has room. It stops reading while its input holds
//! more than [`INPUT_LIMIT`] bytes or its output more than [`OUTPUT_LIMIT`]: a client that
//! sends without reading its responses is left waiting, not buffered without bound.

use std::io::{self, Read, Write};
use std::path::PathBuf;

use mio::event::Source;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Interest, Registry, Token};
use protocol::{Endpoint, FrameBuffer};

use crate::trace::{Phase, Tracer};

/// Unsent response bytes above which a link reads no more requests.
pub const OUTPUT_LIMIT: usize = 1 << 20;
/// Buffered request bytes above which a link reads no more from its socket (beyond the
/// frame being completed).
pub const INPUT_LIMIT: usize = 1 << 20;

/// A listening socket of either kind.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// Binds `endpoint`. A Unix socket file left by an earlier server is replaced; any other
    /// file at that path is an error.
    pub fn bind(endpoint: &Endpoint) -> io::Result<Listener> {
        match endpoint {
            Endpoint::Tcp(addr) => TcpListener::bind(*addr).map(Listener::Tcp),
            Endpoint::Unix(path) => {
                use std::os::unix::fs::FileTypeExt;
                if let Ok(meta) = std::fs::symlink_metadata(path) {
                    if !meta.file_type().is_socket() {
                        return Err(io::Error::new(
                            io::ErrorKind::AlreadyExists,
                            format!("{} exists and is not a socket", path.display()),
                        ));
                    }
                    std::fs::remove_file(path)?;
                }
                UnixListener::bind(path).map(|l| Listener::Unix(l, path.clone()))
            }
            Endpoint::Shm(_) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a shared-memory region is served by its own thread, not a listener",
            )),
        }
    }

    /// The endpoint as bound (a TCP port of 0 replaced by the one chosen).
    pub fn endpoint(&self) -> io::Result<Endpoint> {
        match self {
            Listener::Tcp(l) => l.local_addr().map(Endpoint::Tcp),
            Listener::Unix(_, path) => Ok(Endpoint::Unix(path.clone())),
        }
    }

    /// Accepts one connection, or `WouldBlock`.
    pub fn accept(&self) -> io::Result<Stream> {
        match self {
            Listener::Tcp(l) => {
                let (s, _) = l.accept()?;
                // Requests and responses are single small frames: send each at once.
                s.set_nodelay(true)?;
                Ok(Stream::Tcp(s))
            }
            Listener::Unix(l, _) => l.accept().map(|(s, _)| Stream::Unix(s)),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Source for Listener {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Listener::Tcp(l) => l.register(r, t, i),
            Listener::Unix(l, _) => l.register(r, t, i),
        }
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Listener::Tcp(l) => l.reregister(r, t, i),
            Listener::Unix(l, _) => l.reregister(r, t, i),
        }
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Listener::Tcp(l) => l.deregister(r),
            Listener::Unix(l, _) => l.deregister(r),
        }
    }
}

/// A connected socket of either kind.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    /// Ends the stream for writing: what was written is followed by an end of stream.
    pub fn shutdown_write(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Write),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Source for Stream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(r, t, i),
            Stream::Unix(s) => s.register(r, t, i),
        }
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(r, t, i),
            Stream::Unix(s) => s.reregister(r, t, i),
        }
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(r),
            Stream::Unix(s) => s.deregister(r),
        }
    }
}

/// What reading a link's socket found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// Read until the kernel had no more (or the buffers are full: `readable` stays set).
    Open,
    /// The peer closed its end (or the socket failed).
    Closed,
}

/// A socket with its receive and send buffers.
pub struct Link {
    pub stream: Stream,
    pub input: FrameBuffer,
    pub output: Vec<u8>,
    /// How much of `output` is already sent.
    written: usize,
    /// The socket may have unread bytes: the last read stopped before `WouldBlock` (or
    /// before a short read).
    readable: bool,
    /// A readiness event said the peer closed its end (or the socket failed): read on until
    /// the stream's end (or the error) instead of stopping at a short read.
    read_closed: bool,
}

impl Link {
    pub fn new(stream: Stream, max_frame: u32) -> Link {
        Link {
            stream,
            input: FrameBuffer::new(max_frame),
            output: Vec::new(),
            written: 0,
            readable: true,
            read_closed: false,
        }
    }

    /// Response bytes not yet sent.
    pub fn unsent(&self) -> usize {
        self.output.len() - self.written
    }

    /// Whether requests may be taken from the input: the output has room.
    pub fn has_room(&self) -> bool {
        self.unsent() < OUTPUT_LIMIT
    }

    /// Whether a read may find more and has room for it.
    pub fn can_read(&self) -> bool {
        self.readable && self.input.buffered() < INPUT_LIMIT && self.has_room()
    }

    /// Notes a readiness event. One that says readable (or closed, or failed) means the
    /// socket may have bytes (or its end, or an error) to read again; one that only says
    /// writable leaves a drained socket alone.
    pub fn note_event(&mut self, event: &mio::event::Event) {
        if event.is_read_closed() || event.is_error() {
            self.read_closed = true;
            self.readable = true;
        } else if event.is_readable() {
            self.readable = true;
        }
    }

    /// Reads what the socket has, while the buffers have room. A read that leaves room
    /// unfilled is the last ([`protocol::ReadOnce::drained`]): the next bytes raise an event,
    /// and a request costs one read, not a second to hear `WouldBlock`.
    pub fn fill(&mut self, tracer: &mut Tracer) -> Fill {
        while self.can_read() {
            let start = tracer.start();
            let read = self.input.read_once(&mut self.stream);
            tracer.charge(Phase::SocketRead, start);
            match read {
                Ok(read) if read.bytes == 0 => return Fill::Closed,
                Ok(read) => {
                    if read.drained() && !self.read_closed {
                        self.readable = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.readable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Fill::Closed,
            }
        }
        Fill::Open
    }

    /// Sends what the output holds until it is empty or the socket is full. An error means the
    /// peer is gone.
    pub fn flush(&mut self, tracer: &mut Tracer) -> io::Result<()> {
        while self.written < self.output.len() {
            let start = tracer.start();
            let written = self.stream.write(&self.output[self.written..]);
            tracer.charge(Phase::NetworkSend, start);
            match written {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.written == self.output.len() {
            self.output.clear();
            self.written = 0;
        }
        Ok(())
    }
}
