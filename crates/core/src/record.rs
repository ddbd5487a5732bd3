//! State-store records (`spec/store-format.md`): how versions, inner nodes,
//! chunks and entries are written to a store, and the checks that every
//! record read back must pass. Storage is not trusted, so each decoder takes
//! the hash the record's parent names and fails with `STORE_CORRUPT` unless
//! the record hashes to it. No I/O: callers move the bytes.

use crate::codec::{check_value, put_bytes, put_varint, Reader};
use crate::error::{StoreError, TreeError};
use crate::hash::{
    chunk_hash, empty_root, entry_hash, group_count, group_level, inchunk_levels, inner_hash, preorder, root_hash,
    Hash, GROUP_LEAVES,
};
use crate::keys::Keys;
use crate::limits::{MAX_CAPACITY, MAX_CHUNKS, MAX_ENTRIES, MAX_HEIGHT, MIN_CAPACITY};
use smallvec::SmallVec;
use std::collections::HashMap;

pub const FORMAT_STORE: u8 = 0x06;
pub const FORMAT_VERSION: u8 = 0x07;
pub const FORMAT_NODE: u8 = 0x08;
pub const FORMAT_FULL_CHUNK: u8 = 0x09;
pub const FORMAT_CHUNK_DELTA: u8 = 0x0a;
pub const FORMAT_ENTRY: u8 = 0x0b;
pub const FORMAT_VALUES: u8 = 0x00;

/// Length of a record key: `u64be(birth) ‖ hash`.
pub const RECORD_KEY_LEN: usize = 40;

/// Names a record: the version that wrote it, and the hash it must verify to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ref {
    pub birth: u64,
    pub hash: Hash,
}

impl Ref {
    /// The record's key in its table.
    pub fn key(&self) -> [u8; RECORD_KEY_LEN] {
        let mut k = [0u8; RECORD_KEY_LEN];
        k[..8].copy_from_slice(&self.birth.to_be_bytes());
        k[8..].copy_from_slice(&self.hash);
        k
    }

    /// The ref a record key names; `None` unless the key is 40 bytes.
    pub fn from_key(key: &[u8]) -> Option<Ref> {
        let key: &[u8; RECORD_KEY_LEN] = key.try_into().ok()?;
        let birth = u64::from_be_bytes(key[..8].try_into().expect("8 bytes"));
        Some(Ref { birth, hash: key[8..].try_into().expect("32 bytes") })
    }

    fn put(&self, out: &mut Vec<u8>) {
        put_varint(out, self.birth);
        out.extend_from_slice(&self.hash);
    }

    fn read(r: &mut Reader) -> Result<Ref, StoreError> {
        Ok(Ref { birth: r.varint()?, hash: r.hash()? })
    }
}

/// The tables of records born at a version. The first three can go stale
/// (`stale` keys name them by id); a values record goes with the full
/// chunk record that names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    Nodes = 1,
    Chunks = 2,
    Entries = 3,
    Values = 4,
}

/// The values record of group `group` of full chunk record `chunk`: born
/// with it, named by its key's first 39 bytes and the group's index, so that
/// the records of one chunk record sit together and go with it.
pub fn values_ref(chunk: &Ref, group: usize) -> Ref {
    let mut hash = chunk.hash;
    hash[31] = u8::try_from(group).expect("at most 256 groups a chunk");
    Ref { birth: chunk.birth, hash }
}

/// The values records that full chunk record `chunk` of a store of
/// `capacity` may have, one a group (a group that holds no value has none).
pub fn values_refs(chunk: &Ref, capacity: usize) -> impl Iterator<Item = Ref> + '_ {
    (0..group_count(capacity)).map(|g| values_ref(chunk, g))
}

/// The `stale` key saying that `record` of `table` is used by no version `≥ since`.
pub fn stale_key(since: u64, table: Table, record: &Ref) -> [u8; 9 + RECORD_KEY_LEN] {
    let mut k = [0u8; 9 + RECORD_KEY_LEN];
    k[..8].copy_from_slice(&since.to_be_bytes());
    k[8] = table as u8;
    k[9..].copy_from_slice(&record.key());
    k
}

/// The layout of the records this code writes and reads
/// (`spec/store-format.md`): 1, before chunk records held group nodes, had
/// no layout byte; 2 repeated the slot's key in each entry record; 3 held
/// no values in chunk records.
pub const STORE_LAYOUT: u8 = 4;

