//! Index keys: how the engine turns key values into the bytes an index orders.
//!
//! Two paths, fixed when a database is created (the ladder's `btree-keys` rung):
//! * **generic**: the order-preserving encoding of `storage::btree::keys` (ints as sign-flipped
//!   big-endian, strings NUL-terminated), compared by a comparator that interprets the key
//!   schema field by field;
//! * **packed integer**: an all-integer key packed into one `u64` by the bit widths the schema
//!   declares, stored big-endian, compared as one integer by hand-coded node search.
//!
//! Range bounds are built here, not in the index: a bound over a key *prefix* becomes a bound
//! over full keys (`prefix` ≤ key < successor(`prefix`)), so every index kind sees plain
//! byte-string bounds.

use std::ops::Bound;

use storage::btree::keys::{encode_i64, encode_key, prefix_successor, KeyField, KeyPart};

use crate::api::{TxError, TxResult};
use crate::record::Layout;
use crate::schema::ColumnType;
use crate::value::Value;
use txn::lock::KeyRank;

/// A value with its low `width` bits set (all 64 for `width` ≥ 64).
#[inline]
fn low_bits(width: u8) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// Appends a `width`-bit field to a packed key (the same layout as `pack_int_key`, whose
/// total-width check `KeySpec::new` did once); `None` if `value` does not fit.
#[inline]
fn push_field(packed: u64, value: u64, width: u8) -> Option<u64> {
    if width >= 64 {
        return Some(value);
    }
    if value > low_bits(width) {
        return None;
    }
    Some((packed << width) | value)
}

/// `fields` packed by `bits` (the layout of `KeySpec::encode_inner`), if every field is a
/// non-negative integer (`Some`) that fits its width.
#[inline]
fn pack_fields(fields: impl Iterator<Item = Option<i64>>, bits: &[u8]) -> Option<u64> {
    let mut packed = 0u64;
    for (field, &width) in fields.zip(bits) {
        packed = push_field(packed, u64::try_from(field?).ok()?, width)?;
    }
    Some(packed)
}

/// [`pack_fields`] of key values.
#[inline]
fn pack_ints(values: &[Value], bits: &[u8]) -> Option<u64> {
    pack_fields(values.iter().map(Value::as_int), bits)
}

/// The key of an index: which columns, and how they are encoded.
#[derive(Clone, Debug)]
pub struct KeySpec {
    /// Column positions in the table.
    pub columns: Vec<usize>,
    types: Vec<ColumnType>,
    /// `Some(bits)` when the key is packed into a `u64` (the hand-coded integer path).
    packed: Option<Vec<u8>>,
    /// Integer columns before the first other one (for [`KeySpec::rank`]).
    rank_ints: usize,
    what: String,
}

impl KeySpec {
    /// Builds the key of `columns` of a table; `packed` asks for the integer path, which is
    /// taken only if `int_bits` are declared (else the key stays generic).
    pub fn new(
        what: &str,
        layout: &Layout,
        columns: &[usize],
        int_bits: Option<&[u8]>,
        packed: bool,
    ) -> TxResult<KeySpec> {
        let types: Vec<ColumnType> = columns.iter().map(|c| layout.column_type(*c)).collect();
        let packed = match int_bits {
            Some(bits) if packed => {
                if bits.len() != columns.len() {
                    return Err(TxError::Invalid(format!(
                        "{what}: {} key bit widths for {} key columns",
                        bits.len(),
                        columns.len()
                    )));
                }
                if bits.iter().map(|b| *b as u32).sum::<u32>() > 64 {
                    return Err(TxError::Invalid(format!(
                        "{what}: key bit widths exceed 64"
                    )));
                }
                if types.iter().any(|t| *t != ColumnType::Int) {
                    return Err(TxError::Invalid(format!(
                        "{what}: a packed integer key needs integer columns"
                    )));
                }
                Some(bits.to_vec())
            }
            _ => None,
        };
        let rank_ints = types.iter().take_while(|t| **t == ColumnType::Int).count();
        Ok(KeySpec {
            columns: columns.to_vec(),
            types,
            packed,
            rank_ints,
            what: what.to_string(),
        })
    }

    /// Whether this key takes the packed-integer path.
    pub fn is_packed(&self) -> bool {
        self.packed.is_some()
    }

