//! Fixed-layout record codec.
//!
//! Every record of a table has the same size; every column sits at a fixed offset, so a read
//! decodes only the columns it asks for and an update overwrites its columns in place (and the
//! redo log carries only those bytes).
//!
//! | offset            | size          | field                                        |
//! |------------------:|--------------:|----------------------------------------------|
//! | 0                 | ceil(n/8)     | null bitmap: bit i set = column i is NULL    |
//! | column offset     | 8             | `Int`: i64 little-endian                     |
//! | column offset     | 8             | `Float`: f64 little-endian                   |
//! | column offset     | 2 + max_len   | `Str`: u16 length, then the bytes, zero-padded |

use storage::btree::keys::contains_nul;

use crate::api::{TxError, TxResult};
use crate::schema::{ColumnType, TableSchema};
use crate::value::Value;

/// Where one column lives in a record, and what it may hold.
#[derive(Clone, Copy, Debug)]
struct Slot {
    offset: usize,
    width: usize,
    ty: ColumnType,
    nullable: bool,
}

/// Where each column of a table lives in its records.
#[derive(Clone, Debug)]
pub struct Layout {
    slots: Vec<Slot>,
    names: Vec<String>,
    size: usize,
    /// Bit `c` set: column `c` (< 64) is nullable.
    nullable_mask: u64,
}

impl Layout {
    pub fn new(schema: &TableSchema) -> Layout {
        let n = schema.columns.len();
        let mut at = n.div_ceil(8); // the null bitmap
        let mut slots = Vec::with_capacity(n);
        for c in &schema.columns {
            let width = Self::width(c.ty);
            slots.push(Slot {
                offset: at,
                width,
                ty: c.ty,
                nullable: c.nullable,
            });
            at += width;
        }
        let nullable_mask = schema
            .columns
            .iter()
            .take(64)
            .enumerate()
            .filter(|(_, c)| c.nullable)
            .fold(0u64, |m, (i, _)| m | 1 << i);
        Layout {
            slots,
            names: schema.columns.iter().map(|c| c.name.clone()).collect(),
            size: at,
            nullable_mask,
        }
    }

    fn width(ty: ColumnType) -> usize {
        match ty {
            ColumnType::Int | ColumnType::Float => 8,
            ColumnType::Str { max_len } => 2 + max_len as usize,
        }
    }

    /// Bytes in every record of this table.
    pub fn record_size(&self) -> usize {
        self.size
    }

    pub fn columns(&self) -> usize {
        self.slots.len()
    }

    /// Bytes of the null bitmap at the start of every record (one bit per column).
    pub fn bitmap_len(&self) -> usize {
        self.slots.len().div_ceil(8)
    }

    /// Bit `c` set for each nullable column `c` among the first 64.
    pub fn nullable_mask(&self) -> u64 {
        self.nullable_mask
    }

    /// Byte range of column `col` in a record (the null bitmap byte is separate).
    pub fn column_range(&self, col: usize) -> std::ops::Range<usize> {
        let slot = &self.slots[col];
        slot.offset..slot.offset + slot.width
    }

    /// Encodes a full row. The image starts zeroed (every null bit clear, every string
    /// padded), so integers, floats and strings are stored with plain copies; NULLs and
    /// anything unusual go through [`Layout::write_column`], which also reports bad values.
    pub fn encode(&self, row: &[Value], out: &mut Vec<u8>) -> TxResult<()> {
        if row.len() != self.slots.len() {
            return Err(TxError::Invalid(format!(
                "row has {} values, table has {} columns",
                row.len(),
                self.slots.len()
            )));
        }
        out.clear();
        out.resize(self.size, 0);
        for (col, (slot, v)) in self.slots.iter().zip(row).enumerate() {
            let at = slot.offset;
            match (slot.ty, v) {
                (ColumnType::Int, Value::Int(i)) => {
                    out[at..at + 8].copy_from_slice(&i.to_le_bytes());
                }
                (ColumnType::Float, Value::Float(f)) => {
                    out[at..at + 8].copy_from_slice(&f.to_le_bytes());
                }
                (ColumnType::Str { max_len }, Value::Str(s))
                    if s.len() <= max_len as usize && !contains_nul(s.as_bytes()) =>
                {
                    let b = s.as_bytes();
                    out[at..at + 2].copy_from_slice(&(b.len() as u16).to_le_bytes());
                    out[at + 2..at + 2 + b.len()].copy_from_slice(b);
                }
                _ => self.write_column(out, col, v)?,
            }
        }
        Ok(())
    }

