//! YCSB: one `usertable` of `record_count` records, each a key and `field_count` string
//! fields of `field_size` bytes, and the six core workloads.
//!
//! | workload | operations                                   | standard distribution |
//! |----------|----------------------------------------------|-----------------------|
//! | A        | 50% read, 50% update                         | zipfian               |
//! | B        | 95% read, 5% update                          | zipfian               |
//! | C        | 100% read                                    | zipfian               |
//! | D        | 95% read, 5% insert                          | latest                |
//! | E        | 95% scan (1–100 records), 5% insert          | zipfian               |
//! | F        | 50% read, 50% read-modify-write              | zipfian               |
//!
//! A read fetches every field; an update or read-modify-write rewrites one random field.
//! Keys are integers 0..record_count in insertion order (YCSB's `insertorder=ordered`);
//! inserts take the next integer from a counter shared by the workload's terminals.
//!
//! Distributions: uniform over the keys inserted so far; Zipfian with θ = 0.99 over the loaded
//! keys, scrambled by FNV-1a (YCSB's `ScrambledZipfianGenerator`) so popular keys are spread
//! over the key space; latest = the newest key minus a Zipfian draw (YCSB's
//! `SkewedLatestGenerator`), so the most recent inserts are the most popular.
//!
//! check(): every loaded key is present, records beyond them are only keys handed out to
//! inserts, record count = loaded + inserted, and every field has `field_size` bytes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use engine::db::Database;
use engine::{Connection, Fetch, KeyRange, TableRef, TableSchema, Tx, TxError, TxResult, Value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::util::{
    drawn, fnv1a_64, int, no_procedure, with_txn, Args, BatchLoader, CheckProgress, TableScan,
};
use crate::workload::{Condition, Interactions, Procedures, Receipt, Terminal, Workload};
use crate::Distribution;

pub const USERTABLE: &str = "usertable";
pub const OP_NAMES: [&str; 5] = ["read", "update", "insert", "scan", "read_modify_write"];
pub const MAX_SCAN_LENGTH: u64 = 100;
pub const ZIPFIAN_THETA: f64 = 0.99;

/// Operation proportions of a core workload, in `OP_NAMES` order (percent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreWorkload {
    pub letter: char,
    pub percent: [u32; 5],
}

impl CoreWorkload {
    pub fn from_letter(letter: char) -> Result<CoreWorkload, String> {
        let percent = match letter.to_ascii_uppercase() {
            'A' => [50, 50, 0, 0, 0],
            'B' => [95, 5, 0, 0, 0],
            'C' => [100, 0, 0, 0, 0],
            'D' => [95, 0, 5, 0, 0],
            'E' => [0, 0, 5, 95, 0],
            'F' => [50, 0, 0, 0, 50],
            other => {
                return Err(format!(
                    "unknown YCSB workload '{other}' (valid: A, B, C, D, E, F)"
                ))
            }
        };
        Ok(CoreWorkload {
            letter: letter.to_ascii_uppercase(),
            percent,
        })
    }

    /// Draws an operation index (into `OP_NAMES`).
    pub fn draw(&self, rng: &mut impl Rng) -> usize {
        let mut x = rng.gen_range(0..100);
        for (i, p) in self.percent.iter().enumerate() {
            if x < *p {
                return i;
            }
            x -= p;
        }
        0
    }
}

/// Zipfian over [0, items) with parameter θ (Gray et al., "Quickly generating billion-record
/// synthetic databases", as YCSB's `ZipfianGenerator`): item 0 is the most popular.
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Zipfian {
    pub fn new(items: u64, theta: f64) -> Zipfian {
        let items = items.max(1);
        let zetan = zeta(items, theta);
        let zeta2 = zeta(2.min(items), theta);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
        }
    }

    pub fn next(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.items - 1);
        }
        let v = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.items - 1)
    }

    /// Scrambled: the Zipfian rank hashed onto [0, items).
    pub fn next_scrambled(&self, rng: &mut impl Rng) -> u64 {
        fnv1a_64(self.next(rng)) % self.items
    }
}

/// The most records a load may hold: `ycsb_key` has 48 bits, and the upper half of its range
/// is left to the inserts of workloads D and E.
pub const MAX_RECORDS: u64 = 1 << 47;

