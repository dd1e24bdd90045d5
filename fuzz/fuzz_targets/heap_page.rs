//! A slotted heap page, read below the page checksum as the heap file reads it: every slot,
//! each record's bytes, stubs' targets, free space, where an insert would go, and the
//! structural check. Input: the page image (8 KiB, 32 KiB for longer inputs).
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::fuzzing::{check_heap_page, read_heap_page};

fuzz_target!(|data: &[u8]| {
    let page = glass_fuzz::page_image(data, glass_fuzz::page_size_for(data.len()));
    let insert_len = data.first().map_or(0, |&b| b as usize * 4);
    let read = read_heap_page(&page, insert_len);
    if let Ok(used) = check_heap_page(&page) {
        // A page that passes the structural check reads without error, slot for slot.
        let read = read.expect("a page that passes its check reads");
        let slots: Vec<usize> = read.iter().map(|s| s.slot).collect();
        assert_eq!(slots, used);
        for s in &read {
            assert!(s.offset + s.len <= page.len());
        }
    }
});
