//! Fixed-capacity strings: the kernel's text columns.
//!
//! A `FixedStr<N>` holds up to `N` bytes inline, with its length beside them, so a row is one
//! plain value with no heap pointer and copying a column is a fixed-size move:
//!
//! | field   | size     | meaning                                  |
//! |---------|----------|------------------------------------------|
//! | `len`   | 2        | bytes in use, `len <= N`                 |
//! | `bytes` | N        | the text; bytes past `len` are zero      |
//!
//! Invariant: `len <= N` and every byte past `len` is zero (so derived equality is logical
//! equality). TPC-C text is ASCII; the kernel stores whatever bytes it is given and hands them
//! back unchanged.

use crate::error::KernelError;

/// Up to `N` bytes of text stored inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FixedStr<const N: usize> {
    len: u16,
    bytes: [u8; N],
}

const _: () = assert!(
    u16::MAX as usize >= 500,
    "c_data (500 bytes) must fit the length field"
);

impl<const N: usize> Default for FixedStr<N> {
    fn default() -> Self {
        FixedStr {
            len: 0,
            bytes: [0; N],
        }
    }
}

impl<const N: usize> FixedStr<N> {
    /// The capacity in bytes.
    pub const CAPACITY: usize = N;

    /// Copies `bytes`; an error if they do not fit.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, KernelError> {
        if bytes.len() > N {
            return Err(KernelError::TooLong {
                len: bytes.len(),
                capacity: N,
            });
        }
        let mut s = FixedStr::default();
        s.bytes[..bytes.len()].copy_from_slice(bytes);
        s.len = bytes.len() as u16;
        Ok(s)
    }

    /// Copies `text`; an error if it does not fit.
    pub fn new(text: &str) -> Result<Self, KernelError> {
        FixedStr::from_bytes(text.as_bytes())
    }

    /// The bytes in use.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// The text (bytes that are not UTF-8 are shown replaced; TPC-C text is ASCII).
    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(self.as_bytes()).into_owned()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Puts `prefix` in front of the current text, keeping the first `N` bytes of the result
    /// (the spec's c_data rule: new history first, the oldest text falls off the end).
    pub fn prepend_truncating(&mut self, prefix: &[u8]) {
        let p = prefix.len().min(N);
        let kept = self.len().min(N - p);
        self.bytes.copy_within(0..kept, p);
        self.bytes[..p].copy_from_slice(&prefix[..p]);
        let new_len = p + kept;
        // Bytes that fell off the end were shifted out; nothing past `new_len` can be non-zero
        // because the old text ended at or before N, and it only moved right by `p`.
        self.len = new_len as u16;
    }

    /// Checks the representation invariant.
    pub fn check_invariants(&self) -> Result<(), KernelError> {
        if self.len() > N || self.bytes[self.len()..].iter().any(|&b| b != 0) {
            return Err(KernelError::Corrupt(
                "fixed string past its length".to_string(),
            ));
        }
        Ok(())
    }
}

impl<const N: usize> std::fmt::Debug for FixedStr<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.to_string_lossy())
    }
}

/// A small inline writer for building text without the heap (c_data prefixes, h_data).
pub(crate) struct Cursor<const N: usize> {
    pub(crate) bytes: [u8; N],
    pub(crate) len: usize,
}

impl<const N: usize> Cursor<N> {
    #[inline]
    pub(crate) fn new() -> Self {
        Cursor {
            bytes: [0; N],
            len: 0,
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        self.bytes[self.len..end].copy_from_slice(bytes);
        self.len = end;
    }

    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Appends a non-negative or negative integer in decimal.
    #[inline]
    pub(crate) fn push_int(&mut self, v: i64) {
        if v < 0 {
            self.push(b"-");
        }
        let mut digits = [0u8; 20];
        let mut n = v.unsigned_abs();
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[at..]);
    }

    /// Appends `v` as Rust's `{:.2}` would print it.
    pub(crate) fn push_money(&mut self, v: f64) {
        let cents = (v * 100.0).round();
        // Fast path: v is a whole number of cents (all TPC-C amounts are), so printing the
        // integer cents is exactly what `{:.2}` prints.
        if cents.abs() < 1e15 && cents / 100.0 == v {
            if v.is_sign_negative() {
                self.push(b"-");
            }
            let c = (cents as i64).unsigned_abs();
            self.push_int((c / 100) as i64);
            let frac = (c % 100) as u8;
            self.push(&[b'.', b'0' + frac / 10, b'0' + frac % 10]);
        } else {
            use std::fmt::Write;
            let _ = write!(self, "{v:.2}");
        }
    }
}

impl<const N: usize> std::fmt::Write for Cursor<N> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.len + s.len() > N {
            return Err(std::fmt::Error);
        }
        self.push(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_text_longer_than_the_capacity() {
        assert!(FixedStr::<2>::new("BC").is_ok());
        assert!(matches!(
            FixedStr::<2>::new("BCX"),
            Err(KernelError::TooLong {
                len: 3,
                capacity: 2
            })
        ));
    }

    #[test]
    fn prepend_keeps_the_first_n_bytes() {
        let mut s = FixedStr::<8>::new("abcdef").unwrap();
        s.prepend_truncating(b"XYZ");
        assert_eq!(s.as_bytes(), b"XYZabcde");
        s.check_invariants().unwrap();
        let mut s = FixedStr::<8>::new("ab").unwrap();
        s.prepend_truncating(b"XYZ");
        assert_eq!(s.as_bytes(), b"XYZab");
        s.check_invariants().unwrap();
    }

    proptest! {
        #[test]
        fn prepend_matches_string_truncate(old in "[a-z]{0,40}", prefix in "[A-Z0-9 |.]{0,50}") {
            let mut s = FixedStr::<40>::new(&old).unwrap();
            s.prepend_truncating(prefix.as_bytes());
            let mut model = format!("{prefix}{old}");
            model.truncate(40);
            prop_assert_eq!(s.as_bytes(), model.as_bytes());
            prop_assert!(s.check_invariants().is_ok());
        }

        #[test]
        fn money_prints_like_format(cents in -10_000_000i64..10_000_000) {
            let v = cents as f64 / 100.0;
            let mut c = Cursor::<40>::new();
            c.push_money(v);
            prop_assert_eq!(std::str::from_utf8(c.as_bytes()).unwrap(), format!("{v:.2}"));
        }

        #[test]
        fn money_prints_like_format_for_any_float(v in -1.0e6f64..1.0e6) {
            let mut c = Cursor::<40>::new();
            c.push_money(v);
            prop_assert_eq!(std::str::from_utf8(c.as_bytes()).unwrap(), format!("{v:.2}"));
        }

        #[test]
        fn integers_print_like_format(v in any::<i64>()) {
            let mut c = Cursor::<40>::new();
            c.push_int(v);
            prop_assert_eq!(std::str::from_utf8(c.as_bytes()).unwrap(), v.to_string());
        }
    }
}
