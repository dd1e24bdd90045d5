//! The memory the pool's frames hold their page images in: one anonymous mapping for them
//! all, in the kernel's small pages or, asked for, in transparent huge pages.
//!
//! Each frame's image had been a heap allocation of its own (`vec![0; page_size]`), so an
//! 8 KiB image straddled three 4 KiB pages of memory (the allocator's header before it), and
//! a pool's memory went back to the allocator, not to the kernel, when it was dropped. In one
//! mapping image *f* lies at *f × page size*, page-aligned (some 30% fewer page faults in a
//! TPC-C run), and dropping the pool unmaps it.
//!
//! [`FrameMemory::Huge`] aligns the mapping to 2 MiB and advises `MADV_HUGEPAGE`: a fault per
//! 256 images instead of two per image, and a TLB entry per 2 MiB. Measured, it is not the
//! default: TPC-C ran no faster with it (16 threads on 16 cores, 1 and 2 threads on 2), and
//! loading took longer, the kernel zeroing 2 MiB at each fault (docs/performance.md, "The
//! pool's memory in one mapping, and huge pages"). Huge pages are a request, not a promise:
//! where the kernel has them off (`never` in `/sys/kernel/mm/transparent_hugepage/enabled`)
//! or finds no 2 MiB of free contiguous memory, it backs the mapping with small pages.

use std::ptr::NonNull;

use crate::error::{StorageError, StorageResult};

/// Which pages the kernel is asked to back the frames' images with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FrameMemory {
    /// The kernel's small pages only (`MADV_NOHUGEPAGE`).
    #[default]
    Small,
    /// Transparent huge pages (`madvise(MADV_HUGEPAGE)` on a 2 MiB-aligned mapping).
    Huge,
}

/// The alignment that lets the kernel map the images with 2 MiB pages from the first byte.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const HUGE_PAGE: usize = 2 << 20;

/// One anonymous mapping holding `frames` page images of `page_size` bytes each, zeroed;
/// unmapped when dropped.
pub(crate) struct FrameImages {
    base: NonNull<u8>,
    len: usize,
    page_size: usize,
}

// SAFETY: the mapping is plain memory owned by this value; who may touch which image is
// decided by the frames' latches (see `PageBuf`).
unsafe impl Send for FrameImages {}
// SAFETY: as above; `FrameImages` itself only hands out addresses.
unsafe impl Sync for FrameImages {}

impl FrameImages {
    /// Maps memory for `frames` images of `page_size` bytes. An error (not an abort) when
    /// the machine will not give that much.
    pub(crate) fn new(
        frames: usize,
        page_size: usize,
        memory: FrameMemory,
    ) -> StorageResult<FrameImages> {
        let mapped = frames
            .checked_mul(page_size)
            .map(|len| len.max(1))
            .ok_or_else(|| std::io::Error::other("more bytes than an address holds"))
            .and_then(|len| Ok((map(len, memory)?, len)));
        let (base, len) = mapped.map_err(|e| {
            StorageError::io(
                "allocating the buffer pool's frames",
                std::io::Error::new(
                    std::io::ErrorKind::OutOfMemory,
                    format!("no memory for {frames} frames of {page_size} bytes: {e}"),
                ),
            )
        })?;
        Ok(FrameImages {
            base,
            len,
            page_size,
        })
    }

    /// Where image `i` starts.
    #[inline(always)]
    pub(crate) fn address(&self, i: usize) -> usize {
        self.base.as_ptr() as usize + i * self.page_size
    }

    /// Image `i`, for the frame that owns it. Called once per image, when the pool is built:
    /// two `PageBuf`s of one image would let two frames write it.
    pub(crate) fn image(&self, i: usize) -> PageBuf {
        assert!(
            (i + 1) * self.page_size <= self.len,
            "image {i} is past the mapping"
        );
        PageBuf {
            // SAFETY: inside the mapping, which is not null.
            ptr: unsafe { NonNull::new_unchecked(self.base.as_ptr().add(i * self.page_size)) },
            len: self.page_size,
        }
    }
}

impl Drop for FrameImages {
    fn drop(&mut self) {
        // SAFETY: made by `map(self.len, ..)` in `new`, given back once; the frames whose
        // `PageBuf`s point into it are dropped with the pool before its images (field order in
        // `BufferPool`).
        unsafe { unmap(self.base, self.len) };
    }
}

