//! The state store's calls into the core (`docs/store.md`,
//! `spec/store-format.md`): a commit's write set, the loader that reads a
//! version back from records, and the store record. Conversions only.

use bpavl_core as core;
use bpavl_core::record::{
    decode_store, encode_store, stale_key, store_layout, Ref, Table, RECORD_KEY_LEN, STORE_LAYOUT,
};
use wasm_bindgen::prelude::*;

use crate::convert::{bytes, count, opt_bytes, range_error, range_limit, throw, throw_saying, uint, Bytes, Number};
use crate::Tree;

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &str = r#"
/** A store table that holds records (`spec/store-format.md`). */
export type RecordTable = 'nodes' | 'chunks' | 'entries' | 'values';

/** What `Tree.commitToStore()` returns: the records one commit adds to a store. */
export interface WriteSet {
  /** The new version number. */
  version: number;
  /** The new root hash, 32 bytes. */
  root: Uint8Array;
  /** New records: table, record key (40 bytes), record. */
  puts: [table: RecordTable, key: Uint8Array, value: Uint8Array][];
  /** Keys of the `stale` table (49 bytes each) for the records this version replaced. */
  stale: Uint8Array[];
  /**
   * Records born at `version` that an earlier piece of the batch wrote
   * ahead (`StoredHead.writeAhead`) and the version does not use: delete
   * them in the same write, before the puts (which may write a key again).
   */
  discarded: [table: RecordTable, key: Uint8Array][];
  /** The value of `versions[u64be(version)]`: written last, it makes the version visible. */
  versionRecord: Uint8Array;
}

/** What `StoredHead.writeAhead()` returns: a piece of a batch, born at the coming version. */
export interface WrittenAhead {
  /** New records: table, record key (40 bytes), record. */
  puts: [table: RecordTable, key: Uint8Array, value: Uint8Array][];
  /** Keys of the `stale` table (49 bytes each) for the records they replace. */
  stale: Uint8Array[];
  /** Records an earlier piece wrote that the batch no longer uses: delete them in the same write, before the puts. */
  discarded: [table: RecordTable, key: Uint8Array][];
  /** The bytes the chunks it wrote held: `residentBytes` fell by this much. */
  unloaded: number;
}
"#;

#[wasm_bindgen(module = "/src/convert.js")]
extern "C" {
    #[wasm_bindgen(js_name = writeSet)]
    fn write_set(
        version: f64,
        root: &[u8],
        put_tables: &[u8],
        put_flat: &[u8],
        put_ends: &[u32],
        stale_flat: &[u8],
        discarded_tables: &[u8],
        discarded_flat: &[u8],
        version_record: &[u8],
    ) -> JsValue;
    #[wasm_bindgen(js_name = writtenAhead)]
    fn written_ahead(
        put_tables: &[u8],
        put_flat: &[u8],
        put_ends: &[u32],
        stale_flat: &[u8],
        discarded_tables: &[u8],
        discarded_flat: &[u8],
        unloaded: f64,
    ) -> JsValue;
    #[wasm_bindgen(js_name = recordPuts)]
    pub(crate) fn record_puts(put_tables: &[u8], put_flat: &[u8], put_ends: &[u32]) -> JsValue;
    #[wasm_bindgen(js_name = chunkWrite)]
    fn chunk_write(index: f64, put_tables: &[u8], put_flat: &[u8], put_ends: &[u32], progress: &[u8]) -> JsValue;
    #[wasm_bindgen(js_name = tableKeys)]
    fn table_keys(tables: &[u8], flat: &[u8]) -> JsValue;
    #[wasm_bindgen(js_name = tableKey)]
    fn table_key(table: u8, key: &[u8]) -> JsValue;
    #[wasm_bindgen(js_name = staleKeys)]
    fn stale_keys(flat: &[u8]) -> JsValue;
}

fn table(name: &str) -> Result<Table, JsValue> {
    match name {
        "nodes" => Ok(Table::Nodes),
        "chunks" => Ok(Table::Chunks),
        "entries" => Ok(Table::Entries),
        "values" => Ok(Table::Values),
        _ => Err(range_error(&format!("unknown record table {name:?}"))),
    }
}

/// Records to fetch as table ids and their keys laid end to end.
fn flat_refs(wanted: &[(Table, Ref)]) -> (Vec<u8>, Vec<u8>) {
    (wanted.iter().map(|(t, _)| *t as u8).collect(), wanted.iter().flat_map(|(_, r)| r.key()).collect())
}

/// Records to fetch, as `[table, key][]`.
pub(crate) fn table_key_list(wanted: &[(Table, Ref)]) -> JsValue {
    let (tables, flat) = flat_refs(wanted);
    table_keys(&tables, &flat)
}

pub(crate) fn record_ref(key: &Bytes) -> Result<Ref, JsValue> {
    let key = bytes(key, "key")?;
    Ref::from_key(&key).ok_or_else(|| range_error(&format!("a record key is {RECORD_KEY_LEN} bytes")))
}

#[wasm_bindgen]
impl Tree {
    /// Commits like `commit()` and returns what a store must write for the
    /// new version (`docs/store.md`): every record of a tree never stored
    /// before, afterwards only the changed ones.
    #[wasm_bindgen(js_name = commitToStore, unchecked_return_type = "WriteSet")]
    pub fn commit_to_store(&mut self) -> JsValue {
        let (commit, w) = self.0.commit_to_store();
        js_write_set(&commit.root, &w)
    }
}

/// Record puts laid end to end for the JS side: table ids, `key ‖ record`, and each one's end.
/// The buffer is sized once: grown by doubling, a bulk commit's 600 MB of
/// records briefly needed 1.5 GB of a WASM memory limited to 4 GiB.
pub(crate) fn flat_puts(puts: &[(Table, Ref, Vec<u8>)]) -> (Vec<u8>, Vec<u8>, Vec<u32>) {
    let bytes = puts.iter().map(|(_, _, value)| RECORD_KEY_LEN + value.len()).sum();
    let (mut tables, mut flat, mut ends) =
        (Vec::with_capacity(puts.len()), Vec::with_capacity(bytes), Vec::with_capacity(puts.len()));
    for (t, r, value) in puts {
        tables.push(*t as u8);
        flat.extend_from_slice(&r.key());
        flat.extend_from_slice(value);
        ends.push(flat.len() as u32);
    }
    (tables, flat, ends)
}

