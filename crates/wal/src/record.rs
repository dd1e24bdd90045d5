//! Log records and their codec.
//!
//! A record's LSN is the byte offset of its first byte in the log. Records do not contain their
//! own LSN, so a frame is position-independent: its checksum can be computed before the record
//! is given a place in the log buffer, and the latch is held only for the copy.
//!
//! # Frame
//!
//! | offset | size | field | meaning                                                        |
//! |-------:|-----:|-------|----------------------------------------------------------------|
//! | 0      | 4    | len   | total frame length in bytes, header included (`9..=MAX_RECORD_BYTES`) |
//! | 4      | 4    | crc   | CRC-32C of bytes `0..4` (len) followed by bytes `8..len`       |
//! | 8      | 1    | kind  | [`RecordKind`]                                                 |
//! | 9      | len-9| body  | depends on kind, below                                         |
//!
//! The checksum covers the length too, so a torn or zeroed tail never passes for a record
//! (a zero length is rejected before the checksum is even looked at). All integers are
//! little-endian.
//!
//! # Bodies
//!
//! | kind | record            | body                                                                                  |
//! |-----:|-------------------|---------------------------------------------------------------------------------------|
//! | 1    | `PageRedo`        | `page_count u16`, then per page: `page u64` (top bit: zero the page first), `range_count u16`, then per range: `offset u16`, `len u16`, `len` bytes |
//! | 2    | `Update`          | `txn u64`, `prev u64`, payload (the rest of the frame)                                 |
//! | 3    | `Compensation`    | `txn u64`, `prev u64`, `undo_next u64`, payload (the rest)                             |
//! | 4    | `Commit`          | `txn u64`, `prev u64`                                                                  |
//! | 5    | `Abort`           | `txn u64`, `prev u64`                                                                  |
//! | 6    | `End`             | `txn u64`, `prev u64`                                                                  |
//! | 7    | `CheckpointBegin` | empty                                                                                 |
//! | 8    | `CheckpointEnd`   | `begin u64`, `active_count u32`, per txn: `txn u64`, `last_lsn u64`, `committed u8` (0 or 1); `dirty_count u32`, per page: `page u64`, `rec_lsn u64`; `meta` (the rest) |
//! | 9    | `Padding`         | bytes of [`PAD_BYTE`]: the unused end of a thread's run of reserved bytes, closed (see `buffer`'s runs); readers skip it |
//!
//! Invariants of the codec:
//! * `decode(encode(r)) == r` for every record `r` (proptested), and the encoding is canonical:
//!   a body with trailing bytes, a flag other than 0/1 or an unknown kind is rejected.
//! * Decoding never panics and never allocates more than the bytes it was given justify
//!   (counts are checked against the remaining length before any `Vec` is sized).
//!
//! The hot records (`Update`, `Compensation`, `Commit`, page redo from the buffer pool) are
//! encoded through borrowed views ([`UpdateView`] and friends), without building a record;
//! [`LogRecord`] is the owned form that decoding returns and that rarer callers append.

use std::fmt;

use storage::page::PageRedo;
use storage::{Lsn, PageId};

#[cfg(test)]
use crate::checksum::Crc32c;
use crate::checksum::{crc32c, crc32c_append};
use crate::error::{WalError, WalResult};

/// Every body byte of a padding frame: not zero, so that a padding body is never taken for
/// sectors a crash left unwritten (see `log`'s `damage_at`).
pub const PAD_BYTE: u8 = 0x5A;

/// Bytes before the body: `len`, `crc`, `kind`.
pub const FRAME_HEADER_SIZE: usize = 9;
/// The largest frame the log accepts (a checkpoint of millions of dirty pages still fits).
pub const MAX_RECORD_BYTES: usize = 256 << 20;

const OFFSET_LEN: usize = 0;
const OFFSET_CRC: usize = 4;
const OFFSET_KIND: usize = 8;
const _: () = assert!(OFFSET_KIND + 1 == FRAME_HEADER_SIZE);
const _: () = assert!(MAX_RECORD_BYTES <= u32::MAX as usize);

/// Identifies a transaction. Transaction ids are never reused within one database.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TxnId(pub u64);

impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "txn:{}", self.0)
    }
}

/// The owned form of one page's redo: `bytes` now stand at `offset`, for every range (after
/// the whole page was zeroed, if `zeroed`: a fresh page).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRedoOwned {
    pub page: PageId,
    pub zeroed: bool,
    pub ranges: Vec<(u16, Vec<u8>)>,
}

/// In a page redo's `page u64`: the page was zero-filled before its ranges (page ids stay
/// below 2^63).
const PAGE_ZEROED: u64 = 1 << 63;

/// The `page u64` field of a page redo.
#[inline]
fn page_field(page: PageId, zeroed: bool) -> [u8; 8] {
    assert!(page.0 < PAGE_ZEROED, "page id {page} too large for the log");
    (page.0 | if zeroed { PAGE_ZEROED } else { 0 }).to_le_bytes()
}

/// A transaction that was running when a checkpoint was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveTxn {
    pub txn: TxnId,
    /// LSN of the transaction's last record (head of its undo chain).
    pub last_lsn: Lsn,
    /// Its `Commit` record is in the log but its `End` is not yet.
    pub committed: bool,
}

