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

    /// Binary search over `n` keys in ascending order, `key(i)` giving key `i`: the number of
    /// keys `< probe` (`strict`) or `<= probe` (`!strict`), and whether the search met a key
    /// equal to the probe at the edge of that count ([`Rank::found`]). `Err(i)` when `key(i)`
    /// is `None` (a cell that does not lie inside its page). An order may override it to
    /// prepare the probe once per search instead of once per comparison; the result must be
    /// the same.
    #[inline]
    fn rank<'k>(
        &self,
        n: usize,
        key: impl Fn(usize) -> Option<&'k [u8]>,
        probe: &[u8],
        strict: bool,
    ) -> Result<Rank, usize> {
        if strict {
            plain_rank::<true, Self>(self, n, &key, probe)
        } else {
            plain_rank::<false, Self>(self, n, &key, probe)
        }
    }

    /// [`KeyOrder::rank`], told by `guide` where the keys lie (an order that interpolates
    /// starts at the slot it points to). The result must be the same with or without it.
    #[inline]
    fn rank_guided<'k>(
        &self,
        n: usize,
        key: impl Fn(usize) -> Option<&'k [u8]>,
        probe: &[u8],
        strict: bool,
        guide: Option<Guide>,
    ) -> Result<Rank, usize> {
        let _ = guide;
        self.rank(n, key, probe, strict)
    }

    /// The [`Guide`] to the keys between separators `low` and `high` (`low < high`), if this
    /// order interpolates.
    #[inline]
    fn guide(&self, low: &[u8], high: &[u8]) -> Option<Guide> {
        let _ = (low, high);
        None
    }
}

/// What a parent node knows of the keys in one of its children: they, and any probe that
/// descends there, lie between the two separators around the child, which first differ in
/// 8-byte word `word` of their integer prefix, holding `low` and `high` there. The child's
/// search then guesses its first slot from the probe's share of `low..high` without
/// comparing its own first and last keys first: two cache misses on a slot and two on cells
/// fewer in a node that is cold ([`Search::interpolating`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guide {
    word: usize,
    low: u64,
    high: u64,
}

impl Guide {
    /// The guide of separators `low` and `high` read as integer words (at most `words` of
    /// them): `None` where they have no differing word within that prefix.
    #[inline(always)]
    fn between(low: &[u8], high: &[u8], words: usize) -> Option<Guide> {
        let (low_words, _) = low.as_chunks::<8>();
        let (high_words, _) = high.as_chunks::<8>();
        let word = low_words
            .iter()
            .zip(high_words)
            .take(words)
            .position(|(a, b)| a != b)?;
        Some(Guide {
            word,
            low: u64::from_be_bytes(low_words[word]),
            high: u64::from_be_bytes(high_words[word]),
        })
    }

    /// The slot `probe` (an encoded key) would have in a child whose keys start at the low
    /// separator and run on without gaps in the guide's word (the ids of a table loaded in
    /// order: an item's, a district's customers'): its distance from that separator. Read
    /// before the child is, to prefetch where its search will look; `None` where the probe
    /// has no such word or lies outside the separators.
    #[inline(always)]
    pub(crate) fn dense_slot(&self, probe: &[u8]) -> Option<usize> {
        let (words, _) = probe.as_chunks::<8>();
        let p = u64::from_be_bytes(*words.get(self.word)?);
        (self.low <= p && p < self.high).then(|| usize::try_from(p - self.low).ok())?
    }

    /// [`Guide::slot`] for keys that are one `u64` (the guide's word is their first).
    #[inline(always)]
    pub(crate) fn slot_u64(&self, n: usize, probe: u64) -> Option<usize> {
        if self.word != 0 {
            return None;
        }
        self.slot(n, probe)
    }

    /// The slot among `n` that the probe's value `probe` in the guide's word points to, as
    /// if the separators stood at slots `-1` and `n`.
    #[inline(always)]
    fn slot(&self, n: usize, probe: u64) -> Option<usize> {
        if n < INTERPOLATE_MIN_KEYS {
            return None;
        }
        interpolated_slot((self.low, probe, self.high), 0, n)
    }
}

