//! Page stores: where pages live when they are not in the buffer pool.
//!
//! A [`PageStore`] reads and writes whole pages by [`PageId`]; page `n` occupies bytes
//! `n * page_size .. (n + 1) * page_size`. Two implementations:
//!
//! * [`FilePageStore`]: one file, positioned I/O (`pread`/`pwrite` through
//!   [`std::os::unix::fs::FileExt`]), so concurrent requests need no shared file cursor and no
//!   lock. Reading past the end of the file yields an all-zero page (a page that was allocated
//!   but never written); the file grows when such a page is first written.
//! * [`MemPageStore`]: pages in memory, for in-memory databases and tests. Same contract.
//!
//! Invariants: a store never interprets page bytes (checksums are the buffer pool's business);
//! `page_count()` is one past the highest page ever written; every failure is a
//! [`StorageError::Io`] naming the action, never a panic (a full disk included).

#[cfg(not(unix))]
pub use positioned::FileExt;
use std::fs::{File, OpenOptions};
#[cfg(unix)]
use std::os::unix::fs::FileExt;
use std::path::Path;

use parking_lot::RwLock;

use crate::error::{StorageError, StorageResult};
use crate::page::{PageId, PageSize};

/// Whole-page I/O by page id. Implementations are shared between threads.
pub trait PageStore: Send + Sync {
    /// Reads page `id` into `buf` (exactly one page long). A page never written reads as zeroes.
    fn read_page(&self, id: PageId, buf: &mut [u8]) -> StorageResult<()>;
    /// Writes `buf` (exactly one page long) as page `id`.
    fn write_page(&self, id: PageId, buf: &[u8]) -> StorageResult<()>;
    /// Makes every completed write durable.
    fn sync(&self) -> StorageResult<()>;
    /// One past the highest page id the store holds.
    fn page_count(&self) -> u64;
    /// Advice: pages `ids` will be read soon. A store on a file starts reading them now, all
    /// at once, so that a device that serves many reads at a time does (recovery's pages: one
    /// cold read after another waits for each in turn). Changes nothing a read returns; the
    /// default does nothing.
    fn will_need(&self, _ids: &[PageId]) {}
}

/// A boxed store is a store (so that a [`crate::DelayedStore`] can wrap whichever one a
/// database opened).
impl<S: PageStore + ?Sized> PageStore for Box<S> {
    fn read_page(&self, id: PageId, buf: &mut [u8]) -> StorageResult<()> {
        (**self).read_page(id, buf)
    }

    fn write_page(&self, id: PageId, buf: &[u8]) -> StorageResult<()> {
        (**self).write_page(id, buf)
    }

    fn sync(&self) -> StorageResult<()> {
        (**self).sync()
    }

    fn page_count(&self) -> u64 {
        (**self).page_count()
    }

    fn will_need(&self, ids: &[PageId]) {
        (**self).will_need(ids)
    }
}

/// Runs of consecutive page ids in `ids` (any order, repeats allowed), in order, each as its
/// first id and its length.
pub(crate) fn page_runs(ids: &[PageId]) -> Vec<(u64, u64)> {
    let mut sorted: Vec<u64> = ids.iter().map(|id| id.0).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for id in sorted {
        match runs.last_mut() {
            Some((first, len)) if *first + *len == id => *len += 1,
            _ => runs.push((id, 1)),
        }
    }
    runs
}

/// Asks the kernel to read `len` bytes of `file` at `offset` into its page cache now, without
/// waiting for them (`POSIX_FADV_WILLNEED`). Advice only: an error is ignored.
#[cfg(unix)]
pub(crate) fn advise_will_need(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return;
    };
    // SAFETY: posix_fadvise reads only its integer arguments; the descriptor is `file`'s,
    // open for as long as the borrow.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), offset, len, libc::POSIX_FADV_WILLNEED);
    }
}

#[cfg(not(unix))]
pub(crate) fn advise_will_need(_file: &File, _offset: u64, _len: u64) {}

fn check_len(buf_len: usize, page_size: usize) -> StorageResult<()> {
    if buf_len != page_size {
        return Err(StorageError::Invalid(format!(
            "page buffer of {buf_len} bytes for a store of {page_size}-byte pages"
        )));
    }
    Ok(())
}

/// Pages in one file, read and written with positioned I/O.
pub struct FilePageStore {
    file: File,
    page_size: usize,
    tear: Option<Tear>,
}

/// The environment variable that makes a [`FilePageStore`] write each page in two halves
/// with a pause between them (fault injection for `glass crash --tear-writes`, never for
/// real use): `header-new` writes the first half first, as a process killed inside `pwrite`
/// leaves a page; `header-old` the second half first, as a power loss may. A kill during the
/// pause leaves the page torn, and recovery must rebuild it.
pub const TEAR_WRITES_ENV: &str = "GLASS_TEAR_PAGE_WRITES";

