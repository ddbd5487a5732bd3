//! # bpavl-wasm
//!
//! The WebAssembly face of `bpavl-core` (npm `@bpavl/wasm`). Thin on purpose:
//! every function converts its arguments (`convert`), calls the core, and
//! converts the result or maps the error to a JS `Error` with `name` and
//! `code` (`spec/errors.md`). No tree, proof or hashing logic lives here.
//! The global allocator comes from `bpavl-wasm-alloc` (crates/wasm-alloc).
//!
//! The doc comments below become the JSDoc of the generated `.d.ts`.
#![forbid(unsafe_code)]

#[cfg(target_arch = "wasm32")]
use bpavl_wasm_alloc as _; // sets the global allocator on wasm32
mod catchup;
mod convert;
mod store;

use bpavl_core as core;
use convert::{bytes, bytes_len, count, opt_bytes, range_limit, throw, uint, Bytes, Number};
use wasm_bindgen::prelude::*;

/// A key argument of a read or a remove: TreeError `KEY_EMPTY` or
/// `KEY_TOO_LONG` for a key no tree holds (as an insert refuses it),
/// rather than an answer of "absent".
fn tree_key(key: &Bytes) -> Result<Vec<u8>, JsValue> {
    check_key(key)?;
    bytes(key, "key")
}

/// Checks a key as `Tree.get` does, for callers that read a tree kept
/// elsewhere (the store's paged reads and deletes): TreeError `KEY_EMPTY`
/// or `KEY_TOO_LONG` for a key no tree holds, `TypeError` for no Uint8Array.
/// By its length: the key is not copied (a warm read of the store checks
/// every key it is given).
#[wasm_bindgen(js_name = checkKey)]
pub fn check_key(key: &Bytes) -> Result<(), JsValue> {
    core::codec::check_key_len(bytes_len(key, "key")?).map_err(|e| {
        throw(match e {
            core::ProofError::KeyEmpty => core::TreeError::KeyEmpty,
            _ => core::TreeError::KeyTooLong,
        })
    })
}

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &str = r#"
/** What `Tree.commit()` returns. */
export interface Commit {
  /** The new version number (the empty tree is version 0). */
  version: number;
  /** The new root hash, 32 bytes. */
  root: Uint8Array;
}

/** What `verifyExistence` returns: where the entry sits, authenticated by the root. */
export interface EntryPosition {
  /** Index of the chunk holding the entry. */
  chunkIndex: number;
  /** The entry's position in its chunk. */
  position: number;
  /** Total chunks in the tree. */
  chunkCount: number;
  /** Total entries in the tree. */
  entryCount: number;
}

/** A neighbour of an absent key, as proven: its entry and where it sits. */
export interface Neighbour extends EntryPosition {
  key: Uint8Array;
  value: Uint8Array;
}

/** What `verifyAbsence` returns: the proven neighbours (`undefined` beyond the tree's edge; both for the empty tree). */
export interface AbsenceResult {
  /** The largest entry below the key. */
  left: Neighbour | undefined;
  /** The smallest entry above the key. */
  right: Neighbour | undefined;
}

/** What `verifyMultiproof` returns: per asked key its value (`undefined` when absent), and the tree's totals. */
export interface MultiproofResult {
  values: (Uint8Array | undefined)[];
  chunkCount: number;
  entryCount: number;
}

/** What `verifyChunkProof` returns, authenticated by the root. */
export interface ChunkPosition {
  /** The chunk's index. */
  index: number;
  /** Total chunks in the tree. */
  chunkCount: number;
  /** Total entries in the tree. */
  entryCount: number;
  /** Height of the inner node holding the chunk's smallest key (0 for chunk 0). */
  keyHeight: number;
}

/** What `verifyRange` returns. */
export interface RangeResult {
  /** The proven entries with `start ≤ key < end`, in key order. */
  entries: [key: Uint8Array, value: Uint8Array][];
  /** True if no entry of the range was left out. */
  complete: boolean;
  /** When incomplete: the first key not returned, where the next query starts. */
  resumeKey: Uint8Array | undefined;
}

