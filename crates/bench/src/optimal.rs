//! `glass bench tpcc --mix paper --preset optimal --threads 1`: the hand-coded kernel (the
//! ladder's rung 11) under the same closed-loop driver as the engine, so that its throughput
//! and latencies print in the same table and JSON as the engine's presets.
//!
//! ```text
//!   Kernel::populate ─► KernelTerminal (owns the kernel; draws InputGenerator inputs)
//!     ─► drive(…, KernelExecutor) ─► the terminal hands the kernel back when dropped
//!     ─► check_invariants ─► TPC-C's twelve conditions on a snapshot fed from the kernel
//! ```
//!
//! The driver's [`Executor`] seam hands each attempt a transaction of the engine; the kernel
//! has none. [`KernelExecutor`] passes [`NoEngine`], whose every operation is an error, and
//! the kernel terminal never calls it: each attempt is one call of `Kernel::new_order` or
//! `Kernel::payment`, timed by the driver like an engine transaction.
//!
//! Consistency is judged by the workloads crate's own [`conditions`], on a [`Snapshot`] built
//! from the kernel's structures (no engine round trip: a ten-second kernel run writes tens of
//! millions of order lines).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use anyhow::{bail, Context};
use engine::api::{Fetch, IndexRef, KeyRange, TableRef};
use engine::{Row, Tx, TxError, TxResult, Value};
use kernel::{InputGenerator, Kernel, KernelError, KernelInput, Scale};
use parking_lot::Mutex;
use workloads::tpcc::check::{conditions, Snapshot, SnapshotBuilder};
use workloads::tpcc::input::TXN_NAMES;
use workloads::tpcc::TpccConfig;
use workloads::{Condition, Mix, Terminal};

use crate::driver::{Attempt, Executor};
use crate::report::{rfc3339_utc, BenchResult};
use crate::run::{bench_result, run_rounds, BenchConfig, Status, UsageError};

/// Checks that `config` is something the kernel can run: TPC-C's paper mix, in memory.
/// (One thread is checked with the switches.)
fn validate(config: &BenchConfig) -> Result<(), UsageError> {
    let refuse = |why: &str| Err(UsageError(format!("--preset optimal: {why}")));
    if config.workload != "tpcc" {
        return refuse(&format!(
            "the kernel runs TPC-C only, not {} (valid: tpcc --mix paper)",
            config.workload
        ));
    }
    if config.options.mix != Mix::Paper {
        return refuse("the kernel runs the paper's mix only: add --mix paper");
    }
    if config.db.path.is_some() || config.db.durable {
        return refuse("the kernel lives in memory and logs nothing: drop --db and --durable");
    }
    if config.threads != 1 {
        return refuse("the kernel is single-threaded: use --threads 1");
    }
    Ok(())
}

/// Runs the kernel benchmark described by `config` (whose switches are the optimal preset).
pub(crate) fn run_optimal(config: &BenchConfig) -> anyhow::Result<BenchResult> {
    validate(config)?;
    let status = Status::new(config.quiet);
    let timestamp = rfc3339_utc(SystemTime::now());
    let warehouses = u32::try_from(config.options.scale)
        .ok()
        .filter(|w| *w > 0)
        .ok_or_else(|| UsageError(format!("--scale {} is out of range", config.options.scale)))?;
    let scale = Scale::spec(warehouses);

    status.say(format_args!(
        "populating the kernel ({warehouses} warehouse{})...",
        if warehouses == 1 { "" } else { "s" }
    ));
    let started = Instant::now();
    let kernel =
        Kernel::populate(scale, config.seed).map_err(|e| anyhow::anyhow!("populate: {e}"))?;
    let load_s = started.elapsed().as_secs_f64();
    status.say(format_args!("populated in {load_s:.2} s"));

    // Each round's terminal hands the kernel back here when it is dropped.
    let home = Arc::new(Mutex::new(Some(kernel)));
    let terminals = |seed: u64| -> anyhow::Result<Vec<Box<dyn Terminal>>> {
        let kernel = home
            .lock()
            .take()
            .context("the kernel terminal did not hand the kernel back")?;
        Ok(vec![Box::new(KernelTerminal::new(
            kernel,
            seed,
            home.clone(),
        ))])
    };
    let outcome = run_rounds(config, terminals, &KernelExecutor, &TXN_NAMES, &status)?;

    status.say(format_args!("checking consistency..."));
    let kernel = home
        .lock()
        .take()
        .context("the kernel terminal did not hand the kernel back")?;
    let conditions = kernel_conditions(&kernel);
    bench_result(
        config,
        &config.db,
        timestamp,
        Some(load_s),
        &TXN_NAMES,
        &outcome,
        &conditions,
    )
    .and_then(|r| crate::run::write_json(config, r))
}