/// YCSB settings.
#[derive(Clone, Debug, PartialEq)]
pub struct YcsbConfig {
    pub record_count: u64,
    pub workload: CoreWorkload,
    pub distribution: Distribution,
    pub field_size: usize,
    pub field_count: usize,
}

/// One drawn operation with its input.
#[derive(Clone, Debug, PartialEq)]
pub enum YcsbOp {
    Read {
        key: i64,
    },
    Update {
        key: i64,
        field: usize,
        value: String,
    },
    Insert {
        key: i64,
        fields: Vec<String>,
    },
    Scan {
        start: i64,
        length: usize,
    },
    ReadModifyWrite {
        key: i64,
        field: usize,
        value: String,
    },
}

impl YcsbOp {
    pub fn index(&self) -> usize {
        match self {
            YcsbOp::Read { .. } => 0,
            YcsbOp::Update { .. } => 1,
            YcsbOp::Insert { .. } => 2,
            YcsbOp::Scan { .. } => 3,
            YcsbOp::ReadModifyWrite { .. } => 4,
        }
    }

    /// The operation as its stored procedure's arguments: `key` (read); `key, field, value`
    /// (update, read-modify-write); `key, field values...` (insert); `start, length` (scan).
    pub fn to_args(&self, out: &mut Vec<Value>) {
        match self {
            YcsbOp::Read { key } => out.push(Value::Int(*key)),
            YcsbOp::Update { key, field, value }
            | YcsbOp::ReadModifyWrite { key, field, value } => out.extend([
                Value::Int(*key),
                Value::Int(*field as i64),
                Value::Str(value.clone()),
            ]),
            YcsbOp::Insert { key, fields } => {
                out.push(Value::Int(*key));
                out.extend(fields.iter().map(|f| Value::Str(f.clone())));
            }
            YcsbOp::Scan { start, length } => {
                out.extend([Value::Int(*start), Value::Int(*length as i64)])
            }
        }
    }

    /// Operation `index` (see [`YcsbOp::index`]) from its procedure's arguments.
    pub fn from_args(index: usize, args: &[Value]) -> TxResult<YcsbOp> {
        let name = *OP_NAMES
            .get(index)
            .ok_or_else(|| no_procedure("ycsb", index))?;
        let mut a = Args::new(name, args);
        let op = match index {
            0 => YcsbOp::Read { key: a.int()? },
            1 | 4 => {
                let (key, field, value) =
                    (a.int()?, a.count(u16::MAX as usize)?, a.str()?.to_string());
                if index == 1 {
                    YcsbOp::Update { key, field, value }
                } else {
                    YcsbOp::ReadModifyWrite { key, field, value }
                }
            }
            2 => {
                let key = a.int()?;
                let mut fields = Vec::with_capacity(args.len().saturating_sub(1));
                for _ in 1..args.len() {
                    fields.push(a.str()?.to_string());
                }
                YcsbOp::Insert { key, fields }
            }
            _ => YcsbOp::Scan {
                start: a.int()?,
                length: a.count(MAX_SCAN_LENGTH as usize)?,
            },
        };
        a.finish()?;
        Ok(op)
    }
}

fn field_value(rng: &mut impl Rng, size: usize) -> String {
    (0..size)
        .map(|_| char::from(rng.gen_range(b'a'..=b'z')))
        .collect()
}

/// Runs one operation; returns the number of records it read or wrote. A read or scan appends
/// the values it read to `out` (a stored procedure returns them to its client).
pub fn run_op(
    tx: &mut dyn Tx,
    table: &TableRef,
    op: &YcsbOp,
    out: &mut Vec<Value>,
) -> TxResult<usize> {
    match op {
        YcsbOp::Read { key } => {
            let found = tx.read_with(table, &[Value::Int(*key)], false, &mut |row| {
                row.append_to(out);
                Ok(())
            })?;
            Ok(usize::from(found))
        }
        YcsbOp::Update { key, field, value } => Ok(usize::from(tx.update(
            table,
            &[Value::Int(*key)],
            &[(1 + field, Value::Str(value.clone()))],
        )?)),
        YcsbOp::Insert { key, fields } => {
            let mut row = Vec::with_capacity(fields.len() + 1);
            row.push(Value::Int(*key));
            row.extend(fields.iter().map(|f| Value::Str(f.clone())));
            tx.insert(table, &row)?;
            Ok(1)
        }
        YcsbOp::Scan { start, length } => {
            let low = [Value::Int(*start)];
            let range = KeyRange {
                low: std::ops::Bound::Included(&low),
                high: std::ops::Bound::Unbounded,
            };
            let rows = tx.scan(table, range, Some(*length), false, Fetch::All, false)?;
            let count = rows.len();
            out.extend(rows.into_iter().flatten());
            Ok(count)
        }
        YcsbOp::ReadModifyWrite { key, field, value } => {
            // Read the record (in place), then write one field: one step embedded.
            let found = tx.update_with(table, &[Value::Int(*key)], &mut |r, set| {
                r.str(1 + field)?;
                set.set(1 + field, Value::Str(value.clone()));
                Ok(())
            })?;
            Ok(usize::from(found))
        }
    }
}