/**
 * What every bpavl call throws for a refused operation or a failed check:
 * `name` is the Rust error type, `code` the stable code from spec/errors.md.
 * Branch on `code`, never on `message`.
 */
export interface BpavlError extends Error {
  name: 'ProofError' | 'TreeError' | 'RebuildError' | 'StoreError';
  code: string;
}
"#;

/// A B+AVL tree (`spec/hashing.md`): the working state you change, and its
/// head, the last committed version that proofs and chunk exports are taken
/// from.
///
/// ```js
/// const tree = new Tree(256);
/// tree.insert(key, value);
/// const { root } = tree.commit();
/// const proof = tree.head().proveExistence(key);
/// verifyExistence(root, key, value, proof);
/// tree.free(); // or let the garbage collector do it
/// ```
#[wasm_bindgen]
pub struct Tree(core::Tree);

#[wasm_bindgen]
impl Tree {
    /// An empty tree whose chunks hold up to `capacity` entries (2 … 4096,
    /// default 256). Throws TreeError `CAPACITY_INVALID` outside that range.
    #[wasm_bindgen(constructor)]
    pub fn new(capacity: Option<Number>) -> Result<Tree, JsValue> {
        let capacity = match capacity {
            None => core::limits::DEFAULT_CAPACITY,
            Some(c) => count(&c, "capacity")?,
        };
        core::Tree::new(capacity).map(Tree).map_err(throw)
    }

    /// Inserts or replaces `key` → `value` in the working state; returns true
    /// if the key was new. Throws TreeError `KEY_EMPTY`, `KEY_TOO_LONG`,
    /// `VALUE_TOO_LONG` or `TREE_FULL` and leaves the tree unchanged.
    pub fn insert(&mut self, key: &Bytes, value: &Bytes) -> Result<bool, JsValue> {
        let (key, value) = (bytes(key, "key")?, bytes(value, "value")?);
        self.0.insert(&key, &value).map_err(throw)
    }

    /// The value of `key` in the working state, or `undefined`. Throws
    /// TreeError `KEY_EMPTY` or `KEY_TOO_LONG` for a key no tree holds.
    pub fn get(&self, key: &Bytes) -> Result<Option<Vec<u8>>, JsValue> {
        Ok(self.0.get(&tree_key(key)?).map(<[u8]>::to_vec))
    }

    /// Removes `key` from the working state; returns whether it was
    /// present. Throws as `get` for a key no tree holds.
    pub fn remove(&mut self, key: &Bytes) -> Result<bool, JsValue> {
        Ok(self.0.remove(&tree_key(key)?))
    }

    /// Entries in the working state.
    #[wasm_bindgen(getter)]
    pub fn len(&self) -> f64 {
        self.0.len() as f64
    }

    /// Chunks in the working state.
    #[wasm_bindgen(getter, js_name = chunkCount)]
    pub fn chunk_count(&self) -> f64 {
        self.0.chunk_count() as f64
    }

    /// The chunk capacity C.
    #[wasm_bindgen(getter)]
    pub fn capacity(&self) -> f64 {
        self.0.capacity() as f64
    }

    /// Hashes what changed and makes the working state the next committed
    /// version.
    #[wasm_bindgen(unchecked_return_type = "Commit")]
    pub fn commit(&mut self) -> JsValue {
        let c = self.0.commit();
        convert::commit_result(c.version as f64, &c.root)
    }

    /// The head: the last committed version, as a handle that stays valid
    /// while the tree goes on changing and committing. Proofs, chunk
    /// exports, the root and the version number are read from it; `get`
    /// on the tree reads the working state.
    pub fn head(&self) -> Snapshot {
        Snapshot(self.0.head().clone())
    }
}