/// The kernel's structural invariants, then TPC-C's twelve conditions (clause 3.3.2) for a
/// database of the kernel's scale.
pub fn kernel_conditions(kernel: &Kernel) -> Vec<Condition> {
    let mut out = vec![Condition {
        name: "kernel invariants".to_string(),
        description: "orders, lines and new-orders tile their vectors (Kernel::check_invariants)"
            .to_string(),
        violation: kernel.check_invariants().err().map(|e| e.to_string()),
    }];
    let scale = kernel.scale();
    let mut config = TpccConfig::new(u64::from(scale.warehouses), Mix::Paper);
    config.items = i64::from(scale.items);
    config.customers_per_district = i64::from(scale.customers_per_district);
    out.extend(conditions(&snapshot(kernel), &config));
    out
}

/// What the consistency conditions compare, read from the kernel's structures.
pub fn snapshot(kernel: &Kernel) -> Snapshot {
    let scale = kernel.scale();
    let districts = kernel::DISTRICTS_PER_WAREHOUSE;
    let mut b = SnapshotBuilder::new();
    let all_districts =
        || (1..=scale.warehouses).flat_map(|w| (1..=districts).map(move |d| (w, d)));
    for w in 1..=scale.warehouses {
        if let Some(row) = kernel.warehouse(w) {
            b.warehouse(i64::from(w), row.ytd);
        }
    }
    for (w, d) in all_districts() {
        if let Some(row) = kernel.district(w, d) {
            b.district(
                i64::from(w),
                i64::from(d),
                row.ytd,
                i64::from(row.next_o_id),
            );
        }
    }
    for (w, d) in all_districts() {
        for c in 1..=scale.customers_per_district {
            if let Some(row) = kernel.customer(w, d, c) {
                let key = (i64::from(w), i64::from(d), i64::from(c));
                b.customer(key, row.balance, row.ytd_payment, row.delivery_cnt);
            }
        }
    }
    let rows = || {
        all_districts()
            .filter_map(|(w, d)| Some(((i64::from(w), i64::from(d)), kernel.district_rows(w, d)?)))
    };
    for ((w, d), r) in rows() {
        for h in &r.history {
            let customer = (i64::from(h.c_w_id), i64::from(h.c_d_id), i64::from(h.c_id));
            b.history(w, d, customer, h.amount);
        }
    }
    for ((w, d), r) in rows() {
        for (o_id, o) in (i64::from(r.first_o_id)..).zip(&r.orders) {
            b.order(
                (w, d, o_id),
                i64::from(o.c_id),
                o.carrier_id.is_none(),
                i64::from(o.ol_cnt),
            );
        }
    }
    for ((w, d), r) in rows() {
        for &o_id in &r.new_orders {
            b.new_order((w, d, i64::from(o_id)));
        }
    }
    for ((w, d), r) in rows() {
        for (o_id, o) in (i64::from(r.first_o_id)..).zip(&r.orders) {
            let start = o.first_line as usize;
            let lines = r
                .order_lines
                .get(start..start + usize::from(o.ol_cnt))
                .unwrap_or(&[]);
            for line in lines {
                b.order_line((w, d, o_id), line.delivery_d.is_some(), line.amount);
            }
        }
    }
    b.build()
}

/// The one terminal of a kernel run: owns the kernel while the driver runs it, and puts it
/// in `home` when dropped (the driver drops its terminals when the run ends).
pub struct KernelTerminal {
    kernel: Option<Kernel>,
    inputs: InputGenerator,
    input: Option<KernelInput>,
    home: Arc<Mutex<Option<Kernel>>>,
    new_order: usize,
    payment: usize,
}