    /// The [`KeyRank`] of an encoded key (or range bound) of this index: a `u64` that
    /// never decreases as keys ascend, so that a key ranked below another lies below it.
    /// The lock manager compares an inserted key's rank with the floors of the locks on
    /// the key after it (see `txn::lock::KeyRank`); the finer the rank, the fewer inserts
    /// wait for locks that guard other parts of the gap.
    ///
    /// * packed: the key itself (its `u64`, exact);
    /// * leading two integer columns: each clamped to 32 bits, the first's in the high half
    ///   and, unless the first was clamped, the second's in the low (a TPC-C district is
    ///   (warehouse, district), so keys of different districts rank apart). A clamped first
    ///   column zeroes the second: two keys whose first columns clamp alike rank alike, and
    ///   the rank still never decreases;
    /// * otherwise: the first eight encoded bytes, big-endian (what `memcmp` compares
    ///   first).
    #[inline]
    pub fn rank(&self, key: &[u8]) -> KeyRank {
        // The eight bytes at `at`, zero-padded past the key's end.
        let word = |at: usize| match key.get(at..at + 8) {
            Some(bytes) => u64::from_be_bytes(bytes.try_into().unwrap_or([0; 8])),
            None => {
                let mut bytes = [0u8; 8];
                let tail = key.get(at..).unwrap_or(&[]);
                bytes[..tail.len()].copy_from_slice(tail);
                u64::from_be_bytes(bytes)
            }
        };
        if self.packed.is_some() || self.rank_ints < 2 {
            return word(0);
        }
        // An encoded integer is its value with the sign bit flipped, big-endian.
        let clamp = |w: u64| -> (u64, bool) {
            match (w ^ (1 << 63)) as i64 {
                v if v < 0 => (0, true),
                v if v >= u32::MAX as i64 => (u32::MAX as u64, true),
                v => (v as u64, false),
            }
        };
        let (high, clamped) = clamp(word(0));
        let low = if clamped { 0 } else { clamp(word(8)).0 };
        (high << 32) | low
    }

    /// A full key of integers packed into its `u64` (big-endian, this is what the index
    /// stores); `None` unless the key is packed, has `key.len()` columns, and every value
    /// fits its field.
    #[inline]
    pub fn pack(&self, key: &[i64]) -> Option<u64> {
        let bits = self.packed.as_deref()?;
        if key.len() != bits.len() {
            return None;
        }
        pack_fields(key.iter().copied().map(Some), bits)
    }

    /// The parts the generic comparator interprets.
    pub fn parts(&self) -> Vec<KeyPart> {
        self.types
            .iter()
            .map(|t| match t {
                ColumnType::Str { .. } => KeyPart::Str,
                _ => KeyPart::Int,
            })
            .collect()
    }

