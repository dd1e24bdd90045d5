//! The removal ladder (placeholder while building).
pub mod measure;
/// Default measured transactions per phase.
pub const DEFAULT_TXNS: u64 = 1000;
