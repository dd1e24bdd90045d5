//! The ack log (`glass bench --ack-log`), parsed as `glass check --ack-log` reads it. Input: the
//! file's bytes. What parses must say the same once written back in the log's own format.
#![no_main]

use bench::acklog::parse_bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(contents) = parse_bytes(data) else {
        return;
    };
    let mut text = String::from("glass-ack-log 1\n");
    for run in &contents.runs {
        let durability = if run.durable {
            "durable"
        } else {
            "not-durable"
        };
        text.push_str(&format!("run {} {durability}\n", run.workload));
        for (_, r) in &run.receipts {
            let key: Vec<String> = r.key.iter().map(i64::to_string).collect();
            let sign = if r.present { '+' } else { '-' };
            text.push_str(&format!("{sign} {} {}\n", r.table, key.join(" ")));
        }
    }
    let again = parse_bytes(text.as_bytes()).expect("what parsed, written back, parses");
    assert_eq!(again.runs.len(), contents.runs.len());
    for (a, b) in again.runs.iter().zip(&contents.runs) {
        assert_eq!(a.workload, b.workload);
        assert_eq!(a.durable, b.durable);
        let receipts = |r: &bench::acklog::AckRun| {
            r.receipts
                .iter()
                .map(|(_, x)| x.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(receipts(a), receipts(b));
    }
});
