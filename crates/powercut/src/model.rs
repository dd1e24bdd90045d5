//! The file system's state, and what a power cut does to it.
//!
//! Every file and directory has two states: the one its users see, and the one that would
//! survive a power cut. A write changes the first; `fsync` (or `fdatasync`) of a file makes
//! its data and size durable, `fsync` of a directory makes its entries durable (a file created,
//! renamed or unlinked is durable in its directory only once the directory is synced, as POSIX
//! promises and no more). A [`Model::cut`] puts every file and directory back to its durable
//! state, except what the page cache may already have written back on its own: each unsynced
//! block, each file's size and each directory's entries survive with probability `keep`
//! (0: everything unsynced is lost; a fraction: write-back in any order). Files no directory
//! durably names are then gone.
//!
//! A file's data is kept in 4 KiB blocks (absent blocks read as zeros); the first change to a
//! block since the file's last sync saves the block's durable content beside it, so a sync
//! costs one pass over the blocks changed since the last, not a copy of the file.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};

use rand::Rng;
use serde::Serialize;

/// The unit of data a power cut keeps or loses.
pub const BLOCK: u64 = 4096;
/// The root directory's inode number (FUSE's).
pub const ROOT: u64 = 1;

/// A failed operation's `errno`.
pub type Errno = i32;

type Block = Box<[u8]>;

fn zero_block() -> Block {
    vec![0u8; BLOCK as usize].into_boxed_slice()
}

#[derive(Default)]
struct File {
    blocks: HashMap<u64, Block>,
    size: u64,
    durable_size: u64,
    /// Each block changed since the last sync, with its durable content (`None`: none, zeros).
    undo: HashMap<u64, Option<Block>>,
}

impl File {
    /// Saves block `b`'s durable content before its first change since the last sync.
    fn save(&mut self, b: u64) {
        if !self.undo.contains_key(&b) {
            let old = self.blocks.get(&b).cloned();
            self.undo.insert(b, old);
        }
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        let mut pos = offset;
        while pos < end {
            let b = pos / BLOCK;
            let at = (pos % BLOCK) as usize;
            let n = (BLOCK as usize - at).min((end - pos) as usize);
            self.save(b);
            let from = (pos - offset) as usize;
            self.blocks.entry(b).or_insert_with(zero_block)[at..at + n]
                .copy_from_slice(&data[from..from + n]);
            pos += n as u64;
        }
        self.size = self.size.max(end);
    }

    fn read(&self, offset: u64, len: u64) -> Vec<u8> {
        let end = (offset.saturating_add(len)).min(self.size);
        let mut out = Vec::with_capacity(end.saturating_sub(offset) as usize);
        let mut pos = offset;
        while pos < end {
            let b = pos / BLOCK;
            let at = (pos % BLOCK) as usize;
            let n = (BLOCK as usize - at).min((end - pos) as usize);
            match self.blocks.get(&b) {
                Some(block) => out.extend_from_slice(&block[at..at + n]),
                None => out.resize(out.len() + n, 0),
            }
            pos += n as u64;
        }
        out
    }

    /// Zeros `offset..end` (blocks wholly inside it are dropped), saving what it changes.
    fn zero(&mut self, offset: u64, end: u64) {
        let mut pos = offset;
        while pos < end {
            let b = pos / BLOCK;
            let at = (pos % BLOCK) as usize;
            let n = (BLOCK as usize - at).min((end - pos) as usize);
            if self.blocks.contains_key(&b) {
                self.save(b);
                if n == BLOCK as usize {
                    self.blocks.remove(&b);
                } else if let Some(block) = self.blocks.get_mut(&b) {
                    block[at..at + n].fill(0);
                }
            }
            pos += n as u64;
        }
    }

    /// Every byte at or past the size reads as zero, whatever a cut left there.
    fn blocks_past(&self, size: u64) -> Vec<u64> {
        let first_whole = size.div_ceil(BLOCK);
        let mut past: Vec<u64> = self
            .blocks
            .keys()
            .copied()
            .filter(|&b| b >= first_whole)
            .collect();
        past.sort_unstable();
        past
    }

    fn set_len(&mut self, len: u64) {
        if len < self.size {
            for b in self.blocks_past(len) {
                self.save(b);
                self.blocks.remove(&b);
            }
            if !len.is_multiple_of(BLOCK) {
                self.zero(len, len.div_ceil(BLOCK) * BLOCK);
            }
        }
        self.size = len;
    }

