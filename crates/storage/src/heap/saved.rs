//! The heap files' free-space maps as a checkpoint saves them, so that an open need not read
//! every heap page to rebuild them.
//!
//! A [`HeapFile`](super::HeapFile) keeps its free-space map in memory only. Rebuilt by a walk
//! of the page chain, it costs an open one read of every heap page of the database: most of
//! the page file (25,000 reads at TPC-C scale 2, 25 s cold for a database grown to 6.6 GB).
//! Each checkpoint therefore saves every heap file's map, with the checkpoint's begin LSN, in
//! the file [`FREE_SPACE_FILE`] beside the page file; an open whose recovery starts from that
//! checkpoint takes each saved map and re-reads only the heap pages the log may have changed
//! since: the checkpoint's dirty pages and every page a record after its begin names (the
//! analysis pass's dirty page table), and the pages added to the chain since, found by their
//! links from those. Anything else — no file, another checkpoint's, a damaged one, a table
//! the file does not name — and the open walks the chain as before.
//!
//! Why a page neither changed nor added since the begin has the free space saved: the map is
//! read after the checkpoint's begin is logged, and each page's entry is written under the
//! page's exclusive latch before the change is logged (at the latch's release), so every
//! change logged before the begin is in the map read after it; and the page file holds the
//! page as of its last change, or the checkpoint's dirty page table lists it (the table waits
//! for a page being changed while it is read). Two entries are not a page's room: a page
//! claimed for a thread's inserts reads as full in the map, and is read from its page
//! instead (so are pages whose entry is 0); a new page's entry is written before its link is
//! logged, so a page the map missed was linked by a record after the begin
//! (`HeapFile::add_page`).
//!
//! The file is written whole to a temporary file, synced, renamed over the last one, and the
//! directory synced, before the master record names the checkpoint: so that the open after a
//! power loss finds it too (two syncs a checkpoint, beside the page file's and the log's). A
//! file a crash cut or left behind anyway fails its checksum or names another checkpoint than
//! the master record's, and the open walks the chains instead.
//!
//! ```text
//!   "GLASSFS1" | checkpoint u64 | page size u32 | files u32
//!   per file:  first page u64 | pages u32 | pages × (page id's gap from the previous, LEB128;
//!              free bytes u16)
//!   CRC32 u32 of everything before                                (integers little-endian)
//! ```

use std::io::Write;
use std::path::Path;

use crate::page::PageId;

/// The file in a database directory that holds the saved maps.
pub const FREE_SPACE_FILE: &str = "freespace.map";

const MAGIC: &[u8; 8] = b"GLASSFS1";
const HEADER: usize = 8 + 8 + 4 + 4;
/// The fewest bytes a page's entry takes (a one-byte gap, two bytes of free space).
const MIN_ENTRY: usize = 3;

/// One heap file's saved map: its pages in ascending order with their free bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SavedHeap {
    /// The file's first page, which names it (the catalog keeps it).
    pub first: PageId,
    /// Every page of the chain, ascending, with its free bytes.
    pub pages: Vec<(PageId, u16)>,
}

/// Every heap file's saved map, as of one checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SavedFreeSpace {
    /// The begin LSN of the checkpoint the maps were read at.
    pub checkpoint: u64,
    pub page_size: u32,
    pub heaps: Vec<SavedHeap>,
}

