//! The global allocator of `@bpavl/wasm` and `@bpavl/baseline-wasm` (linked by
//! `use bpavl_wasm_alloc as _;`): dlmalloc, the allocator std uses on wasm32, with a
//! system layer that grows WebAssembly memory in large steps.
//!
//! std's layer grows memory by the few 64 KiB pages that one allocation
//! needs, so building a 100,000-entry tree or rebuilding one from chunks
//! takes thousands of `memory.grow` calls. V8 counts WebAssembly memory as
//! external memory, and frequent growth triggers full garbage collections of
//! the JS heap: with a large heap, inserts and `Rebuilder.add` ran many times
//! slower than with the memory already there (figures:
//! packages/bpavl-wasm/README.md). Here each growth step is at
//! least half the current memory (and at least 1 MiB), so the number of steps
//! is logarithmic in the final size. dlmalloc uses all of each step before
//! asking again; fresh pages are zero and untouched, so the headroom costs
//! address space, not resident memory. If the large step fails (near the
//! 4 GiB limit), exactly what was asked for is tried, as std does.
#![allow(unsafe_code)]
#![cfg(target_arch = "wasm32")]

use std::alloc::{GlobalAlloc, Layout};
use std::arch::wasm32::{memory_grow, memory_size};
use std::cell::UnsafeCell;
use std::ptr;

const PAGE: usize = 64 * 1024;
const MIN_STEP: usize = 1 << 20;

/// dlmalloc's view of the system: WebAssembly memory, grown in large steps.
struct GrowingMemory;

// SAFETY: `alloc` returns fresh, zeroed pages that nothing else uses (wasm
// memory only grows), exactly as dlmalloc's own wasm system does; nothing is
// ever released.
unsafe impl dlmalloc::Allocator for GrowingMemory {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        let current = memory_size::<0>() * PAGE;
        for step in [size.max(current / 2).max(MIN_STEP), size] {
            let pages = step.div_ceil(PAGE);
            let prev = memory_grow::<0>(pages);
            if prev != usize::MAX {
                let (base, len) = (prev * PAGE, pages * PAGE);
                // Ending at exactly 4 GiB: keep the last bytes unused, so that
                // no pointer wraps to 0 (as dlmalloc's wasm system does).
                let len = if base.wrapping_add(len) == 0 { len - 16 } else { len };
                return (base as *mut u8, len, 0);
            }
        }
        (ptr::null_mut(), 0, 0)
    }

    fn remap(&self, _ptr: *mut u8, _old: usize, _new: usize, _can_move: bool) -> *mut u8 {
        ptr::null_mut()
    }

    fn free_part(&self, _ptr: *mut u8, _old: usize, _new: usize) -> bool {
        false
    }

    fn free(&self, _ptr: *mut u8, _size: usize) -> bool {
        false
    }

    fn can_release_part(&self, _flags: u32) -> bool {
        false
    }

    fn allocates_zeros(&self) -> bool {
        true
    }

    fn page_size(&self) -> usize {
        PAGE
    }
}

#[cfg(target_feature = "atomics")]
compile_error!("src/alloc.rs assumes a single thread (wasm32 without atomics)");

struct Global(UnsafeCell<dlmalloc::Dlmalloc<GrowingMemory>>);

// SAFETY: wasm32 without the atomics feature (checked above) runs one thread,
// and dlmalloc never calls back into the global allocator, so no two calls
// ever use the heap at once.
unsafe impl Sync for Global {}

#[global_allocator]
static ALLOCATOR: Global = Global(UnsafeCell::new(dlmalloc::Dlmalloc::new_with_allocator(GrowingMemory)));

// SAFETY: each method forwards to the dlmalloc method with the same contract.
unsafe impl GlobalAlloc for Global {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { (*self.0.get()).malloc(layout.size(), layout.align()) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        unsafe { (*self.0.get()).calloc(layout.size(), layout.align()) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { (*self.0.get()).free(ptr, layout.size(), layout.align()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe { (*self.0.get()).realloc(ptr, layout.size(), layout.align(), new_size) }
    }
}
