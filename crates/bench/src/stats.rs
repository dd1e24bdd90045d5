//! Per-transaction-type statistics: counts and latency histograms.
//!
//! Every worker thread owns one [`RunStats`] and records into it without synchronisation;
//! the driver merges the workers' statistics once, after the run. A histogram records
//! latencies in whole microseconds from [`LATENCY_LOWEST_US`] to [`LATENCY_HIGHEST_US`] with
//! three significant digits; a latency above the highest is recorded as the highest (and
//! `max_us` then reads as that bound), a latency below one microsecond as one.
//!
//! Counting rules (the same for every workload):
//!
//! | counter      | incremented when                                                       |
//! |--------------|------------------------------------------------------------------------|
//! | `commits`    | a transaction committed                                                |
//! | `rollbacks`  | the procedure asked for a rollback (`TxError::UserAbort`)              |
//! | `aborts`     | an attempt failed with `TxError::Retry` and was run again              |
//! | `count`      | a transaction completed: `commits + rollbacks`                         |
//!
//! Latency is measured per completed transaction, from the first `begin` to the final commit
//! or rollback, so it includes the time spent in retried attempts and backoff.
//!
//! Invariant (checked by [`TypeStats::check_invariants`]): the latency histogram holds exactly
//! `count` values.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Smallest latency the histograms distinguish, in microseconds.
pub const LATENCY_LOWEST_US: u64 = 1;
/// Largest latency the histograms distinguish (one minute), in microseconds.
pub const LATENCY_HIGHEST_US: u64 = 60_000_000;
/// Significant decimal digits kept by the histograms.
const LATENCY_SIGNIFICANT_DIGITS: u8 = 3;

/// How one transaction ended, as the driver records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    /// Rolled back because the specification asks for it (`TxError::UserAbort`).
    RolledBack,
}

/// Statistics of one transaction type.
#[derive(Clone, Debug)]
pub struct TypeStats {
    pub commits: u64,
    pub rollbacks: u64,
    /// Attempts aborted with `TxError::Retry` and run again.
    pub aborts: u64,
    /// Latency of completed transactions, in microseconds.
    pub latency_us: Histogram<u64>,
}

impl Default for TypeStats {
    fn default() -> Self {
        TypeStats {
            commits: 0,
            rollbacks: 0,
            aborts: 0,
            latency_us: new_latency_histogram(),
        }
    }
}

fn new_latency_histogram() -> Histogram<u64> {
    // The bounds are constants that satisfy hdrhistogram's preconditions (low >= 1,
    // high >= 2 * low, sigfig <= 5), so creation cannot fail.
    Histogram::new_with_bounds(
        LATENCY_LOWEST_US,
        LATENCY_HIGHEST_US,
        LATENCY_SIGNIFICANT_DIGITS,
    )
    .expect("constant histogram bounds are valid")
}

impl TypeStats {
    /// Completed transactions: commits and rollbacks.
    pub fn count(&self) -> u64 {
        self.commits + self.rollbacks
    }

    /// Records one completed transaction.
    pub fn record(&mut self, outcome: Outcome, latency: Duration) {
        match outcome {
            Outcome::Committed => self.commits += 1,
            Outcome::RolledBack => self.rollbacks += 1,
        }
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.latency_us.saturating_record(us.max(LATENCY_LOWEST_US));
    }

    /// Adds another worker's statistics of the same type.
    pub fn merge(&mut self, other: &TypeStats) {
        self.commits += other.commits;
        self.rollbacks += other.rollbacks;
        self.aborts += other.aborts;
        // Both histograms have the same bounds, so addition cannot go out of range.
        self.latency_us
            .add(&other.latency_us)
            .expect("histograms with equal bounds add");
    }

    /// The latency summary of this type.
    pub fn latency(&self) -> LatencySummary {
        LatencySummary::of(&self.latency_us)
    }

