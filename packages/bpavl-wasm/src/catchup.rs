//! Catch-up (`docs/catchup.md`, `spec/wire.md` "Catch-up"): what a serving
//! snapshot answers to `NODES`, `LEAVES` and `ENTRIES`, and the client's
//! catch-up of a store's head to a newer root. Conversions only.

use bpavl_core as core;
use wasm_bindgen::prelude::*;

use crate::convert::{bytes, opt_bytes, range_error, throw, uint, Bytes, Number};
use crate::store::{js_write_set, opt_child, paged, record_puts, record_ref, table_key_list, Pages, StoredHead};
use crate::{Snapshot, VerifiedChunk};

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &str = r#"
/** A subtree that checked (`verifySubtree`). */
export interface VerifiedSubtree {
  capacity: number;
  nodes: {
    path: Uint8Array;
    height: number;
    chunkCount: number;
    entryCount: number;
    leftIsChunk: boolean;
    rightIsChunk: boolean;
    /** Whether its height and chunk count, or its inner child read after it, prove its kinds (`spec/catchup.md`, "Kinds"). */
    kindsProven: boolean;
    left: Uint8Array;
    right: Uint8Array;
    hash: Uint8Array;
    keyCopy: Uint8Array;
  }[];
}

/** A request a catch-up makes of a peer (`spec/wire.md`, "Catch-up"): a path in the new tree, and for `entries` the positions as a bitmap. */
export type CatchUpFetch =
  | { kind: 'nodes'; path: Uint8Array }
  | { kind: 'leaves'; path: Uint8Array }
  | { kind: 'entries'; path: Uint8Array; bitmap: Uint8Array };

/** What `CatchUp.finish()` returns. */
export interface CaughtUp {
  /** The last write: the new inner nodes, the stale marks and the version record. */
  writeSet: WriteSet;
  /** The tags (`addSubtree`'s `source`) of peers that sent a wrong key copy. */
  liars: number[];
  /**
   * The indices, in the new version's chunk order, of its changed chunks
   * (`changedChunks` of them: those that differ from every chunk of the
   * head, fetched or taken back from an earlier run), increasing. Every
   * other chunk is a head chunk, shared (perhaps at another index).
   */
  changedIndices: Uint32Array;
}
"#;

#[wasm_bindgen(module = "/src/convert.js")]
extern "C" {
    #[wasm_bindgen(js_name = catchUpFetch)]
    fn catch_up_fetch(kind: &str, path: &[u8], bitmap: &[u8]) -> JsValue;
    #[wasm_bindgen(js_name = caughtUp)]
    fn caught_up(write_set: JsValue, liars: &[u32], changed: &[u32]) -> JsValue;
    #[wasm_bindgen(js_name = progressItem)]
    fn progress_item(path: &[u8], levels: f64, answer: &[u8]) -> JsValue;
    #[wasm_bindgen(js_name = verifiedSubtree)]
    #[allow(clippy::too_many_arguments)]
    fn verified_subtree(
        capacity: f64,
        paths: &[u8],
        path_ends: &[u32],
        heights: &[u8],
        counts: &[f64],
        kinds: &[u8],
        hashes: &[u8],
        keys: &[u8],
        key_ends: &[u32],
    ) -> JsValue;
    #[wasm_bindgen(js_name = hashList)]
    fn hash_list(flat: &[u8]) -> JsValue;
    #[wasm_bindgen(js_name = positionedEntries)]
    fn positioned_entries(positions: &[u32], flat: &[u8], ends: &[u32]) -> JsValue;
}