/// The keys of the stale marks of `w`, laid end to end.
fn flat_stale(w: &core::WriteSet) -> Vec<u8> {
    flat_stale_marks(w.version, &w.stale)
}

/// The `stale` keys of records used by no version `≥ version`, laid end to end.
fn flat_stale_marks(version: u64, stale: &[(Table, Ref)]) -> Vec<u8> {
    stale.iter().flat_map(|(t, r)| stale_key(version, *t, r)).collect()
}

fn js_chunk_write(w: &core::ChunkWrite) -> JsValue {
    let (tables, flat, ends) = flat_puts(&w.puts);
    chunk_write(w.index as f64, &tables, &flat, &ends, &w.progress)
}

pub(crate) fn js_write_set(root: &core::Hash, w: &core::WriteSet) -> JsValue {
    let (tables, flat, ends) = flat_puts(&w.puts);
    let (discarded_tables, discarded_flat) = flat_refs(&w.discarded);
    write_set(
        w.version as f64,
        root,
        &tables,
        &flat,
        &ends,
        &flat_stale(w),
        &discarded_tables,
        &discarded_flat,
        &w.version_record,
    )
}

#[wasm_bindgen(typescript_custom_section)]
const SYNC_TYPES: &str = r#"
/** What `StoreSync.add()` (or `takeReady()`) returns: one chunk's records, to be written in one atomic write. */
export interface ChunkWrite {
  /** The chunk's index in the tree. */
  index: number;
  /** Its entry records and its chunk record: table, record key (40 bytes), record (none for a chunk a head holds). */
  puts: [table: RecordTable, key: Uint8Array, value: Uint8Array][];
  /** Its progress record (`spec/store-format.md`, "Sync progress"), kept under its chunk index. */
  progress: Uint8Array;
}
"#;

/// A sync into a store (`spec/store-format.md`, "Sync progress"): each
/// verified chunk becomes the records it adds, a chunk stored by an earlier
/// run is checked again and taken back, and the finished sync is the write
/// set of one version whose root is the trusted root.
#[wasm_bindgen]
pub struct StoreSync(core::StoreSync);

#[wasm_bindgen]
impl StoreSync {
    /// A sync of the tree under `root` (32 bytes) as version `version`.
    #[wasm_bindgen(constructor)]
    pub fn new(root: &Bytes, version: &Number) -> Result<StoreSync, JsValue> {
        Ok(StoreSync(core::StoreSync::new(crate::convert::root(root)?, uint(version, "version")?)))
    }

    /// A sync of the tree under `root` as the next version of `head` (the
    /// store's head, loaded; `firstKey`, its smallest key as read from the
    /// store, or `undefined`, and then the head's first chunk is not shared):
    /// a chunk the head holds is shared, not written (`spec/store-format.md`,
    /// "Syncing as the next version"). Add only chunks of the head's
    /// capacity. Throws StoreError `STORE_CORRUPT` if the head has writes
    /// not committed.
    pub fn next(head: &StoredHead, root: &Bytes, first_key: Option<Bytes>) -> Result<StoreSync, JsValue> {
        let root = crate::convert::root(root)?;
        let first_key = opt_bytes(first_key.as_deref(), "firstKey")?;
        core::StoreSync::next(&head.0, root, first_key.as_deref())
            .map(StoreSync)
            .ok_or_else(|| throw(core::StoreError::Corrupt))
    }

    /// The tree's chunk count, or `undefined` before a chunk has told it.
    #[wasm_bindgen(getter, js_name = chunkCount)]
    pub fn chunk_count(&self) -> Option<f64> {
        self.0.chunk_count().map(|n| n as f64)
    }

    /// The tree's capacity, or `undefined` before a chunk has told it.
    #[wasm_bindgen(getter)]
    pub fn capacity(&self) -> Option<f64> {
        self.0.capacity().map(|n| n as f64)
    }

    /// Chunks stored so far, added or restored.
    #[wasm_bindgen(getter)]
    pub fn received(&self) -> f64 {
        self.0.received() as f64
    }

    /// Whether chunk `index` is stored.
    pub fn has(&self, index: &Number) -> Result<bool, JsValue> {
        Ok(self.0.has(uint(index, "index")?))
    }

    /// The records that store a chunk `verifyChunk` checked against this
    /// root, or `undefined` if it is already stored. Takes the chunk over
    /// (`chunk` is freed afterwards, also when this throws RebuildError
    /// `ROOT_MISMATCH` for a chunk of another root).
    #[wasm_bindgen(unchecked_return_type = "ChunkWrite | undefined")]
    pub fn add(&mut self, chunk: crate::VerifiedChunk) -> Result<JsValue, JsValue> {
        Ok(self.0.add(chunk.0).map_err(throw)?.map_or(JsValue::UNDEFINED, |w| js_chunk_write(&w)))
    }

    /// As a head's next version: the head chunk records to read now, as
    /// `[table, key]`, for the chunks waiting for them; `supply` each, then
    /// `takeReady()`.
    #[wasm_bindgen(unchecked_return_type = "[table: RecordTable, key: Uint8Array][]")]
    pub fn needed(&mut self) -> JsValue {
        table_key_list(&self.0.needed())
    }

    /// Hands over a record `needed` named (`undefined`: the store lacks it).
    /// Throws StoreError `STORE_CORRUPT`.
    pub fn supply(&mut self, key: &Bytes, value: Option<Bytes>) -> Result<(), JsValue> {
        let (r, value) = (record_ref(key)?, opt_bytes(value.as_deref(), "value")?);
        self.0.supply(&r, value.as_deref()).map_err(throw)
    }

