//! Lock names: what a lock is *on*, and the granularity hierarchy above it.
//!
//! ```text
//!                 Database
//!                    |
//!            Table { table }                 (IS / IX / S / SIX / X)
//!              /                \
//!   Page { table, page }   Record { table, key }   (leaves: S / X)
//! ```
//!
//! With coarse-lock partitioning on (`LockConfig::coarse_partitions` above 1), the database
//! and each table are locked through `P` partitions each, [`LockName::DatabasePart`] and
//! [`LockName::TablePart`]: an intention mode (`IS`, `IX`) is requested on the requesting
//! thread's partition only, any other mode (`S`, `SIX`, `X`) on every partition in order (see
//! `LockManager`'s module docs). Callers always name the whole `Database` or `Table`; the
//! partition names exist inside the lock table only.
//!
//! Records and pages are both leaves whose parent is their table: an engine uses one or the
//! other (record-level locking, or Berkeley-DB style page-level locking), never both on one
//! table. A record is named by a 64-bit hash of its primary key, computed by the engine, so
//! two keys that collide share a lock (harmless: a false conflict, never a missed one).
//!
//! [`LockName::hash64`] picks a name's lock-table bucket with two multiplications and a
//! fold (a handful of instructions: the lock table hashes on every request, and SipHash
//! would be a visible part of the lock path). [`NameHasher`], FxHash's multiply-rotate
//! step, serves the hash maps keyed by small integers (the wait-for graph).

use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

/// A lockable object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LockName {
    /// The whole database: the root of the hierarchy.
    Database,
    /// One table (its heap and indexes).
    Table(u32),
    /// One page of a table (page-level locking).
    Page { table: u32, page: u64 },
    /// One record of a table, by the hash of its primary key (record-level locking). The
    /// key's top byte is the record's *region*: with more than 256 lock-table buckets, records
    /// of different regions never share a bucket (see `LockTable::bucket_index`). The engine
    /// puts the record's leading key column there, so that threads on different warehouses
    /// latch different buckets.
    Record { table: u32, key: u64 },
    /// Partition `0` of the database's lock (coarse-lock partitioning; never named by
    /// callers).
    DatabasePart(u16),
    /// Partition `part` of a table's lock (coarse-lock partitioning; never named by callers).
    TablePart { table: u32, part: u16 },
}

impl LockName {
    /// The next coarser name, `None` for the database.
    pub const fn parent(self) -> Option<LockName> {
        match self {
            LockName::Database | LockName::DatabasePart(_) => None,
            LockName::Table(_) | LockName::TablePart { .. } => Some(LockName::Database),
            LockName::Page { table, .. } | LockName::Record { table, .. } => {
                Some(LockName::Table(table))
            }
        }
    }

    /// The table this name lies in, `None` for the database.
    pub const fn table(self) -> Option<u32> {
        match self {
            LockName::Database | LockName::DatabasePart(_) => None,
            LockName::Table(table)
            | LockName::TablePart { table, .. }
            | LockName::Page { table, .. }
            | LockName::Record { table, .. } => Some(table),
        }
    }

    /// Whether this is a leaf of the hierarchy (a page or a record).
    pub const fn is_leaf(self) -> bool {
        matches!(self, LockName::Page { .. } | LockName::Record { .. })
    }

    /// Partition `part` of this name if it is the database or a table (the name itself
    /// otherwise).
    #[inline]
    pub const fn partition(self, part: u16) -> LockName {
        match self {
            LockName::Database | LockName::DatabasePart(_) => LockName::DatabasePart(part),
            LockName::Table(table) | LockName::TablePart { table, .. } => {
                LockName::TablePart { table, part }
            }
            leaf => leaf,
        }
    }

    /// Whether this names the database or a table (partitioned or not).
    #[inline]
    pub const fn is_coarse(self) -> bool {
        !self.is_leaf()
    }

    /// A well-mixed 64-bit hash, used to pick the lock-table bucket.
    #[inline]
    pub fn hash64(self) -> u64 {
        let (tag, a, b) = match self {
            LockName::Database => (0u64, 0u64, 0u64),
            LockName::Table(t) => (1, t as u64, 0),
            LockName::Page { table, page } => (2, table as u64, page),
            LockName::Record { table, key } => (3, table as u64, key),
            LockName::DatabasePart(part) => (4, 0, part as u64),
            LockName::TablePart { table, part } => (5, table as u64, part as u64),
        };
        // Two multiplications by odd constants (bijections, so names differing in one word
        // hash apart), then a fold so the low bits (the bucket index) depend on the high
        // bits of the product, which depend on every input bit below them.
        let x = ((tag | (a << 2)).wrapping_mul(SEED) ^ b).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^ (x >> 32)
    }
}

impl fmt::Display for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockName::Database => f.write_str("database"),
            LockName::Table(t) => write!(f, "table {t}"),
            LockName::Page { table, page } => write!(f, "table {table} page {page}"),
            LockName::Record { table, key } => write!(f, "table {table} record {key:#x}"),
            LockName::DatabasePart(part) => write!(f, "database (partition {part})"),
            LockName::TablePart { table, part } => write!(f, "table {table} (partition {part})"),
        }
    }
}

/// FxHash-style hasher for lock names inside a bucket's map.
#[derive(Default, Clone, Copy)]
pub struct NameHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl NameHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for NameHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn write_isize(&mut self, i: isize) {
        self.add(i as u64);
    }
}

/// `BuildHasher` for maps keyed by [`LockName`].
pub type BuildNameHasher = BuildHasherDefault<NameHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hierarchy() {
        let r = LockName::Record { table: 3, key: 99 };
        let p = LockName::Page { table: 3, page: 7 };
        assert_eq!(r.parent(), Some(LockName::Table(3)));
        assert_eq!(p.parent(), Some(LockName::Table(3)));
        assert_eq!(LockName::Table(3).parent(), Some(LockName::Database));
        assert_eq!(LockName::Database.parent(), None);
        assert!(r.is_leaf() && p.is_leaf() && !LockName::Table(3).is_leaf());
        assert_eq!(r.table(), Some(3));
        let part = LockName::Table(3).partition(5);
        assert_eq!(part, LockName::TablePart { table: 3, part: 5 });
        assert_eq!(part.parent(), Some(LockName::Database));
        assert_eq!(part.table(), Some(3));
        assert!(part.is_coarse() && !r.is_coarse());
        assert_eq!(LockName::Database.partition(2), LockName::DatabasePart(2));
        assert_eq!(r.partition(2), r);
        assert_ne!(
            LockName::Table(3).partition(0).hash64(),
            LockName::Table(3).partition(1).hash64()
        );
        assert_eq!(LockName::Database.table(), None);
    }

    #[test]
    fn bucket_hash_spreads_consecutive_keys() {
        // 4096 consecutive record keys over 64 buckets: every bucket used, none overloaded.
        let mut counts = [0usize; 64];
        for key in 0..4096u64 {
            counts[(LockName::Record { table: 1, key }.hash64() & 63) as usize] += 1;
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*min > 20 && *max < 120, "min {min} max {max}");
        // Same fields, different kinds: different hashes.
        assert_ne!(
            LockName::Record { table: 1, key: 5 }.hash64(),
            LockName::Page { table: 1, page: 5 }.hash64()
        );
    }

    #[test]
    fn display() {
        assert_eq!(LockName::Table(4).to_string(), "table 4");
        assert_eq!(
            LockName::Record { table: 1, key: 255 }.to_string(),
            "table 1 record 0xff"
        );
    }
}
