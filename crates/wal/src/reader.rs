//! Reading frames from log storage in large chunks: the open-time scan that finds the end of
//! the log, the look past a bad frame that tells a torn tail from damage in the middle of the
//! log (`look_past`, `unwritten_sector_in`), and forward iteration ([`LogIter`]) for
//! analysis and redo.
//!
//! A [`ChunkReader`] keeps one chunk (64 KiB, or one record if larger) of storage bytes and
//! refills it only when the next frame runs past it, so a forward scan costs one positioned
//! read per chunk, not per record. It never reads past the caller's `limit` (the written end
//! of the log), so a record's length field cannot make it allocate more than the log holds.

use std::io;

use storage::Lsn;

use crate::error::{WalError, WalResult};
use crate::log::{LogManager, LogMode, LOG_HEADER_SIZE};
use crate::record::{
    check_frame, decode_checked_frame, plausible_frame_start, refers_backward, FrameCheck,
    LogRecord, FRAME_HEADER_SIZE, PROBE_BYTES,
};
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
    ///
    /// A frame longer than a chunk is read again from its start, whole. (Once only a frame
    /// that began inside the chunk was: one that began a fresh chunk and ran past it — any
    /// record over 64 KiB, a checkpoint's with thousands of dirty pages, where a chunk
    /// happened to start at it — was taken for the end of the log.)
    pub fn frame(&mut self, storage: &dyn LogStorage, pos: u64, limit: u64) -> io::Result<FrameAt> {
        const PAST_END: &str = "record extends past the end of the log";
        if pos >= limit {
            return Ok(FrameAt::End("end of the log"));
        }
        // Bytes last asked of storage from `pos`: each read asks for more, or the scan ends.
        let mut asked = 0;
        loop {
            let chunk_end = self.start + self.bytes.len() as u64;
            let want = if pos >= self.start && pos < chunk_end {
                match check_frame(&self.bytes[(pos - self.start) as usize..]) {
                    FrameCheck::Complete(len) => return Ok(FrameAt::Complete(len)),
                    FrameCheck::Bad(reason) => return Ok(FrameAt::End(reason)),
                    FrameCheck::Incomplete(_) if chunk_end >= limit => {
                        return Ok(FrameAt::End(PAST_END))
                    }
                    FrameCheck::Incomplete(needed) => needed.max(CHUNK_BYTES),
                }
            } else {
                CHUNK_BYTES
            };
            let want = want.min((limit - pos) as usize);
            if want <= asked {
                // Storage gave fewer bytes than it was asked for, all it has.
                return Ok(FrameAt::End(PAST_END));
            }
            self.bytes.resize(want, 0);
            let got = storage.read_at(pos, &mut self.bytes)?;
            self.bytes.truncate(got);
            self.start = pos;
            asked = want;
        }
    }

    /// The bytes of the frame that [`ChunkReader::frame`] just found at `pos`.
    pub fn frame_bytes(&self, pos: u64, len: usize) -> &[u8] {
        let at = (pos - self.start) as usize;
        &self.bytes[at..at + len]
    }
}

/// What follows a bad frame in the stored log (see [`look_past`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PastBadFrame {
    /// The first intact frame after the bad one.
    pub resumes_at: u64,
    /// Intact records from `resumes_at` to the end (across any further bad stretches; padding
    /// frames not counted).
    pub records: u64,
    /// The `CheckpointBegin` the master record names is among them: the log was synced past
    /// the bad frame (the master is written only after that), so no crash explains it.
    pub checkpoint_seen: bool,
}

/// Looks past the bad frame at `bad` for intact frames below `limit`: frames whose checksum
/// holds, whose body decodes, and whose LSNs fit the sequence ([`refers_backward`]). The search
/// goes byte by byte (frames have no alignment), filtering on the frame's first bytes before
/// any checksum is computed ([`plausible_frame_start`]), so it costs about one read of the
/// bytes past `bad`. `None` when
/// nothing intact follows: the bad frame is a torn tail.
pub(crate) fn look_past(
    storage: &dyn LogStorage,
    bad: u64,
    limit: u64,
    checkpoint: Option<Lsn>,
) -> io::Result<Option<PastBadFrame>> {
    let mut search = FrameSearch::new();
    let Some((resumes_at, mut len, mut record)) = search.next_intact(storage, bad + 1, limit)?
    else {
        return Ok(None);
    };
    let mut past = PastBadFrame {
        resumes_at,
        records: 0,
        checkpoint_seen: false,
    };
    let mut pos = resumes_at;
    let mut chunk = ChunkReader::new();
    loop {
        // A closed run's padding is no record.
        if !matches!(record, LogRecord::Padding { .. }) {
            past.records += 1;
        }
        if checkpoint == Some(Lsn(pos)) && record == LogRecord::CheckpointBegin {
            past.checkpoint_seen = true;
        }
        pos += len as u64;
        if let FrameAt::Complete(next_len) = chunk.frame(storage, pos, limit)? {
            if let Ok(next) = decode_checked_frame(chunk.frame_bytes(pos, next_len), Lsn(pos)) {
                (len, record) = (next_len, next);
                continue;
            }
        }
        if pos >= limit {
            return Ok(Some(past));
        }
        match search.next_intact(storage, pos + 1, limit)? {
            Some((at, next_len, next)) => (pos, len, record) = (at, next_len, next),
            None => return Ok(Some(past)),
        }
    }
}