    /// The histogram holds exactly one value per completed transaction.
    pub fn check_invariants(&self) {
        assert_eq!(
            self.latency_us.len(),
            self.count(),
            "latency histogram holds {} values for {} completed transactions",
            self.latency_us.len(),
            self.count()
        );
    }
}

/// Latency percentiles in microseconds (all zero when nothing was recorded).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencySummary {
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl LatencySummary {
    pub fn of(histogram: &Histogram<u64>) -> LatencySummary {
        if histogram.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            p50_us: histogram.value_at_quantile(0.50),
            p90_us: histogram.value_at_quantile(0.90),
            p99_us: histogram.value_at_quantile(0.99),
            p999_us: histogram.value_at_quantile(0.999),
            max_us: histogram.max(),
        }
    }
}

/// Statistics of a run (or of one worker): one entry per transaction type, indexed like the
/// workload's `txn_names`.
#[derive(Clone, Debug)]
pub struct RunStats {
    pub by_type: Vec<TypeStats>,
}

impl RunStats {
    pub fn new(type_count: usize) -> RunStats {
        RunStats {
            by_type: vec![TypeStats::default(); type_count],
        }
    }

    /// Adds another worker's statistics (same workload, same number of types).
    pub fn merge(&mut self, other: &RunStats) {
        assert_eq!(self.by_type.len(), other.by_type.len());
        for (mine, theirs) in self.by_type.iter_mut().zip(&other.by_type) {
            mine.merge(theirs);
        }
    }

    /// All types together.
    pub fn overall(&self) -> TypeStats {
        let mut all = TypeStats::default();
        for t in &self.by_type {
            all.merge(t);
        }
        all
    }

    pub fn txn_count(&self) -> u64 {
        self.by_type.iter().map(TypeStats::count).sum()
    }

    pub fn check_invariants(&self) {
        for t in &self.by_type {
            t.check_invariants();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_counts_outcomes_and_latencies() {
        let mut t = TypeStats::default();
        t.record(Outcome::Committed, Duration::from_micros(100));
        t.record(Outcome::Committed, Duration::from_micros(300));
        t.record(Outcome::RolledBack, Duration::from_nanos(10));
        t.aborts += 2;
        assert_eq!(t.count(), 3);
        assert_eq!(t.commits, 2);
        assert_eq!(t.rollbacks, 1);
        t.check_invariants();
        let l = t.latency();
        assert_eq!(l.p50_us, 100);
        // Three significant digits: 300 is exact.
        assert_eq!(l.max_us, 300);
        assert!(l.p50_us <= l.p90_us && l.p90_us <= l.p99_us && l.p99_us <= l.max_us);
    }

    #[test]
    fn huge_latencies_saturate_instead_of_failing() {
        let mut t = TypeStats::default();
        t.record(Outcome::Committed, Duration::from_secs(3600));
        t.check_invariants();
        let max = t.latency().max_us;
        // Within the histogram's precision of its highest trackable value.
        assert!(
            max >= LATENCY_HIGHEST_US - LATENCY_HIGHEST_US / 500,
            "{max}"
        );
    }

    #[test]
    fn merge_adds_counts_and_histograms() {
        let mut a = RunStats::new(2);
        let mut b = RunStats::new(2);
        for i in 0..10 {
            a.by_type[0].record(Outcome::Committed, Duration::from_micros(10 + i));
            b.by_type[1].record(Outcome::RolledBack, Duration::from_micros(1000 + i));
        }
        b.by_type[0].aborts = 4;
        a.merge(&b);
        a.check_invariants();
        assert_eq!(a.txn_count(), 20);
        assert_eq!(a.by_type[0].aborts, 4);
        let all = a.overall();
        assert_eq!(all.count(), 20);
        assert_eq!(all.rollbacks, 10);
        assert!(all.latency().max_us >= 1009);
        assert!(all.latency().p50_us < 1000);
    }

    #[test]
    fn empty_summary_is_zero() {
        assert_eq!(TypeStats::default().latency(), LatencySummary::default());
    }
}