/// A committed, immutable version of a tree (`tree.head()`): serve
/// proofs and chunks of it while the tree goes on changing.
#[wasm_bindgen]
pub struct Snapshot(core::Snapshot);

#[wasm_bindgen]
impl Snapshot {
    /// Root hash, 32 bytes.
    #[wasm_bindgen(getter)]
    pub fn root(&self) -> Vec<u8> {
        self.0.root().to_vec()
    }

    /// Version number.
    #[wasm_bindgen(getter)]
    pub fn version(&self) -> f64 {
        self.0.version() as f64
    }

    /// The chunk capacity C.
    #[wasm_bindgen(getter)]
    pub fn capacity(&self) -> f64 {
        self.0.capacity() as f64
    }

    /// Entries.
    #[wasm_bindgen(getter)]
    pub fn len(&self) -> f64 {
        self.0.len() as f64
    }

    /// Chunks.
    #[wasm_bindgen(getter, js_name = chunkCount)]
    pub fn chunk_count(&self) -> f64 {
        self.0.chunk_count() as f64
    }

    /// The value of `key`, or `undefined` (as `Tree.get`).
    pub fn get(&self, key: &Bytes) -> Result<Option<Vec<u8>>, JsValue> {
        Ok(self.0.get(&tree_key(key)?).map(<[u8]>::to_vec))
    }

    /// As `Tree.proveExistence`.
    #[wasm_bindgen(js_name = proveExistence)]
    pub fn prove_existence(&self, key: &Bytes) -> Result<Vec<u8>, JsValue> {
        committed::existence(&self.0, key)
    }

    /// As `Tree.proveAbsence`.
    #[wasm_bindgen(js_name = proveAbsence)]
    pub fn prove_absence(&self, key: &Bytes) -> Result<Vec<u8>, JsValue> {
        committed::absence(&self.0, key)
    }

    /// As `Tree.proveRange`.
    #[wasm_bindgen(js_name = proveRange)]
    pub fn prove_range(&self, start: &Bytes, end: Option<Bytes>, limit: &Number) -> Result<Vec<u8>, JsValue> {
        committed::range(&self.0, start, end, limit)
    }

    /// The `MULTIPROOF` answer of `spec/wire.md` for `keys` (strictly
    /// increasing): `k varint ‖ multiproof`, the multiproof (format `0x0D`)
    /// of the first k keys, k = all of them unless that exceeds `maxBytes`,
    /// else the most that fit (at least one). A serving peer's hot path.
    #[wasm_bindgen(js_name = proveMulti)]
    pub fn prove_multi(&self, keys: Vec<Bytes>, max_bytes: &Number) -> Result<Vec<u8>, JsValue> {
        let keys = keys.iter().map(|k| bytes(k, "key")).collect::<Result<Vec<_>, _>>()?;
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        multiproof_payload(keys.len(), uint(max_bytes, "maxBytes")?, |max| {
            self.0.prove_multi_within(&keys, max).map_err(throw)
        })
    }

    /// As `Tree.proveChunk`.
    #[wasm_bindgen(js_name = proveChunk)]
    pub fn prove_chunk(&self, index: &Number) -> Result<Vec<u8>, JsValue> {
        committed::chunk(&self.0, index)
    }

    /// As `Tree.exportChunk`.
    #[wasm_bindgen(js_name = exportChunk)]
    pub fn export_chunk(&self, index: &Number) -> Result<Vec<u8>, JsValue> {
        committed::export(&self.0, index)
    }
}

/// Checks that `key` → `value` is in the tree with root `root`, given an
/// existence proof. Throws a ProofError (`ROOT_MISMATCH`, a decoding code, …).
///
/// ```js
/// const { chunkIndex, position } = verifyExistence(root, key, value, proof);
/// ```
#[wasm_bindgen(js_name = verifyExistence, unchecked_return_type = "EntryPosition")]
pub fn verify_existence(root: &Bytes, key: &Bytes, value: &Bytes, proof: &Bytes) -> Result<JsValue, JsValue> {
    let (root, key, value, proof) =
        (convert::root(root)?, bytes(key, "key")?, bytes(value, "value")?, bytes(proof, "proof")?);
    let p = core::verify_existence(&root, &key, &value, &proof).map_err(throw)?;
    Ok(convert::position(&p))
}

