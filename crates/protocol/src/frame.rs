//! Cutting a byte stream into frames: [`frame_len`] reads a length prefix, [`FrameBuffer`]
//! gathers what a non-blocking socket delivers until whole frames stand in it.
//!
//! ```text
//!            consumed             unconsumed: frames, then part of one      free
//!   buf: [ . . . . . . . . | len kind body | len kind body | len kind bo | 0 0 0 0 0 ]
//!        0                 start                                          end        buf.len()
//!                          next_frame() advances start        read_from() advances end
//! ```
//!
//! Consumed bytes are only reclaimed when a read needs room: the unconsumed tail moves to the
//! front then (or, if nothing is unconsumed, both marks go back to 0 without a copy). So a
//! burst of small frames costs one copy of at most a partial frame per buffer-full, not one
//! per frame. A frame's length is checked against the maximum as soon as its 4-byte header is
//! in, before any room is made for its body: a peer cannot make the buffer grow past
//! `max_frame` plus one read.

use std::io;

use crate::error::ProtocolError;
use crate::HEADER_LEN;

/// The size of the frame whose header starts `header`: `Ok(None)` while fewer than
/// [`HEADER_LEN`] bytes are there, else `HEADER_LEN + len`. A `len` of 0 (no kind byte) or
/// over `max_frame` is an error.
pub fn frame_len(header: &[u8], max_frame: u32) -> Result<Option<usize>, ProtocolError> {
    let Some(prefix) = header.first_chunk::<HEADER_LEN>() else {
        return Ok(None);
    };
    let len = u32::from_le_bytes(*prefix);
    if len == 0 {
        return Err(ProtocolError::EmptyFrame);
    }
    if len > max_frame {
        return Err(ProtocolError::FrameTooLong {
            len,
            max: max_frame,
        });
    }
    Ok(Some(HEADER_LEN + len as usize))
}

/// The least free room a read is offered; also the buffer's first size.
const READ_BYTES_MIN: usize = 8 << 10;

/// What one [`FrameBuffer::read_once`] took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOnce {
    /// Bytes read; 0 at the end of the stream.
    pub bytes: usize,
    /// The free room the read was offered.
    pub room: usize,
}

impl ReadOnce {
    /// The read took bytes and left room unfilled: a stream socket had no more at that moment.
    /// With edge-triggered readiness (epoll's `EPOLLET`, which mio uses) bytes that arrive
    /// later raise a new event, so a reader may wait for that event instead of reading again
    /// to hear `WouldBlock` (epoll(7) says so for stream sockets). The end of the stream is no
    /// such event when it came with the bytes: a reader told that the peer closed its end
    /// (mio's `Event::is_read_closed`) must read on until 0.
    pub fn drained(&self) -> bool {
        self.bytes > 0 && self.bytes < self.room
    }
}

/// A receive buffer for one connection: bytes go in by [`FrameBuffer::read_from`] (or
/// [`FrameBuffer::push`]), whole frames come out by [`FrameBuffer::next_frame`].
#[derive(Debug)]
pub struct FrameBuffer {
    /// `start..end` holds the bytes received and not yet returned as frames; `end..` is free.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max_frame: u32,
}

impl FrameBuffer {
    /// An empty buffer that accepts frames of up to `max_frame` bytes after the length prefix.
    /// It allocates on the first read.
    pub fn new(max_frame: u32) -> Self {
        FrameBuffer {
            buf: Vec::new(),
            start: 0,
            end: 0,
            max_frame,
        }
    }

    /// Changes the maximum for the frames not yet returned (after the `Hello`/`Welcome`
    /// exchange settled on one).
    pub fn set_max_frame(&mut self, max_frame: u32) {
        self.max_frame = max_frame;
    }

    pub fn max_frame(&self) -> u32 {
        self.max_frame
    }

    /// Bytes received and not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Makes at least `READ_BYTES_MIN` bytes of room, and room for the rest of a frame whose
    /// header is in (if its length is allowed).
    fn make_room(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        let pending = &self.buf[self.start..self.end];
        let frame_rest = match frame_len(pending, self.max_frame) {
            Ok(Some(total)) => total.saturating_sub(pending.len()),
            Ok(None) | Err(_) => 0,
        };
        let wanted = frame_rest.max(READ_BYTES_MIN);
        if self.buf.len() - self.end >= wanted {
            return;
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < wanted {
            self.buf.resize(self.end + wanted, 0);
        }
    }

    /// Reads once from `r` into the free room; returns the bytes read, 0 at end of stream.
    /// `WouldBlock` and every other error come back unchanged, with nothing read.
    pub fn read_from(&mut self, r: &mut impl io::Read) -> io::Result<usize> {
        self.read_once(r).map(|read| read.bytes)
    }

    /// Reads once from `r` into the free room, and says how much room the read was offered:
    /// a stream socket that returned less than that had nothing more when it was read
    /// ([`ReadOnce::drained`]), so its owner need not read again to hear `WouldBlock`.
    pub fn read_once(&mut self, r: &mut impl io::Read) -> io::Result<ReadOnce> {
        self.make_room();
        let room = self.buf.len() - self.end;
        let n = r.read(&mut self.buf[self.end..])?;
        assert!(n <= room, "a reader claimed more bytes than it was given");
        self.end += n;
        Ok(ReadOnce { bytes: n, room })
    }

    /// Appends `bytes` as if read.
    pub fn push(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            self.make_room();
            let n = rest.len().min(self.buf.len() - self.end);
            self.buf[self.end..self.end + n].copy_from_slice(&rest[..n]);
            self.end += n;
            rest = &rest[n..];
        }
    }