/// The store record: the capacity every version of the store shares, and the
/// layout. `CAPACITY_INVALID` outside 2 … 4096: a record no open would read.
pub fn encode_store(capacity: usize) -> Result<Vec<u8>, TreeError> {
    if !(MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity) {
        return Err(TreeError::CapacityInvalid);
    }
    let mut out = vec![FORMAT_STORE];
    put_varint(&mut out, capacity as u64);
    out.push(STORE_LAYOUT);
    Ok(out)
}

/// The capacity and the layout a store record names (1 for a record with
/// no layout byte).
fn read_store(bytes: &[u8]) -> Result<(usize, u8), StoreError> {
    let mut r = Reader::new(bytes, FORMAT_STORE)?;
    let capacity = r.capacity()?;
    let layout = if r.remaining() == 0 { 1 } else { r.u8()? };
    r.finish()?;
    Ok((capacity, layout))
}

/// The layout a store record names, if it decodes as one: to say why a
/// store of another layout is refused.
pub fn store_layout(bytes: &[u8]) -> Option<u8> {
    read_store(bytes).ok().map(|(_, layout)| layout)
}

/// The capacity from a store record of this layout (another layout is
/// `STORE_CORRUPT`: its chunk records would not read).
pub fn decode_store(bytes: &[u8]) -> Result<usize, StoreError> {
    match read_store(bytes)? {
        (capacity, STORE_LAYOUT) => Ok(capacity),
        _ => Err(StoreError::Corrupt),
    }
}

/// A child of an inner node, or the top of a version: a chunk or an inner node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Child {
    Chunk(Ref),
    Node(Ref),
}

impl Child {
    pub fn record(&self) -> &Ref {
        match self {
            Child::Chunk(r) | Child::Node(r) => r,
        }
    }
}

/// What a version record holds: the root and where its tree starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionRecord {
    pub capacity: usize,
    pub chunk_count: u64,
    pub entry_count: u64,
    /// `None` for the empty tree.
    pub top: Option<Child>,
    pub root: Hash,
}

impl VersionRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT_VERSION];
        put_varint(&mut out, self.capacity as u64);
        put_varint(&mut out, self.chunk_count);
        put_varint(&mut out, self.entry_count);
        match &self.top {
            None => out.push(0),
            Some(Child::Chunk(r)) => {
                out.push(1);
                r.put(&mut out);
            }
            Some(Child::Node(r)) => {
                out.push(2);
                r.put(&mut out);
            }
        }
        out.extend_from_slice(&self.root);
        out
    }

    /// Decodes a version record of a store of `capacity` and checks that its
    /// root is the hash of its own fields.
    pub fn decode(bytes: &[u8], capacity: usize) -> Result<VersionRecord, StoreError> {
        let mut r = Reader::new(bytes, FORMAT_VERSION)?;
        let record_capacity = r.capacity()?;
        let (chunk_count, entry_count) = (r.varint()?, r.varint()?);
        let top = match r.u8()? {
            0 => None,
            1 => Some(Child::Chunk(Ref::read(&mut r)?)),
            2 => Some(Child::Node(Ref::read(&mut r)?)),
            _ => return Err(StoreError::Corrupt),
        };
        let root = r.hash()?;
        r.finish()?;
        let expected = match &top {
            None if chunk_count == 0 && entry_count == 0 => empty_root(capacity),
            Some(t) if chunk_count > 0 && chunk_count <= MAX_CHUNKS && entry_count <= MAX_ENTRIES => {
                root_hash(capacity, chunk_count, entry_count, &t.record().hash)
            }
            _ => return Err(StoreError::Corrupt),
        };
        if record_capacity != capacity || root != expected {
            return Err(StoreError::Corrupt);
        }
        Ok(VersionRecord { capacity, chunk_count, entry_count, top, root })
    }
}

/// An inner node as stored: its hashed fields, its children's records, and
/// its key copy (which routes searches but is not hashed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRecord {
    pub height: u8,
    pub chunk_count: u64,
    pub entry_count: u64,
    pub left: Child,
    pub right: Child,
    pub key_copy: Vec<u8>,
}

