//! Sizes checked against what the machine can hold, before any work.
//!
//! A `--scale` or `--pool-mib` too large for the machine used to fail late or badly: a wrapped
//! id, a failed allocation aborting the process, a load filling the disk. Every command that
//! loads or opens a database first estimates what it needs and compares it with what there is:
//!
//! ```text
//!   in memory:   pool + data pages            ≤ MemAvailable      (--scale, --pool-mib)
//!   --db DIR:    pool                         ≤ MemAvailable      (--pool-mib)
//!                data pages + load's log      ≤ free disk of DIR  (--scale; only when loading)
//!   always:      scale                        ≤ the workload's largest (its key bits)
//! ```
//!
//! The pool counts whole: its frames are touched when it is built (the resident size of
//! `glass bench tpcb --scale 1` is 278 MB with the default 256 MiB pool, 20 MB of data). In
//! memory, pages evicted from the pool live in the in-memory page store, so pool and data add up
//! (`glass bench ycsb --scale 300000`: 634 MB resident for 357 MB of pages and the pool).
//! The estimates per scale unit are measured loads (see [`Footprint::of`]); they are meant to
//! catch impossible requests, not to predict to the byte.

use std::path::{Path, PathBuf};

use engine::db::DbConfig;
use workloads::WorkloadOptions;

use crate::run::UsageError;

const MIB: u64 = 1 << 20;

/// Bytes one unit of `--scale` adds, measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// Page images (the page file on disk, the page store in memory).
    pub page_bytes: u64,
    /// Page images plus the log a load writes (all of it stays until the first checkpoint
    /// after the load).
    pub disk_bytes: u64,
    /// What a scale unit is called, for messages.
    pub unit: &'static str,
}

impl Footprint {
    /// Bytes per scale unit of `workload` with `options`' record shape.
    ///
    /// Measured with `glass load W --scale S --db D` at two scales each, then `ls -l D`
    /// (pages.db and the log, `wal.log` and its segments `wal.log.*` since the log is kept in
    /// segment files; the difference divided by the difference in scale):
    ///
    /// | workload | scales          | pages.db per unit | pages.db + wal.log per unit |
    /// |----------|-----------------|-------------------|-----------------------------|
    /// | tpcc     | 1, 2            | 123,387,904       | 316,317,855                 |
    /// | tpcb     | 1, 4            | 13,901,824        | 39,517,195                  |
    /// | ycsb     | 100000, 400000  | 1,191 (10 × 100 B)| 2,372 (10 × 100 B)          |
    /// | ycsb     | 400000          | 48 (1 × 10 B)     | 213 (1 × 10 B)              |
    /// | voter    | 1, 4            | 0 (votes come at run time) | 0                  |
    ///
    /// YCSB is modelled on its record, `fields × (size + 4) + 8` bytes: pages 1.15 × record
    /// + 25, log record + 150 (1,230 and 2,428 for 10 × 100 B; 50 and 222 for 1 × 10 B).
    pub fn of(workload: &str, options: &WorkloadOptions) -> Footprint {
        match workload {
            "tpcc" => Footprint {
                page_bytes: 123_387_904,
                disk_bytes: 316_317_855,
                unit: "warehouse",
            },
            "tpcb" => Footprint {
                page_bytes: 13_901_824,
                disk_bytes: 39_517_195,
                unit: "branch",
            },
            "ycsb" => {
                let fields = options.field_count as u64;
                let record = fields
                    .saturating_mul((options.field_size as u64).saturating_add(4))
                    .saturating_add(8);
                let page_bytes = record.saturating_mul(115) / 100 + 25;
                Footprint {
                    page_bytes,
                    disk_bytes: page_bytes.saturating_add(record).saturating_add(150),
                    unit: "record",
                }
            }
            _ => Footprint {
                page_bytes: 0,
                disk_bytes: 0,
                unit: "unit",
            },
        }
    }
}

/// What the machine has, as read by [`Machine::probe`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// Memory that can be used without swapping, and where the figure came from.
    pub memory_bytes: u64,
    pub memory_source: &'static str,
    /// The file system where the database would be written; `None` in memory (or where it
    /// could not be read).
    pub disk: Option<Disk>,
}

