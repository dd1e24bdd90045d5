//! `glass-load.json`, the load manifest, parsed and checked as `glass check` and `glass bench
//! --db` read it, then compared with a run's options as they do. Input: the file's bytes.
#![no_main]

use std::path::Path;

use bench::manifest::LoadManifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("db/glass-load.json");
    match LoadManifest::parse(path, data) {
        Ok(manifest) => {
            let options = manifest
                .options()
                .expect("a parsed manifest has valid options");
            for workload in ["tpcc", "tpcb", "ycsb", "voter", manifest.workload.as_str()] {
                let _ = manifest.mismatch(workload, &options);
                let _ = manifest.mismatch(workload, &Default::default());
            }
        }
        Err(e) => {
            let message = e.to_string();
            assert!(message.contains("db/glass-load.json"), "{message}");
        }
    }
});