impl NodeRecord {
    /// The inner hash (`spec/hashing.md`, tag 0x03) that names this node.
    pub fn hash(&self) -> Hash {
        let (l, r) = (self.left.record().hash, self.right.record().hash);
        inner_hash(self.height, self.chunk_count, self.entry_count, &l, &r)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT_NODE, self.height];
        put_varint(&mut out, self.chunk_count);
        put_varint(&mut out, self.entry_count);
        let is_chunk = |c: &Child| matches!(c, Child::Chunk(_)) as u8;
        out.push(is_chunk(&self.left) | is_chunk(&self.right) << 1);
        self.left.record().put(&mut out);
        self.right.record().put(&mut out);
        put_bytes(&mut out, &self.key_copy);
        out
    }

    /// Decodes a node record and checks it against `expected`, the hash its
    /// parent (or its version) names.
    pub fn decode(bytes: &[u8], expected: &Hash) -> Result<NodeRecord, StoreError> {
        let mut r = Reader::new(bytes, FORMAT_NODE)?;
        let height = r.u8()?;
        let (chunk_count, entry_count) = (r.varint()?, r.varint()?);
        let kinds = r.u8()?;
        if !(1..=MAX_HEIGHT).contains(&height) || kinds > 3 || !(2..=MAX_CHUNKS).contains(&chunk_count) {
            return Err(StoreError::Corrupt);
        }
        let child = |r: &mut Reader, is_chunk: bool| -> Result<Child, StoreError> {
            let c = Ref::read(r)?;
            Ok(if is_chunk { Child::Chunk(c) } else { Child::Node(c) })
        };
        let left = child(&mut r, kinds & 1 != 0)?;
        let right = child(&mut r, kinds & 2 != 0)?;
        let key_copy = r.key()?.to_vec();
        r.finish()?;
        let node = NodeRecord { height, chunk_count, entry_count, left, right, key_copy };
        if node.hash() != *expected {
            return Err(StoreError::Corrupt);
        }
        Ok(node)
    }
}

/// Where a slot's value is stored (`spec/store-format.md`, "Values in chunk
/// records"), with the entry hash it must verify to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    /// In an entry record.
    Record(Ref),
    /// In a values record of the chunk's full record (its own, or its
    /// delta's base), under the slot's key.
    Held(Hash),
}

impl Entry {
    /// The entry hash.
    pub fn hash(&self) -> &Hash {
        match self {
            Entry::Record(r) => &r.hash,
            Entry::Held(h) => h,
        }
    }

    /// The entry record, if the value is in one.
    pub fn record(&self) -> Option<Ref> {
        match self {
            Entry::Record(r) => Some(*r),
            Entry::Held(_) => None,
        }
    }
}

impl From<Ref> for Entry {
    fn from(r: Ref) -> Entry {
        Entry::Record(r)
    }
}

/// One entry of a stored chunk: its key (for searching) and where its value is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    pub key: SlotKey,
    pub entry: Entry,
}

/// A slot's key, inline up to 32 bytes: a commit at 10M decodes millions of
/// slots, and a heap allocation a key was an eighth of its time.
pub type SlotKey = SmallVec<[u8; 32]>;

impl Slot {
    /// A slot of `key` whose value is at `entry` (an entry record's [`Ref`] is one).
    pub fn new(key: &[u8], entry: impl Into<Entry>) -> Slot {
        Slot { key: SlotKey::from_slice(key), entry: entry.into() }
    }
}

/// One step that turns a base chunk's slots into a later chunk's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    Set { position: usize, entry: Ref },
    Insert { position: usize, key: Vec<u8>, entry: Ref },
    Delete { position: usize },
}

/// A stored chunk: whole, or as edits of a whole (base) chunk; either way
/// with the group nodes of its in-chunk tree (`hash::GROUP_LEVEL`), which
/// let a reader check it without hashing every entry hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkRecord {
    Full { slots: Vec<Slot>, groups: Vec<Hash> },
    Delta(Delta),
}

/// A chunk stored as the edits that turn its base (a full chunk) into it,
/// and the group nodes that differ from the base's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delta {
    pub base: Ref,
    pub edits: Vec<Edit>,
    /// How many groups the chunk the edits give has.
    pub group_count: usize,
    /// Its group nodes that differ from the base's at the same index
    /// (every index past the base's last group among them), by index.
    pub changed_groups: Vec<(usize, Hash)>,
}

impl Delta {
    /// The delta of `base` (with its slots and group nodes) that gives the chunk `now` with its group nodes `groups`.
    /// `None` when no delta of `base` gives `now` (`diff_slots`).
    pub fn of(base: &Ref, base_slots: &[Slot], base_groups: &[Hash], now: &[Slot], groups: &[Hash]) -> Option<Delta> {
        let changed_groups =
            groups.iter().enumerate().filter(|&(i, g)| base_groups.get(i) != Some(g)).map(|(i, g)| (i, *g)).collect();
        Some(Delta { base: *base, edits: diff_slots(base_slots, now)?, group_count: groups.len(), changed_groups })
    }

