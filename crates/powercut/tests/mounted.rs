//! The file system through a real mount: what `std::fs` writes and syncs survives a cut, what
//! it does not sync is gone. Skipped (said on stderr) where FUSE cannot be mounted.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use powercut::Mounted;
use rand::rngs::SmallRng;
use rand::SeedableRng;

fn mount(dir: &tempfile::TempDir) -> Option<Mounted> {
    let at = dir.path().join("mnt");
    fs::create_dir(&at).unwrap();
    Mounted::mount_or_skip(&at)
}

fn sync_dir(path: &std::path::Path) {
    File::open(path).unwrap().sync_all().unwrap();
}

#[test]
fn synced_files_and_entries_survive_a_cut_and_the_rest_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let Some(m) = mount(&dir) else { return };
    let root = m.path().to_path_buf();
    let db = root.join("db");
    fs::create_dir(&db).unwrap();
    sync_dir(&root);

    // A file written and synced, its directory synced: it stays.
    let mut kept = File::create(db.join("kept")).unwrap();
    kept.write_all(&[7u8; 10_000]).unwrap();
    kept.sync_data().unwrap();
    sync_dir(&db);
    // Then more written to it, unsynced: lost.
    kept.write_all(b"tail").unwrap();
    kept.write_at(b"over", 0).unwrap();
    drop(kept);
    // A file synced but never named durably: gone.
    let mut orphan = File::create(db.join("orphan")).unwrap();
    orphan.write_all(b"x").unwrap();
    orphan.sync_all().unwrap();
    drop(orphan);
    // A rename into place not synced: undone.
    fs::write(db.join("master.tmp"), b"new").unwrap();
    fs::rename(db.join("master.tmp"), db.join("master")).unwrap();

    let cut = m.cut(0.0, &mut SmallRng::seed_from_u64(1)).unwrap();
    assert!(cut.blocks_lost >= 2, "{cut:?}");
    // The orphan, and the new master the unsynced rename had put in place.
    assert_eq!(cut.files_lost, 2, "{cut:?}");

    let mut names: Vec<String> = fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec!["kept".to_string()]);
    let mut data = Vec::new();
    File::open(db.join("kept"))
        .unwrap()
        .read_to_end(&mut data)
        .unwrap();
    assert_eq!(data, vec![7u8; 10_000]);

    // The file system goes on after a cut: punch a hole, truncate, sync, read back.
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(db.join("kept"))
        .unwrap();
    f.set_len(5_000).unwrap();
    f.seek(SeekFrom::End(0)).unwrap();
    f.write_all(b"end").unwrap();
    f.sync_all().unwrap();
    drop(f);
    m.cut(0.0, &mut SmallRng::seed_from_u64(2)).unwrap();
    let data = fs::read(db.join("kept")).unwrap();
    assert_eq!(data.len(), 5_003);
    assert_eq!(&data[5_000..], b"end");
    // A file opened O_DSYNC has each write synced as it returns.
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .custom_flags(libc::O_DSYNC)
            .open(db.join("dsync"))
            .unwrap();
        f.write_all(b"synced by its flag").unwrap();
    }
    sync_dir(&db);
    m.cut(0.0, &mut SmallRng::seed_from_u64(3)).unwrap();
    assert_eq!(fs::read(db.join("dsync")).unwrap(), b"synced by its flag");
    let counts = m.counts();
    assert!(
        counts.file_syncs >= 4 && counts.dir_syncs >= 3,
        "{counts:?}"
    );
    assert_eq!(counts.cuts, 3);
    m.unmount().unwrap();
}
