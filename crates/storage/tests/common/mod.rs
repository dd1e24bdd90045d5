//! Helpers shared by the storage model tests.

use std::ops::Bound;

/// Whether `key` is within the low bound of a scan whose bounds may be key prefixes
/// (`Excluded(p)` skips every key starting with `p`), as the index scans read them.
pub fn in_low(key: &[u8], lo: &Bound<Vec<u8>>) -> bool {
    match lo {
        Bound::Included(p) => key >= &p[..],
        Bound::Excluded(p) => key > &p[..] && !key.starts_with(p),
        Bound::Unbounded => true,
    }
}

/// Whether `key` is within the high bound (`Included(p)` takes every key starting with `p`).
pub fn in_high(key: &[u8], hi: &Bound<Vec<u8>>) -> bool {
    match hi {
        Bound::Included(p) => key <= &p[..] || key.starts_with(p),
        Bound::Excluded(p) => key < &p[..],
        Bound::Unbounded => true,
    }
}