/// One log record, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogRecord {
    /// Physical redo of page byte ranges (redo-only, no transaction; several pages = one
    /// atomic structure change).
    PageRedo {
        pages: Vec<PageRedoOwned>,
    },
    /// Logical undo information of one operation (engine-defined payload), chained per
    /// transaction through `prev`.
    Update {
        txn: TxnId,
        prev: Lsn,
        payload: Vec<u8>,
    },
    /// Compensation: the undo of the record before `undo_next` is done; `payload` says what
    /// was undone (may be empty).
    Compensation {
        txn: TxnId,
        prev: Lsn,
        undo_next: Lsn,
        payload: Vec<u8>,
    },
    Commit {
        txn: TxnId,
        prev: Lsn,
    },
    Abort {
        txn: TxnId,
        prev: Lsn,
    },
    End {
        txn: TxnId,
        prev: Lsn,
    },
    CheckpointBegin,
    CheckpointEnd {
        begin: Lsn,
        active: Vec<ActiveTxn>,
        dirty: Vec<(PageId, Lsn)>,
        /// Engine bytes (next transaction id and the like).
        meta: Vec<u8>,
    },
    /// Bytes that hold no record: the unused end of a thread's run of reserved log bytes,
    /// closed by a writer taking the buffer (or by the thread itself), `frame` bytes long,
    /// header included. Never part of a transaction; the log's iterators skip it.
    Padding {
        frame: u32,
    },
}

/// Byte 8 of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordKind {
    PageRedo = 1,
    Update = 2,
    Compensation = 3,
    Commit = 4,
    Abort = 5,
    End = 6,
    CheckpointBegin = 7,
    CheckpointEnd = 8,
    Padding = 9,
}

impl RecordKind {
    pub fn from_u8(b: u8) -> Option<RecordKind> {
        Some(match b {
            1 => RecordKind::PageRedo,
            2 => RecordKind::Update,
            3 => RecordKind::Compensation,
            4 => RecordKind::Commit,
            5 => RecordKind::Abort,
            6 => RecordKind::End,
            7 => RecordKind::CheckpointBegin,
            8 => RecordKind::CheckpointEnd,
            9 => RecordKind::Padding,
            _ => return None,
        })
    }
}

impl LogRecord {
    pub fn kind(&self) -> RecordKind {
        match self {
            LogRecord::PageRedo { .. } => RecordKind::PageRedo,
            LogRecord::Update { .. } => RecordKind::Update,
            LogRecord::Compensation { .. } => RecordKind::Compensation,
            LogRecord::Commit { .. } => RecordKind::Commit,
            LogRecord::Abort { .. } => RecordKind::Abort,
            LogRecord::End { .. } => RecordKind::End,
            LogRecord::CheckpointBegin => RecordKind::CheckpointBegin,
            LogRecord::CheckpointEnd { .. } => RecordKind::CheckpointEnd,
            LogRecord::Padding { .. } => RecordKind::Padding,
        }
    }

    /// The transaction a record belongs to; `None` for redo and checkpoint records.
    pub fn txn(&self) -> Option<TxnId> {
        match self {
            LogRecord::Update { txn, .. }
            | LogRecord::Compensation { txn, .. }
            | LogRecord::Commit { txn, .. }
            | LogRecord::Abort { txn, .. }
            | LogRecord::End { txn, .. } => Some(*txn),
            _ => None,
        }
    }

    /// The previous record of the same transaction (its undo chain).
    pub fn prev(&self) -> Option<Lsn> {
        match self {
            LogRecord::Update { prev, .. }
            | LogRecord::Compensation { prev, .. }
            | LogRecord::Commit { prev, .. }
            | LogRecord::Abort { prev, .. }
            | LogRecord::End { prev, .. } => Some(*prev),
            _ => None,
        }
    }

    /// Length of the record's frame in the log.
    pub fn encoded_len(&self) -> usize {
        FRAME_HEADER_SIZE + self.body_len()
    }

