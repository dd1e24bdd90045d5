//! A file system in memory that can lose its power.
//!
//! A kill campaign (`glass crash`) kills the process and keeps the kernel: every write the
//! process made is in the page cache and reaches the disk sooner or later, so a missing
//! `fsync` — of the log before a page, of the page file before a checkpoint discards the log,
//! of a directory after a file is created or renamed in it — goes unseen. This crate mounts
//! (FUSE, pure Rust, `mount(2)` as root) a file system kept in this process's memory, whose
//! [`Mounted::cut`] is a power cut: what was not synced is lost, or, with `keep` above 0,
//! partly written back in any order, as a kernel's page cache might have done (see
//! [`model`] for the exact rules). `glass crash --power-loss` runs every lane's database on
//! one and cuts its power after each kill.
//!
//! `fsync` and `fdatasync` of a file, and each write to a file opened `O_DSYNC` or `O_SYNC`,
//! make its data and size durable; `fsync` of a directory, its entries.
//!
//! Every request is served by one thread, in order, with no caching in the kernel (entries
//! and attributes live for 0 s, file data is read and written directly): after a cut, the
//! next process sees exactly the durable state. [`Mounted::cut`] first makes a request of its
//! own through the mount, so that everything a killed process had sent before it died has
//! been served before the power goes.

pub mod model;

use std::ffi::OsStr;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, SessionACL, TimeOrNow,
};
use parking_lot::Mutex;
use rand::Rng;

pub use model::{Counts, Cut, Model, BLOCK};

/// Entries and attributes are never cached by the kernel: a cut changes them underneath.
const TTL: Duration = Duration::ZERO;
/// What `statfs` says the file system holds (memory is the limit, not this).
const CAPACITY: u64 = 1 << 40;

struct Fs {
    model: Arc<Mutex<Model>>,
    uid: u32,
    gid: u32,
}

fn errno(e: model::Errno) -> Errno {
    Errno::from_i32(e)
}

/// Answers a request that returns nothing but success or an `errno`.
fn answer(reply: ReplyEmpty, result: Result<(), model::Errno>) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(e)),
    }
}

/// Answers a request that made or found a node with its attributes.
fn answer_entry(reply: ReplyEntry, result: Result<FileAttr, Errno>) {
    match result {
        Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
        Err(e) => reply.error(e),
    }
}

impl Fs {
    fn file_attr(&self, ino: u64, attr: model::Attr) -> FileAttr {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        FileAttr {
            ino: INodeNo(ino),
            size: attr.size,
            blocks: attr.size.div_ceil(512),
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind: if attr.dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            },
            perm: if attr.dir { 0o755 } else { 0o644 },
            nlink: if attr.dir { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: BLOCK as u32,
            flags: 0,
        }
    }

    fn attr_of(&self, model: &Model, ino: u64) -> Result<FileAttr, Errno> {
        model
            .attr(ino)
            .map(|a| self.file_attr(ino, a))
            .map_err(errno)
    }

    fn make(&self, parent: INodeNo, name: &OsStr, dir: bool) -> Result<FileAttr, Errno> {
        let mut m = self.model.lock();
        let ino = m.create(parent.0, name, dir).map_err(errno)?;
        self.attr_of(&m, ino)
    }
}

/// Opens read and write file data directly (no page cache in the kernel to outlive a cut).
const OPEN: FopenFlags = FopenFlags::FOPEN_DIRECT_IO;