    /// Encodes a full key or a prefix of it (`values.len()` ≤ key columns). For a packed key
    /// the missing trailing columns are filled with `fill_high` ? all ones : zeroes.
    fn encode_inner(&self, values: &[Value], fill_high: bool, out: &mut Vec<u8>) -> TxResult<()> {
        out.clear();
        if values.len() > self.columns.len() {
            return Err(TxError::Invalid(format!(
                "{}: {} key values for a key of {} columns",
                self.what,
                values.len(),
                self.columns.len()
            )));
        }
        if let Some(bits) = &self.packed {
            let mut packed = 0u64;
            for (i, &width) in bits.iter().enumerate() {
                let value = match values.get(i) {
                    Some(Value::Int(x)) if *x >= 0 => *x as u64,
                    Some(other) => {
                        return Err(TxError::Invalid(format!(
                            "{}: packed key column {} needs a non-negative integer, got {other:?}",
                            self.what, i
                        )))
                    }
                    None if fill_high => low_bits(width),
                    None => 0,
                };
                packed = push_field(packed, value, width).ok_or_else(|| {
                    TxError::Invalid(format!(
                        "{}: key {values:?} does not fit the declared bit widths {bits:?}",
                        self.what
                    ))
                })?;
            }
            out.extend_from_slice(&packed.to_be_bytes());
            return Ok(());
        }
        let mut fields: [KeyField<'_>; 8] = [KeyField::Int(0); 8];
        if values.len() > fields.len() {
            return Err(TxError::Invalid(format!(
                "{}: keys have at most 8 columns",
                self.what
            )));
        }
        for (i, v) in values.iter().enumerate() {
            fields[i] = match (self.types[i], v) {
                (ColumnType::Int, Value::Int(x)) => KeyField::Int(*x),
                (ColumnType::Str { .. }, Value::Str(s)) => KeyField::Str(s.as_bytes()),
                (ty, other) => {
                    return Err(TxError::Invalid(format!(
                        "{}: key column {i} is {ty:?}, got {other:?}",
                        self.what
                    )))
                }
            };
        }
        encode_key(&fields[..values.len()], out)?;
        Ok(())
    }

    /// Encodes a full key. A packed key of integers is encoded inline; other keys go to
    /// [`KeySpec::encode_unpacked`], and every error to [`KeySpec::encode_general`].
    #[inline]
    pub fn encode(&self, values: &[Value], out: &mut Vec<u8>) -> TxResult<()> {
        if let Some(bits) = &self.packed {
            if values.len() == bits.len() {
                if let Some(packed) = pack_ints(values, bits) {
                    out.clear();
                    out.extend_from_slice(&packed.to_be_bytes());
                    return Ok(());
                }
            }
            return self.encode_general(values, out);
        }
        self.encode_unpacked(values, out)
    }

    /// [`KeySpec::encode`] of a generic key: all integers (the common case) encoded here, any
    /// other key by [`KeySpec::encode_general`].
    #[inline(never)]
    fn encode_unpacked(&self, values: &[Value], out: &mut Vec<u8>) -> TxResult<()> {
        if values.len() != self.columns.len() {
            return self.encode_general(values, out);
        }
        out.clear();
        for (v, t) in values.iter().zip(&self.types) {
            match (v, t) {
                (Value::Int(x), ColumnType::Int) => out.extend_from_slice(&encode_i64(*x)),
                // The general path starts the key again.
                _ => return self.encode_general(values, out),
            }
        }
        Ok(())
    }

    /// [`KeySpec::encode`] for any key, with its errors.
    #[inline(never)]
    fn encode_general(&self, values: &[Value], out: &mut Vec<u8>) -> TxResult<()> {
        if values.len() != self.columns.len() {
            return Err(TxError::Invalid(format!(
                "{}: {} key values for a key of {} columns",
                self.what,
                values.len(),
                self.columns.len()
            )));
        }
        self.encode_inner(values, false, out)
    }

    /// Encodes the key of a record image (a packed key inline, any other out of line).
    /// Forced inline: left to itself the compiler kept this call, which cost more than the
    /// packing.
    #[inline(always)]
    pub fn encode_record(&self, layout: &Layout, rec: &[u8], out: &mut Vec<u8>) -> TxResult<()> {
        if let Some(bits) = &self.packed {
            let fields = self.columns.iter().map(|c| Some(layout.read_int(rec, *c)));
            let Some(packed) = pack_fields(fields, bits) else {
                return Err(self.misfit_record());
            };
            out.clear();
            out.extend_from_slice(&packed.to_be_bytes());
            return Ok(());
        }
        self.encode_record_unpacked(layout, rec, out)
    }

    #[cold]
    #[inline(never)]
    fn misfit_record(&self) -> TxError {
        TxError::Invalid(format!(
            "{}: stored key does not fit its bit widths",
            self.what
        ))
    }

    /// [`KeySpec::encode_record`] of a generic key.
    #[inline(never)]
    fn encode_record_unpacked(
        &self,
        layout: &Layout,
        rec: &[u8],
        out: &mut Vec<u8>,
    ) -> TxResult<()> {
        out.clear();
        let mut fields: [KeyField<'_>; 8] = [KeyField::Int(0); 8];
        for (i, c) in self.columns.iter().enumerate() {
            fields[i] = match self.types[i] {
                ColumnType::Str { .. } => KeyField::Str(layout.read_str(rec, *c)),
                _ => KeyField::Int(layout.read_int(rec, *c)),
            };
        }
        encode_key(&fields[..self.columns.len()], out)?;
        Ok(())
    }

    /// Turns a bound over a key prefix into a bound over full encoded keys.
    pub fn low_bound(&self, b: Bound<&[Value]>, out: &mut Vec<u8>) -> TxResult<Bound<()>> {
        Ok(match b {
            Bound::Unbounded => Bound::Unbounded,
            Bound::Included(v) => {
                self.encode_inner(v, false, out)?;
                Bound::Included(())
            }
            Bound::Excluded(v) => {
                self.encode_inner(v, true, out)?;
                if self.packed.is_some() {
                    Bound::Excluded(())
                } else if successor(out) {
                    Bound::Included(())
                } else {
                    Bound::Excluded(())
                }
            }
        })
    }

    /// Upper bound, as [`KeySpec::low_bound`].
    pub fn high_bound(&self, b: Bound<&[Value]>, out: &mut Vec<u8>) -> TxResult<Bound<()>> {
        Ok(match b {
            Bound::Unbounded => Bound::Unbounded,
            Bound::Excluded(v) => {
                self.encode_inner(v, false, out)?;
                Bound::Excluded(())
            }
            Bound::Included(v) => {
                self.encode_inner(v, true, out)?;
                if self.packed.is_some() {
                    Bound::Included(())
                } else if successor(out) {
                    Bound::Excluded(())
                } else {
                    Bound::Unbounded
                }
            }
        })
    }
}

/// Replaces `key` by the smallest byte string greater than every string that starts with
/// `key`; false if there is none (all 0xFF).
fn successor(key: &mut Vec<u8>) -> bool {
    match prefix_successor(key) {
        Some(next) => {
            *key = next;
            true
        }
        None => false,
    }
}

/// Hash of an encoded key, naming its record lock: the key's *region* in the top byte (see
/// [`key_region`]), a hash of the whole key in the other 56 bits. (The lock table hashes the
/// name again to pick a bucket within the region's, so the hash only has to tell keys apart.)
///
/// Eight key bytes per step: xor, multiply by an odd constant, rotate. Each step is a
/// bijection of the running value for a fixed word, so two keys of equal length that differ in
/// one word differ in the full 64-bit value; cut to 56 bits they collide with probability
/// 2^-56, and two records that did would only share one lock (a needless wait, nothing lost).
/// The length seeds the hash and the tail is zero-padded. One step per word instead of
/// FNV-1a's one per byte: a generic four-integer key is 4 steps, not 32.
#[inline]
pub fn key_hash(table: u32, key: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    const LOW: u64 = (1 << 56) - 1;
    let mut h = ((u64::from(table) << 32) | key.len() as u64).wrapping_mul(K);
    let (words, tail) = key.as_chunks::<8>();
    for w in words {
        h = (h ^ u64::from_le_bytes(*w)).wrapping_mul(K).rotate_left(31);
    }
    if !tail.is_empty() {
        let mut last = [0u8; 8];
        last[..tail.len()].copy_from_slice(tail);
        h = (h ^ u64::from_le_bytes(last))
            .wrapping_mul(K)
            .rotate_left(31);
    }
    let h = h ^ (h >> 29);
    let region = words.first().map_or(h >> 56, |w| key_region(*w));
    (h & LOW) | (region << 56)
}

/// The lock-table region of a key whose first eight encoded bytes are `first`: those bytes
/// folded to one by xor. Records that share their leading column (a TPC-C warehouse, a TPC-B
/// branch: the first eight bytes of an integer key) share a region, and the lock table keeps
/// each region's record locks in buckets of their own (`txn::lock` `LockName::Record`), so
/// threads that work on different warehouses latch and write different buckets. An integer
/// leading column's region is its low byte (the encoding's sign bit lands on bit 7): small
/// consecutive values (warehouses 1, 2, 3, ...) get consecutive regions.
#[inline]
pub fn key_region(first: [u8; 8]) -> u64 {
    let v = u64::from_be_bytes(first);
    let v = v ^ (v >> 32);
    let v = v ^ (v >> 16);
    (v ^ (v >> 8)) & 0xff
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key of a 100 × 100,000 grid of generic two-integer keys (stock's shape) names a
    /// different lock, in one table and across two.
    #[test]
    fn key_hash_tells_a_grid_of_keys_apart() {
        let mut seen = std::collections::HashSet::new();
        let mut key = Vec::new();
        for table in [3u32, 4] {
            for w in 0..100i64 {
                for i in (0..100_000i64).step_by(7) {
                    key.clear();
                    encode_key(&[KeyField::Int(w), KeyField::Int(i)], &mut key).unwrap();
                    assert!(
                        seen.insert(key_hash(table, &key)),
                        "collision at {table} {w} {i}"
                    );
                }
            }
        }
    }

    /// Keys sharing their leading integer share a region; consecutive leading integers (the
    /// warehouses of threads 1, 2, 3, ...) have distinct regions in every power-of-two count
    /// of regions up to 128.
    #[test]
    fn a_keys_region_is_its_leading_integer() {
        let mut key = Vec::new();
        let mut region = |w: i64, i: i64| {
            key.clear();
            encode_key(&[KeyField::Int(w), KeyField::Int(i)], &mut key).unwrap();
            key_hash(9, &key) >> 56
        };
        for w in 1..=64i64 {
            let r = region(w, 1);
            assert_eq!(r, region(w, 99_999), "warehouse {w}");
            assert_eq!(r, (w as u64 & 0xff) ^ 0x80, "warehouse {w}");
        }
        for regions in [2u64, 4, 8, 16, 32, 64, 128] {
            let seen: std::collections::HashSet<u64> = (1..=regions as i64)
                .map(|w| region(w, 7) & (regions - 1))
                .collect();
            assert_eq!(seen.len() as u64, regions, "{regions} regions");
        }
    }

    proptest::proptest! {
        /// Keys of equal length that differ in one 8-byte word (or in the tail) do not collide
        /// (they could, with probability 2^-56: see `key_hash`).
        #[test]
        fn key_hash_separates_keys_differing_in_one_word(
            key in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..40),
            at in proptest::prelude::any::<proptest::sample::Index>(),
            flip in 1u8..=255,
        ) {
            let mut other = key.clone();
            other[at.index(key.len())] ^= flip;
            proptest::prop_assert_ne!(key_hash(7, &key), key_hash(7, &other));
        }
    }

    proptest::proptest! {
        /// Field-by-field packing gives exactly `pack_int_key`'s result, and refuses exactly
        /// what it refuses, for widths that sum to at most 64.
        #[test]
        fn packing_matches_pack_int_key(
            fields in proptest::collection::vec((1u8..=24, proptest::prelude::any::<u64>()), 1..=3),
            shift in 0u32..30,
        ) {
            let bits: Vec<u8> = fields.iter().map(|f| f.0).collect();
            // `KeySpec::new` refuses wider keys once, so packing need not check the total.
            proptest::prop_assume!(bits.iter().map(|&b| u32::from(b)).sum::<u32>() <= 64);
            // Mostly values that fit, sometimes ones that do not.
            let values: Vec<u64> = fields.iter().map(|&(w, v)| v >> (64 - u32::from(w)).saturating_sub(shift)).collect();
            let ours = bits
                .iter()
                .zip(&values)
                .try_fold(0u64, |packed, (&w, &v)| push_field(packed, v, w));
            proptest::prop_assert_eq!(ours, storage::btree::keys::pack_int_key(&values, &bits));
        }
    }

    proptest::proptest! {
        /// The inline encoding of an all-integer key is byte for byte the general one, packed
        /// or generic, and a value the packed widths cannot hold (negative, too wide, or not
        /// an integer) still gets the general path's error.
        #[test]
        fn inline_key_encoding_matches_the_general_one(
            a in -5i64..70_000,
            b in -5i64..40,
            text in proptest::prelude::any::<bool>(),
        ) {
            let schema = crate::schema::TableSchema::new("t")
                .int("a")
                .int("b")
                .string("s", 8)
                .key(&["a", "b"]);
            let layout = Layout::new(&schema);
            let values = [Value::Int(a), if text { Value::Str("x".into()) } else { Value::Int(b) }];
            for packed in [true, false] {
                let spec = KeySpec::new("k", &layout, &[0, 1], Some(&[16, 5]), packed).unwrap();
                let (mut fast, mut general) = (Vec::new(), Vec::new());
                let inline = spec.encode(&values, &mut fast);
                let reference = spec.encode_general(&values, &mut general);
                proptest::prop_assert_eq!(inline.is_ok(), reference.is_ok());
                if let (Err(x), Err(y)) = (&inline, &reference) {
                    proptest::prop_assert_eq!(x.to_string(), y.to_string());
                } else {
                    proptest::prop_assert_eq!(&fast, &general);
                }
            }
        }
    }

    proptest::proptest! {
        /// A key packed from integers (a prefetch hint's) is the general encoding's `u64`
        /// when that encoding packs, and refused exactly when it does not: a value that is
        /// negative or too wide, a wrong number of columns, or a key that is not packed.
        #[test]
        fn packing_integers_matches_the_encoding(
            a in -5i64..70_000,
            b in -5i64..40,
            columns in 1usize..=3,
        ) {
            let schema = crate::schema::TableSchema::new("t")
                .int("a")
                .int("b")
                .key(&["a", "b"]);
            let layout = Layout::new(&schema);
            let key = &[a, b, 7][..columns];
            let values: Vec<Value> = key.iter().map(|&x| Value::Int(x)).collect();
            let spec = KeySpec::new("k", &layout, &[0, 1], Some(&[16, 5]), true).unwrap();
            let mut bytes = Vec::new();
            let encoded = spec
                .encode(&values, &mut bytes)
                .ok()
                .filter(|()| columns == 2)
                .map(|()| u64::from_be_bytes(bytes.as_slice().try_into().unwrap()));
            proptest::prop_assert_eq!(spec.pack(key), encoded);
            let generic = KeySpec::new("k", &layout, &[0, 1], Some(&[16, 5]), false).unwrap();
            proptest::prop_assert_eq!(generic.pack(key), None);
        }
    }

    proptest::proptest! {
        /// A rank never decreases as keys ascend (in the order the index keeps: the encoded
        /// bytes' `memcmp`), for every kind of key: packed, two leading integers (values
        /// reaching past the 32 bits each keeps, and below zero), a string first; range
        /// bounds over a prefix included.
        #[test]
        fn a_rank_never_decreases_as_keys_ascend(
            keys in proptest::collection::vec(
                (-3i64..5_000_000_000, -3i64..5_000_000_000, 0i64..40, "[a-c]{0,3}"),
                2..40,
            ),
        ) {
            let schema = crate::schema::TableSchema::new("t")
                .int("a")
                .int("b")
                .int("c")
                .string("s", 8)
                .key(&["a", "b", "c"]);
            let layout = Layout::new(&schema);
            let specs = [
                KeySpec::new("ints", &layout, &[0, 1, 2], None, false).unwrap(),
                KeySpec::new("one int", &layout, &[0, 3], None, false).unwrap(),
                KeySpec::new("string first", &layout, &[3, 0], None, false).unwrap(),
                KeySpec::new("packed", &layout, &[2, 2], Some(&[30, 30]), true).unwrap(),
            ];
            for spec in &specs {
                let mut encoded: Vec<Vec<u8>> = Vec::new();
                for (a, b, c, text) in &keys {
                    let all = [
                        Value::Int(*a),
                        Value::Int(*b),
                        Value::Int(*c),
                        Value::Str(text.clone()),
                    ];
                    let values: Vec<Value> = if spec.is_packed() {
                        // Two fields of 30 bits: non-negative values that fit.
                        vec![Value::Int(*c), Value::Int(b.rem_euclid(1 << 30))]
                    } else {
                        spec.columns.iter().map(|&col| all[col].clone()).collect()
                    };
                    for len in 1..=values.len() {
                        let mut out = Vec::new();
                        let bound = std::ops::Bound::Included(&values[..len]);
                        if spec.low_bound(bound, &mut out).is_ok() {
                            encoded.push(out);
                        }
                    }
                }
                encoded.sort();
                for pair in encoded.windows(2) {
                    proptest::prop_assert!(
                        spec.rank(&pair[0]) <= spec.rank(&pair[1]),
                        "{}: {:?} ranks above {:?}",
                        spec.what,
                        pair[0],
                        pair[1]
                    );
                }
            }
        }
    }

    #[test]
    fn keys_of_two_tpcc_districts_rank_apart_and_a_district_ranks_from_its_prefix() {
        let schema = crate::schema::TableSchema::new("new_order")
            .int("w")
            .int("d")
            .int("o")
            .key(&["w", "d", "o"]);
        let layout = Layout::new(&schema);
        let spec = KeySpec::new("k", &layout, &[0, 1, 2], None, false).unwrap();
        let rank = |values: &[i64]| {
            let values: Vec<Value> = values.iter().map(|&v| Value::Int(v)).collect();
            let mut out = Vec::new();
            spec.low_bound(std::ops::Bound::Included(&values), &mut out)
                .unwrap();
            spec.rank(&out)
        };
        // The end of district 3 lies below the start of district 4's range.
        assert!(rank(&[1, 3, 3_001]) < rank(&[1, 4]));
        assert!(rank(&[1, 3, 3_001]) < rank(&[1, 4, 2_101]));
        assert_eq!(rank(&[1, 4]), rank(&[1, 4, 2_101]));
        assert!(rank(&[1, 10, 9]) < rank(&[2, 1]));
    }

    #[test]
    fn successor_covers_every_extension() {
        let mut k = vec![1, 2, 0xFF];
        assert!(successor(&mut k));
        assert_eq!(k, vec![1, 3]);
        let mut all = vec![0xFF, 0xFF];
        assert!(!successor(&mut all));
    }
}
