//! Damage tests: a loaded database, damaged one way at a time on a fresh copy (flipped bits in
//! a heap page, a B+-tree page, page headers, the catalog; a zeroed page; truncated files; each
//! file missing), must make `glass check` and `glass bench` end in an error naming the
//! problem: never success, never a panic. The original they were copied from stays
//! byte-for-byte as it was.
//!
//! One TPC-B database (one branch, about 14 MB of pages) is loaded once for all the tests.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hasher};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

mod common;
use common::{glass, read_json};

/// Offsets in the common page header (see `storage::page`).
const OFFSET_KIND: u64 = 6;
const OFFSET_PAGE_ID: u64 = 16;
const KIND_BTREE_LEAF: u8 = 3;

/// The loaded original, its page size, and the hash of each of its files after the load.
struct Original {
    _dir: tempfile::TempDir,
    db: PathBuf,
    page_size: u64,
    hashes: BTreeMap<String, u64>,
}

fn hash_files(dir: &Path) -> BTreeMap<String, u64> {
    let mut hashes = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let mut hasher = DefaultHasher::new();
        hasher.write(&std::fs::read(&path).unwrap());
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        hashes.insert(name, hasher.finish());
    }
    hashes
}

fn original() -> &'static Original {
    static ORIGINAL: OnceLock<Original> = OnceLock::new();
    ORIGINAL.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("tpcb");
        let out = glass(&["load", "tpcb", "--db", db.to_str().unwrap(), "--scale", "1"]);
        assert_eq!(out.status.code(), Some(0), "load: {}", text(&out));
        let catalog = catalog(&db);
        let page_size = catalog["page_size"].as_u64().unwrap();
        let hashes = hash_files(&db);
        Original {
            _dir: dir,
            db,
            page_size,
            hashes,
        }
    })
}

fn catalog(db: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(db.join("catalog.json")).unwrap()).unwrap()
}

/// The catalog's first heap page and primary-index root of `table`.
fn table_pages(db: &Path, table: &str) -> (u64, u64) {
    let catalog = catalog(db);
    let t = catalog["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["schema"]["name"] == table)
        .unwrap_or_else(|| panic!("no table {table} in the catalog"));
    (
        t["first_page"].as_u64().unwrap(),
        t["primary_root"].as_u64().unwrap(),
    )
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A fresh copy of the original in a new temporary directory.
fn copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("copy");
    std::fs::create_dir(&db).unwrap();
    for entry in std::fs::read_dir(&original().db).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, db.join(path.file_name().unwrap())).unwrap();
    }
    (dir, db)
}

fn flip_bits(path: &Path, offset: u64, mask: u8) {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut byte = [0u8];
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.read_exact(&mut byte).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(&[byte[0] ^ mask]).unwrap();
}

fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(bytes).unwrap();
}

fn truncate(path: &Path, len: u64) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(len).unwrap();
}

/// A page of the copy's B+-trees that is a leaf and no tree's root.
fn some_leaf(db: &Path, page_size: u64) -> u64 {
    let pages = std::fs::read(db.join("pages.db")).unwrap();
    let roots: Vec<u64> = ["tpcb_branch", "tpcb_teller", "tpcb_account", "tpcb_history"]
        .iter()
        .map(|t| table_pages(db, t).1)
        .collect();
    (1..pages.len() as u64 / page_size)
        .find(|p| {
            pages[(p * page_size + OFFSET_KIND) as usize] == KIND_BTREE_LEAF && !roots.contains(p)
        })
        .expect("a leaf below a root")
}

