//! The primitive encodings of the crate docs' table (integers, `str`, `list<T>`, `bool`,
//! `opt<T>`, `Value`, bounds), written straight into the output `Vec` and read through
//! [`Reader`], a cursor over one message's body.
//!
//! Reading never panics and never allocates more than the bytes it was given justify: a list's
//! count is checked against the bytes left, at the smallest encoding of one item, before its
//! `Vec` is sized ([`Reader::count`]).

use std::ops::Bound;

use engine::{Value, ValueRef};

use crate::error::ProtocolError;

type Result<T> = std::result::Result<T, ProtocolError>;

/// The smallest encodings, for [`Reader::count`].
pub(crate) const MIN_VALUE: usize = 1;
pub(crate) const MIN_LIST: usize = 4;
pub(crate) const MIN_STR: usize = 4;
pub(crate) const MIN_COLUMN: usize = 2;

const VALUE_NULL: u8 = 0;
const VALUE_INT: u8 = 1;
const VALUE_FLOAT: u8 = 2;
const VALUE_STR: u8 = 3;

const BOUND_UNBOUNDED: u8 = 0;
const BOUND_INCLUDED: u8 = 1;
const BOUND_EXCLUDED: u8 = 2;

pub(crate) fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_bool(out: &mut Vec<u8>, v: bool) {
    out.push(u8::from(v));
}

/// A length or count as its `u32` prefix. Over `u32::MAX` is a caller's bug: no frame could
/// carry it.
pub(crate) fn put_len(out: &mut Vec<u8>, len: usize) {
    let len = u32::try_from(len).expect("a string or list longer than u32::MAX in a message");
    put_u32(out, len);
}