    /// Writes one column's value into a record image (`record_size` bytes), null bit included.
    /// An integer or a float into its own type (what updates set) is written here, small
    /// enough to inline; everything else, and every error, in [`Layout::write_value`].
    #[inline]
    pub fn write_column(&self, rec: &mut [u8], col: usize, v: &Value) -> TxResult<()> {
        let slot = &self.slots[col];
        let at = slot.offset;
        let bytes = match (slot.ty, v) {
            (ColumnType::Int, Value::Int(i)) => i.to_le_bytes(),
            (ColumnType::Float, Value::Float(f)) => f.to_le_bytes(),
            _ => return self.write_value(rec, col, v),
        };
        rec[at..at + 8].copy_from_slice(&bytes);
        rec[col / 8] &= !(1u8 << (col % 8));
        Ok(())
    }

    /// [`Layout::write_column`] for any value: strings, NULL, an integer into a float column,
    /// and the errors (a value of the wrong type, too long, with a NUL byte, or NULL in a
    /// column that is not nullable).
    #[inline(never)]
    fn write_value(&self, rec: &mut [u8], col: usize, v: &Value) -> TxResult<()> {
        let slot = self.slots[col];
        let (byte, bit) = (col / 8, 1u8 << (col % 8));
        let field = &mut rec[slot.offset..slot.offset + slot.width];
        match (slot.ty, v) {
            (ColumnType::Int, Value::Int(i)) => field.copy_from_slice(&i.to_le_bytes()),
            (ColumnType::Float, Value::Float(f)) => field.copy_from_slice(&f.to_le_bytes()),
            (ColumnType::Float, Value::Int(i)) => field.copy_from_slice(&(*i as f64).to_le_bytes()),
            (ColumnType::Str { .. }, Value::Str(s)) => {
                let b = s.as_bytes();
                let (len, rest) = field.split_at_mut(2);
                if b.len() > rest.len() {
                    return Err(TxError::Invalid(format!(
                        "value of {} bytes is longer than column {} allows ({})",
                        b.len(),
                        self.names[col],
                        rest.len()
                    )));
                }
                if contains_nul(b) {
                    return Err(TxError::Invalid(format!(
                        "string for column {} contains a NUL byte",
                        self.names[col]
                    )));
                }
                len.copy_from_slice(&(b.len() as u16).to_le_bytes());
                rest[..b.len()].copy_from_slice(b);
                rest[b.len()..].fill(0);
            }
            (_, Value::Null) => {
                if !slot.nullable {
                    return Err(TxError::Invalid(format!(
                        "column {} is not nullable",
                        self.names[col]
                    )));
                }
                field.fill(0);
                rec[byte] |= bit;
                return Ok(());
            }
            (ty, v) => {
                return Err(TxError::Invalid(format!(
                    "column {} is {ty:?}, got {v:?}",
                    self.names[col]
                )))
            }
        }
        rec[byte] &= !bit;
        Ok(())
    }

    /// Decodes one column. The record must be `record_size` bytes (the engine checks sizes
    /// when it reads a record from storage).
    pub fn read_column(&self, rec: &[u8], col: usize) -> Value {
        if self.is_null(rec, col) {
            return Value::Null;
        }
        match self.slots[col].ty {
            ColumnType::Int => Value::Int(self.read_int(rec, col)),
            ColumnType::Float => Value::Float(self.read_float(rec, col)),
            ColumnType::Str { .. } => Value::Str(match self.read_text(rec, col) {
                Ok(s) => s.to_owned(),
                // Strings were UTF-8 when written; a damaged page still decodes, lossily.
                Err(_) => String::from_utf8_lossy(self.read_str(rec, col)).into_owned(),
            }),
        }
    }

    /// The integer in column `col` if it is an integer column and not NULL (the inline path
    /// of `RowRef::int`).
    #[inline]
    pub fn int_at(&self, rec: &[u8], col: usize) -> Option<i64> {
        self.word_at(rec, col, ColumnType::Int)
            .map(i64::from_le_bytes)
    }