/// Runs `glass check` and `glass bench --txns 50` on a copy damaged by `damage`: both must
/// fail (not with a panic) with output containing each of `needles`; the original must be
/// untouched. `check_only_needles` are asked of `check` alone.
fn assert_damage_refused(
    damage: impl FnOnce(&Path, u64),
    needles: &[&str],
    check_only_needles: &[&str],
) {
    let original = original();
    let (tmp, db) = copy();
    damage(&db, original.page_size);
    let dir = db.to_str().unwrap();
    let json = tmp.path().join("check.json");
    let check = glass(&[
        "check",
        "tpcb",
        "--db",
        dir,
        "--json",
        json.to_str().unwrap(),
    ]);
    let bench = glass(&[
        "bench", "tpcb", "--db", dir, "--txns", "50", "--warmup", "0",
    ]);
    for (what, out, extra) in [
        ("check", &check, check_only_needles),
        ("bench", &bench, &[][..]),
    ] {
        let printed = text(out);
        let code = out.status.code();
        assert!(
            code.is_some_and(|c| c != 0 && c != 101),
            "{what}: exit {code:?} (must be an error, not success or a panic):\n{printed}"
        );
        assert!(!printed.contains("panicked"), "{what}:\n{printed}");
        for needle in needles.iter().chain(extra) {
            assert!(
                printed.contains(needle),
                "{what}: '{needle}' missing from:\n{printed}"
            );
        }
    }
    assert!(
        !text(&check).contains("conditions hold"),
        "check evaluated the conditions of a damaged database:\n{}",
        text(&check)
    );
    // The JSON says the same: not passed, and why (the open's error, or the faults found),
    // its conditions not evaluated.
    let report = read_json(&json);
    assert_eq!(report["passed"], false, "{report}");
    assert!(report["conditions"].is_null(), "{report}");
    let why = match report.get("error") {
        Some(error) => error.to_string(),
        None => {
            assert!(report["integrity"]["faults_total"].as_u64().unwrap() > 0);
            report["integrity"]["faults"].to_string()
        }
    };
    for needle in needles {
        assert!(why.contains(needle), "'{needle}' missing from {report}");
    }
    assert_eq!(
        hash_files(&original.db),
        original.hashes,
        "the original database changed"
    );
}

