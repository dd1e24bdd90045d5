//! The shared-memory transport: Glass's stand-in for kernel bypass. The 2025 paper ran VoltDB
//! on a user-space TCP stack over DPDK, whose one network thread spin-polls the NIC; DPDK
//! cannot run here, so a client and the server exchange the same protocol frames through a
//! memory-mapped file instead, each side spin-polling a sequence number: no system call, no
//! interrupt and no kernel network stack on the path of a request. It is a *substitute*, and
//! is labelled so wherever it appears.
//!
//! The region is a file (under `/dev/shm` normally) the server creates; a client maps it and
//! claims a free slot; a slot is one connection.
//!
//! ```text
//!   offset 0     header (64 bytes)
//!   offset 64    slot 0 │ control (192 bytes) │ request buffer │ response buffer │
//!                slot 1 │ …
//! ```
//!
//! Header (little-endian):
//!
//! | offset | size | field | meaning |
//! |---:|---:|---|---|
//! | 0 | 8 | magic | `b"GLASSHM1"` |
//! | 8 | 4 | slots | number of slots |
//! | 12 | 4 | buffer | bytes of each request and each response buffer |
//!
//! A slot's control block, one field per cache line so the two sides never write a line the
//! other polls:
//!
//! | offset | size | field | written by | meaning |
//! |---:|---:|---|---|---|
//! | 0 | 4 | state | both | 0 free, 1 claimed by a client, 2 given back by the client |
//! | 4 | 4 | pid | client | the claiming process, so the server can free a dead client's slot |
//! | 64 | 8 | request sequence | client | bumped (release) after a request frame is written |
//! | 72 | 4 | request length | client | bytes of the request frame |
//! | 128 | 8 | response sequence | server | set to the request's sequence (release) when answered |
//! | 136 | 4 | response length | server | bytes of the response frame |
//!
//! The file may be longer than its slots need (a device that maps it, such as a virtual
//! machine's shared-memory PCI device, wants a power of two); the rest is unused.
//!
//! Each buffer holds one whole frame, as on a socket (length prefix, kind, body). The server
//! copies a request out of the shared buffer before decoding it, so a client that rewrites
//! its buffer meanwhile cannot change what was checked; every length read from the region is
//! checked against the buffer's size. A frame larger than the buffer is refused.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::MmapMut;

pub const MAGIC: [u8; 8] = *b"GLASSHM1";
const HEADER: usize = 64;
const CONTROL: usize = 192;

pub const FREE: u32 = 0;
pub const CLAIMED: u32 = 1;
pub const RELEASED: u32 = 2;

/// How long a claim waits for the server to free a released slot when no slot is free (the
/// server's polling thread naps when idle; a region whose server is gone frees none).
pub const RECYCLE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// A mapped region.
pub struct Region {
    /// Kept mapped for `base`'s sake; never read or written through a reference once shared,
    /// since another process writes it concurrently.
    _map: MmapMut,
    base: *mut u8,
    len: usize,
    slots: usize,
    buffer: usize,
    path: PathBuf,
}

// SAFETY: `base` points into the mapping `_map` owns, valid while the Region lives; every
// access through it is an atomic or a bounded byte copy that the sequence numbers order.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

/// Why a region cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    #[error("shared memory {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("shared memory {0}: not a Glass region (bad magic or size)")]
    NotARegion(PathBuf),
    #[error(
        "shared memory {path}: all {slots} slots are taken (one per connection; the server \
         makes more with `glass serve --shm-slots N`)"
    )]
    Full { path: PathBuf, slots: usize },
}

fn slot_bytes(buffer: usize) -> usize {
    CONTROL + 2 * buffer
}

impl Region {
    /// Creates the region at `path` with `slots` slots of `buffer`-byte buffers. A region left
    /// there by an earlier server is replaced; any other file is an error (nothing else is
    /// ever removed).
    pub fn create(path: &Path, slots: usize, buffer: usize) -> Result<Region, ShmError> {
        Region::create_padded(path, slots, buffer, false)
    }