    /// As a head's next version: the chunks whose records are ready to
    /// write (each in one atomic write with its progress record).
    #[wasm_bindgen(js_name = takeReady, unchecked_return_type = "ChunkWrite[]")]
    pub fn take_ready(&mut self) -> Vec<JsValue> {
        self.0.take_ready().iter().map(js_chunk_write).collect()
    }

    /// Bytes of chunks added and not ready yet (waiting for head chunks).
    #[wasm_bindgen(getter, js_name = waitingBytes)]
    pub fn waiting_bytes(&self) -> f64 {
        self.0.waiting_bytes() as f64
    }

    /// The `chunks` key of the chunk record a progress record names, or
    /// `undefined` for a chunk the head holds (nothing to read back).
    /// Throws StoreError `STORE_CORRUPT` for a progress record that does not decode.
    #[wasm_bindgen(js_name = chunkKey)]
    pub fn chunk_key(&self, progress: &Bytes) -> Result<Option<Vec<u8>>, JsValue> {
        let progress = bytes(progress, "progress")?;
        Ok(self.0.chunk_ref(&progress).map_err(throw)?.map(|r| r.key().to_vec()))
    }

    /// The `chunks` key of the base that a chunk record an earlier run
    /// wrote names (as a head's next version, a delta of a head record),
    /// to read and pass to `restore`; `undefined` for any other record.
    #[wasm_bindgen(js_name = restoreBase)]
    pub fn restore_base(&self, chunk_record: &Bytes) -> Result<Option<Vec<u8>>, JsValue> {
        let record = bytes(chunk_record, "chunkRecord")?;
        Ok(self.0.restore_base(&record).map(|r| r.key().to_vec()))
    }

    /// Takes back chunk `index` stored by an earlier run, from its progress
    /// record, its chunk record (`undefined`: missing) and, for a delta, its
    /// base's record (`restoreBase`), checked against the root as its
    /// envelope was. Throws StoreError `STORE_CORRUPT` if they do not check
    /// out: fetch the chunk again.
    pub fn restore(
        &mut self,
        index: &Number,
        progress: &Bytes,
        chunk_record: Option<Bytes>,
        base_record: Option<Bytes>,
    ) -> Result<(), JsValue> {
        let (index, progress) = (uint(index, "index")?, bytes(progress, "progress")?);
        let record = opt_bytes(chunk_record.as_deref(), "chunkRecord")?;
        let base = opt_bytes(base_record.as_deref(), "baseRecord")?;
        self.0.restore(index, &progress, record.as_deref(), base.as_deref()).map_err(throw)
    }

    /// Head chunk records to read now (a sync as the next version, once
    /// every chunk is in), as `[table, key]`: `staleSupply` each, then
    /// write `takeStale()`; empty when nothing is left to read.
    #[wasm_bindgen(js_name = staleNeeded, unchecked_return_type = "[table: RecordTable, key: Uint8Array][]")]
    pub fn stale_needed(&mut self) -> JsValue {
        table_key_list(&self.0.stale_needed())
    }

    /// Hands over a record `staleNeeded` named (`undefined`: the store
    /// lacks it). Throws StoreError `STORE_CORRUPT`.
    #[wasm_bindgen(js_name = staleSupply)]
    pub fn stale_supply(&mut self, key: &Bytes, value: Option<Bytes>) -> Result<(), JsValue> {
        let (r, value) = (record_ref(key)?, opt_bytes(value.as_deref(), "value")?);
        self.0.stale_supply(&r, value.as_deref()).map_err(throw)
    }

    /// Keys of the `stale` table (49 bytes each) made since the last call:
    /// records the head uses and the new version does not. Write them
    /// before `finish`'s write set.
    #[wasm_bindgen(js_name = takeStale, unchecked_return_type = "Uint8Array[]")]
    pub fn take_stale(&mut self) -> JsValue {
        stale_keys(&flat_stale_marks(self.0.version(), &self.0.take_stale()))
    }

    /// The inner node records and the version record that complete the sync,
    /// and (as a head's next version) the stale marks not taken yet. Throws
    /// RebuildError `REBUILD_INCOMPLETE` while chunks are missing or
    /// `staleNeeded` has more to read.
    #[wasm_bindgen(unchecked_return_type = "WriteSet")]
    pub fn finish(&mut self) -> Result<JsValue, JsValue> {
        let w = self.0.finish().map_err(throw)?;
        Ok(js_write_set(&self.0.root(), &w))
    }
}

/// A bulk load into a store that holds no version (`spec/store-format.md`,
/// "Bulk load"): entries in ascending key order become chunks of C − ⌊C/16⌋
/// and their records as they come, and `finish()` gives the balanced inner
/// tree over them and the version record.
#[wasm_bindgen]
pub struct StoreBulkLoad(Option<core::BulkLoad>);

impl StoreBulkLoad {
    fn load(&mut self) -> Result<&mut core::BulkLoad, JsValue> {
        self.0.as_mut().ok_or_else(|| range_error("the bulk load is finished"))
    }
}

#[wasm_bindgen]
impl StoreBulkLoad {
    /// A load of chunks of `capacity` (2 … 4096; TreeError `CAPACITY_INVALID`
    /// otherwise) as version `version` (≥ 1: 0 is the empty store's;
    /// `RangeError` otherwise).
    #[wasm_bindgen(constructor)]
    pub fn new(capacity: &Number, version: &Number) -> Result<StoreBulkLoad, JsValue> {
        let version = uint(version, "version")?;
        if version == 0 {
            return Err(range_error("version must be at least 1: version 0 is a store's before its first commit"));
        }
        let load = core::BulkLoad::new(count(capacity, "capacity")?, version).map_err(throw)?;
        Ok(StoreBulkLoad(Some(load)))
    }

    /// Adds the entry after the last one. Throws TreeError `KEYS_NOT_SORTED`
    /// unless its key is above the last key, `KEY_EMPTY`, `KEY_TOO_LONG`,
    /// `VALUE_TOO_LONG` or `TREE_FULL`; the load is unchanged then.
    pub fn push(&mut self, key: &Bytes, value: &Bytes) -> Result<(), JsValue> {
        let (key, value) = (bytes(key, "key")?, bytes(value, "value")?);
        self.load()?.push(&key, &value).map_err(throw)
    }

