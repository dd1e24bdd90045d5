//! One log frame: the frame check (length, CRC-32C) and the body's decode, as recovery and
//! the open-time scan read them. Input: a control byte, then the frame (and whatever follows
//! it). Control bit 0 fixes the frame's checksum up, so that mutated bodies reach the decoder.
//!
//! A frame that decodes must be the canonical encoding of its record: encoding the record
//! gives back exactly the frame's bytes. A checkpoint end's engine bytes go through the
//! engine's decoder too (`engine::recovery::CheckpointMeta`), which must read back what it
//! writes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::Lsn;
use wal::LogRecord;

fuzz_target!(|data: &[u8]| {
    let Some((&control, frame)) = data.split_first() else {
        return;
    };
    let mut bytes = frame.to_vec();
    if control & 1 != 0 {
        glass_fuzz::fix_frame_checksum(&mut bytes);
    }
    let lsn = Lsn(16);
    match LogRecord::decode(&bytes, lsn) {
        Ok((record, len)) => {
            assert!(len <= bytes.len());
            assert_eq!(record.encoded_len(), len);
            let _ = (record.kind(), record.txn(), record.prev());
            if let LogRecord::CheckpointEnd { meta, .. } = &record {
                if let Ok(decoded) = engine::recovery::CheckpointMeta::decode(meta) {
                    // The older form (the transaction id alone) is written longer now.
                    if meta.len() != 8 {
                        assert_eq!(
                            &decoded.encode(),
                            meta,
                            "meta changed by decode then encode"
                        );
                    }
                }
            }
            let mut encoded = Vec::new();
            record.encode(&mut encoded);
            assert_eq!(
                encoded,
                &bytes[..len],
                "decode then encode changed the frame"
            );
        }
        Err(e) => {
            let message = e.to_string();
            assert!(message.contains("lsn:16"), "{message}");
        }
    }
});