    /// The next whole frame's kind and body (without its length prefix), consumed; `Ok(None)`
    /// until one is whole. An error (a length of 0 or over the maximum) is the stream's end:
    /// the same error comes back on every call.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, ProtocolError> {
        let pending = &self.buf[self.start..self.end];
        match frame_len(pending, self.max_frame)? {
            Some(total) if total <= pending.len() => {
                let frame = self.start + HEADER_LEN..self.start + total;
                self.start += total;
                Ok(Some(&self.buf[frame]))
            }
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::message::tests::{request, response, ByBits};
    use crate::{Request, Response, DEFAULT_MAX_FRAME};

    fn frames_of(buffer: &mut FrameBuffer) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        while let Some(frame) = buffer.next_frame().expect("valid frames") {
            frames.push(frame.to_vec());
        }
        frames
    }

    /// A reader that hands out its bytes `step` at a time, then `WouldBlock` once between
    /// pieces, like a non-blocking socket.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
        blocked: bool,
    }

    impl io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if !self.bytes.is_empty() {
                self.blocked = !self.blocked;
                if self.blocked {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
            }
            let n = self.step.min(buf.len()).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_read_that_leaves_room_says_the_reader_is_drained() {
        let mut buffer = FrameBuffer::new(DEFAULT_MAX_FRAME);
        let short = buffer.read_once(&mut &[1u8, 0, 0, 0, 7][..]).unwrap();
        assert_eq!(short.bytes, 5);
        assert!(short.room >= READ_BYTES_MIN, "{short:?}");
        assert!(short.drained());
        // A reader with more than the room fills it, and may hold more.
        let many = vec![0u8; 3 * READ_BYTES_MIN];
        let full = buffer.read_once(&mut &many[..]).unwrap();
        assert_eq!(full.bytes, full.room);
        assert!(!full.drained());
        // The end of the stream is not a drained reader: it has no more events to raise.
        let end = buffer.read_once(&mut &[][..]).unwrap();
        assert_eq!(end.bytes, 0);
        assert!(!end.drained());
    }

    #[test]
    fn frame_len_needs_a_whole_header() {
        for n in 0..HEADER_LEN {
            assert_eq!(frame_len(&[5, 0, 0, 0][..n], 16), Ok(None));
        }
        assert_eq!(frame_len(&[5, 0, 0, 0], 16), Ok(Some(9)));
        assert_eq!(frame_len(&[16, 0, 0, 0, 1, 2], 16), Ok(Some(20)));
    }

    #[test]
    fn frame_len_refuses_empty_and_over_long_frames() {
        assert_eq!(frame_len(&[0, 0, 0, 0], 16), Err(ProtocolError::EmptyFrame));
        assert_eq!(
            frame_len(&[17, 0, 0, 0], 16),
            Err(ProtocolError::FrameTooLong { len: 17, max: 16 })
        );
        assert_eq!(
            frame_len(&u32::MAX.to_le_bytes(), DEFAULT_MAX_FRAME),
            Err(ProtocolError::FrameTooLong {
                len: u32::MAX,
                max: DEFAULT_MAX_FRAME
            })
        );
    }

    #[test]
    fn an_over_long_frame_is_refused_from_its_header_alone() {
        let max = DEFAULT_MAX_FRAME;
        let mut buffer = FrameBuffer::new(max);
        buffer.push(&(max + 1).to_le_bytes());
        let error = ProtocolError::FrameTooLong { len: max + 1, max };
        assert_eq!(buffer.next_frame(), Err(error.clone()));
        assert_eq!(buffer.next_frame(), Err(error), "the error stays");
        // Reading on makes no room for the refused body ...
        let body = vec![7u8; 3 * READ_BYTES_MIN];
        while buffer.read_from(&mut &body[..]).unwrap() > 0 && buffer.buffered() < body.len() {}
        assert!(
            buffer.buf.len() < 4 * READ_BYTES_MIN,
            "grew to {}",
            buffer.buf.len()
        );
        // ... where a frame of the largest length allowed gets room for all of it at once.
        let mut allowed = FrameBuffer::new(max);
        allowed.push(&max.to_le_bytes());
        allowed.read_from(&mut &body[..]).unwrap();
        assert!(allowed.buf.len() >= HEADER_LEN + max as usize);
        assert_eq!(allowed.next_frame(), Ok(None));
    }

    #[test]
    fn a_smaller_maximum_applies_to_frames_already_buffered() {
        let mut stream = Vec::new();
        Request::Catalog.encode(&mut stream);
        Request::Call {
            procedure: "new_order".into(),
            args: vec![],
        }
        .encode(&mut stream);
        let mut buffer = FrameBuffer::new(DEFAULT_MAX_FRAME);
        buffer.push(&stream);
        assert_eq!(buffer.next_frame().unwrap(), Some(&[0x02][..]));
        buffer.set_max_frame(8);
        assert_eq!(
            buffer.next_frame(),
            Err(ProtocolError::FrameTooLong { len: 18, max: 8 })
        );
    }

    #[test]
    fn a_frame_larger_than_a_read_is_gathered_whole() {
        let request = Request::Call {
            procedure: "p".into(),
            args: vec![engine::Value::Str("x".repeat(3 * READ_BYTES_MIN)); 4],
        };
        let mut stream = Vec::new();
        request.encode(&mut stream);
        request.encode(&mut stream);
        let mut buffer = FrameBuffer::new(DEFAULT_MAX_FRAME);
        let mut reader = Trickle {
            bytes: &stream,
            step: 5000,
            blocked: false,
        };
        let mut frames = 0;
        loop {
            match buffer.read_from(&mut reader) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            }
            while let Some(frame) = buffer.next_frame().unwrap() {
                assert_eq!(Request::decode(frame).unwrap(), request);
                frames += 1;
            }
        }
        assert_eq!(frames, 2);
        assert_eq!(buffer.buffered(), 0);
        assert!(
            buffer.buf.len() < stream.len(),
            "the buffer holds about one frame, not the stream: {}",
            buffer.buf.len()
        );
    }

    #[test]
    fn consumed_frames_are_not_moved_frame_by_frame() {
        let mut stream = Vec::new();
        for _ in 0..100 {
            Request::Commit.encode(&mut stream);
        }
        let mut buffer = FrameBuffer::new(DEFAULT_MAX_FRAME);
        buffer.push(&stream);
        for _ in 0..50 {
            buffer.next_frame().unwrap().unwrap();
        }
        assert_eq!(buffer.start, 250, "the read mark moved, the bytes did not");
        assert_eq!(buffer.buffered(), 250);
        assert_eq!(frames_of(&mut buffer).len(), 50);
        // Once empty, the next read starts at the front again, without a copy.
        buffer.push(&stream[..5]);
        assert_eq!(buffer.start, 0);
        assert_eq!(frames_of(&mut buffer), vec![vec![0x06]]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn one_byte_pieces_and_one_piece_give_the_same_frames(
            requests in prop::collection::vec(request(), 0..6),
            responses in prop::collection::vec(response(), 0..6),
        ) {
            let mut stream = Vec::new();
            for request in &requests {
                request.encode(&mut stream);
            }
            let split = stream.len();
            for response in &responses {
                response.encode(&mut stream);
            }

            let mut whole = FrameBuffer::new(DEFAULT_MAX_FRAME);
            whole.push(&stream);
            let mut at_once = frames_of(&mut whole);
            prop_assert_eq!(whole.buffered(), 0);

            let mut piecewise = FrameBuffer::new(DEFAULT_MAX_FRAME);
            let mut reader = Trickle { bytes: &stream, step: 1, blocked: false };
            let mut by_bytes = Vec::new();
            loop {
                match piecewise.read_from(&mut reader) {
                    Ok(0) => break,
                    Ok(n) => prop_assert_eq!(n, 1),
                    Err(e) => prop_assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
                }
                by_bytes.extend(frames_of(&mut piecewise));
            }
            prop_assert_eq!(piecewise.buffered(), 0);
            prop_assert_eq!(&by_bytes, &at_once);

            prop_assert_eq!(at_once.len(), requests.len() + responses.len());
            let replies = at_once.split_off(requests.len());
            for (frame, request) in at_once.iter().zip(&requests) {
                prop_assert_eq!(Request::decode(frame).unwrap().by_bits(), request.by_bits());
            }
            for (frame, response) in replies.iter().zip(&responses) {
                prop_assert_eq!(Response::decode(frame).unwrap().by_bits(), response.by_bits());
            }
            prop_assert_eq!(
                stream.len(),
                split + replies.iter().map(|f| f.len() + HEADER_LEN).sum::<usize>()
            );
        }
    }
}
