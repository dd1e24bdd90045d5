//! Where the log's bytes live: one file read and written with positioned I/O, or memory.
//!
//! A [`LogStorage`] is a flat byte array that grows at its end, plus a tiny *master record*
//! (where the last complete checkpoint begins) that is replaced atomically and durably.
//!
//! * [`FileLogStorage`]: the log file `<path>` and the master file `<path>.master`. The master
//!   is written to `<path>.master.tmp`, synced, renamed over the old one, and the directory is
//!   synced, so a crash leaves either the old or the new master, never a mix.
//! * [`MemLogStorage`]: for in-memory databases and tests. It remembers how long the log was at
//!   its last sync, so [`MemLogStorage::crash_image`] yields what a disk would still hold after
//!   a crash (everything synced, plus any chosen part of the unsynced tail): the simulated disk
//!   of the crash-recovery tests.
//!
//! Invariant (both): `sync` makes every byte written before it survive a crash; `truncate`
//! is durable when it returns.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

/// The byte store under a log.
pub trait LogStorage: Send + Sync {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (fewer only
    /// where the log ends).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// Writes all of `bytes` at `offset` (the log writes at its end only).
    fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()>;
    /// Makes every byte written so far durable.
    fn sync(&self) -> io::Result<()>;
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Cuts the log to `len` bytes, durably.
    fn truncate(&self, len: u64) -> io::Result<()>;
    /// The master record as last written, if any.
    fn read_master(&self) -> io::Result<Option<Vec<u8>>>;
    /// Replaces the master record atomically and durably.
    fn write_master(&self, bytes: &[u8]) -> io::Result<()>;
}

/// A log in one file, with its master record in a file beside it.
pub struct FileLogStorage {
    file: File,
    path: PathBuf,
}

impl FileLogStorage {
    /// Opens the log file at `path`, creating it (empty) if it does not exist.
    pub fn open(path: impl AsRef<Path>) -> io::Result<FileLogStorage> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        let storage = FileLogStorage { file, path };
        // The file may have just been created: make its directory entry durable too.
        storage.sync_dir()?;
        Ok(storage)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn master_path(&self, suffix: &str) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(suffix);
        PathBuf::from(name)
    }

    fn sync_dir(&self) -> io::Result<()> {
        let dir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        File::open(dir)?.sync_all()
    }
}

impl LogStorage for FileLogStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        self.file.sync_all()
    }

    fn read_master(&self) -> io::Result<Option<Vec<u8>>> {
        match std::fs::read(self.master_path(".master")) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn write_master(&self, bytes: &[u8]) -> io::Result<()> {
        let tmp = self.master_path(".master.tmp");
        {
            let mut f = File::create(&tmp)?;
            io::Write::write_all(&mut f, bytes)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, self.master_path(".master"))?;
        self.sync_dir()
    }
}

/// A log in memory. Clones share the same bytes, so a test can "reopen" a log.
#[derive(Clone, Default)]
pub struct MemLogStorage {
    inner: Arc<Mutex<MemInner>>,
}

/// Latch-protected state of a [`MemLogStorage`].
#[derive(Default)]
struct MemInner {
    bytes: Vec<u8>,
    /// Length of `bytes` at the last `sync` (or durable truncate).
    synced_len: usize,
    master: Option<Vec<u8>>,
}

impl MemLogStorage {
    pub fn new() -> MemLogStorage {
        MemLogStorage::default()
    }

    /// A storage holding what a disk would hold after a crash now: every synced byte, plus
    /// the first `unsynced_kept` bytes written since the last sync (a torn write keeps some).
    /// Exact for a writer that only appends, as the log manager does.
    pub fn crash_image(&self, unsynced_kept: usize) -> MemLogStorage {
        let inner = self.inner.lock();
        let keep = inner
            .synced_len
            .saturating_add(unsynced_kept)
            .min(inner.bytes.len());
        MemLogStorage {
            inner: Arc::new(Mutex::new(MemInner {
                bytes: inner.bytes[..keep].to_vec(),
                synced_len: keep,
                master: inner.master.clone(),
            })),
        }
    }

    /// A copy of the stored bytes (for tests and tools that inspect a log).
    pub fn bytes(&self) -> Vec<u8> {
        self.inner.lock().bytes.clone()
    }

    /// Replaces the stored bytes (for tests that damage a log on purpose).
    pub fn set_bytes(&self, bytes: Vec<u8>) {
        let mut inner = self.inner.lock();
        inner.synced_len = bytes.len();
        inner.bytes = bytes;
    }
}

impl LogStorage for MemLogStorage {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let inner = self.inner.lock();
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(inner.bytes.len());
        let n = buf.len().min(inner.bytes.len() - start);
        buf[..n].copy_from_slice(&inner.bytes[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let offset = usize::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        let mut inner = self.inner.lock();
        let end = offset + bytes.len();
        if inner.bytes.len() < end {
            inner.bytes.resize(end, 0);
        }
        inner.bytes[offset..end].copy_from_slice(bytes);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut inner = self.inner.lock();
        inner.synced_len = inner.bytes.len();
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.inner.lock().bytes.len() as u64)
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        let mut inner = self.inner.lock();
        let len = usize::try_from(len)
            .unwrap_or(usize::MAX)
            .min(inner.bytes.len());
        inner.bytes.truncate(len);
        inner.synced_len = len;
        Ok(())
    }

    fn read_master(&self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.inner.lock().master.clone())
    }

    fn write_master(&self, bytes: &[u8]) -> io::Result<()> {
        self.inner.lock().master = Some(bytes.to_vec());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exercise(storage: &dyn LogStorage) {
        assert_eq!(storage.len().unwrap(), 0);
        storage.write_at(0, b"hello").unwrap();
        storage.write_at(5, b" world").unwrap();
        storage.sync().unwrap();
        let mut buf = [0u8; 20];
        assert_eq!(storage.read_at(0, &mut buf).unwrap(), 11);
        assert_eq!(&buf[..11], b"hello world");
        assert_eq!(storage.read_at(6, &mut buf[..3]).unwrap(), 3);
        assert_eq!(&buf[..3], b"wor");
        assert_eq!(storage.read_at(50, &mut buf).unwrap(), 0);
        storage.truncate(5).unwrap();
        assert_eq!(storage.len().unwrap(), 5);
        assert_eq!(storage.read_master().unwrap(), None);
        storage.write_master(b"m1").unwrap();
        storage.write_master(b"m2").unwrap();
        assert_eq!(storage.read_master().unwrap().as_deref(), Some(&b"m2"[..]));
    }

    #[test]
    fn file_storage_reads_what_it_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        exercise(&FileLogStorage::open(&path).unwrap());
        // Reopening sees the truncated bytes and the last master.
        let again = FileLogStorage::open(&path).unwrap();
        assert_eq!(again.len().unwrap(), 5);
        assert_eq!(again.read_master().unwrap().as_deref(), Some(&b"m2"[..]));
        assert!(!dir.path().join("log.master.tmp").exists());
    }

    #[test]
    fn mem_storage_reads_what_it_wrote() {
        exercise(&MemLogStorage::new());
    }

    #[test]
    fn crash_image_drops_unsynced_bytes() {
        let s = MemLogStorage::new();
        s.write_at(0, b"durable").unwrap();
        s.sync().unwrap();
        s.write_at(7, b"-volatile").unwrap();
        assert_eq!(s.crash_image(0).bytes(), b"durable");
        assert_eq!(s.crash_image(3).bytes(), b"durable-vo");
        assert_eq!(s.crash_image(1000).bytes(), b"durable-volatile");
    }
}
