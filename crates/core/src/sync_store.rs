//! Syncing straight into a state store (`spec/store-format.md`, "Sync
//! progress"). Each verified chunk becomes the records it adds: its entries,
//! its chunk record and a progress record that keeps its chunk path, so that
//! no chunk data stays in memory and an interrupted sync resumes from what
//! it stored, every stored chunk checked again against the root. The
//! finished sync writes the inner nodes and the version record from a few
//! facts per chunk (the active-nodes rebuild of `rebuild.rs`, over metadata).
//! A sync may also write the next version of a store that holds one
//! (`sync_next.rs`). No I/O: callers move the bytes.

use std::collections::{BTreeMap, HashSet};

use crate::codec::{put_varint, Reader};
use crate::envelope::VerifiedChunk;
use crate::error::{RebuildError, StoreError};
use crate::hash::{inner_hash, root_hash, Hash};
use crate::limits::MAX_HEIGHT;
use crate::path::ChunkPath;
use crate::persist::WriteSet;
use crate::record::{
    delta_base, full_record_puts, verify_slots, Child, ChunkRecord, Entry, NodeRecord, Ref, Table, VersionRecord,
};
use crate::sync_next::Head;
use crate::tree::Tree;

/// Format byte of a sync progress record.
pub const FORMAT_SYNC_PROGRESS: u8 = 0x0c;

/// What a stored chunk contributes to the inner tree.
#[derive(Debug, Clone)]
pub(crate) struct ChunkFacts {
    pub(crate) hash: Hash,
    pub(crate) entries: u64,
    /// As its chunk path declares (a bulk load, which shapes its own tree, keeps 0).
    pub(crate) key_height: u8,
    pub(crate) first_key: Box<[u8]>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    capacity: usize,
    chunks: u64,
}

/// The records one verified chunk adds to the store, written in one atomic
/// write so that a chunk is stored whole or not at all.
#[derive(Debug, Clone)]
pub struct ChunkWrite {
    /// The chunk's index in the tree (its progress record's key).
    pub index: u64,
    /// Its entry records and its chunk record (whole; as a head's next
    /// version, possibly a delta of a head record), born at the sync's
    /// version; none for a chunk a head holds.
    pub puts: Vec<(Table, Ref, Vec<u8>)>,
    /// Its progress record.
    pub progress: Vec<u8>,
}

/// A sync of the tree under `root` into a store, as version `version`.
///
/// ```
/// use bpavl_core::{verify_chunk, StoreSync, Tree};
/// let mut source = Tree::new(2).unwrap();
/// for i in 0u8..10 { source.insert(&[i + 1], &[i]).unwrap(); }
/// let root = source.commit().root;
/// let mut sync = StoreSync::new(root, 1);
/// for i in (0..source.chunk_count()).rev() {
///     let chunk = verify_chunk(&root, i, &source.head().export_chunk_bytes(i).unwrap()).unwrap();
///     let write = sync.add(chunk).unwrap().unwrap();
///     assert!(!write.puts.is_empty());
/// }
/// let finished = sync.finish().unwrap();
/// assert_eq!(finished.version, 1);
/// ```
#[derive(Debug)]
pub struct StoreSync {
    root: Hash,
    version: u64,
    layout: Option<Layout>,
    /// By index: only what has arrived (the chunk count is authenticated but may be huge).
    chunks: BTreeMap<u64, ChunkFacts>,
    /// The head this sync writes the next version of, if the store holds one.
    head: Option<Head>,
}

impl StoreSync {
    pub fn new(root: Hash, version: u64) -> StoreSync {
        StoreSync { root, version, layout: None, chunks: BTreeMap::new(), head: None }
    }

    /// A sync of the tree under `root` as the next version of `head` (a
    /// tree loaded from the store, every record stored; `first_key`, its
    /// smallest key, as read from it). A chunk whose hash a head chunk has
    /// is shared, not written (the head's first only if `first_key` is
    /// given). Chunks of another capacity than the head's must not be
    /// added (the caller checks: [`StoreSync::head_capacity`]). `None` if
    /// the head has writes not committed.
    pub fn next(head: &Tree, root: Hash, first_key: Option<&[u8]>) -> Option<StoreSync> {
        let version = head.head().version() + 1;
        Some(StoreSync { head: Some(Head::of(head, first_key)?), ..StoreSync::new(root, version) })
    }

