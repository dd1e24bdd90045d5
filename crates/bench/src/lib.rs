//! Glass benchmark drivers, statistics and reports.
//!
//! - [`driver`]: the closed-loop driver (worker threads, phases, retries) behind the
//!   [`driver::Executor`] seam; [`embedded`]: the executor for an in-process database;
//! - [`stats`]: per-type counts and latency histograms;
//! - [`report`]: the result record (JSON) and the printed table;
//! - [`progress`]: the live progress line;
//! - [`manifest`]: what a database directory was loaded with;
//! - [`acklog`]: every acknowledged commit of a run, and the check that each survived;
//!   [`crash`]: the crash campaign (`glass crash`);
//! - [`run`]: `glass bench`, `glass load` and `glass check` as library calls, and the one
//!   function that opens or loads a database directory for bench and profile;
//! - [`capacity`]: sizes checked against the machine's memory and free disk before any work;
//!   [`cpu_idle`]: how the machine's idle CPUs wait, recorded with every run;
//! - [`ladder`]: `glass ladder` (the removal ladder under callgrind and the clock) and
//!   `glass profile --instructions`; [`callgrind`]: callgrind's format and cost attribution;
//!   [`plot`]: the ladder's and the scale sweep's figures;
//! - [`scale`]: `glass scale`, throughput against threads per configuration;
//! - [`allocator`]: the process allocator's setting for a growing main-memory database.

pub mod acklog;
pub mod allocator;
pub mod callgrind;
pub mod capacity;
pub mod charm;
pub mod check_report;
pub mod child;
pub mod cpu_idle;
pub mod crash;
pub mod driver;
pub mod embedded;
pub mod isolation;
pub mod ladder;
pub mod latency;
pub mod local_server;
pub mod machine_cpu;
pub mod manifest;
pub mod multiplex;
pub mod optimal;
pub mod plot;
pub mod progress;
pub mod remote;
pub mod report;
pub mod run;
pub mod scale;
pub mod section3;
pub mod stats;
pub mod table4;

pub use driver::{drive, DriverConfig, DriverError, Executor, Stop};
pub use report::BenchResult;
pub use run::{run_bench, run_check, run_load, run_workload, BenchConfig, UsageError};
