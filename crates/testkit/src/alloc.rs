//! A global allocator that records the largest single allocation made while
//! tracking is on, for the fuzz tests' check that decoders do not trust
//! claimed lengths or counts. A test binary installs it with
//! `#[global_allocator] static ALLOC: CountingAlloc = CountingAlloc;` and
//! runs each call through [`guarded`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use crate::guard::{self, Outcome};

// Const-initialised thread-locals never allocate.
thread_local! {
    static TRACKING: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

/// While tracking, allocations above this are refused (the process then
/// aborts with "memory allocation of N bytes failed") rather than letting a
/// decoder bug exhaust the machine's memory.
const HARD_CAP: usize = 1 << 30;

/// Records `size`; false if it must be refused.
fn note_alloc(size: usize) -> bool {
    TRACKING
        .try_with(|t| {
            if !t.get() {
                return true;
            }
            let _ = LARGEST.try_with(|m| m.set(m.get().max(size)));
            size <= HARD_CAP
        })
        .unwrap_or(true)
}

/// The system allocator, counting while [`guarded`] runs.
pub struct CountingAlloc;

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !note_alloc(layout.size()) {
            return std::ptr::null_mut();
        }
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !note_alloc(layout.size()) {
            return std::ptr::null_mut();
        }
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !note_alloc(new_size) {
            return std::ptr::null_mut();
        }
        System.realloc(ptr, layout, new_size)
    }
}

/// Allowed largest single allocation while handling `len` input bytes.
pub fn alloc_budget(len: usize) -> usize {
    64 * len + (1 << 20)
}

/// Runs `f` under [`guard::guarded`] with allocation tracking; returns the
/// outcome and the largest single allocation it made (0 unless the test
/// binary installed [`CountingAlloc`]).
pub fn guarded(f: impl FnOnce() -> Result<(), &'static str>) -> (Outcome, usize) {
    LARGEST.with(|m| m.set(0));
    TRACKING.with(|t| t.set(true));
    let out = guard::guarded(f);
    TRACKING.with(|t| t.set(false));
    (out, LARGEST.with(Cell::get))
}