    /// The capacity of the head this sync writes the next version of.
    pub fn head_capacity(&self) -> Option<usize> {
        self.head.as_ref().map(Head::capacity)
    }

    /// The head's chunk record with hash `hash`, if the new version shares
    /// it; and the chunk's first key.
    fn held(&self, hash: &Hash) -> Option<(Ref, &[u8])> {
        self.head.as_ref()?.held(hash)
    }

    pub fn root(&self) -> Hash {
        self.root
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    /// The tree's chunk count, once a chunk has told it (authenticated).
    pub fn chunk_count(&self) -> Option<u64> {
        self.layout.map(|l| l.chunks)
    }

    /// The tree's capacity, once a chunk has told it (authenticated).
    pub fn capacity(&self) -> Option<usize> {
        self.layout.map(|l| l.capacity)
    }

    /// Chunks stored so far (added or restored).
    pub fn received(&self) -> u64 {
        self.chunks.len() as u64
    }

    pub fn has(&self, index: u64) -> bool {
        self.chunks.contains_key(&index)
    }

    /// Whether every chunk is in.
    pub fn is_complete(&self) -> bool {
        self.chunk_count() == Some(self.received())
    }

    /// The records that store `chunk` (verified against this root), or
    /// `None` if it is already held. As a head's next version, always
    /// `None`: the write comes from [`StoreSync::take_ready`], once the
    /// head chunks around it are read ([`StoreSync::needed`]).
    pub fn add(&mut self, chunk: VerifiedChunk) -> Result<Option<ChunkWrite>, RebuildError> {
        if chunk.root != self.root {
            return Err(RebuildError::Chunk(crate::ProofError::RootMismatch));
        }
        if self.chunks.contains_key(&chunk.index) {
            return Ok(None);
        }
        let VerifiedChunk { index, chunk_count, capacity, key_height, chunk, path, .. } = chunk;
        self.layout.get_or_insert(Layout { capacity, chunks: chunk_count });
        let hash = chunk.hash();
        let progress = SyncProgress { capacity, key_height, entries: chunk.len(), hash, path }.encode();
        let facts = ChunkFacts { hash, entries: chunk.len() as u64, key_height, first_key: chunk.first_key().into() };
        self.chunks.insert(index, facts);
        let shared = self.held(&hash).is_some();
        if let Some(head) = self.head.as_mut() {
            if shared {
                head.share(&hash);
                head.ready(ChunkWrite { index, puts: Vec::new(), progress });
            } else {
                head.queue(index, chunk, progress, self.version);
            }
            return Ok(None);
        }
        let puts =
            full_record_puts(Ref { birth: self.version, hash }, &chunk.held_slots(), &chunk.group_roots(), |i| {
                chunk.value(i)
            });
        Ok(Some(ChunkWrite { index, puts, progress }))
    }

    /// As a head's next version: the head chunk records to read now, for
    /// the changed chunks waiting for them.
    pub fn needed(&mut self) -> Vec<(Table, Ref)> {
        self.head.as_mut().map(Head::needed).unwrap_or_default()
    }

    /// Hands over a record [`StoreSync::needed`] named (`None`: the store
    /// lacks it). Its slots must verify against its hash.
    pub fn supply(&mut self, r: &Ref, bytes: Option<&[u8]>) -> Result<(), StoreError> {
        let version = self.version;
        self.head.as_mut().map_or(Ok(()), |h| h.supply(r, bytes, version))
    }

    /// As a head's next version: the chunks written since the last call.
    pub fn take_ready(&mut self) -> Vec<ChunkWrite> {
        self.head.as_mut().map(Head::take_ready).unwrap_or_default()
    }

    /// Bytes of chunks added and not written yet (waiting for head chunks).
    pub fn waiting_bytes(&self) -> usize {
        self.head.as_ref().map_or(0, Head::waiting_bytes)
    }

    /// The key of the chunk record that progress record `progress` names,
    /// or `None` for a chunk the head holds (shared: nothing to read back).
    pub fn chunk_ref(&self, progress: &[u8]) -> Result<Option<Ref>, StoreError> {
        let hash = SyncProgress::decode(progress)?.hash;
        Ok(self.held(&hash).is_none().then_some(Ref { birth: self.version, hash }))
    }

    /// Takes back chunk `index` stored by an earlier run: its progress
    /// record and its chunk record must verify against this root exactly as
    /// the envelope did (the chunk hash from the record's slots, folded up
    /// the stored path). `STORE_CORRUPT` otherwise: the caller drops the
    /// progress record and fetches the chunk again. Entry records are
    /// checked when they are read, as in every stored version.
    /// A chunk the head holds is taken back from its progress record alone
    /// (`chunk_record` is `None`): the head's record was checked when it was
    /// written. A chunk written as a delta needs its base's record
    /// (`base_record`, read as [`StoreSync::restore_base`] names it).
    pub fn restore(
        &mut self,
        index: u64,
        progress: &[u8],
        chunk_record: Option<&[u8]>,
        base_record: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        let p = SyncProgress::decode(progress)?;
        let (first_key, shared, base) = match self.held(&p.hash) {
            Some((_, first_key)) => (first_key.into(), true, None),
            None => {
                let (first_key, base) = self.check_restored(&p, chunk_record, base_record)?;
                (first_key, false, base)
            }
        };
        if self.head_capacity().is_some_and(|c| c != p.capacity) {
            return Err(StoreError::Corrupt);
        }
        let folded = p.path.fold(p.capacity, p.entries, p.hash);
        if folded.root != self.root || folded.index != index || folded.key_height != p.key_height {
            return Err(StoreError::Corrupt);
        }
        let layout = Layout { capacity: p.capacity, chunks: folded.chunk_count };
        if *self.layout.get_or_insert(layout) != layout {
            return Err(StoreError::Corrupt);
        }
        let facts = ChunkFacts { hash: p.hash, entries: p.entries as u64, key_height: p.key_height, first_key };
        self.chunks.insert(index, facts);
        if shared {
            self.head.as_mut().expect("held").share(&p.hash);
        }
        if let (Some(head), Some(base)) = (self.head.as_mut(), base) {
            head.based_on(base);
        }
        Ok(())
    }

    /// The base that a chunk record an earlier run wrote as a head's next
    /// version names (it is a delta of a head record), to read with it for
    /// [`StoreSync::restore`]; `None` for any other record.
    pub fn restore_base(&self, chunk_record: &[u8]) -> Option<Ref> {
        self.head.as_ref()?;
        delta_base(chunk_record).filter(|base| base.birth < self.version)
    }

    /// The first key of a chunk an earlier run wrote, once its record is a
    /// full chunk of the progress record's size, born at this version, that
    /// verifies against its hash (as a head's next version, its entries
    /// may be the head's, born before, and the record may be a delta of a
    /// head record, also returned).
    fn check_restored(
        &self,
        p: &SyncProgress,
        chunk_record: Option<&[u8]>,
        base_record: Option<&[u8]>,
    ) -> Result<(Box<[u8]>, Option<Ref>), StoreError> {
        let decode = |b: Option<&[u8]>| b.map(|b| ChunkRecord::decode(b, p.capacity)).transpose();
        let (slots, groups, base) = match (decode(chunk_record)?, decode(base_record)?) {
            (Some(ChunkRecord::Full { slots, groups }), None) => (slots, groups, None),
            (Some(ChunkRecord::Delta(delta)), Some(ChunkRecord::Full { slots, groups }))
                if self.head.is_some() && delta.base.birth < self.version =>
            {
                let (slots, groups) = delta.apply(&slots, &groups, p.capacity)?;
                (slots, groups, Some(delta.base))
            }
            _ => return Err(StoreError::Corrupt),
        };
        // Into an empty store every value is held; as a head's next version, entries may be the head's.
        let born = |e: &Entry| match e {
            Entry::Held(_) => true,
            Entry::Record(r) => r.birth == self.version || (self.head.is_some() && r.birth < self.version),
        };
        if slots.len() != p.entries || slots.iter().any(|s| !born(&s.entry)) {
            return Err(StoreError::Corrupt);
        }
        verify_slots(&slots, &groups, &p.hash)?;
        Ok((slots[0].key.as_slice().into(), base))
    }

    /// As a head's next version, once every chunk is in and written: the
    /// records to read for the stale marks (the head chunks the new version
    /// does not share, a batch at a time, their bases, and the new chunks
    /// over their keys). Empty when all is marked, or with no head.
    pub fn stale_needed(&mut self) -> Vec<(Table, Ref)> {
        if !self.is_complete() {
            return Vec::new();
        }
        let (version, chunks) = (self.version, &self.chunks);
        match self.head.as_mut() {
            Some(head) if !head.is_waiting() => head.stale_needed(chunks, version),
            _ => Vec::new(),
        }
    }

    /// Hands over a record [`StoreSync::stale_needed`] named (`None`: the
    /// store lacks it, `STORE_CORRUPT`). A record's slots must verify
    /// against its hash before any entry of it is marked stale, so that a
    /// corrupt record never marks another version's entry stale.
    pub fn stale_supply(&mut self, r: &Ref, bytes: Option<&[u8]>) -> Result<(), StoreError> {
        let version = self.version;
        self.head.as_mut().map_or(Ok(()), |h| h.stale_supply(r, bytes, version))
    }

    /// Stale marks made so far (for records the head used and the new
    /// version does not), to write before [`StoreSync::finish`]'s write set.
    pub fn take_stale(&mut self) -> Vec<(Table, Ref)> {
        self.head.as_mut().map(Head::take_stale).unwrap_or_default()
    }

    /// The inner node records and the version record that complete the
    /// sync, built in index order from the chunks' facts and checked against
    /// the root. Fails (nothing to write) if chunks are missing.
    ///
    /// As the next version of a head: every head chunk record the new
    /// version does not use must have been read first
    /// ([`StoreSync::stale_needed`] is empty), else `REBUILD_INCOMPLETE`;
    /// the write set's stale marks are then the head's inner nodes that the
    /// new version does not share (same hash) and the marks not taken yet.
    pub fn finish(&mut self) -> Result<WriteSet, RebuildError> {
        let layout = match self.layout {
            Some(l) if self.is_complete() => l,
            _ => return Err(RebuildError::Incomplete),
        };
        if self.head.as_ref().is_some_and(|h| h.is_waiting() || !h.stale_done()) {
            return Err(RebuildError::Incomplete);
        }
        let mut out = WriteSet { version: self.version, ..WriteSet::default() };
        let chunk = |f: &ChunkFacts| match self.held(&f.hash) {
            Some((r, _)) => Sub::at(f, r),
            None => Sub::chunk(f, self.version),
        };
        // Head nodes the new version shares: not written, not marked stale.
        let mut shared = HashSet::new();
        let mut held = |hash: &Hash, children: [&Ref; 2]| {
            let at = self.head.as_ref()?.node(hash, children)?;
            shared.insert(at);
            Some(at)
        };
        let mut facts = self.chunks.values();
        let mut current = chunk(facts.next().expect("complete"));
        // Inner nodes waiting for their right subtree: (declared height, key copy, left).
        let mut stack: Vec<(u8, &[u8], Sub)> = Vec::new();
        for f in facts {
            while stack.last().is_some_and(|t| t.0 < f.key_height) {
                let (height, key, left) = stack.pop().expect("non-empty");
                current = close(height, key, left, current, self.version, &mut out, &mut held)?;
            }
            let left = std::mem::replace(&mut current, chunk(f));
            stack.push((f.key_height, &f.first_key, left));
        }
        while let Some((height, key, left)) = stack.pop() {
            current = close(height, key, left, current, self.version, &mut out, &mut held)?;
        }
        let root = finish_version(layout.capacity, current, &mut out);
        if root != self.root {
            return Err(RebuildError::RootMismatch);
        }
        if let Some(head) = self.head.as_mut() {
            out.stale.extend(head.nodes().filter(|r| !shared.contains(*r)).map(|r| (Table::Nodes, *r)));
            out.stale.append(&mut head.take_stale());
        }
        Ok(out)
    }
}

/// A finished subtree: what its parent's record and hash need.
pub(crate) struct Sub {
    child: Child,
    height: u8,
    chunks: u64,
    entries: u64,
}

impl Sub {
    /// Chunk `f`, written at `version`.
    pub(crate) fn chunk(f: &ChunkFacts, version: u64) -> Sub {
        Sub::at(f, Ref { birth: version, hash: f.hash })
    }

