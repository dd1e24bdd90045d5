//! Writes the fuzz targets' seed corpus, `fuzz/seeds/<target>/`, from a real tiny database:
//! its pages (headers, heap pages, B+-tree leaves and inner nodes of both key paths), its log
//! frames, log and master record, its catalog, and load manifests.
//!
//! ```text
//! cargo run --manifest-path fuzz/Cargo.toml --example seeds [OUT_DIR]
//! ```
//!
//! The seeds are committed (each a few KiB); rerun this after a format change.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use bench::manifest::LoadManifest;
use engine::{Database, DbConfig, TableSchema, Value};
use storage::page::{PageKind, OFFSET_KIND};
use workloads::{Distribution, Mix, WorkloadOptions};

const PAGE_SIZE: usize = 8192;

fn write(out: &Path, target: &str, name: &str, bytes: &[u8]) {
    let dir = out.join(target);
    fs::create_dir_all(&dir).expect("create seed directory");
    fs::write(dir.join(name), bytes).expect("write seed");
}

/// Creates a database in `dir` with an integer-keyed table of `rows` rows (packed keys) and a
/// string-keyed one (schema keys) with a secondary index, then closes it.
fn make_database(dir: &Path, rows: i64) {
    let db = Database::open(DbConfig {
        path: Some(dir.to_path_buf()),
        pool_mib: 4,
        ..DbConfig::default()
    })
    .expect("open database");
    let accounts = db
        .create_table(
            TableSchema::new("accounts")
                .int("id")
                .string("owner", 16)
                .int("balance")
                .key(&["id"])
                .int_key(&[32]),
        )
        .expect("create accounts");
    let names = db
        .create_table(
            TableSchema::new("names")
                .string("name", 24)
                .int("n")
                .nullable()
                .key(&["name"]),
        )
        .expect("create names");
    db.create_index(engine::IndexSchema {
        name: "names_by_n".into(),
        table: "names".into(),
        columns: vec![1, 0],
        unique: true,
        kind: Default::default(),
        int_key_bits: None,
    })
    .expect("create index");
    for chunk in (0..rows).collect::<Vec<_>>().chunks(200) {
        db.run(|tx| {
            use engine::Tx;
            for &id in chunk {
                tx.insert(
                    &accounts,
                    &[
                        Value::Int(id),
                        Value::Str(format!("owner{id}")),
                        Value::Int(100),
                    ],
                )?;
                if id % 2 == 0 {
                    tx.insert(
                        &names,
                        &[Value::Str(format!("name-{id:06}")), Value::Int(id)],
                    )?;
                }
            }
            Ok(())
        })
        .expect("insert rows");
    }
    db.close().expect("close database");
}

/// A B+-tree of a root and a few leaves built alone in a pool: its pages 1.. concatenated,
/// the root first (the `btree_tree` target's input).
fn small_tree() -> Vec<u8> {
    let store = Box::new(storage::file::MemPageStore::new(storage::PageSize::Kib8));
    let config = storage::PoolConfig {
        page_size: storage::PageSize::Kib8,
        frames: 16,
        latching: true,
    };
    let pool = std::sync::Arc::new(storage::BufferPool::new(store, config, None).unwrap());
    let tree = storage::BTree::create(pool.clone(), storage::btree::BytewiseKeyOrder, true)
        .expect("create tree");
    // The target opens the tree at page 1: the pool never hands out page 0 (the meta page).
    assert_eq!(tree.root(), storage::PageId(1));
    for i in 0..400u64 {
        let key = format!("key-{:05}-{}", i * 2, "x".repeat(24));
        tree.insert(key.as_bytes(), i).expect("insert");
    }
    let mut pages = Vec::new();
    for id in 1..pool.page_count() {
        pages.extend_from_slice(&pool.fix_shared(storage::PageId(id)).unwrap());
    }
    pages
}

