//! Index keys: how they are encoded and the two ways they are compared (the ladder's
//! `btree-keys` rung).
//!
//! Every index key is a byte string in an *order-preserving* encoding: comparing two encoded
//! keys with `memcmp` gives the same answer as comparing the logical values field by field.
//!
//! | field        | encoding                                              | size      |
//! |--------------|-------------------------------------------------------|-----------|
//! | `Int(i64)`   | big-endian, sign bit flipped (so -1 < 0 < 1 bytewise)  | 8         |
//! | `Str(bytes)` | the bytes, then a `0x00` terminator (no NUL allowed)  | len + 1   |
//!
//! Two comparators order these bytes:
//!
//! * [`SchemaKeyOrder`] — the *generic* path a conventional engine takes: it walks the key
//!   schema, decodes each integer and finds each string's terminator, field by field.
//! * [`IntKeyOrder`] — the *hand-coded* path for keys that are one packed `u64` (see
//!   [`pack_int_key`]): one integer comparison. Its [`KeyOrder::FIXED_U64`] is `true`, which
//!   lets the B+-tree monomorphise node search into a plain `u64` binary search.
//!
//! Invariant (proptested): both comparators agree with `memcmp` on *every* byte string, not only
//! on well-formed keys. The B+-tree relies on this for prefix bounds, for the successor of a
//! prefix ([`prefix_successor`]) and for non-unique entries, which are `key ++ value` (8 bytes
//! big-endian): everything past the schema compares bytewise.

use std::cmp::Ordering;
use std::ops::Bound;

use crate::error::{StorageError, StorageResult};

/// A total order over encoded keys. Implementations must agree with `memcmp` on all inputs.
pub trait KeyOrder: Send + Sync + 'static {
    /// True when every key is (or starts with) one `u64` in big-endian order and node search may
    /// read it directly instead of calling [`KeyOrder::compare`]. Read at compile time.
    const FIXED_U64: bool = false;

    /// Compares two encoded keys (or prefixes of keys).
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering;
}

/// One field of a key to encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyField<'a> {
    Int(i64),
    Str(&'a [u8]),
}

/// The type of one key field, for [`SchemaKeyOrder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyPart {
    Int,
    Str,
}

/// Appends the order-preserving encoding of `fields` to `out`.
///
/// Fails with [`StorageError::Invalid`] if a string contains a NUL byte (the terminator);
/// `out` is then left with the fields before it.
pub fn encode_key(fields: &[KeyField<'_>], out: &mut Vec<u8>) -> StorageResult<()> {
    for field in fields {
        match *field {
            KeyField::Int(v) => out.extend_from_slice(&encode_i64(v)),
            KeyField::Str(s) => {
                if s.contains(&0) {
                    return Err(StorageError::Invalid(
                        "a string key field contains a NUL byte".into(),
                    ));
                }
                out.extend_from_slice(s);
                out.push(0);
            }
        }
    }
    Ok(())
}

/// The order-preserving encoding of one integer field.
#[inline]
pub fn encode_i64(v: i64) -> [u8; 8] {
    ((v as u64) ^ (1 << 63)).to_be_bytes()
}

/// Inverse of [`encode_i64`].
#[inline]
pub fn decode_i64(bytes: [u8; 8]) -> i64 {
    (u64::from_be_bytes(bytes) ^ (1 << 63)) as i64
}

/// Packs composite unsigned integers into one `u64` whose integer order is the composite's
/// lexicographic order: `values[0]` takes the most significant `bits[0]` bits, and so on.
///
/// Returns `None` if the lengths differ, the widths add up to more than 64, or a value does not
/// fit its width.
pub fn pack_int_key(values: &[u64], bits: &[u8]) -> Option<u64> {
    if values.len() != bits.len() || bits.iter().map(|&b| b as u32).sum::<u32>() > 64 {
        return None;
    }
    let mut packed: u64 = 0;
    for (&value, &width) in values.iter().zip(bits) {
        let width = width as u32;
        if width < 64 && value >> width != 0 {
            return None;
        }
        packed = if width == 64 {
            value
        } else {
            (packed << width) | value
        };
    }
    Some(packed)
}

/// Inverse of [`pack_int_key`]: the composite's fields, most significant first.
pub fn unpack_int_key(packed: u64, bits: &[u8]) -> Vec<u64> {
    let mut out = vec![0; bits.len()];
    let mut rest = packed;
    for (slot, &width) in out.iter_mut().zip(bits).rev() {
        let width = width as u32;
        if width >= 64 {
            *slot = rest;
            rest = 0;
        } else {
            *slot = rest & ((1u64 << width) - 1);
            rest >>= width;
        }
    }
    out
}

/// The smallest byte string greater than every string that starts with `prefix`, or `None` if
/// there is none (the prefix is empty or all `0xFF`).
///
/// A high bound `Included(prefix)` is `key < prefix_successor(prefix)`.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut out = prefix[..=last].to_vec();
    out[last] += 1;
    Some(out)
}