    /// Appends the record's frame to `out`.
    ///
    /// # Panics
    /// If the record is larger than [`MAX_RECORD_BYTES`] or a page redo has more than
    /// `u16::MAX` pages, ranges or range bytes (a caller bug, never a property of stored bytes).
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_frame(self, out);
    }

    /// Decodes the frame at the start of `bytes` (which may continue past it); `lsn` only
    /// labels errors. Returns the record and the frame's length.
    pub fn decode(bytes: &[u8], lsn: Lsn) -> WalResult<(LogRecord, usize)> {
        match check_frame(bytes) {
            FrameCheck::Complete(len) => Ok((decode_checked_frame(&bytes[..len], lsn)?, len)),
            FrameCheck::Incomplete(_) => Err(WalError::Corrupt {
                lsn,
                reason: "record extends past the end of the bytes",
            }),
            FrameCheck::Bad(reason) => Err(WalError::Corrupt { lsn, reason }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// Where encoded bytes go: a checksum, a frame of known length, or the log buffer.
pub(crate) trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

#[cfg(test)]
impl Sink for Crc32c {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Fills a slice sized to the frame beforehand: each field is one bounds check and one copy,
/// with none of a `Vec`'s capacity checks and growth paths.
struct SliceSink<'a> {
    rest: &'a mut [u8],
}

impl Sink for SliceSink<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        let (head, rest) = std::mem::take(&mut self.rest).split_at_mut(bytes.len());
        head.copy_from_slice(bytes);
        self.rest = rest;
    }
}

/// Something that can be written as a record body without first being built as a `LogRecord`.
pub(crate) trait Encode {
    fn kind(&self) -> RecordKind;
    fn body_len(&self) -> usize;
    fn write_body<S: Sink>(&self, sink: &mut S);
}

/// The length of the frame of `record`.
///
/// # Panics
/// As [`LogRecord::encode`].
#[inline]
pub(crate) fn frame_len<E: Encode>(record: &E) -> usize {
    let len = FRAME_HEADER_SIZE + record.body_len();
    assert!(
        len <= MAX_RECORD_BYTES,
        "log record of {len} bytes exceeds the maximum of {MAX_RECORD_BYTES}"
    );
    len
}

/// The frame length and checksum of a record, hashed field by field: with [`write_frame`],
/// the tests' second encoder, against which the one-pass [`encode_frame_into`] is checked.
#[cfg(test)]
pub(crate) fn frame_len_and_crc<E: Encode>(record: &E) -> (u32, u32) {
    let len = frame_len(record) as u32;
    let mut hasher = Crc32c::default();
    hasher.put(&len.to_le_bytes());
    hasher.put(&[record.kind() as u8]);
    record.write_body(&mut hasher);
    (len, hasher.finalize())
}

/// Encodes the whole frame of `record` into `frame`, which is exactly [`frame_len`] bytes, in
/// one pass: header, body, then the checksum of the written bytes in one call (instead of one
/// per field).
///
/// # Panics
/// If `frame` is not [`frame_len`] bytes long (a bug in the caller or in an `Encode`).
#[inline]
pub(crate) fn encode_frame_into<E: Encode>(record: &E, frame: &mut [u8]) {
    let len_bytes = (frame.len() as u32).to_le_bytes();
    let mut sink = SliceSink { rest: frame };
    sink.put(&len_bytes);
    // The checksum covers `len` then `kind..`: with a copy of `len` standing where the
    // checksum goes, that is one contiguous run, hashed in one call.
    sink.put(&len_bytes);
    sink.put(&[record.kind() as u8]);
    record.write_body(&mut sink);
    assert!(
        sink.rest.is_empty(),
        "record body shorter than its body_len"
    );
    let crc = crc32c(&frame[OFFSET_CRC..]);
    frame[OFFSET_CRC..OFFSET_KIND].copy_from_slice(&crc.to_le_bytes());
}

/// Fills `frame` (at least [`FRAME_HEADER_SIZE`] bytes) with one padding frame: its header,
/// [`PAD_BYTE`]s and their checksum.
pub(crate) fn write_padding(frame: &mut [u8]) {
    debug_assert!(frame.len() >= FRAME_HEADER_SIZE);
    frame[FRAME_HEADER_SIZE..].fill(PAD_BYTE);
    let len_bytes = (frame.len() as u32).to_le_bytes();
    frame[OFFSET_LEN..OFFSET_CRC].copy_from_slice(&len_bytes);
    frame[OFFSET_CRC..OFFSET_KIND].copy_from_slice(&len_bytes);
    frame[OFFSET_KIND] = RecordKind::Padding as u8;
    let crc = crc32c(&frame[OFFSET_CRC..]);
    frame[OFFSET_CRC..OFFSET_KIND].copy_from_slice(&crc.to_le_bytes());
}

/// Appends the whole frame of `record` to `out` in one pass (see [`encode_frame_into`]).
///
/// # Panics
/// As [`LogRecord::encode`].
pub(crate) fn encode_frame<E: Encode>(record: &E, out: &mut Vec<u8>) {
    let len = frame_len(record);
    let start = out.len();
    out.resize(start + len, 0);
    encode_frame_into(record, &mut out[start..]);
}

/// Appends the frame of `record`, whose length and checksum were computed beforehand (the
/// tests' second encoder, see [`frame_len_and_crc`]).
#[cfg(test)]
pub(crate) fn write_frame<E: Encode>(record: &E, len: u32, crc: u32, out: &mut Vec<u8>) {
    let start = out.len();
    out.put(&len.to_le_bytes());
    out.put(&crc.to_le_bytes());
    out.put(&[record.kind() as u8]);
    record.write_body(out);
    debug_assert_eq!(out.len() - start, len as usize);
}

/// Borrowed `Update`.
pub(crate) struct UpdateView<'a> {
    pub txn: TxnId,
    pub prev: Lsn,
    pub payload: &'a [u8],
}

impl Encode for UpdateView<'_> {
    fn kind(&self) -> RecordKind {
        RecordKind::Update
    }
    fn body_len(&self) -> usize {
        16 + self.payload.len()
    }
    #[inline]
    fn write_body<S: Sink>(&self, sink: &mut S) {
        sink.put(&self.txn.0.to_le_bytes());
        sink.put(&self.prev.0.to_le_bytes());
        sink.put(self.payload);
    }
}

/// Borrowed `Update` whose payload is given in parts, written one after the other (so that a
/// caller need not first gather them into one buffer).
pub(crate) struct UpdatePartsView<'a> {
    pub txn: TxnId,
    pub prev: Lsn,
    pub parts: &'a [&'a [u8]],
}

impl Encode for UpdatePartsView<'_> {
    fn kind(&self) -> RecordKind {
        RecordKind::Update
    }
    fn body_len(&self) -> usize {
        16 + self.parts.iter().map(|p| p.len()).sum::<usize>()
    }
    #[inline]
    fn write_body<S: Sink>(&self, sink: &mut S) {
        sink.put(&self.txn.0.to_le_bytes());
        sink.put(&self.prev.0.to_le_bytes());
        for part in self.parts {
            sink.put(part);
        }
    }
}

/// Borrowed `Compensation`.
pub(crate) struct CompensationView<'a> {
    pub txn: TxnId,
    pub prev: Lsn,
    pub undo_next: Lsn,
    pub payload: &'a [u8],
}

impl Encode for CompensationView<'_> {
    fn kind(&self) -> RecordKind {
        RecordKind::Compensation
    }
    fn body_len(&self) -> usize {
        24 + self.payload.len()
    }
    #[inline]
    fn write_body<S: Sink>(&self, sink: &mut S) {
        sink.put(&self.txn.0.to_le_bytes());
        sink.put(&self.prev.0.to_le_bytes());
        sink.put(&self.undo_next.0.to_le_bytes());
        sink.put(self.payload);
    }
}

/// `Commit`, `Abort` or `End`: a transaction id and the previous LSN.
pub(crate) struct TxnMarkView {
    pub kind: RecordKind,
    pub txn: TxnId,
    pub prev: Lsn,
}