/// The five operations as stored procedures. Each returns the number of records it read or
/// wrote, then the values a read or scan read (a scan's rows one after another).
struct YcsbProcedures {
    table: TableRef,
}

impl Procedures for YcsbProcedures {
    fn call(
        &self,
        tx: &mut dyn Tx,
        txn: usize,
        args: &[Value],
        out: &mut Vec<Value>,
    ) -> TxResult<()> {
        let op = YcsbOp::from_args(txn, args)?;
        let start = out.len();
        out.push(Value::Null);
        let count = run_op(tx, &self.table, &op, out)?;
        out[start] = Value::Int(count as i64);
        Ok(())
    }
}

/// State the terminals share: the next key an insert takes.
struct Shared {
    /// Set once from the database (max key + 1) by the first terminal.
    next_key: AtomicU64,
    initialised: Mutex<bool>,
}

/// The YCSB workload.
pub struct Ycsb {
    pub config: YcsbConfig,
    zipfian: Arc<Zipfian>,
    shared: Arc<Shared>,
}

impl Ycsb {
    pub fn new(config: YcsbConfig) -> Result<Ycsb, String> {
        if config.record_count == 0 || config.field_count == 0 || config.field_size == 0 {
            return Err(format!("YCSB sizes must be positive: {config:?}"));
        }
        if config.record_count > MAX_RECORDS {
            return Err(format!(
                "YCSB holds at most {MAX_RECORDS} records (keys have 48 bits, half kept for \
                 inserts), not {}",
                config.record_count
            ));
        }
        if config.field_size > u16::MAX as usize {
            return Err(format!("field size {} above 65535", config.field_size));
        }
        Ok(Ycsb {
            zipfian: Arc::new(Zipfian::new(config.record_count, ZIPFIAN_THETA)),
            shared: Arc::new(Shared {
                next_key: AtomicU64::new(config.record_count),
                initialised: Mutex::new(false),
            }),
            config,
        })
    }

    pub fn schema(&self) -> TableSchema {
        let mut t = TableSchema::new(USERTABLE).int("ycsb_key");
        for i in 0..self.config.field_count {
            t = t.string(&format!("field{i}"), self.config.field_size as u16);
        }
        t.key(&["ycsb_key"]).int_key(&[48])
    }
}

/// Draws operations for one terminal.
pub struct YcsbInputs {
    pub config: YcsbConfig,
    zipfian: Arc<Zipfian>,
    shared: Arc<Shared>,
}

impl YcsbInputs {
    fn existing_key(&self, rng: &mut impl Rng) -> i64 {
        let next = self.shared.next_key.load(Ordering::Relaxed).max(1);
        let key = match self.config.distribution {
            Distribution::Uniform => rng.gen_range(0..next),
            Distribution::Zipfian => self.zipfian.next_scrambled(rng),
            Distribution::Latest => (next - 1).saturating_sub(self.zipfian.next(rng)),
        };
        key as i64
    }

    pub fn draw(&self, rng: &mut impl Rng) -> YcsbOp {
        let c = &self.config;
        match c.workload.draw(rng) {
            0 => YcsbOp::Read {
                key: self.existing_key(rng),
            },
            1 => YcsbOp::Update {
                key: self.existing_key(rng),
                field: rng.gen_range(0..c.field_count),
                value: field_value(rng, c.field_size),
            },
            2 => YcsbOp::Insert {
                key: self.shared.next_key.fetch_add(1, Ordering::Relaxed) as i64,
                fields: (0..c.field_count)
                    .map(|_| field_value(rng, c.field_size))
                    .collect(),
            },
            3 => YcsbOp::Scan {
                start: self.existing_key(rng),
                length: rng.gen_range(1..=MAX_SCAN_LENGTH as usize),
            },
            _ => YcsbOp::ReadModifyWrite {
                key: self.existing_key(rng),
                field: rng.gen_range(0..c.field_count),
                value: field_value(rng, c.field_size),
            },
        }
    }
}