    /// Adds the entries of `records` as `push` would, one after another:
    /// records end to end, each `u16be(key length) ‖ u32be(value length) ‖
    /// key ‖ value`, as `@bpavl/store/sort` hands them out, so that a load
    /// makes no JavaScript object an entry. Throws as `push` does at the
    /// first entry it refuses (the ones before it stay pushed: `entries`
    /// says how many), and `RangeError` if the bytes end inside a record.
    #[wasm_bindgen(js_name = pushRecords)]
    pub fn push_records(&mut self, records: &Bytes) -> Result<(), JsValue> {
        let records = bytes(records, "records")?;
        let load = self.load()?;
        let mut rest = &records[..];
        while !rest.is_empty() {
            let (key, value, next) =
                split_record(rest).ok_or_else(|| range_error("the records end inside a record"))?;
            load.push(key, value).map_err(throw)?;
            rest = next;
        }
        Ok(())
    }

    /// Entries pushed so far.
    #[wasm_bindgen(getter)]
    pub fn entries(&self) -> f64 {
        self.0.as_ref().map_or(0.0, |l| l.entries() as f64)
    }

    /// Bytes of the records that `takePuts()` would hand over.
    #[wasm_bindgen(getter, js_name = putsBytes)]
    pub fn puts_bytes(&self) -> f64 {
        self.0.as_ref().map_or(0.0, |l| l.puts_bytes() as f64)
    }

    /// The records of the chunks filled since the last call: each chunk's
    /// entry records, then its chunk record (table, 40-byte key, record).
    #[wasm_bindgen(js_name = takePuts, unchecked_return_type = "[table: RecordTable, key: Uint8Array, value: Uint8Array][]")]
    pub fn take_puts(&mut self) -> Result<JsValue, JsValue> {
        let (tables, flat, ends) = flat_puts(&self.load()?.take_puts());
        Ok(record_puts(&tables, &flat, &ends))
    }

    /// The last chunks' records, the inner node records and the version
    /// record (`stale` and `discarded` are empty). Ends the load.
    #[wasm_bindgen(unchecked_return_type = "WriteSet")]
    pub fn finish(&mut self) -> Result<JsValue, JsValue> {
        let load = self.0.take().ok_or_else(|| range_error("the bulk load is finished"))?;
        let (root, w) = load.finish();
        Ok(js_write_set(&root, &w))
    }
}

/// The first record of `bytes` (`StoreBulkLoad::push_records`) as its key,
/// its value and the bytes after it; `None` if they end inside it.
fn split_record(bytes: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let (header, rest) = bytes.split_at_checked(6)?;
    let key_len = u16::from_be_bytes([header[0], header[1]]) as usize;
    let value_len = u32::from_be_bytes([header[2], header[3], header[4], header[5]]) as usize;
    let (key, rest) = rest.split_at_checked(key_len)?;
    let (value, rest) = rest.split_at_checked(value_len)?;
    Some((key, value, rest))
}

/// Loads one version of a store into a `Tree`, in rounds (`docs/store.md`):
/// fetch the records `wanted()` names (one `getMany` per table), hand each
/// to `supply`, and repeat until `wanted()` is empty; then `finish()`.
/// Every record is checked against the hash its parent names: a missing or
/// corrupt one throws StoreError `STORE_CORRUPT`.
#[wasm_bindgen]
pub struct Loader(Option<core::Loader>);

#[wasm_bindgen]
impl Loader {
    /// Starts loading `version` from its version record, in a store of
    /// `capacity`. Throws StoreError `STORE_CORRUPT`.
    #[wasm_bindgen(constructor)]
    pub fn new(version: &Number, version_record: &Bytes, capacity: &Number) -> Result<Loader, JsValue> {
        let (version, record) = (uint(version, "version")?, bytes(version_record, "versionRecord")?);
        let loader = core::Loader::new(version, &record, count(capacity, "capacity")?).map_err(throw)?;
        Ok(Loader(Some(loader)))
    }

    /// The records to fetch next as `[table, key]`, or `[]` once all are in.
    #[wasm_bindgen(unchecked_return_type = "[table: RecordTable, key: Uint8Array][]")]
    pub fn wanted(&mut self) -> Result<JsValue, JsValue> {
        Ok(table_key_list(&self.loader()?.wanted()))
    }

    /// Hands over a wanted record (`undefined`: the store lacks it). Throws
    /// StoreError `STORE_CORRUPT`.
    pub fn supply(&mut self, table_name: &str, key: &Bytes, value: Option<Bytes>) -> Result<(), JsValue> {
        let (t, r, value) = (table(table_name)?, record_ref(key)?, opt_bytes(value.as_deref(), "value")?);
        self.loader()?.supply(t, &r, value.as_deref()).map_err(throw)
    }

    /// Starts loading `version` as a writable paged head ([`StoredHead`]):
    /// its inner nodes only. Finish it with `finishHead()`.
    pub fn head(version: &Number, version_record: &Bytes, capacity: &Number) -> Result<Loader, JsValue> {
        let (version, record) = (uint(version, "version")?, bytes(version_record, "versionRecord")?);
        let loader = core::Loader::head(version, &record, count(capacity, "capacity")?).map_err(throw)?;
        Ok(Loader(Some(loader)))
    }

    /// The loaded tree at the loaded version. The loader is spent afterwards.
    /// Throws StoreError `STORE_CORRUPT` if records are still missing.
    pub fn finish(&mut self) -> Result<Tree, JsValue> {
        self.take(false)?.finish().map(Tree).map_err(throw)
    }

    /// The paged head a loader started with `Loader.head` loaded.
    #[wasm_bindgen(js_name = finishHead)]
    pub fn finish_head(&mut self) -> Result<StoredHead, JsValue> {
        self.take(true)?.finish().map(StoredHead).map_err(throw)
    }

