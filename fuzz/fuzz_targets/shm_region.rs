//! The shared-memory region as a client maps it and as both sides read its slots
//! (`protocol::shm`): the header's checks in `Region::open`, then every slot's lengths, as
//! another process may have written anything there, bounded by the buffer before any copy,
//! and the frames they delimit decoded as the server decodes a request and a client a
//! response. Input: the region file's bytes.
#![no_main]

use std::sync::atomic::Ordering;

use libfuzzer_sys::fuzz_target;
use protocol::shm::Region;
use protocol::{frame_len, Request, Response, DEFAULT_MAX_FRAME, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    // A file per fuzzing process, in memory where there is a /dev/shm.
    let dir = std::path::Path::new("/dev/shm");
    let dir = if dir.is_dir() {
        dir.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let path = dir.join(format!("glass-fuzz-shm-{}", std::process::id()));
    std::fs::write(&path, data).expect("write the region file");
    let region = Region::open(&path);
    // A mapping outlives its file's name: nothing is left behind.
    let _ = std::fs::remove_file(&path);
    let Ok(region) = region else {
        return;
    };
    let mut bytes = Vec::new();
    for slot in 0..region.slots() {
        for response in [false, true] {
            let len = if response {
                region.response_len(slot)
            } else {
                region.request_len(slot)
            }
            .load(Ordering::Acquire) as usize;
            if !region.read(slot, response, len, &mut bytes) {
                assert!(
                    len > region.buffer(),
                    "a length within the buffer was refused"
                );
                continue;
            }
            assert_eq!(bytes.len(), len);
            if let Ok(Some(total)) = frame_len(&bytes, DEFAULT_MAX_FRAME) {
                if total == bytes.len() {
                    let body = &bytes[HEADER_LEN..];
                    if response {
                        let _ = Response::decode(body);
                    } else {
                        let _ = Request::decode(body);
                    }
                }
            }
        }
        let _ = region.state(slot).load(Ordering::Acquire);
    }
});