pub(crate) fn put_str(out: &mut Vec<u8>, s: &str) {
    put_len(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

pub(crate) fn put_list<T>(out: &mut Vec<u8>, items: &[T], mut put: impl FnMut(&mut Vec<u8>, &T)) {
    put_len(out, items.len());
    for item in items {
        put(out, item);
    }
}

pub(crate) fn put_opt<T>(out: &mut Vec<u8>, v: Option<&T>, put: impl FnOnce(&mut Vec<u8>, &T)) {
    match v {
        None => put_u8(out, 0),
        Some(v) => {
            put_u8(out, 1);
            put(out, v);
        }
    }
}

pub(crate) fn put_value(out: &mut Vec<u8>, v: &Value) {
    put_value_ref(out, &v.into());
}

/// A value as [`put_value`] and [`put_value_ref`] write it: a tag, then the value.
pub(crate) fn put_value_ref(out: &mut Vec<u8>, v: &ValueRef<'_>) {
    match v {
        ValueRef::Null => put_u8(out, VALUE_NULL),
        ValueRef::Int(i) => put_tagged(out, VALUE_INT, i.to_le_bytes()),
        ValueRef::Float(f) => put_tagged(out, VALUE_FLOAT, f.to_bits().to_le_bytes()),
        ValueRef::Str(s) => {
            put_u8(out, VALUE_STR);
            put_str(out, s);
        }
    }
}

/// A tag byte and an eight-byte word, written as one nine-byte piece: one check of the
/// `Vec`'s room, not two (a value's tag and its word were two, and a TPC-C call's messages
/// carry some hundreds of values).
fn put_tagged(out: &mut Vec<u8>, tag: u8, word: [u8; 8]) {
    let mut piece = [tag, 0, 0, 0, 0, 0, 0, 0, 0];
    piece[1..].copy_from_slice(&word);
    out.extend_from_slice(&piece);
}

pub(crate) fn put_values(out: &mut Vec<u8>, values: &[Value]) {
    put_list(out, values, put_value);
}

pub(crate) fn put_columns(out: &mut Vec<u8>, columns: Option<&Vec<u16>>) {
    put_opt(out, columns, |out, c| {
        put_list(out, c, |out, &c| put_u16(out, c))
    });
}

pub(crate) fn put_bound(out: &mut Vec<u8>, bound: &Bound<Vec<Value>>) {
    match bound {
        Bound::Unbounded => put_u8(out, BOUND_UNBOUNDED),
        Bound::Included(key) => {
            put_u8(out, BOUND_INCLUDED);
            put_values(out, key);
        }
        Bound::Excluded(key) => {
            put_u8(out, BOUND_EXCLUDED);
            put_values(out, key);
        }
    }
}

/// `bytes` as text, if it is UTF-8. Text in rows is mostly ASCII, which is checked here eight
/// bytes at a time; `std::str::from_utf8` checks a byte at a time until its input is aligned,
/// which a string inside a message seldom is, and in the WebAssembly module (a 32-bit target,
/// no vector instructions) that was 3% of a TPC-C call's instructions.
fn text(bytes: &[u8]) -> Option<&str> {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let (chunks, tail) = bytes.as_chunks::<8>();
    let high = chunks
        .iter()
        .fold(0, |high, chunk| high | u64::from_ne_bytes(*chunk))
        | tail.iter().fold(0, |high, &b| high | u64::from(b));
    if high & HIGH == 0 {
        // SAFETY: every byte is below 0x80, so the bytes are ASCII, which is UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

/// A cursor over one message's body. Each read names the field it reads (`what`), for the
/// error that a short or malformed body gives.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    /// The next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(self.truncated(n, what));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    pub(crate) fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        match self.bytes.split_first_chunk::<N>() {
            Some((head, rest)) => {
                self.bytes = rest;
                Ok(*head)
            }
            None => Err(self.truncated(N, what)),
        }
    }

    fn truncated(&self, needed: usize, what: &'static str) -> ProtocolError {
        ProtocolError::Truncated {
            what,
            needed,
            remaining: self.bytes.len(),
        }
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8> {
        match self.bytes.split_first() {
            Some((&b, rest)) => {
                self.bytes = rest;
                Ok(b)
            }
            None => Err(self.truncated(1, what)),
        }
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16> {
        self.array(what).map(u16::from_le_bytes)
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    pub(crate) fn i64(&mut self, what: &'static str) -> Result<i64> {
        self.array(what).map(i64::from_le_bytes)
    }

    pub(crate) fn f64(&mut self, what: &'static str) -> Result<f64> {
        self.array(what)
            .map(|b| f64::from_bits(u64::from_le_bytes(b)))
    }

    pub(crate) fn bool(&mut self, what: &'static str) -> Result<bool> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            byte => Err(ProtocolError::InvalidBool { what, byte }),
        }
    }

    pub(crate) fn str(&mut self, what: &'static str) -> Result<String> {
        let len = self.u32(what)? as usize;
        let bytes = self.bytes(len, what)?;
        match text(bytes) {
            Some(s) => Ok(s.to_owned()),
            None => Err(ProtocolError::InvalidUtf8 { what }),
        }
    }

    /// A list's count, checked to fit in the bytes left at `min_item` bytes an item at least.
    /// A `Vec::with_capacity` of the result is then bounded by the frame's size.
    pub(crate) fn count(&mut self, min_item: usize, what: &'static str) -> Result<usize> {
        debug_assert!(min_item > 0);
        let count = self.u32(what)?;
        let remaining = self.bytes.len();
        if (count as u64).saturating_mul(min_item as u64) > remaining as u64 {
            return Err(ProtocolError::CountTooLarge {
                what,
                count,
                remaining,
            });
        }
        Ok(count as usize)
    }

    pub(crate) fn list<T>(
        &mut self,
        min_item: usize,
        what: &'static str,
        mut item: impl FnMut(&mut Self) -> Result<T>,
    ) -> Result<Vec<T>> {
        let count = self.count(min_item, what)?;
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(item(self)?);
        }
        Ok(items)
    }

    /// `opt<T>`: a flag byte 0 or 1, then `T` if 1.
    pub(crate) fn opt<T>(
        &mut self,
        what: &'static str,
        item: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<Option<T>> {
        if self.bool(what)? {
            item(self).map(Some)
        } else {
            Ok(None)
        }
    }

    pub(crate) fn value(&mut self) -> Result<Value> {
        match self.u8("value tag")? {
            VALUE_NULL => Ok(Value::Null),
            VALUE_INT => self.i64("int value").map(Value::Int),
            VALUE_FLOAT => self.f64("float value").map(Value::Float),
            VALUE_STR => self.str("string value").map(Value::Str),
            tag => Err(ProtocolError::UnknownTag { what: "value", tag }),
        }
    }

    pub(crate) fn values(&mut self, what: &'static str) -> Result<Vec<Value>> {
        self.list(MIN_VALUE, what, Self::value)
    }

    /// [`Reader::values`] into `spare`, an empty list, where it has room for them all.
    pub(crate) fn values_into(
        &mut self,
        spare: Vec<Value>,
        what: &'static str,
    ) -> Result<Vec<Value>> {
        self.list_into(spare, MIN_VALUE, what, Self::value)
    }

    /// [`Reader::list`] into `spare`, an empty list, where it has room for every item (a
    /// list grown would be copied, which costs more than a new one).
    pub(crate) fn list_into<T>(
        &mut self,
        spare: Vec<T>,
        min_item: usize,
        what: &'static str,
        mut item: impl FnMut(&mut Self) -> Result<T>,
    ) -> Result<Vec<T>> {
        debug_assert!(spare.is_empty());
        let count = self.count(min_item, what)?;
        let mut into = if spare.capacity() >= count {
            spare
        } else {
            Vec::with_capacity(count)
        };
        for _ in 0..count {
            into.push(item(self)?);
        }
        Ok(into)
    }

    pub(crate) fn bound(&mut self, what: &'static str) -> Result<Bound<Vec<Value>>> {
        match self.u8(what)? {
            BOUND_UNBOUNDED => Ok(Bound::Unbounded),
            BOUND_INCLUDED => self.values(what).map(Bound::Included),
            BOUND_EXCLUDED => self.values(what).map(Bound::Excluded),
            tag => Err(ProtocolError::UnknownTag { what: "bound", tag }),
        }
    }

    /// Checks that the message used every byte of its frame.
    pub(crate) fn finish(self, what: &'static str) -> Result<()> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(ProtocolError::TrailingBytes {
                what,
                count: self.bytes.len(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_takes_utf8_and_refuses_the_rest_wherever_it_stands() {
        // ASCII of every length around a word, and multi-byte text in a chunk and in the tail.
        for len in 0..20 {
            let ascii = &b"abcdefghijklmnopqrstu"[..len];
            assert_eq!(text(ascii), std::str::from_utf8(ascii).ok());
        }
        for s in [
            "é",
            "naïve text",
            "0123456ü",
            "01234567ü",
            "日本語の文字列です",
        ] {
            assert_eq!(text(s.as_bytes()), Some(s));
        }
        // A byte that is not UTF-8 (a lone continuation, a truncated sequence, 0xFF), first,
        // inside an eight-byte chunk and in the tail behind whole chunks.
        for bad in [&[0x80u8][..], &[0xC3], &[0xFF]] {
            for at in [0, 3, 8, 13, 16] {
                let mut bytes = b"abcdefghijklmnop".to_vec();
                bytes.splice(at..at, bad.iter().copied());
                assert_eq!(text(&bytes), None, "{bytes:?}");
            }
        }
    }
}
