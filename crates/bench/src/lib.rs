//! Glass benchmark drivers, statistics and reports.
//!
//! - [`driver`]: the closed-loop driver (worker threads, phases, retries) behind the
//!   [`driver::Executor`] seam;
//! - [`stats`]: per-type counts and latency histograms;
//! - [`report`]: the result record (JSON) and the printed table;
//! - [`progress`]: the live progress line.

pub mod driver;
pub mod progress;
pub mod report;
pub mod stats;