    /// The float in column `col` if it is a float column and not NULL.
    #[inline]
    pub fn float_at(&self, rec: &[u8], col: usize) -> Option<f64> {
        self.word_at(rec, col, ColumnType::Float)
            .map(f64::from_le_bytes)
    }

    /// The 8 bytes of column `col` if it has type `ty` (an integer or a float) and is not NULL.
    #[inline]
    fn word_at(&self, rec: &[u8], col: usize, ty: ColumnType) -> Option<[u8; 8]> {
        let slot = self.slots.get(col)?;
        if slot.ty != ty || self.is_null(rec, col) {
            return None;
        }
        rec.get(slot.offset..slot.offset + 8)?.try_into().ok()
    }

    /// The byte offset of column `col` if it has type `ty` (an integer or a float): where a
    /// deferred [`crate::api::RowWriter`] will write its 8 bytes.
    #[inline]
    pub fn word_offset(&self, col: usize, ty: ColumnType) -> Option<usize> {
        let slot = self.slots.get(col)?;
        (slot.ty == ty).then_some(slot.offset)
    }

    /// Clears the null bit of every column in `mask` (bit `c` for column `c` < 64) in
    /// `bitmap`, the start of a record (at least the bits of the columns named).
    #[inline]
    pub fn clear_null_bits(bitmap: &mut [u8], mask: u64) {
        let mut rest = mask;
        while rest != 0 {
            let c = rest.trailing_zeros() as usize;
            bitmap[c / 8] &= !(1u8 << (c % 8));
            rest &= rest - 1;
        }
    }

    /// Writes the 8 bytes of column `col` and clears its null bit, if it has type `ty` (an
    /// integer or a float) and `rec` holds it; false, with nothing written, otherwise (the
    /// inline path of `RowWriter::int` and `RowWriter::float`).
    #[inline]
    pub fn put_word(&self, rec: &mut [u8], col: usize, ty: ColumnType, word: [u8; 8]) -> bool {
        let Some(slot) = self.slots.get(col) else {
            return false;
        };
        if slot.ty != ty || rec.len() < self.size {
            return false;
        }
        rec[slot.offset..slot.offset + 8].copy_from_slice(&word);
        rec[col / 8] &= !(1u8 << (col % 8));
        true
    }

    /// The text in string column `col` if the column is not NULL and the text is ASCII (as
    /// TPC-C's all is; other text takes `RowRef::str`'s general path).
    #[inline]
    pub fn ascii_at<'r>(&self, rec: &'r [u8], col: usize) -> Option<&'r str> {
        let slot = self.slots.get(col)?;
        if !matches!(slot.ty, ColumnType::Str { .. }) || self.is_null(rec, col) {
            return None;
        }
        let field = rec.get(slot.offset..slot.offset + slot.width)?;
        let (len, text) = field.split_first_chunk::<2>()?;
        let text = text.get(..u16::from_le_bytes(*len) as usize)?;
        // SAFETY: ASCII bytes are valid UTF-8.
        is_ascii(text).then(|| unsafe { std::str::from_utf8_unchecked(text) })
    }

    /// The integer in column `col` without building a `Value` (0 for NULL).
    #[inline]
    pub fn read_int(&self, rec: &[u8], col: usize) -> i64 {
        let at = self.slots[col].offset;
        i64::from_le_bytes(rec[at..at + 8].try_into().unwrap())
    }

    /// The float in column `col` without building a `Value` (0.0 for NULL).
    #[inline]
    pub fn read_float(&self, rec: &[u8], col: usize) -> f64 {
        let at = self.slots[col].offset;
        f64::from_le_bytes(rec[at..at + 8].try_into().unwrap())
    }

    /// Whether column `col` of the record is NULL.
    #[inline]
    pub fn is_null(&self, rec: &[u8], col: usize) -> bool {
        rec[col / 8] & (1 << (col % 8)) != 0
    }

    /// The bytes of string column `col`.
    #[inline]
    pub fn read_str<'r>(&self, rec: &'r [u8], col: usize) -> &'r [u8] {
        let field = &rec[self.column_range(col)];
        let len = (u16::from_le_bytes([field[0], field[1]]) as usize).min(field.len() - 2);
        &field[2..2 + len]
    }

    /// String column `col` as text; an error if its bytes are not UTF-8 (a damaged record).
    #[inline]
    pub fn read_text<'r>(&self, rec: &'r [u8], col: usize) -> Result<&'r str, std::str::Utf8Error> {
        let bytes = self.read_str(rec, col);
        if is_ascii(bytes) {
            // SAFETY: ASCII bytes are valid UTF-8. (TPC-C's strings are all ASCII, and the
            // word-at-a-time ASCII test is several times cheaper than full validation.)
            Ok(unsafe { std::str::from_utf8_unchecked(bytes) })
        } else {
            std::str::from_utf8(bytes)
        }
    }

    /// The type of column `col`, or `None` if there is no such column.
    #[inline]
    pub fn type_of(&self, col: usize) -> Option<ColumnType> {
        self.slots.get(col).map(|s| s.ty)
    }

    pub fn column_type(&self, col: usize) -> ColumnType {
        self.slots[col].ty
    }

    pub fn column_name(&self, col: usize) -> &str {
        &self.names[col]
    }
}