/// `verifyExistence` for many items at once: one result per item, in order,
/// either its `EntryPosition` or the `ProofError` that `verifyExistence`
/// would throw for it (returned, not thrown). With WebAssembly SIMD, four
/// proofs hash side by side, about twice the rate of one call per proof.
/// Throws only for a bad `root` or an item that is not three Uint8Arrays.
///
/// ```js
/// const results = verifyExistenceBatch(root, [{ key, value, proof }, …]);
/// const failed = results.filter((r) => r instanceof Error);
/// ```
#[wasm_bindgen(js_name = verifyExistenceBatch, unchecked_return_type = "(EntryPosition | BpavlError)[]")]
pub fn verify_existence_batch(
    root: &Bytes,
    #[wasm_bindgen(unchecked_param_type = "{ key: Uint8Array; value: Uint8Array; proof: Uint8Array }[]")]
    items: &JsValue,
) -> Result<Vec<JsValue>, JsValue> {
    let root = convert::root(root)?;
    let (flat, ends) = convert::existence_items(items)?;
    let mut at = 0;
    let mut next = |end: u32| {
        let part = &flat[at..end as usize];
        at = end as usize;
        part
    };
    let items: Vec<core::ExistenceItem> = ends.chunks_exact(3).map(|e| (next(e[0]), next(e[1]), next(e[2]))).collect();
    Ok(core::verify_existence_batch(&root, &items)
        .into_iter()
        .map(|r| match r {
            Ok(p) => convert::position(&p),
            Err(e) => throw(e),
        })
        .collect())
}

/// Checks that `key` is absent from the tree with root `root`, given an
/// absence proof; returns the proven neighbours. Throws a ProofError.
#[wasm_bindgen(js_name = verifyAbsence, unchecked_return_type = "AbsenceResult")]
pub fn verify_absence(root: &Bytes, key: &Bytes, proof: &Bytes) -> Result<JsValue, JsValue> {
    let (root, key, proof) = (convert::root(root)?, bytes(key, "key")?, bytes(proof, "proof")?);
    core::verify_absence(&root, &key, &proof).map(convert::absence).map_err(throw)
}

/// Checks a multiproof (`spec/proof-format.md`, `0x0D`) for `keys`
/// (strictly increasing) against `root`; returns each key's value
/// (`undefined` when absent; a view into `proof`, nothing copied) and the
/// tree's totals. Throws a ProofError
/// (`ROOT_MISMATCH`, `ABSENCE_INVALID`, `MULTIPROOF_INVALID`, …).
///
/// ```js
/// const { values } = verifyMultiproof(root, [keyA, keyB], proof);
/// ```
#[wasm_bindgen(js_name = verifyMultiproof, unchecked_return_type = "MultiproofResult")]
pub fn verify_multiproof(root: &Bytes, keys: Vec<Bytes>, proof: &Bytes) -> Result<JsValue, JsValue> {
    let root = convert::root(root)?;
    let keys = keys.iter().map(|k| bytes(k, "key")).collect::<Result<Vec<_>, _>>()?;
    let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let bytes = bytes(proof, "proof")?;
    let v = core::verify_multiproof_views(&root, &keys, &bytes).map_err(throw)?;
    Ok(convert::multiproof(proof, &bytes, v))
}