impl SavedFreeSpace {
    pub fn encode(&self) -> Vec<u8> {
        let entries: usize = self.heaps.iter().map(|h| h.pages.len()).sum();
        let mut out = Vec::with_capacity(HEADER + 4 + self.heaps.len() * 12 + entries * 4);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.checkpoint.to_le_bytes());
        out.extend_from_slice(&self.page_size.to_le_bytes());
        out.extend_from_slice(&(self.heaps.len() as u32).to_le_bytes());
        for heap in &self.heaps {
            out.extend_from_slice(&heap.first.0.to_le_bytes());
            out.extend_from_slice(&(heap.pages.len() as u32).to_le_bytes());
            let mut previous = 0u64;
            for &(page, free) in &heap.pages {
                write_gap(&mut out, page.0.wrapping_sub(previous));
                out.extend_from_slice(&free.to_le_bytes());
                previous = page.0;
            }
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Reads what [`SavedFreeSpace::encode`] wrote; an error names what does not fit. A map
    /// accepted here has its pages strictly ascending, no free count above the page size, and
    /// no two heaps of one first page.
    pub fn decode(bytes: &[u8]) -> Result<SavedFreeSpace, String> {
        if bytes.len() < HEADER + 4 {
            return Err(format!(
                "{} bytes, fewer than a header and a checksum",
                bytes.len()
            ));
        }
        if &bytes[..8] != MAGIC {
            return Err("no free-space map's magic".into());
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().unwrap()) {
            return Err("checksum does not match".into());
        }
        let mut r = Reader { bytes: body, at: 8 };
        let checkpoint = r.u64()?;
        let page_size = r.u32()?;
        if !(512..=65536).contains(&page_size) {
            return Err(format!("page size {page_size}"));
        }
        let count = r.u32()? as usize;
        if count > r.left() / 12 {
            return Err(format!("{count} heaps in {} bytes", r.left()));
        }
        let mut heaps: Vec<SavedHeap> = Vec::with_capacity(count);
        for _ in 0..count {
            let first = PageId(r.u64()?);
            if heaps.iter().any(|h| h.first == first) {
                return Err(format!("heap of first page {first} saved twice"));
            }
            let n = r.u32()? as usize;
            if n > r.left() / MIN_ENTRY {
                return Err(format!("{n} pages of heap {first} in {} bytes", r.left()));
            }
            let mut pages = Vec::with_capacity(n);
            let mut previous: Option<u64> = None;
            for _ in 0..n {
                let gap = r.gap()?;
                let page = match previous {
                    None => gap,
                    Some(p) if gap == 0 => {
                        return Err(format!("page {p} of heap {first} saved twice"))
                    }
                    Some(p) => p
                        .checked_add(gap)
                        .ok_or_else(|| format!("page id past {p} overflows"))?,
                };
                let free = r.u16()?;
                if u32::from(free) > page_size {
                    return Err(format!(
                        "page {page}: {free} free bytes in a {page_size}-byte page"
                    ));
                }
                pages.push((PageId(page), free));
                previous = Some(page);
            }
            heaps.push(SavedHeap { first, pages });
        }
        if r.left() != 0 {
            return Err(format!("{} bytes after the last heap", r.left()));
        }
        Ok(SavedFreeSpace {
            checkpoint,
            page_size,
            heaps,
        })
    }

    /// Writes the maps to `path` durably: through a temporary file, synced, renamed over it,
    /// and the directory synced (see the module docs).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&self.encode())?;
        f.sync_data()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => crate::file::sync_directory(dir),
            _ => Ok(()),
        }
    }

    /// The maps saved in `path`: `Ok(None)` when there is no such file, an error naming what is
    /// wrong with one that cannot be used.
    pub fn read(path: &Path) -> Result<Option<SavedFreeSpace>, String> {
        match std::fs::read(path) {
            Ok(bytes) => SavedFreeSpace::decode(&bytes).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("reading {}: {e}", path.display())),
        }
    }

    /// Removes the file at `path`, if any: a new page file's maps are not an old one's.
    pub fn forget(path: &Path) -> std::io::Result<()> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// The saved map of the heap whose chain starts at `first`.
    pub fn heap(&self, first: PageId) -> Option<&SavedHeap> {
        self.heaps.iter().find(|h| h.first == first)
    }
}