    /// The loader, spent, if it loads a head (`head`) or a whole version (not).
    fn take(&mut self, head: bool) -> Result<core::Loader, JsValue> {
        match self.0.take() {
            Some(loader) if loader.is_head() == head => Ok(loader),
            Some(loader) => {
                self.0 = Some(loader);
                Err(range_error(if head {
                    "a whole version finishes with finish()"
                } else {
                    "a head finishes with finishHead()"
                }))
            }
            None => Err(range_error("the loader has finished")),
        }
    }

    fn loader(&mut self) -> Result<&mut core::Loader, JsValue> {
        self.0.as_mut().ok_or_else(|| range_error("the loader has finished"))
    }
}

/// The store record of a store whose trees have chunk capacity `capacity`.
/// Throws TreeError `CAPACITY_INVALID` outside 2 … 4096.
#[wasm_bindgen(js_name = encodeStoreRecord)]
pub fn encode_store_record(capacity: &Number) -> Result<Vec<u8>, JsValue> {
    encode_store(count(capacity, "capacity")?).map_err(throw)
}

/// The capacity a store record names. Throws StoreError `STORE_CORRUPT`,
/// which names the layout when the record is of another one.
#[wasm_bindgen(js_name = decodeStoreRecord)]
pub fn decode_store_record(record: &Bytes) -> Result<f64, JsValue> {
    let record = bytes(record, "record")?;
    decode_store(&record).map(|c| c as f64).map_err(|e| match store_layout(&record) {
        Some(layout) => throw_saying(
            &e,
            &format!(
                "the store is in layout {layout} and this version reads layout {STORE_LAYOUT}: sync or import it again"
            ),
        ),
        None => throw(e),
    })
}

#[wasm_bindgen(typescript_custom_section)]
const LOOKUP_TYPES: &str = r#"
/** What `Pages.lookup` answers (`bpavl_core::pages`). */
export type Lookup =
  /** Fetch these records, `supply` them, and look up again. */
  | { need: [table: RecordTable, key: Uint8Array][] }
  /** The key's entry record (its record key); `entryValue` checks it and gives the value. */
  | { found: Uint8Array }
  /** The key's value, checked (its chunk record was read for the question). */
  | { value: Uint8Array }
  /** The values record that holds the key's value (its record key) and the entry hash; `heldValue` checks it and gives the value. */
  | { held: Uint8Array; hash: Uint8Array }
  /** Absent once each of these entry records checks with its slot's key (`entryValue`; a neighbour whose value a values record holds was checked already). */
  | { absent: [entryKey: Uint8Array, slotKey: Uint8Array][] };

/** What `Pages.proveExistence` answers. */
export type Proven =
  /** Fetch these records, `supply` them, and ask again. */
  | { need: [table: RecordTable, key: Uint8Array][] }
  /** The entry record (check it with `entryValue`) and the existence proof, to verify against the version's root. */
  | { found: Uint8Array; proof: Uint8Array }
  /** The value, checked (its chunk record was read for the question), and the existence proof. */
  | { value: Uint8Array; proof: Uint8Array }
  /** The values record that holds the value and its entry hash (check it with `heldValue`), and the existence proof. */
  | { held: Uint8Array; hash: Uint8Array; proof: Uint8Array }
  /** No entry holds the key. */
  | { notFound: true };

/** What `Pages.proveAbsence` answers. */
export type ProvenAbsent =
  /** Fetch these records, `supply` them, and ask again. */
  | { need: [table: RecordTable, key: Uint8Array][] }
  /** The absence proof, to verify against the version's root. */
  | { proof: Uint8Array }
  /** The key is in the version (its entry record checked). */
  | { present: true };

/** What `Pages.proveRange`, `proveChunk` and `exportChunk` answer. */
export type PagedBytes =
  /** Fetch these records, `supply` them, and ask again. */
  | { need: [table: RecordTable, key: Uint8Array][] }
  /** The encoded proof or envelope (proofs: verify against the version's root). */
  | { done: Uint8Array };

/** A version record's fields (`spec/store-format.md`). */
export interface VersionRecord {
  /** The version's top as `[table, key]`; `undefined` for the empty tree. */
  top: [table: RecordTable, key: Uint8Array] | undefined;
  /** The root hash, 32 bytes. */
  root: Uint8Array;
  chunkCount: number;
  entryCount: number;
}
"#;

#[wasm_bindgen(module = "/src/convert.js")]
extern "C" {
    #[wasm_bindgen(js_name = lookupResult)]
    fn lookup_result(kind: u8, tables: &[u8], flat: &[u8], ends: &[u32]) -> JsValue;
    #[wasm_bindgen(js_name = provenResult)]
    fn proven_result(
        entry_key: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
        held: Option<Vec<u8>>,
        proof: Option<Vec<u8>>,
    ) -> JsValue;
    #[wasm_bindgen(js_name = absentResult)]
    fn absent_result(proof: Option<Vec<u8>>) -> JsValue;
    #[wasm_bindgen(js_name = pagedBytes)]
    fn paged_bytes(done: &[u8]) -> JsValue;
    #[wasm_bindgen(js_name = versionFields)]
    fn version_fields(top: JsValue, root: &[u8], chunk_count: f64, entry_count: f64) -> JsValue;
}

/// `{ need }` for records a question needs.
fn need_result(wanted: &[(Table, Ref)]) -> JsValue {
    let (tables, flat) = flat_refs(wanted);
    lookup_result(0, &tables, &flat, &[])
}

/// Lookups in stored versions with chunks cached under a byte budget
/// (`docs/store.md`, "Bounded memory"). Inner nodes stay once loaded.
#[wasm_bindgen]
pub struct Pages(pub(crate) core::pages::Pages, usize);

#[wasm_bindgen]
impl Pages {
    /// Pages of a store of chunk `capacity`, caching at most `budget` bytes
    /// of chunks (raised to what one chunk of the longest keys needs).
    #[wasm_bindgen(constructor)]
    pub fn new(capacity: &Number, budget: &Number) -> Result<Pages, JsValue> {
        let capacity = count(capacity, "capacity")?;
        Ok(Pages(core::pages::Pages::new(capacity, count(budget, "budget")?), capacity))
    }

