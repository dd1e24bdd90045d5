//! The procedure boundary as a host and a guest read it (`protocol::guest`): a byte stream cut
//! into frames by a `FrameBuffer`, each frame decoded both as a host's message and as a
//! guest's. The host treats its guest as untrusted, so its decoder must refuse anything but a
//! canonical message without panicking. Input: the bytes of the stream, as a socket or the
//! shared-memory buffer would deliver them.
//!
//! A frame that decodes must be the canonical encoding of its message: encoding it gives back
//! exactly the frame, length prefix included. The host's two decoders that run operations as
//! they read them (`answer_ops` for `Ops`, `decode_running_writes` for `Returned`) must agree
//! with `GuestMsg::decode`: the same operations, in order, and a refusal where it refuses; and
//! `is_ops`, which picks the frames the host answers so, must pick exactly the `Ops`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::guest::{answer_ops, decode_running_writes, is_ops, GuestMsg, HostMsg};
use protocol::{FrameBuffer, Op, OpResult, DEFAULT_MAX_FRAME, HEADER_LEN};

fn check_canonical<M>(frame: &[u8], message: &M, encode: impl Fn(&M, &mut Vec<u8>)) {
    let mut encoded = Vec::new();
    encode(message, &mut encoded);
    assert_eq!(
        encoded[..HEADER_LEN],
        (frame.len() as u32).to_le_bytes(),
        "length prefix"
    );
    assert_eq!(
        &encoded[HEADER_LEN..],
        frame,
        "decode then encode changed the frame"
    );
}

/// The same message, by its encoding (a NaN is not equal to itself).
fn assert_same(a: &GuestMsg, b: &GuestMsg) {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    a.encode(&mut x);
    b.encode(&mut y);
    assert_eq!(x, y, "{a:?} against {b:?}");
}

fn ops(ops: &[Op]) -> GuestMsg {
    GuestMsg::Ops { ops: ops.to_vec() }
}

fuzz_target!(|data: &[u8]| {
    let mut buffer = FrameBuffer::new(DEFAULT_MAX_FRAME);
    let mut stream = data;
    loop {
        match buffer.read_from(&mut stream) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => panic!("reading a slice failed: {e}"),
        }
        loop {
            let frame = match buffer.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) => return,
            };
            if let Ok(m) = HostMsg::decode(frame) {
                check_canonical(frame, &m, HostMsg::encode);
            }
            let decoded = GuestMsg::decode(frame);
            if let Ok(m) = &decoded {
                check_canonical(frame, m, GuestMsg::encode);
                // The host answers what `is_ops` picks out, and decodes the rest whole.
                assert_eq!(is_ops(frame), matches!(m, GuestMsg::Ops { .. }), "{m:?}");
            }
            let mut ran: Vec<Op> = Vec::new();
            let running = decode_running_writes(frame, &mut Default::default(), |op| {
                ran.push(op.clone());
                Ok(())
            });
            match (&decoded, running) {
                (
                    Ok(GuestMsg::Returned {
                        writes,
                        values,
                        busy_ns,
                    }),
                    Ok((m, None)),
                ) => {
                    assert_same(&ops(&ran), &ops(writes));
                    let bare = GuestMsg::Returned {
                        writes: Vec::new(),
                        values: values.clone(),
                        busy_ns: *busy_ns,
                    };
                    assert_same(&m, &bare);
                }
                (Ok(other), Ok((m, None))) => assert_same(&m, other),
                (Err(_), Err(_)) => {}
                (d, r) => panic!("decode {d:?}, decoding while running {r:?}"),
            }
            let mut answered: Vec<Op> = Vec::new();
            let mut out = Vec::new();
            let answer = answer_ops(frame, &mut out, |op| {
                answered.push(op.clone());
                Ok(OpResult::Inserted)
            });
            match (&decoded, answer) {
                (Ok(m @ GuestMsg::Ops { .. }), Ok(None)) => assert_same(&ops(&answered), m),
                (Ok(GuestMsg::Ops { .. }), a) => panic!("a decoded Ops, answered {a:?}"),
                (_, Ok(_)) => panic!("answered what does not decode as Ops: {decoded:?}"),
                (_, Err(_)) => {}
            }
        }
    }
});
