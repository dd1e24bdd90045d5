//! HTSTE: each transaction type runs under the strategy its own statistics call for.
//!
//! Two cumulative statistics per type, over every instance run so far (warm-up included):
//!
//! * the **mis-prefetch ratio**: of the data accesses (page fixes) of operate stages that
//!   followed a fetch stage, the share that read from the device;
//! * the **conversion ratio**: the share of instances that needed physical I/O, that is needed
//!   two stages (a fetch stage that read, an OTSTE conversion, or a conventional run that
//!   read).
//!
//! The paper's rules, in order ([`classify`]): a mis-prefetch ratio above
//! [`HtsteConfig::mis_prefetch`] makes a type conventional (Type 1: a fetch stage would not
//! help); else a conversion ratio above [`HtsteConfig::conversion`] (5%: OTSTE only where
//! more than 95% of instances need no I/O) makes it TSTE (Type 2); else OTSTE (Type 3). Until
//! a type has [`HtsteConfig::warmup`] instances it runs TSTE, the paper's default. The paper
//! gives no mis-prefetch threshold; the default is 10% and `glass charm` sweeps it.
//!
//! A type classified conventional runs no fetch stage, so its mis-prefetch ratio would never
//! change again: one instance in [`HtsteConfig::probe_every`] runs TSTE to keep it current.
//! Each change of a type's class is logged as a [`Decision`] with its inputs.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::Duration;

use super::{Strategy, TypeTotals};

/// HTSTE's thresholds.
#[derive(Clone, Debug, PartialEq)]
pub struct HtsteConfig {
    /// Mis-prefetch ratio above which a type runs conventionally (a fraction).
    pub mis_prefetch: f64,
    /// Conversion ratio above which a type runs TSTE rather than OTSTE (a fraction).
    pub conversion: f64,
    /// Instances of a type run as TSTE before its statistics decide.
    pub warmup: u64,
    /// A type classified conventional runs one instance in this many as TSTE.
    pub probe_every: u64,
}

impl Default for HtsteConfig {
    fn default() -> Self {
        HtsteConfig {
            mis_prefetch: 0.10,
            conversion: 0.05,
            warmup: 50,
            probe_every: 20,
        }
    }
}

/// The statistics of one transaction type that HTSTE decides by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TypeCounts {
    pub instances: u64,
    /// Instances that needed physical I/O (two stages).
    pub needed_io: u64,
    pub operate_fixes_after_fetch: u64,
    pub operate_reads_after_fetch: u64,
}

impl TypeCounts {
    pub fn mis_prefetch_ratio(&self) -> f64 {
        if self.operate_fixes_after_fetch == 0 {
            0.0
        } else {
            self.operate_reads_after_fetch as f64 / self.operate_fixes_after_fetch as f64
        }
    }

    pub fn conversion_ratio(&self) -> f64 {
        if self.instances == 0 {
            0.0
        } else {
            self.needed_io as f64 / self.instances as f64
        }
    }
}

/// The paper's rules (see the module docs).
pub fn classify(counts: &TypeCounts, config: &HtsteConfig) -> Strategy {
    if counts.instances < config.warmup {
        Strategy::Tste
    } else if counts.mis_prefetch_ratio() > config.mis_prefetch {
        Strategy::Conventional
    } else if counts.conversion_ratio() > config.conversion {
        Strategy::Tste
    } else {
        Strategy::Otste
    }
}

/// The paper's fixed assignment for a transaction type by name: TPC-C's New-Order and
/// Delivery start in the fetch stage, the others in the operate stage; a type of another
/// workload runs TSTE.
pub fn paper_assignment(name: &str) -> Strategy {
    match name {
        "new_order" | "delivery" => Strategy::Tste,
        "payment" | "order_status" | "stock_level" => Strategy::Otste,
        _ => Strategy::Tste,
    }
}

/// One change of a type's class, with what it was decided on.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Decision {
    /// Milliseconds since the executor was made.
    pub at_ms: u64,
    pub txn_type: String,
    pub from: Option<&'static str>,
    pub to: &'static str,
    pub instances: u64,
    pub mis_prefetch_ratio: f64,
    pub conversion_ratio: f64,
}

const NONE: u8 = u8::MAX;

/// HTSTE's per-type statistics and current classes.
pub struct Classifier {
    config: HtsteConfig,
    names: Vec<String>,
    /// The paper's fixed assignment, if that is the strategy.
    fixed: Option<Vec<Strategy>>,
    totals: Vec<TypeTotals>,
    /// Each type's current class (an index into [`Strategy::ALL`]), `NONE` before the first.
    class: Vec<AtomicU8>,
    seen: Vec<AtomicU64>,
}

