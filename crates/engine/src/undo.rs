//! Logical undo information: what a transaction must do to take back one of its operations.
//!
//! The same description serves twice: in memory, as the transaction's undo list (rollback
//! never reads the log), and encoded as the payload of the `Update` log records that recovery
//! follows backwards for transactions that were running at a crash.
//!
//! Payload format (little-endian):
//!
//! | offset | size | field                                            |
//! |-------:|-----:|--------------------------------------------------|
//! | 0      | 1    | kind: 1 insert, 2 update, 3 delete, 4 update in pieces |
//! | 1      | 4    | table id                                         |
//! | 5      | 8    | record location (packed `RecordId`)              |
//! | 13     | 2    | update: byte offset in the record (else 0)       |
//! | 15     | 4    | length of the before image (0 for insert)        |
//! | 19     | len  | before image: the bytes at offset (update) or the whole record (delete) |
//!
//! An update in pieces (columns far apart in the record) has offset 0 and a before image made
//! of pieces, each `offset: u16 | len: u16 | len bytes`.
//!
//! Every undo action is idempotent, because recovery may meet an operation whose effect (or
//! whose earlier undo) reached the disk only in part: undoing an insert deletes the record and
//! its index entries *if present*; undoing an update writes the before image; undoing a delete
//! re-creates the record *if absent* and its index entries *if absent*.

use crate::api::{TxError, TxResult};

pub const KIND_INSERT: u8 = 1;
pub const KIND_UPDATE: u8 = 2;
pub const KIND_DELETE: u8 = 3;
pub const KIND_UPDATE_PIECES: u8 = 4;
/// Bytes of the payload before the before image.
pub const HEADER: usize = 19;

/// One logical undo action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UndoOp<'a> {
    pub kind: u8,
    pub table: u32,
    pub loc: u64,
    pub offset: u16,
    pub before: &'a [u8],
}

impl UndoOp<'_> {
    /// The payload's fixed part; the before image follows it.
    #[inline]
    pub fn header(&self) -> [u8; HEADER] {
        let mut h = [0u8; HEADER];
        h[0] = self.kind;
        h[1..5].copy_from_slice(&self.table.to_le_bytes());
        h[5..13].copy_from_slice(&self.loc.to_le_bytes());
        h[13..15].copy_from_slice(&self.offset.to_le_bytes());
        h[15..19].copy_from_slice(&(self.before.len() as u32).to_le_bytes());
        h
    }

    /// The whole payload: [`UndoOp::header`], then the before image.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&self.header());
        out.extend_from_slice(self.before);
    }
}

/// Decodes a payload; bytes from the log never panic the decoder.
pub fn decode(bytes: &[u8]) -> TxResult<UndoOp<'_>> {
    let bad = |why: &str| TxError::Invalid(format!("corrupt undo payload: {why}"));
    if bytes.len() < HEADER {
        return Err(bad("too short"));
    }
    let kind = bytes[0];
    if !(KIND_INSERT..=KIND_UPDATE_PIECES).contains(&kind) {
        return Err(bad("unknown kind"));
    }
    let table = u32::from_le_bytes(bytes[1..5].try_into().unwrap());
    let loc = u64::from_le_bytes(bytes[5..13].try_into().unwrap());
    let offset = u16::from_le_bytes(bytes[13..15].try_into().unwrap());
    let len = u32::from_le_bytes(bytes[15..19].try_into().unwrap()) as usize;
    if bytes.len() != HEADER + len {
        return Err(bad("length mismatch"));
    }
    Ok(UndoOp {
        kind,
        table,
        loc,
        offset,
        before: &bytes[HEADER..],
    })
}