/// One frame of each request and response kind (each op and op result, every value kind), and
/// a client's and a server's stream of several: the `wire_frame` target's input.
fn wire_frames(out: &Path) {
    use protocol::{ErrorClass, Op, OpResult, Request, Response, ScanSource};
    use std::ops::Bound;

    let key = vec![Value::Int(42), Value::Str("owner42".into())];
    let ops = vec![
        Op::Get {
            table: 0,
            key: key.clone(),
            columns: Some(vec![2, 0]),
            for_update: true,
        },
        Op::Update {
            table: 0,
            key: key.clone(),
            set: vec![(2, Value::Float(-12.5)), (3, Value::Null)],
        },
        Op::Insert {
            table: 1,
            row: vec![Value::Str("name-000042".into()), Value::Int(42)],
        },
        Op::Delete {
            table: 1,
            key: vec![Value::Str("name-000042".into())],
        },
        Op::Scan {
            source: ScanSource::Index(0),
            low: Bound::Included(vec![Value::Int(10)]),
            high: Bound::Excluded(vec![Value::Int(20)]),
            limit: Some(5),
            reverse: true,
            columns: None,
            for_update: false,
        },
        Op::Scan {
            source: ScanSource::Table(1),
            low: Bound::Unbounded,
            high: Bound::Unbounded,
            limit: None,
            reverse: false,
            columns: Some(vec![]),
            for_update: true,
        },
        Op::ReadCommitted,
    ];
    let requests = [
        (
            "hello",
            Request::Hello {
                magic: protocol::MAGIC,
                version: protocol::VERSION,
                max_frame: protocol::DEFAULT_MAX_FRAME,
            },
        ),
        ("catalog", Request::Catalog),
        (
            "call",
            Request::Call {
                procedure: "new_order".into(),
                args: vec![
                    Value::Int(1),
                    Value::Float(0.25),
                    Value::Str("w".into()),
                    Value::Null,
                ],
            },
        ),
        ("begin", Request::Begin),
        (
            "batch",
            Request::Batch {
                autocommit: false,
                ops: ops.clone(),
            },
        ),
        (
            "batch-autocommit",
            Request::Batch {
                autocommit: true,
                ops: ops[..1].to_vec(),
            },
        ),
        ("commit", Request::Commit),
        ("abort", Request::Abort),
    ];
    let responses = [
        (
            "welcome",
            Response::Welcome {
                version: protocol::VERSION,
                max_frame: protocol::DEFAULT_MAX_FRAME,
                workload: "tpcc".into(),
                procedures: vec!["new_order".into(), "payment".into()],
            },
        ),
        (
            "catalog-is",
            Response::CatalogIs {
                tables: vec![("accounts".into(), 0), ("names".into(), 1)],
                indexes: vec![("names_by_n".into(), 0)],
            },
        ),
        (
            "returned",
            Response::Returned {
                values: vec![Value::Int(7), Value::Str("ok".into())],
            },
        ),
        ("done", Response::Done),
        (
            "results",
            Response::Results {
                results: vec![
                    OpResult::Row(Some(key.clone())),
                    OpResult::Row(None),
                    OpResult::Found(true),
                    OpResult::Inserted,
                    OpResult::Set,
                    OpResult::Rows(vec![key.clone(), vec![Value::Float(1.5), Value::Null]]),
                ],
            },
        ),
        (
            "failed",
            Response::Failed {
                class: ErrorClass::Retry,
                message: "deadlock victim".into(),
            },
        ),
    ];
    let mut client = Vec::new();
    for (name, request) in &requests {
        let mut frame = Vec::new();
        request.encode(&mut frame);
        write(out, "wire_frame", &format!("request-{name}"), &frame);
        client.extend_from_slice(&frame);
    }
    write(out, "wire_frame", "client-stream", &client);
    let mut server = Vec::new();
    for (name, response) in &responses {
        let mut frame = Vec::new();
        response.encode(&mut frame);
        write(out, "wire_frame", &format!("response-{name}"), &frame);
        server.extend_from_slice(&frame);
    }
    write(out, "wire_frame", "server-stream", &server);
}