/// Checks a `NODES` answer (`spec/catchup.md`, "Subtree"): `anchor` is the
/// trusted root for the top path, the position's hash below it; `capacity`
/// the client's. Returns `{ capacity, nodes }`, each node with its path,
/// counts, kinds, child hashes, hash and key copy. Throws a ProofError.
#[wasm_bindgen(js_name = verifySubtree, unchecked_return_type = "VerifiedSubtree")]
pub fn verify_subtree(
    path_bytes: &Bytes,
    anchor: &Bytes,
    levels: &Number,
    capacity: &Number,
    answer: &Bytes,
) -> Result<JsValue, JsValue> {
    let levels = u8::try_from(uint(levels, "levels")?).unwrap_or(u8::MAX);
    let capacity = usize::try_from(uint(capacity, "capacity")?).unwrap_or(usize::MAX);
    let anchor = crate::convert::root(anchor)?;
    let sub = core::verify_subtree(&path(path_bytes)?, &anchor, levels, capacity, &bytes(answer, "answer")?)
        .map_err(throw)?;
    let (mut paths, mut path_ends, mut heights, mut counts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut kinds, mut hashes, mut keys, mut key_ends) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (p, w, proven) in &sub.nodes {
        paths.extend(p.to_bytes());
        path_ends.push(paths.len() as u32);
        heights.push(w.height);
        counts.extend([w.chunks as f64, w.entries as f64]);
        kinds.push(u8::from(w.left_is_chunk) | (u8::from(w.right_is_chunk) << 1) | (u8::from(*proven) << 2));
        hashes.extend(w.left.iter().chain(&w.right).chain(&w.hash()));
        keys.extend(&w.key_copy);
        key_ends.push(keys.len() as u32);
    }
    let capacity = sub.capacity as f64;
    Ok(verified_subtree(capacity, &paths, &path_ends, &heights, &counts, &kinds, &hashes, &keys, &key_ends))
}

/// Checks a `LEAVES` answer against the chunk hash its parent names, in a
/// tree of `capacity`; returns the entry hashes. Throws a ProofError.
#[wasm_bindgen(js_name = verifyLeaves, unchecked_return_type = "Uint8Array[]")]
pub fn verify_leaves(chunk_hash: &Bytes, capacity: &Number, answer: &Bytes) -> Result<JsValue, JsValue> {
    let capacity = usize::try_from(uint(capacity, "capacity")?).unwrap_or(usize::MAX);
    let chunk = crate::convert::root(chunk_hash)?;
    let leaves = core::verify_leaves(&chunk, capacity, &bytes(answer, "answer")?).map_err(throw)?;
    Ok(hash_list(&leaves.concat()))
}

/// Checks an `ENTRIES` answer to a request with `bitmap` against the
/// chunk's `leaves`; returns `[position, key, value][]`. Throws a ProofError.
#[wasm_bindgen(js_name = verifyEntries, unchecked_return_type = "[position: number, key: Uint8Array, value: Uint8Array][]")]
pub fn verify_entries(leaves: Vec<Bytes>, bitmap: &Bytes, answer: &Bytes) -> Result<JsValue, JsValue> {
    let leaves = leaves.iter().map(|l| crate::convert::root(l)).collect::<Result<Vec<_>, _>>()?;
    let answer = bytes(answer, "answer")?;
    let got = core::verify_entries(&leaves, &bytes(bitmap, "bitmap")?, &answer).map_err(throw)?;
    let (mut flat, mut ends, mut positions) = (Vec::new(), Vec::new(), Vec::new());
    for (p, k, v) in got {
        positions.push(p as u32);
        flat.extend_from_slice(k);
        ends.push(flat.len() as u32);
        flat.extend_from_slice(v);
        ends.push(flat.len() as u32);
    }
    Ok(positioned_entries(&positions, &flat, &ends))
}

fn path(v: &Bytes) -> Result<core::TreePath, JsValue> {
    core::TreePath::decode(&bytes(v, "path")?).map_err(|_| range_error("not an encoded tree path"))
}

fn max(v: &Number) -> Result<usize, JsValue> {
    Ok(usize::try_from(uint(v, "maxBytes")?).unwrap_or(usize::MAX))
}

#[wasm_bindgen]
impl Snapshot {
    /// The `NODES` answer (`spec/wire.md`): the subtree (`0x0E`) under
    /// `path` (an encoded tree path), `levels` (1 … 48) deep, cut to fit
    /// `maxBytes`. Throws TreeError `CHUNK_OUT_OF_RANGE` if `path` names no
    /// inner node, `QUERY_INVALID` for `levels` out of range.
    #[wasm_bindgen(js_name = exportSubtree)]
    pub fn export_subtree(&self, path_bytes: &Bytes, levels: &Number, max_bytes: &Number) -> Result<Vec<u8>, JsValue> {
        let levels = u8::try_from(uint(levels, "levels")?).unwrap_or(u8::MAX);
        self.0.export_subtree(&path(path_bytes)?, levels, max(max_bytes)?).map_err(throw)
    }