/// The slot in `lo..hi` that `probe`'s share of `low..high` points to, where `low` and `high`
/// are the values of the keys just outside the range (at slots `lo - 1` and `hi`); `None`
/// where the range is empty or the probe is not between two different values.
#[inline(always)]
fn interpolated_slot((low, probe, high): (u64, u64, u64), lo: usize, hi: usize) -> Option<usize> {
    if lo >= hi || !(low <= probe && probe <= high && low < high) {
        return None;
    }
    let share = (probe - low) as f64 / (high - low) as f64;
    let span = (hi - lo + 1) as f64;
    Some(
        (lo + (share * span) as usize)
            .saturating_sub(1)
            .clamp(lo, hi - 1),
    )
}

/// The binary search of [`KeyOrder::rank`], one [`KeyOrder::compare`] per step.
#[inline(always)]
fn plain_rank<'k, const STRICT: bool, O: KeyOrder + ?Sized>(
    order: &O,
    n: usize,
    key: &impl Fn(usize) -> Option<&'k [u8]>,
    probe: &[u8],
) -> Result<Rank, usize> {
    let mut search = Search::<STRICT>::new(n);
    while let Some(mid) = search.mid() {
        search.step(mid, order.compare(key(mid).ok_or(mid)?, probe), 0);
    }
    Ok(search.rank())
}

/// Where a probe falls among sorted keys: what [`KeyOrder::rank`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rank {
    /// The number of keys `< probe` (strict search) or `<= probe` (non-strict): the probe's
    /// insertion point.
    pub index: usize,
    /// Whether the key next to `index` on the probe's side — key `index` in a strict search,
    /// key `index - 1` in a non-strict one — compared equal to the probe. In a node of
    /// strictly ascending keys: whether the node holds the probe. It lets a point lookup or a
    /// duplicate check skip comparing that key a second time.
    pub found: bool,
}

/// The state of one binary search over `n` keys, shared by every [`KeyOrder::rank`]: the
/// interval `[lo, hi)` still open, and how many leading words of the probe the keys at
/// `lo - 1` and `hi` share (an order that compares word by word may skip those words: every
/// key between the bounds shares them too). `STRICT` (a compile-time constant, so that a
/// step is one comparison of the ordering) says whether keys equal to the probe go right of
/// it (`< probe` counted) or left (`<= probe` counted).
///
/// `found` follows the bound on the probe's side: `hi` in a strict search, `lo` otherwise.
/// Once the interval is empty, that bound's key is the one [`Rank::found`] speaks of, and
/// it was compared when the bound was last set (a bound never set is `0` or `n`, no key).
pub(crate) struct Search<const STRICT: bool> {
    lo: usize,
    hi: usize,
    lo_words: usize,
    hi_words: usize,
    found: bool,
}

impl<const STRICT: bool> Search<STRICT> {
    #[inline(always)]
    pub(crate) fn new(n: usize) -> Self {
        Search {
            lo: 0,
            hi: n,
            lo_words: 0,
            hi_words: 0,
            found: false,
        }
    }

    /// The key to compare next, `None` once the interval is empty.
    #[inline(always)]
    pub(crate) fn mid(&self) -> Option<usize> {
        (self.lo < self.hi).then(|| self.lo + (self.hi - self.lo) / 2)
    }

    /// The interval `[lo, hi)` still open.
    #[inline(always)]
    pub(crate) fn interval(&self) -> (usize, usize) {
        (self.lo, self.hi)
    }

    /// Leading probe words shared by every key left in the interval.
    #[inline(always)]
    pub(crate) fn shared_words(&self) -> usize {
        self.lo_words.min(self.hi_words)
    }

    /// Narrows the interval by the key at `mid` (what [`Search::mid`] returned, or any other
    /// index inside the interval), which compared `ord` to the probe and shares its first
    /// `words` words with it.
    #[inline(always)]
    pub(crate) fn step(&mut self, mid: usize, ord: Ordering, words: usize) {
        let right = if STRICT {
            ord == Ordering::Less
        } else {
            ord != Ordering::Greater
        };
        self.narrow(mid, right, ord == Ordering::Equal, words);
    }

    /// [`Search::step`] with the comparison already reduced: `right` when the probe lies
    /// right of key `mid` (the key is `< probe`, or `<= probe` in a non-strict search),
    /// `equal` when the key equals the probe.
    #[inline(always)]
    pub(crate) fn narrow(&mut self, mid: usize, right: bool, equal: bool, words: usize) {
        if right {
            self.lo = mid + 1;
            self.lo_words = words;
            if !STRICT {
                self.found = equal;
            }
        } else {
            self.hi = mid;
            self.hi_words = words;
            if STRICT {
                self.found = equal;
            }
        }
    }