    /// Chunk `f`, whose record is `record`.
    fn at(f: &ChunkFacts, record: Ref) -> Sub {
        Sub { child: Child::Chunk(record), height: 0, chunks: 1, entries: f.entries }
    }
}

/// The inner node over `left` and `right`, whose key-height its chunks
/// declared: written as a node record once its height checks out, AVL-balanced.
/// As a head's next version, a node whose hash and children a head node
/// has is that node (`held`), not written again.
fn close(
    declared: u8,
    key: &[u8],
    left: Sub,
    right: Sub,
    version: u64,
    out: &mut WriteSet,
    held: &mut impl FnMut(&Hash, [&Ref; 2]) -> Option<Ref>,
) -> Result<Sub, RebuildError> {
    if 1 + left.height.max(right.height) != declared || left.height.abs_diff(right.height) > 1 {
        return Err(RebuildError::RootMismatch);
    }
    Ok(inner_node(key, left, right, version, out, held))
}

/// The inner node over `left` and `right` (key copy `key`): the record
/// `held` names for its hash and its children's records (a head's node,
/// which the new version shares), or else written to `out` as a node record.
pub(crate) fn inner_node(
    key: &[u8],
    left: Sub,
    right: Sub,
    version: u64,
    out: &mut WriteSet,
    held: impl FnOnce(&Hash, [&Ref; 2]) -> Option<Ref>,
) -> Sub {
    let height = 1 + left.height.max(right.height);
    let (chunks, entries) = (left.chunks + right.chunks, left.entries + right.entries);
    let hash = inner_hash(height, chunks, entries, &left.child.record().hash, &right.child.record().hash);
    if let Some(at) = held(&hash, [left.child.record(), right.child.record()]) {
        return Sub { child: Child::Node(at), height, chunks, entries };
    }
    let record = NodeRecord {
        height,
        chunk_count: chunks,
        entry_count: entries,
        left: left.child,
        right: right.child,
        key_copy: key.to_vec(),
    };
    let at = Ref { birth: version, hash };
    out.puts.push((Table::Nodes, at, record.encode()));
    Sub { child: Child::Node(at), height, chunks, entries }
}

/// Sets `out`'s version record to the tree under `top`; returns its root.
pub(crate) fn finish_version(capacity: usize, top: Sub, out: &mut WriteSet) -> Hash {
    let root = root_hash(capacity, top.chunks, top.entries, &top.child.record().hash);
    let record =
        VersionRecord { capacity, chunk_count: top.chunks, entry_count: top.entries, top: Some(top.child), root };
    out.version_record = record.encode();
    root
}

/// A sync progress record (`spec/store-format.md`, "sync progress
/// (0x0C)"): what a stored chunk needs to be taken back by a new run of
/// the sync, kept under `meta[sync ‖ u64be(index)]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncProgress {
    /// The synced tree's capacity (2 … 4096).
    pub capacity: usize,
    /// The chunk's key-height, as its path declares (≤ 48).
    pub key_height: u8,
    /// `M`, the chunk's entry count (1 … capacity).
    pub entries: usize,
    /// The chunk hash; the chunk record is `u64be(birth) ‖ hash`, birth the sync's version.
    pub hash: Hash,
    /// The chunk path, as in the chunk envelope.
    pub path: ChunkPath,
}

impl SyncProgress {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT_SYNC_PROGRESS];
        put_varint(&mut out, self.capacity as u64);
        out.push(self.key_height);
        put_varint(&mut out, self.entries as u64);
        out.extend_from_slice(&self.hash);
        self.path.encode(&mut out);
        out
    }

    /// Decodes a progress record with every check of the format (the
    /// path's too); `STORE_CORRUPT` otherwise. Whether the path folds to the
    /// sync's root is [`StoreSync::restore`]'s check.
    pub fn decode(bytes: &[u8]) -> Result<SyncProgress, StoreError> {
        let mut r = Reader::new(bytes, FORMAT_SYNC_PROGRESS)?;
        let capacity = r.capacity()?;
        let key_height = r.u8()?;
        if key_height > MAX_HEIGHT {
            return Err(StoreError::Corrupt);
        }
        let entries = r.chunk_size(capacity)?;
        let hash = r.hash()?;
        let path = ChunkPath::decode(&mut r, capacity, entries).map_err(|_| StoreError::Corrupt)?;
        r.finish()?;
        Ok(SyncProgress { capacity, key_height, entries, hash, path })
    }
}
