//! Glass workloads: TPC-C (full and the 2008 paper's variant), TPC-B, YCSB and Voter.
//!
//! Each workload is written once against the engine's [`engine::Tx`] API: schema, loader,
//! input generation, procedures and `check()`. Drivers (embedded, server, client) run them
//! through the [`Workload`] and [`Terminal`] traits and know nothing else about them.
//!
//! ```text
//!   by_name("tpcc", &options) ──► Arc<dyn Workload> ──► create_schema, load, check
//!                                        │
//!                                        └─ terminal(id) ──► Box<dyn Terminal>
//!                                              next() draws type + input (kept across retries)
//!                                              run(&mut dyn Tx) executes it once
//! ```
//!
//! Invariant shared by every workload: `Terminal::run` never changes terminal state that a
//! retry would observe — the input drawn by `next` is reused unchanged until the next `next`.

pub mod hostile;
pub mod tpcb;
pub mod tpcc;
pub mod util;
pub mod voter;
pub mod workload;
pub mod ycsb;

use std::sync::Arc;

pub use workload::{Condition, Interactions, Procedures, Receipt, Terminal, Workload};

/// Which TPC-C transaction mix to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mix {
    /// The specification's five transactions, 45/43/4/4/4 (clause 5.2.3).
    #[default]
    Full,
    /// The 2008 paper's variant (§4.1, Figure 4): New-Order with ten local items and Payment
    /// by customer id at the home warehouse, 50/50, no rollbacks.
    Paper,
    /// The Charm paper's mix (two-stage execution, §4): the specification's five
    /// transactions, 43/43/4.7/4.7/4.6 (the paper gives 4.7 for each of the last three,
    /// which adds up to 100.1%; Stock-Level takes the rest). The paper ran each transaction
    /// as a process of its own, so no terminal keeps a home: each transaction draws its home
    /// warehouse and district afresh.
    Charm,
}

/// YCSB request distribution (which existing key an operation touches).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Distribution {
    Uniform,
    /// Scrambled Zipfian, θ = 0.99 (YCSB's `ScrambledZipfianGenerator`).
    #[default]
    Zipfian,
    /// Recently inserted keys are the most popular (YCSB's `SkewedLatestGenerator`).
    Latest,
}

impl Distribution {
    /// The distribution YCSB's core workload file names for `workload` ('D': latest,
    /// otherwise Zipfian).
    pub fn standard_for(workload: char) -> Distribution {
        if workload.eq_ignore_ascii_case(&'d') {
            Distribution::Latest
        } else {
            Distribution::Zipfian
        }
    }

    pub fn from_name(name: &str) -> Result<Distribution, String> {
        match name {
            "uniform" => Ok(Distribution::Uniform),
            "zipfian" => Ok(Distribution::Zipfian),
            "latest" => Ok(Distribution::Latest),
            other => Err(format!(
                "unknown distribution '{other}' (valid: uniform, zipfian, latest)"
            )),
        }
    }
}

/// What a driver may choose about a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadOptions {
    /// Warehouses (TPC-C), branches (TPC-B), records (YCSB), tens of thousands of distinct
    /// phone numbers (Voter: `scale` × 10,000 voters).
    pub scale: u64,
    /// TPC-C only.
    pub mix: Mix,
    /// YCSB core workload, 'A'..='F'.
    pub ycsb_workload: char,
    pub ycsb_distribution: Distribution,
    /// YCSB bytes per field.
    pub field_size: usize,
    /// YCSB fields per record.
    pub field_count: usize,
}

impl Default for WorkloadOptions {
    fn default() -> Self {
        WorkloadOptions {
            scale: 1,
            mix: Mix::Full,
            ycsb_workload: 'C',
            ycsb_distribution: Distribution::Zipfian,
            field_size: 100,
            field_count: 10,
        }
    }
}

/// The workload names [`by_name`] knows.
pub const WORKLOAD_NAMES: [&str; 4] = ["tpcc", "tpcb", "ycsb", "voter"];

/// The largest `scale` a workload holds (its ids must fit the bits its keys give them), or
/// `None` for an unknown name.
pub fn max_scale(name: &str) -> Option<u64> {
    match name {
        "tpcc" => Some(tpcc::MAX_WAREHOUSES),
        "tpcb" => Some(tpcb::MAX_BRANCHES),
        "ycsb" => Some(ycsb::MAX_RECORDS),
        "voter" => Some(voter::MAX_SCALE),
        _ => None,
    }
}

/// Builds a workload by name ("tpcc", "tpcb", "ycsb", "voter").
pub fn by_name(name: &str, options: &WorkloadOptions) -> Result<Arc<dyn Workload>, String> {
    if options.scale == 0 {
        return Err("scale must be at least 1".to_string());
    }
    match name {
        "tpcc" => Ok(Arc::new(tpcc::Tpcc::new(tpcc::TpccConfig::new(
            options.scale,
            options.mix,
        ))?)),
        "tpcb" => Ok(Arc::new(tpcb::Tpcb::new(tpcb::TpcbConfig::new(
            options.scale,
        ))?)),
        "ycsb" => Ok(Arc::new(ycsb::Ycsb::new(ycsb::YcsbConfig {
            record_count: options.scale,
            workload: ycsb::CoreWorkload::from_letter(options.ycsb_workload)?,
            distribution: options.ycsb_distribution,
            field_size: options.field_size,
            field_count: options.field_count,
        })?)),
        "voter" => Ok(Arc::new(voter::Voter::new(voter::VoterConfig::new(
            options.scale,
        ))?)),
        hostile::NAME => Ok(Arc::new(hostile::Hostile::new(options.scale))),
        other => Err(format!(
            "unknown workload '{other}' (valid: {}, and {} for the containment tests)",
            WORKLOAD_NAMES.join(", "),
            hostile::NAME
        )),
    }
}
