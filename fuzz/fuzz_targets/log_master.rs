//! The log's master record (checkpoint begin and log start), decoded as opening a log does.
//! Input: a control byte, then the record's bytes. Control bit 0 fixes its checksum up.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wal::fuzzing::decode_master;

fuzz_target!(|data: &[u8]| {
    let Some((&control, master)) = data.split_first() else {
        return;
    };
    let mut bytes = master.to_vec();
    if control & 1 != 0 {
        glass_fuzz::fix_master_checksum(&mut bytes);
    }
    if let Ok((checkpoint, start)) = decode_master(&bytes) {
        // An accepted master names a start past the log header and a checkpoint not before it.
        assert_eq!(bytes.len(), 28);
        assert!(start.0 >= wal::log::LOG_HEADER_SIZE as u64);
        if let Some(checkpoint) = checkpoint {
            assert!(checkpoint >= start);
        }
    }
});