/// The file system that would hold a database, as `statvfs` sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disk {
    /// Free space for an unprivileged user.
    pub free_bytes: u64,
    /// The file system's whole size: 0 for one that stores nothing (`/proc`, `/sys`).
    pub size_bytes: u64,
    /// The existing directory that was asked (the database's, or its nearest ancestor).
    pub probed: PathBuf,
}

impl Machine {
    /// Reads the available memory (`MemAvailable` of /proc/meminfo, or `sysinfo`'s free and
    /// buffer memory) and, for `db_dir`, the free space of the file system that would hold it
    /// (`statvfs` of it or its nearest existing ancestor).
    pub fn probe(db_dir: Option<&Path>) -> Machine {
        let (memory_bytes, memory_source) = match mem_available() {
            Some(bytes) => (bytes, "MemAvailable in /proc/meminfo"),
            None => (sysinfo_free().unwrap_or(u64::MAX), "free memory (sysinfo)"),
        };
        Machine {
            memory_bytes,
            memory_source,
            disk: db_dir.and_then(disk_of),
        }
    }
}

fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

fn sysinfo_free() -> Option<u64> {
    // SAFETY: sysinfo fills the zeroed struct it is given and touches nothing else.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    if unsafe { libc::sysinfo(&mut info) } != 0 {
        return None;
    }
    let unit = u64::from(info.mem_unit.max(1));
    (info.freeram as u64)
        .checked_add(info.bufferram as u64)?
        .checked_mul(unit)
}

fn disk_of(dir: &Path) -> Option<Disk> {
    use std::os::unix::ffi::OsStrExt;
    let existing = dir
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("."));
    let existing = if existing.as_os_str().is_empty() {
        Path::new(".")
    } else {
        existing
    };
    let c_path = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs reads the NUL-terminated path and fills the zeroed struct.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    let unit = stat.f_frsize as u64;
    Some(Disk {
        free_bytes: (stat.f_bavail as u64).saturating_mul(unit),
        size_bytes: (stat.f_blocks as u64).saturating_mul(unit),
        probed: existing.to_path_buf(),
    })
}

/// What a command asks of the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub workload: &'a str,
    pub scale: u64,
    pub pool_mib: u64,
    /// Whether the buffer pool is built at all (`page-access` on).
    pub pool: bool,
    /// `Some(dir)` on disk; `loading`: the command will load into it.
    pub db: Option<&'a Path>,
    pub loading: bool,
}

/// Checks `request` against `machine`: an error names the flag, what it needs and the limit.
pub fn check(
    request: &Request<'_>,
    options: &WorkloadOptions,
    machine: &Machine,
) -> Result<(), UsageError> {
    let name = request.workload;
    if let Some(max) = workloads::max_scale(name) {
        if request.scale > max {
            let units = match name {
                "tpcc" => "warehouses",
                "tpcb" => "branches",
                "ycsb" => "records",
                "voter" => "(10,000s of voters)",
                _ => "",
            };
            return Err(UsageError(format!(
                "--scale {}: {name} holds at most {max} {units} (beyond, its ids would not fit \
                 its keys)",
                request.scale
            )));
        }
    }
    let footprint = Footprint::of(name, options);
    let pool_bytes = if request.pool {
        request.pool_mib.saturating_mul(MIB)
    } else {
        0
    };
    let memory = &machine.memory_bytes;
    if pool_bytes > *memory {
        return Err(UsageError(format!(
            "--pool-mib {}: a buffer pool of {} is more than the {} of memory available \
             ({}); use a smaller --pool-mib",
            request.pool_mib,
            human(pool_bytes),
            human(*memory),
            machine.memory_source
        )));
    }
    let page_bytes = footprint.page_bytes.saturating_mul(request.scale);
    match request.db {
        None => {
            let need = pool_bytes.saturating_add(page_bytes);
            if need > *memory {
                return Err(UsageError(format!(
                    "--scale {}: {name} in memory needs about {} ({} of pages at about {} per \
                     {}, and the {} pool), more than the {} available ({}); lower --scale or \
                     --pool-mib, or use --db DIR",
                    request.scale,
                    human(need),
                    human(page_bytes),
                    human(footprint.page_bytes),
                    footprint.unit,
                    human(pool_bytes),
                    human(*memory),
                    machine.memory_source
                )));
            }
        }
        Some(dir) if request.loading => {
            let need = footprint.disk_bytes.saturating_mul(request.scale);
            if let Some(disk) = &machine.disk {
                if disk.size_bytes == 0 {
                    return Err(UsageError(format!(
                        "--db {}: {} is on a file system that stores nothing (its size is 0, \
                         as /proc's and /sys's are), so no database can be written there; use \
                         a directory on a disk (or a tmpfs) for --db",
                        dir.display(),
                        disk.probed.display()
                    )));
                }
                let free = disk.free_bytes;
                if need > free {
                    return Err(UsageError(format!(
                        "--scale {}: loading {name} into {} needs about {} of disk (about {} \
                         per {}, pages and log), more than the {} free there; lower --scale or \
                         use another --db",
                        request.scale,
                        dir.display(),
                        human(need),
                        human(footprint.disk_bytes),
                        footprint.unit,
                        human(free)
                    )));
                }
            }
        }
        Some(_) => {}
    }
    Ok(())
}