/// `len` zeroed bytes in a private anonymous mapping, aligned to 2 MiB and advised
/// `MADV_HUGEPAGE` for [`FrameMemory::Huge`], advised `MADV_NOHUGEPAGE` otherwise.
#[cfg(target_os = "linux")]
fn map(len: usize, memory: FrameMemory) -> std::io::Result<NonNull<u8>> {
    // Room to slide the start to a 2 MiB boundary; the slack is unmapped again below.
    let slack = match memory {
        FrameMemory::Huge if len >= HUGE_PAGE => HUGE_PAGE,
        _ => 0,
    };
    let mapped = len
        .checked_add(slack)
        .ok_or_else(|| std::io::Error::other("too large"))?;
    // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            mapped,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    let start = raw as usize;
    let base = if slack == 0 {
        start
    } else {
        let aligned = start.next_multiple_of(HUGE_PAGE);
        let tail = start + mapped - (aligned + len);
        // SAFETY: both ranges lie inside the mapping just made and outside the part kept.
        unsafe {
            if aligned > start {
                libc::munmap(raw, aligned - start);
            }
            if tail > 0 {
                libc::munmap((aligned + len) as *mut libc::c_void, tail);
            }
        }
        aligned
    };
    let advice = match memory {
        FrameMemory::Huge => libc::MADV_HUGEPAGE,
        FrameMemory::Small => libc::MADV_NOHUGEPAGE,
    };
    // Advice only: a kernel without transparent huge pages refuses it (EINVAL), and the
    // mapping then works with small pages, as it would anyway.
    // SAFETY: the range is the mapping kept above.
    unsafe { libc::madvise(base as *mut libc::c_void, len, advice) };
    // SAFETY: mmap succeeded, so `base` is not null.
    Ok(unsafe { NonNull::new_unchecked(base as *mut u8) })
}

/// Gives back what [`map`] made.
///
/// # Safety
/// `base` and `len` are a `map(len, ..)`'s, given back once, with nothing pointing into it
/// used again.
#[cfg(target_os = "linux")]
unsafe fn unmap(base: NonNull<u8>, len: usize) {
    // SAFETY: by the caller's contract.
    unsafe { libc::munmap(base.as_ptr().cast(), len) };
}

/// Where there is no `mmap` (a WebAssembly build of the crates a sandboxed procedure links):
/// zeroed memory from the allocator, aligned to 4 KiB; no huge pages.
#[cfg(not(target_os = "linux"))]
fn map(len: usize, _memory: FrameMemory) -> std::io::Result<NonNull<u8>> {
    let layout = std::alloc::Layout::from_size_align(len, 4096).map_err(std::io::Error::other)?;
    // SAFETY: `len` is at least 1 (see `FrameImages::new`).
    NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
        .ok_or_else(|| std::io::Error::other("the allocator refused"))
}

/// Gives back what [`map`] made.
///
/// # Safety
/// As for the Linux `unmap`.
#[cfg(not(target_os = "linux"))]
unsafe fn unmap(base: NonNull<u8>, len: usize) {
    let layout = std::alloc::Layout::from_size_align(len, 4096).expect("checked by map");
    // SAFETY: by the caller's contract, allocated by `map` with this layout.
    unsafe { std::alloc::dealloc(base.as_ptr(), layout) };
}

/// One frame's page image inside [`FrameImages`]: `page_size` bytes that only this frame
/// reads and writes, through its latch.
pub(crate) struct PageBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a `PageBuf` is the only handle on its bytes (`FrameImages::image` makes one per
// image); shared and exclusive access follow Rust's rules through `&` and `&mut`, which the
// frame's latch hands out.
unsafe impl Send for PageBuf {}
// SAFETY: as above.
unsafe impl Sync for PageBuf {}

impl std::ops::Deref for PageBuf {
    type Target = [u8];

    #[inline(always)]
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` bytes of live, initialized (zero-filled) memory owned by this handle.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for PageBuf {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_zeroed_separate_and_writable() {
        for memory in [FrameMemory::Huge, FrameMemory::Small] {
            // Over 2 MiB, so that the huge mapping is aligned and trimmed.
            let images = FrameImages::new(300, 8192, memory).unwrap();
            let mut bufs: Vec<PageBuf> = (0..300).map(|i| images.image(i)).collect();
            assert!(bufs
                .iter()
                .all(|b| b.len() == 8192 && b.iter().all(|&x| x == 0)));
            for (i, b) in bufs.iter_mut().enumerate() {
                b.fill(i as u8);
            }
            for (i, b) in bufs.iter().enumerate() {
                assert!(b.iter().all(|&x| x == i as u8), "image {i} was overwritten");
                assert_eq!(b.as_ptr() as usize, images.address(i));
            }
            if memory == FrameMemory::Huge {
                assert_eq!(images.address(0) % HUGE_PAGE, 0);
            }
        }
    }

    #[test]
    fn an_impossible_pool_is_an_error() {
        let Err(e) = FrameImages::new(usize::MAX / 2, 8192, FrameMemory::Huge) else {
            panic!("mapped an impossible pool");
        };
        assert!(e.to_string().contains("frames"), "{e}");
    }
}