fn write_gap(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let b = self
            .bytes
            .get(self.at..self.at + N)
            .ok_or_else(|| format!("cut short at byte {}", self.at))?;
        self.at += N;
        Ok(b.try_into().unwrap())
    }

    fn u16(&mut self) -> Result<u16, String> {
        self.take().map(u16::from_le_bytes)
    }

    fn u32(&mut self) -> Result<u32, String> {
        self.take().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64, String> {
        self.take().map(u64::from_le_bytes)
    }

    /// A LEB128 gap: at most ten bytes, the tenth holding only the top bit of 64.
    fn gap(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for i in 0..10 {
            let [b] = self.take()?;
            if i == 9 && b > 1 {
                return Err(format!("page id gap past 64 bits at byte {}", self.at - 1));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!(
            "page id gap longer than ten bytes at byte {}",
            self.at
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SavedFreeSpace {
        SavedFreeSpace {
            checkpoint: 0x1234_5678,
            page_size: 8192,
            heaps: vec![
                SavedHeap {
                    first: PageId(3),
                    pages: vec![(PageId(3), 0), (PageId(4), 8000), (PageId(900), 17)],
                },
                SavedHeap {
                    first: PageId(5),
                    pages: vec![(PageId(5), 12), (PageId(u64::MAX >> 16), 8192)],
                },
                SavedHeap {
                    first: PageId(7),
                    pages: Vec::new(),
                },
            ],
        }
    }

    #[test]
    fn maps_round_trip_through_their_bytes() {
        let saved = sample();
        let bytes = saved.encode();
        assert_eq!(SavedFreeSpace::decode(&bytes).unwrap(), saved);
        // Gaps of one page take one byte each, with two of free space.
        let dense = SavedFreeSpace {
            checkpoint: 1,
            page_size: 8192,
            heaps: vec![SavedHeap {
                first: PageId(1),
                pages: (1..=1000).map(|p| (PageId(p), 100)).collect(),
            }],
        };
        assert_eq!(dense.encode().len(), HEADER + 12 + 3 * 1000 + 4);
        assert_eq!(SavedFreeSpace::decode(&dense.encode()).unwrap(), dense);
    }

    #[test]
    fn a_damaged_or_cut_map_is_refused_with_its_reason() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(
                SavedFreeSpace::decode(&bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut flipped = bytes.clone();
        flipped[30] ^= 1;
        assert_eq!(
            SavedFreeSpace::decode(&flipped).unwrap_err(),
            "checksum does not match"
        );
        let mut magic = bytes;
        magic[0] = b'X';
        assert_eq!(
            SavedFreeSpace::decode(&magic).unwrap_err(),
            "no free-space map's magic"
        );
    }

    #[test]
    fn a_map_that_breaks_its_own_rules_is_refused_even_with_a_good_checksum() {
        let refused = |saved: SavedFreeSpace| SavedFreeSpace::decode(&saved.encode()).unwrap_err();
        let mut twice = sample();
        twice.heaps[0].pages[1].0 = PageId(3);
        assert!(refused(twice).contains("saved twice"));
        let mut roomy = sample();
        roomy.heaps[0].pages[1].1 = 8193;
        assert!(refused(roomy).contains("8193 free bytes"));
        let mut same_heap = sample();
        same_heap.heaps[1].first = PageId(3);
        assert!(refused(same_heap).contains("heap of first page"));
        let mut odd_size = sample();
        odd_size.page_size = 7;
        assert!(refused(odd_size).contains("page size 7"));
    }

    #[test]
    fn a_map_is_written_read_and_forgotten_by_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FREE_SPACE_FILE);
        assert_eq!(SavedFreeSpace::read(&path).unwrap(), None);
        sample().write(&path).unwrap();
        assert_eq!(SavedFreeSpace::read(&path).unwrap(), Some(sample()));
        assert!(!path.with_extension("tmp").exists());
        std::fs::write(&path, b"GLASSFS1 and nothing more").unwrap();
        assert!(SavedFreeSpace::read(&path).is_err());
        SavedFreeSpace::forget(&path).unwrap();
        SavedFreeSpace::forget(&path).unwrap();
        assert_eq!(SavedFreeSpace::read(&path).unwrap(), None);
    }
}