    #[inline(always)]
    pub(crate) fn rank(&self) -> Rank {
        Rank {
            index: self.lo,
            found: self.found,
        }
    }

    /// A search of `n` keys by interpolation, then bisection.
    ///
    /// `step(search, i)` compares key `i` with the probe and narrows `search` by it (any `i`
    /// inside the open interval). `coordinate(search)` tells, once the first and last keys
    /// are compared, where the probe lies between the interval's bounding keys as numbers:
    /// `(low, probe, high)`, their values in the first word in which the bounds may differ
    /// from the probe, or `None` where it cannot (a key without that word).
    ///
    /// With at least [`INTERPOLATE_MIN_KEYS`] keys the probe's share of `low..high` guesses
    /// its slot, and a gallop from the guess (1, 2, 4, … slots toward the probe) brackets it;
    /// bisection finishes. Integer keys (TPC-C's, TPC-B's, YCSB's) are dense within a node,
    /// so the guess is usually right and a search compares about 4 keys instead of about 9
    /// in a full leaf; more to the point, the bisection's last steps, each a cache miss on a
    /// slot and another on its cell, become about one miss near the guess. Keys spread
    /// unevenly cost at most about twice the bisection's comparisons, plus three. Every
    /// comparison narrows this same interval as bisection's do, so the rank is the same
    /// wherever the guess lands.
    ///
    /// `step` is called from one place, so that it is inlined once.
    ///
    /// With `start` (a [`Guide`]'s slot) the first and last keys are not compared: the search
    /// begins with the gallop from `start`.
    #[inline(always)]
    pub(crate) fn interpolating<E>(
        n: usize,
        start: Option<usize>,
        mut step: impl FnMut(&mut Self, usize) -> Result<(), E>,
        coordinate: impl Fn(&Self) -> Option<(u64, u64, u64)>,
    ) -> Result<Self, E> {
        let mut search = Self::new(n);
        let mut plan = match start {
            Some(slot) if slot < n => Plan::Guess(slot),
            _ if n >= INTERPOLATE_MIN_KEYS => Plan::First,
            _ => Plan::Bisect,
        };
        while search.lo < search.hi {
            let i = match plan {
                Plan::First => 0,
                Plan::Last => n - 1,
                Plan::Guess(guess) => guess,
                Plan::Gallop {
                    from,
                    right,
                    distance,
                } if right => (from + distance).min(search.hi - 1),
                Plan::Gallop { from, distance, .. } => from.saturating_sub(distance).max(search.lo),
                Plan::Bisect => search.lo + (search.hi - search.lo) / 2,
            };
            step(&mut search, i)?;
            plan = match plan {
                Plan::First => Plan::Last,
                Plan::Last => search.guess(&coordinate).map_or(Plan::Bisect, Plan::Guess),
                Plan::Guess(from) => Plan::Gallop {
                    from,
                    right: search.lo == from + 1,
                    distance: 1,
                },
                Plan::Gallop {
                    from,
                    right,
                    distance,
                } => {
                    let went_on = if right {
                        search.lo == i + 1
                    } else {
                        search.hi == i
                    };
                    if went_on {
                        Plan::Gallop {
                            from,
                            right,
                            distance: distance * 2,
                        }
                    } else {
                        Plan::Bisect
                    }
                }
                Plan::Bisect => Plan::Bisect,
            };
        }
        Ok(search)
    }

    /// The slot the probe's share of its bounds' key space points at, inside the interval;
    /// `None` where the bounds give no numbers or no room.
    #[inline(always)]
    fn guess(&self, coordinate: impl Fn(&Self) -> Option<(u64, u64, u64)>) -> Option<usize> {
        if self.lo >= self.hi || self.lo == 0 {
            return None;
        }
        interpolated_slot(coordinate(self)?, self.lo, self.hi)
    }
}

/// Which key [`Search::interpolating`] compares next.
#[derive(Clone, Copy)]
enum Plan {
    First,
    Last,
    Guess(usize),
    /// `distance` slots from the guess `from`, toward the probe.
    Gallop {
        from: usize,
        right: bool,
        distance: usize,
    },
    Bisect,
}