/// Makes the entries of directory `dir` (files and directories created, renamed or removed in
/// it) durable: `fsync` of the directory, which a file's own sync does not promise.
pub fn sync_directory(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// `create_dir_all`, durably: each directory it creates is synced into its parent, so that a
/// power loss after it returns cannot take the directory (and everything synced inside it)
/// away with the parent's unsynced entry.
pub fn create_dir_all_durably(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut missing = vec![dir];
    let mut at = dir;
    while let Some(parent) = at.parent() {
        if parent.as_os_str().is_empty() || parent.is_dir() {
            break;
        }
        missing.push(parent);
        at = parent;
    }
    std::fs::create_dir_all(dir)?;
    // Top down: a directory's entry is synced once its parent's own entry is.
    for created in missing.iter().rev() {
        let parent = match created.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        sync_directory(parent)?;
    }
    Ok(())
}

/// How page writes are torn ([`TEAR_WRITES_ENV`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tear {
    HeaderNew,
    HeaderOld,
}

impl Tear {
    /// The tearing the environment asks for; an unknown value is an error naming it.
    fn from_env() -> StorageResult<Option<Tear>> {
        match std::env::var(TEAR_WRITES_ENV).ok().as_deref() {
            None | Some("") => Ok(None),
            Some("header-new") => Ok(Some(Tear::HeaderNew)),
            Some("header-old") => Ok(Some(Tear::HeaderOld)),
            Some(other) => Err(StorageError::Invalid(format!(
                "{TEAR_WRITES_ENV}={other}: expected header-new or header-old"
            ))),
        }
    }
}

impl FilePageStore {
    /// Creates (or truncates) the file at `path`.
    pub fn create(path: &Path, page_size: PageSize) -> StorageResult<FilePageStore> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| StorageError::io("create page file", e))?;
        Ok(FilePageStore {
            file,
            page_size: page_size.bytes(),
            tear: Tear::from_env()?,
        })
    }

    /// Opens an existing page file.
    pub fn open(path: &Path, page_size: PageSize) -> StorageResult<FilePageStore> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| StorageError::io("open page file", e))?;
        Ok(FilePageStore {
            file,
            page_size: page_size.bytes(),
            tear: Tear::from_env()?,
        })
    }

    fn offset(&self, id: PageId) -> StorageResult<u64> {
        id.0.checked_mul(self.page_size as u64)
            .ok_or_else(|| StorageError::Invalid(format!("page {id} lies beyond any file")))
    }
}

impl PageStore for FilePageStore {
    fn read_page(&self, id: PageId, buf: &mut [u8]) -> StorageResult<()> {
        check_len(buf.len(), self.page_size)?;
        let offset = self.offset(id)?;
        // Read what the file holds; a short read (end of file) leaves zeroes behind it.
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(StorageError::io("read page", e)),
            }
        }
        buf[done..].fill(0);
        Ok(())
    }

    fn write_page(&self, id: PageId, buf: &[u8]) -> StorageResult<()> {
        check_len(buf.len(), self.page_size)?;
        let offset = self.offset(id)?;
        let write = |from: usize, to: usize| {
            self.file
                .write_all_at(&buf[from..to], offset + from as u64)
                .map_err(|e| StorageError::io("write page", e))
        };
        let half = buf.len() / 2;
        let pause = || std::thread::sleep(std::time::Duration::from_millis(1));
        match self.tear {
            None => write(0, buf.len()),
            Some(Tear::HeaderNew) => {
                write(0, half)?;
                pause();
                write(half, buf.len())
            }
            Some(Tear::HeaderOld) => {
                write(half, buf.len())?;
                pause();
                write(0, half)
            }
        }
    }

    fn sync(&self) -> StorageResult<()> {
        self.file
            .sync_data()
            .map_err(|e| StorageError::io("sync page file", e))
    }

    fn page_count(&self) -> u64 {
        match self.file.metadata() {
            Ok(m) => m.len().div_ceil(self.page_size as u64),
            Err(_) => 0,
        }
    }

    fn will_need(&self, ids: &[PageId]) {
        let ps = self.page_size as u64;
        for (first, len) in page_runs(ids) {
            if let (Some(offset), Some(bytes)) = (first.checked_mul(ps), len.checked_mul(ps)) {
                advise_will_need(&self.file, offset, bytes);
            }
        }
    }
}

/// Pages in memory: a vector of page images, `None` for pages never written.
pub struct MemPageStore {
    page_size: usize,
    /// Protects the page vector; each request holds it only for one copy.
    pages: RwLock<Vec<Option<Box<[u8]>>>>,
}

impl MemPageStore {
    pub fn new(page_size: PageSize) -> MemPageStore {
        MemPageStore {
            page_size: page_size.bytes(),
            pages: RwLock::new(Vec::new()),
        }
    }
}

impl PageStore for MemPageStore {
    fn read_page(&self, id: PageId, buf: &mut [u8]) -> StorageResult<()> {
        check_len(buf.len(), self.page_size)?;
        let pages = self.pages.read();
        match usize::try_from(id.0).ok().and_then(|i| pages.get(i)) {
            Some(Some(page)) => buf.copy_from_slice(page),
            _ => buf.fill(0),
        }
        Ok(())
    }

