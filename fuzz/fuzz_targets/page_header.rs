//! The page header check every page read goes through: magic, checksum, the page's own id,
//! its kind. Input: a control byte, then the page image (cut or padded to the page size).
//! Control bit 0 fixes the checksum up (so mutations get past it), bit 1 reads the page as
//! the id its header names, bit 2 picks 32 KiB pages.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::fuzzing::verify_page;
use storage::page::{
    page_checksum, page_lsn, PageKind, OFFSET_KIND, OFFSET_MAGIC, OFFSET_PAGE_ID, PAGE_MAGIC,
};
use storage::PageId;

fuzz_target!(|data: &[u8]| {
    let Some((&control, image)) = data.split_first() else {
        return;
    };
    let size = if control & 4 != 0 { 32768 } else { 8192 };
    let mut page = glass_fuzz::page_image(image, size);
    if control & 1 != 0 {
        glass_fuzz::fix_page_checksum(&mut page);
    }
    let stored_id =
        u64::from_le_bytes(page[OFFSET_PAGE_ID..OFFSET_PAGE_ID + 8].try_into().unwrap());
    let id = if control & 2 != 0 {
        PageId(stored_id)
    } else {
        PageId(u64::from(control >> 3))
    };
    match verify_page(id, &page) {
        Ok(()) => {
            // Accepted: a never-written page, or one whose every header field holds.
            if page.iter().any(|&b| b != 0) {
                let magic = u16::from_le_bytes([page[OFFSET_MAGIC], page[OFFSET_MAGIC + 1]]);
                assert_eq!(magic, PAGE_MAGIC);
                let stored = u32::from_le_bytes(page[..4].try_into().unwrap());
                assert_eq!(stored, page_checksum(&page));
                assert_eq!(stored_id, id.0);
                assert!(PageKind::from_u8(page[OFFSET_KIND]).is_some());
            }
            let _ = page_lsn(&page);
        }
        Err(e) => {
            let message = e.to_string();
            assert!(message.contains(&id.to_string()), "{message}");
        }
    }
});
