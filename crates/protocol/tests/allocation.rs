//! What the codec allocates, counted by a global allocator of this test binary's own: encoding
//! into a `Vec` with room allocates nothing, and an attacker's list count makes decoding
//! allocate nothing in proportion to it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use engine::Value;
use protocol::{Op, ProtocolError, Request};

/// The system allocator, counting allocations and the largest one asked for.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: passed through unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, that is from `System`, with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The allocations `f` makes and the largest of them. One test alone runs in this binary, so
/// no other thread allocates meanwhile.
fn counted<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    ALLOCATIONS.store(0, Ordering::SeqCst);
    LARGEST.store(0, Ordering::SeqCst);
    let out = f();
    (
        out,
        ALLOCATIONS.load(Ordering::SeqCst),
        LARGEST.load(Ordering::SeqCst),
    )
}

#[test]
fn the_codec_allocates_only_what_the_bytes_justify() {
    let request = Request::Batch {
        autocommit: true,
        ops: vec![Op::Insert {
            table: 7,
            row: vec![Value::Int(1), Value::Str("x".repeat(40)), Value::Float(0.5)],
        }],
    };
    let mut out = Vec::with_capacity(4096);
    let ((), allocations, _) = counted(|| {
        request.encode(&mut out);
        request.encode(&mut out);
    });
    assert_eq!(allocations, 0, "encoding into a Vec with room allocated");

    // Call with an empty procedure name and u32::MAX arguments, in a 10-byte body.
    let mut frame = vec![0x03, 0, 0, 0, 0];
    frame.extend_from_slice(&u32::MAX.to_le_bytes());
    frame.extend_from_slice(&[0, 0]);
    let (result, _, largest) = counted(|| Request::decode(&frame));
    assert!(
        matches!(result, Err(ProtocolError::CountTooLarge { .. })),
        "{result:?}"
    );
    assert!(largest < 1024, "decoding allocated {largest} bytes at once");

    // A batch whose op count is as large as the bytes allow: what it allocates is bounded by
    // the frame's size, not by the count.
    let mut frame = vec![0x05, 0];
    frame.extend_from_slice(&1000u32.to_le_bytes());
    for _ in 0..1000 {
        frame.extend_from_slice(&[4, 0, 0, 0, 0, 0, 0, 0, 0]); // Delete table 0, empty key
    }
    let (result, _, largest) = counted(|| Request::decode(&frame));
    match result {
        Ok(Request::Batch { ops, .. }) => assert_eq!(ops.len(), 1000),
        other => panic!("{other:?}"),
    }
    assert!(
        largest <= 1000 * std::mem::size_of::<Op>(),
        "decoding {} bytes allocated {largest} bytes at once",
        frame.len()
    );
}