    /// Looks `key` up in the version whose top `decodeVersionRecord` names. Throws
    /// StoreError `STORE_CORRUPT`.
    #[wasm_bindgen(unchecked_return_type = "Lookup")]
    pub fn lookup(&mut self, top_table: &str, top_key: &Bytes, key: &Bytes) -> Result<JsValue, JsValue> {
        let top = child(top_table, top_key)?;
        let (mut tables, mut flat, mut ends) = (Vec::new(), Vec::new(), Vec::new());
        let kind = match self.0.lookup(top, &bytes(key, "key")?).map_err(throw)? {
            core::pages::Lookup::Need(wanted) => {
                for (t, r) in wanted {
                    tables.push(t as u8);
                    flat.extend_from_slice(&r.key());
                }
                0
            }
            core::pages::Lookup::Found(core::pages::Value::Record(entry)) => {
                flat.extend_from_slice(&entry.key());
                1
            }
            core::pages::Lookup::Found(core::pages::Value::Here(value)) => {
                flat = value;
                3
            }
            core::pages::Lookup::Found(core::pages::Value::Held(record, hash)) => {
                flat.extend_from_slice(&record.key());
                flat.extend_from_slice(&hash);
                4
            }
            core::pages::Lookup::Absent(bracket) => {
                for (entry, slot_key) in bracket {
                    flat.extend_from_slice(&entry.key());
                    ends.push(flat.len() as u32);
                    flat.extend_from_slice(&slot_key);
                    ends.push(flat.len() as u32);
                }
                2
            }
        };
        Ok(lookup_result(kind, &tables, &flat, &ends))
    }

    /// The existence proof of `key` in the version whose top
    /// `decodeVersionRecord` names, read from the cache. Throws StoreError `STORE_CORRUPT`.
    #[wasm_bindgen(js_name = proveExistence, unchecked_return_type = "Proven")]
    pub fn prove_existence(&mut self, top_table: &str, top_key: &Bytes, key: &Bytes) -> Result<JsValue, JsValue> {
        let capacity = self.1;
        Ok(match self.0.witness(child(top_table, top_key)?, &bytes(key, "key")?).map_err(throw)? {
            core::pages::Witness::Need(wanted) => need_result(&wanted),
            core::pages::Witness::Found(value, witness) => {
                let proof = core::ExistenceProof { capacity, witness }.encode();
                match value {
                    core::pages::Value::Record(entry) => {
                        proven_result(Some(entry.key().to_vec()), None, None, Some(proof))
                    }
                    core::pages::Value::Held(record, hash) => {
                        proven_result(None, None, Some([&record.key()[..], &hash[..]].concat()), Some(proof))
                    }
                    core::pages::Value::Here(value) => proven_result(None, Some(value), None, Some(proof)),
                }
            }
            core::pages::Witness::NotFound => proven_result(None, None, None, None),
        })
    }

    /// The absence proof of `key` in the version whose top
    /// `decodeVersionRecord` names (`undefined`: the empty tree), its
    /// neighbours' values checked against their slots. Throws StoreError
    /// `STORE_CORRUPT`, ProofError `KEY_EMPTY` / `KEY_TOO_LONG`.
    #[wasm_bindgen(js_name = proveAbsence, unchecked_return_type = "ProvenAbsent")]
    pub fn prove_absence(
        &mut self,
        top_table: Option<String>,
        top_key: Option<Bytes>,
        key: &Bytes,
    ) -> Result<JsValue, JsValue> {
        let key = bytes(key, "key")?;
        core::codec::check_key(&key).map_err(throw)?;
        Ok(match self.0.prove_absence(opt_child(top_table, top_key)?, &key).map_err(throw)? {
            core::pages::Absence::Need(wanted) => need_result(&wanted),
            core::pages::Absence::Proof(proof) => absent_result(Some(proof.encode())),
            core::pages::Absence::Present => absent_result(None),
        })
    }

    /// Builds `range`'s proof in the version whose top `decodeVersionRecord`
    /// names (`undefined`: the empty tree); ask again with the same `range`
    /// after each `need`. Throws StoreError `STORE_CORRUPT`.
    #[wasm_bindgen(js_name = proveRange, unchecked_return_type = "PagedBytes")]
    pub fn prove_range(
        &mut self,
        top_table: Option<String>,
        top_key: Option<Bytes>,
        range: &mut PagedRange,
    ) -> Result<JsValue, JsValue> {
        let found = self.0.prove_range(opt_child(top_table, top_key)?, &mut range.0).map_err(throw)?;
        Ok(paged(found, |proof| proof.encode()))
    }

    /// The proof of chunk `index` (below the version's `chunkCount`). Throws StoreError `STORE_CORRUPT`.
    #[wasm_bindgen(js_name = proveChunk, unchecked_return_type = "PagedBytes")]
    pub fn prove_chunk(
        &mut self,
        top_table: Option<String>,
        top_key: Option<Bytes>,
        index: &Number,
    ) -> Result<JsValue, JsValue> {
        let found = self.0.prove_chunk(opt_child(top_table, top_key)?, uint(index, "index")?).map_err(throw)?;
        Ok(paged(found, |proof| proof.encode()))
    }

    /// The envelope of chunk `index` (below the version's `chunkCount`), its
    /// values from checked entry records. Throws StoreError `STORE_CORRUPT`.
    #[wasm_bindgen(js_name = exportChunk, unchecked_return_type = "PagedBytes")]
    pub fn export_chunk(
        &mut self,
        top_table: Option<String>,
        top_key: Option<Bytes>,
        index: &Number,
    ) -> Result<JsValue, JsValue> {
        let found = self.0.export_chunk(opt_child(top_table, top_key)?, uint(index, "index")?).map_err(throw)?;
        Ok(paged(found, |envelope| envelope.encode()))
    }

    /// Hands over a record a question needed (`undefined`: the store lacks it).
    /// Throws StoreError `STORE_CORRUPT`.
    pub fn supply(&mut self, table_name: &str, key: &Bytes, value: Option<Bytes>) -> Result<(), JsValue> {
        let (t, r, value) = (table(table_name)?, record_ref(key)?, opt_bytes(value.as_deref(), "value")?);
        self.0.supply(t, &r, value.as_deref()).map_err(throw)
    }