    fn sync(&mut self) {
        self.undo.clear();
        self.durable_size = self.size;
    }
}

#[derive(Default)]
struct Dir {
    entries: BTreeMap<OsString, u64>,
    durable: BTreeMap<OsString, u64>,
}

enum Node {
    File(File),
    Dir(Dir),
}

/// What kind of node an inode is, and its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub dir: bool,
    pub size: u64,
}

/// What the file system was asked to do since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub writes: u64,
    pub bytes_written: u64,
    pub file_syncs: u64,
    pub dir_syncs: u64,
    pub cuts: u64,
}

/// What one power cut did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Cut {
    /// Blocks written since their file's last sync and put back to their durable content.
    pub blocks_lost: u64,
    /// Blocks written since their file's last sync that the cut kept (written back before it).
    pub blocks_kept: u64,
    /// Files whose size went back to its durable value.
    pub sizes_reverted: u64,
    /// Directories whose entries went back to their durable ones.
    pub dirs_reverted: u64,
    /// Files and directories that were there before the cut and are not after it (no synced
    /// directory named them).
    pub files_lost: u64,
}

/// The whole file system: inodes, the root among them.
pub struct Model {
    nodes: HashMap<u64, Node>,
    next: u64,
    counts: Counts,
}

impl Default for Model {
    fn default() -> Self {
        Self::new()
    }
}

impl Model {
    /// An empty file system: its root directory, durable.
    pub fn new() -> Model {
        let mut nodes = HashMap::new();
        nodes.insert(ROOT, Node::Dir(Dir::default()));
        Model {
            nodes,
            next: ROOT + 1,
            counts: Counts::default(),
        }
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    fn dir(&self, ino: u64) -> Result<&Dir, Errno> {
        match self.nodes.get(&ino) {
            Some(Node::Dir(d)) => Ok(d),
            Some(Node::File(_)) => Err(libc::ENOTDIR),
            None => Err(libc::ENOENT),
        }
    }

    fn dir_mut(&mut self, ino: u64) -> Result<&mut Dir, Errno> {
        match self.nodes.get_mut(&ino) {
            Some(Node::Dir(d)) => Ok(d),
            Some(Node::File(_)) => Err(libc::ENOTDIR),
            None => Err(libc::ENOENT),
        }
    }

    fn file(&self, ino: u64) -> Result<&File, Errno> {
        match self.nodes.get(&ino) {
            Some(Node::File(f)) => Ok(f),
            Some(Node::Dir(_)) => Err(libc::EISDIR),
            None => Err(libc::ENOENT),
        }
    }

    fn file_mut(&mut self, ino: u64) -> Result<&mut File, Errno> {
        match self.nodes.get_mut(&ino) {
            Some(Node::File(f)) => Ok(f),
            Some(Node::Dir(_)) => Err(libc::EISDIR),
            None => Err(libc::ENOENT),
        }
    }

    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<u64, Errno> {
        self.dir(parent)?
            .entries
            .get(name)
            .copied()
            .ok_or(libc::ENOENT)
    }

    pub fn attr(&self, ino: u64) -> Result<Attr, Errno> {
        match self.nodes.get(&ino) {
            Some(Node::File(f)) => Ok(Attr {
                dir: false,
                size: f.size,
            }),
            Some(Node::Dir(d)) => Ok(Attr {
                dir: true,
                size: d.entries.len() as u64,
            }),
            None => Err(libc::ENOENT),
        }
    }

    /// Creates an empty file or directory `name` in `parent`; `EEXIST` if the name is taken.
    pub fn create(&mut self, parent: u64, name: &OsStr, dir: bool) -> Result<u64, Errno> {
        if self.dir(parent)?.entries.contains_key(name) {
            return Err(libc::EEXIST);
        }
        let ino = self.next;
        self.next += 1;
        self.nodes.insert(
            ino,
            if dir {
                Node::Dir(Dir::default())
            } else {
                Node::File(File::default())
            },
        );
        self.dir_mut(parent)?.entries.insert(name.to_owned(), ino);
        Ok(ino)
    }

    /// Removes `name` from `parent` (a file, or with `dir` an empty directory). The node
    /// lives on for whoever has it open, and for the directory's durable entries until a sync.
    pub fn remove(&mut self, parent: u64, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let ino = self.lookup(parent, name)?;
        match (self.nodes.get(&ino), dir) {
            (Some(Node::Dir(_)), false) => return Err(libc::EISDIR),
            (Some(Node::File(_)), true) => return Err(libc::ENOTDIR),
            (Some(Node::Dir(d)), true) if !d.entries.is_empty() => return Err(libc::ENOTEMPTY),
            _ => {}
        }
        self.dir_mut(parent)?.entries.remove(name);
        Ok(())
    }

    /// Renames `parent/name` to `new_parent/new_name`, replacing a file or an empty directory
    /// there unless `no_replace`.
    pub fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        no_replace: bool,
    ) -> Result<(), Errno> {
        let ino = self.lookup(parent, name)?;
        self.dir(new_parent)?;
        if let Some(&there) = self.dir(new_parent)?.entries.get(new_name) {
            if there == ino {
                return Ok(());
            }
            if no_replace {
                return Err(libc::EEXIST);
            }
            match (self.nodes.get(&ino), self.nodes.get(&there)) {
                (Some(Node::File(_)), Some(Node::Dir(_))) => return Err(libc::EISDIR),
                (Some(Node::Dir(_)), Some(Node::File(_))) => return Err(libc::ENOTDIR),
                (_, Some(Node::Dir(d))) if !d.entries.is_empty() => return Err(libc::ENOTEMPTY),
                _ => {}
            }
        }
        self.dir_mut(parent)?.entries.remove(name);
        self.dir_mut(new_parent)?
            .entries
            .insert(new_name.to_owned(), ino);
        Ok(())
    }