impl Encode for TxnMarkView {
    fn kind(&self) -> RecordKind {
        self.kind
    }
    fn body_len(&self) -> usize {
        16
    }
    #[inline]
    fn write_body<S: Sink>(&self, sink: &mut S) {
        sink.put(&self.txn.0.to_le_bytes());
        sink.put(&self.prev.0.to_le_bytes());
    }
}

/// Page redo straight from the buffer pool's borrowed ranges.
pub(crate) struct PageRedoView<'a>(pub &'a [PageRedo<'a>]);

impl Encode for PageRedoView<'_> {
    fn kind(&self) -> RecordKind {
        RecordKind::PageRedo
    }
    fn body_len(&self) -> usize {
        assert!(
            self.0.len() <= u16::MAX as usize,
            "too many pages in one redo record"
        );
        let mut len = 2;
        for page in self.0 {
            assert!(
                page.ranges.len() <= u16::MAX as usize,
                "too many ranges for one page"
            );
            len += 10;
            for range in page.ranges {
                assert!(
                    range.bytes.len() <= u16::MAX as usize,
                    "redo range too long"
                );
                len += 4 + range.bytes.len();
            }
        }
        len
    }
    fn write_body<S: Sink>(&self, sink: &mut S) {
        sink.put(&(self.0.len() as u16).to_le_bytes());
        for page in self.0 {
            sink.put(&page_field(page.page, page.zeroed));
            sink.put(&(page.ranges.len() as u16).to_le_bytes());
            for range in page.ranges {
                sink.put(&range.offset.to_le_bytes());
                sink.put(&(range.bytes.len() as u16).to_le_bytes());
                sink.put(range.bytes);
            }
        }
    }
}

/// One page's redo straight from a write guard: the ranges `[start, end)` of the page image.
/// Encodes exactly as a [`PageRedoView`] of one page with those ranges.
pub(crate) struct PageRangesView<'a> {
    pub page: PageId,
    pub zeroed: bool,
    pub image: &'a [u8],
    pub ranges: &'a [(u32, u32)],
}

impl Encode for PageRangesView<'_> {
    fn kind(&self) -> RecordKind {
        RecordKind::PageRedo
    }
    fn body_len(&self) -> usize {
        assert!(
            self.ranges.len() <= u16::MAX as usize,
            "too many ranges for one page"
        );
        let mut len = 2 + 10;
        for &(start, end) in self.ranges {
            let bytes = (end - start) as usize;
            assert!(bytes <= u16::MAX as usize, "redo range too long");
            len += 4 + bytes;
        }
        len
    }
    #[inline]
    fn write_body<S: Sink>(&self, sink: &mut S) {
        sink.put(&1u16.to_le_bytes());
        sink.put(&page_field(self.page, self.zeroed));
        sink.put(&(self.ranges.len() as u16).to_le_bytes());
        for &(start, end) in self.ranges {
            let mut head = [0u8; 4];
            head[..2].copy_from_slice(&(start as u16).to_le_bytes());
            head[2..].copy_from_slice(&((end - start) as u16).to_le_bytes());
            sink.put(&head);
            sink.put(&self.image[start as usize..end as usize]);
        }
    }
}

impl Encode for LogRecord {
    fn kind(&self) -> RecordKind {
        LogRecord::kind(self)
    }

    fn body_len(&self) -> usize {
        match self {
            LogRecord::PageRedo { pages } => {
                assert!(
                    pages.len() <= u16::MAX as usize,
                    "too many pages in one redo record"
                );
                let mut len = 2;
                for page in pages {
                    assert!(page.ranges.len() <= u16::MAX as usize, "too many ranges");
                    len += 10;
                    for (_, bytes) in &page.ranges {
                        assert!(bytes.len() <= u16::MAX as usize, "redo range too long");
                        len += 4 + bytes.len();
                    }
                }
                len
            }
            LogRecord::Update { payload, .. } => 16 + payload.len(),
            LogRecord::Compensation { payload, .. } => 24 + payload.len(),
            LogRecord::Commit { .. } | LogRecord::Abort { .. } | LogRecord::End { .. } => 16,
            LogRecord::CheckpointBegin => 0,
            LogRecord::CheckpointEnd {
                active,
                dirty,
                meta,
                ..
            } => {
                assert!(active.len() <= u32::MAX as usize && dirty.len() <= u32::MAX as usize);
                8 + 4
                    + active.len() * ACTIVE_ENTRY_SIZE
                    + 4
                    + dirty.len() * DIRTY_ENTRY_SIZE
                    + meta.len()
            }
            LogRecord::Padding { frame } => (*frame as usize).saturating_sub(FRAME_HEADER_SIZE),
        }
    }

    fn write_body<S: Sink>(&self, sink: &mut S) {
        match self {
            LogRecord::PageRedo { pages } => {
                sink.put(&(pages.len() as u16).to_le_bytes());
                for page in pages {
                    sink.put(&page_field(page.page, page.zeroed));
                    sink.put(&(page.ranges.len() as u16).to_le_bytes());
                    for (offset, bytes) in &page.ranges {
                        sink.put(&offset.to_le_bytes());
                        sink.put(&(bytes.len() as u16).to_le_bytes());
                        sink.put(bytes);
                    }
                }
            }
            LogRecord::Update { txn, prev, payload } => UpdateView {
                txn: *txn,
                prev: *prev,
                payload,
            }
            .write_body(sink),
            LogRecord::Compensation {
                txn,
                prev,
                undo_next,
                payload,
            } => CompensationView {
                txn: *txn,
                prev: *prev,
                undo_next: *undo_next,
                payload,
            }
            .write_body(sink),
            LogRecord::Commit { txn, prev }
            | LogRecord::Abort { txn, prev }
            | LogRecord::End { txn, prev } => TxnMarkView {
                kind: LogRecord::kind(self),
                txn: *txn,
                prev: *prev,
            }
            .write_body(sink),
            LogRecord::CheckpointBegin => {}
            LogRecord::Padding { .. } => {
                const PAD: [u8; 256] = [PAD_BYTE; 256];
                let mut left = self.body_len();
                while left > 0 {
                    let n = left.min(PAD.len());
                    sink.put(&PAD[..n]);
                    left -= n;
                }
            }
            LogRecord::CheckpointEnd {
                begin,
                active,
                dirty,
                meta,
            } => {
                sink.put(&begin.0.to_le_bytes());
                sink.put(&(active.len() as u32).to_le_bytes());
                for a in active {
                    sink.put(&a.txn.0.to_le_bytes());
                    sink.put(&a.last_lsn.0.to_le_bytes());
                    sink.put(&[a.committed as u8]);
                }
                sink.put(&(dirty.len() as u32).to_le_bytes());
                for (page, rec_lsn) in dirty {
                    sink.put(&page.0.to_le_bytes());
                    sink.put(&rec_lsn.0.to_le_bytes());
                }
                sink.put(meta);
            }
        }
    }
}