#[test]
fn the_undamaged_copy_checks_clean() {
    let (tmp, db) = copy();
    let json = tmp.path().join("check.json");
    let out = glass(&[
        "check",
        "tpcb",
        "--db",
        db.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let printed = text(&out);
    assert_eq!(out.status.code(), Some(0), "{printed}");
    let report = read_json(&json);
    assert_eq!(report["passed"], true, "{report}");
    assert_eq!(report["workload"], "tpcb");
    assert_eq!(report["recovery"]["losers"], 0, "{report}");
    assert_eq!(report["integrity"]["faults_total"], 0, "{report}");
    assert!(
        report["integrity"]["pages"].as_u64().unwrap() > 1,
        "{report}"
    );
    let conditions = report["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 3, "{report}");
    assert!(conditions.iter().all(|c| c["holds"] == true), "{report}");
    assert!(report["acks"].is_null() && report.get("error").is_none());
    assert!(printed.contains("integrity: no fault"), "{printed}");
    // Closed cleanly: its recovery found nothing unfinished.
    assert!(
        printed.contains("recovery: ") && printed.contains("0 unfinished transactions"),
        "{printed}"
    );
    assert!(printed.contains("3 of 3 conditions hold"), "{printed}");
    assert!(!printed.contains('✗'), "{printed}");
}

#[test]
fn flipped_bits_in_a_heap_page() {
    let (first, _) = table_pages(&original().db, "tpcb_account");
    let page = format!("page #{first}");
    assert_damage_refused(
        |db, page_size| flip_bits(&db.join("pages.db"), first * page_size + 1000, 0x10),
        &[&page, "checksum mismatch"],
        &[],
    );
}

#[test]
fn flipped_bits_in_a_btree_page() {
    let original = original();
    let leaf = some_leaf(&original.db, original.page_size);
    let page = format!("page #{leaf}");
    assert_damage_refused(
        |db, page_size| flip_bits(&db.join("pages.db"), leaf * page_size + 2000, 0x04),
        &[&page, "checksum mismatch"],
        &["tpcb_account, primary index"],
    );
}

#[test]
fn flipped_bits_in_page_headers() {
    // The stored page id of a heap page, and the kind of a B+-tree root: the checksum
    // covers the header, so either is met as a corrupt page.
    let (first, _) = table_pages(&original().db, "tpcb_teller");
    let page = format!("page #{first}");
    assert_damage_refused(
        |db, page_size| {
            flip_bits(
                &db.join("pages.db"),
                first * page_size + OFFSET_PAGE_ID,
                0x01,
            )
        },
        &[&page],
        &[],
    );
    let (_, root) = table_pages(&original().db, "tpcb_account");
    let page = format!("page #{root}");
    assert_damage_refused(
        |db, page_size| flip_bits(&db.join("pages.db"), root * page_size + OFFSET_KIND, 0x07),
        &[&page],
        &["tpcb_account, primary index"],
    );
}

#[test]
fn flipped_bits_in_the_unused_meta_page_fail_the_check() {
    // Page 0 is reserved and read by nothing but the check: `bench` has no damaged data to
    // meet, so only `check` is asked to fail.
    let (_dir, db) = copy();
    flip_bits(&db.join("pages.db"), 100, 0x01);
    let out = glass(&["check", "tpcb", "--db", db.to_str().unwrap()]);
    let printed = text(&out);
    assert_eq!(out.status.code(), Some(1), "{printed}");
    assert!(printed.contains("page #0: bad magic"), "{printed}");
}

#[test]
fn a_zeroed_btree_root() {
    let (_, root) = table_pages(&original().db, "tpcb_account");
    assert_damage_refused(
        |db, page_size| {
            write_at(
                &db.join("pages.db"),
                root * page_size,
                &vec![0; page_size as usize],
            )
        },
        &["not a b+-tree node"],
        &[&format!("tpcb_account, primary index, page #{root}")],
    );
}

#[test]
fn a_zeroed_heap_page() {
    let (first, _) = table_pages(&original().db, "tpcb_account");
    let page = format!("page #{first}");
    assert_damage_refused(
        |db, page_size| {
            write_at(
                &db.join("pages.db"),
                first * page_size,
                &vec![0; page_size as usize],
            )
        },
        &[&page, "not a heap page"],
        &[],
    );
}

#[test]
fn a_truncated_page_file() {
    assert_damage_refused(
        |db, page_size| {
            let path = db.join("pages.db");
            let len = std::fs::metadata(&path).unwrap().len();
            // Half the pages, and half of the page after them.
            truncate(&path, (len / page_size / 2) * page_size + page_size / 2);
        },
        &["page #"],
        &[],
    );
}

#[test]
fn a_truncated_log() {
    assert_damage_refused(
        |db, _| {
            let path = db.join("wal.log");
            let len = std::fs::metadata(&path).unwrap().len();
            truncate(&path, len / 2);
        },
        &["log"],
        &[],
    );
}

/// Flips the low bit of the first digit after `field` in the catalog entry of `table`.
fn flip_catalog_digit(db: &Path, table: &str, field: &str) {
    let path = db.join("catalog.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let at = text.find(&format!("\"{table}\"")).unwrap();
    let at = text[at..].find(&format!("\"{field}\"")).unwrap() + at;
    let at = text[at..].find(|c: char| c.is_ascii_digit()).unwrap() + at;
    flip_bits(&path, at as u64, 0x01);
}

#[test]
fn flipped_bits_in_the_catalog() {
    // Broken JSON.
    assert_damage_refused(
        |db, _| flip_bits(&db.join("catalog.json"), 0, 0x40),
        &["catalog.json", "corrupt"],
        &[],
    );
    // Valid JSON naming another structure's page as the account table's index root.
    let (_, root) = table_pages(&original().db, "tpcb_account");
    assert_damage_refused(
        |db, _| flip_catalog_digit(db, "tpcb_account", "primary_root"),
        &[&format!("page #{}", root ^ 1)],
        &["tpcb_account, primary index"],
    );
}

#[test]
fn a_catalog_naming_another_tables_heap_fails_the_check() {
    // The branch table's first heap page turned into the teller table's: the indexes still
    // lead `bench` to the right records, so only `check` can see it, by the page both heaps
    // claim and by records without index entries.
    let (branch, _) = table_pages(&original().db, "tpcb_branch");
    let (teller, _) = table_pages(&original().db, "tpcb_teller");
    assert_eq!(
        branch ^ 2,
        teller,
        "the flip below turns one into the other"
    );
    let (_dir, db) = copy();
    let path = db.join("catalog.json");
    let json = std::fs::read_to_string(&path).unwrap();
    let at = json.find("\"first_page\"").unwrap();
    let at = json[at..].find(|c: char| c.is_ascii_digit()).unwrap() + at;
    flip_bits(&path, at as u64, 0x02);
    let out = glass(&["check", "tpcb", "--db", db.to_str().unwrap()]);
    let printed = text(&out);
    assert_eq!(out.status.code(), Some(1), "{printed}");
    let claimed = format!("page #{teller} is claimed by table tpcb_branch, heap as well");
    assert!(printed.contains(&claimed), "{printed}");
    assert!(
        printed.contains("no entry for it in table tpcb_branch, primary index"),
        "{printed}"
    );
}

#[test]
fn each_file_missing_in_turn() {
    for file in ["pages.db", "wal.log", "catalog.json"] {
        assert_damage_refused(
            |db, _| std::fs::remove_file(db.join(file)).unwrap(),
            &[file, "missing"],
            &[],
        );
    }
    assert_damage_refused(
        |db, _| std::fs::remove_file(db.join("glass-load.json")).unwrap(),
        &[],
        &["glass-load.json"],
    );
}