    /// A directory's entries, in name order: name, inode, whether a directory.
    pub fn entries(&self, ino: u64) -> Result<Vec<(OsString, u64, bool)>, Errno> {
        Ok(self
            .dir(ino)?
            .entries
            .iter()
            .map(|(name, &i)| {
                (
                    name.clone(),
                    i,
                    matches!(self.nodes.get(&i), Some(Node::Dir(_))),
                )
            })
            .collect())
    }

    pub fn read(&self, ino: u64, offset: u64, len: u64) -> Result<Vec<u8>, Errno> {
        Ok(self.file(ino)?.read(offset, len))
    }

    pub fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> Result<(), Errno> {
        self.file_mut(ino)?.write(offset, data);
        self.counts.writes += 1;
        self.counts.bytes_written += data.len() as u64;
        Ok(())
    }

    pub fn set_len(&mut self, ino: u64, len: u64) -> Result<(), Errno> {
        self.file_mut(ino)?.set_len(len);
        Ok(())
    }

    /// `fallocate`: `PUNCH_HOLE | KEEP_SIZE` zeros the range; plain allocation (mode 0, or
    /// `KEEP_SIZE` alone) only extends the size where asked. Anything else: `EOPNOTSUPP`.
    pub fn allocate(&mut self, ino: u64, offset: u64, len: u64, mode: i32) -> Result<(), Errno> {
        let file = self.file_mut(ino)?;
        let end = offset.checked_add(len).ok_or(libc::EFBIG)?;
        if mode == libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE {
            file.zero(offset, end.min(file.size));
            Ok(())
        } else if mode == 0 {
            file.size = file.size.max(end);
            Ok(())
        } else if mode == libc::FALLOC_FL_KEEP_SIZE {
            Ok(())
        } else {
            Err(libc::EOPNOTSUPP)
        }
    }

    /// `fsync`: a file's data and size, or a directory's entries, become durable.
    pub fn sync(&mut self, ino: u64) -> Result<(), Errno> {
        match self.nodes.get_mut(&ino) {
            Some(Node::File(f)) => {
                f.sync();
                self.counts.file_syncs += 1;
            }
            Some(Node::Dir(d)) => {
                d.durable = d.entries.clone();
                self.counts.dir_syncs += 1;
            }
            None => return Err(libc::ENOENT),
        }
        Ok(())
    }

    /// Bytes of data held (blocks, not sizes), for `statfs`.
    pub fn used_bytes(&self) -> u64 {
        self.nodes
            .values()
            .map(|n| match n {
                Node::File(f) => (f.blocks.len() + f.undo.len()) as u64 * BLOCK,
                Node::Dir(_) => 0,
            })
            .sum()
    }