/// Whether `bytes` are all ASCII: eight bytes at a time, the last word overlapping the one
/// before it. `<[u8]>::is_ascii` takes the same instructions on strings of up to 24 bytes and
/// three to four times the time on YCSB's 100-byte fields (a loop of 20 million calls: 25–34
/// ns against 6–9), which every read of a field pays before its bytes become a `String`.
#[inline]
pub(crate) fn is_ascii(bytes: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let word = |w: &[u8]| u64::from_le_bytes(w.try_into().expect("eight bytes"));
    let Some(last) = bytes.len().checked_sub(8) else {
        return bytes.iter().fold(0, |all, b| all | b) < 0x80;
    };
    let all = bytes
        .chunks_exact(8)
        .fold(word(&bytes[last..]), |all, w| all | word(w));
    all & HIGH == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> TableSchema {
        TableSchema::new("t")
            .int("id")
            .string("name", 10)
            .float("balance")
            .int("carrier")
            .nullable()
            .key(&["id"])
    }

    #[test]
    fn round_trips_every_type_and_null() {
        let layout = Layout::new(&schema());
        assert_eq!(layout.record_size(), 1 + 8 + 12 + 8 + 8);
        let row = vec![
            Value::Int(-7),
            Value::Str("glass".into()),
            Value::Float(12.5),
            Value::Null,
        ];
        let mut rec = Vec::new();
        layout.encode(&row, &mut rec).unwrap();
        let back: Vec<Value> = (0..4).map(|c| layout.read_column(&rec, c)).collect();
        assert_eq!(back, row);
        layout.write_column(&mut rec, 3, &Value::Int(5)).unwrap();
        assert_eq!(layout.read_column(&rec, 3), Value::Int(5));
        assert_eq!(layout.read_str(&rec, 1), b"glass");
    }

    #[test]
    fn rejects_bad_values_with_the_column_named() {
        let layout = Layout::new(&schema());
        let mut rec = Vec::new();
        let err = layout
            .encode(
                &[
                    Value::Int(1),
                    Value::Str("x".repeat(11)),
                    Value::Float(0.0),
                    Value::Null,
                ],
                &mut rec,
            )
            .unwrap_err();
        assert!(err.to_string().contains("name"), "{err}");
        let err = layout
            .encode(
                &[
                    Value::Null,
                    Value::Str("a".into()),
                    Value::Float(0.0),
                    Value::Null,
                ],
                &mut rec,
            )
            .unwrap_err();
        assert!(err.to_string().contains("id"), "{err}");
        assert!(layout.encode(&[Value::Int(1)], &mut rec).is_err());
    }

    /// `RowRef` reads the same values from a record (inline paths) as from the row of values
    /// it encodes (general path), takes text that is not ASCII the general way, widens an
    /// integer to a float, and names the column it refuses (NULL, wrong type, no column).
    #[test]
    fn row_reads_agree_between_records_and_values_and_refuse_by_name() {
        use crate::api::RowRef;
        let layout = Layout::new(&schema());
        let row = vec![
            Value::Int(-3),
            Value::Str("glaß".into()),
            Value::Float(2.5),
            Value::Null,
        ];
        let mut rec = Vec::new();
        layout.encode(&row, &mut rec).unwrap();
        for r in [RowRef::record(&layout, &rec), RowRef::values(&row)] {
            assert_eq!(r.int(0).unwrap(), -3);
            assert_eq!(r.float(0).unwrap(), -3.0);
            assert_eq!(r.str(1).unwrap(), "glaß");
            assert_eq!(r.float(2).unwrap(), 2.5);
            assert!(r.int(3).is_err());
            assert!(r.str(0).is_err());
            assert!(r.int(9).is_err());
        }
        let record = RowRef::record(&layout, &rec);
        let null = record.int(3).unwrap_err().to_string();
        assert!(null.contains("carrier") && null.contains("NULL"), "{null}");
        let wrong = record.int(2).unwrap_err().to_string();
        assert!(wrong.contains("balance"), "{wrong}");
        layout
            .write_column(&mut rec, 1, &Value::Str("plain".into()))
            .unwrap();
        assert_eq!(RowRef::record(&layout, &rec).str(1).unwrap(), "plain");
    }

    /// Column writes: the inline path (a number into its own type) clears a NULL; the general
    /// path converts an integer into a float column and refuses the wrong type or a NULL in a
    /// column that is not nullable, naming the column.
    #[test]
    fn column_writes_set_and_clear_null_and_refuse_the_wrong_type() {
        let layout = Layout::new(&schema());
        let mut rec = vec![0u8; layout.record_size()];
        layout.write_column(&mut rec, 3, &Value::Null).unwrap();
        assert!(layout.is_null(&rec, 3));
        layout.write_column(&mut rec, 3, &Value::Int(7)).unwrap();
        assert!(!layout.is_null(&rec, 3));
        assert_eq!(layout.read_column(&rec, 3), Value::Int(7));
        layout.write_column(&mut rec, 2, &Value::Int(3)).unwrap();
        assert_eq!(layout.read_column(&rec, 2), Value::Float(3.0));
        let err = layout
            .write_column(&mut rec, 0, &Value::Str("x".into()))
            .unwrap_err();
        assert!(err.to_string().contains("column id"), "{err}");
        let err = layout.write_column(&mut rec, 0, &Value::Null).unwrap_err();
        assert!(err.to_string().contains("not nullable"), "{err}");
        let err = layout
            .write_column(&mut rec, 2, &Value::Str("1.5".into()))
            .unwrap_err();
        assert!(err.to_string().contains("balance"), "{err}");
    }

    /// A byte with its high bit set is found at every position of strings of every length
    /// around the word size: in a whole word, in the overlapping last word, and in the bytes
    /// of a string shorter than a word.
    #[test]
    fn one_byte_past_ascii_anywhere_is_found() {
        for len in 0..=40 {
            let text = vec![b'a'; len];
            assert!(super::is_ascii(&text), "{len} ASCII bytes");
            for at in 0..len {
                for high in [0x80u8, 0xC3, 0xFF] {
                    let mut bytes = text.clone();
                    bytes[at] = high;
                    assert!(!super::is_ascii(&bytes), "{high:#x} at {at} of {len}");
                }
            }
        }
    }

    proptest::proptest! {
        /// The word-at-a-time ASCII test agrees with the standard library's on any bytes.
        #[test]
        fn the_ascii_test_agrees_with_the_standard_one(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            ascii in proptest::prelude::any::<bool>(),
        ) {
            let bytes: Vec<u8> = if ascii { bytes.iter().map(|b| b & 0x7F).collect() } else { bytes };
            proptest::prop_assert_eq!(super::is_ascii(&bytes), bytes.is_ascii());
        }

        /// The fast encoder writes exactly the bytes that column-by-column writes produce,
        /// and every value decodes back.
        #[test]
        fn encode_matches_column_writes(
            id in proptest::prelude::any::<i64>(),
            name in "[a-z]{0,10}",
            balance in -1e9f64..1e9,
            carrier in proptest::option::of(proptest::prelude::any::<i64>()),
        ) {
            let layout = Layout::new(&schema());
            let row = vec![
                Value::Int(id),
                Value::Str(name),
                Value::Float(balance),
                carrier.map_or(Value::Null, Value::Int),
            ];
            let mut fast = Vec::new();
            layout.encode(&row, &mut fast).unwrap();
            let mut slow = vec![0u8; layout.record_size()];
            for (c, v) in row.iter().enumerate() {
                layout.write_column(&mut slow, c, v).unwrap();
            }
            proptest::prop_assert_eq!(&fast, &slow);
            let back: Vec<Value> = (0..4).map(|c| layout.read_column(&fast, c)).collect();
            proptest::prop_assert_eq!(back, row);
        }
    }
}