/// How much a run goes on for, which is what the data it inserts (and so its default pool)
/// grows with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RunLength {
    /// `threads` terminals for `seconds` in all (every round's warm-up and measured time).
    Timed { threads: usize, seconds: f64 },
    /// `txns` transactions in all, after `warmup_seconds` of warm-up on `threads` terminals.
    Counted {
        threads: usize,
        txns: u64,
        warmup_seconds: f64,
    },
    /// No end known in advance (a server): ten seconds of `threads` terminals.
    Open { threads: usize },
}

impl RunLength {
    /// Bytes the run's terminals add at most, inserting at `rate`: each terminal as fast as
    /// one core, and no more terminals at full speed than the machine has cores.
    fn growth(self, rate: Growth, cores: usize) -> u64 {
        let busy = |threads: usize| threads.clamp(1, cores.max(1)) as f64;
        let per_second = rate.per_core_second as f64;
        let bytes = match self {
            RunLength::Timed { threads, seconds } => busy(threads) * seconds.max(0.0) * per_second,
            RunLength::Counted {
                threads,
                txns,
                warmup_seconds,
            } => {
                busy(threads) * warmup_seconds.max(0.0) * per_second
                    + txns as f64 * rate.per_txn as f64
            }
            RunLength::Open { threads } => busy(threads) * 10.0 * per_second,
        };
        bytes as u64
    }
}

/// How fast a workload's transactions add pages.
#[derive(Clone, Copy, Debug)]
struct Growth {
    /// Bytes one terminal inserts a second at one fast core's speed.
    per_core_second: u64,
    /// Bytes one transaction inserts at most.
    per_txn: u64,
}

/// The workloads that grow as they run: TPC-C's orders, order lines and history, TPC-B's
/// history. (YCSB updates in place; Voter's votes, measured, stay within the pool's floor.)
fn growth_of(workload: &str) -> Option<Growth> {
    match workload {
        // The paper mix adds about 1 KB of pages a transaction (a New-Order's order, new
        // order and ten order lines with their index entries, a Payment's history row, and
        // the room page splits leave), measured at 52 MB a second on one of this project's 2
        // cores; a faster core runs 60,000 transactions a second and more.
        "tpcc" => Some(Growth {
            per_core_second: 64 * MIB,
            per_txn: 2048,
        }),
        // A history row a transaction, about 110 bytes of pages: two threads here ran 260,000
        // transactions a second and outgrew the 256 MiB floor in a 10 s run.
        "tpcb" => Some(Growth {
            per_core_second: 32 * MIB,
            per_txn: 128,
        }),
        _ => None,
    }
}