    /// About the bytes it holds in memory, for a bound.
    pub fn bytes(&self) -> usize {
        let key = |e: &Edit| if let Edit::Insert { key, .. } = e { key.len() } else { 0 };
        size_of::<Delta>()
            + self.edits.iter().map(|e| size_of::<Edit>() + key(e)).sum::<usize>()
            + 40 * self.changed_groups.len()
    }

    /// The chunk's slots and group nodes, from its base's: still to check
    /// against the chunk hash (`verify_groups`, `verify_slots`).
    pub fn apply(
        &self,
        base_slots: &[Slot],
        base_groups: &[Hash],
        capacity: usize,
    ) -> Result<(Vec<Slot>, Vec<Hash>), StoreError> {
        let slots = apply_edits(base_slots, &self.edits, capacity)?;
        let mut groups: Vec<Option<Hash>> = (0..self.group_count).map(|i| base_groups.get(i).copied()).collect();
        for &(i, g) in &self.changed_groups {
            *groups.get_mut(i).ok_or(StoreError::Corrupt)? = Some(g);
        }
        let groups = groups.into_iter().collect::<Option<Vec<Hash>>>().ok_or(StoreError::Corrupt)?;
        Ok((slots, groups))
    }
}

/// Puts records to read in key order: a B-tree then reads each page once.
pub(crate) fn in_key_order(wanted: &mut [(Table, Ref)]) {
    wanted.sort_unstable_by_key(|(table, r)| (*table as u8, r.key()));
}

/// Deltas read before the full record they are based on, by that base: a
/// base's arrival finds its deltas without a scan of all of them (a commit
/// of thousands of chunks supplies thousands of each).
#[derive(Clone, Debug, Default)]
pub(crate) struct WaitingDeltas {
    by_base: HashMap<Ref, Vec<(Ref, Delta)>>,
    base_of: HashMap<Ref, Ref>,
}

impl WaitingDeltas {
    /// Keeps delta record `at` until its base comes (a delta already kept is kept once).
    pub fn add(&mut self, at: Ref, delta: Delta) {
        if self.base_of.insert(at, delta.base).is_none() {
            self.by_base.entry(delta.base).or_default().push((at, delta));
        }
    }

    /// The deltas waiting for `base`, no longer kept.
    pub fn take(&mut self, base: &Ref) -> Vec<(Ref, Delta)> {
        let waiting = self.by_base.remove(base).unwrap_or_default();
        for (at, _) in &waiting {
            self.base_of.remove(at);
        }
        waiting
    }

    /// The base delta record `at` waits for, if it is kept.
    pub fn base_of(&self, at: &Ref) -> Option<Ref> {
        self.base_of.get(at).copied()
    }

    /// Whether some delta waits for `base` (which must then be a full record).
    pub fn waits_for(&self, base: &Ref) -> bool {
        self.by_base.contains_key(base)
    }

    /// Whether `delta`, read as record `at`, can never lead to a full
    /// record: it names itself as its base, or deltas wait for `at` as
    /// theirs (a base is a full chunk record). Kept, it would be asked for
    /// again and again: the store is corrupt.
    pub fn refuses(&self, at: &Ref, delta: &Delta) -> bool {
        delta.base == *at || self.waits_for(at)
    }

    /// Every base some delta waits for.
    pub fn bases(&self) -> impl Iterator<Item = &Ref> {
        self.by_base.keys()
    }

    pub fn is_empty(&self) -> bool {
        self.by_base.is_empty()
    }
}