    /// Bytes of chunks cached now, counted from their contents (never above `budget`).
    #[wasm_bindgen(getter, js_name = residentBytes)]
    pub fn resident_bytes(&self) -> f64 {
        self.0.resident_bytes() as f64
    }

    #[wasm_bindgen(getter)]
    pub fn budget(&self) -> f64 {
        self.0.budget() as f64
    }

    /// Chunk lookups served from the cache.
    #[wasm_bindgen(getter)]
    pub fn hits(&self) -> f64 {
        self.0.hits_and_misses().0 as f64
    }

    /// Chunks loaded from the store.
    #[wasm_bindgen(getter)]
    pub fn misses(&self) -> f64 {
        self.0.hits_and_misses().1 as f64
    }
}

/// A range proof being built by `Pages.proveRange` across rounds of fetches.
#[wasm_bindgen]
pub struct PagedRange(core::pages::RangeCursor);

#[wasm_bindgen]
impl PagedRange {
    /// Every entry with `start ≤ key < end`, at most `limit` (1 … 65,536) of
    /// them. Throws ProofError (`QUERY_INVALID`, `KEY_TOO_LONG`, …).
    #[wasm_bindgen(constructor)]
    pub fn new(start: &Bytes, end: Option<Bytes>, limit: &Number) -> Result<PagedRange, JsValue> {
        let (start, end, limit) = (bytes(start, "start")?, opt_bytes(end.as_deref(), "end")?, range_limit(limit)?);
        core::pages::RangeCursor::new(&start, end.as_deref(), limit).map(PagedRange).map_err(throw)
    }
}

/// `{ need }` or `{ done }` with the answer encoded.
pub(crate) fn paged<T>(found: core::pages::Paged<T>, encode: impl FnOnce(T) -> Vec<u8>) -> JsValue {
    match found {
        core::pages::Paged::Need(wanted) => need_result(&wanted),
        core::pages::Paged::Done(answer) => paged_bytes(&encode(answer)),
    }
}

/// A version's top from `[table, key]`, or `undefined` for the empty tree.
pub(crate) fn opt_child(
    top_table: Option<String>,
    top_key: Option<Bytes>,
) -> Result<Option<core::record::Child>, JsValue> {
    match (top_table, top_key) {
        (Some(t), Some(k)) => Ok(Some(child(&t, &k)?)),
        _ => Ok(None),
    }
}

/// A version's top from `[table, key]`.
fn child(top_table: &str, top_key: &Bytes) -> Result<core::record::Child, JsValue> {
    match table(top_table)? {
        Table::Nodes => Ok(core::record::Child::Node(record_ref(top_key)?)),
        Table::Chunks => Ok(core::record::Child::Chunk(record_ref(top_key)?)),
        Table::Entries | Table::Values => Err(range_error("a version's top is a node or a chunk")),
    }
}

/// A version record's fields: its top as `[table, key]` (`undefined` for
/// the empty tree), root and counts. Throws StoreError `STORE_CORRUPT`.
#[wasm_bindgen(js_name = decodeVersionRecord, unchecked_return_type = "VersionRecord")]
pub fn decode_version_record(record: &Bytes, capacity: &Number) -> Result<JsValue, JsValue> {
    let record =
        core::record::VersionRecord::decode(&bytes(record, "record")?, count(capacity, "capacity")?).map_err(throw)?;
    let top = match record.top {
        None => JsValue::UNDEFINED,
        Some(core::record::Child::Node(r)) => table_key(Table::Nodes as u8, &r.key()),
        Some(core::record::Child::Chunk(r)) => table_key(Table::Chunks as u8, &r.key()),
    };
    Ok(version_fields(top, &record.root, record.chunk_count as f64, record.entry_count as f64))
}

/// The value of an entry record, checked against its record key's hash and
/// the key its slot lists. Throws StoreError `STORE_CORRUPT`.
#[wasm_bindgen(js_name = entryValue)]
pub fn entry_value(entry_key: &Bytes, record: &Bytes, slot_key: &Bytes) -> Result<Vec<u8>, JsValue> {
    let (r, record, slot_key) = (record_ref(entry_key)?, bytes(record, "record")?, bytes(slot_key, "slotKey")?);
    core::record::decode_entry(&record, &r.hash, &slot_key).map(<[u8]>::to_vec).map_err(throw)
}

/// The value values record `record` holds for `slot_key`, checked against
/// the entry hash `hash`. Throws StoreError `STORE_CORRUPT`.
#[wasm_bindgen(js_name = heldValue)]
pub fn held_value(record: &Bytes, slot_key: &Bytes, hash: &Bytes) -> Result<Vec<u8>, JsValue> {
    let (record, slot_key, hash) = (bytes(record, "record")?, bytes(slot_key, "slotKey")?, bytes(hash, "hash")?);
    let hash: core::Hash = hash.as_slice().try_into().map_err(|_| range_error("hash: expected 32 bytes"))?;
    core::record::held_value(&record, &slot_key, &hash).map(<[u8]>::to_vec).map_err(throw)
}

/// The writable head of a store, paged (`docs/store.md`, "The writable
/// head, paged"): inner nodes resident, chunks loaded as writes need them
/// and evicted after a commit. A write either applies, or changes nothing
/// and names the records to fetch and `supply` before it is called again.
#[wasm_bindgen]
pub struct StoredHead(pub(crate) core::Tree);

#[wasm_bindgen]
impl StoredHead {
    /// The head of an empty store of chunk `capacity` (2 … 4096).
    #[wasm_bindgen(constructor)]
    pub fn new(capacity: &Number) -> Result<StoredHead, JsValue> {
        core::Tree::new(count(capacity, "capacity")?).map(StoredHead).map_err(throw)
    }

