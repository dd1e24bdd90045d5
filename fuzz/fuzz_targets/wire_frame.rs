//! The wire protocol as a server and a client read it: a byte stream cut into frames by a
//! `FrameBuffer` (the default maximum frame), each frame decoded both as a request and as a
//! response. Input: the bytes of the stream, as one socket would deliver them.
//!
//! The frames must be the stream's own bytes, in order. A frame that decodes must be the
//! canonical encoding of its message: encoding the message gives back exactly the frame, length
//! prefix included, and that decodes to the same message again (floats compared by bits).
#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::{FrameBuffer, Request, Response, DEFAULT_MAX_FRAME, HEADER_LEN};

/// Checks that `frame` (kind and body) is exactly the encoding of what it decoded to.
fn check_canonical<M>(
    frame: &[u8],
    message: &M,
    encode: impl Fn(&M, &mut Vec<u8>),
    decode: impl Fn(&[u8]) -> Result<M, protocol::ProtocolError>,
) {
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
    let again = decode(&encoded[HEADER_LEN..]).expect("a message's encoding decodes");
    let mut reencoded = Vec::new();
    encode(&again, &mut reencoded);
    assert_eq!(reencoded, encoded, "the message changed on its second trip");
}

fuzz_target!(|data: &[u8]| {
    let mut buffer = FrameBuffer::new(DEFAULT_MAX_FRAME);
    let mut stream = data;
    let mut consumed = 0;
    let mut bad_length = false;
    'read: loop {
        match buffer.read_from(&mut stream) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => panic!("reading a slice failed: {e}"),
        }
        loop {
            let frame = match buffer.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                // A bad length ends the stream; the rest is not frames.
                Err(_) => {
                    bad_length = true;
                    break 'read;
                }
            };
            let start = consumed + HEADER_LEN;
            assert_eq!(frame, &data[start..start + frame.len()], "frame bytes");
            consumed = start + frame.len();
            if let Ok(request) = Request::decode(frame) {
                check_canonical(frame, &request, Request::encode, Request::decode);
            }
            if let Ok(response) = Response::decode(frame) {
                check_canonical(frame, &response, Response::encode, Response::decode);
            }
        }
    }
    if bad_length {
        assert!(consumed + buffer.buffered() <= data.len());
    } else {
        assert_eq!(
            consumed + buffer.buffered(),
            data.len(),
            "every byte read is kept"
        );
    }
});