impl ChunkRecord {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            ChunkRecord::Full { slots, groups } => {
                assert!(
                    !slots.iter().any(|s| matches!(s.entry, Entry::Held(_))),
                    "a full chunk record that holds values is written by `full_record_puts`, with them"
                );
                encode_full(slots, groups)
            }
            ChunkRecord::Delta(Delta { base, edits, group_count, changed_groups }) => {
                let mut out = vec![FORMAT_CHUNK_DELTA];
                base.put(&mut out);
                put_varint(&mut out, edits.len() as u64);
                for e in edits {
                    match e {
                        Edit::Set { position, entry } => {
                            out.push(0);
                            put_varint(&mut out, *position as u64);
                            entry.put(&mut out);
                        }
                        Edit::Insert { position, key, entry } => {
                            out.push(1);
                            put_varint(&mut out, *position as u64);
                            put_bytes(&mut out, key);
                            entry.put(&mut out);
                        }
                        Edit::Delete { position } => {
                            out.push(2);
                            put_varint(&mut out, *position as u64);
                        }
                    }
                }
                put_varint(&mut out, *group_count as u64);
                put_varint(&mut out, changed_groups.len() as u64);
                for (i, g) in changed_groups {
                    put_varint(&mut out, *i as u64);
                    out.extend_from_slice(g);
                }
                out
            }
        }
    }

    /// Decodes a full chunk or a delta of a store of `capacity`. A full
    /// chunk's keys must be strictly increasing; a delta is checked when it
    /// is applied to its base, and the group nodes when the chunk is
    /// verified (`verify_groups`, `verify_slots`).
    pub fn decode(bytes: &[u8], capacity: usize) -> Result<ChunkRecord, StoreError> {
        match bytes.first() {
            Some(&FORMAT_FULL_CHUNK) => {
                let full = decode_full(bytes, capacity)?;
                Ok(ChunkRecord::Full { slots: full.slots(), groups: full.groups })
            }
            Some(&FORMAT_CHUNK_DELTA) => {
                let mut r = Reader::new(bytes, FORMAT_CHUNK_DELTA)?;
                let base = Ref::read(&mut r)?;
                let n = r.varint()?;
                if n == 0 || n > 2 * capacity as u64 {
                    return Err(StoreError::Corrupt);
                }
                let mut edits = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let op = r.u8()?;
                    // Not cast first: on wasm32 2^32 + 16 would wrap to 16 and pass the check of `< slots`.
                    let position = usize::try_from(r.varint()?).map_err(|_| StoreError::Corrupt)?;
                    edits.push(match op {
                        0 => Edit::Set { position, entry: Ref::read(&mut r)? },
                        1 => Edit::Insert { position, key: r.key()?.to_vec(), entry: Ref::read(&mut r)? },
                        2 => Edit::Delete { position },
                        _ => return Err(StoreError::Corrupt),
                    });
                }
                let count = r.varint()?;
                let changed = r.varint()?;
                if count == 0 || count > group_count(capacity) as u64 || changed > count {
                    return Err(StoreError::Corrupt);
                }
                let mut changed_groups: Vec<(usize, Hash)> = Vec::with_capacity(changed as usize);
                for _ in 0..changed {
                    let i = r.varint()?;
                    if i >= count || changed_groups.last().is_some_and(|&(prev, _)| prev as u64 >= i) {
                        return Err(StoreError::Corrupt);
                    }
                    changed_groups.push((i as usize, r.hash()?));
                }
                r.finish()?;
                Ok(ChunkRecord::Delta(Delta { base, edits, group_count: count as usize, changed_groups }))
            }
            _ => Err(StoreError::Corrupt),
        }
    }
}

/// A full chunk record of `slots` and their `groups`, stored as `r`, with
/// the values records of its groups that hold values: `held(i)` gives the
/// value of slot `i` when the slot is [`Entry::Held`]. The chunk record first.
pub fn full_record_puts<'a>(
    r: Ref,
    slots: &[Slot],
    groups: &[Hash],
    held: impl Fn(usize) -> &'a [u8],
) -> Vec<(Table, Ref, Vec<u8>)> {
    let mut out = Vec::with_capacity(1 + groups.len());
    out.push((Table::Chunks, r, encode_full(slots, groups)));
    for g in held_groups(slots) {
        let held_here: Vec<usize> = (g * GROUP_LEAVES..((g + 1) * GROUP_LEAVES).min(slots.len()))
            .filter(|&i| matches!(slots[i].entry, Entry::Held(_)))
            .collect();
        let mut bytes =
            Vec::with_capacity(2 + held_here.iter().map(|&i| slots[i].key.len() + held(i).len() + 6).sum::<usize>());
        bytes.push(FORMAT_VALUES);
        put_varint(&mut bytes, held_here.len() as u64);
        for &i in &held_here {
            put_bytes(&mut bytes, &slots[i].key);
            put_bytes(&mut bytes, held(i));
        }
        out.push((Table::Values, values_ref(&r, g), bytes));
    }
    out
}

/// The groups of a full chunk record of `slots` that have a values record:
/// those with a held slot.
pub fn held_groups(slots: &[Slot]) -> impl Iterator<Item = usize> + '_ {
    let held = |group: &[Slot]| group.iter().any(|s| matches!(s.entry, Entry::Held(_)));
    slots.chunks(GROUP_LEAVES).enumerate().filter(move |(_, group)| held(group)).map(|(g, _)| g)
}