    fn write_page(&self, id: PageId, buf: &[u8]) -> StorageResult<()> {
        check_len(buf.len(), self.page_size)?;
        let index = usize::try_from(id.0)
            .map_err(|_| StorageError::Invalid(format!("page {id} beyond memory")))?;
        let mut pages = self.pages.write();
        if pages.len() <= index {
            pages.resize_with(index + 1, || None);
        }
        match &mut pages[index] {
            Some(page) => page.copy_from_slice(buf),
            slot => *slot = Some(buf.into()),
        }
        Ok(())
    }

    fn sync(&self) -> StorageResult<()> {
        Ok(())
    }

    fn page_count(&self) -> u64 {
        self.pages.read().len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_goes_out_as_runs_of_consecutive_pages() {
        let ids = [9, 3, 4, 5, 9, 12, 2, 13].map(PageId);
        assert_eq!(page_runs(&ids), [(2, 4), (9, 1), (12, 2)]);
        assert_eq!(page_runs(&[]), []);
        assert_eq!(page_runs(&[PageId(u64::MAX)]), [(u64::MAX, 1)]);
    }

    #[test]
    fn advice_of_pages_to_be_read_changes_nothing_a_read_returns() {
        let dir = tempfile::tempdir().unwrap();
        let store = FilePageStore::create(&dir.path().join("pages.db"), PageSize::Kib8).unwrap();
        let size = PageSize::Kib8.bytes();
        let image: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        store.write_page(PageId(2), &image).unwrap();
        // Pages in the file, past its end, and past any offset a file can have.
        store.will_need(&[PageId(2), PageId(0), PageId(40), PageId(u64::MAX / 2)]);
        let mut buf = vec![0xAAu8; size];
        store.read_page(PageId(2), &mut buf).unwrap();
        assert_eq!(buf, image);
        store.read_page(PageId(40), &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        assert_eq!(store.page_count(), 3);
    }

    fn round_trip(store: &dyn PageStore) {
        let size = PageSize::Kib8.bytes();
        let mut buf = vec![0xAAu8; size];
        store.read_page(PageId(3), &mut buf).unwrap();
        assert!(
            buf.iter().all(|&b| b == 0),
            "unwritten page reads as zeroes"
        );
        assert_eq!(store.page_count(), 0);

        let page: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        store.write_page(PageId(3), &page).unwrap();
        assert_eq!(store.page_count(), 4);
        store.read_page(PageId(3), &mut buf).unwrap();
        assert_eq!(buf, page);
        store.read_page(PageId(1), &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        store.read_page(PageId(9), &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        store.sync().unwrap();

        let mut short = vec![0u8; 100];
        assert!(matches!(
            store.read_page(PageId(0), &mut short),
            Err(StorageError::Invalid(_))
        ));
        assert!(matches!(
            store.write_page(PageId(0), &short),
            Err(StorageError::Invalid(_))
        ));
    }

    #[test]
    fn file_store_round_trip_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pages");
        round_trip(&FilePageStore::create(&path, PageSize::Kib8).unwrap());
        let reopened = FilePageStore::open(&path, PageSize::Kib8).unwrap();
        assert_eq!(reopened.page_count(), 4);
        let mut buf = vec![0u8; 8192];
        reopened.read_page(PageId(3), &mut buf).unwrap();
        assert_eq!(buf[10], 10);
    }

    #[test]
    fn mem_store_round_trip() {
        round_trip(&MemPageStore::new(PageSize::Kib8));
    }

    #[test]
    fn opening_a_missing_file_names_the_action() {
        let dir = tempfile::tempdir().unwrap();
        let err = FilePageStore::open(&dir.path().join("absent"), PageSize::Kib8)
            .err()
            .unwrap();
        assert!(err.to_string().contains("open page file"), "{err}");
    }

    #[test]
    fn write_to_a_full_device_is_an_error() {
        // /dev/full fails every write with ENOSPC.
        let Ok(store) = FilePageStore::open(Path::new("/dev/full"), PageSize::Kib8) else {
            return;
        };
        let err = store.write_page(PageId(0), &[1u8; 8192]).unwrap_err();
        assert!(
            matches!(
                err,
                StorageError::Io {
                    action: "write page",
                    ..
                }
            ),
            "{err}"
        );
    }
}

/// Positioned reads and writes where the platform has no `pread`/`pwrite` extension: a seek,
/// then the transfer. Not atomic against other users of the same file; it exists so that the
/// crate compiles for WebAssembly (where stored procedures are built, `glass serve --isolation
/// wasm`), which never opens a page file.
#[cfg(not(unix))]
pub mod positioned {
    use std::fs::File;
    use std::io::{Read, Seek, SeekFrom, Write};

    pub trait FileExt {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize>;
        fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<usize>;
        fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()>;
    }

    impl FileExt for File {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            let mut file = self;
            file.seek(SeekFrom::Start(offset))?;
            file.read(buf)
        }

        fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<usize> {
            let mut file = self;
            file.seek(SeekFrom::Start(offset))?;
            file.write(buf)
        }

        fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
            let mut file = self;
            file.seek(SeekFrom::Start(offset))?;
            file.write_all(buf)
        }
    }
}