    /// The `LEAVES` answer: the entry-hash list (`0x0F`) of the chunk at
    /// `path`. Throws TreeError `CHUNK_OUT_OF_RANGE` if `path` names no chunk.
    #[wasm_bindgen(js_name = exportLeaves)]
    pub fn export_leaves(&self, path_bytes: &Bytes) -> Result<Vec<u8>, JsValue> {
        self.0.export_leaves(&path(path_bytes)?).map_err(throw)
    }

    /// The `ENTRIES` answer: the entries at the positions `bitmap` asks for
    /// in the chunk at `path`, the first k that fit `maxBytes`. Throws
    /// TreeError `CHUNK_OUT_OF_RANGE`, or `QUERY_INVALID` for a bitmap that
    /// is not one of that chunk's.
    #[wasm_bindgen(js_name = exportEntries)]
    pub fn export_entries(&self, path_bytes: &Bytes, bitmap: &Bytes, max_bytes: &Number) -> Result<Vec<u8>, JsValue> {
        self.0.export_entries(&path(path_bytes)?, &bytes(bitmap, "bitmap")?, max(max_bytes)?).map_err(throw)
    }
}

/// A paged answer whose inner result may be the tree's refusal (thrown).
fn paged_answer(found: core::pages::Paged<Result<Vec<u8>, core::TreeError>>) -> Result<JsValue, JsValue> {
    if let core::pages::Paged::Done(Err(e)) = found {
        return Err(throw(e));
    }
    Ok(paged(found, |answer| answer.expect("refusals thrown above")))
}

#[wasm_bindgen]
impl Pages {
    /// The `NODES` answer of a stored version (as `Snapshot.exportSubtree`);
    /// the version's top as `decodeVersionRecord` names it. Throws TreeError
    /// `CHUNK_OUT_OF_RANGE` or `QUERY_INVALID`, StoreError `STORE_CORRUPT`.
    #[wasm_bindgen(js_name = exportSubtree, unchecked_return_type = "PagedBytes")]
    pub fn export_subtree(
        &mut self,
        top_table: Option<String>,
        top_key: Option<Bytes>,
        path_bytes: &Bytes,
        levels: &Number,
        max_bytes: &Number,
    ) -> Result<JsValue, JsValue> {
        let levels = u8::try_from(uint(levels, "levels")?).unwrap_or(u8::MAX);
        let found = self.0.export_subtree(opt_child(top_table, top_key)?, &path(path_bytes)?, levels, max(max_bytes)?);
        paged_answer(found.map_err(throw)?)
    }

    /// The `LEAVES` answer of a stored version (as `Snapshot.exportLeaves`).
    #[wasm_bindgen(js_name = exportLeaves, unchecked_return_type = "PagedBytes")]
    pub fn export_leaves(
        &mut self,
        top_table: Option<String>,
        top_key: Option<Bytes>,
        path_bytes: &Bytes,
    ) -> Result<JsValue, JsValue> {
        paged_answer(self.0.export_leaves(opt_child(top_table, top_key)?, &path(path_bytes)?).map_err(throw)?)
    }

    /// The `ENTRIES` answer of a stored version (as `Snapshot.exportEntries`),
    /// values from checked entry records.
    #[wasm_bindgen(js_name = exportEntries, unchecked_return_type = "PagedBytes")]
    pub fn export_entries(
        &mut self,
        top_table: Option<String>,
        top_key: Option<Bytes>,
        path_bytes: &Bytes,
        bitmap: &Bytes,
        max_bytes: &Number,
    ) -> Result<JsValue, JsValue> {
        let top = opt_child(top_table, top_key)?;
        let found = self.0.export_entries(top, &path(path_bytes)?, &bytes(bitmap, "bitmap")?, max(max_bytes)?);
        paged_answer(found.map_err(throw)?)
    }
}

/// A catch-up of a store's head to a newer trusted root (`docs/catchup.md`).
/// It names what to ask peers (`fetches`) and what to read from the store
/// (`needed`); every answer is checked as it is added, and a wrong one
/// throws a ProofError whose code bans its peer.
#[wasm_bindgen]
pub struct CatchUp(core::CatchUp);