/// The buffer pool a run of `workload` at `options.scale` gets when the user names none: its
/// pages and a quarter more (for page splits), plus what the run adds to them (TPC-C's
/// orders and history, TPC-B's history: [`RunLength`]), at least 256 MiB. A pool smaller
/// than the data turns a run meant to be in memory into one that copies pages in and out
/// under the page table's latch: on 16 threads and 16 TPC-C warehouses (1.8 GiB of pages) a
/// 256 MiB pool held the full engine to the throughput of one thread; on 2 cores a 10 s
/// paper-mix run on one thread, with the 404 MiB that ten seconds of a slower core were
/// given, wrote 41,000–45,000 pages out and made 51,400–53,300 txn/s, against 53,500–59,300
/// with a pool it did not outgrow (four interleaved rounds). `cores` is the machine's.
pub fn pool_mib_for(
    workload: &str,
    options: &WorkloadOptions,
    run: RunLength,
    cores: usize,
) -> usize {
    let pages = Footprint::of(workload, options)
        .page_bytes
        .saturating_mul(options.scale);
    let growth = growth_of(workload).map_or(0, |rate| run.growth(rate, cores));
    let mib = pages
        .saturating_add(pages / 4)
        .saturating_add(growth)
        .div_ceil(MIB)
        .max(256);
    usize::try_from(mib).unwrap_or(usize::MAX)
}

/// [`pool_mib_for`] on this machine: its cores, and no more memory than it has. The room for
/// growth gives way first: the pool keeps at least the database and a quarter, and with the
/// data in memory too the two take at most three quarters of the available memory (a pool
/// that does not fit even so is refused by [`check_machine`]).
pub fn default_pool_mib(
    workload: &str,
    options: &WorkloadOptions,
    db: &DbConfig,
    run: RunLength,
) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let wanted = pool_mib_for(workload, options, run, cores);
    let floor = pool_mib_for(
        workload,
        options,
        RunLength::Counted {
            threads: 1,
            txns: 0,
            warmup_seconds: 0.0,
        },
        cores,
    );
    let machine = Machine::probe(db.path.as_deref());
    let pages = match db.path {
        None => Footprint::of(workload, options)
            .page_bytes
            .saturating_mul(options.scale),
        Some(_) => 0,
    };
    let room = (machine.memory_bytes / 4 * 3).saturating_sub(pages) / MIB;
    wanted
        .min(usize::try_from(room).unwrap_or(usize::MAX))
        .max(floor)
}

/// Checks a command's sizes against this machine (see [`check`]).
pub fn check_machine(
    workload: &str,
    options: &WorkloadOptions,
    db: &DbConfig,
    loading: bool,
) -> Result<(), UsageError> {
    let request = Request {
        workload,
        scale: options.scale,
        pool_mib: db.pool_mib as u64,
        pool: db.switches.is_on(engine::Switch::PageAccess),
        db: db.path.as_deref(),
        loading,
    };
    check(&request, options, &Machine::probe(db.path.as_deref()))
}

