//! What the codec allocates, counted by a global allocator of the test binary's own: encoding
//! into a `Vec` with room allocates nothing, and an attacker's list count makes decoding
//! allocate nothing in proportion to it.

mod common;

use common::counted;
use engine::Value;
use protocol::{Op, ProtocolError, Request};

#[test]
fn the_codec_allocates_only_what_the_bytes_justify() {
    let request = Request::Batch {
        autocommit: true,
        ops: vec![Op::Insert {
            table: 7,
            row: vec![Value::Int(1), Value::Str("x".repeat(40)), Value::Float(0.5)],
        }],
    };
    let mut out = Vec::with_capacity(4096);
    let ((), allocations, _) = counted(|| {
        request.encode(&mut out);
        request.encode(&mut out);
    });
    assert_eq!(allocations, 0, "encoding into a Vec with room allocated");

    // Call with an empty procedure name and u32::MAX arguments, in a 10-byte body.
    let mut frame = vec![0x03, 0, 0, 0, 0];
    frame.extend_from_slice(&u32::MAX.to_le_bytes());
    frame.extend_from_slice(&[0, 0]);
    let (result, _, largest) = counted(|| Request::decode(&frame));
    assert!(
        matches!(result, Err(ProtocolError::CountTooLarge { .. })),
        "{result:?}"
    );
    assert!(largest < 1024, "decoding allocated {largest} bytes at once");

    // A batch whose op count is as large as the bytes allow: what it allocates is bounded by
    // the frame's size, not by the count.
    let mut frame = vec![0x05, 0];
    frame.extend_from_slice(&1000u32.to_le_bytes());
    for _ in 0..1000 {
        frame.extend_from_slice(&[4, 0, 0, 0, 0, 0, 0, 0, 0]); // Delete table 0, empty key
    }
    let (result, _, largest) = counted(|| Request::decode(&frame));
    match result {
        Ok(Request::Batch { ops, .. }) => assert_eq!(ops.len(), 1000),
        other => panic!("{other:?}"),
    }
    assert!(
        largest <= 1000 * std::mem::size_of::<Op>(),
        "decoding {} bytes allocated {largest} bytes at once",
        frame.len()
    );
}
