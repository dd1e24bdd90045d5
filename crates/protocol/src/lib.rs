//! The Glass wire protocol: the binary messages between a Glass server and its clients over
//! one connection, and their codec.
//!
//! A connection is a conversation of frames. The client opens it with a `Hello`. The server
//! answers `Welcome`, or `Failed` and closes. After that, every request gets one response, in
//! order:
//!
//! ```text
//! client                                   server
//!   Hello ---------------------------------->
//!   <---------------------------------- Welcome    both now use the smaller max_frame
//!   Catalog -------------------------------->
//!   <-------------------------------- CatalogIs    the ids that ops name tables by
//!   Call ----------------------------------->      a stored procedure: one transaction,
//!   <--------------------------- Returned | Failed   one round trip
//!   Begin ---------------------------------->      an interactive transaction:
//!   <------------------------------------- Done
//!   Batch { autocommit: false } ------------>        its operations, a batch a round trip
//!   <---------------------------- Results | Failed
//!   Commit | Abort ------------------------->
//!   <------------------------------- Done | Failed
//! ```
//!
//! `autocommit` on a `Batch` means "commit after these operations": outside a transaction the
//! batch is a transaction of its own that commits at once (how the 2025 paper simulates
//! interactive transactions); inside one it is the transaction's last, so its final writes
//! travel with the commit. A `Batch` without it outside a transaction begins one, so `Begin`
//! is optional and costs a round trip only when sent. A failed operation aborts the
//! transaction. A `Failed` of class [`ErrorClass::Protocol`] ends the connection: the server
//! closes it after sending.
//!
//! # Frame
//!
//! All integers are little-endian.
//!
//! | offset | size  | field | meaning                                                      |
//! |-------:|------:|-------|--------------------------------------------------------------|
//! | 0      | 4     | len   | bytes that follow: kind and body (`1..=max_frame`)           |
//! | 4      | 1     | kind  | requests `0x01..=0x07`, responses `0x81..=0x85` and `0xFF`   |
//! | 5      | len-1 | body  | by kind, below; every byte must belong to the message        |
//!
//! `max_frame` is [`DEFAULT_MAX_FRAME`] until `Hello` and `Welcome` have named each side's;
//! then it is the smaller of the two. A `len` over it is refused from the 4-byte header alone,
//! before any of the body is buffered ([`frame_len`], [`FrameBuffer`]).
//!
//! # Field types
//!
//! | type          | size   | encoding                                                       |
//! |---------------|-------:|----------------------------------------------------------------|
//! | `u8 u16 u32`  | 1 2 4  | little-endian                                                  |
//! | `i64`         | 8      | two's complement, little-endian                                |
//! | `f64`         | 8      | IEEE 754 bits as a `u64` (every NaN payload kept)              |
//! | `bool`        | 1      | 0 or 1; any other byte is an error                             |
//! | `str`         | 4+n    | `n: u32`, then `n` bytes of UTF-8                              |
//! | `list<T>`     | 4+…    | `count: u32`, then `count` items; a count whose items cannot fit in the bytes left, at their smallest, is an error before anything is allocated |
//! | `opt<T>`      | 1+…    | 0 (none), or 1 then `T`                                        |
//! | `Value`       | 1+…    | tag 0 `Null`; 1 `Int` then `i64`; 2 `Float` then `f64`; 3 `Str` then `str` |
//! | `bound`       | 1+…    | 0 unbounded; 1 included or 2 excluded, then `list<Value>`      |
//! | `column`      | 2      | a column's position in its table, `u16`                        |
//!
//! # Requests
//!
//! Offsets are from the body's start (frame byte 5); `…` follows a field of varying size.
//!
//! | kind   | request   | offset | size | field        | type               |
//! |-------:|-----------|-------:|-----:|--------------|--------------------|
//! | `0x01` | `Hello`   | 0      | 4    | `magic`      | `b"GLAS"` ([`MAGIC`]) |
//! |        |           | 4      | 2    | `version`    | `u16` ([`VERSION`]) |
//! |        |           | 6      | 4    | `max_frame`  | `u32`              |
//! | `0x02` | `Catalog` |        | 0    |              |                    |
//! | `0x03` | `Call`    | 0      | 4+n  | `procedure`  | `str`              |
//! |        |           | 4+n    | …    | `args`       | `list<Value>`      |
//! | `0x04` | `Begin`   |        | 0    |              |                    |
//! | `0x05` | `Batch`   | 0      | 1    | `autocommit` | `bool`             |
//! |        |           | 1      | …    | `ops`        | `list<Op>`         |
//! | `0x06` | `Commit`  |        | 0    |              |                    |
//! | `0x07` | `Abort`   |        | 0    |              |                    |
//!
//! An [`Op`] is a tag byte, then its fields:
//!
//! | tag | op       | offset | size | field        | type                                    |
//! |----:|----------|-------:|-----:|--------------|-----------------------------------------|
//! | 1   | `Get`    | 1      | 4    | `table`      | `u32`                                   |
//! |     |          | 5      | …    | `key`        | `list<Value>`                           |
//! |     |          | …      | …    | `columns`    | `opt<list<column>>` (none: all)         |
//! |     |          | …      | 1    | `for_update` | `bool`                                  |
//! | 2   | `Update` | 1      | 4    | `table`      | `u32`                                   |
//! |     |          | 5      | …    | `key`        | `list<Value>`                           |
//! |     |          | …      | …    | `set`        | `list<(column, Value)>`                 |
//! | 3   | `Insert` | 1      | 4    | `table`      | `u32`                                   |
//! |     |          | 5      | …    | `row`        | `list<Value>`                           |
//! | 4   | `Delete` | 1      | 4    | `table`      | `u32`                                   |
//! |     |          | 5      | …    | `key`        | `list<Value>`                           |
//! | 5   | `Scan`   | 1      | 1    | `source`     | `u8`: 0 table, 1 index                  |
//! |     |          | 2      | 4    | source id    | `u32`                                   |
//! |     |          | 6      | …    | `low`        | `bound`                                 |
//! |     |          | …      | …    | `high`       | `bound`                                 |
//! |     |          | …      | …    | `limit`      | `opt<u32>`                              |
//! |     |          | …      | 1    | `reverse`    | `bool`                                  |
//! |     |          | …      | …    | `columns`    | `opt<list<column>>` (none: all)         |
//! |     |          | …      | 1    | `for_update` | `bool`                                  |
//! | 6   | `ReadCommitted` |  | 0    |              |                                         |
//!
//! `ReadCommitted` puts the transaction at isolation level 1 from there to its end: each plain
//! read (not for update) lets go of its shared locks as it ends; writes and reads for update
//! keep theirs to the end, as at the default level (serializable). TPC-C's Stock-Level asks for
//! it. Inside a transaction only: a batch with `autocommit` outside one is a transaction of its
//! own, whose locks end with it anyway.
//!
//! # Responses
//!
//! | kind   | response    | offset | size | field        | type                  |
//! |-------:|-------------|-------:|-----:|--------------|-----------------------|
//! | `0x81` | `Welcome`   | 0      | 2    | `version`    | `u16` ([`VERSION`])   |
//! |        |             | 2      | 4    | `max_frame`  | `u32`                 |
//! |        |             | 6      | 4+n  | `workload`   | `str`                 |
//! |        |             | 10+n   | …    | `procedures` | `list<str>`           |
//! | `0x82` | `CatalogIs` | 0      | …    | `tables`     | `list<(str, u32)>`    |
//! |        |             | …      | …    | `indexes`    | `list<(str, u32)>`    |
//! | `0x83` | `Returned`  | 0      | …    | `values`     | `list<Value>`         |
//! | `0x84` | `Done`      |        | 0    |              |                       |
//! | `0x85` | `Results`   | 0      | …    | `results`    | `list<OpResult>`      |
//! | `0xFF` | `Failed`    | 0      | 1    | `class`      | `u8` ([`ErrorClass`]) |
//! |        |             | 1      | 4+n  | `message`    | `str`                 |
//!
//! An [`OpResult`] is a tag byte, then its fields:
//!
//! | tag | result     | offset | size | field   | type                   |
//! |----:|------------|-------:|-----:|---------|------------------------|
//! | 1   | `Row`      | 1      | …    | `row`   | `opt<list<Value>>`     |
//! | 2   | `Found`    | 1      | 1    | `found` | `bool`                 |
//! | 3   | `Inserted` |        | 0    |         |                        |
//! | 4   | `Rows`     | 1      | …    | `rows`  | `list<list<Value>>`    |
//! | 5   | `Set`      |        | 0    |         |                        |
//!
//! Error classes: 1 `Retry`, 2 `UserAbort`, 3 `DuplicateKey`, 4 `Invalid`, 5 `Internal`,
//! 6 `Protocol`, 7 `Busy`, 8 `TimedOut`, 9 `Contained` (see [`ErrorClass`]).
//!
//! # Codec
//!
//! Encoding appends one whole frame to a `Vec` and allocates nothing else. Decoding takes a
//! frame's bytes after the length prefix, never panics, and refuses anything but the canonical
//! encoding of a message: unknown kinds and tags, bools other than 0/1, invalid UTF-8 and
//! trailing bytes each have their [`ProtocolError`].

pub mod boundary;
mod class;
mod codec;
pub mod deferred;
mod endpoint;
mod error;
mod frame;
pub mod guest;
mod message;
pub mod read_ahead;
mod rows;
// Shared memory between processes: on Unix (the protocol's messages also build for
// WebAssembly, where stored procedures are compiled).
#[cfg(unix)]
pub mod shm;

pub use class::ErrorClass;
pub use endpoint::Endpoint;
pub use error::ProtocolError;
pub use frame::{frame_len, FrameBuffer, ReadOnce};
pub use message::{Op, OpResult, Request, Response, ScanSource};

/// The first bytes of every `Hello`: a Glass client, not some other protocol.
pub const MAGIC: [u8; 4] = *b"GLAS";
/// The protocol version this crate speaks (2 added the `ReadCommitted` op and its `Set`
/// result); a `Hello` of another version is refused.
pub const VERSION: u16 = 2;
/// The largest frame (bytes after the length prefix) either side accepts until `Hello` and
/// `Welcome` settle on the smaller of their maximums.
pub const DEFAULT_MAX_FRAME: u32 = 1 << 20;
/// The length prefix of every frame.
pub const HEADER_LEN: usize = 4;
