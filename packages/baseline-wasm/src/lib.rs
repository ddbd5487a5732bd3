//! # bpavl-baseline-wasm
//!
//! The WebAssembly face of `bpavl-baseline` (npm `@bpavl/baseline-wasm`):
//! the B+AVL paper's Baseline (an IAVL-style Merkle AVL+ tree with one entry
//! per leaf, exported by traversal into chunks that carry no proofs), for
//! `npm run bench:sync`. Thin on purpose: arguments are converted, the crate
//! is called, errors become JS `Error`s with `name` `BaselineError` and the
//! crate's stable `code`. No tree, hashing or record logic lives here.
//! The global allocator comes from `bpavl-wasm-alloc` (crates/wasm-alloc).
//!
//! The doc comments below become the JSDoc of the generated `.d.ts`.
#![forbid(unsafe_code)]

#[cfg(target_arch = "wasm32")]
use bpavl_wasm_alloc as _; // sets the global allocator on wasm32

use bpavl_baseline as baseline;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(module = "/src/convert.js")]
extern "C" {
    #[wasm_bindgen(js_name = codedError)]
    fn coded_error(name: &str, code: &str, message: &str) -> JsValue;
    #[wasm_bindgen(js_name = rangeError)]
    fn range_error(message: &str) -> JsValue;
    #[wasm_bindgen(js_name = chunkArray)]
    fn chunk_array(flat: &[u8], ends: &[u32]) -> JsValue;
}

/// The JS `Error` thrown for `e`: `name` `BaselineError`, `code` its stable code.
fn throw(e: baseline::Error) -> JsValue {
    coded_error("BaselineError", e.code(), &e.to_string())
}

/// The default chunk size in bytes (100 KiB: about one bpavl chunk envelope
/// at C = 256 with 512-byte values).
#[wasm_bindgen(js_name = defaultChunkBytes)]
pub fn default_chunk_bytes() -> u32 {
    baseline::DEFAULT_CHUNK_BYTES as u32
}

/// An IAVL-style Merkle AVL+ tree, one entry per leaf (crates/baseline/README.md).
///
/// ```js
/// const tree = new BaselineTree();
/// tree.insert(key, value);
/// const root = tree.commit();                 // 32 bytes
/// const chunks = tree.exportChunks(102400);   // Uint8Array[], applied in order
/// ```
#[wasm_bindgen]
pub struct BaselineTree(baseline::BaselineTree);

impl Default for BaselineTree {
    fn default() -> Self {
        BaselineTree::new()
    }
}

#[wasm_bindgen]
impl BaselineTree {
    /// An empty tree.
    #[wasm_bindgen(constructor)]
    pub fn new() -> BaselineTree {
        BaselineTree(baseline::BaselineTree::new())
    }

    /// Inserts or replaces `key` → `value`; true if the key was new. Throws
    /// BaselineError `KEY_EMPTY`, `KEY_TOO_LONG` or `VALUE_TOO_LONG`.
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<bool, JsValue> {
        self.0.insert(key, value).map(|replaced| !replaced).map_err(throw)
    }

    /// The value of `key`, or `undefined`.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.0.get(key).map(<[u8]>::to_vec)
    }

    /// Entries in the tree.
    #[wasm_bindgen(getter)]
    pub fn len(&self) -> f64 {
        self.0.len() as f64
    }

    /// Whether the tree holds no entry.
    #[wasm_bindgen(js_name = isEmpty)]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Hashes the nodes changed since the last commit; returns the 32-byte root.
    pub fn commit(&mut self) -> Vec<u8> {
        self.0.commit().to_vec()
    }

    /// Serializes the tree by post-order traversal into chunks of at most
    /// `chunkBytes` bytes (a longer record gets a chunk of its own): chunk i
    /// is element i, to be imported in order. The empty tree exports none.
    /// Throws `RangeError` unless `chunkBytes` is an integer in 1 … 2^31 − 1.
    #[wasm_bindgen(js_name = exportChunks, unchecked_return_type = "Uint8Array[]")]
    pub fn export_chunks(&self, chunk_bytes: f64) -> Result<JsValue, JsValue> {
        if !(chunk_bytes.fract() == 0.0 && (1.0..=2_147_483_647.0).contains(&chunk_bytes)) {
            return Err(range_error(&format!("chunkBytes must be an integer in 1 … 2^31 − 1, got {chunk_bytes}")));
        }
        let chunks = self.0.export_chunks(chunk_bytes as usize);
        let mut flat = Vec::with_capacity(chunks.iter().map(Vec::len).sum());
        let mut ends = Vec::with_capacity(chunks.len());
        for c in &chunks {
            flat.extend_from_slice(c);
            ends.push(flat.len() as u32);
        }
        Ok(chunk_array(&flat, &ends))
    }
}

/// Rebuilds a tree from its chunks, applied strictly in order, node by node.
/// Nothing is checked against a root before `finish()` (only the records'
/// structure), exactly the Baseline's weakness.
///
/// ```js
/// const importer = new Importer();
/// for (const chunk of chunks) importer.addChunk(chunk);
/// const root = importer.finish(); // compare with the trusted root
/// ```
#[wasm_bindgen]
pub struct Importer {
    inner: baseline::Importer,
    chunks: u32,
}

impl Default for Importer {
    fn default() -> Self {
        Importer::new()
    }
}

#[wasm_bindgen]
impl Importer {
    /// An importer expecting chunk 0.
    #[wasm_bindgen(constructor)]
    pub fn new() -> Importer {
        Importer { inner: baseline::Importer::new(), chunks: 0 }
    }

    /// Applies the next chunk. Throws BaselineError with the first failing
    /// check's code (`TRUNCATED`, `KEYS_NOT_SORTED`, …); after an error every
    /// later call throws it again.
    #[wasm_bindgen(js_name = addChunk)]
    pub fn add_chunk(&mut self, chunk: &[u8]) -> Result<(), JsValue> {
        self.inner.add_chunk(chunk).map_err(throw)?;
        self.chunks += 1;
        Ok(())
    }

    /// Chunks applied so far.
    #[wasm_bindgen(getter)]
    pub fn chunks(&self) -> u32 {
        self.chunks
    }

    /// Ends the import and returns the rebuilt tree's 32-byte root hash (the
    /// only check against the trusted root is the caller's comparison).
    /// Consumes the importer. Throws BaselineError `REBUILD_INCOMPLETE` (or
    /// the earlier error).
    pub fn finish(self) -> Result<Vec<u8>, JsValue> {
        self.inner.finish().map(|root| root.to_vec()).map_err(throw)
    }
}
