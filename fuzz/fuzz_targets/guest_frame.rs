//! The procedure boundary as a host and a guest read it (`protocol::guest`): a byte stream cut
//! into frames by a `FrameBuffer`, each frame decoded both as a host's message and as a
//! guest's. The host treats its guest as untrusted, so its decoder must refuse anything but a
//! canonical message without panicking. Input: the bytes of the stream, as a socket or the
//! shared-memory buffer would deliver them.
//!
//! A frame that decodes must be the canonical encoding of its message: encoding it gives back
//! exactly the frame, length prefix included.
#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::guest::{GuestMsg, HostMsg};
use protocol::{FrameBuffer, DEFAULT_MAX_FRAME, HEADER_LEN};

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
            if let Ok(m) = GuestMsg::decode(frame) {
                check_canonical(frame, &m, GuestMsg::encode);
            }
        }
    }
});