#[wasm_bindgen]
impl CatchUp {
    /// A catch-up of `head` (committed: no pending writes, else RangeError)
    /// to `root`, as the version after the head's.
    #[wasm_bindgen(constructor)]
    pub fn new(head: &StoredHead, root: &Bytes) -> Result<CatchUp, JsValue> {
        let root = crate::convert::root(root)?;
        core::CatchUp::new(&head.0, root).map(CatchUp).ok_or_else(|| range_error("the head has uncommitted writes"))
    }

    /// The same catch-up again after an earlier run of it stopped: chunks
    /// that run wrote are read back (`needed` names them) and not fetched;
    /// give it the subtrees it kept with `restoreSubtree` first.
    pub fn resume(head: &StoredHead, root: &Bytes) -> Result<CatchUp, JsValue> {
        let root = crate::convert::root(root)?;
        core::CatchUp::resume(&head.0, root).map(CatchUp).ok_or_else(|| range_error("the head has uncommitted writes"))
    }

    /// A subtree answer an earlier run kept (in path order: parents first).
    /// Throws a ProofError for one that no longer checks (drop it).
    #[wasm_bindgen(js_name = restoreSubtree)]
    pub fn restore_subtree(&mut self, path_bytes: &Bytes, levels: &Number, answer: &Bytes) -> Result<(), JsValue> {
        let levels = u8::try_from(uint(levels, "levels")?).unwrap_or(u8::MAX);
        self.0.restore_subtree(&path(path_bytes)?, levels, &bytes(answer, "answer")?).map_err(throw)
    }

    /// Subtree answers taken since the last call, as `[path, levels, answer]`, for a resume to take again.
    #[wasm_bindgen(js_name = takeProgress, unchecked_return_type = "[path: Uint8Array, levels: number, answer: Uint8Array][]")]
    pub fn take_progress(&mut self) -> Vec<JsValue> {
        self.0
            .take_progress()
            .into_iter()
            .map(|(p, levels, answer)| progress_item(&p.to_bytes(), f64::from(levels), &answer))
            .collect()
    }

    /// Chunks taken back from an earlier run.
    #[wasm_bindgen(getter, js_name = restoredChunks)]
    pub fn restored_chunks(&self) -> f64 {
        self.0.restored_chunks() as f64
    }

    /// The version the catch-up commits.
    #[wasm_bindgen(getter)]
    pub fn version(&self) -> f64 {
        self.0.version() as f64
    }

    /// Whether every piece of the new tree is in.
    #[wasm_bindgen(getter, js_name = isFetched)]
    pub fn is_fetched(&self) -> bool {
        self.0.is_fetched()
    }

    /// Whether the root's tree has another capacity than the store's.
    #[wasm_bindgen(getter, js_name = capacityMismatch)]
    pub fn capacity_mismatch(&self) -> bool {
        self.0.capacity_mismatch()
    }

    /// Chunks of the new tree found to differ from the head's, so far.
    #[wasm_bindgen(getter, js_name = changedChunks)]
    pub fn changed_chunks(&self) -> f64 {
        self.0.changed_chunks() as f64
    }

    /// What to ask peers now, at most `limit` requests, in a stable order
    /// (requests in flight may be listed again).
    #[wasm_bindgen(unchecked_return_type = "CatchUpFetch[]")]
    pub fn fetches(&self, limit: &Number) -> Result<Vec<JsValue>, JsValue> {
        let limit = usize::try_from(uint(limit, "limit")?).unwrap_or(usize::MAX);
        Ok(self
            .0
            .fetches(limit)
            .into_iter()
            .map(|f| match f {
                core::Fetch::Nodes(p) => catch_up_fetch("nodes", &p.to_bytes(), &[]),
                core::Fetch::Leaves(p) => catch_up_fetch("leaves", &p.to_bytes(), &[]),
                core::Fetch::Entries(p, bitmap) => catch_up_fetch("entries", &p.to_bytes(), &bitmap),
            })
            .collect())
    }

    /// Adds a `NODES` answer asked with `levels`; `source` tags the peer.
    #[wasm_bindgen(js_name = addSubtree)]
    pub fn add_subtree(
        &mut self,
        path_bytes: &Bytes,
        levels: &Number,
        answer: &Bytes,
        source: &Number,
    ) -> Result<(), JsValue> {
        let levels = u8::try_from(uint(levels, "levels")?).unwrap_or(u8::MAX);
        let source = u32::try_from(uint(source, "source")?).map_err(|_| range_error("source is a u32"))?;
        self.0.add_subtree(&path(path_bytes)?, levels, &bytes(answer, "answer")?, source).map_err(throw)
    }

