//! Pages: identifiers, sizes, the common page header, and the trait through which the log
//! manager sees page changes.
//!
//! Every page starts with the same 24-byte header; the rest belongs to the page's kind
//! (heap, B+-tree node, meta).
//!
//! | offset | size | field      | meaning                                                  |
//! |-------:|-----:|------------|----------------------------------------------------------|
//! | 0      | 4    | checksum   | CRC-32 of bytes 4..page_size, set on write, checked on read |
//! | 4      | 2    | magic      | `0x474C` ("GL"): distinguishes a formatted page          |
//! | 6      | 1    | kind       | [`PageKind`]                                             |
//! | 7      | 1    | device     | which emulated data device the page lives on (0 or 1; see `device`) |
//! | 8      | 8    | page_lsn   | LSN of the last logged change to this page               |
//! | 16     | 8    | page_id    | the page's own id: catches misdirected reads and writes  |
//!
//! A page that is all zeroes has never been written (the file grew past it); it reads as a
//! fresh page, not as corruption.

use std::fmt;

/// Size of the common header at the start of every page.
pub const PAGE_HEADER_SIZE: usize = 24;
/// Magic number stored at offset 4 of every formatted page.
pub const PAGE_MAGIC: u16 = 0x474C;

pub const OFFSET_CHECKSUM: usize = 0;
pub const OFFSET_MAGIC: usize = 4;
pub const OFFSET_KIND: usize = 6;
/// The device byte: which emulated data device serves the page ([`crate::device`]); set when
/// the page is allocated, by the structure it belongs to.
pub const OFFSET_DEVICE: usize = 7;
pub const OFFSET_LSN: usize = 8;
pub const OFFSET_PAGE_ID: usize = 16;

const _: () = assert!(OFFSET_PAGE_ID + 8 == PAGE_HEADER_SIZE);

/// Identifies a page in the page file. Page 0 is the meta page reserved for the layer above.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PageId(pub u64);

impl PageId {
    /// The page the engine keeps its catalog root in.
    pub const META: PageId = PageId(0);
}

impl fmt::Display for PageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Log sequence number: the byte offset of a log record in the log. `Lsn(0)` means "none".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

impl Lsn {
    pub const NONE: Lsn = Lsn(0);
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lsn:{}", self.0)
    }
}

/// Page size of a database, fixed when it is created (the ladder's `small-page` rung picks 32 KiB).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PageSize {
    #[default]
    Kib8,
    Kib32,
}

impl PageSize {
    pub const fn bytes(self) -> usize {
        match self {
            PageSize::Kib8 => 8 * 1024,
            PageSize::Kib32 => 32 * 1024,
        }
    }

    pub fn from_bytes(bytes: usize) -> Option<PageSize> {
        match bytes {
            8192 => Some(PageSize::Kib8),
            32768 => Some(PageSize::Kib32),
            _ => None,
        }
    }
}

/// What a page holds; byte 6 of the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PageKind {
    /// Never formatted (all zeroes).
    Free = 0,
    Meta = 1,
    Heap = 2,
    BTreeLeaf = 3,
    BTreeInner = 4,
}

impl PageKind {
    pub fn from_u8(b: u8) -> Option<PageKind> {
        Some(match b {
            0 => PageKind::Free,
            1 => PageKind::Meta,
            2 => PageKind::Heap,
            3 => PageKind::BTreeLeaf,
            4 => PageKind::BTreeInner,
            _ => return None,
        })
    }
}

/// One changed byte range of a page: `bytes` now stand at `offset`.
#[derive(Clone, Copy, Debug)]
pub struct RedoRange<'a> {
    pub offset: u16,
    pub bytes: &'a [u8],
}

/// The changes made to one page under one write guard (or one group of guards).
#[derive(Clone, Copy, Debug)]
pub struct PageRedo<'a> {
    pub page: PageId,
    /// The page was zero-filled first (a fresh allocation): redo zeroes it, then writes the
    /// ranges, so the log carries no page of zeroes.
    pub zeroed: bool,
    pub ranges: &'a [RedoRange<'a>],
}

/// How the buffer pool talks to the log manager, without depending on it.
///
/// * **Redo**: when a write guard that changed its page is released, the pool hands the changed
///   byte ranges (their new contents) to [`PageLog::log_redo`] and stamps the returned LSN into
///   the page header. Changes that must reach the log atomically (a B+-tree split touches
///   several pages) are handed over together, as one record.
/// * **Write-ahead rule**: before a dirty page is written to the page store, the pool calls
///   [`PageLog::flush_to`] with the page's LSN, which returns only once the log is durable up to
///   that LSN.
///
/// With logging switched off the pool has no `PageLog` at all and tracks no ranges.
pub trait PageLog: Send + Sync {
    /// Appends one redo record holding every given page change; returns its LSN.
    fn log_redo(&self, pages: &[PageRedo<'_>]) -> Lsn;

    /// Appends the redo record of one page: the byte ranges `[start, end)` of `image` (sorted,
    /// disjoint, each inside the page and at most `u16::MAX` long) now stand in the page. The
    /// same record as [`PageLog::log_redo`] with one [`PageRedo`]; this is the path of every
    /// single write guard, so a log may encode it straight from the ranges. The default builds
    /// the [`RedoRange`] list (on the stack when short) and calls `log_redo`. `zeroed` as in
    /// [`PageRedo::zeroed`].
    fn log_page_redo(
        &self,
        page: PageId,
        zeroed: bool,
        image: &[u8],
        ranges: &[(u32, u32)],
    ) -> Lsn {
        const INLINE: usize = 16;
        let redo = |r: &(u32, u32)| RedoRange {
            offset: r.0 as u16,
            bytes: &image[r.0 as usize..r.1 as usize],
        };
        if ranges.len() <= INLINE {
            let mut inline = [RedoRange {
                offset: 0,
                bytes: &[],
            }; INLINE];
            for (slot, r) in inline.iter_mut().zip(ranges) {
                *slot = redo(r);
            }
            let ranges = &inline[..ranges.len()];
            self.log_redo(&[PageRedo {
                page,
                zeroed,
                ranges,
            }])
        } else {
            let ranges: Vec<RedoRange<'_>> = ranges.iter().map(redo).collect();
            self.log_redo(&[PageRedo {
                page,
                zeroed,
                ranges: &ranges,
            }])
        }
    }
    /// Makes the log durable up to and including `lsn` (the write-ahead rule).
    fn flush_to(&self, lsn: Lsn) -> crate::StorageResult<()>;
}

/// Computes the checksum of a page image (bytes 4.. of the page).
pub fn page_checksum(page: &[u8]) -> u32 {
    crc32fast::hash(&page[OFFSET_MAGIC..])
}

/// Reads the LSN stamped in a page header.
pub fn page_lsn(page: &[u8]) -> Lsn {
    Lsn(u64::from_le_bytes(
        page[OFFSET_LSN..OFFSET_LSN + 8].try_into().unwrap(),
    ))
}
