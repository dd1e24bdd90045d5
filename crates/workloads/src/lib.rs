//! Glass workloads: TPC-C (full and the 2008 paper's variant), TPC-B, YCSB and Voter.
//!
//! Each workload is written once against the engine's [`engine::Tx`] API: schema, loader,
//! input generation, procedures and `check()`. Drivers (embedded, server, client) run them
//! through the [`Workload`] and [`Terminal`] traits and know nothing else about them.

pub mod workload;

pub use workload::{Condition, Interactions, Terminal, Workload};
