//! A whole log and its master record, opened as a database open does (header check, master
//! record, the scan to the last intact record, the torn tail cut) and then read back record by
//! record. Input: a control byte, a 28-byte master record if control bit 0 is set, then the
//! log image. Control bit 1 writes a valid log header over the image's first 16 bytes, bit 2
//! fixes up the CRC of every frame as far as frame lengths chain, bit 3 the master's checksum,
//! and bit 4 opens accepting the loss of damage in the middle of the log (cutting it there).
//!
//! A log that opens must read back: every record from the start the open found to its end,
//! as many as the open counted, each readable at its LSN.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wal::log::{LOG_HEADER_SIZE, LOG_MAGIC, LOG_VERSION};
use wal::{LogConfig, LogManager, LogMode, LogStorage, MemLogStorage};

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let (master, log) = if control & 1 != 0 {
        if rest.len() < 28 {
            return;
        }
        let (m, l) = rest.split_at(28);
        (Some(m.to_vec()), l)
    } else {
        (None, rest)
    };
    let mut log = log.to_vec();
    if control & 2 != 0 && log.len() >= LOG_HEADER_SIZE {
        log[..8].copy_from_slice(&LOG_MAGIC);
        log[8..12].copy_from_slice(&LOG_VERSION.to_le_bytes());
        let crc = wal::checksum::crc32c(&log[..12]);
        log[12..16].copy_from_slice(&crc.to_le_bytes());
    }
    if control & 4 != 0 {
        glass_fuzz::fix_log_checksums(&mut log, LOG_HEADER_SIZE);
    }
    let storage = MemLogStorage::new();
    storage.set_bytes(log);
    if let Some(mut master) = master {
        if control & 8 != 0 {
            glass_fuzz::fix_master_checksum(&mut master);
        }
        storage.write_master(&master).unwrap();
    }
    let config = LogConfig {
        mode: LogMode::NoForce,
        buffer_bytes: 4096,
        accept_loss: control & 16 != 0,
        latching: true,
        gather_commits: true,
        runs: true,
        run_bytes: wal::RUN_BYTES,
        sync_write_back: true,
    };
    let Ok((log, report)) = LogManager::open(Box::new(storage), config) else {
        return;
    };
    let mut records = 0;
    for item in log.iter_from(report.start) {
        let (lsn, record) = item.expect("a record the open scanned reads back");
        assert_eq!(log.read(lsn).expect("a record reads at its LSN"), record);
        records += 1;
    }
    assert_eq!(records, report.records);
    let _ = log.last_checkpoint();
});
