//! `glass check --json`'s file, read back as `glass crash` reads it after each round: its
//! numbers or an error, never a panic. Input: the file's bytes.
#![no_main]

use bench::check_report::check_numbers;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(numbers) = check_numbers(text) {
        // A file that parsed is an object that says whether the check passed, and holds the
        // ack numbers it read, if any.
        let value: serde_json::Value = serde_json::from_str(text).expect("parsed once already");
        assert_eq!(value["passed"].as_bool(), Some(numbers.passed));
        assert_eq!(numbers.acks.is_some(), value["acks"].is_object());
    }
});
