//! Heap files: unordered collections of variable-length records on slotted pages.
//!
//! * [`page`]: the slotted page layout (offset/size tables there) and its operations.
//! * [`file`](mod@file): [`HeapFile`], a chain of heap pages with an in-memory free-space map.
//! * [`saved`]: the free-space maps a checkpoint saves, so that an open need not rebuild them
//!   by reading every heap page.
//!
//! A record is named by a [`RecordId`] (page, slot) that stays valid for its lifetime: a record
//! that outgrows its page moves, leaving a forwarding stub behind.

pub mod file;
pub(crate) mod page;
pub mod saved;

pub use file::{HeapCheck, HeapFile, RecordWriteGuard};
pub use saved::{SavedFreeSpace, SavedHeap, FREE_SPACE_FILE};

use crate::page::PageId;
use std::fmt;

/// Names a record: the page it lives on and its slot there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordId {
    pub page: PageId,
    pub slot: u16,
}

impl RecordId {
    /// Packs the id into a `u64`: `page << 16 | slot` (page ids below 2^48).
    #[inline]
    pub fn to_u64(self) -> u64 {
        (self.page.0 << 16) | self.slot as u64
    }

    #[inline]
    pub fn from_u64(v: u64) -> RecordId {
        RecordId {
            page: PageId(v >> 16),
            slot: v as u16,
        }
    }
}

impl fmt::Display for RecordId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.page, self.slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_ids_pack_and_unpack() {
        let rid = RecordId {
            page: PageId(0xABCD_1234),
            slot: 0xFFFE,
        };
        assert_eq!(rid.to_u64(), 0xABCD_1234_FFFE);
        assert_eq!(RecordId::from_u64(rid.to_u64()), rid);
        assert_eq!(rid.to_string(), "#2882343476.65534");
    }
}