/// Nodes of fewer keys are searched by bisection alone ([`Search::interpolating`]): in a
/// small node the two endpoint comparisons interpolation starts with cost more than they
/// save.
pub const INTERPOLATE_MIN_KEYS: usize = 16;

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
                if contains_nul(s) {
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

/// Whether `bytes` holds a NUL (the string terminator of the key encoding, which stored
/// strings may therefore not contain). Eight bytes at a time: a word has a zero byte exactly
/// when `(w − 0x01…01) & !w & 0x80…80` is non-zero. Short strings are the common case, where
/// this is several times cheaper than `memchr`'s setup.
#[inline]
pub fn contains_nul(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let (words, rest) = bytes.as_chunks::<8>();
    words.iter().any(|w| {
        let w = u64::from_le_bytes(*w);
        w.wrapping_sub(ONES) & !w & HIGHS != 0
    }) || rest.contains(&0)
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

/// Bytes a [`KeyBuf`] holds without allocating.
pub const KEY_BUF_INLINE: usize = 64;

/// A key built on the stack when it has at most [`KEY_BUF_INLINE`] bytes (the common case:
/// the successor of a scan bound, a non-unique entry `key ++ value`) and on the heap
/// otherwise, so that building one on a hot path allocates nothing.
#[derive(Clone)]
pub struct KeyBuf {
    len: usize,
    inline: [u8; KEY_BUF_INLINE],
    /// The bytes when `len > KEY_BUF_INLINE`; empty otherwise.
    heap: Vec<u8>,
}

impl KeyBuf {
    /// The concatenation of `parts`.
    pub fn from_parts(parts: &[&[u8]]) -> KeyBuf {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let mut buf = KeyBuf {
            len,
            inline: [0; KEY_BUF_INLINE],
            heap: Vec::new(),
        };
        if len <= KEY_BUF_INLINE {
            let mut at = 0;
            for part in parts {
                buf.inline[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
        } else {
            buf.heap = parts.concat();
        }
        buf
    }

    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        if self.len <= KEY_BUF_INLINE {
            &self.inline[..self.len]
        } else {
            &self.heap
        }
    }
}

impl std::ops::Deref for KeyBuf {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for KeyBuf {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for KeyBuf {}

impl std::fmt::Debug for KeyBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_slice().fmt(f)
    }
}

/// The successor of `prefix` (see [`prefix_successor`]) in a [`KeyBuf`], without allocating
/// for short prefixes.
pub fn prefix_successor_buf(prefix: &[u8]) -> Option<KeyBuf> {
    let last = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut out = KeyBuf::from_parts(&[&prefix[..=last]]);
    if out.len <= KEY_BUF_INLINE {
        out.inline[last] += 1;
    } else {
        out.heap[last] += 1;
    }
    Some(out)
}

/// A key that is either borrowed from the caller or built (a bound's successor, a
/// non-unique entry): a `Cow` whose owned form does not allocate when short.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyRef<'a> {
    Borrowed(&'a [u8]),
    Built(KeyBuf),
}

impl std::ops::Deref for KeyRef<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            KeyRef::Borrowed(k) => k,
            KeyRef::Built(k) => k.as_slice(),
        }
    }
}

/// A scan's bounds in normal form: `lo <= key < hi` (`None`: unbounded), for any order that
/// agrees with `memcmp`. Bounds given by the caller are borrowed, successors built in a
/// [`KeyBuf`]: normalising allocates nothing for keys of up to [`KEY_BUF_INLINE`] bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange<'a> {
    pub lo: Option<KeyRef<'a>>,
    pub hi: Option<KeyRef<'a>>,
}

impl<'a> KeyRange<'a> {
    /// Normalises scan bounds, where a bound may be a prefix of keys: with `s` the
    /// [`prefix_successor`] of `p`, low `Included(p)` is `key >= p`, low `Excluded(p)` is
    /// `key >= s` (it skips every key starting with `p`), high `Included(p)` is `key < s` (it
    /// takes every key starting with `p`), high `Excluded(p)` is `key < p`.
    ///
    /// Returns `None` when the range is empty.
    pub fn new(lo: Bound<&'a [u8]>, hi: Bound<&'a [u8]>) -> Option<KeyRange<'a>> {
        let lo = match lo {
            Bound::Included(p) => Some(KeyRef::Borrowed(p)),
            Bound::Excluded(p) => Some(KeyRef::Built(prefix_successor_buf(p)?)),
            Bound::Unbounded => None,
        };
        let hi = match hi {
            Bound::Included(p) => prefix_successor_buf(p).map(KeyRef::Built),
            Bound::Excluded(p) => Some(KeyRef::Borrowed(p)),
            Bound::Unbounded => None,
        };
        match (&lo, &hi) {
            (Some(l), Some(h)) if **l >= **h => None,
            _ => Some(KeyRange { lo, hi }),
        }
    }
}