const ACTIVE_ENTRY_SIZE: usize = 17;
const DIRTY_ENTRY_SIZE: usize = 16;

// ---------------------------------------------------------------------------------------------
// Decoding

/// What the bytes at a record's position hold, judged by the frame alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameCheck {
    /// A whole frame of this length, checksum verified.
    Complete(usize),
    /// The bytes end before the frame does; this many bytes are needed to judge it.
    Incomplete(usize),
    /// Not a frame: bad length or checksum.
    Bad(&'static str),
}

/// Judges the frame at the start of `bytes` without decoding its body.
pub(crate) fn check_frame(bytes: &[u8]) -> FrameCheck {
    if bytes.len() < OFFSET_KIND {
        return FrameCheck::Incomplete(OFFSET_KIND);
    }
    let len = read_u32(bytes, OFFSET_LEN) as usize;
    if len < FRAME_HEADER_SIZE {
        return FrameCheck::Bad("length shorter than a frame header");
    }
    if len > MAX_RECORD_BYTES {
        return FrameCheck::Bad("length larger than the largest record");
    }
    if bytes.len() < len {
        return FrameCheck::Incomplete(len);
    }
    let stored = read_u32(bytes, OFFSET_CRC);
    let crc = crc32c_append(
        crc32c(&bytes[OFFSET_LEN..OFFSET_CRC]),
        &bytes[OFFSET_KIND..len],
    );
    if crc != stored {
        return FrameCheck::Bad("checksum mismatch");
    }
    FrameCheck::Complete(len)
}

/// Bytes of a frame's start that [`plausible_frame_start`] looks at, when the frame has them.
pub(crate) const PROBE_BYTES: usize = FRAME_HEADER_SIZE + 24;

/// Page ids a plausible page redo names: below 2^40 (8 EiB of 8 KiB pages). Used only to
/// search damaged bytes for the next frame, never to judge a frame read in sequence.
const PLAUSIBLE_PAGE_IDS: u64 = 1 << 40;

/// Whether the bytes `head` at LSN `lsn` could start an intact frame with `available` bytes
/// from there to the end of the log, judged from its first [`PROBE_BYTES`] (or all of them,
/// if the frame is shorter): a length in range that fits, a known kind with a length that
/// kind can have, and LSN fields that point backwards (see [`refers_backward`]). A cheap
/// filter before [`check_frame`] when searching damaged bytes for the next frame: random bytes
/// pass it about once in 2^40 positions, so the search almost never reads and checksums a
/// frame-length's worth of bytes for nothing (without it, 64 MiB of garbage took minutes).
pub(crate) fn plausible_frame_start(head: &[u8], lsn: Lsn, available: u64) -> bool {
    if head.len() < FRAME_HEADER_SIZE {
        return false;
    }
    let len = read_u32(head, OFFSET_LEN) as usize;
    if !(FRAME_HEADER_SIZE..=MAX_RECORD_BYTES).contains(&len) || len as u64 > available {
        return false;
    }
    let Some(kind) = RecordKind::from_u8(head[OFFSET_KIND]) else {
        return false;
    };
    let body = &head[FRAME_HEADER_SIZE..head.len().min(len)];
    let u64_at = |at: usize| {
        body.get(at..at + 8).map(|b| {
            let mut word = [0u8; 8];
            word.copy_from_slice(b);
            u64::from_le_bytes(word)
        })
    };
    let before = |at: usize| u64_at(at).is_some_and(|l| l < lsn.0);
    match kind {
        RecordKind::CheckpointBegin => len == FRAME_HEADER_SIZE,
        RecordKind::Padding => body.iter().all(|&b| b == PAD_BYTE),
        RecordKind::Commit | RecordKind::Abort | RecordKind::End => {
            len == FRAME_HEADER_SIZE + 16 && before(8)
        }
        RecordKind::Update => before(8),
        RecordKind::Compensation => before(8) && before(16),
        RecordKind::CheckpointEnd => before(0),
        RecordKind::PageRedo => {
            let pages = body
                .get(..2)
                .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
            let page = u64_at(2).map(|p| p & !PAGE_ZEROED);
            pages > 0 && page.is_some_and(|p| p < PLAUSIBLE_PAGE_IDS)
        }
    }
}