/// One frame of each message of the procedure boundary, and a conversation of a call: the
/// `guest_frame` target's input.
fn guest_frames(out: &Path) {
    use protocol::guest::{GuestMsg, HostMsg};
    use protocol::{ErrorClass, Op, OpResult};

    let host = [
        (
            "setup",
            HostMsg::Setup {
                workload: "ycsb".into(),
                tables: vec![("usertable".into(), 0)],
                indexes: vec![("by_name".into(), 1)],
            },
        ),
        (
            "invoke",
            HostMsg::Invoke {
                txn: 0,
                args: vec![Value::Int(7), Value::Str("x".into())],
                timed: true,
            },
        ),
        (
            "results",
            HostMsg::Results {
                results: vec![OpResult::Row(Some(vec![Value::Int(7), Value::Float(1.5)]))],
            },
        ),
        (
            "op-failed",
            HostMsg::OpFailed {
                class: ErrorClass::Retry,
                message: "deadlock".into(),
            },
        ),
    ];
    let guest = [
        ("ready", GuestMsg::Ready),
        (
            "ops",
            GuestMsg::Ops {
                ops: vec![Op::Get {
                    table: 0,
                    key: vec![Value::Int(7)],
                    columns: Some(vec![1]),
                    for_update: false,
                }],
            },
        ),
        (
            "returned",
            GuestMsg::Returned {
                writes: vec![Op::Insert {
                    table: 1,
                    row: vec![Value::Int(7), Value::Str("a".into())],
                }],
                values: vec![Value::Int(1), Value::Null],
                busy_ns: 1200,
            },
        ),
        (
            "failed",
            GuestMsg::Failed {
                class: ErrorClass::UserAbort,
                message: "unused item".into(),
                busy_ns: 800,
            },
        ),
    ];
    let mut conversation = Vec::new();
    for (name, m) in &host {
        let mut frame = Vec::new();
        m.encode(&mut frame);
        write(out, "guest_frame", &format!("host-{name}"), &frame);
        conversation.extend_from_slice(&frame);
    }
    for (name, m) in &guest {
        let mut frame = Vec::new();
        m.encode(&mut frame);
        write(out, "guest_frame", &format!("guest-{name}"), &frame);
        conversation.extend_from_slice(&frame);
    }
    write(out, "guest_frame", "conversation", &conversation);
}

/// Shared-memory regions as a server creates them, with a request and its answer in a slot:
/// the `shm_region` target's input.
fn shm_regions(out: &Path) {
    use protocol::shm::Region;
    use protocol::{Request, Response};
    use std::sync::atomic::Ordering;

    let dir = tempfile::tempdir().expect("temporary directory");
    for (name, slots) in [("one-slot", 1), ("three-slots", 3)] {
        let path = dir.path().join(name);
        let region = Region::create(&path, slots, 64).expect("create region");
        let mut request = Vec::new();
        Request::Commit.encode(&mut request);
        let mut response = Vec::new();
        Response::Returned {
            values: vec![Value::Int(7)],
        }
        .encode(&mut response);
        for (bytes, is_response) in [(&request, false), (&response, true)] {
            assert!(region.write(0, is_response, bytes));
        }
        region
            .request_len(0)
            .store(request.len() as u32, Ordering::Relaxed);
        region
            .response_len(0)
            .store(response.len() as u32, Ordering::Relaxed);
        region
            .state(0)
            .store(protocol::shm::CLAIMED, Ordering::Release);
        drop(region);
        write(
            out,
            "shm_region",
            name,
            &fs::read(&path).expect("read region"),
        );
    }
}