    /// Hands over a record a write named (`undefined`: the store lacks it)
    /// and returns the bytes of the chunks it loaded (as `residentBytes`
    /// counts them; 0 when it loaded none yet). Throws StoreError
    /// `STORE_CORRUPT`.
    pub fn supply(&mut self, table_name: &str, key: &Bytes, value: Option<Bytes>) -> Result<f64, JsValue> {
        let (t, r, value) = (table(table_name)?, record_ref(key)?, opt_bytes(value.as_deref(), "value")?);
        self.0.supply_record(t, &r, value.as_deref()).map(|bytes| bytes as f64).map_err(throw)
    }

    /// Inserts or replaces `key` → `value` and returns true if the key was
    /// new; or, changing nothing, returns the chunk records to fetch first
    /// as `[table, key]`: `supply` each, then call again. `read`: the value
    /// a checked read found for `key` at the committed version, if the
    /// caller holds it; it confirms the key's slot in place of its entry
    /// record (`Tree::confirm_read`; a value that does not match is
    /// ignored). Throws TreeError `KEY_EMPTY`, `KEY_TOO_LONG`,
    /// `VALUE_TOO_LONG` or `TREE_FULL`, or StoreError `STORE_CORRUPT` when
    /// loaded keys contradict each other, and leaves the head unchanged.
    #[wasm_bindgen(unchecked_return_type = "boolean | [table: RecordTable, key: Uint8Array][]")]
    pub fn insert(&mut self, key: &Bytes, value: &Bytes, read: Option<Bytes>) -> Result<JsValue, JsValue> {
        let (key, value) = (bytes(key, "key")?, bytes(value, "value")?);
        if let Some(needed) = self.needed(&key, false, read)? {
            return Ok(needed);
        }
        self.0.insert(&key, &value).map(JsValue::from).map_err(throw)
    }

    /// Removes `key` and returns whether it was present; or, changing
    /// nothing, the records to fetch first (as `insert`, and `read` too).
    #[wasm_bindgen(unchecked_return_type = "boolean | [table: RecordTable, key: Uint8Array][]")]
    pub fn remove(&mut self, key: &Bytes, read: Option<Bytes>) -> Result<JsValue, JsValue> {
        let key = bytes(key, "key")?;
        if let Some(needed) = self.needed(&key, true, read)? {
            return Ok(needed);
        }
        Ok(self.0.remove(&key).into())
    }

    /// The chunk records to fetch and `supply` so that writes of `keys`
    /// find their chunks loaded: one round for many writes, where each
    /// write alone takes one. Call again until it names none.
    #[wasm_bindgen(unchecked_return_type = "[table: RecordTable, key: Uint8Array][]")]
    pub fn prefetch(&mut self, keys: Vec<Bytes>) -> Result<JsValue, JsValue> {
        let keys = keys.iter().map(|k| bytes(k, "key")).collect::<Result<Vec<_>, _>>()?;
        Ok(table_key_list(&self.0.needed_for_all(keys.iter().map(Vec::as_slice))))
    }

    /// The records a write of `key` needs first, if any; once none, the
    /// key's slot confirmed by `read` if it matches.
    fn needed(&mut self, key: &[u8], removing: bool, read: Option<Bytes>) -> Result<Option<JsValue>, JsValue> {
        let wanted = self.0.needed_for(key, removing).map_err(throw)?;
        if !wanted.is_empty() {
            return Ok(Some(table_key_list(&wanted)));
        }
        if let Some(read) = read {
            self.0.confirm_read(key, &bytes(&read, "read")?);
        }
        Ok(None)
    }

    /// The records to fetch and `supply` before `commitToStore`, as
    /// `[table, key]`: entry records (or chunk records holding values) that
    /// confirm a slot key a write relied on, and chunk records holding
    /// values that a chunk written whole copies.
    #[wasm_bindgen(unchecked_return_type = "[table: RecordTable, key: Uint8Array][]")]
    pub fn unconfirmed(&mut self) -> JsValue {
        table_key_list(&self.0.unconfirmed())
    }

    /// Commits the pending writes and returns what the store must write
    /// (as `Tree.commitToStore`). Throws a RangeError while `unconfirmed()`
    /// names records.
    #[wasm_bindgen(js_name = commitToStore, unchecked_return_type = "WriteSet")]
    pub fn commit_to_store(&mut self) -> Result<JsValue, JsValue> {
        self.confirmed()?;
        let (commit, w) = self.0.commit_to_store();
        Ok(js_write_set(&commit.root, &w))
    }

    /// A RangeError while `unconfirmed()` names records.
    fn confirmed(&mut self) -> Result<(), JsValue> {
        if !self.0.unconfirmed().is_empty() {
            return Err(range_error("supply the records unconfirmed() names before the commit"));
        }
        Ok(())
    }

    /// A piece of a batch too large to hold: writes changed chunks ahead,
    /// born at the coming version, and unloads them, until their records
    /// or the bytes they held reach `maxBytes`. Write what it returns (its
    /// `discarded` deleted first) and call it while `residentBytes` is too
    /// high, during the batch or before `commitToStore`. Throws a RangeError
    /// while `unconfirmed()` names records.
    #[wasm_bindgen(js_name = writeAhead, unchecked_return_type = "WrittenAhead")]
    pub fn write_ahead(&mut self, max_bytes: &Number) -> Result<JsValue, JsValue> {
        self.confirmed()?;
        let w = self.0.write_ahead(count(max_bytes, "maxBytes")?);
        let (tables, flat, ends) = flat_puts(&w.puts);
        let (discarded_tables, discarded_flat) = flat_refs(&w.discarded);
        Ok(written_ahead(&tables, &flat, &ends, &flat_stale(&w), &discarded_tables, &discarded_flat, w.unloaded as f64))
    }

    /// Unloads the oldest loaded chunks without unstored changes until the
    /// loaded ones take at most `budget` bytes: after a commit, or during a
    /// batch after `writeAhead`.
    pub fn evict(&mut self, budget: &Number) -> Result<(), JsValue> {
        self.0.evict(count(budget, "budget")?);
        Ok(())
    }

    /// Bytes of the loaded chunks, counted from their contents.
    #[wasm_bindgen(getter, js_name = residentBytes)]
    pub fn resident_bytes(&self) -> f64 {
        self.0.resident_bytes() as f64
    }
}