/// A byte-by-byte search of stored log bytes for the next intact frame.
struct FrameSearch {
    window_start: u64,
    window: Vec<u8>,
    chunk: ChunkReader,
}

impl FrameSearch {
    fn new() -> FrameSearch {
        FrameSearch {
            window_start: 0,
            window: Vec::new(),
            chunk: ChunkReader::new(),
        }
    }

    /// The first position in `from..limit` holding an intact frame that fits the sequence,
    /// with its length and record.
    fn next_intact(
        &mut self,
        storage: &dyn LogStorage,
        from: u64,
        limit: u64,
    ) -> io::Result<Option<(u64, usize, LogRecord)>> {
        let header = FRAME_HEADER_SIZE as u64;
        let mut pos = from;
        while pos + header <= limit {
            let window_end = self.window_start + self.window.len() as u64;
            let probe = (PROBE_BYTES as u64).min(limit - pos);
            if pos < self.window_start || pos + probe > window_end {
                let want = CHUNK_BYTES.min((limit - pos) as usize);
                self.window.resize(want, 0);
                let got = storage.read_at(pos, &mut self.window)?;
                self.window.truncate(got);
                self.window_start = pos;
                if (got as u64) < header {
                    return Ok(None);
                }
            }
            let at = (pos - self.window_start) as usize;
            if plausible_frame_start(&self.window[at..], Lsn(pos), limit - pos) {
                if let FrameAt::Complete(len) = self.chunk.frame(storage, pos, limit)? {
                    let bytes = self.chunk.frame_bytes(pos, len);
                    if let Ok(record) = decode_checked_frame(bytes, Lsn(pos)) {
                        if refers_backward(&record, Lsn(pos)) {
                            return Ok(Some((pos, len, record)));
                        }
                    }
                }
            }
            pos += 1;
        }
        Ok(None)
    }
}

/// Sectors a disk writes whole: after a power loss each one of the log's unsynced tail holds
/// either what was written or what was there before (zeros past the old end of the file).
pub(crate) const SECTOR_BYTES: u64 = 512;

/// Whether `from..to` holds an *unwritten sector*: a [`SECTOR_BYTES`]-aligned sector whose
/// bytes inside the range are all zero. That is what a power loss leaves in a log's unsynced
/// tail when the page cache wrote a later page back but not an earlier one (or a sector of a
/// page, or a file system exposed an extent it had allocated but not written): zeros, then
/// intact frames. A sector may also hold an older version, written back when the file ended
/// inside it: intact up to that end, which is the end of a write and so a frame boundary (the
/// bad frame's start, `from`), zeros after it; its part in the range is zeros too. Flipped bits
/// do not zero a sector; a frame that is mostly zeros (a fresh page's image) can hide them, and
/// then its damage is taken for a torn tail, as before this check existed.
pub(crate) fn unwritten_sector_in(
    storage: &dyn LogStorage,
    from: u64,
    to: u64,
) -> io::Result<bool> {
    let mut buf = Vec::new();
    let mut at = from;
    while at < to {
        // Chunks end on sector boundaries, so each sector is judged within one chunk.
        let chunk_end = (at + CHUNK_BYTES as u64) / SECTOR_BYTES * SECTOR_BYTES;
        let chunk_end = chunk_end.min(to).max(at + 1);
        buf.resize((chunk_end - at) as usize, 0);
        // Should the storage end early, what is missing reads as nothing, not as zeros.
        let got = storage.read_at(at, &mut buf)?;
        buf.truncate(got);
        let read_end = at + got as u64;
        let mut sector_at = at;
        while sector_at < read_end {
            let sector_end = ((sector_at / SECTOR_BYTES + 1) * SECTOR_BYTES).min(read_end);
            let bytes = &buf[(sector_at - at) as usize..(sector_end - at) as usize];
            if bytes.iter().all(|b| *b == 0) {
                return Ok(true);
            }
            sector_at = sector_end;
        }
        if read_end < chunk_end {
            break;
        }
        at = chunk_end;
    }
    Ok(false)
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
        loop {
            let item = self.step();
            match item {
                // The unused end of a closed run: no record, nothing to yield.
                Some(Ok((_, LogRecord::Padding { .. }))) => continue,
                Some(Err(_)) => self.done = true,
                _ => {}
            }
            return item;
        }
    }
}
