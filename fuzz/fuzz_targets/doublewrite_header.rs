//! A doublewrite file's batch header, decoded as an open's restore does before it trusts the
//! page ids it names. Input: a control byte, then the header's bytes. Control bit 0 fixes its
//! checksum up (after as many page ids as the count names, if the input holds them).
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::doublewrite::decode_header;

fuzz_target!(|data: &[u8]| {
    let Some((&control, header)) = data.split_first() else {
        return;
    };
    let mut bytes = header.to_vec();
    if control & 1 != 0 && bytes.len() >= 20 {
        let count = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
        let end = 20usize.saturating_add(count.saturating_mul(8));
        if end + 4 <= bytes.len() {
            let crc = crc32fast::hash(&bytes[..end]);
            bytes[end..end + 4].copy_from_slice(&crc.to_le_bytes());
        }
    }
    // What one 8 KiB header block can name.
    let max = (8192 - 24) / 8;
    if let Some(batch) = decode_header(&bytes, max) {
        // An accepted header names no more pages than allowed, and as many as its count.
        assert!(batch.pages.len() <= max);
        let count = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
        assert_eq!(batch.pages.len(), count);
        assert!(bytes.len() >= 20 + 8 * count + 4);
    }
});