/// Bytes in the largest binary unit that keeps the number at 1 or more, e.g. "1.5 GiB".
fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(memory_gib: u64, disk_gib: Option<u64>) -> Machine {
        Machine {
            memory_bytes: memory_gib << 30,
            memory_source: "MemAvailable in /proc/meminfo",
            disk: disk_gib.map(|g| Disk {
                free_bytes: g << 30,
                size_bytes: 100 << 30,
                probed: PathBuf::from("."),
            }),
        }
    }

    fn request<'a>(
        workload: &'a str,
        scale: u64,
        pool_mib: u64,
        db: Option<&'a Path>,
    ) -> Request<'a> {
        Request {
            workload,
            scale,
            pool_mib,
            pool: true,
            db,
            loading: db.is_some(),
        }
    }

    #[test]
    fn default_runs_fit_a_small_machine() {
        let options = WorkloadOptions::default();
        let m = machine(2, Some(10));
        for (w, scale) in [("tpcc", 1), ("tpcb", 1), ("ycsb", 100_000), ("voter", 1)] {
            check(&request(w, scale, 256, None), &options, &m).unwrap();
            check(&request(w, scale, 256, Some(Path::new("d"))), &options, &m).unwrap();
        }
    }

    #[test]
    fn the_largest_u64_scale_is_refused_naming_the_flag_and_limit() {
        let options = WorkloadOptions::default();
        let m = machine(1 << 20, Some(1 << 20));
        for (w, max) in [
            ("tpcc", workloads::tpcc::MAX_WAREHOUSES),
            ("tpcb", workloads::tpcb::MAX_BRANCHES),
            ("ycsb", workloads::ycsb::MAX_RECORDS),
            ("voter", workloads::voter::MAX_SCALE),
        ] {
            let err = check(&request(w, u64::MAX, 256, None), &options, &m).unwrap_err();
            assert!(err.0.starts_with("--scale 18446744073709551615"), "{err}");
            assert!(err.0.contains(&max.to_string()), "{err}");
        }
    }

    #[test]
    fn data_beyond_memory_is_refused_in_memory_but_not_on_disk() {
        let options = WorkloadOptions::default();
        let m = machine(16, Some(1000));
        // 200 warehouses are about 23 GiB of pages.
        let err = check(&request("tpcc", 200, 256, None), &options, &m).unwrap_err();
        assert!(err.0.contains("--scale 200"), "{err}");
        assert!(err.0.contains("16.0 GiB available"), "{err}");
        assert!(err.0.contains("MemAvailable"), "{err}");
        check(&request("tpcc", 100, 256, None), &options, &m).unwrap();
        check(
            &request("tpcc", 200, 256, Some(Path::new("d"))),
            &options,
            &m,
        )
        .unwrap();
    }

    #[test]
    fn a_load_beyond_the_free_disk_is_refused_naming_the_directory() {
        let options = WorkloadOptions::default();
        let m = machine(16, Some(10));
        // 40 warehouses write about 12 GiB.
        let err = check(
            &request("tpcc", 40, 256, Some(Path::new("big-db"))),
            &options,
            &m,
        )
        .unwrap_err();
        assert!(err.0.contains("--scale 40"), "{err}");
        assert!(err.0.contains("big-db"), "{err}");
        assert!(err.0.contains("10.0 GiB free"), "{err}");
        // Opening an existing load writes no pages: no disk check.
        let mut open = request("tpcc", 40, 256, Some(Path::new("big-db")));
        open.loading = false;
        check(&open, &options, &m).unwrap();
    }

    #[test]
    fn a_load_onto_a_file_system_that_stores_nothing_is_refused_as_such() {
        let options = WorkloadOptions::default();
        let mut m = machine(16, Some(0));
        m.disk.as_mut().unwrap().size_bytes = 0;
        m.disk.as_mut().unwrap().probed = PathBuf::from("/proc");
        let err = check(
            &request("tpcb", 1, 256, Some(Path::new("/proc/db"))),
            &options,
            &m,
        )
        .unwrap_err();
        assert!(
            err.0
                .starts_with("--db /proc/db: /proc is on a file system"),
            "{err}"
        );
        assert!(!err.0.contains("free"), "{err}");
        #[cfg(target_os = "linux")]
        if Path::new("/proc/self").exists() {
            let probed = Machine::probe(Some(Path::new("/proc/no-such-db")));
            assert_eq!(probed.disk.map(|d| d.size_bytes), Some(0));
        }
    }

    #[test]
    fn a_pool_beyond_memory_is_refused_unless_there_is_none() {
        let options = WorkloadOptions::default();
        let m = machine(4, Some(10));
        let err = check(&request("tpcb", 1, 1_048_576, None), &options, &m).unwrap_err();
        assert!(err.0.starts_with("--pool-mib 1048576"), "{err}");
        assert!(err.0.contains("1.0 TiB"), "{err}");
        assert!(err.0.contains("4.0 GiB"), "{err}");
        let mut no_pool = request("tpcb", 1, 1_048_576, None);
        no_pool.pool = false;
        check(&no_pool, &options, &m).unwrap();
    }

    #[test]
    fn the_default_pool_holds_the_database_and_what_the_run_adds() {
        let tpcc = |scale| WorkloadOptions {
            scale,
            ..WorkloadOptions::default()
        };
        let timed = |threads, seconds| RunLength::Timed { threads, seconds };
        // Each warehouse's 118 MiB of pages, a quarter more, and what the run adds to it.
        for scale in [1, 2, 16] {
            let pages = scale * Footprint::of("tpcc", &tpcc(scale)).page_bytes;
            for (threads, seconds) in [(1, 3.0), (2, 12.0), (16, 4.0)] {
                let pool = pool_mib_for("tpcc", &tpcc(scale), timed(threads, seconds), 16);
                let growth = (threads as f64 * seconds) as u64 * 64 * MIB;
                let pool = pool as u64 * MIB;
                assert!(pool >= pages + pages / 4 + growth, "{scale}: {pool}");
                assert!(pool < pages * 2 + growth, "{scale}: {pool}");
            }
        }
        // Two threads on two warehouses grow twice what one does; longer runs more.
        let one = pool_mib_for("tpcc", &tpcc(1), timed(1, 12.0), 2);
        assert!(pool_mib_for("tpcc", &tpcc(1), timed(2, 12.0), 2) > one);
        assert!(pool_mib_for("tpcc", &tpcc(1), timed(1, 30.0), 2) > one);
        // Threads beyond the cores add nothing: they share the cores' speed.
        assert_eq!(
            pool_mib_for("tpcc", &tpcc(8), timed(8, 12.0), 2),
            pool_mib_for("tpcc", &tpcc(8), timed(2, 12.0), 2)
        );
        // A run that stops by count grows by its transactions.
        let counted = |txns| RunLength::Counted {
            threads: 1,
            txns,
            warmup_seconds: 0.0,
        };
        assert!(
            pool_mib_for("tpcc", &tpcc(4), counted(1_000_000), 2)
                > pool_mib_for("tpcc", &tpcc(4), counted(1_000), 2)
        );
        assert_eq!(pool_mib_for("voter", &tpcc(100), timed(2, 10.0), 2), 256);
        // TPC-B grows by its history rows: a long run past the floor.
        assert!(pool_mib_for("tpcb", &tpcc(1), timed(2, 60.0), 2) > 256);
        assert_eq!(pool_mib_for("ycsb", &tpcc(1000), timed(2, 60.0), 2), 256);
    }

    #[test]
    fn the_default_pool_gives_way_to_the_memory_available() {
        let options = WorkloadOptions {
            scale: 1,
            ..WorkloadOptions::default()
        };
        // An hour on this machine's cores asks for more than it has; the default gives way
        // but keeps the database and a quarter.
        let hour = RunLength::Timed {
            threads: 64,
            seconds: 3600.0,
        };
        let db = DbConfig::default();
        let pool = default_pool_mib("tpcc", &options, &db, hour) as u64 * MIB;
        let machine = Machine::probe(None);
        let pages = Footprint::of("tpcc", &options).page_bytes;
        assert!(pool >= pages + pages / 4, "{pool}");
        assert!(
            pool <= (machine.memory_bytes / 4 * 3).max(256 * MIB),
            "{pool} of {}",
            machine.memory_bytes
        );
    }

    #[test]
    fn ycsb_records_scale_with_their_fields() {
        let small = WorkloadOptions {
            field_size: 10,
            field_count: 1,
            ..WorkloadOptions::default()
        };
        let large = WorkloadOptions::default();
        let s = Footprint::of("ycsb", &small);
        let l = Footprint::of("ycsb", &large);
        assert!(s.page_bytes >= 48 && s.disk_bytes >= 213, "{s:?}");
        assert!(l.page_bytes >= 1_191 && l.disk_bytes >= 2_372, "{l:?}");
        assert!(
            l.page_bytes < 2 * 1_191 && l.disk_bytes < 2 * 2_372,
            "{l:?}"
        );
    }

    #[test]
    fn the_probe_reads_this_machine() {
        let dir = tempfile::tempdir().unwrap();
        let m = Machine::probe(Some(&dir.path().join("not/yet")));
        assert!(m.memory_bytes > 0 && m.memory_bytes < u64::MAX);
        let disk = m.disk.expect("a temporary directory's file system");
        assert!(disk.size_bytes > 0 && disk.free_bytes <= disk.size_bytes);
        assert_eq!(disk.probed, dir.path());
        assert_eq!(Machine::probe(None).disk, None);
    }
}
