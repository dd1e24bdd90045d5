//! Reading frames from log storage in large chunks: the open-time scan that finds the end of
//! the log, and forward iteration ([`LogIter`]) for analysis and redo.
//!
//! A [`ChunkReader`] keeps one chunk (64 KiB, or one record if larger) of storage bytes and
//! refills it only when the next frame runs past it, so a forward scan costs one positioned
//! read per chunk, not per record. It never reads past the caller's `limit` (the written end
//! of the log), so a record's length field cannot make it allocate more than the log holds.

use std::io;

use storage::Lsn;

use crate::error::{WalError, WalResult};
use crate::log::{LogManager, LogMode, LOG_HEADER_SIZE};
use crate::record::{check_frame, decode_checked_frame, FrameCheck, LogRecord};
use crate::storage::LogStorage;

const CHUNK_BYTES: usize = 64 * 1024;

/// What stands at a position of the stored log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameAt {
    /// An intact frame of this length ([`ChunkReader::frame_bytes`] returns it).
    Complete(usize),
    /// No intact frame: the log ends here (torn, zeroed, garbage or simply the end).
    End(&'static str),
}

pub(crate) struct ChunkReader {
    start: u64,
    bytes: Vec<u8>,
}

impl ChunkReader {
    pub fn new() -> ChunkReader {
        ChunkReader {
            start: 0,
            bytes: Vec::new(),
        }
    }

    /// Judges the frame at `pos`, reading storage below `limit` as needed.
    pub fn frame(&mut self, storage: &dyn LogStorage, pos: u64, limit: u64) -> io::Result<FrameAt> {
        if pos >= limit {
            return Ok(FrameAt::End("end of the log"));
        }
        let mut refilled = false;
        loop {
            let chunk_end = self.start + self.bytes.len() as u64;
            let want = if pos >= self.start && pos < chunk_end {
                match check_frame(&self.bytes[(pos - self.start) as usize..]) {
                    FrameCheck::Complete(len) => return Ok(FrameAt::Complete(len)),
                    FrameCheck::Bad(reason) => return Ok(FrameAt::End(reason)),
                    FrameCheck::Incomplete(needed) => {
                        if refilled || chunk_end >= limit {
                            return Ok(FrameAt::End("record extends past the end of the log"));
                        }
                        needed.max(CHUNK_BYTES)
                    }
                }
            } else {
                if refilled {
                    return Ok(FrameAt::End("record extends past the end of the log"));
                }
                CHUNK_BYTES
            };
            let want = want.min((limit - pos) as usize);
            self.bytes.resize(want, 0);
            let got = storage.read_at(pos, &mut self.bytes)?;
            self.bytes.truncate(got);
            self.start = pos;
            refilled = true;
        }
    }

    /// The bytes of the frame that [`ChunkReader::frame`] just found at `pos`.
    pub fn frame_bytes(&self, pos: u64, len: usize) -> &[u8] {
        let at = (pos - self.start) as usize;
        &self.bytes[at..at + len]
    }
}

/// Forward scan of the log from an LSN to its end, returned by [`LogManager::iter_from`].
/// A scan from below the log's start yields [`WalError::Discarded`].
///
/// Records on storage are read in chunks; records still in memory are read through the log
/// buffer. The end is the log's end at the time of each `next` call. After an error the
/// iterator yields nothing more.
pub struct LogIter<'a> {
    log: &'a LogManager,
    pos: u64,
    chunk: ChunkReader,
    done: bool,
}

impl<'a> LogIter<'a> {
    pub(crate) fn new(log: &'a LogManager, from: Lsn) -> LogIter<'a> {
        LogIter {
            log,
            pos: from.0,
            chunk: ChunkReader::new(),
            done: false,
        }
    }

    fn step(&mut self) -> Option<WalResult<(Lsn, LogRecord)>> {
        if self.log.mode() == LogMode::LsnOnly {
            return Some(Err(WalError::NotLogged));
        }
        let lsn = Lsn(self.pos);
        if self.pos < LOG_HEADER_SIZE as u64 {
            return Some(Err(WalError::OutOfRange {
                lsn,
                first: self.log.first_lsn(),
                end: self.log.end_lsn(),
            }));
        }
        if let Err(e) = self.log.check_not_discarded(lsn) {
            return Some(Err(e));
        }
        let written = self.log.written_end();
        if self.pos < written {
            let read = match self.chunk.frame(self.log.storage(), self.pos, written) {
                Ok(FrameAt::Complete(len)) => {
                    let bytes = self.chunk.frame_bytes(self.pos, len);
                    decode_checked_frame(bytes, lsn).map(|record| {
                        self.pos += len as u64;
                        (lsn, record)
                    })
                }
                Ok(FrameAt::End(reason)) => Err(WalError::Corrupt { lsn, reason }),
                Err(e) => Err(WalError::io("reading the log", e)),
            };
            // A discard may have freed the bytes while they were read.
            return Some(read.or_else(|e| self.log.check_not_discarded(lsn).and(Err(e))));
        }
        if self.pos >= self.log.end_lsn().0 {
            return None;
        }
        Some(self.log.read_frame(lsn).map(|(record, len)| {
            self.pos += len as u64;
            (lsn, record)
        }))
    }
}

impl Iterator for LogIter<'_> {
    type Item = WalResult<(Lsn, LogRecord)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.step();
        if matches!(item, Some(Err(_))) {
            self.done = true;
        }
        item
    }
}
