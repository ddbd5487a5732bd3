//! What a commit writes to a state store (`spec/store-format.md`,
//! `docs/store.md`): the records of every chunk, inner node and entry that
//! changed, the records that no later version uses (stale), and the
//! version record that makes the version visible. A batch too large to
//! hold is written ahead in pieces, between its writes too; a record a
//! piece wrote that the batch stops using is deleted by the next write.
//! The caller does the I/O.

use std::sync::Arc;

use crate::chunk::{Chunk, StoredChunk};
use crate::node::{Node, Stub};
use crate::record::{
    encode_entry, full_record_puts, values_refs, Child, ChunkRecord, NodeRecord, Ref, Table, VersionRecord,
};
use crate::tree::{Commit, Tree};

/// The records one commit adds to a store, and those it makes stale.
#[derive(Clone, Debug, Default)]
pub struct WriteSet {
    /// The committed version: the birth of every new record.
    pub version: u64,
    /// New records of the `nodes`, `chunks` and `entries` tables.
    pub puts: Vec<(Table, Ref, Vec<u8>)>,
    /// Records used by versions before `version` only.
    pub stale: Vec<(Table, Ref)>,
    /// Records born at `version`, written ahead by an earlier piece of the
    /// same batch, that the batch no longer uses: deleted in the same
    /// atomic write, before the puts (a put may write the same key again).
    pub discarded: Vec<(Table, Ref)>,
    /// For a piece ([`Tree::write_ahead`]): the bytes the chunks it wrote
    /// held (`Chunk::resident_bytes`), by which the head's resident bytes
    /// fell; so a caller needs not count them again after each piece.
    pub unloaded: usize,
    /// The version record: written last (or in the same atomic write), it
    /// makes the version visible.
    pub version_record: Vec<u8>,
}

impl Tree {
    /// Commits like [`Tree::commit`] and returns what the store must write
    /// for the new version. A tree that was never stored (new, or rebuilt
    /// from a sync) writes every record; afterwards only what changed.
    pub fn commit_to_store(&mut self) -> (Commit, WriteSet) {
        let root = self.hash_changes();
        let version = self.head().version() + 1;
        let mut out = WriteSet { version, ..WriteSet::default() };
        out.discarded = self.discard_unborn(version);
        self.paging.wrote_ahead = false;
        out.stale.append(&mut self.dropped);
        let capacity = self.capacity();
        let (chunk_count, entry_count) = (self.chunk_count(), self.len());
        let top = self.top_for_store().map(|top| persist(top, version, &mut out));
        let record = VersionRecord { capacity, chunk_count, entry_count, top, root };
        out.version_record = record.encode();
        out.sort_puts();
        (self.take_snapshot(root), out)
    }

    /// A piece of a batch too large to hold until its commit: writes
    /// changed chunks (their entry records and chunk records, born at the
    /// coming version) in key order and unloads them, until their records
    /// or the bytes they held (`Chunk::resident_bytes`) reach `max_bytes`.
    /// Call it while the head holds too much, during the batch or before
    /// its commit; [`Tree::commit_to_store`] writes the rest, the inner
    /// nodes and the version record. A chunk written ahead is a stub until
    /// a write loads it back; one the batch changes again is written again,
    /// and what its earlier piece wrote is `discarded`. Supply the records
    /// [`Tree::unconfirmed`] names first. `version_record` is empty.
    pub fn write_ahead(&mut self, max_bytes: usize) -> WriteSet {
        let version = self.head().version() + 1;
        let mut out = WriteSet { version, ..WriteSet::default() };
        out.discarded = self.discard_unborn(version);
        self.paging.wrote_ahead = true;
        let mut ahead = Ahead { max_bytes, written: 0, unloaded: 0 };
        // The snapshot shares no changed node; letting go of it frees the
        // chunks it alone holds (the commit replaces it anyway).
        if let Some(top) = self.top_for_store() {
            ahead.write(top, version, &mut out);
        }
        out.unloaded = ahead.unloaded;
        out.sort_puts();
        out
    }

    /// The records born at `version` (written ahead by this batch) that it
    /// stopped using since: entries it replaced or removed, and the records
    /// of chunks it changed again or merged away, wherever the drop waits
    /// (with the tree, or with a changed chunk not written yet). All of
    /// them go in the next write, so that none is deleted after a later
    /// piece wrote its key again.
    fn discard_unborn(&mut self, version: u64) -> Vec<(Table, Ref)> {
        let mut out = Vec::new();
        if !self.paging.wrote_ahead {
            return out;
        }
        if let Some(top) = self.top_for_store() {
            discard_below(top, version, &mut out);
        }
        take_born(&mut self.dropped, version, &mut out);
        // A full chunk record's values records go with it.
        let chunks: Vec<Ref> = out.iter().filter(|(t, _)| *t == Table::Chunks).map(|(_, r)| *r).collect();
        for r in chunks {
            out.extend(values_refs(&r, self.capacity()).map(|v| (Table::Values, v)));
        }
        out
    }
}