/// A full chunk record of `slots` and their `groups` (a held slot lists its
/// entry hash; its value is in the values record of its group), without
/// its values records: [`full_record_puts`] writes both.
pub fn encode_full(slots: &[Slot], groups: &[Hash]) -> Vec<u8> {
    let mut out = Vec::with_capacity(slots_len(slots));
    out.push(FORMAT_FULL_CHUNK);
    put_varint(&mut out, slots.len() as u64);
    for s in slots {
        put_bytes(&mut out, &s.key);
        match &s.entry {
            Entry::Record(r) => {
                out.push(SLOT_RECORD);
                r.put(&mut out);
            }
            Entry::Held(h) => {
                out.push(SLOT_HELD);
                out.extend_from_slice(h);
            }
        }
    }
    groups.iter().for_each(|g| out.extend_from_slice(g));
    out
}

/// A full chunk slot's kind byte: its value in an entry record, or in its group's values record.
const SLOT_RECORD: u8 = 0;
const SLOT_HELD: u8 = 1;

/// A value a values record holds, with its slot's key.
pub type HeldValue<'a> = (&'a [u8], &'a [u8]);

/// The values a values record holds, each with its slot's key, in key
/// order, unchecked (a caller checks each it uses against its slot's entry
/// hash). `STORE_CORRUPT` for bytes that are not one, or keys out of order.
pub fn held_values(bytes: &[u8]) -> Result<Vec<HeldValue<'_>>, StoreError> {
    let mut r = Reader::new(bytes, FORMAT_VALUES)?;
    let n = r.varint()?;
    if n == 0 || n > GROUP_LEAVES as u64 {
        return Err(StoreError::Corrupt);
    }
    let mut out: Vec<HeldValue> = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let key = r.key()?;
        if out.last().is_some_and(|(k, _)| *k >= key) {
            return Err(StoreError::Corrupt);
        }
        out.push((key, r.value()?));
    }
    r.finish()?;
    Ok(out)
}

/// The value that values record `bytes` holds for `key`, checked against
/// the entry hash `expected` (`STORE_CORRUPT` if the record holds none, or
/// another).
pub fn held_value<'a>(bytes: &'a [u8], key: &[u8], expected: &Hash) -> Result<&'a [u8], StoreError> {
    let held = held_values(bytes)?;
    let at = held.binary_search_by(|(k, _)| (*k).cmp(key)).map_err(|_| StoreError::Corrupt)?;
    let value = held[at].1;
    if entry_hash(key, value) != *expected {
        return Err(StoreError::Corrupt);
    }
    Ok(value)
}

/// The base that chunk delta `bytes` names, read from its first bytes alone
/// (`None` for any other record), so that a reader knows what to read with
/// it before decoding it.
pub fn delta_base(bytes: &[u8]) -> Option<Ref> {
    Ref::read(&mut Reader::new(bytes, FORMAT_CHUNK_DELTA).ok()?).ok()
}

/// A full chunk record as read for the cache of reads: its keys in one
/// buffer, not a vector each (176 allocations and as many frees a chunk at
/// the standard workload).
pub(crate) struct FullParts {
    pub keys: Keys,
    pub entries: Vec<Entry>,
    pub groups: Vec<Hash>,
}

impl FullParts {
    /// A chunk's slots (a delta applied to its base) laid out as a full record reads.
    pub fn of_slots(slots: Vec<Slot>, groups: Vec<Hash>) -> FullParts {
        let mut keys = Keys::with_capacity(slots.len(), slots.iter().map(|s| s.key.len()).sum());
        let mut entries = Vec::with_capacity(slots.len());
        for s in slots {
            keys.push(&s.key);
            entries.push(s.entry);
        }
        FullParts { keys, entries, groups }
    }

    /// The record's slots, a vector a key.
    pub fn slots(&self) -> Vec<Slot> {
        self.entries.iter().enumerate().map(|(i, &entry)| Slot::new(self.keys.key(i), entry)).collect()
    }
}

/// Decodes a full chunk record of a store of `capacity` (its keys strictly increasing).
pub(crate) fn decode_full(bytes: &[u8], capacity: usize) -> Result<FullParts, StoreError> {
    let mut r = Reader::new(bytes, FORMAT_FULL_CHUNK)?;
    let m = r.chunk_size(capacity)?;
    let (mut keys, mut entries) = (Keys::with_capacity(m, m * 32), Vec::with_capacity(m));
    for i in 0..m {
        let key = r.key()?;
        if i > 0 && keys.key(i - 1) >= key {
            return Err(StoreError::Corrupt);
        }
        keys.push(key);
        entries.push(match r.u8()? {
            SLOT_RECORD => Entry::Record(Ref::read(&mut r)?),
            SLOT_HELD => Entry::Held(r.hash()?),
            _ => return Err(StoreError::Corrupt),
        });
    }
    let groups = r.hashes(group_count(m))?;
    r.finish()?;
    Ok(FullParts { keys, entries, groups })
}