struct YcsbTerminal {
    table: TableRef,
    inputs: YcsbInputs,
    rng: SmallRng,
    op: Option<YcsbOp>,
    /// What the last read or scan read (kept to reuse its allocation).
    read: Vec<Value>,
}

impl Terminal for YcsbTerminal {
    fn next(&mut self) -> usize {
        let op = self.inputs.draw(&mut self.rng);
        let index = op.index();
        self.op = Some(op);
        index
    }

    fn run(&mut self, tx: &mut dyn Tx) -> TxResult<()> {
        let op = drawn(&self.op, "run")?;
        self.read.clear();
        run_op(tx, &self.table, op, &mut self.read).map(drop)
    }

    fn args(&self, out: &mut Vec<Value>) -> TxResult<()> {
        let op = drawn(&self.op, "args")?;
        op.to_args(out);
        Ok(())
    }

    fn returned(&mut self, _values: &[Value]) -> TxResult<()> {
        // An insert's receipt names its key, which the terminal drew.
        Ok(())
    }

    fn receipts(&self, out: &mut Vec<Receipt>) {
        // Only an insert: an update's value is overwritten by later commits.
        if let Some(YcsbOp::Insert { key, .. }) = &self.op {
            out.push(Receipt::present(USERTABLE, &[*key]));
        }
    }
}