    /// [`Region::create`], the file's size rounded up to a power of two when
    /// `power_of_two`: the size a virtual machine's shared-memory device (QEMU's
    /// `ivshmem-plain`, whose PCI BAR it becomes) requires.
    pub fn create_padded(
        path: &Path,
        slots: usize,
        buffer: usize,
        power_of_two: bool,
    ) -> Result<Region, ShmError> {
        let io = |source| ShmError::Io {
            path: path.to_path_buf(),
            source,
        };
        // A multiple of 64, so every slot's control block starts a cache line.
        let buffer = buffer.max(64).next_multiple_of(64);
        let len = HEADER + slots * slot_bytes(buffer);
        let len = if power_of_two {
            len.next_power_of_two()
        } else {
            len
        };
        if std::fs::symlink_metadata(path).is_ok() {
            match Region::open(path) {
                Ok(_) => std::fs::remove_file(path).map_err(io)?,
                Err(_) => {
                    return Err(ShmError::Io {
                        path: path.to_path_buf(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::AlreadyExists,
                            "exists and is not a Glass shared-memory region",
                        ),
                    })
                }
            }
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io)?;
        {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(io)?;
        }
        file.set_len(len as u64).map_err(io)?;
        // SAFETY: the file was just created by this process and is mapped whole; other
        // processes touch it only through the atomics and bounded copies below.
        let mut map = unsafe { MmapMut::map_mut(&file) }.map_err(io)?;
        map[0..8].copy_from_slice(&MAGIC);
        map[8..12].copy_from_slice(&(slots as u32).to_le_bytes());
        map[12..16].copy_from_slice(&(buffer as u32).to_le_bytes());
        Ok(Region::new(map, slots, buffer, path))
    }