/// The `MULTIPROOF` answer (as `Snapshot.proveMulti`) built from each key's
/// single proof: `values[i]` is key i's value with `proofs[i]` its existence
/// proof, or `undefined` with `proofs[i]` its absence proof. For a store,
/// which proves keys one at a time; the proofs are not verified here.
#[wasm_bindgen(js_name = multiproofFromProofs)]
pub fn multiproof_from_proofs(
    keys: Vec<Bytes>,
    #[wasm_bindgen(unchecked_param_type = "(Uint8Array | undefined)[]")] values: Vec<JsValue>,
    proofs: Vec<Bytes>,
    max_bytes: &Number,
) -> Result<Vec<u8>, JsValue> {
    if values.len() != keys.len() || proofs.len() != keys.len() {
        return Err(convert::range_error("keys, values and proofs must have the same length"));
    }
    let keys = keys.iter().map(|k| bytes(k, "key")).collect::<Result<Vec<_>, _>>()?;
    let values = values
        .iter()
        .map(|v| opt_bytes(Some(v).filter(|v| !v.is_undefined()), "value"))
        .collect::<Result<Vec<_>, _>>()?;
    let proofs = proofs.iter().map(|p| bytes(p, "proof")).collect::<Result<Vec<_>, _>>()?;
    let answers: Vec<core::SingleAnswer> =
        keys.iter().zip(&values).zip(&proofs).map(|((k, v), p)| (k.as_slice(), v.as_deref(), p.as_slice())).collect();
    multiproof_payload(answers.len(), uint(max_bytes, "maxBytes")?, |max| {
        core::Multiproof::from_proofs_within(&answers, max).map_err(throw)
    })
}

/// `k varint ‖ multiproof of the first k keys`, k as large as fits
/// `max_bytes`; `prove(limit)` gives k and the proof within `limit`.
fn multiproof_payload(
    keys: usize,
    max_bytes: u64,
    prove: impl FnOnce(usize) -> Result<(usize, Vec<u8>), JsValue>,
) -> Result<Vec<u8>, JsValue> {
    if keys == 0 {
        return Err(convert::range_error("keys must not be empty"));
    }
    let count_len = 3; // k ≤ 65536
    let (k, proof) = prove(usize::try_from(max_bytes).unwrap_or(usize::MAX).saturating_sub(count_len))?;
    let mut out = Vec::with_capacity(proof.len() + count_len);
    core::codec::put_varint(&mut out, k as u64);
    out.extend_from_slice(&proof);
    Ok(out)
}

/// Checks a range proof for the query `start ≤ key < end` (`end` undefined
/// or null: unbounded), at most `limit` entries, against `root`; returns the
/// proven entries. Throws a ProofError (`QUERY_INVALID`, `RANGE_INVALID`, …).
///
/// ```js
/// const { entries, complete, resumeKey } = verifyRange(root, start, undefined, 100, proof);
/// ```
#[wasm_bindgen(js_name = verifyRange, unchecked_return_type = "RangeResult")]
pub fn verify_range(
    root: &Bytes,
    start: &Bytes,
    end: Option<Bytes>,
    limit: &Number,
    proof: &Bytes,
) -> Result<JsValue, JsValue> {
    let root = convert::root(root)?;
    let (start, end, limit) = (bytes(start, "start")?, opt_bytes(end.as_deref(), "end")?, range_limit(limit)?);
    let proof = bytes(proof, "proof")?;
    let r = core::verify_range(&root, &start, end.as_deref(), limit, &proof).map_err(throw)?;
    Ok(convert::range(r))
}

/// Checks a chunk proof against `root`; returns the chunk's authenticated
/// index, the tree's totals and the chunk's key-height. Throws a ProofError.
#[wasm_bindgen(js_name = verifyChunkProof, unchecked_return_type = "ChunkPosition")]
pub fn verify_chunk_proof(root: &Bytes, proof: &Bytes) -> Result<JsValue, JsValue> {
    let (root, proof) = (convert::root(root)?, bytes(proof, "proof")?);
    let f = core::verify_chunk_proof(&root, &proof).map_err(throw)?;
    Ok(convert::chunk_position(f.index as f64, f.chunk_count as f64, f.entry_count as f64, f.key_height as f64))
}