/// Appends one piece (`offset`, `bytes`) to the before image of an update in pieces.
#[inline]
pub fn push_piece(out: &mut Vec<u8>, offset: usize, bytes: &[u8]) {
    out.extend_from_slice(&(offset as u16).to_le_bytes());
    out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// [`push_piece`] of one 8-byte word: the piece's header and bytes appended at once.
#[inline]
pub fn push_word_piece(out: &mut Vec<u8>, offset: usize, word: [u8; 8]) {
    let mut piece = [0u8; 12];
    piece[..2].copy_from_slice(&(offset as u16).to_le_bytes());
    piece[2..4].copy_from_slice(&8u16.to_le_bytes());
    piece[4..].copy_from_slice(&word);
    out.extend_from_slice(&piece);
}

/// The pieces of an update-in-pieces before image, in order; malformed bytes (from a damaged
/// log) are an error, never a panic.
pub fn pieces(mut image: &[u8]) -> TxResult<Vec<(usize, &[u8])>> {
    let mut out = Vec::new();
    while !image.is_empty() {
        if image.len() < 4 {
            return Err(TxError::Invalid(
                "corrupt undo payload: truncated piece header".into(),
            ));
        }
        let offset = u16::from_le_bytes([image[0], image[1]]) as usize;
        let len = u16::from_le_bytes([image[2], image[3]]) as usize;
        let Some(bytes) = image.get(4..4 + len) else {
            return Err(TxError::Invalid(
                "corrupt undo payload: piece runs past the image".into(),
            ));
        };
        out.push((offset, bytes));
        image = &image[4 + len..];
    }
    Ok(out)
}

/// An entry of a transaction's in-memory undo list; its before image is in the list's arena.
#[derive(Clone, Copy, Debug)]
pub struct UndoEntry {
    pub kind: u8,
    pub table: u32,
    pub loc: u64,
    pub offset: u16,
    pub start: u32,
    pub len: u32,
    /// LSN of the transaction's log record before this operation's (the CLR's undo-next).
    pub prev_lsn: u64,
}

/// A transaction's undo list.
#[derive(Default, Debug)]
pub struct UndoList {
    pub entries: Vec<UndoEntry>,
    pub arena: Vec<u8>,
}

impl UndoList {
    pub fn push(
        &mut self,
        kind: u8,
        table: u32,
        loc: u64,
        offset: u16,
        before: &[u8],
        prev_lsn: u64,
    ) {
        let start = self.arena.len() as u32;
        self.arena.extend_from_slice(before);
        self.entries.push(UndoEntry {
            kind,
            table,
            loc,
            offset,
            start,
            len: before.len() as u32,
            prev_lsn,
        });
    }

    pub fn before(&self, e: &UndoEntry) -> &[u8] {
        &self.arena[e.start as usize..(e.start + e.len) as usize]
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.arena.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_round_trips_and_rejects_garbage() {
        let op = UndoOp {
            kind: KIND_UPDATE,
            table: 3,
            loc: 0x1234_0005,
            offset: 17,
            before: b"old bytes",
        };
        let mut buf = Vec::new();
        op.encode(&mut buf);
        assert_eq!(decode(&buf).unwrap(), op);
        assert!(decode(&buf[..10]).is_err());
        let mut bad = buf.clone();
        bad[0] = 9;
        assert!(decode(&bad).is_err());
        bad = buf.clone();
        bad.push(0);
        assert!(decode(&bad).is_err());
    }

    #[test]
    fn a_word_piece_is_a_piece_of_eight_bytes() {
        let (mut words, mut general) = (Vec::new(), Vec::new());
        push_word_piece(&mut words, 300, *b"12345678");
        push_piece(&mut general, 300, b"12345678");
        assert_eq!(words, general);
        assert_eq!(pieces(&words).unwrap(), vec![(300, &b"12345678"[..])]);
    }

    #[test]
    fn pieces_round_trip_and_reject_truncation() {
        let mut image = Vec::new();
        push_piece(&mut image, 3, b"ab");
        push_piece(&mut image, 300, b"xyz");
        assert_eq!(
            pieces(&image).unwrap(),
            vec![(3, &b"ab"[..]), (300, &b"xyz"[..])]
        );
        for cut in 1..image.len() {
            if cut != 6 {
                assert!(pieces(&image[..cut]).is_err(), "cut at {cut}");
            }
        }
        let op = UndoOp {
            kind: KIND_UPDATE_PIECES,
            table: 1,
            loc: 9,
            offset: 0,
            before: &image,
        };
        let mut buf = Vec::new();
        op.encode(&mut buf);
        assert_eq!(decode(&buf).unwrap(), op);
    }
}