/// Whether every LSN a record at `lsn` names lies before it, as in any record the log manager
/// wrote (a transaction's `prev` and `undo_next`, a checkpoint end's `begin`). Frames do not
/// hold their own LSN, so this is how a frame found past damaged bytes is checked to fit the
/// log's sequence, beyond its checksum.
pub(crate) fn refers_backward(record: &LogRecord, lsn: Lsn) -> bool {
    match record {
        LogRecord::Update { prev, .. }
        | LogRecord::Commit { prev, .. }
        | LogRecord::Abort { prev, .. }
        | LogRecord::End { prev, .. } => *prev < lsn,
        LogRecord::Compensation {
            prev, undo_next, ..
        } => *prev < lsn && *undo_next < lsn,
        LogRecord::CheckpointEnd { begin, .. } => *begin < lsn,
        LogRecord::PageRedo { .. } | LogRecord::CheckpointBegin | LogRecord::Padding { .. } => true,
    }
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

/// Decodes a frame that [`check_frame`] found complete (`frame` is exactly the frame).
pub(crate) fn decode_checked_frame(frame: &[u8], lsn: Lsn) -> WalResult<LogRecord> {
    let kind = RecordKind::from_u8(frame[OFFSET_KIND]).ok_or(WalError::Corrupt {
        lsn,
        reason: "unknown record kind",
    })?;
    decode_body(kind, &frame[FRAME_HEADER_SIZE..])
        .map_err(|reason| WalError::Corrupt { lsn, reason })
}

/// Reads integers and slices from a body, failing instead of running past its end.
struct Reader<'a> {
    bytes: &'a [u8],
}

const TRUNCATED: &str = "body shorter than its fields";

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.bytes.len() < n {
            return Err(TRUNCATED);
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, &'static str> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, &'static str> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, &'static str> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn lsn(&mut self) -> Result<Lsn, &'static str> {
        self.u64().map(Lsn)
    }
    fn txn(&mut self) -> Result<TxnId, &'static str> {
        self.u64().map(TxnId)
    }
    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.bytes)
    }
    fn finish(&self) -> Result<(), &'static str> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err("trailing bytes after the body")
        }
    }
    /// Checks that `count` entries of `size` bytes can still follow, before sizing a `Vec`.
    fn check_count(&self, count: usize, size: usize) -> Result<(), &'static str> {
        match count.checked_mul(size) {
            Some(n) if n <= self.bytes.len() => Ok(()),
            _ => Err("entry count larger than the body"),
        }
    }
}