/// The generic comparator: interprets the key schema field by field.
///
/// The schema is read once at construction into `int_prefix`, the number of integer fields
/// before the first string field: those compare as big-endian `u64` words with one length
/// check for all of them, the rest field by field. A node search ([`KeyOrder::rank`]) skips
/// the words that both bounds of the search interval already share with the probe (every key
/// between two keys that start with the same bytes starts with them too, the order being
/// `memcmp`'s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaKeyOrder {
    parts: Vec<KeyPart>,
    /// Leading `Int` parts (before the first `Str`).
    int_prefix: usize,
}

impl SchemaKeyOrder {
    pub fn new(parts: Vec<KeyPart>) -> Self {
        let int_prefix = parts.iter().take_while(|p| **p == KeyPart::Int).count();
        SchemaKeyOrder { parts, int_prefix }
    }

    pub fn parts(&self) -> &[KeyPart] {
        &self.parts
    }

    /// [`KeyOrder::compare`] where `a` or `b` ends inside the integer prefix: the words both
    /// have, as words, then the rest bytewise. Up to the end of the prefix this order *is*
    /// `memcmp`'s (the integers' encoding is order-preserving), so no schema is needed; it
    /// only saves walking the schema part by part, as [`SchemaKeyOrder::compare_parts`]
    /// would, for each key a scan's prefix bound is compared with.
    #[inline]
    fn compare_in_prefix(a: &[u8], b: &[u8]) -> Ordering {
        let words = a.len().min(b.len()) / 8;
        let (a_ints, a_rest) = a.split_at(8 * words);
        let (b_ints, b_rest) = b.split_at(8 * words);
        let (a_words, _) = a_ints.as_chunks::<8>();
        let (b_words, _) = b_ints.as_chunks::<8>();
        for (x, y) in a_words.iter().zip(b_words) {
            if x != y {
                return u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y));
            }
        }
        bytewise(a_rest, b_rest)
    }

    /// Compares `a` and `b` under the schema `parts` (a suffix of the full schema, when the
    /// fields before it compared equal), then bytewise past it.
    #[inline]
    fn compare_parts(parts: &[KeyPart], a: &[u8], b: &[u8]) -> Ordering {
        let (mut a, mut b) = (a, b);
        for part in parts {
            match part {
                KeyPart::Int => {
                    let (Some((x, a_rest)), Some((y, b_rest))) =
                        (a.split_first_chunk::<8>(), b.split_first_chunk::<8>())
                    else {
                        // A prefix that ends inside the integer: compare what there is.
                        return a.cmp(b);
                    };
                    match u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y)) {
                        Ordering::Equal => {}
                        other => return other,
                    }
                    a = a_rest;
                    b = b_rest;
                }
                KeyPart::Str => {
                    // A string runs to its terminator, or to the end of a prefix.
                    let mut i = 0;
                    loop {
                        match (a.get(i), b.get(i)) {
                            // Both terminated at the same place: equal strings, next field.
                            (Some(0), Some(0)) => break,
                            (Some(&x), Some(&y)) if x == y => i += 1,
                            // The terminator (0) is below every string byte, so the first
                            // difference decides, terminators included.
                            (Some(x), Some(y)) => return x.cmp(y),
                            // One side ended (a prefix) first: it is smaller unless both did.
                            (None, None) => return Ordering::Equal,
                            (None, Some(_)) => return Ordering::Less,
                            (Some(_), None) => return Ordering::Greater,
                        }
                    }
                    a = &a[i + 1..];
                    b = &b[i + 1..];
                }
            }
        }
        // Past the schema (the value suffix of a non-unique entry): bytewise.
        bytewise(a, b)
    }
}

/// `a.cmp(b)`, answered without calling `memcmp` when either side is empty: the common
/// case past the schema of a unique key (both empty) and of a prefix bound.
#[inline(always)]
fn bytewise(a: &[u8], b: &[u8]) -> Ordering {
    if a.is_empty() || b.is_empty() {
        a.len().cmp(&b.len())
    } else {
        a.cmp(b)
    }
}