    /// The power goes off: every file and directory goes back to its durable state but for
    /// what the page cache wrote back by itself (each unsynced block, size and directory kept
    /// with probability `keep`); nodes no durable entry reaches are dropped. Afterwards
    /// everything is durable.
    pub fn cut(&mut self, keep: f64, rng: &mut impl Rng) -> Cut {
        let keep = keep.clamp(0.0, 1.0);
        let before = self.reachable();
        let kept = |rng: &mut dyn rand::RngCore| keep > 0.0 && rng.gen_bool(keep);
        let mut cut = Cut::default();
        let mut inos: Vec<u64> = self.nodes.keys().copied().collect();
        inos.sort_unstable();
        for ino in &inos {
            match self.nodes.get_mut(ino) {
                Some(Node::File(f)) => {
                    let mut changed: Vec<(u64, Option<Block>)> = f.undo.drain().collect();
                    changed.sort_unstable_by_key(|(b, _)| *b);
                    for (b, old) in changed {
                        if kept(rng) {
                            cut.blocks_kept += 1;
                            continue;
                        }
                        cut.blocks_lost += 1;
                        match old {
                            Some(data) => {
                                f.blocks.insert(b, data);
                            }
                            None => {
                                f.blocks.remove(&b);
                            }
                        }
                    }
                    if f.size != f.durable_size && !kept(rng) {
                        f.size = f.durable_size;
                        cut.sizes_reverted += 1;
                    }
                    // Bytes past the size read as zeros, whatever was kept there.
                    let size = f.size;
                    for b in f.blocks_past(size) {
                        f.blocks.remove(&b);
                    }
                    if !size.is_multiple_of(BLOCK) {
                        if let Some(block) = f.blocks.get_mut(&(size / BLOCK)) {
                            block[(size % BLOCK) as usize..].fill(0);
                        }
                    }
                    f.sync();
                }
                Some(Node::Dir(d)) if d.entries != d.durable => {
                    if kept(rng) {
                        d.durable = d.entries.clone();
                    } else {
                        d.entries = d.durable.clone();
                        cut.dirs_reverted += 1;
                    }
                }
                _ => {}
            }
        }
        // What the root's durable tree no longer reaches is gone (unlinked files kept only
        // by open handles among it).
        let after = self.reachable();
        cut.files_lost = before.difference(&after).count() as u64;
        self.nodes.retain(|ino, _| after.contains(ino));
        self.counts.cuts += 1;
        cut
    }