/// Checks chunk envelope `bytes` as chunk `index` of the tree with root
/// `root`, with nothing else trusted (`spec/chunk-format.md`). Throws a
/// ProofError (`ROOT_MISMATCH`, `CHUNK_INDEX_MISMATCH`, a decoding code, …).
///
/// ```js
/// const chunk = verifyChunk(root, 3, envelope);
/// rebuilder.addVerified(chunk);
/// ```
#[wasm_bindgen(js_name = verifyChunk)]
pub fn verify_chunk(root: &Bytes, index: &Number, bytes: &Bytes) -> Result<VerifiedChunk, JsValue> {
    let (root, index, envelope) = (convert::root(root)?, uint(index, "index")?, convert::bytes(bytes, "bytes")?);
    core::verify_chunk(&root, index, &envelope).map(VerifiedChunk).map_err(throw)
}

/// A chunk that verified against a root; only `verifyChunk` makes one. Its
/// data stays in WebAssembly memory until `entries` is read.
#[wasm_bindgen]
pub struct VerifiedChunk(core::VerifiedChunk);

#[wasm_bindgen]
impl VerifiedChunk {
    /// The root it verified against (32 bytes).
    #[wasm_bindgen(getter)]
    pub fn root(&self) -> Vec<u8> {
        self.0.root().to_vec()
    }

    /// Its authenticated index.
    #[wasm_bindgen(getter)]
    pub fn index(&self) -> f64 {
        self.0.index() as f64
    }

    /// Total chunks in the tree.
    #[wasm_bindgen(getter, js_name = chunkCount)]
    pub fn chunk_count(&self) -> f64 {
        self.0.chunk_count() as f64
    }

    /// Total entries in the tree.
    #[wasm_bindgen(getter, js_name = entryCount)]
    pub fn entry_count(&self) -> f64 {
        self.0.entry_count() as f64
    }

    /// The tree's chunk capacity C.
    #[wasm_bindgen(getter)]
    pub fn capacity(&self) -> f64 {
        self.0.capacity() as f64
    }

    /// Height of the inner node holding this chunk's smallest key (0 for chunk 0).
    #[wasm_bindgen(getter, js_name = keyHeight)]
    pub fn key_height(&self) -> f64 {
        self.0.key_height() as f64
    }

    /// Entries in this chunk.
    #[wasm_bindgen(getter)]
    pub fn len(&self) -> f64 {
        self.0.len() as f64
    }

    /// This chunk's entries in key order, as a new array of fresh copies on
    /// every read.
    #[wasm_bindgen(getter, unchecked_return_type = "[key: Uint8Array, value: Uint8Array][]")]
    pub fn entries(&self) -> JsValue {
        convert::entries(self.0.entries())
    }
}

/// Collects verified chunks for one trusted root, in any order, and finishes
/// into the identical tree (`spec/chunk-format.md`, "Rebuild").
///
/// ```js
/// const rebuilder = new Rebuilder(root);
/// for (const [index, envelope] of arrivals) rebuilder.add(index, envelope);
/// const tree = rebuilder.finish(version); // once rebuilder.isComplete
/// ```
#[wasm_bindgen]
pub struct Rebuilder(core::Rebuilder);

#[wasm_bindgen]
impl Rebuilder {
    /// A rebuilder for the tree whose root is `root` (32 bytes).
    #[wasm_bindgen(constructor)]
    pub fn new(root: &Bytes) -> Result<Rebuilder, JsValue> {
        Ok(Rebuilder(core::Rebuilder::new(convert::root(root)?)))
    }

    /// The trusted root.
    #[wasm_bindgen(getter)]
    pub fn root(&self) -> Vec<u8> {
        self.0.root().to_vec()
    }

    /// Verifies envelope `bytes` as chunk `index` and keeps it; returns false
    /// if that chunk was already held. Throws a RebuildError with the chunk's
    /// ProofError code.
    pub fn add(&mut self, index: &Number, bytes: &Bytes) -> Result<bool, JsValue> {
        let (index, envelope) = (uint(index, "index")?, convert::bytes(bytes, "bytes")?);
        self.0.add(index, &envelope).map_err(throw)
    }

