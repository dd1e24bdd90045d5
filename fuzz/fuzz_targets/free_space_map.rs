//! A saved free-space map (`freespace.map`), decoded as an open does before it takes the free
//! space of the pages it names. Input: a control byte, then the file's bytes. Control bit 0
//! fixes the checksum up, so that the decoder's other checks are reached.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::heap::SavedFreeSpace;

fuzz_target!(|data: &[u8]| {
    let Some((&control, file)) = data.split_first() else {
        return;
    };
    let mut bytes = file.to_vec();
    if control & 1 != 0 && bytes.len() >= 4 {
        let end = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..end]);
        bytes[end..].copy_from_slice(&crc.to_le_bytes());
    }
    if let Ok(saved) = SavedFreeSpace::decode(&bytes) {
        // An accepted map names each heap once, its pages strictly ascending, none with more
        // room than a page has; and it reads back as itself once written again.
        for (i, heap) in saved.heaps.iter().enumerate() {
            assert!(saved.heaps[..i].iter().all(|h| h.first != heap.first));
            assert!(heap.pages.windows(2).all(|w| w[0].0 < w[1].0));
            assert!(heap
                .pages
                .iter()
                .all(|&(_, free)| u32::from(free) <= saved.page_size));
        }
        assert_eq!(SavedFreeSpace::decode(&saved.encode()).as_ref(), Ok(&saved));
    }
});