    /// Maps an existing region.
    pub fn open(path: &Path) -> Result<Region, ShmError> {
        let io = |source| ShmError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file: File = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io)?;
        // SAFETY: as in `create`; the size is checked against the header before any slot is
        // touched.
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(io)?;
        let bad = || ShmError::NotARegion(path.to_path_buf());
        if map.len() < HEADER || map[0..8] != MAGIC {
            return Err(bad());
        }
        let slots = u32::from_le_bytes(map[8..12].try_into().map_err(|_| bad())?) as usize;
        let buffer = u32::from_le_bytes(map[12..16].try_into().map_err(|_| bad())?) as usize;
        if !buffer.is_multiple_of(64)
            || slots
                .checked_mul(slot_bytes(buffer))
                .and_then(|b| b.checked_add(HEADER))
                .is_none_or(|needed| needed > map.len())
        {
            return Err(bad());
        }
        Ok(Region::new(map, slots, buffer, path))
    }

    fn new(mut map: MmapMut, slots: usize, buffer: usize, path: &Path) -> Region {
        Region {
            base: map.as_mut_ptr(),
            len: map.len(),
            _map: map,
            slots,
            buffer,
            path: path.to_path_buf(),
        }
    }

    /// A pointer to `size` bytes at `offset` of the region (checked to be inside it).
    fn at(&self, offset: usize, size: usize) -> *mut u8 {
        assert!(
            offset.checked_add(size).is_some_and(|end| end <= self.len),
            "{offset}+{size} past the region's {} bytes",
            self.len
        );
        // SAFETY: in bounds, just checked.
        unsafe { self.base.add(offset) }
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Bytes of each buffer: the largest frame either side can send.
    pub fn buffer(&self) -> usize {
        self.buffer
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn base(&self, slot: usize) -> usize {
        assert!(slot < self.slots, "slot {slot} of {}", self.slots);
        HEADER + slot * slot_bytes(self.buffer)
    }

    fn u32_at(&self, offset: usize) -> &AtomicU32 {
        let p = self.at(offset, 4);
        assert_eq!(p as usize % 4, 0);
        // SAFETY: in bounds (`at`), 4-aligned (checked), and only ever accessed atomically by
        // either side, for as long as the region (and so the borrow) lives.
        unsafe { &*(p as *const AtomicU32) }
    }

    fn u64_at(&self, offset: usize) -> &AtomicU64 {
        let p = self.at(offset, 8);
        assert_eq!(p as usize % 8, 0);
        // SAFETY: as in `u32_at`, 8-aligned.
        unsafe { &*(p as *const AtomicU64) }
    }

    pub fn state(&self, slot: usize) -> &AtomicU32 {
        self.u32_at(self.base(slot))
    }

    pub fn pid(&self, slot: usize) -> &AtomicU32 {
        self.u32_at(self.base(slot) + 4)
    }

    pub fn request_seq(&self, slot: usize) -> &AtomicU64 {
        self.u64_at(self.base(slot) + 64)
    }

    pub fn request_len(&self, slot: usize) -> &AtomicU32 {
        self.u32_at(self.base(slot) + 72)
    }

    pub fn response_seq(&self, slot: usize) -> &AtomicU64 {
        self.u64_at(self.base(slot) + 128)
    }

    pub fn response_len(&self, slot: usize) -> &AtomicU32 {
        self.u32_at(self.base(slot) + 136)
    }

    /// The slot's request (or response) buffer: `buffer` bytes, only ever copied in or out
    /// (bounded), the copies ordered by the sequence numbers' acquire and release.
    fn buffer_ptr(&self, slot: usize, response: bool) -> *mut u8 {
        let offset = self.base(slot) + CONTROL + if response { self.buffer } else { 0 };
        self.at(offset, self.buffer)
    }

    /// Copies `bytes` into slot `slot`'s request (or response) buffer; false if they do not
    /// fit.
    pub fn write(&self, slot: usize, response: bool, bytes: &[u8]) -> bool {
        if bytes.len() > self.buffer {
            return false;
        }
        // SAFETY: `bytes.len() <= buffer`, so the copy stays inside the slot's buffer; the
        // reader does not read it until the sequence number published after this copy.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.buffer_ptr(slot, response),
                bytes.len(),
            )
        };
        true
    }

    /// Copies `len` bytes out of slot `slot`'s request (or response) buffer into `out`
    /// (replacing its contents); false if `len` is larger than the buffer.
    pub fn read(&self, slot: usize, response: bool, len: usize, out: &mut Vec<u8>) -> bool {
        if len > self.buffer {
            return false;
        }
        out.clear();
        out.reserve(len);
        // SAFETY: `len <= buffer`, so the copy stays inside the slot's buffer, and `out` has
        // room for `len` bytes, which the copy initialises before `set_len`.
        unsafe {
            std::ptr::copy_nonoverlapping(self.buffer_ptr(slot, response), out.as_mut_ptr(), len);
            out.set_len(len);
        }
        true
    }

    /// Claims a free slot for this process. A slot its client released is free again once the
    /// server has seen it (and aborted what it held open): with no slot free but some
    /// released, the claim waits for the server, up to [`RECYCLE_PATIENCE`].
    pub fn claim(&self) -> Result<usize, ShmError> {
        let started = std::time::Instant::now();
        loop {
            let mut released = false;
            for slot in 0..self.slots {
                let state = self.state(slot);
                if state
                    .compare_exchange(FREE, CLAIMED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    self.pid(slot).store(std::process::id(), Ordering::Release);
                    return Ok(slot);
                }
                released |= state.load(Ordering::Acquire) == RELEASED;
            }
            if !released || started.elapsed() >= RECYCLE_PATIENCE {
                return Err(ShmError::Full {
                    path: self.path.clone(),
                    slots: self.slots,
                });
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }
}

/// Whether process `pid` exists (a claimed slot's client may have died).
pub fn process_alive(pid: u32) -> bool {
    if pid == 0 {
        return true;
    }
    // SAFETY: kill with signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_round_trips_a_frame_between_two_mappings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("region");
        let server = Region::create(&path, 4, 100).unwrap();
        assert_eq!(server.buffer(), 128, "rounded up to a cache line");
        let client = Region::open(&path).unwrap();
        let slot = client.claim().unwrap();
        assert_eq!(server.state(slot).load(Ordering::Acquire), CLAIMED);
        assert_eq!(server.pid(slot).load(Ordering::Acquire), std::process::id());
        assert!(client.write(slot, false, b"hello"));
        client.request_len(slot).store(5, Ordering::Relaxed);
        client.request_seq(slot).store(1, Ordering::Release);
        assert_eq!(server.request_seq(slot).load(Ordering::Acquire), 1);
        let mut got = Vec::new();
        let len = server.request_len(slot).load(Ordering::Relaxed) as usize;
        assert!(server.read(slot, false, len, &mut got));
        assert_eq!(got, b"hello");
        // Lengths past the buffer are refused both ways.
        assert!(!client.write(slot, false, &[0; 129]));
        assert!(!server.read(slot, true, 129, &mut got));
    }

    #[test]
    fn a_claim_waits_for_the_server_to_free_a_released_slot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("region");
        let server = Region::create(&path, 2, 64).unwrap();
        let client = Region::open(&path).unwrap();
        let (a, _b) = (client.claim().unwrap(), client.claim().unwrap());
        client.state(a).store(RELEASED, Ordering::Release);
        // Nobody frees it: full, once the claim has waited its patience.
        let started = std::time::Instant::now();
        assert!(matches!(
            client.claim(),
            Err(ShmError::Full { slots: 2, .. })
        ));
        assert!(started.elapsed() >= RECYCLE_PATIENCE);
        // The server frees it while the claim waits: the claim gets it.
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                server.state(a).store(FREE, Ordering::Release);
            });
            assert_eq!(client.claim().unwrap(), a);
        });
    }

    #[test]
    fn every_slot_can_be_claimed_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("region");
        let _server = Region::create(&path, 2, 64).unwrap();
        let client = Region::open(&path).unwrap();
        let (a, b) = (client.claim().unwrap(), client.claim().unwrap());
        assert_ne!(a, b);
        assert!(matches!(
            client.claim(),
            Err(ShmError::Full { slots: 2, .. })
        ));
    }

    #[test]
    fn a_file_that_is_not_a_region_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junk");
        std::fs::write(&path, vec![7u8; 4096]).unwrap();
        assert!(matches!(Region::open(&path), Err(ShmError::NotARegion(_))));
        let short = dir.path().join("short");
        std::fs::write(&short, b"GLASSHM1").unwrap();
        assert!(matches!(Region::open(&short), Err(ShmError::NotARegion(_))));
    }

    #[test]
    fn a_padded_region_is_a_power_of_two_and_opens_as_its_slots_say() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("padded");
        let region = Region::create_padded(&path, 1, 1000, true).unwrap();
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(len.is_power_of_two() && len as usize >= HEADER + slot_bytes(1024));
        assert!(region.write(0, true, b"through the padding"));
        let other = Region::open(&path).unwrap();
        assert_eq!((other.slots(), other.buffer()), (1, 1024));
        let mut got = Vec::new();
        assert!(other.read(0, true, 19, &mut got));
        assert_eq!(got, b"through the padding");
        // Shorter than its slots say: refused.
        let cut = dir.path().join("cut");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&cut, &bytes[..HEADER + slot_bytes(1024) - 1]).unwrap();
        assert!(matches!(Region::open(&cut), Err(ShmError::NotARegion(_))));
    }

    #[test]
    fn creating_replaces_an_old_region_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("region");
        drop(Region::create(&path, 1, 64).unwrap());
        drop(Region::create(&path, 2, 64).unwrap());
        assert_eq!(Region::open(&path).unwrap().slots(), 2);
        let other = dir.path().join("precious");
        std::fs::write(&other, b"not ours").unwrap();
        assert!(Region::create(&other, 1, 64).is_err());
        assert_eq!(std::fs::read(&other).unwrap(), b"not ours");
    }

    #[test]
    fn a_dead_process_is_seen_as_dead() {
        assert!(process_alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!process_alive(pid));
    }
}