    /// Keeps a chunk that `verifyChunk` checked against this root; returns
    /// false if that chunk was already held. Takes the chunk over: `chunk`
    /// is freed and unusable afterwards, also when this throws (RebuildError
    /// `ROOT_MISMATCH` for a chunk of another root).
    #[wasm_bindgen(js_name = addVerified)]
    pub fn add_verified(&mut self, chunk: VerifiedChunk) -> Result<bool, JsValue> {
        self.0.add_verified(chunk.0).map_err(throw)
    }

    /// Indices not yet received, in order, at most `limit` of them (default:
    /// all). Empty until the first chunk has told the total.
    #[wasm_bindgen(unchecked_return_type = "number[]")]
    pub fn missing(&self, limit: Option<Number>) -> Result<JsValue, JsValue> {
        let limit = match limit {
            None => usize::MAX,
            Some(l) => count(&l, "limit")?,
        };
        Ok(convert::number_array(self.0.missing().take(limit)))
    }

    /// How many chunks are still missing, or `undefined` before the first
    /// chunk has told the total.
    #[wasm_bindgen(js_name = missingCount)]
    pub fn missing_count(&self) -> Option<f64> {
        self.0.missing_count().map(|n| n as f64)
    }

    /// The tree's chunk count, or `undefined` before the first chunk has told it.
    #[wasm_bindgen(getter, js_name = chunkCount)]
    pub fn chunk_count(&self) -> Option<f64> {
        self.0.chunk_count().map(|n| n as f64)
    }

    /// Chunks accepted so far.
    #[wasm_bindgen(getter)]
    pub fn received(&self) -> f64 {
        self.0.received() as f64
    }

    /// Whether every chunk is in.
    #[wasm_bindgen(getter, js_name = isComplete)]
    pub fn is_complete(&self) -> bool {
        self.0.is_complete()
    }

    /// The rebuilt tree, committed as version `version`. Consumes the
    /// rebuilder (it is freed, also when this throws). Throws RebuildError
    /// `REBUILD_INCOMPLETE` or `ROOT_MISMATCH`.
    pub fn finish(self, version: &Number) -> Result<Tree, JsValue> {
        let version = uint(version, "version")?;
        self.0.finish(version).map(Tree).map_err(throw)
    }
}

/// The provers and the export shared by `Tree` (of its committed version)
/// and `Snapshot`.
mod committed {
    use super::{bytes, core, opt_bytes, range_limit, throw, uint, Bytes, Number};
    use wasm_bindgen::JsValue;

    pub fn existence(s: &core::Snapshot, key: &Bytes) -> Result<Vec<u8>, JsValue> {
        Ok(s.prove_existence(&bytes(key, "key")?).map_err(throw)?.encode())
    }

    pub fn absence(s: &core::Snapshot, key: &Bytes) -> Result<Vec<u8>, JsValue> {
        Ok(s.prove_absence(&bytes(key, "key")?).map_err(throw)?.encode())
    }

    pub fn range(s: &core::Snapshot, start: &Bytes, end: Option<Bytes>, limit: &Number) -> Result<Vec<u8>, JsValue> {
        let (start, end, limit) = (bytes(start, "start")?, opt_bytes(end.as_deref(), "end")?, range_limit(limit)?);
        Ok(s.prove_range(&start, end.as_deref(), limit).map_err(throw)?.encode())
    }

    pub fn chunk(s: &core::Snapshot, index: &Number) -> Result<Vec<u8>, JsValue> {
        Ok(s.prove_chunk(uint(index, "index")?).map_err(throw)?.encode())
    }

    pub fn export(s: &core::Snapshot, index: &Number) -> Result<Vec<u8>, JsValue> {
        s.export_chunk_bytes(uint(index, "index")?).map_err(throw)
    }
}
