//! `catalog.json`, parsed and checked as opening a database does before using any of it.
//! Input: the file's bytes. An accepted catalog is re-encoded and parsed again to the same.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("db/catalog.json");
    match engine::catalog::parse_catalog(path, data) {
        Ok(catalog) => {
            let again = serde_json::to_vec(&catalog).unwrap();
            let reparsed =
                engine::catalog::parse_catalog(path, &again).expect("re-encoded catalog parses");
            assert_eq!(serde_json::to_vec(&reparsed).unwrap(), again);
        }
        Err(e) => {
            let message = e.to_string();
            assert!(message.contains("db/catalog.json"), "{message}");
        }
    }
});