    /// The first chunk, verified against the root, after a peer answered
    /// the top's `NODES` with `OUT_OF_RANGE`: true if the tree is that one
    /// chunk, false if it has more (that peer lied).
    #[wasm_bindgen(js_name = addTopChunk)]
    pub fn add_top_chunk(&mut self, chunk: &VerifiedChunk) -> bool {
        self.0.add_top_chunk(chunk.0.clone())
    }

    /// The index of the changed chunk at `path`, once the counts left of it
    /// are known (`undefined` before): to ask it whole, as a `CHUNK`.
    #[wasm_bindgen(js_name = chunkIndex)]
    pub fn chunk_index(&self, path_bytes: &Bytes) -> Result<Option<f64>, JsValue> {
        Ok(self.0.chunk_index(&path(path_bytes)?).map(|i| i as f64))
    }

    /// The changed chunk at `path` whole, from a peer that serves no
    /// `LEAVES` or `ENTRIES` (verified against the root at its index by
    /// `verifyChunk`). Throws ProofError `CHUNK_INDEX_MISMATCH` if it is not
    /// the chunk the path names.
    #[wasm_bindgen(js_name = addChunk)]
    pub fn add_chunk(&mut self, path_bytes: &Bytes, chunk: &VerifiedChunk) -> Result<(), JsValue> {
        self.0.add_chunk(&path(path_bytes)?, chunk.0.clone()).map_err(throw)
    }

    /// Adds a `LEAVES` answer.
    #[wasm_bindgen(js_name = addLeaves)]
    pub fn add_leaves(&mut self, path_bytes: &Bytes, answer: &Bytes) -> Result<(), JsValue> {
        self.0.add_leaves(&path(path_bytes)?, &bytes(answer, "answer")?).map_err(throw)
    }

    /// Adds an `ENTRIES` answer to the request with `bitmap`.
    #[wasm_bindgen(js_name = addEntries)]
    pub fn add_entries(&mut self, path_bytes: &Bytes, bitmap: &Bytes, answer: &Bytes) -> Result<(), JsValue> {
        self.0.add_entries(&path(path_bytes)?, &bytes(bitmap, "bitmap")?, &bytes(answer, "answer")?).map_err(throw)
    }

    /// Old chunk records to read now, as `[table, key]`; `supply` each.
    /// Throws StoreError `STORE_CORRUPT`.
    #[wasm_bindgen(unchecked_return_type = "[table: RecordTable, key: Uint8Array][]")]
    pub fn needed(&mut self) -> Result<JsValue, JsValue> {
        self.0.needed().map(|n| table_key_list(&n)).map_err(throw)
    }

    /// Hands over a chunk record `needed` named (`undefined`: the store
    /// lacks it). Throws StoreError `STORE_CORRUPT`.
    pub fn supply(&mut self, key: &Bytes, value: Option<Bytes>) -> Result<(), JsValue> {
        let (r, value) = (record_ref(key)?, opt_bytes(value.as_deref(), "value")?);
        self.0.supply_record(&r, value.as_deref()).map_err(throw)
    }

    /// Records made since the last call (entries and chunk records of the
    /// new version), to write before `finish`'s write set.
    #[wasm_bindgen(js_name = takePuts, unchecked_return_type = "[table: RecordTable, key: Uint8Array, value: Uint8Array][]")]
    pub fn take_puts(&mut self) -> JsValue {
        let (tables, flat, ends) = crate::store::flat_puts(&self.0.take_puts());
        record_puts(&tables, &flat, &ends)
    }

    /// The last write, once everything is fetched and `needed` names
    /// nothing. Throws StoreError `STORE_CORRUPT` before that.
    #[wasm_bindgen(unchecked_return_type = "CaughtUp")]
    pub fn finish(self) -> Result<JsValue, JsValue> {
        let root = self.0.root();
        // Chunk indices are below MAX_CHUNKS (2^32 - 1).
        let changed: Vec<u32> = self.0.changed_indices().unwrap_or_default().into_iter().map(|i| i as u32).collect();
        let (w, liars) = self.0.finish().map_err(throw)?;
        Ok(caught_up(js_write_set(&root, &w), &liars, &changed))
    }
}
