//! Helpers shared by the fuzz targets in `fuzz_targets/`: turning fuzzer input into the byte
//! images the decoders read, and fixing up checksums so that mutated inputs reach the parsing
//! behind them instead of stopping at the checksum.
//!
//! Each target is one decoder of bytes from disk or the network; none may panic or loop on any
//! input:
//!
//! | target          | decoder                                                            |
//! |-----------------|--------------------------------------------------------------------|
//! | `page_header`   | the common page header check of every page read (`storage`)        |
//! | `heap_page`     | slotted heap page: slots, records, stubs, structure check          |
//! | `btree_node`    | B+-tree node: header, keys, values, children, searches, edits      |
//! | `btree_tree`    | a B+-tree of a few pages through the pool: lookups, scans, insert   |
//! | `log_record`    | one log frame: frame check and body decode (`wal::record`)         |
//! | `log_master`    | the log's master record                                            |
//! | `log_open`      | a whole log and master record, as opening a database scans them    |
//! | `catalog`       | `catalog.json` (`engine::catalog::parse_catalog`)                  |
//! | `load_manifest` | `glass-load.json` (`bench::manifest::LoadManifest::parse`)          |
//! | `ack_log`       | the ack log of acknowledged commits (`bench::acklog`)              |
//! | `check_json`    | `glass check --json`'s file, as `glass crash` reads it back        |
//! | `doublewrite_header` | a doublewrite file's batch header (`storage::doublewrite`)    |
//! | `wire_frame`    | the wire protocol: frames, requests and responses (`protocol`)     |
//! | `guest_frame`   | the procedure boundary's messages, host and guest (`protocol`)     |
//! | `shm_region`    | a shared-memory region: header, slot lengths, the frames in slots  |
//!
//! Seeds from a real tiny database come from `cargo run --example seeds` (see there).

use storage::page::{page_checksum, OFFSET_CHECKSUM, OFFSET_MAGIC};

/// A page image of `size` bytes: `bytes`, cut or padded with zeroes.
pub fn page_image(bytes: &[u8], size: usize) -> Vec<u8> {
    let mut page = vec![0u8; size];
    let n = bytes.len().min(size);
    page[..n].copy_from_slice(&bytes[..n]);
    page
}

/// Stores the page's correct checksum in its header.
pub fn fix_page_checksum(page: &mut [u8]) {
    let sum = page_checksum(page);
    page[OFFSET_CHECKSUM..OFFSET_MAGIC].copy_from_slice(&sum.to_le_bytes());
}

/// Page size for an input of `len` bytes: 32 KiB pages for inputs longer than 8 KiB.
pub fn page_size_for(len: usize) -> usize {
    if len > 8192 {
        32768
    } else {
        8192
    }
}

/// Log frame layout (see `wal::record`): `len u32`, `crc u32` over `len` and `kind..len`.
const FRAME_HEADER_SIZE: usize = 9;

/// If `bytes` start with a frame whose length fits, stores its correct CRC-32C; returns the
/// frame's length.
pub fn fix_frame_checksum(bytes: &mut [u8]) -> Option<usize> {
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    if len < FRAME_HEADER_SIZE || len > bytes.len() {
        return None;
    }
    let crc = wal::checksum::crc32c_append(wal::checksum::crc32c(&bytes[..4]), &bytes[8..len]);
    bytes[4..8].copy_from_slice(&crc.to_le_bytes());
    Some(len)
}

/// Fixes the CRC of every frame of a log image from `start` on, as far as frame lengths
/// chain; returns where the last fixed frame ends.
pub fn fix_log_checksums(log: &mut [u8], start: usize) -> usize {
    let mut pos = start;
    while pos < log.len() {
        match fix_frame_checksum(&mut log[pos..]) {
            Some(len) => pos += len,
            None => break,
        }
    }
    pos
}

/// Stores the correct CRC-32C of a 28-byte master record (bytes 24..28 over 0..24).
pub fn fix_master_checksum(master: &mut [u8]) {
    if master.len() >= 28 {
        let crc = wal::checksum::crc32c(&master[..24]);
        master[24..28].copy_from_slice(&crc.to_le_bytes());
    }
}
