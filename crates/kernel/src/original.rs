//! The brand-generic test: does a 26–50 byte data column contain "ORIGINAL"?
//!
//! Every occurrence of the 8-byte pattern covers exactly one position `q` with
//! `q ≡ 7 (mod 8)`, and there the text holds one of the pattern's letters, at offset `j`
//! in the pattern. So only every eighth byte is read; a byte that is a pattern letter (a
//! table lookup gives the offsets it can have) proposes a start `q − j`, checked with one
//! 8-byte compare. For 50 bytes that is 6 probes instead of the 43 windows of a naive scan.

const PATTERN: [u8; 8] = *b"ORIGINAL";
const PATTERN_WORD: u64 = u64::from_le_bytes(PATTERN);

/// For each byte value, the set of offsets (bit j) at which it occurs in the pattern.
const OFFSETS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut j = 0;
    while j < PATTERN.len() {
        table[PATTERN[j] as usize] |= 1 << j;
        j += 1;
    }
    table
};

/// Whether `text` contains "ORIGINAL".
#[inline]
pub fn contains_original(text: &[u8]) -> bool {
    let mut q = PATTERN.len() - 1;
    while q < text.len() {
        let mut offsets = OFFSETS[text[q] as usize];
        while offsets != 0 {
            let j = offsets.trailing_zeros() as usize;
            offsets &= offsets - 1;
            if let Some(start) = q.checked_sub(j) {
                if let Some(window) = text.get(start..start + 8) {
                    let word = u64::from_le_bytes(window.try_into().unwrap_or([0; 8]));
                    if word == PATTERN_WORD {
                        return true;
                    }
                }
            }
        }
        q += PATTERN.len();
    }
    // A text shorter than the pattern, or with the pattern only in a final partial block,
    // is covered: an occurrence ending at or before len − 1 covers some q ≡ 7 (mod 8) that
    // is < len, so the loop above saw it.
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(text: &[u8]) -> bool {
        text.windows(8).any(|w| w == b"ORIGINAL")
    }

    #[test]
    fn finds_the_pattern_at_every_position() {
        for len in 8..=60 {
            for start in 0..=len - 8 {
                let mut text = vec![b'x'; len];
                text[start..start + 8].copy_from_slice(b"ORIGINAL");
                assert!(contains_original(&text), "len {len} start {start}");
            }
        }
        assert!(!contains_original(b"ORIGINA"));
        assert!(!contains_original(b"ORIGINALL"[1..].as_ref()));
        assert!(!contains_original(b"xxORIGINAxxxxxxxxxxxx"));
    }

    proptest! {
        #[test]
        fn agrees_with_a_naive_scan(text in "[ORIGNAL]{0,60}") {
            prop_assert_eq!(contains_original(text.as_bytes()), naive(text.as_bytes()));
        }

        #[test]
        fn agrees_on_embedded_patterns(pre in "[A-Za-z]{0,30}", post in "[A-Za-z]{0,30}") {
            let text = format!("{pre}ORIGINAL{post}");
            prop_assert!(contains_original(text.as_bytes()));
            let text = format!("{pre}{post}");
            prop_assert_eq!(contains_original(text.as_bytes()), naive(text.as_bytes()));
        }
    }
}