impl Classifier {
    pub fn new(config: HtsteConfig, names: &[&str], strategy: Strategy) -> Classifier {
        Classifier {
            config,
            names: names.iter().map(|n| n.to_string()).collect(),
            fixed: (strategy == Strategy::HtstePaper)
                .then(|| names.iter().map(|n| paper_assignment(n)).collect()),
            totals: names.iter().map(|_| TypeTotals::default()).collect(),
            class: names.iter().map(|_| AtomicU8::new(NONE)).collect(),
            seen: names.iter().map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The cumulative totals of type `kind`, which every run adds to.
    pub(super) fn totals(&self, kind: usize) -> Option<&TypeTotals> {
        self.totals.get(kind)
    }

    /// The strategy for the next instance of `kind`, and the decision if its class changed.
    pub(super) fn choose(&self, kind: usize, at: Duration) -> (Strategy, Option<Decision>) {
        let Some(totals) = self.totals.get(kind) else {
            return (Strategy::Tste, None);
        };
        let counts = totals.summary().counts();
        let class = match &self.fixed {
            Some(fixed) => fixed[kind],
            None => classify(&counts, &self.config),
        };
        let index = Strategy::ALL.iter().position(|s| *s == class).unwrap_or(0) as u8;
        let before = self.class[kind].swap(index, Ordering::Relaxed);
        let decision = (before != index).then(|| Decision {
            at_ms: at.as_millis() as u64,
            txn_type: self.names[kind].clone(),
            from: (before != NONE).then(|| Strategy::ALL[before as usize].name()),
            to: class.name(),
            instances: counts.instances,
            mis_prefetch_ratio: counts.mis_prefetch_ratio(),
            conversion_ratio: counts.conversion_ratio(),
        });
        let n = self.seen[kind].fetch_add(1, Ordering::Relaxed);
        let probe = class == Strategy::Conventional
            && self.fixed.is_none()
            && self.config.probe_every > 0
            && n.is_multiple_of(self.config.probe_every);
        (if probe { Strategy::Tste } else { class }, decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(instances: u64, needed_io: u64, fixes: u64, reads: u64) -> TypeCounts {
        TypeCounts {
            instances,
            needed_io,
            operate_fixes_after_fetch: fixes,
            operate_reads_after_fetch: reads,
        }
    }

    #[test]
    fn the_papers_rules_in_their_order() {
        let c = HtsteConfig::default();
        // Too few instances: TSTE, whatever they show.
        assert_eq!(classify(&counts(10, 0, 100, 90), &c), Strategy::Tste);
        // Mis-prefetching 20% of accesses: conventional, even though most need I/O.
        assert_eq!(
            classify(&counts(100, 90, 1000, 200), &c),
            Strategy::Conventional
        );
        // Mis-prefetch at the threshold is not above it: on to the conversion ratio.
        assert_eq!(classify(&counts(100, 90, 1000, 100), &c), Strategy::Tste);
        // 6% of instances need I/O: TSTE; 5% (not above the threshold): OTSTE.
        assert_eq!(classify(&counts(100, 6, 1000, 0), &c), Strategy::Tste);
        assert_eq!(classify(&counts(100, 5, 1000, 0), &c), Strategy::Otste);
        // No I/O at all, no fetch stage ever: OTSTE.
        assert_eq!(classify(&counts(500, 0, 0, 0), &c), Strategy::Otste);
        // A lower mis-prefetch threshold turns the TSTE type conventional.
        let strict = HtsteConfig {
            mis_prefetch: 0.05,
            ..c.clone()
        };
        assert_eq!(
            classify(&counts(100, 90, 1000, 60), &strict),
            Strategy::Conventional
        );
        assert_eq!(classify(&counts(100, 90, 1000, 60), &c), Strategy::Tste);
    }

    #[test]
    fn the_papers_assignment_for_tpcc() {
        let names = [
            "new_order",
            "payment",
            "order_status",
            "delivery",
            "stock_level",
        ];
        let got: Vec<_> = names.iter().map(|n| paper_assignment(n)).collect();
        use Strategy::*;
        assert_eq!(got, [Tste, Otste, Otste, Tste, Otste]);
        let classifier = Classifier::new(HtsteConfig::default(), &names, HtstePaper);
        for (kind, want) in got.iter().enumerate() {
            let (choice, decision) = classifier.choose(kind, Duration::ZERO);
            assert_eq!(choice, *want);
            assert_eq!(decision.unwrap().to, want.name());
            // The second choice changes nothing, so logs nothing.
            assert_eq!(classifier.choose(kind, Duration::ZERO).1, None);
        }
    }

    #[test]
    fn a_change_of_class_is_logged_and_conventional_types_are_probed() {
        let config = HtsteConfig {
            warmup: 4,
            probe_every: 3,
            ..HtsteConfig::default()
        };
        let classifier = Classifier::new(config, &["t"], Strategy::Htste);
        let first = classifier.choose(0, Duration::from_millis(5));
        assert_eq!(first.0, Strategy::Tste);
        let d = first.1.unwrap();
        assert_eq!((d.from, d.to, d.at_ms), (None, "tste", 5));
        // Four two-stage instances whose operate stages read half their accesses.
        for _ in 0..4 {
            classifier.totals(0).unwrap().add(
                &super::super::TxnReport {
                    ran: Strategy::Tste,
                    two_stage: true,
                    fetch_reads: 3,
                    operate_reads: 5,
                    operate_fixes: 10,
                    ..Default::default()
                },
                true,
            );
        }
        let choices: Vec<_> = (0..6)
            .map(|_| classifier.choose(0, Duration::from_millis(9)))
            .collect();
        let d = choices[0].1.as_ref().unwrap();
        assert_eq!(
            (d.from, d.to, d.instances),
            (Some("tste"), "conventional", 4)
        );
        assert!((d.mis_prefetch_ratio - 0.5).abs() < 1e-9);
        assert!((d.conversion_ratio - 1.0).abs() < 1e-9);
        assert!(choices[1..].iter().all(|c| c.1.is_none()));
        // One in three runs as TSTE, to keep the statistics current.
        let probes = choices.iter().filter(|c| c.0 == Strategy::Tste).count();
        assert_eq!(probes, 2, "{choices:?}");
    }
}
