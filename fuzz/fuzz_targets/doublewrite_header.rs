//! A doublewrite file's batch header, decoded as an open's restore does before it trusts the
//! page ids and the ring it names. Input: a control byte, then the header's bytes. Control
//! bit 0 fixes its checksum up (after as many page ids as the count names, if the input holds
//! them).
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::doublewrite::{decode_header, max_batch_pages, MAX_SLOTS};

fuzz_target!(|data: &[u8]| {
    let Some((&control, header)) = data.split_first() else {
        return;
    };
    let mut bytes = header.to_vec();
    // Where each format keeps its count of page ids: the ring's with its last synced batch
    // (`GLASSDW3`) at 32, the ring's before it (`GLASSDW2`) at 24, the one-batch file's
    // (`GLASSDW1`) at 16.
    let count_at = |bytes: &[u8]| {
        if bytes.starts_with(b"GLASSDW1") {
            16
        } else if bytes.starts_with(b"GLASSDW2") {
            24
        } else {
            32
        }
    };
    let at = count_at(&bytes);
    if control & 1 != 0 && bytes.len() >= at + 4 {
        let count = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let end = (at + 4).saturating_add(count.saturating_mul(8));
        if end + 4 <= bytes.len() {
            let crc = crc32fast::hash(&bytes[..end]);
            bytes[end..end + 4].copy_from_slice(&crc.to_le_bytes());
        }
    }
    // What one 8 KiB header block can name.
    let max = max_batch_pages(8192);
    if let Some(batch) = decode_header(&bytes, max) {
        // An accepted header names no more pages than its slot holds, nor slots larger than
        // allowed, and as many pages as its count; its slots lie within what a restore reads.
        assert!(batch.pages.len() <= batch.layout.slot_pages);
        assert!(batch.layout.slot_pages <= max);
        assert!((1..=MAX_SLOTS).contains(&batch.layout.slots));
        // A batch is written before the page file can have synced it.
        assert!(batch.synced == 0 || batch.synced < batch.sequence);
        let count = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        assert_eq!(batch.pages.len(), count);
        assert!(bytes.len() >= at + 4 + 8 * count + 4);
        let last = batch.layout.slots - 1;
        assert!(
            batch
                .layout
                .page_offset(last, batch.layout.slot_pages - 1, 8192)
                > batch.layout.header_offset(last, 8192)
        );
    }
});