impl Filesystem for Fs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let m = self.model.lock();
        let found = m.lookup(parent.0, name).map_err(errno);
        answer_entry(reply, found.and_then(|ino| self.attr_of(&m, ino)))
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr_of(&self.model.lock(), ino.0) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut m = self.model.lock();
        let result = match size {
            Some(len) => m.set_len(ino.0, len).map_err(errno),
            None => Ok(()),
        };
        match result.and_then(|()| self.attr_of(&m, ino.0)) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(Errno::EPERM);
        }
        answer_entry(reply, self.make(parent, name, false))
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        answer_entry(reply, self.make(parent, name, true))
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        answer(reply, self.model.lock().remove(parent.0, name, false))
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        answer(reply, self.model.lock().remove(parent.0, name, true))
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.contains(RenameFlags::RENAME_EXCHANGE)
            || flags.contains(RenameFlags::RENAME_WHITEOUT)
        {
            return reply.error(Errno::EINVAL);
        }
        let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        let mut m = self.model.lock();
        answer(
            reply,
            m.rename(parent.0, name, newparent.0, newname, no_replace),
        );
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut m = self.model.lock();
        let result = match m.attr(ino.0) {
            Ok(a) if !a.dir && flags.0 & libc::O_TRUNC != 0 => m.set_len(ino.0, 0),
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => reply.opened(FileHandle(0), OPEN),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        if mode & libc::S_IFMT != libc::S_IFREG && mode & libc::S_IFMT != 0 {
            return reply.error(Errno::EPERM);
        }
        let mut m = self.model.lock();
        let ino = match m.lookup(parent.0, name) {
            Ok(_) if flags & libc::O_EXCL != 0 => Err(libc::EEXIST),
            Ok(ino) if flags & libc::O_TRUNC != 0 => m.set_len(ino, 0).map(|()| ino),
            Ok(ino) => Ok(ino),
            Err(_) => m.create(parent.0, name, false),
        };
        match ino.map_err(errno).and_then(|ino| self.attr_of(&m, ino)) {
            Ok(attr) => reply.created(&TTL, &attr, Generation(0), FileHandle(0), OPEN),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        match self.model.lock().read(ino.0, offset, u64::from(size)) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: fuser::WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut m = self.model.lock();
        let mut result = m.write(ino.0, offset, data);
        // A file opened `O_DSYNC` (or `O_SYNC`) has each write synced before it returns.
        if result.is_ok() && flags.0 & (libc::O_DSYNC | libc::O_SYNC) != 0 {
            result = m.sync(ino.0);
        }
        match result {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        answer(reply, self.model.lock().sync(ino.0))
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let entries = match self.model.lock().entries(ino.0) {
            Ok(entries) => entries,
            Err(e) => return reply.error(errno(e)),
        };
        let dots = [
            (OsStr::new(".").to_owned(), ino.0, true),
            (OsStr::new("..").to_owned(), ino.0, true),
        ];
        for (i, (name, child, dir)) in dots.into_iter().chain(entries).enumerate() {
            if (i as u64) < offset {
                continue;
            }
            let kind = if dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            if reply.add(INodeNo(child), i as u64 + 1, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        answer(reply, self.model.lock().sync(ino.0))
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let used = self.model.lock().used_bytes();
        let blocks = CAPACITY / BLOCK;
        let free = blocks.saturating_sub(used / BLOCK);
        reply.statfs(
            blocks,
            free,
            free,
            1 << 20,
            1 << 20,
            BLOCK as u32,
            255,
            BLOCK as u32,
        );
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        answer(
            reply,
            self.model.lock().allocate(ino.0, offset, length, mode),
        )
    }
}

/// Detaches a mount left at `path` by a process that died without unmounting it (its
/// directory then answers `ENOTCONN`), so that the path can be mounted on again.
pub fn clear_stale_mount(path: &Path) {
    let stale = matches!(
        std::fs::metadata(path),
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN)
    );
    if stale {
        if let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) {
            // SAFETY: `c` is a NUL-terminated path that lives across the call.
            unsafe {
                libc::umount2(c.as_ptr(), libc::MNT_DETACH);
            }
        }
    }
}

/// A mounted power-cut file system; unmounted when dropped.
pub struct Mounted {
    model: Arc<Mutex<Model>>,
    path: PathBuf,
    session: Option<fuser::BackgroundSession>,
}

impl Mounted {
    /// Mounts an empty file system at `mountpoint` (an existing, empty directory). Needs
    /// root (or `CAP_SYS_ADMIN`) and `/dev/fuse`; the error says which was missing.
    pub fn mount(mountpoint: &Path) -> io::Result<Mounted> {
        let meta = std::fs::metadata(mountpoint)?;
        let model = Arc::new(Mutex::new(Model::new()));
        let fs = Fs {
            model: Arc::clone(&model),
            uid: meta.uid(),
            gid: meta.gid(),
        };
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("glass-powercut".into()),
            MountOption::RW,
            MountOption::NoAtime,
        ];
        config.acl = SessionACL::RootAndOwner;
        config.n_threads = Some(1);
        let session = fuser::spawn_mount(fs, mountpoint, &config).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "mount a FUSE file system at {}: {e} (it needs /dev/fuse and root or \
                     CAP_SYS_ADMIN)",
                    mountpoint.display()
                ),
            )
        })?;
        let mounted = Mounted {
            model,
            path: mountpoint.to_path_buf(),
            session: Some(session),
        };
        // The mount answers before it is used.
        mounted.barrier()?;
        Ok(mounted)
    }

    /// [`Mounted::mount`] for a test that needs the mount and means nothing without it:
    /// `None`, after saying on stderr that the test is skipped and why, where FUSE cannot be
    /// mounted (no `/dev/fuse`, no root).
    pub fn mount_or_skip(mountpoint: &Path) -> Option<Mounted> {
        match Mounted::mount(mountpoint) {
            Ok(m) => Some(m),
            Err(e) => {
                eprintln!("skipped: {e}");
                None
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A request of our own through the mount, answered after every request sent before it.
    fn barrier(&self) -> io::Result<()> {
        std::fs::read_dir(&self.path)?.count();
        Ok(())
    }

    /// Cuts the power: see [`Model::cut`]. Call it only once every process using the mount
    /// has exited (a file open across a cut would see its data change under it).
    pub fn cut(&self, keep: f64, rng: &mut impl Rng) -> io::Result<Cut> {
        self.barrier()?;
        Ok(self.model.lock().cut(keep, rng))
    }

    pub fn counts(&self) -> Counts {
        self.model.lock().counts()
    }

    /// Unmounts, waiting for the serving thread to end.
    pub fn unmount(mut self) -> io::Result<()> {
        match self.session.take() {
            Some(session) => session.umount_and_join(),
            None => Ok(()),
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            let _ = session.umount_and_join();
        }
    }
}