impl KeyOrder for SchemaKeyOrder {
    /// Walks the schema field by field: an integer field compares as one `u64` (the
    /// order-preserving encoding makes the unsigned order of its big-endian bytes the signed
    /// order of the values); a string field compares byte by byte up to its terminator, in
    /// one pass over both keys. This is the interpretive work the ladder's `btree-keys` rung
    /// removes, done without needless passes.
    ///
    /// A key that ends inside the integer prefix (a scan's prefix bound, such as the first two
    /// of a four-integer key) is compared by [`SchemaKeyOrder::compare_in_prefix`].
    #[inline]
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        let ints = self.int_prefix;
        let bytes = 8 * ints;
        let (Some((a_ints, a_rest)), Some((b_ints, b_rest))) =
            (a.split_at_checked(bytes), b.split_at_checked(bytes))
        else {
            return Self::compare_in_prefix(a, b);
        };
        let (a_words, _) = a_ints.as_chunks::<8>();
        let (b_words, _) = b_ints.as_chunks::<8>();
        for (x, y) in a_words.iter().zip(b_words) {
            if x != y {
                return u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y));
            }
        }
        Self::compare_parts(&self.parts[ints..], a_rest, b_rest)
    }

    /// The node search with the schema's integer prefix compared word by word and the words
    /// shared by both bounds of the interval skipped: after a few steps every key left
    /// between the bounds starts with the same fields as the probe, which are then not
    /// compared again. See [`SchemaKeyOrder::rank_words`].
    #[inline]
    fn rank<'k>(
        &self,
        n: usize,
        key: impl Fn(usize) -> Option<&'k [u8]>,
        probe: &[u8],
        strict: bool,
    ) -> Result<Rank, usize> {
        self.rank_guided(n, key, probe, strict, None)
    }

    #[inline]
    fn rank_guided<'k>(
        &self,
        n: usize,
        key: impl Fn(usize) -> Option<&'k [u8]>,
        probe: &[u8],
        strict: bool,
        guide: Option<Guide>,
    ) -> Result<Rank, usize> {
        if strict {
            self.rank_words::<true>(n, &key, probe, guide)
        } else {
            self.rank_words::<false>(n, &key, probe, guide)
        }
    }

    /// On the first integer word in which the separators differ.
    #[inline]
    fn guide(&self, low: &[u8], high: &[u8]) -> Option<Guide> {
        Guide::between(low, high, self.int_prefix)
    }
}

