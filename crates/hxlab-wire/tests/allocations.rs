//! The load client's hot path: once warm, decoding a response head allocates nothing, though
//! the one HPACK decoder keeps whole strings in its dynamic table and Huffman memo.

use hxlab_wire::hpack::{huffman_encode, Decoder};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// The system allocator, counting allocations and reallocations made on a thread that asked
/// for it (the test harness's own threads allocate when they like: under load, 4 of theirs
/// once fell inside the measured window).
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's allocations count (const-initialised: reading it never allocates).
    static COUNTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn count() {
    if COUNTED.with(|c| c.get()) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A literal with incremental indexing, static name `name_index`, Huffman value.
fn indexed_literal(out: &mut Vec<u8>, name_index: u8, value: &[u8]) {
    let mut v = Vec::new();
    huffman_encode(value, &mut v);
    out.push(0x40 | name_index);
    out.push(0x80 | v.len() as u8);
    out.extend_from_slice(&v);
}

/// A response head as nginx sends it: `:status` indexed, then every other field inserted
/// again (server, date, content-type, content-length, last-modified, etag); the date
/// changes, so no two heads are the same block.
fn head(second: u32) -> Vec<u8> {
    let mut b = vec![0x88];
    indexed_literal(&mut b, 54, b"nginx/1.24.0");
    let date = format!("Mon, 21 Oct 2013 20:13:{:02} GMT", second % 60);
    indexed_literal(&mut b, 33, date.as_bytes());
    indexed_literal(&mut b, 31, b"application/octet-stream");
    indexed_literal(&mut b, 28, b"100");
    indexed_literal(&mut b, 44, b"Mon, 21 Oct 2013 20:00:00 GMT");
    indexed_literal(&mut b, 34, b"\"5270c7f0-64\"");
    b
}

#[test]
fn a_warm_hpack_decoder_allocates_nothing_per_response() {
    let heads: Vec<Vec<u8>> = (0..120).map(head).collect();
    let mut d = Decoder::new(4096);
    for h in &heads[..60] {
        d.decode(h).expect("decode");
    }
    COUNTED.with(|c| c.set(true));
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let mut fields = 0;
    for h in &heads[60..] {
        let info = d.decode(h).expect("decode");
        assert_eq!(info.status, Some(200));
        fields += info.fields;
    }
    let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
    COUNTED.with(|c| c.set(false));
    assert_eq!(fields, 60 * 7);
    assert_eq!(
        allocated, 0,
        "allocations while decoding 60 warm response heads"
    );
}