/// The slots of a delta's chunk: `edits` applied in order to its base's
/// slots. The result must hold 1 … `capacity` slots in strictly increasing
/// key order (in between it may hold more: at most 2·C edits, so the list
/// stays bounded).
pub fn apply_edits(base: &[Slot], edits: &[Edit], capacity: usize) -> Result<Vec<Slot>, StoreError> {
    let mut slots = base.to_vec();
    for e in edits {
        match e {
            Edit::Set { position, entry } => {
                slots.get_mut(*position).ok_or(StoreError::Corrupt)?.entry = Entry::Record(*entry)
            }
            Edit::Insert { position, key, entry } => {
                if *position > slots.len() {
                    return Err(StoreError::Corrupt);
                }
                slots.insert(*position, Slot::new(key, *entry));
            }
            Edit::Delete { position } => {
                if *position >= slots.len() {
                    return Err(StoreError::Corrupt);
                }
                slots.remove(*position);
            }
        }
    }
    if slots.is_empty() || slots.len() > capacity || slots.windows(2).any(|w| w[0].key >= w[1].key) {
        return Err(StoreError::Corrupt);
    }
    Ok(slots)
}

/// The edits that turn `base` into `now` (both in strictly increasing key
/// order), found by walking both in key order: a key only in the base is a
/// delete, a key only in `now` an insert, a key in both with another entry
/// a set. Positions are those of the list as edited so far. `None` when a
/// slot of `now` that is not the base's holds its value in a chunk record:
/// an edit names an entry record, so no delta of this base gives `now`.
pub fn diff_slots(base: &[Slot], now: &[Slot]) -> Option<Vec<Edit>> {
    use std::cmp::Ordering;
    let (mut i, mut j, mut edits) = (0, 0, Vec::new());
    // `j` is also the position in the edited list: slots before it match `now`.
    loop {
        // Compare the next base key with the next key of `now`; a missing one is greater.
        let order = match (base.get(i), now.get(j)) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(b), Some(n)) => b.key.cmp(&n.key),
        };
        match order {
            Ordering::Equal => {
                if base[i].entry != now[j].entry {
                    edits.push(Edit::Set { position: j, entry: now[j].entry.record()? });
                }
                i += 1;
                j += 1;
            }
            Ordering::Less => {
                edits.push(Edit::Delete { position: j });
                i += 1;
            }
            Ordering::Greater => {
                edits.push(Edit::Insert { position: j, key: now[j].key.to_vec(), entry: now[j].entry.record()? });
                j += 1;
            }
        }
    }
    Some(edits)
}

/// A full chunk record's base, as a later delta names it: its ref, slots and group nodes.
pub type Base<'a> = (&'a Ref, &'a [Slot], &'a [Hash]);

/// How a changed chunk is stored, with `groups`, the group nodes of its
/// in-chunk tree: as a delta of `base` when there is one and its encoding
/// is at most a quarter of the full chunk record's slots, else whole (a
/// new base, holding the values of its held slots).
pub fn chunk_record(base: Option<Base>, now: &[Slot], groups: Vec<Hash>) -> ChunkRecord {
    if let Some(delta) =
        base.and_then(|(base_ref, base_slots, base_groups)| Delta::of(base_ref, base_slots, base_groups, now, &groups))
    {
        if !delta.edits.is_empty() {
            let delta = ChunkRecord::Delta(delta);
            if 4 * delta.encode().len() <= slots_len(now) {
                return delta;
            }
        }
    }
    ChunkRecord::Full { slots: now.to_vec(), groups }
}

/// The length of a full chunk record of `slots` without the values it
/// holds (a held slot counts its key, kind and entry hash), not encoded:
/// what a delta is compared with.
pub fn slots_len(slots: &[Slot]) -> usize {
    let varint_len = |v: u64| (64 - v.max(1).leading_zeros() as usize).div_ceil(7);
    let slot_len = |s: &Slot| {
        let place = match s.entry {
            Entry::Record(r) => varint_len(r.birth) + 32,
            Entry::Held(_) => 32,
        };
        varint_len(s.key.len() as u64) + s.key.len() + 1 + place
    };
    1 + varint_len(slots.len() as u64) + slots.iter().map(slot_len).sum::<usize>() + 32 * group_count(slots.len())
}

/// The group nodes of the chunk whose slots are `slots`, hashed from their
/// entry hashes, for callers that hold no in-chunk tree (tests, tools);
/// every writer takes them from the tree it has (`Chunk::group_roots`).
pub fn slot_groups(slots: &[Slot]) -> Vec<Hash> {
    let leaves: Vec<Hash> = slots.iter().map(|s| *s.entry.hash()).collect();
    group_level(&inchunk_levels(&leaves)).to_vec()
}