fn main() {
    let out = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds"));

    // Pages of a database large enough for inner nodes.
    let big = tempfile::tempdir().expect("temporary directory");
    make_database(big.path(), 1200);
    let pages = fs::read(big.path().join("pages.db")).expect("read pages.db");
    let mut by_kind: BTreeMap<u8, usize> = BTreeMap::new();
    for (id, page) in pages.chunks_exact(PAGE_SIZE).enumerate() {
        let kind = page[OFFSET_KIND];
        let seen = by_kind.entry(kind).or_default();
        *seen += 1;
        if *seen > 2 {
            continue;
        }
        let name = format!("page{id}-kind{kind}");
        // page_header: control byte 2 reads the page as the id its header names.
        write(&out, "page_header", &name, &[&[2u8][..], page].concat());
        if kind == PageKind::Heap as u8 {
            write(&out, "heap_page", &name, page);
        }
        if kind == PageKind::BTreeLeaf as u8 || kind == PageKind::BTreeInner as u8 {
            write(&out, "btree_node", &name, page);
        }
    }
    write(&out, "btree_tree", "tree", &small_tree());
    // The free-space map its close saved (control byte 0: checksum as is).
    let map = fs::read(big.path().join(storage::heap::FREE_SPACE_FILE)).expect("read the map");
    write(
        &out,
        "free_space_map",
        "closed",
        &[&[0u8][..], &map].concat(),
    );

    // A doublewrite batch's header naming three pages (control byte 0: checksum as is).
    let mut header = vec![0u8; 8192];
    storage::doublewrite::encode_header(
        7,
        5,
        storage::doublewrite::Layout {
            slots: 8,
            slot_pages: 64,
        },
        &[storage::PageId(3), storage::PageId(1), storage::PageId(90)],
        &mut header,
    );
    write(
        &out,
        "doublewrite_header",
        "batch",
        &[&[0u8][..], &header[..64]].concat(),
    );

    let big_catalog = fs::read(big.path().join("catalog.json")).expect("read catalog");
    write(&out, "catalog", "tables-and-index.json", &big_catalog);

    // A small database for the log: its frames, the whole log and its master record.
    let small = tempfile::tempdir().expect("temporary directory");
    make_database(small.path(), 3);
    let log = fs::read(small.path().join("wal.log")).expect("read wal.log");
    let master = fs::read(small.path().join("wal.log.master")).expect("read the master record");
    write(
        &out,
        "log_master",
        "master",
        &[&[0u8][..], &master].concat(),
    );
    write(
        &out,
        "log_open",
        "log-and-master",
        &[&[1u8][..], &master, &log].concat(),
    );
    write(&out, "log_open", "log", &[&[0u8][..], &log].concat());
    let mut pos = wal::log::LOG_HEADER_SIZE;
    let mut kinds: BTreeMap<u8, usize> = BTreeMap::new();
    while pos + 9 <= log.len() {
        let len = u32::from_le_bytes(log[pos..pos + 4].try_into().unwrap()) as usize;
        if len < 9 || pos + len > log.len() {
            break;
        }
        let kind = log[pos + 8];
        let seen = kinds.entry(kind).or_default();
        *seen += 1;
        if *seen <= 2 && len <= 4096 {
            let name = format!("lsn{pos}-kind{kind}");
            write(
                &out,
                "log_record",
                &name,
                &[&[0u8][..], &log[pos..pos + len]].concat(),
            );
        }
        pos += len;
    }

    for (workload, options) in [
        ("tpcc", WorkloadOptions::default()),
        (
            "ycsb",
            WorkloadOptions {
                scale: 1000,
                mix: Mix::Paper,
                ycsb_workload: 'B',
                ycsb_distribution: Distribution::Zipfian,
                field_size: 100,
                field_count: 10,
            },
        ),
    ] {
        let manifest = LoadManifest::new(workload, &options, "2026-01-01T00:00:00Z".into());
        let text = serde_json::to_vec_pretty(&manifest).expect("encode manifest");
        write(&out, "load_manifest", workload, &text);
    }
    check_reports(&out);
    wire_frames(&out);
    guest_frames(&out);
    shm_regions(&out);
    println!("seeds written to {}", out.display());
}

/// `glass check --json` files: a check that passed with an ack log, and one that could not
/// be made.
fn check_reports(out: &Path) {
    use bench::check_report::check_json;
    let outcome = bench::run::CheckOutcome {
        integrity: engine::IntegrityReport {
            pages: 70,
            heaps: 4,
            records: 1_200,
            ..Default::default()
        },
        conditions: Some(vec![workloads::Condition {
            name: "TPC-B balances".into(),
            description: "sum(a_balance) = sum(t_balance)".into(),
            violation: None,
        }]),
        acks: Some(bench::acklog::AckReport {
            runs: 2,
            durable: 500,
            durable_missing: vec![(17, workloads::Receipt::present("history", &[3, 9]))],
            not_durable: 40,
            not_durable_missing: 3,
        }),
        recovery: Some(engine::recovery::RecoveryReport {
            analysed: 341,
            redone: 15,
            on_disk: 196,
            losers: 1,
            undone: 19,
            torn_rebuilt: 2,
            doublewrite_restored: 5,
            doublewrite_torn: 3,
            doublewrite_us: 41_200,
            analysis_us: 35_000,
            redo_us: 120_300,
            undo_us: 900,
            checkpoint_pages: 210,
            checkpoint_us: 52_000,
            heaps_saved: 9,
            heaps_walked: 1,
            heap_pages_read: 120,
            free_space_us: 4_100,
        }),
        doublewrite: Some(storage::DoublewriteStats {
            batches: 2,
            pages: 300,
            page_file_syncs: 1,
            writer_batches: 1,
            ring_bytes: 16 << 20,
        }),
    };
    let passed = check_json("tpcb", "db", Ok(&outcome));
    write(
        out,
        "check_json",
        "checked",
        format!("{passed:#}").as_bytes(),
    );
    let error = anyhow::anyhow!("the log is damaged at LSN 4096");
    let refused = check_json("tpcb", "db", Err(&error));
    write(
        out,
        "check_json",
        "refused",
        format!("{refused:#}").as_bytes(),
    );
}
