//! What the procedure boundary's serialization costs per interaction (`protocol::guest`): one
//! message each way, each encoded by its sender and decoded by its receiver, for the messages
//! a YCSB-C read sends (its key out, its row of ten 100-byte fields back) and a TPC-C-sized
//! update. The isolation issue's goal is at most 1 µs per interaction.
//!
//!   cargo bench -p protocol --bench boundary

use criterion::{criterion_group, criterion_main, Criterion};
use engine::Value;
use protocol::guest::{GuestMsg, HostMsg};
use protocol::{Op, OpResult, HEADER_LEN};

/// Encodes `out_msg` and decodes it, then encodes `back_msg` and decodes it: one interaction.
fn interaction(out_msg: &GuestMsg, back_msg: &HostMsg, buf: &mut Vec<u8>) {
    buf.clear();
    out_msg.encode(buf);
    let got = GuestMsg::decode(&buf[HEADER_LEN..]).expect("decodes");
    std::hint::black_box(&got);
    buf.clear();
    back_msg.encode(buf);
    let got = HostMsg::decode(&buf[HEADER_LEN..]).expect("decodes");
    std::hint::black_box(&got);
}

fn boundary(c: &mut Criterion) {
    let mut buf = Vec::with_capacity(4096);
    let read = GuestMsg::Ops {
        ops: vec![Op::Get {
            table: 0,
            key: vec![Value::Int(123_456)],
            columns: None,
            for_update: false,
        }],
    };
    let mut row = vec![Value::Int(123_456)];
    row.extend((0..10).map(|i| Value::Str(format!("{i}").repeat(100))));
    let row_back = HostMsg::Results {
        results: vec![OpResult::Row(Some(row))],
    };
    c.bench_function("ycsb read: get out, 1 KB row back", |b| {
        b.iter(|| interaction(&read, &row_back, &mut buf))
    });

    let update = GuestMsg::Ops {
        ops: vec![Op::Update {
            table: 3,
            key: vec![Value::Int(1), Value::Int(7), Value::Int(42)],
            set: vec![(16, Value::Float(123.45)), (17, Value::Int(3))],
        }],
    };
    let found = HostMsg::Results {
        results: vec![OpResult::Found(true)],
    };
    c.bench_function("update: 3-part key and two columns out, found back", |b| {
        b.iter(|| interaction(&update, &found, &mut buf))
    });

    let invoke = HostMsg::Invoke {
        txn: 0,
        args: vec![Value::Int(123_456)],
        timed: false,
    };
    let returned = GuestMsg::Returned {
        writes: Vec::new(),
        values: vec![Value::Int(1), Value::Int(2)],
        busy_ns: 900,
    };
    c.bench_function("call: invoke in, returned out", |b| {
        b.iter(|| {
            buf.clear();
            invoke.encode(&mut buf);
            std::hint::black_box(HostMsg::decode(&buf[HEADER_LEN..]).expect("decodes"));
            buf.clear();
            returned.encode(&mut buf);
            std::hint::black_box(GuestMsg::decode(&buf[HEADER_LEN..]).expect("decodes"));
        })
    });
}

criterion_group!(benches, boundary);
criterion_main!(benches);
