//! Errors of the kernel, classified by what the caller must do.
//!
//! - [`KernelError::UnusedItem`]: a user abort (the spec's 1% rollback); nothing was written,
//!   the caller reports it and moves on.
//! - [`KernelError::Invalid`], [`KernelError::TooLong`]: bad input from the caller (an id
//!   outside the population, a value that does not fit its column); nothing was written.
//! - [`KernelError::Unsupported`]: rows handed to [`crate::Kernel::from_rows`] that the
//!   kernel's dense layout cannot hold (gaps in a dense key space).
//! - [`KernelError::Corrupt`]: a broken internal invariant, found by `check_invariants`.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum KernelError {
    #[error("item number {0} is not valid")]
    UnusedItem(u32),
    #[error("invalid input: {0}")]
    Invalid(String),
    #[error("text of {len} bytes does not fit a column of {capacity}")]
    TooLong { len: usize, capacity: usize },
    #[error("rows not supported by the kernel's layout: {0}")]
    Unsupported(String),
    #[error("kernel invariant broken: {0}")]
    Corrupt(String),
}