/// [`Tree::discard_unborn`] for the changed chunks below `node`.
fn discard_below(node: &mut Node, version: u64, out: &mut Vec<(Table, Ref)>) {
    match node {
        Node::Leaf(c) if !c.persisted => Arc::make_mut(c).discard_unborn(version, out),
        Node::Inner(n) if !n.persisted => {
            let n = node.inner_mut();
            discard_below(&mut n.left, version, out);
            discard_below(&mut n.right, version, out);
        }
        _ => {}
    }
}

/// Moves the records born at `version` from `dropped` to `out`.
pub(crate) fn take_born(dropped: &mut Vec<(Table, Ref)>, version: u64, out: &mut Vec<(Table, Ref)>) {
    dropped.retain(|d| {
        let born = d.1.birth == version;
        if born {
            out.push(*d);
        }
        !born
    });
}

impl WriteSet {
    /// Puts the new records in table and key order: a B-tree takes them as
    /// appends, where the order of entry hashes would scatter them over
    /// pages that no longer fit a cache.
    fn sort_puts(&mut self) {
        self.puts.sort_by_cached_key(|(table, r, _)| (*table as u8, r.key()));
    }
}

/// What [`Tree::write_ahead`] has done so far, against its bound.
struct Ahead {
    max_bytes: usize,
    /// Bytes of records written.
    written: usize,
    /// Bytes the chunks written held.
    unloaded: usize,
}

impl Ahead {
    fn done(&self) -> bool {
        self.written.max(self.unloaded) >= self.max_bytes
    }

    /// Writes the changed chunks below `node` until done, each turned into a stub.
    fn write(&mut self, node: &mut Node, version: u64, out: &mut WriteSet) {
        if self.done() {
            return;
        }
        match node {
            Node::Leaf(c) if !c.persisted => {
                let c = Arc::make_mut(c);
                self.unloaded += c.resident_bytes();
                c.rehash();
                let before = out.puts.len();
                persist_chunk(c, version, out);
                self.written += out.puts[before..].iter().map(|(_, _, v)| v.len()).sum::<usize>();
                let record = c.stored.as_ref().expect("persisted").record;
                *node = Node::Stub(Stub { record, entries: Some(c.len() as u64) });
            }
            Node::Inner(n) if !n.persisted => {
                let n = node.inner_mut();
                self.write(&mut n.left, version, out);
                self.write(&mut n.right, version, out);
            }
            _ => {}
        }
    }
}

/// Writes the records of every changed node below `node` and returns the
/// child ref that names `node`.
fn persist(node: &mut Node, version: u64, out: &mut WriteSet) -> Child {
    match node {
        Node::Leaf(c) => {
            if !c.persisted {
                persist_chunk(Arc::make_mut(c), version, out);
            }
            Child::Chunk(c.stored.as_ref().expect("persisted").record)
        }
        Node::Stub(s) => Child::Chunk(s.record),
        Node::Inner(n) => {
            if n.persisted {
                return Child::Node(n.stored.expect("persisted"));
            }
            let n = Arc::make_mut(n);
            let left = persist(&mut n.left, version, out);
            let right = persist(&mut n.right, version, out);
            let record = NodeRecord {
                height: n.height,
                chunk_count: n.chunks,
                entry_count: n.entries,
                left,
                right,
                key_copy: n.key.as_bytes().to_vec(),
            };
            let stored = Ref { birth: version, hash: n.hash.expect("hashed at commit") };
            out.stale.extend(n.stored.replace(stored).map(|old| (Table::Nodes, old)));
            out.puts.push((Table::Nodes, stored, record.encode()));
            n.persisted = true;
            Child::Node(stored)
        }
    }
}

/// Writes a changed chunk: its new entries, and itself as a delta of its
/// base or, when that is not small, whole (a new base, holding its held
/// values: the head read them first, `Chunk::missing_values`).
fn persist_chunk(c: &mut Chunk, version: u64, out: &mut WriteSet) {
    let slots = c.slots(version, |v, entry| out.puts.push((Table::Entries, entry, encode_entry(v))));
    let record = c.record_at(version, &slots);
    let stored = Ref { birth: version, hash: c.hash() };
    let old = c.stored.take();
    let keep_base = matches!(record, ChunkRecord::Delta(_));
    if let Some(old) = &old {
        if old.record != old.base || !keep_base {
            out.stale.push((Table::Chunks, old.record));
        }
        if old.record != old.base && !keep_base {
            out.stale.push((Table::Chunks, old.base));
        }
    }
    out.stale.append(&mut c.dropped);
    // A held slot of a delta is one it keeps from its base: the base holds its value.
    let holder = match &record {
        ChunkRecord::Full { slots, groups } => {
            out.puts.extend(full_record_puts(stored, slots, groups, |i| c.value(i)));
            stored
        }
        ChunkRecord::Delta(delta) => {
            out.puts.push((Table::Chunks, stored, record.encode()));
            delta.base
        }
    };
    c.held_by(holder);
    c.stored = Some(match old {
        Some(old) if keep_base => StoredChunk { record: stored, ..old },
        _ => StoredChunk::new(stored, stored, slots.into(), c.group_roots().into()),
    });
    c.persisted = true;
}
