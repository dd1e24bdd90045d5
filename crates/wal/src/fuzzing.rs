//! Entry points for the fuzz targets in `fuzz/` (not part of the log's API).
//!
//! Log frames decode through the public [`LogRecord::decode`](crate::LogRecord::decode) and
//! whole logs through [`LogManager::open`](crate::LogManager::open); only the master record's
//! decoder is private, and is reached here.

use storage::Lsn;

use crate::error::WalResult;

/// Decodes a master record as opening a log does: its checkpoint's begin (if any) and the
/// log's start.
pub fn decode_master(bytes: &[u8]) -> WalResult<(Option<Lsn>, Lsn)> {
    let master = crate::log::decode_master(bytes)?;
    Ok((master.checkpoint, master.start))
}