impl Workload for Ycsb {
    fn name(&self) -> &'static str {
        "ycsb"
    }

    fn txn_names(&self) -> &'static [&'static str] {
        &OP_NAMES
    }

    fn interactions(&self) -> Vec<Interactions> {
        let one = "the operation, sent with the commit (1) — Table 2: YCSB-C Get, 1";
        vec![
            Interactions {
                name: OP_NAMES[0],
                round_trips: 1,
                note: one,
            },
            Interactions {
                name: OP_NAMES[1],
                round_trips: 1,
                note: one,
            },
            Interactions {
                name: OP_NAMES[2],
                round_trips: 1,
                note: one,
            },
            Interactions {
                name: OP_NAMES[3],
                round_trips: 1,
                note: one,
            },
            Interactions {
                name: OP_NAMES[4],
                round_trips: 2,
                note: "read for update (1); write, sent with the commit (1)",
            },
        ]
    }

    fn create_schema(&self, db: &Database) -> TxResult<()> {
        db.create_table(self.schema()).map(drop)
    }

    fn load(&self, db: &Arc<Database>, progress: &(dyn Fn(u64, u64) + Sync)) -> TxResult<()> {
        let table = db.table(USERTABLE)?;
        let total = self.config.record_count;
        let done = AtomicU64::new(0);
        let report = |rows: u64| progress(done.fetch_add(rows, Ordering::Relaxed) + rows, total);
        let mut loader = BatchLoader::new(db, &report);
        let mut rng = SmallRng::seed_from_u64(0x5C5B);
        for key in 0..total {
            let mut row = Vec::with_capacity(self.config.field_count + 1);
            row.push(Value::Int(key as i64));
            for _ in 0..self.config.field_count {
                row.push(Value::Str(field_value(&mut rng, self.config.field_size)));
            }
            loader.push(&table, row)?;
        }
        loader.flush()
    }

    fn terminal(
        &self,
        db: &dyn Connection,
        _id: usize,
        _terminals: usize,
        seed: u64,
    ) -> TxResult<Box<dyn Terminal>> {
        let table = db.table(USERTABLE)?;
        {
            let mut initialised = self
                .shared
                .initialised
                .lock()
                .map_err(|_| TxError::Invalid("YCSB key counter poisoned".to_string()))?;
            if !*initialised {
                let last = with_txn(db, |tx| {
                    tx.scan(
                        &table,
                        crate::util::everything(),
                        Some(1),
                        true,
                        Fetch::Cols(&[0]),
                        false,
                    )
                })?;
                if let Some(row) = last.first() {
                    let next = (int(row, 0)? as u64 + 1).max(self.config.record_count);
                    self.shared.next_key.store(next, Ordering::Relaxed);
                }
                *initialised = true;
            }
        }
        Ok(Box::new(YcsbTerminal {
            table,
            inputs: YcsbInputs {
                config: self.config.clone(),
                zipfian: Arc::clone(&self.zipfian),
                shared: Arc::clone(&self.shared),
            },
            rng: SmallRng::seed_from_u64(seed),
            op: None,
            read: Vec::new(),
        }))
    }

    fn procedures(&self, conn: &dyn Connection) -> TxResult<Box<dyn Procedures>> {
        Ok(Box::new(YcsbProcedures {
            table: conn.table(USERTABLE)?,
        }))
    }

    fn check_with_progress(
        &self,
        db: &Arc<Database>,
        progress: CheckProgress<'_>,
    ) -> TxResult<Vec<Condition>> {
        let table = db.table(USERTABLE)?;
        let cols: Vec<usize> = (0..=self.config.field_count).collect();
        let scan = TableScan::new(db, &table, &cols)?.reporting_to(progress);
        let loaded = self.config.record_count as i64;
        // Keys handed out to inserts are known only to the process that ran them: a check in
        // a later one (`glass check` after a run, or after a crash) bounds them by nothing.
        let ran_here = self
            .shared
            .initialised
            .lock()
            .map_err(|_| TxError::Invalid("YCSB key counter poisoned".to_string()))
            .map(|ran| *ran)?;
        let handed_out = if ran_here {
            self.shared.next_key.load(Ordering::Relaxed) as i64
        } else {
            i64::MAX
        };
        let (rows, loaded_present, inserted, beyond, bad_fields) = with_txn(db, |tx| {
            let (mut rows, mut loaded_present, mut inserted, mut beyond, mut bad_fields) =
                (0i64, 0i64, 0i64, 0i64, 0usize);
            scan.for_each(tx, |row| {
                rows += 1;
                let key = int(row, 0)?;
                if (0..loaded).contains(&key) {
                    loaded_present += 1;
                } else if (loaded..handed_out).contains(&key) {
                    inserted += 1;
                } else {
                    beyond += 1;
                }
                bad_fields += row[1..]
                    .iter()
                    .filter(|v| v.as_str().map(str::len) != Some(self.config.field_size))
                    .count();
                Ok(())
            })?;
            Ok((rows, loaded_present, inserted, beyond, bad_fields))
        })?;
        Ok(vec![
            Condition {
                name: "YCSB records".to_string(),
                description: if ran_here {
                    "record count = loaded + inserted; every loaded key present; no key beyond \
                     those handed out to inserts"
                } else {
                    "record count = loaded + inserted; every loaded key present; inserted keys \
                     above the loaded ones (those handed out were counted by the process that \
                     ran the inserts)"
                }
                .to_string(),
                violation: (loaded_present != loaded || beyond != 0 || rows != loaded + inserted)
                    .then(|| {
                        format!(
                            "{rows} records: {loaded_present} of {loaded} loaded keys, \
                             {inserted} inserted, {beyond} unexpected"
                        )
                    }),
            },
            Condition {
                name: "YCSB fields".to_string(),
                description: format!(
                    "every field is a string of {} bytes",
                    self.config.field_size
                ),
                violation: (bad_fields > 0)
                    .then(|| format!("{bad_fields} fields of the wrong size")),
            },
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_counts_beyond_the_key_bits_are_refused() {
        let config = |record_count| YcsbConfig {
            record_count,
            workload: CoreWorkload::from_letter('C').unwrap(),
            distribution: Distribution::Uniform,
            field_size: 1,
            field_count: 1,
        };
        for records in [MAX_RECORDS + 1, u64::MAX] {
            let err = Ycsb::new(config(records))
                .err()
                .unwrap_or_else(|| panic!("{records} records accepted"));
            assert!(err.contains(&MAX_RECORDS.to_string()), "{err}");
        }
    }

    #[test]
    fn core_workloads_have_their_proportions() {
        let mut rng = SmallRng::seed_from_u64(1);
        for letter in ['A', 'B', 'C', 'D', 'E', 'F', 'a'] {
            let w = CoreWorkload::from_letter(letter).unwrap();
            assert_eq!(w.percent.iter().sum::<u32>(), 100);
            let mut counts = [0u32; 5];
            for _ in 0..50_000 {
                counts[w.draw(&mut rng)] += 1;
            }
            for (count, p) in counts.iter().zip(w.percent) {
                let got = *count as f64 * 100.0 / 50_000.0;
                assert!((got - p as f64).abs() < 1.0, "{letter}: {counts:?}");
            }
        }
        assert!(CoreWorkload::from_letter('G')
            .unwrap_err()
            .contains("A, B, C, D, E, F"));
    }

    #[test]
    fn zipfian_is_skewed_towards_low_ranks() {
        let z = Zipfian::new(10_000, ZIPFIAN_THETA);
        let mut rng = SmallRng::seed_from_u64(2);
        let mut counts = vec![0u32; 10_000];
        let draws = 200_000;
        for _ in 0..draws {
            let v = z.next(&mut rng);
            counts[v as usize] += 1;
        }
        // With θ = 0.99 over 10,000 items rank 0 draws about 1/zeta(n) ≈ 10%.
        let top = counts[0] as f64 / draws as f64;
        assert!((0.08..0.13).contains(&top), "rank 0 share {top}");
        assert!(counts[0] > counts[1] && counts[1] > counts[10]);
        // The top 1% of items take far more than 1% of draws.
        let head: u32 = counts[..100].iter().sum();
        assert!(head as f64 / draws as f64 > 0.4, "head share {head}");
        // Scrambling spreads the hot keys but keeps the skew.
        let mut scrambled = vec![0u32; 10_000];
        for _ in 0..draws {
            scrambled[z.next_scrambled(&mut rng) as usize] += 1;
        }
        let hottest = scrambled
            .iter()
            .enumerate()
            .max_by_key(|(_, c)| **c)
            .unwrap()
            .0;
        assert_ne!(hottest, 0);
        assert!(*scrambled.iter().max().unwrap() as f64 / draws as f64 > 0.08);
    }

    #[test]
    fn latest_prefers_recent_keys_and_uniform_covers_all() {
        let config = YcsbConfig {
            record_count: 1000,
            workload: CoreWorkload::from_letter('C').unwrap(),
            distribution: Distribution::Latest,
            field_size: 8,
            field_count: 2,
        };
        let y = Ycsb::new(config.clone()).unwrap();
        let inputs = YcsbInputs {
            config,
            zipfian: Arc::clone(&y.zipfian),
            shared: Arc::clone(&y.shared),
        };
        let mut rng = SmallRng::seed_from_u64(3);
        let recent = (0..10_000)
            .filter(|_| inputs.existing_key(&mut rng) >= 900)
            .count();
        assert!(recent > 5_000, "{recent} of 10000 in the newest 10%");
        let uniform = YcsbInputs {
            config: YcsbConfig {
                distribution: Distribution::Uniform,
                ..inputs.config.clone()
            },
            zipfian: Arc::clone(&y.zipfian),
            shared: Arc::clone(&y.shared),
        };
        let low = (0..10_000)
            .filter(|_| uniform.existing_key(&mut rng) < 500)
            .count();
        assert!((4_500..5_500).contains(&low));
    }

    #[test]
    fn inserts_take_fresh_keys_and_ops_carry_full_values() {
        let y = Ycsb::new(YcsbConfig {
            record_count: 100,
            workload: CoreWorkload::from_letter('D').unwrap(),
            distribution: Distribution::Latest,
            field_size: 16,
            field_count: 3,
        })
        .unwrap();
        let inputs = YcsbInputs {
            config: y.config.clone(),
            zipfian: Arc::clone(&y.zipfian),
            shared: Arc::clone(&y.shared),
        };
        let mut rng = SmallRng::seed_from_u64(4);
        let mut keys = Vec::new();
        for _ in 0..2000 {
            match inputs.draw(&mut rng) {
                YcsbOp::Insert { key, fields } => {
                    assert!(fields.iter().all(|f| f.len() == 16) && fields.len() == 3);
                    keys.push(key);
                }
                YcsbOp::Read { key } => assert!((0..200).contains(&key) || key < 100 + 2000),
                other => panic!("workload D drew {other:?}"),
            }
        }
        assert!(!keys.is_empty());
        assert!(keys.windows(2).all(|w| w[1] == w[0] + 1) && keys[0] == 100);
    }
}
