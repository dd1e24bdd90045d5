//! B+-trees on buffer-pool pages, with two key paths.
//!
//! * [`keys`] — the order-preserving key encoding and the two comparators: generic
//!   ([`SchemaKeyOrder`], interprets the key schema) and hand-coded ([`IntKeyOrder`], one `u64`).
//! * [`node`] — the slotted node layout, as functions over page bytes.
//! * [`tree`] — [`BTree`]: latch-coupled descent, inserts with splits, deletes, range scans in
//!   both directions, `check_invariants`.
//!
//! `BTree<K: KeyOrder>` is generic over its comparator, so the integer path is monomorphised:
//! node search for [`IntKeyOrder`] is a binary search over `u64`s read straight from the page.

pub mod keys;
pub mod node;
pub mod tree;

pub use keys::{
    encode_key, pack_int_key, unpack_int_key, BytewiseKeyOrder, IntKeyOrder, KeyField, KeyOrder,
    KeyPart, SchemaKeyOrder,
};
pub use tree::{
    unlinked_leaves, BTree, InsertOutcome, LeafHint, ScanStep, TreeCheck, LEAF_HINT_KEY_MAX,
};
