//! The hostile procedure library: one well-behaved procedure and one for each way user code
//! can harm the engine it runs in, for the containment tests of the isolation levels
//! (`glass serve --workload hostile --isolation LEVEL`).
//!
//! | procedure     | what it does                                   | arguments |
//! |---------------|------------------------------------------------|-----------|
//! | `bump`        | adds one to a cell and returns its new value    | cell id   |
//! | `spin`        | loops forever                                  |           |
//! | `bomb`        | allocates and touches memory until it cannot   |           |
//! | `crash`       | aborts the process (`abort()`, SIGABRT)        |           |
//! | `null`        | reads through a null pointer (SIGSEGV)         |           |
//! | `wild_write`  | writes to an address it was never given        |           |
//! | `open_file`   | reads a file of the host and returns its size  | path      |
//! | `open_socket` | connects to a TCP port and returns whether it could | port |
//!
//! Each hostile procedure first updates a cell, so that a transaction that is not rolled back
//! when its procedure is stopped would leave a trace the tests look for. Running these in a
//! process you care about is the point of the exercise only where the isolation level says it
//! contains them; under `none` and `rust` they take the server down (see the containment
//! table in `docs/ARCHITECTURE.md`).

use std::sync::Arc;

use engine::db::Database;
use engine::schema::TableSchema;
use engine::{Connection, Fetch, TableRef, Tx, TxError, TxResult, Value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::util::{drawn, int, no_procedure, with_txn, Args, CheckProgress, TableScan};
use crate::workload::{Condition, Interactions, Procedures, Terminal, Workload};

/// The name [`crate::by_name`] knows it by; not among [`crate::WORKLOAD_NAMES`], which are
/// the benchmarks.
pub const NAME: &str = "hostile";
pub const CELL: &str = "cell";
/// Cells per unit of scale.
const CELLS_PER_SCALE: i64 = 16;

/// The procedures, in `txn_names` order.
pub const PROCEDURES: [&str; 8] = [
    "bump",
    "spin",
    "bomb",
    "crash",
    "null",
    "wild_write",
    "open_file",
    "open_socket",
];

/// The workload: `scale` × 16 cells, each a counter.
pub struct Hostile {
    cells: i64,
}

impl Hostile {
    pub fn new(scale: u64) -> Hostile {
        Hostile {
            cells: scale as i64 * CELLS_PER_SCALE,
        }
    }
}

fn schema() -> TableSchema {
    TableSchema::new(CELL)
        .int("id")
        .int("v")
        .key(&["id"])
        .int_key(&[32])
}

/// Adds one to cell `id`; returns its new value.
fn bump(tx: &mut dyn Tx, cell: &TableRef, id: i64) -> TxResult<i64> {
    let row = tx
        .get(cell, &[Value::Int(id)], Fetch::Cols(&[1]), true)?
        .ok_or_else(|| TxError::Invalid(format!("no cell {id}")))?;
    let v = int(&row, 0)? + 1;
    tx.update(cell, &[Value::Int(id)], &[(1, Value::Int(v))])?;
    Ok(v)
}

struct HostileProcedures {
    cell: TableRef,
}

impl Procedures for HostileProcedures {
    fn call(
        &self,
        tx: &mut dyn Tx,
        txn: usize,
        args: &[Value],
        out: &mut Vec<Value>,
    ) -> TxResult<()> {
        let name = *PROCEDURES
            .get(txn)
            .ok_or_else(|| no_procedure("hostile", txn))?;
        let mut args = Args::new(name, args);
        if name == "bump" {
            let id = args.int()?;
            out.push(Value::Int(bump(tx, &self.cell, id)?));
            return Ok(());
        }
        // Every hostile procedure leaves a write behind first: if its transaction were not
        // rolled back, cell 1 would show it.
        bump(tx, &self.cell, 1)?;
        match name {
            "spin" => loop {
                std::hint::black_box(out.len());
            },
            "bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    // 64 MiB at a time, every page written so that it is really taken.
                    hoard.push(vec![1u8; 64 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "crash" => std::process::abort(),
            // SAFETY: none; this is the fault the isolation level must contain.
            "null" => unsafe {
                let p: *const u64 = std::hint::black_box(std::ptr::null());
                out.push(Value::Int(std::ptr::read_volatile(p) as i64));
            },
            // SAFETY: none; a write to an address nobody handed the procedure.
            "wild_write" => unsafe {
                let p = std::hint::black_box(0xdead_0000usize) as *mut u64;
                std::ptr::write_volatile(p, 0x0bad);
            },
            "open_file" => {
                let path = match args.values_left() {
                    [Value::Str(p)] => p.clone(),
                    _ => "/etc/hostname".to_string(),
                };
                let bytes = std::fs::read(&path).map_err(|e| {
                    TxError::Invalid(format!("procedure open_file: read {path}: {e}"))
                })?;
                out.push(Value::Int(bytes.len() as i64));
            }
            "open_socket" => {
                let port = args.int()?;
                let stream =
                    std::net::TcpStream::connect(("127.0.0.1", port as u16)).map_err(|e| {
                        TxError::Invalid(format!(
                            "procedure open_socket: connect to 127.0.0.1:{port}: {e}"
                        ))
                    })?;
                drop(stream);
                out.push(Value::Int(1));
            }
            _ => return Err(no_procedure("hostile", txn)),
        }
        Ok(())
    }
}

/// Draws only `bump`: the hostile procedures are called by name, by the tests.
struct HostileTerminal {
    cell: TableRef,
    cells: i64,
    rng: SmallRng,
    input: Option<i64>,
}

impl Terminal for HostileTerminal {
    fn next(&mut self) -> usize {
        self.input = Some(self.rng.gen_range(1..=self.cells));
        0
    }

    fn run(&mut self, tx: &mut dyn Tx) -> TxResult<()> {
        let id = *drawn(&self.input, "run")?;
        bump(tx, &self.cell, id).map(drop)
    }

    fn args(&self, out: &mut Vec<Value>) -> TxResult<()> {
        out.push(Value::Int(*drawn(&self.input, "args")?));
        Ok(())
    }

    fn returned(&mut self, values: &[Value]) -> TxResult<()> {
        match values {
            [Value::Int(v)] if *v > 0 => Ok(()),
            other => Err(TxError::Invalid(format!(
                "bump returned {other:?}, not a positive count"
            ))),
        }
    }
}

impl Workload for Hostile {
    fn name(&self) -> &'static str {
        NAME
    }

    fn txn_names(&self) -> &'static [&'static str] {
        &PROCEDURES
    }

    fn interactions(&self) -> Vec<Interactions> {
        PROCEDURES
            .iter()
            .map(|&name| Interactions {
                name,
                round_trips: 3,
                note: "read the cell for update (1), update it (1), commit (1)",
            })
            .collect()
    }

    fn create_schema(&self, db: &Database) -> TxResult<()> {
        db.create_table(schema())?;
        Ok(())
    }

    fn load(&self, db: &Arc<Database>, progress: &(dyn Fn(u64, u64) + Sync)) -> TxResult<()> {
        let cell = db.table(CELL)?;
        with_txn(db, |tx| {
            for id in 1..=self.cells {
                tx.insert(&cell, &[Value::Int(id), Value::Int(0)])?;
            }
            Ok(())
        })?;
        progress(self.cells as u64, self.cells as u64);
        Ok(())
    }

    fn terminal(
        &self,
        conn: &dyn Connection,
        _id: usize,
        _terminals: usize,
        seed: u64,
    ) -> TxResult<Box<dyn Terminal>> {
        Ok(Box::new(HostileTerminal {
            cell: conn.table(CELL)?,
            cells: self.cells,
            rng: SmallRng::seed_from_u64(seed),
            input: None,
        }))
    }

    fn procedures(&self, conn: &dyn Connection) -> TxResult<Box<dyn Procedures>> {
        Ok(Box::new(HostileProcedures {
            cell: conn.table(CELL)?,
        }))
    }

    fn check_with_progress(
        &self,
        db: &Arc<Database>,
        progress: CheckProgress<'_>,
    ) -> TxResult<Vec<Condition>> {
        let cell = db.table(CELL)?;
        let scan = TableScan::new(db, &cell, &[1])?.reporting_to(progress);
        let (rows, negative) = with_txn(db, |tx| {
            let (mut rows, mut negative) = (0i64, 0i64);
            scan.for_each(tx, |r| {
                rows += 1;
                negative += i64::from(int(r, 0)? < 0);
                Ok(())
            })?;
            Ok((rows, negative))
        })?;
        Ok(vec![
            Condition {
                name: "hostile cells".to_string(),
                description: format!("all {} cells are there", self.cells),
                violation: (rows != self.cells)
                    .then(|| format!("{rows} cells, {} loaded", self.cells)),
            },
            Condition {
                name: "hostile counts".to_string(),
                description: "no cell's count is negative".to_string(),
                violation: (negative > 0).then(|| format!("{negative} cells below zero")),
            },
        ])
    }
}