/// Decodes a record body of a known kind. Never panics, whatever the bytes.
pub(crate) fn decode_body(kind: RecordKind, body: &[u8]) -> Result<LogRecord, &'static str> {
    let mut r = Reader { bytes: body };
    let record = match kind {
        RecordKind::PageRedo => {
            let page_count = r.u16()? as usize;
            r.check_count(page_count, 10)?;
            let mut pages = Vec::with_capacity(page_count);
            for _ in 0..page_count {
                let field = r.u64()?;
                let (page, zeroed) = (PageId(field & !PAGE_ZEROED), field & PAGE_ZEROED != 0);
                let range_count = r.u16()? as usize;
                r.check_count(range_count, 4)?;
                let mut ranges = Vec::with_capacity(range_count);
                for _ in 0..range_count {
                    let offset = r.u16()?;
                    let len = r.u16()? as usize;
                    ranges.push((offset, r.take(len)?.to_vec()));
                }
                pages.push(PageRedoOwned {
                    page,
                    zeroed,
                    ranges,
                });
            }
            r.finish()?;
            LogRecord::PageRedo { pages }
        }
        RecordKind::Update => LogRecord::Update {
            txn: r.txn()?,
            prev: r.lsn()?,
            payload: r.rest().to_vec(),
        },
        RecordKind::Compensation => LogRecord::Compensation {
            txn: r.txn()?,
            prev: r.lsn()?,
            undo_next: r.lsn()?,
            payload: r.rest().to_vec(),
        },
        RecordKind::Commit | RecordKind::Abort | RecordKind::End => {
            let txn = r.txn()?;
            let prev = r.lsn()?;
            r.finish()?;
            match kind {
                RecordKind::Commit => LogRecord::Commit { txn, prev },
                RecordKind::Abort => LogRecord::Abort { txn, prev },
                _ => LogRecord::End { txn, prev },
            }
        }
        RecordKind::CheckpointBegin => {
            r.finish()?;
            LogRecord::CheckpointBegin
        }
        RecordKind::Padding => {
            if body.iter().any(|&b| b != PAD_BYTE) {
                return Err("padding holds a byte other than the pad byte");
            }
            LogRecord::Padding {
                frame: (FRAME_HEADER_SIZE + body.len()) as u32,
            }
        }
        RecordKind::CheckpointEnd => {
            let begin = r.lsn()?;
            let active_count = r.u32()? as usize;
            r.check_count(active_count, ACTIVE_ENTRY_SIZE)?;
            let mut active = Vec::with_capacity(active_count);
            for _ in 0..active_count {
                let txn = r.txn()?;
                let last_lsn = r.lsn()?;
                let committed = match r.u8()? {
                    0 => false,
                    1 => true,
                    _ => return Err("committed flag neither 0 nor 1"),
                };
                active.push(ActiveTxn {
                    txn,
                    last_lsn,
                    committed,
                });
            }
            let dirty_count = r.u32()? as usize;
            r.check_count(dirty_count, DIRTY_ENTRY_SIZE)?;
            let mut dirty = Vec::with_capacity(dirty_count);
            for _ in 0..dirty_count {
                dirty.push((PageId(r.u64()?), r.lsn()?));
            }
            LogRecord::CheckpointEnd {
                begin,
                active,
                dirty,
                meta: r.rest().to_vec(),
            }
        }
    };
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use storage::page::RedoRange;

    fn arb_lsn() -> impl Strategy<Value = Lsn> {
        any::<u64>().prop_map(Lsn)
    }

    fn arb_txn() -> impl Strategy<Value = TxnId> {
        any::<u64>().prop_map(TxnId)
    }

    fn arb_payload() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..200)
    }

    fn arb_page_redo() -> impl Strategy<Value = PageRedoOwned> {
        (
            0..PAGE_ZEROED,
            any::<bool>(),
            proptest::collection::vec(
                (any::<u16>(), proptest::collection::vec(any::<u8>(), 0..64)),
                0..6,
            ),
        )
            .prop_map(|(page, zeroed, ranges)| PageRedoOwned {
                page: PageId(page),
                zeroed,
                ranges,
            })
    }

    pub(crate) fn arb_record() -> impl Strategy<Value = LogRecord> {
        prop_oneof![
            proptest::collection::vec(arb_page_redo(), 0..4)
                .prop_map(|pages| LogRecord::PageRedo { pages }),
            (arb_txn(), arb_lsn(), arb_payload())
                .prop_map(|(txn, prev, payload)| LogRecord::Update { txn, prev, payload }),
            (arb_txn(), arb_lsn(), arb_lsn(), arb_payload()).prop_map(
                |(txn, prev, undo_next, payload)| LogRecord::Compensation {
                    txn,
                    prev,
                    undo_next,
                    payload
                }
            ),
            (arb_txn(), arb_lsn()).prop_map(|(txn, prev)| LogRecord::Commit { txn, prev }),
            (arb_txn(), arb_lsn()).prop_map(|(txn, prev)| LogRecord::Abort { txn, prev }),
            (arb_txn(), arb_lsn()).prop_map(|(txn, prev)| LogRecord::End { txn, prev }),
            Just(LogRecord::CheckpointBegin),
            (0u32..2000).prop_map(|body| LogRecord::Padding {
                frame: FRAME_HEADER_SIZE as u32 + body
            }),
            (
                arb_lsn(),
                proptest::collection::vec(
                    (arb_txn(), arb_lsn(), any::<bool>()).prop_map(|(txn, last_lsn, committed)| {
                        ActiveTxn {
                            txn,
                            last_lsn,
                            committed,
                        }
                    }),
                    0..8
                ),
                proptest::collection::vec((any::<u64>().prop_map(PageId), arb_lsn()), 0..8),
                arb_payload(),
            )
                .prop_map(|(begin, active, dirty, meta)| LogRecord::CheckpointEnd {
                    begin,
                    active,
                    dirty,
                    meta
                }),
        ]
    }

    proptest! {
        #[test]
        fn round_trip_every_kind(record in arb_record()) {
            let mut bytes = Vec::new();
            record.encode(&mut bytes);
            prop_assert_eq!(bytes.len(), record.encoded_len());
            // Trailing bytes after the frame belong to the next record and are left alone.
            bytes.extend_from_slice(&[0xAB; 5]);
            let (decoded, len) = LogRecord::decode(&bytes, Lsn(16)).unwrap();
            prop_assert_eq!(len, record.encoded_len());
            prop_assert_eq!(decoded, record);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = LogRecord::decode(&bytes, Lsn(16));
            // Bodies behind a valid checksum are judged by the body decoder alone.
            for kind in 1..=8u8 {
                let _ = decode_body(RecordKind::from_u8(kind).unwrap(), &bytes);
            }
        }

        #[test]
        fn mutated_records_are_rejected_or_decode(
            record in arb_record(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), 1..=255u8), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = Vec::new();
            record.encode(&mut bytes);
            let mut mutated = bytes.clone();
            for (at, mask) in &flips {
                let i = at.index(mutated.len());
                mutated[i] ^= mask;
            }
            // A flipped bit anywhere in the frame is caught by the checksum or the length check
            // (two flips of one byte may cancel out).
            if mutated != bytes {
                prop_assert!(LogRecord::decode(&mutated, Lsn(16)).is_err());
            }
            // The body decoder on its own (as if the checksum had matched) errs or decodes.
            let _ = decode_body(record.kind(), &mutated[FRAME_HEADER_SIZE.min(mutated.len())..]);
            // Any strict prefix of a frame is incomplete, never a record.
            let cut = cut.index(bytes.len());
            prop_assert!(LogRecord::decode(&bytes[..cut], Lsn(16)).is_err());
        }
    }

    #[test]
    fn padding_over_used_bytes_decodes_as_padding_and_only_with_pad_bytes() {
        for len in [FRAME_HEADER_SIZE, FRAME_HEADER_SIZE + 1, 300] {
            // Bytes an earlier use of a region left behind.
            let mut frame = vec![0xA5u8; len];
            write_padding(&mut frame);
            assert_eq!(check_frame(&frame), FrameCheck::Complete(len));
            let (record, read) = LogRecord::decode(&frame, Lsn(16)).unwrap();
            assert_eq!(record, LogRecord::Padding { frame: len as u32 });
            assert_eq!(read, len);
            assert!(plausible_frame_start(&frame, Lsn(16), len as u64));
            let mut encoded = Vec::new();
            record.encode(&mut encoded);
            assert_eq!(encoded, frame, "the owned form encodes the same frame");
        }
        // Another byte under a valid checksum: not canonical, refused.
        let mut frame = vec![0u8; 40];
        write_padding(&mut frame);
        frame[20] = 0;
        let crc = crc32c_append(
            crc32c(&frame[OFFSET_LEN..OFFSET_CRC]),
            &frame[OFFSET_KIND..],
        );
        frame[OFFSET_CRC..OFFSET_KIND].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(check_frame(&frame), FrameCheck::Complete(40));
        assert!(LogRecord::decode(&frame, Lsn(16)).is_err());
    }

    #[test]
    fn borrowed_views_encode_like_owned_records() {
        let payload = b"undo me".to_vec();
        let owned = LogRecord::Update {
            txn: TxnId(7),
            prev: Lsn(99),
            payload: payload.clone(),
        };
        let view = UpdateView {
            txn: TxnId(7),
            prev: Lsn(99),
            payload: &payload,
        };
        let mut a = Vec::new();
        owned.encode(&mut a);
        let mut b = Vec::new();
        let (len, crc) = frame_len_and_crc(&view);
        write_frame(&view, len, crc, &mut b);
        assert_eq!(a, b);

        let ranges = [
            RedoRange {
                offset: 24,
                bytes: &[1, 2, 3],
            },
            RedoRange {
                offset: 100,
                bytes: &[],
            },
        ];
        let redo = [PageRedo {
            page: PageId(5),
            zeroed: false,
            ranges: &ranges,
        }];
        let view = PageRedoView(&redo);
        let mut c = Vec::new();
        let (len, crc) = frame_len_and_crc(&view);
        write_frame(&view, len, crc, &mut c);
        let (decoded, _) = LogRecord::decode(&c, Lsn(16)).unwrap();
        assert_eq!(
            decoded,
            LogRecord::PageRedo {
                pages: vec![PageRedoOwned {
                    page: PageId(5),
                    zeroed: false,
                    ranges: vec![(24, vec![1, 2, 3]), (100, vec![])],
                }]
            }
        );
    }

    #[test]
    fn one_pass_encoding_matches_the_two_pass_one() {
        let payload: Vec<u8> = (0..300).map(|i| (i * 7) as u8).collect();
        let update = UpdateView {
            txn: TxnId(3),
            prev: Lsn(1234),
            payload: &payload,
        };
        let two_pass = |e: &dyn Fn(&mut Vec<u8>)| {
            let mut out = vec![0xEE];
            e(&mut out);
            out
        };
        let a = two_pass(&|out| {
            let (len, crc) = frame_len_and_crc(&update);
            write_frame(&update, len, crc, out);
        });
        let b = two_pass(&|out| encode_frame(&update, out));
        assert_eq!(a, b);

        // A page's ranges straight from an image encode as the borrowed redo view does.
        let image: Vec<u8> = (0..8192).map(|i| (i % 251) as u8).collect();
        let pairs = [(24u32, 40u32), (56, 58), (8000, 8192)];
        let ranges: Vec<RedoRange<'_>> = pairs
            .iter()
            .map(|&(s, e)| RedoRange {
                offset: s as u16,
                bytes: &image[s as usize..e as usize],
            })
            .collect();
        let redo = [PageRedo {
            page: PageId(9),
            zeroed: true,
            ranges: &ranges,
        }];
        let a = two_pass(&|out| {
            let view = PageRedoView(&redo);
            let (len, crc) = frame_len_and_crc(&view);
            write_frame(&view, len, crc, out);
        });
        let direct = PageRangesView {
            page: PageId(9),
            zeroed: true,
            image: &image,
            ranges: &pairs,
        };
        let b = two_pass(&|out| encode_frame(&direct, out));
        assert_eq!(a, b);
        let (decoded, len) = LogRecord::decode(&b[1..], Lsn(16)).unwrap();
        assert_eq!(len, b.len() - 1);
        let LogRecord::PageRedo { pages } = decoded else {
            panic!("not a page redo: {decoded:?}");
        };
        assert_eq!(pages[0].ranges[2], (8000, image[8000..].to_vec()));
        assert!(pages[0].zeroed, "the zero-fill flag survives");
        assert_eq!(pages[0].page, PageId(9));
    }

    #[test]
    fn an_update_in_parts_encodes_as_its_parts_joined() {
        let payload: Vec<u8> = (0..300).map(|i| (i * 11) as u8).collect();
        let whole = UpdateView {
            txn: TxnId(5),
            prev: Lsn(4321),
            payload: &payload,
        };
        let mut expected = Vec::new();
        encode_frame(&whole, &mut expected);
        for cut in [0, 1, 19, 299, 300] {
            let (a, b) = payload.split_at(cut);
            for parts in [&[a, b][..], &[a, &[], b][..]] {
                let view = UpdatePartsView {
                    txn: TxnId(5),
                    prev: Lsn(4321),
                    parts,
                };
                assert_eq!(frame_len(&view), expected.len());
                let mut frame = vec![0xAA; expected.len()];
                encode_frame_into(&view, &mut frame);
                assert_eq!(frame, expected, "cut at {cut}");
            }
        }
    }

    #[test]
    fn the_frame_checksum_is_crc32c_of_len_then_kind_and_body() {
        let record = LogRecord::Commit {
            txn: TxnId(0x0102_0304),
            prev: Lsn(77),
        };
        let mut frame = Vec::new();
        record.encode(&mut frame);
        assert_eq!(frame.len(), 25);
        assert_eq!(frame[..4], 25u32.to_le_bytes());
        let mut covered = frame[..4].to_vec();
        covered.extend_from_slice(&frame[8..]);
        assert_eq!(frame[4..8], crate::checksum::crc32c(&covered).to_le_bytes());
        // One flipped bit in the stored checksum, the length or the body is a bad frame.
        for at in [1, 5, 8, 24] {
            let mut damaged = frame.clone();
            damaged[at] ^= 0x04;
            assert!(
                !matches!(check_frame(&damaged), FrameCheck::Complete(_)),
                "flip at {at}"
            );
        }
    }

    #[test]
    fn zeroed_and_short_frames_are_not_records() {
        assert_eq!(
            check_frame(&[0u8; 64]),
            FrameCheck::Bad("length shorter than a frame header")
        );
        assert_eq!(check_frame(&[0u8; 3]), FrameCheck::Incomplete(8));
        let mut bytes = Vec::new();
        LogRecord::CheckpointBegin.encode(&mut bytes);
        assert_eq!(check_frame(&bytes), FrameCheck::Complete(9));
        assert_eq!(check_frame(&bytes[..8]), FrameCheck::Incomplete(9));
    }

    #[test]
    fn non_canonical_bodies_are_rejected() {
        // A commit with one trailing byte.
        let body = [0u8; 17];
        assert!(decode_body(RecordKind::Commit, &body).is_err());
        // A checkpoint claiming four billion active transactions in a tiny body.
        let mut body = vec![0u8; 8];
        body.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            decode_body(RecordKind::CheckpointEnd, &body),
            Err("entry count larger than the body")
        );
    }
}