impl KernelTerminal {
    /// A terminal drawing the paper's mix from `seed` (the engine's terminal 0 uses the same
    /// seed, though its generator draws differently).
    pub fn new(kernel: Kernel, seed: u64, home: Arc<Mutex<Option<Kernel>>>) -> KernelTerminal {
        let index = |name: &str| {
            TXN_NAMES
                .iter()
                .position(|n| *n == name)
                .unwrap_or_else(|| unreachable!("TPC-C names {name}"))
        };
        KernelTerminal {
            inputs: InputGenerator::new(seed, kernel.scale()),
            kernel: Some(kernel),
            input: None,
            home,
            new_order: index("new_order"),
            payment: index("payment"),
        }
    }
}

impl Terminal for KernelTerminal {
    fn next(&mut self) -> usize {
        let input = self.inputs.draw();
        self.input = Some(input);
        match input {
            KernelInput::NewOrder(_) => self.new_order,
            KernelInput::Payment(_) => self.payment,
        }
    }

    fn run(&mut self, _engine: &mut dyn Tx) -> TxResult<()> {
        let (Some(kernel), Some(input)) = (self.kernel.as_mut(), self.input.as_ref()) else {
            return Err(TxError::Invalid("kernel terminal run before next".into()));
        };
        let done = match input {
            KernelInput::NewOrder(i) => kernel.new_order(i).map(|out| {
                std::hint::black_box(out);
            }),
            KernelInput::Payment(i) => kernel.payment(i).map(|out| {
                std::hint::black_box(out);
            }),
        };
        done.map_err(|e| match e {
            KernelError::UnusedItem(_) => TxError::UserAbort(e.to_string()),
            other => TxError::Invalid(other.to_string()),
        })
    }
}

impl Drop for KernelTerminal {
    fn drop(&mut self) {
        if let Some(kernel) = self.kernel.take() {
            *self.home.lock() = Some(kernel);
        }
    }
}

/// Runs each attempt on the terminal alone (the kernel terminal carries its database).
pub struct KernelExecutor;

impl Executor for KernelExecutor {
    fn execute(&self, _attempt: Attempt, terminal: &mut dyn Terminal) -> TxResult<()> {
        terminal.run(&mut NoEngine)
    }
}

/// The transaction [`KernelExecutor`] hands a terminal: there is no engine behind it, and
/// every operation says so.
pub struct NoEngine;

impl NoEngine {
    fn refuse<T>() -> TxResult<T> {
        Err(TxError::Invalid(
            "the optimal preset runs the hand-coded kernel: there is no engine to call".into(),
        ))
    }
}

impl Tx for NoEngine {
    fn get(&mut self, _: &TableRef, _: &[Value], _: Fetch<'_>, _: bool) -> TxResult<Option<Row>> {
        Self::refuse()
    }

    fn update(&mut self, _: &TableRef, _: &[Value], _: &[(usize, Value)]) -> TxResult<bool> {
        Self::refuse()
    }

    fn insert(&mut self, _: &TableRef, _: &[Value]) -> TxResult<()> {
        Self::refuse()
    }

    fn delete(&mut self, _: &TableRef, _: &[Value]) -> TxResult<bool> {
        Self::refuse()
    }

    fn scan(
        &mut self,
        _: &TableRef,
        _: KeyRange<'_>,
        _: Option<usize>,
        _: bool,
        _: Fetch<'_>,
        _: bool,
    ) -> TxResult<Vec<Row>> {
        Self::refuse()
    }

    fn scan_index(
        &mut self,
        _: &IndexRef,
        _: KeyRange<'_>,
        _: Option<usize>,
        _: bool,
        _: Fetch<'_>,
        _: bool,
    ) -> TxResult<Vec<Row>> {
        Self::refuse()
    }
}

/// Refuses the optimal preset where only the engine can serve (`what`: the command).
pub fn refuse_kernel(switches: &engine::Switches, what: &str) -> anyhow::Result<()> {
    if switches.optimal {
        bail!(UsageError(format!(
            "preset 'optimal' is the hand-coded kernel: {what} needs the engine (valid: full, stripped; the kernel runs in `glass bench tpcc --mix paper --preset optimal --threads 1` and rung 11 of `glass ladder tpcc`)"
        )));
    }
    Ok(())
}
