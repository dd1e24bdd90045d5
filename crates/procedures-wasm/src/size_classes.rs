//! Freed small blocks kept by size class and handed out again before the allocator beneath is
//! asked: a pop or a push, where a general allocator searches its bins and coalesces.
//!
//! A procedure call allocates tens of small blocks (keys, rows, operations, their vectors)
//! and frees them all before it returns, call after call; under WebAssembly each trip through
//! a general allocator costs hundreds of instructions (see `docs/performance.md`). Blocks of
//! up to [`LARGEST`] bytes (alignment at most [`ALIGN`]) are taken from the allocator beneath
//! rounded up to their class, and when freed go on their class's list, never back; so the
//! memory held is the most ever live of each class, which the module's memory limit bounds
//! like any other.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;

/// The step between classes, and the alignment every cached block has.
pub const ALIGN: usize = 16;
/// The largest block cached.
pub const LARGEST: usize = 256;
const CLASSES: usize = LARGEST / ALIGN;

/// `A` with freed small blocks kept by size class. Not thread-safe: it is `Sync` only on a
/// WebAssembly target without threads, where the module is its one thread.
pub struct SizeClasses<A> {
    inner: A,
    /// Each class's free blocks, a list through their first word.
    free: UnsafeCell<[*mut u8; CLASSES]>,
}

// SAFETY: a WebAssembly module without the atomics feature has one thread; nothing else can
// reach the lists.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
unsafe impl<A: Sync> Sync for SizeClasses<A> {}

impl<A> SizeClasses<A> {
    pub const fn new(inner: A) -> SizeClasses<A> {
        SizeClasses {
            inner,
            free: UnsafeCell::new([std::ptr::null_mut(); CLASSES]),
        }
    }
}

/// The class of a block of `layout`, where it is cached.
fn class(layout: Layout) -> Option<usize> {
    (layout.size() <= LARGEST && layout.align() <= ALIGN && layout.size() > 0)
        .then(|| (layout.size() - 1) / ALIGN)
}

/// The block every block of class `c` is taken from the allocator beneath as.
fn class_layout(c: usize) -> Layout {
    // SAFETY: a size of at most LARGEST and a power-of-two alignment.
    unsafe { Layout::from_size_align_unchecked((c + 1) * ALIGN, ALIGN) }
}

// SAFETY: every block handed out is one the allocator beneath handed out for a layout at least
// as large and as aligned (its class's), and is handed out once until it is freed again.
unsafe impl<A: GlobalAlloc> GlobalAlloc for SizeClasses<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(c) = class(layout) else {
            return self.inner.alloc(layout);
        };
        let head = &mut (*self.free.get())[c];
        if head.is_null() {
            return self.inner.alloc(class_layout(c));
        }
        let block = *head;
        *head = block.cast::<*mut u8>().read();
        block
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(c) = class(layout) else {
            return self.inner.dealloc(ptr, layout);
        };
        let head = &mut (*self.free.get())[c];
        ptr.cast::<*mut u8>().write(*head);
        *head = ptr;
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        match (class(layout), class(new_layout)) {
            (Some(a), Some(b)) if a == b => ptr,
            (None, None) => self.inner.realloc(ptr, layout, new_size),
            _ => {
                let new = self.alloc(new_layout);
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                new
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::alloc::System;
    use std::cell::Cell;

    use super::*;

    /// The system allocator, counting what reaches it.
    #[derive(Default)]
    struct Counted {
        allocs: Cell<usize>,
        deallocs: Cell<usize>,
    }

    unsafe impl GlobalAlloc for Counted {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            self.allocs.set(self.allocs.get() + 1);
            System.alloc(layout)
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            self.deallocs.set(self.deallocs.get() + 1);
            System.dealloc(ptr, layout)
        }
    }

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn a_freed_block_is_handed_out_again_for_its_class_only() {
        let a = SizeClasses::new(Counted::default());
        unsafe {
            let p = a.alloc(layout(24, 8));
            assert_eq!(p as usize % ALIGN, 0);
            a.dealloc(p, layout(24, 8));
            assert_eq!(a.inner.deallocs.get(), 0, "kept, not freed beneath");
            // 17 to 32 bytes is one class; 40 is the next.
            let q = a.alloc(layout(40, 8));
            assert_ne!(q, p);
            assert_eq!(a.alloc(layout(32, 16)), p, "the same class takes it back");
            assert_eq!(a.inner.allocs.get(), 2);
            a.dealloc(q, layout(40, 8));
            a.dealloc(p, layout(32, 16));
            // Back on its class's list, and the smallest size of that class takes it.
            let r = a.alloc(layout(17, 1));
            assert_eq!(r, p);
            a.dealloc(r, layout(17, 1));
        }
    }

    #[test]
    fn large_and_overaligned_blocks_go_to_the_allocator_beneath() {
        let a = SizeClasses::new(Counted::default());
        unsafe {
            for l in [layout(LARGEST + 1, 8), layout(64, 32)] {
                let p = a.alloc(l);
                assert_eq!(p as usize % l.align(), 0);
                a.dealloc(p, l);
            }
        }
        assert_eq!((a.inner.allocs.get(), a.inner.deallocs.get()), (2, 2));
    }

    #[test]
    fn a_grown_block_keeps_its_bytes_across_classes() {
        let a = SizeClasses::new(Counted::default());
        unsafe {
            let p = a.alloc(layout(8, 8));
            p.copy_from_nonoverlapping([1u8, 2, 3, 4, 5, 6, 7, 8].as_ptr(), 8);
            assert_eq!(a.realloc(p, layout(8, 8), 16), p, "same class: in place");
            let q = a.realloc(p, layout(16, 8), 100);
            assert_eq!(std::slice::from_raw_parts(q, 8), &[1, 2, 3, 4, 5, 6, 7, 8]);
            let r = a.realloc(q, layout(100, 8), 4096);
            assert_eq!(std::slice::from_raw_parts(r, 8), &[1, 2, 3, 4, 5, 6, 7, 8]);
            let s = a.realloc(r, layout(4096, 8), 8192);
            assert_eq!(std::slice::from_raw_parts(s, 8), &[1, 2, 3, 4, 5, 6, 7, 8]);
            a.dealloc(s, layout(8192, 8));
            // The two small blocks went back to their classes.
            assert_eq!(a.alloc(layout(10, 8)), p);
            assert_eq!(a.alloc(layout(100, 8)), q);
        }
    }
}