impl SchemaKeyOrder {
    /// [`KeyOrder::rank`] for this order. The probe is split into its integer words and the
    /// rest once per search; a step loads one slot, checks the key's length once for all its
    /// words and compares raw 8-byte words from the first one not known shared (byte-swapped
    /// only where they differ, to order them); only keys whose integer prefix equals the
    /// probe's go on to the rest of the schema.
    #[inline(always)]
    fn rank_words<'k, const STRICT: bool>(
        &self,
        n: usize,
        key: &impl Fn(usize) -> Option<&'k [u8]>,
        probe: &[u8],
        guide: Option<Guide>,
    ) -> Result<Rank, usize> {
        let ints = self.int_prefix;
        // The probe's whole words within the prefix: all of them, or, for a probe that ends
        // inside the prefix (a scan's prefix bound), those it has.
        let bytes = 8 * ints.min(probe.len() / 8);
        if bytes == 0 {
            // No integer prefix, or a probe shorter than one word: nothing to skip, the plain
            // search.
            return plain_rank::<STRICT, Self>(self, n, key, probe);
        }
        let (p_ints, p_rest) = probe.split_at(bytes);
        let (p_words, _) = p_ints.as_chunks::<8>();
        // After a probe that ends inside the prefix, no schema: the bytes after its words
        // compare bytewise (the order is `memcmp`'s there), which is what `compare_parts`
        // does past the parts it is given.
        let rest_parts = if bytes == 8 * ints {
            &self.parts[ints..]
        } else {
            &[]
        };
        let step = |search: &mut Search<STRICT>, i: usize| -> Result<(), usize> {
            let k = key(i).ok_or(i)?;
            let Some((k_ints, k_rest)) = k.split_at_checked(bytes) else {
                // A key shorter than the probe's words (only in a corrupt or foreign tree):
                // the general comparison, and no words known shared.
                search.step(i, self.compare(k, probe), 0);
                return Ok(());
            };
            let (k_words, _) = k_ints.as_chunks::<8>();
            let mut w = search.shared_words();
            loop {
                let (Some(x), Some(y)) = (k_words.get(w), p_words.get(w)) else {
                    // Every word equal: the fields after the prefix decide.
                    search.step(i, Self::compare_parts(rest_parts, k_rest, p_rest), w);
                    return Ok(());
                };
                if x != y {
                    // The common case: a word decides, and the key is not equal.
                    let less = u64::from_be_bytes(*x) < u64::from_be_bytes(*y);
                    search.narrow(i, less, false, w);
                    return Ok(());
                }
                w += 1;
            }
        };
        // Between the bounds, the first word not shared by both with the probe.
        let coordinate = |search: &Search<STRICT>| {
            let w = search.shared_words();
            let (lo, hi) = search.interval();
            let word = |i: usize| {
                let k = key(i)?.get(8 * w..bytes)?;
                Some(u64::from_be_bytes(*k.first_chunk()?))
            };
            Some((
                word(lo - 1)?,
                u64::from_be_bytes(*p_words.get(w)?),
                word(hi)?,
            ))
        };
        let start = guide.and_then(|g| g.slot(n, u64::from_be_bytes(*p_words.get(g.word)?)));
        Ok(Search::<STRICT>::interpolating(n, start, step, coordinate)?.rank())
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

    /// On the packed `u64`.
    #[inline]
    fn guide(&self, low: &[u8], high: &[u8]) -> Option<Guide> {
        Guide::between(low, high, 1)
    }

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

    proptest! {
        #[test]
        fn contains_nul_matches_a_plain_search(
            mut bytes in proptest::collection::vec(1u8..=255, 0..40),
            at in proptest::option::of(0usize..40),
        ) {
            if let Some(at) = at {
                if at < bytes.len() {
                    bytes[at] = 0;
                }
            }
            prop_assert_eq!(contains_nul(&bytes), bytes.contains(&0));
        }
    }

    /// A dense child's slot is the probe's distance from the low separator, in the first
    /// word where the separators differ; nothing outside them or without that word.
    #[test]
    fn dense_slot_counts_from_the_low_separator() {
        let key = |w: i64, i: i64| [encode_i64(w), encode_i64(i)].concat();
        let guide = Guide::between(&key(1, 100), &key(1, 200), 2).unwrap();
        assert_eq!(guide.dense_slot(&key(1, 100)), Some(0));
        assert_eq!(guide.dense_slot(&key(1, 150)), Some(50));
        assert_eq!(guide.dense_slot(&key(1, 199)), Some(99));
        assert_eq!(guide.dense_slot(&key(1, 200)), None);
        assert_eq!(guide.dense_slot(&key(1, 99)), None);
        // Only the first word: the probe is shorter than the guide's word.
        assert_eq!(guide.dense_slot(&encode_i64(1)), None);
        // Separators differing in the first word: the second does not count.
        let guide = Guide::between(&key(3, 7), &key(5, 1), 2).unwrap();
        assert_eq!(guide.dense_slot(&key(4, 1_000)), Some(1));
    }

    #[test]
    fn contains_nul_sees_every_position_and_no_false_zero() {
        for len in 0..20 {
            // 0x80 and 0x01 bytes are the classic false-positive traps of the word trick.
            let clean: Vec<u8> = (0..len).map(|i| [0x80, 0x01, 0xFF, 0x7F][i % 4]).collect();
            assert!(!contains_nul(&clean), "{clean:?}");
            for at in 0..len {
                let mut b = clean.clone();
                b[at] = 0;
                assert!(contains_nul(&b), "NUL at {at} of {len}");
            }
        }
    }

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

    /// How a test encodes logical keys.
    type Encoder = fn(&[OwnedField]) -> Vec<u8>;

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
    fn key_buf_and_successor_buf_match_vectors_inline_and_on_the_heap() {
        for len in [
            0,
            1,
            KEY_BUF_INLINE - 1,
            KEY_BUF_INLINE,
            KEY_BUF_INLINE + 1,
            300,
        ] {
            let a: Vec<u8> = (0..len).map(|i| (i * 7 % 256) as u8).collect();
            let b = [0xFFu8, 3, 0xFF];
            let joined = KeyBuf::from_parts(&[&a, &b]);
            assert_eq!(joined.as_slice(), [&a[..], &b[..]].concat().as_slice());
            assert_eq!(
                prefix_successor_buf(&a).as_deref(),
                prefix_successor(&a).as_deref()
            );
        }
        assert_eq!(prefix_successor_buf(&[0xFF; 100]), None);
    }

    #[test]
    fn rank_reports_an_unreadable_key() {
        let order = SchemaKeyOrder::new(vec![KeyPart::Int, KeyPart::Int]);
        let keys = [encode_i64(1), encode_i64(2)].concat();
        let probe = [encode_i64(1), encode_i64(2)].concat();
        let got = order.rank(4, |i| (i < 1).then_some(&keys[..]), &probe, true);
        assert_eq!(got, Err(2), "the first probe reads key 2, which is missing");
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
        fn schema_rank_matches_a_plain_search(
            keys in proptest::collection::vec(key_strategy(), 0..40),
            probe in key_strategy(),
            cut in 0usize..40,
            suffix in proptest::collection::vec(any::<u8>(), 0..9),
            all_int in any::<bool>(),
            strict in any::<bool>(),
            present in proptest::option::of(any::<proptest::sample::Index>()),
        ) {
            // Either the `Int, Str, Int` schema (one integer word before the string) or an
            // all-integer one (so the shared-word skipping does all the work).
            let (order, encode): (SchemaKeyOrder, Encoder) = if all_int {
                (
                    SchemaKeyOrder::new(vec![KeyPart::Int; 3]),
                    |f| f.iter().flat_map(|x| match x {
                        OwnedField::Int(v) => encode_i64(*v).to_vec(),
                        OwnedField::Str(s) => encode_i64(s.len() as i64 % 3).to_vec(),
                    }).collect(),
                )
            } else {
                (SchemaKeyOrder::new(SCHEMA.to_vec()), encode_owned)
            };
            let mut sorted: Vec<Vec<u8>> = keys.iter().map(|k| encode(k)).collect();
            sorted.sort();
            sorted.dedup();
            let mut p = encode(&probe);
            if cut < p.len() { p.truncate(cut) } else { p.extend(&suffix) }
            // Often one of the keys itself, so that `found` is exercised both ways.
            if let (Some(at), false) = (present, sorted.is_empty()) {
                p = sorted[at.index(sorted.len())].clone();
            }
            let index = sorted.partition_point(|k| if strict { *k < p } else { *k <= p });
            let found = sorted.binary_search(&p).is_ok();
            let expected = Rank { index, found };
            let got = order.rank(sorted.len(), |i| sorted.get(i).map(|k| &k[..]), &p, strict);
            prop_assert_eq!(got, Ok(expected));
            // The default search (what every other order runs) agrees too.
            let plain = BytewiseKeyOrder.rank(sorted.len(), |i| sorted.get(i).map(|k| &k[..]), &p, strict);
            prop_assert_eq!(plain, Ok(expected));
        }

        #[test]
        fn schema_rank_of_a_prefix_bound_matches_a_plain_search(
            keys in proptest::collection::vec(proptest::collection::vec(0i64..4, 4), 0..60),
            probe in proptest::collection::vec(0i64..4, 4),
            words in 1usize..4,
            strict in any::<bool>(),
        ) {
            // A scan's bound on the first one to three fields of a four-integer key (a
            // district's orders, an order's lines): the probe ends inside the integer prefix,
            // on a word's edge, among keys that share most words with it.
            let order = SchemaKeyOrder::new(vec![KeyPart::Int; 4]);
            let encode = |f: &[i64]| f.iter().flat_map(|&v| encode_i64(v)).collect::<Vec<u8>>();
            let mut sorted: Vec<Vec<u8>> = keys.iter().map(|k| encode(k)).collect();
            sorted.sort();
            sorted.dedup();
            let p = encode(&probe[..words]);
            for k in &sorted {
                prop_assert_eq!(order.compare(k, &p), k.cmp(&p));
                prop_assert_eq!(order.compare(&p, k), p.cmp(k));
            }
            let index = sorted.partition_point(|k| if strict { *k < p } else { *k <= p });
            let found = sorted.binary_search(&p).is_ok();
            let got = order.rank(sorted.len(), |i| sorted.get(i).map(|k| &k[..]), &p, strict);
            prop_assert_eq!(got, Ok(Rank { index, found }));
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