/// A scan's bounds in normal form: `lo <= key < hi` (`None`: unbounded), for any order that
/// agrees with `memcmp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    pub lo: Option<Vec<u8>>,
    pub hi: Option<Vec<u8>>,
}

impl KeyRange {
    /// Normalises scan bounds, where a bound may be a prefix of keys: with `s` the
    /// [`prefix_successor`] of `p`, low `Included(p)` is `key >= p`, low `Excluded(p)` is
    /// `key >= s` (it skips every key starting with `p`), high `Included(p)` is `key < s` (it
    /// takes every key starting with `p`), high `Excluded(p)` is `key < p`.
    ///
    /// Returns `None` when the range is empty.
    pub fn new(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Option<KeyRange> {
        let lo = match lo {
            Bound::Included(p) => Some(p.to_vec()),
            Bound::Excluded(p) => Some(prefix_successor(p)?),
            Bound::Unbounded => None,
        };
        let hi = match hi {
            Bound::Included(p) => prefix_successor(p),
            Bound::Excluded(p) => Some(p.to_vec()),
            Bound::Unbounded => None,
        };
        match (&lo, &hi) {
            (Some(l), Some(h)) if l >= h => None,
            _ => Some(KeyRange { lo, hi }),
        }
    }
}

/// The generic comparator: interprets the key schema field by field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaKeyOrder {
    parts: Vec<KeyPart>,
}

impl SchemaKeyOrder {
    pub fn new(parts: Vec<KeyPart>) -> Self {
        SchemaKeyOrder { parts }
    }

    pub fn parts(&self) -> &[KeyPart] {
        &self.parts
    }
}

impl KeyOrder for SchemaKeyOrder {
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        let (mut a, mut b) = (a, b);
        for part in &self.parts {
            match part {
                KeyPart::Int => {
                    if a.len() < 8 || b.len() < 8 {
                        // A prefix that ends inside the integer: compare what there is.
                        return a.cmp(b);
                    }
                    let x = decode_i64(a[..8].try_into().expect("8 bytes"));
                    let y = decode_i64(b[..8].try_into().expect("8 bytes"));
                    match x.cmp(&y) {
                        Ordering::Equal => {}
                        other => return other,
                    }
                    a = &a[8..];
                    b = &b[8..];
                }
                KeyPart::Str => {
                    // A string runs to its terminator, or to the end of a prefix.
                    let a_end = a.iter().position(|&c| c == 0);
                    let b_end = b.iter().position(|&c| c == 0);
                    let a_str = &a[..a_end.unwrap_or(a.len())];
                    let b_str = &b[..b_end.unwrap_or(b.len())];
                    match a_str.cmp(b_str) {
                        Ordering::Equal => {}
                        other => return other,
                    }
                    match (a_end, b_end) {
                        (Some(x), Some(y)) => {
                            a = &a[x + 1..];
                            b = &b[y + 1..];
                        }
                        // Equal strings; the side that ended before its terminator is smaller.
                        (None, None) => return Ordering::Equal,
                        (None, Some(_)) => return Ordering::Less,
                        (Some(_), None) => return Ordering::Greater,
                    }
                }
            }
        }
        // Past the schema (the value suffix of a non-unique entry): bytewise.
        a.cmp(b)
    }
}

/// The hand-coded comparator for keys that are one big-endian `u64` (optionally followed by
/// more bytes, such as the value suffix of a non-unique entry, compared bytewise).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntKeyOrder;

impl IntKeyOrder {
    /// The encoded form of an integer key.
    #[inline]
    pub fn encode(key: u64) -> [u8; 8] {
        key.to_be_bytes()
    }
}

impl KeyOrder for IntKeyOrder {
    const FIXED_U64: bool = true;

    #[inline]
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        if a.len() >= 8 && b.len() >= 8 {
            let x = u64::from_be_bytes(a[..8].try_into().expect("8 bytes"));
            let y = u64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
            match x.cmp(&y) {
                Ordering::Equal => a[8..].cmp(&b[8..]),
                other => other,
            }
        } else {
            a.cmp(b)
        }
    }
}

/// Bytewise order (`memcmp`); the reference the other orders must agree with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BytewiseKeyOrder;