/// Checks a chunk of `m` entries by the group nodes its record stores: the
/// tree above them must give the chunk hash `expected`. Returns that tree
/// level by level, the group nodes first; each group's leaves are still
/// unchecked (`verify_group`).
pub fn verify_groups(m: usize, groups: &[Hash], expected: &Hash) -> Result<Vec<Vec<Hash>>, StoreError> {
    if m == 0 || groups.len() != group_count(m) {
        return Err(StoreError::Corrupt);
    }
    let upper = inchunk_levels(groups);
    if chunk_hash(m, &upper[upper.len() - 1][0]) != *expected {
        return Err(StoreError::Corrupt);
    }
    Ok(upper)
}

/// Checks that the leaves of one group (at most 16 entry hashes) hash to its node.
pub fn verify_group(leaves: &[Hash], group: &Hash) -> Result<(), StoreError> {
    let levels = inchunk_levels(leaves);
    if levels[levels.len() - 1][0] != *group {
        return Err(StoreError::Corrupt);
    }
    Ok(())
}

/// Checks that `slots` and their record's `groups` hash to the chunk hash
/// `expected`, every group included, and returns the chunk's in-chunk tree
/// (`hash::inchunk_tree`), which verifies its entries.
pub fn verify_slots(slots: &[Slot], groups: &[Hash], expected: &Hash) -> Result<Vec<Hash>, StoreError> {
    let leaves: Vec<Hash> = slots.iter().map(|s| *s.entry.hash()).collect();
    if leaves.is_empty() {
        return Err(StoreError::Corrupt);
    }
    let levels = inchunk_levels(&leaves);
    if group_level(&levels) != groups || chunk_hash(slots.len(), &levels[levels.len() - 1][0]) != *expected {
        return Err(StoreError::Corrupt);
    }
    Ok(preorder(&levels))
}

/// An entry record: the value only, to the end of the record, since the
/// slot that names the record holds the key and the entry hash binds the two.
pub fn encode_entry(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 1);
    out.push(FORMAT_ENTRY);
    out.extend_from_slice(value);
    out
}

/// The value of an entry record, checked against the entry hash `expected`
/// with the key its chunk lists for it.
pub fn decode_entry<'a>(bytes: &'a [u8], expected: &Hash, key: &[u8]) -> Result<&'a [u8], StoreError> {
    let v = entry_value_unchecked(bytes)?;
    if entry_hash(key, v) != *expected {
        return Err(StoreError::Corrupt);
    }
    Ok(v)
}

/// The value of an entry record, decoded but not yet checked against its
/// entry hash: for a caller that checks many at once (`hash::entry_hashes`
/// hashes four at a time) before it uses any.
pub fn entry_value_unchecked(bytes: &[u8]) -> Result<&[u8], StoreError> {
    let mut r = Reader::new(bytes, FORMAT_ENTRY)?;
    let v = r.take(r.remaining())?;
    check_value(v)?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta_of(base: Ref) -> Delta {
        Delta { base, edits: Vec::new(), group_count: 1, changed_groups: Vec::new() }
    }

    #[test]
    fn waiting_deltas_are_found_by_their_base_once() {
        let r = |birth: u64, b: u8| Ref { birth, hash: [b; 32] };
        let mut waiting = WaitingDeltas::default();
        waiting.add(r(2, 1), delta_of(r(1, 9)));
        waiting.add(r(3, 2), delta_of(r(1, 9)));
        waiting.add(r(3, 2), delta_of(r(1, 9)));
        waiting.add(r(4, 3), delta_of(r(1, 8)));
        assert_eq!(waiting.base_of(&r(3, 2)), Some(r(1, 9)));
        let mut bases: Vec<Ref> = waiting.bases().copied().collect();
        bases.sort_by_key(Ref::key);
        assert_eq!(bases, [r(1, 8), r(1, 9)]);
        let taken: Vec<Ref> = waiting.take(&r(1, 9)).into_iter().map(|(at, _)| at).collect();
        assert_eq!(taken, [r(2, 1), r(3, 2)], "each delta once, in the order supplied");
        assert_eq!(waiting.base_of(&r(2, 1)), None);
        assert!(waiting.take(&r(1, 9)).is_empty());
        assert!(!waiting.is_empty());
        waiting.take(&r(1, 8));
        assert!(waiting.is_empty());
    }
}