    /// The inodes the root's entries reach.
    fn reachable(&self) -> std::collections::HashSet<u64> {
        let mut reached = std::collections::HashSet::from([ROOT]);
        let mut stack = vec![ROOT];
        while let Some(ino) = stack.pop() {
            if let Some(Node::Dir(d)) = self.nodes.get(&ino) {
                for &child in d.entries.values() {
                    if reached.insert(child) {
                        stack.push(child);
                    }
                }
            }
        }
        reached
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn name(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    fn rng() -> SmallRng {
        SmallRng::seed_from_u64(7)
    }

    #[test]
    fn a_cut_keeps_what_was_synced_and_loses_what_was_not() {
        let mut m = Model::new();
        let f = m.create(ROOT, name("f"), false).unwrap();
        m.sync(ROOT).unwrap();
        m.write(f, 0, &[1; 6000]).unwrap();
        m.sync(f).unwrap();
        m.write(f, 100, &[2; 10]).unwrap(); // into a durable block
        m.write(f, 6000, &[3; 9000]).unwrap(); // past the durable size
        assert_eq!(m.attr(f).unwrap().size, 15_000);
        let cut = m.cut(0.0, &mut rng());
        assert_eq!(m.attr(f).unwrap().size, 6000);
        assert_eq!(m.read(f, 0, 20_000).unwrap(), vec![1; 6000]);
        assert_eq!(cut.sizes_reverted, 1);
        assert_eq!(cut.blocks_kept, 0);
        // Blocks 0 (the overwrite), 1 (shared by both writes) and 2, 3 (new): four changed.
        assert_eq!(cut.blocks_lost, 4);
        // Afterwards everything is durable: a second cut changes nothing.
        assert_eq!(m.cut(0.0, &mut rng()), Cut::default());
    }

    #[test]
    fn a_file_not_named_durably_by_its_directory_is_gone_though_its_data_was_synced() {
        let mut m = Model::new();
        let d = m.create(ROOT, name("db"), true).unwrap();
        m.sync(ROOT).unwrap();
        let a = m.create(d, name("a"), false).unwrap();
        m.write(a, 0, b"synced").unwrap();
        m.sync(a).unwrap();
        let cut = m.cut(0.0, &mut rng());
        assert_eq!(m.lookup(d, name("a")), Err(libc::ENOENT));
        assert_eq!(cut.dirs_reverted, 1);
        assert_eq!(cut.files_lost, 1);
        // With the directory synced too, it stays.
        let a = m.create(d, name("a"), false).unwrap();
        m.write(a, 0, b"synced").unwrap();
        m.sync(a).unwrap();
        m.sync(d).unwrap();
        m.cut(0.0, &mut rng());
        let a = m.lookup(d, name("a")).unwrap();
        assert_eq!(m.read(a, 0, 100).unwrap(), b"synced");
    }

    #[test]
    fn a_rename_not_synced_is_undone_and_the_replaced_file_comes_back() {
        let mut m = Model::new();
        let old = m.create(ROOT, name("master"), false).unwrap();
        m.write(old, 0, b"old").unwrap();
        m.sync(old).unwrap();
        let new = m.create(ROOT, name("master.tmp"), false).unwrap();
        m.write(new, 0, b"new").unwrap();
        m.sync(new).unwrap();
        m.sync(ROOT).unwrap();
        m.rename(ROOT, name("master.tmp"), ROOT, name("master"), false)
            .unwrap();
        assert_eq!(
            m.read(m.lookup(ROOT, name("master")).unwrap(), 0, 9)
                .unwrap(),
            b"new"
        );
        m.cut(0.0, &mut rng());
        let master = m.lookup(ROOT, name("master")).unwrap();
        assert_eq!(master, old);
        assert_eq!(m.read(master, 0, 9).unwrap(), b"old");
        assert!(m.lookup(ROOT, name("master.tmp")).is_ok());
    }

    #[test]
    fn an_unlinked_file_still_named_durably_comes_back_with_its_data() {
        let mut m = Model::new();
        let f = m.create(ROOT, name("seg"), false).unwrap();
        m.write(f, 0, &[9; 5000]).unwrap();
        m.sync(f).unwrap();
        m.sync(ROOT).unwrap();
        m.remove(ROOT, name("seg"), false).unwrap();
        assert_eq!(m.lookup(ROOT, name("seg")), Err(libc::ENOENT));
        m.cut(0.0, &mut rng());
        let f = m.lookup(ROOT, name("seg")).unwrap();
        assert_eq!(m.read(f, 0, 9999).unwrap(), vec![9; 5000]);
    }

    #[test]
    fn truncation_and_punched_holes_are_undone_unless_synced() {
        let mut m = Model::new();
        let f = m.create(ROOT, name("f"), false).unwrap();
        m.sync(ROOT).unwrap();
        m.write(f, 0, &[5; 3 * BLOCK as usize]).unwrap();
        m.sync(f).unwrap();
        m.set_len(f, 100).unwrap();
        m.set_len(f, 3 * BLOCK).unwrap();
        // Re-extended, the cut bytes read as zeros.
        assert_eq!(m.read(f, 100, 10).unwrap(), vec![0; 10]);
        m.allocate(
            f,
            BLOCK,
            BLOCK,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        )
        .unwrap();
        m.cut(0.0, &mut rng());
        assert_eq!(
            m.read(f, 0, 3 * BLOCK).unwrap(),
            vec![5; 3 * BLOCK as usize]
        );
        m.allocate(
            f,
            0,
            BLOCK,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        )
        .unwrap();
        m.sync(f).unwrap();
        m.cut(0.0, &mut rng());
        assert_eq!(m.read(f, 0, 10).unwrap(), vec![0; 10]);
        assert_eq!(m.attr(f).unwrap().size, 3 * BLOCK);
        assert_eq!(
            m.allocate(f, 0, 1, libc::FALLOC_FL_COLLAPSE_RANGE),
            Err(libc::EOPNOTSUPP)
        );
    }

    #[test]
    fn keeping_everything_is_a_cut_that_loses_nothing() {
        let mut m = Model::new();
        let f = m.create(ROOT, name("f"), false).unwrap();
        m.write(f, 10, b"unsynced").unwrap();
        let cut = m.cut(1.0, &mut rng());
        assert_eq!(cut.blocks_lost, 0);
        assert_eq!(cut.blocks_kept, 1);
        let f = m.lookup(ROOT, name("f")).unwrap();
        assert_eq!(&m.read(f, 0, 100).unwrap()[10..], b"unsynced");
    }

    #[test]
    fn a_partial_cut_keeps_some_blocks_and_loses_others_by_its_seed() {
        let mut m = Model::new();
        let f = m.create(ROOT, name("f"), false).unwrap();
        m.sync(ROOT).unwrap();
        m.write(f, 0, &vec![1; 64 * BLOCK as usize]).unwrap();
        m.sync(f).unwrap();
        for b in 0..64 {
            m.write(f, b * BLOCK, &[2; 1]).unwrap();
        }
        let cut = m.cut(0.5, &mut rng());
        assert_eq!(cut.blocks_kept + cut.blocks_lost, 64);
        assert!(cut.blocks_kept > 10 && cut.blocks_lost > 10, "{cut:?}");
        let data = m.read(f, 0, 64 * BLOCK).unwrap();
        let twos = (0..64).filter(|b| data[(b * BLOCK) as usize] == 2).count() as u64;
        assert_eq!(twos, cut.blocks_kept);
    }

    #[test]
    fn names_and_kinds_are_checked() {
        let mut m = Model::new();
        let d = m.create(ROOT, name("d"), true).unwrap();
        let f = m.create(d, name("f"), false).unwrap();
        assert_eq!(m.create(d, name("f"), false), Err(libc::EEXIST));
        assert_eq!(m.remove(ROOT, name("d"), true), Err(libc::ENOTEMPTY));
        assert_eq!(m.remove(ROOT, name("d"), false), Err(libc::EISDIR));
        assert_eq!(m.remove(d, name("f"), true), Err(libc::ENOTDIR));
        assert_eq!(m.write(d, 0, b"x"), Err(libc::EISDIR));
        assert_eq!(m.lookup(f, name("x")), Err(libc::ENOTDIR));
        assert_eq!(
            m.rename(d, name("f"), ROOT, name("d"), false),
            Err(libc::EISDIR)
        );
        let g = m.create(ROOT, name("g"), false).unwrap();
        assert_eq!(
            m.rename(d, name("f"), ROOT, name("g"), true),
            Err(libc::EEXIST)
        );
        m.rename(d, name("f"), ROOT, name("g"), false).unwrap();
        assert_eq!(m.lookup(ROOT, name("g")), Ok(f));
        assert_ne!(f, g);
        let names: Vec<_> = m.entries(ROOT).unwrap().into_iter().map(|e| e.0).collect();
        assert_eq!(names, vec![OsString::from("d"), OsString::from("g")]);
    }

    proptest::proptest! {
        /// Whatever was written, read back before a cut equals the same writes on a plain
        /// byte vector; after a cut that keeps nothing, the file is what it was at its sync.
        #[test]
        fn reads_match_a_byte_vector_and_a_cut_returns_to_the_sync(
            ops in proptest::collection::vec((0u64..40_000, 1usize..9_000, 0u8..4), 1..40),
            sync_at in 0usize..40,
        ) {
            let mut m = Model::new();
            let f = m.create(ROOT, name("f"), false).unwrap();
            m.sync(ROOT).unwrap();
            let mut shadow: Vec<u8> = Vec::new();
            let mut at_sync: Vec<u8> = Vec::new();
            for (i, &(offset, len, op)) in ops.iter().enumerate() {
                let o = offset as usize;
                match op {
                    0 | 1 => {
                        let data = vec![(i % 251) as u8 + 1; len];
                        m.write(f, offset, &data).unwrap();
                        if shadow.len() < o + len {
                            shadow.resize(o + len, 0);
                        }
                        shadow[o..o + len].copy_from_slice(&data);
                    }
                    2 => {
                        m.set_len(f, offset).unwrap();
                        shadow.resize(o, 0);
                    }
                    _ => {
                        m.allocate(f, offset, len as u64,
                            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE).unwrap();
                        let end = (o + len).min(shadow.len());
                        if o < end {
                            shadow[o..end].fill(0);
                        }
                    }
                }
                if i == sync_at {
                    m.sync(f).unwrap();
                    at_sync = shadow.clone();
                }
                proptest::prop_assert_eq!(&m.read(f, 0, 100_000).unwrap(), &shadow);
            }
            m.cut(0.0, &mut rng());
            proptest::prop_assert_eq!(m.read(f, 0, 100_000).unwrap(), at_sync);
        }
    }
}