impl KeyOrder for BytewiseKeyOrder {
    #[inline]
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        a.cmp(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum OwnedField {
        Int(i64),
        Str(Vec<u8>),
    }

    fn encode_owned(fields: &[OwnedField]) -> Vec<u8> {
        let borrowed: Vec<KeyField<'_>> = fields
            .iter()
            .map(|f| match f {
                OwnedField::Int(v) => KeyField::Int(*v),
                OwnedField::Str(s) => KeyField::Str(s),
            })
            .collect();
        let mut out = Vec::new();
        encode_key(&borrowed, &mut out).unwrap();
        out
    }

    fn logical_cmp(a: &[OwnedField], b: &[OwnedField]) -> Ordering {
        for (x, y) in a.iter().zip(b) {
            let o = match (x, y) {
                (OwnedField::Int(x), OwnedField::Int(y)) => x.cmp(y),
                (OwnedField::Str(x), OwnedField::Str(y)) => x.cmp(y),
                _ => unreachable!("same schema"),
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    const SCHEMA: [KeyPart; 3] = [KeyPart::Int, KeyPart::Str, KeyPart::Int];

    fn key_strategy() -> impl Strategy<Value = Vec<OwnedField>> {
        (
            prop_oneof![any::<i64>(), -3i64..3],
            proptest::collection::vec(prop_oneof![1u8..4, 1u8..=255], 0..4),
            prop_oneof![any::<i64>(), -3i64..3],
        )
            .prop_map(|(a, s, c)| vec![OwnedField::Int(a), OwnedField::Str(s), OwnedField::Int(c)])
    }

    #[test]
    fn int_encoding_orders_signed_values() {
        let values = [i64::MIN, -2, -1, 0, 1, 2, i64::MAX];
        for w in values.windows(2) {
            assert!(encode_i64(w[0]) < encode_i64(w[1]));
            assert_eq!(decode_i64(encode_i64(w[0])), w[0]);
        }
    }

    #[test]
    fn nul_in_string_is_rejected() {
        let mut out = Vec::new();
        let err = encode_key(&[KeyField::Str(b"a\0b")], &mut out).unwrap_err();
        assert!(matches!(err, StorageError::Invalid(_)));
    }

    #[test]
    fn pack_int_key_orders_composites_and_rejects_overflow() {
        let bits = [16, 8, 40];
        let a = pack_int_key(&[1, 255, 7], &bits).unwrap();
        let b = pack_int_key(&[2, 0, 0], &bits).unwrap();
        assert!(a < b);
        assert_eq!(unpack_int_key(a, &bits), vec![1, 255, 7]);
        assert_eq!(pack_int_key(&[1, 256, 0], &bits), None);
        assert_eq!(pack_int_key(&[1, 2], &[40, 40]), None);
        assert_eq!(pack_int_key(&[u64::MAX], &[64]), Some(u64::MAX));
        assert_eq!(unpack_int_key(u64::MAX, &[64]), vec![u64::MAX]);
    }

    #[test]
    fn prefix_successor_bounds_every_extension() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(&[1, 0xFF, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF]), None);
        assert_eq!(prefix_successor(&[]), None);
    }

    proptest! {
        #[test]
        fn encoding_preserves_logical_order(a in key_strategy(), b in key_strategy()) {
            let (ea, eb) = (encode_owned(&a), encode_owned(&b));
            prop_assert_eq!(ea.cmp(&eb), logical_cmp(&a, &b));
            let order = SchemaKeyOrder::new(SCHEMA.to_vec());
            prop_assert_eq!(order.compare(&ea, &eb), logical_cmp(&a, &b));
        }

        #[test]
        fn schema_order_agrees_with_memcmp_on_prefixes_and_suffixes(
            a in key_strategy(), b in key_strategy(),
            cut_a in 0usize..40, cut_b in 0usize..40,
            suffix_a in proptest::collection::vec(any::<u8>(), 0..9),
            suffix_b in proptest::collection::vec(any::<u8>(), 0..9),
        ) {
            let mut ea = encode_owned(&a);
            let mut eb = encode_owned(&b);
            // Either a prefix of the key, or the full key with a value suffix.
            if cut_a < ea.len() { ea.truncate(cut_a) } else { ea.extend(&suffix_a) }
            if cut_b < eb.len() { eb.truncate(cut_b) } else { eb.extend(&suffix_b) }
            let order = SchemaKeyOrder::new(SCHEMA.to_vec());
            prop_assert_eq!(order.compare(&ea, &eb), ea.cmp(&eb));
        }

        #[test]
        fn schema_order_agrees_with_memcmp_on_arbitrary_bytes(
            a in proptest::collection::vec(prop_oneof![0u8..3, any::<u8>()], 0..24),
            b in proptest::collection::vec(prop_oneof![0u8..3, any::<u8>()], 0..24),
        ) {
            let order = SchemaKeyOrder::new(SCHEMA.to_vec());
            prop_assert_eq!(order.compare(&a, &b), a.cmp(&b));
        }

        #[test]
        fn int_order_agrees_with_memcmp(
            a in proptest::collection::vec(any::<u8>(), 0..17),
            b in proptest::collection::vec(any::<u8>(), 0..17),
            x in any::<u64>(), y in any::<u64>(),
        ) {
            prop_assert_eq!(IntKeyOrder.compare(&a, &b), a.cmp(&b));
            let (ex, ey) = (IntKeyOrder::encode(x), IntKeyOrder::encode(y));
            prop_assert_eq!(IntKeyOrder.compare(&ex, &ey), x.cmp(&y));
        }

        #[test]
        fn successor_is_greater_than_extensions(
            p in proptest::collection::vec(any::<u8>(), 1..6),
            ext in proptest::collection::vec(any::<u8>(), 0..6),
            other in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            let mut k = p.clone();
            k.extend(&ext);
            if let Some(s) = prefix_successor(&p) {
                prop_assert!(k < s);
                // Anything below the successor is <= p or starts with p.
                if other < s {
                    prop_assert!(other <= p || other.starts_with(&p));
                }
            }
        }
    }
}
