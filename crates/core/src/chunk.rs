//! A chunk: up to C sorted entries stored contiguously, with cached entry
//! hashes and a cached chunk hash (`spec/hashing.md`, tags 0x00 and 0x02).
//! Its keys live in one sorted byte buffer (`keys::Keys`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::error::StoreError;
use crate::hash::{
    chunk_hash, entry_hash, entry_hashes, fill_group, group_count, group_roots, inchunk_tree, left_size, multiproof,
    sparse_multiproof, update_inchunk_leaf, Hash, GROUP_LEAVES,
};
use crate::keys::Keys;
use crate::record::{chunk_record, ChunkRecord, Delta, Entry, Ref, Slot, Table};

#[derive(Clone, Debug, Default)]
pub(crate) struct Chunk {
    keys: Keys,
    /// `None` for an entry of a chunk loaded from a store that this head has
    /// not written: its record holds the value, and a commit needs its hash only.
    values: Vec<Option<Box<[u8]>>>,
    /// Entry hashes; `None` until the next commit hashes the entry.
    entry_hashes: Vec<Option<Hash>>,
    /// The in-chunk tree (`hash::inchunk_tree`) as of the last commit;
    /// empty once entries move (`reshape`).
    tree: Vec<Hash>,
    /// The chunk hash; `None` while the chunk has uncommitted changes.
    hash: Option<Hash>,
    /// Whether entries were inserted or removed since `tree` was built, so
    /// that its leaves no longer line up with the entries.
    reshaped: bool,
    /// For a tree kept in a store (`spec/store-format.md`): where each
    /// entry's value is stored.
    places: Vec<Place>,
    /// The full chunk records that hold the values of `Place::Held` slots:
    /// the chunk's base, and those of chunks whose entries moved here.
    holders: Vec<Ref>,
    /// Whether each slot's key is known to be its entry's: written here, or
    /// read with its entry. A paged head loads slot keys from a chunk record,
    /// where no hash covers them, and confirms the ones its writes rely on.
    trusted: Vec<bool>,
    /// For a chunk a paged head loaded: whether each group's entry hashes
    /// are still to check against its node (`tree` holds the group nodes
    /// and those above them; a group's own nodes once it is checked). A
    /// write checks the groups it uses first ([`Chunk::check_group_of`],
    /// [`Chunk::check_groups`]). Empty: every group checked.
    unchecked: Vec<bool>,
    /// This chunk's record in the store, and the full record it is a delta of.
    pub(crate) stored: Option<StoredChunk>,
    /// Whether the store holds this chunk as it is now.
    pub(crate) persisted: bool,
    /// Stored records this chunk stopped using since it was last persisted.
    pub(crate) dropped: Vec<(Table, Ref)>,
    /// In a paged head, when the chunk was loaded or made: the oldest go first.
    pub(crate) loaded_at: u64,
    /// Whether [`Chunk::values_to_copy`] found nothing to copy since the
    /// chunk last changed: a batch asks after every piece and before its
    /// commit, and the answer costs a diff against the base.
    copy_checked: bool,
    /// How [`Chunk::values_to_copy`] found the chunk is written, kept for
    /// the commit ([`Chunk::record_at`]) while the chunk does not change:
    /// that diff against the base was a third of a commit's time.
    planned: Option<Planned>,
}

/// How a commit at `version`, over `base`, writes a chunk: as `delta`, or
/// whole (`None`).
#[derive(Clone, Debug)]
struct Planned {
    version: u64,
    base: Option<Ref>,
    delta: Option<Delta>,
}

/// Where a slot's value is stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Place {
    /// Not yet: the next persist writes its entry record.
    #[default]
    New,
    /// In the entry record born at this version.
    Record(u64),
    /// In a values record of full chunk record `holders[i]`, under the slot's key.
    Held(u32),
}

/// Where an entry's value is stored, its holder named: for an entry that
/// moves between chunks, or that a head chunk already stores.
#[derive(Clone, Copy, Debug)]
pub(crate) enum StoredAt {
    New,
    Record(u64),
    Held(Ref),
}

/// An entry moving between neighbour chunks with its hash and its record.
pub(crate) struct MovedEntry {
    key: Box<[u8]>,
    value: Option<Box<[u8]>>,
    hash: Option<Hash>,
    place: StoredAt,
    trusted: bool,
}

/// Where a chunk lives in a store: its record, and the full record (base)
/// that later versions write their deltas against.
#[derive(Clone, Debug)]
pub(crate) struct StoredChunk {
    pub record: Ref,
    pub base: Ref,
    pub base_slots: Arc<[Slot]>,
    pub base_groups: Arc<[Hash]>,
    /// The bytes the base's slots and group nodes hold, counted once by
    /// [`StoredChunk::new`]: a commit asks a head's resident bytes once a
    /// piece, over every chunk it loaded.
    pub base_bytes: usize,
}

impl StoredChunk {
    pub fn new(record: Ref, base: Ref, base_slots: Arc<[Slot]>, base_groups: Arc<[Hash]>) -> StoredChunk {
        // A slot's key is on the heap only past its inline 32 bytes.
        let heap = |b: &Slot| if b.key.spilled() { b.key.len() } else { 0 };
        let base_bytes = base_slots.iter().map(|b| size_of::<Slot>() + heap(b)).sum::<usize>() + 32 * base_groups.len();
        StoredChunk { record, base, base_slots, base_groups, base_bytes }
    }
}

impl Chunk {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn key(&self, i: usize) -> &[u8] {
        self.keys.key(i)
    }

    /// The value of entry `i`. Panics on an entry whose value stayed in the store.
    pub fn value(&self, i: usize) -> &[u8] {
        self.values[i].as_deref().expect("a value read from a paged head")
    }

    pub fn first_key(&self) -> &[u8] {
        self.key(0)
    }

    /// `Ok(i)` if key `i` equals `key`, else `Err(i)` where it would go.
    pub fn search(&self, key: &[u8]) -> Result<usize, usize> {
        self.keys.search(key)
    }

    /// Index of the first key `≥ key`.
    pub fn lower_bound(&self, key: &[u8]) -> usize {
        self.search(key).unwrap_or_else(|i| i)
    }

    pub fn set_value(&mut self, i: usize, value: &[u8]) {
        if self.values[i].as_deref() != Some(value) {
            self.drop_entry(i);
            self.values[i] = Some(value.into());
            self.entry_hashes[i] = None;
            self.places[i] = Place::New;
            // The key matched the one written: it is this entry's from now on.
            self.trusted[i] = true;
            self.changed();
        }
    }

    pub fn insert_at(&mut self, i: usize, key: &[u8], value: &[u8]) {
        self.keys.insert(i, key);
        self.values.insert(i, Some(value.into()));
        self.entry_hashes.insert(i, None);
        self.places.insert(i, Place::New);
        self.trusted.insert(i, true);
        self.reshape();
    }

    /// Takes entry `i` out to move it to a neighbour chunk: its record (if
    /// stored) goes with it, so nothing is written again for it.
    pub fn take_entry(&mut self, i: usize) -> MovedEntry {
        let place = match self.places.remove(i) {
            Place::New => StoredAt::New,
            Place::Record(birth) => StoredAt::Record(birth),
            Place::Held(h) => StoredAt::Held(self.holders[h as usize]),
        };
        let trusted = self.trusted.remove(i);
        let hash = self.entry_hashes.remove(i);
        let (key, value) = self.cut(i);
        MovedEntry { key, value, hash, place, trusted }
    }

    /// Puts a moved entry at position `i`.
    pub fn put_entry(&mut self, i: usize, e: MovedEntry) {
        let place = self.place_of(e.place);
        self.keys.insert(i, &e.key);
        self.values.insert(i, e.value);
        self.entry_hashes.insert(i, e.hash);
        self.places.insert(i, place);
        self.trusted.insert(i, e.trusted);
        self.reshape();
    }

    /// `at` as this chunk records it (a holder is added if new).
    fn place_of(&mut self, at: StoredAt) -> Place {
        match at {
            StoredAt::New => Place::New,
            StoredAt::Record(birth) => Place::Record(birth),
            StoredAt::Held(holder) => {
                let i = self.holders.iter().position(|h| *h == holder).unwrap_or_else(|| {
                    self.holders.push(holder);
                    self.holders.len() - 1
                });
                Place::Held(i as u32)
            }
        }
    }

    /// Marks the chunk's entries moved: its in-chunk tree no longer lines
    /// up with them, and is dropped until the commit builds it again (a
    /// batch holds every chunk it changed until then).
    fn reshape(&mut self) {
        debug_assert!(self.unchecked.is_empty(), "a chunk's groups are checked before its entries move");
        self.reshaped = true;
        self.tree = Vec::new();
        self.changed();
    }

    /// Marks the chunk changed since its last commit and its last persist.
    fn changed(&mut self) {
        self.hash = None;
        self.persisted = false;
        self.copy_checked = false;
        self.planned = None;
    }

    /// Whether slot `i`'s key is known to be its entry's.
    pub fn is_trusted(&self, i: usize) -> bool {
        self.trusted[i]
    }

    /// Marks slot `i`'s key as its entry's (its record was read).
    pub fn trust(&mut self, i: usize) {
        self.trusted[i] = true;
    }

    /// Entry `i`'s record in the store, if it has one.
    pub fn stored_entry(&self, i: usize) -> Option<Ref> {
        match self.places[i] {
            Place::Record(birth) => Some(Ref { birth, hash: self.entry_hashes[i]? }),
            Place::New | Place::Held(_) => None,
        }
    }

    /// The full chunk record whose values records hold entry `i`'s value, if one does.
    pub fn holder(&self, i: usize) -> Option<Ref> {
        match self.places[i] {
            Place::Held(h) => Some(self.holders[h as usize]),
            Place::New | Place::Record(_) => None,
        }
    }

    /// Notes that entry `i`'s stored record (if any) is no longer used here.
    fn drop_entry(&mut self, i: usize) {
        if let Some(r) = self.stored_entry(i) {
            self.dropped.push((Table::Entries, r));
        }
    }

    /// Removes entry `i`; its record is no longer used.
    pub fn remove_at(&mut self, i: usize) {
        self.drop_entry(i);
        self.places.remove(i);
        self.trusted.remove(i);
        self.entry_hashes.remove(i);
        self.cut(i);
    }

    /// Removes entry `i`'s key and value (the caller removed its hash and birth).
    fn cut(&mut self, i: usize) -> (Box<[u8]>, Option<Box<[u8]>>) {
        let key = self.keys.remove(i);
        self.reshape();
        (key, self.values.remove(i))
    }

    /// Moves entries `at..` into a new chunk (the right half of a split).
    pub fn split_off(&mut self, at: usize) -> Chunk {
        let keys = self.keys.split_off(at);
        self.reshape();
        Chunk {
            keys,
            values: self.values.split_off(at),
            entry_hashes: self.entry_hashes.split_off(at),
            places: self.places.split_off(at),
            holders: self.holders.clone(),
            trusted: self.trusted.split_off(at),
            ..Chunk::default()
        }
    }

    /// Appends every entry of `other`, whose keys are all greater; `other`'s
    /// stored records are no longer used.
    pub fn append(&mut self, mut other: Chunk) {
        debug_assert!(other.unchecked.is_empty(), "a chunk's groups are checked before its entries move");
        self.dropped.append(&mut other.take_stored());
        self.keys.append(&other.keys);
        self.values.extend(other.values);
        self.entry_hashes.extend(other.entry_hashes);
        let offset = self.holders.len() as u32;
        self.holders.extend(other.holders);
        self.places.extend(other.places.into_iter().map(|p| match p {
            Place::Held(h) => Place::Held(h + offset),
            p => p,
        }));
        self.trusted.extend(other.trusted);
        self.reshape();
    }

    /// Every stored record this chunk uses or has dropped, for a chunk that
    /// leaves the tree (its entries' records stay if they moved elsewhere).
    pub fn take_stored(&mut self) -> Vec<(Table, Ref)> {
        let mut out = std::mem::take(&mut self.dropped);
        if let Some(s) = self.stored.take() {
            out.push((Table::Chunks, s.record));
            if s.base != s.record {
                out.push((Table::Chunks, s.base));
            }
        }
        out
    }

    /// For a changed chunk: moves to `out` the records born at `version`
    /// (written ahead by the batch) that it no longer uses: dropped entries,
    /// and its own record. Its next record is then written against its
    /// older base, or whole if the base was born at `version` too, so that
    /// no record born at `version` serves as another's base.
    pub(crate) fn discard_unborn(&mut self, version: u64, out: &mut Vec<(Table, Ref)>) {
        crate::persist::take_born(&mut self.dropped, version, out);
        let Some(s) = &mut self.stored else { return };
        if s.base.birth == version {
            // A record born at `version` is a delta of a base born then too.
            out.push((Table::Chunks, s.record));
            if s.base != s.record {
                out.push((Table::Chunks, s.base));
            }
            self.stored = None;
        } else if s.record.birth == version {
            out.push((Table::Chunks, s.record));
            s.record = s.base;
        } else {
            // Nothing of this chunk's changed: the copy check stands (every piece
            // of a batch written ahead calls this on every changed chunk).
            return;
        }
        self.copy_checked = false;
        self.planned = None;
    }

    /// Builds a chunk from verified sorted entries, their in-chunk tree
    /// and their chunk hash.
    pub fn from_verified(keys: &[&[u8]], values: &[&[u8]], tree: Vec<Hash>, hash: Hash) -> Chunk {
        let m = keys.len();
        let reserved = Keys::with_capacity(m, keys.iter().map(|k| k.len()).sum());
        let mut c = Chunk { keys: reserved, tree, hash: Some(hash), ..Chunk::default() };
        for (k, v) in keys.iter().zip(values) {
            c.keys.push(k);
            c.values.push(Some((*v).into()));
        }
        // Leaves sit in pre-order too; gather them rather than hashing again.
        c.entry_hashes = leaves_in_order(&c.tree, m).into_iter().map(Some).collect();
        c.places = vec![Place::New; m];
        c.trusted = vec![true; m];
        c
    }

    /// The chunk as store slots (keys and entry records). Entries without a
    /// record get one born at `version`, handed with its value to `new_entry`
    /// to be written.
    /// The chunk must be committed (every entry hashed).
    pub fn slots(&mut self, version: u64, mut new_entry: impl FnMut(&[u8], Ref)) -> Vec<Slot> {
        (0..self.len())
            .map(|i| {
                if self.places[i] == Place::New {
                    self.places[i] = Place::Record(version);
                    let hash = self.entry_hashes[i].expect("chunk hashed at commit");
                    new_entry(self.value(i), Ref { birth: version, hash });
                }
                self.slot(i, version)
            })
            .collect()
    }

    /// Slot `i` as a record written at `version` lists it (an entry with no
    /// record yet gets one born then). The chunk must be hashed.
    fn slot(&self, i: usize, version: u64) -> Slot {
        let hash = self.entry_hashes[i].expect("chunk hashed");
        let entry = match self.places[i] {
            Place::Record(birth) => Entry::Record(Ref { birth, hash }),
            Place::New => Entry::Record(Ref { birth: version, hash }),
            Place::Held(_) => Entry::Held(hash),
        };
        Slot::new(self.key(i), entry)
    }

    /// The chunk as the slots of a full record that holds every value (a
    /// sync's into an empty store). The chunk must be committed.
    pub fn held_slots(&self) -> Vec<Slot> {
        (0..self.len())
            .map(|i| Slot::new(self.key(i), Entry::Held(self.entry_hashes[i].expect("chunk hashed at commit"))))
            .collect()
    }

    /// After the chunk was written whole as `record`: its held values are there now.
    pub(crate) fn held_by(&mut self, record: Ref) {
        for p in &mut self.places {
            if let Place::Held(_) = p {
                *p = Place::Held(0);
            }
        }
        self.holders = vec![record];
    }

    /// The group of its holder's values records that holds entry `i`'s
    /// value, when this chunk lists the holder's slots (it is the chunk's
    /// base): a full record's slots are in key order, 16 a group. `None`:
    /// any group of the holder may (an entry moved in from another chunk).
    pub fn held_group(&self, i: usize) -> Option<usize> {
        let stored = self.stored.as_ref().filter(|s| self.holder(i) == Some(s.base))?;
        let at = stored.base_slots.binary_search_by(|s| (*s.key).cmp(self.key(i))).ok()?;
        Some(at / GROUP_LEAVES)
    }

    /// The values records that hold values of held slots not at hand: each
    /// holder, with the group when this chunk knows it.
    fn missing_values(&self) -> Vec<(Ref, Option<usize>)> {
        let mut out = Vec::new();
        for i in 0..self.len() {
            if let (Some(holder), None) = (self.holder(i), &self.values[i]) {
                let wanted = (holder, self.held_group(i));
                if !out.contains(&wanted) {
                    out.push(wanted);
                }
            }
        }
        out
    }

    /// Takes the values that full chunk record `holder`'s values records
    /// of groups `fetched` (`None`: all of them) hold (`held`, by key,
    /// unchecked) for this chunk's slots: each must hash, with the slot's
    /// key, to the slot's entry hash. Confirms those slots' keys. A slot in
    /// a group not fetched, or in one this chunk cannot tell, is left.
    pub(crate) fn take_held(
        &mut self,
        holder: &Ref,
        fetched: Option<&BTreeSet<usize>>,
        held: &HashMap<&[u8], &[u8]>,
    ) -> Result<(), StoreError> {
        for i in 0..self.len() {
            if self.holder(i) != Some(*holder) || self.values[i].is_some() {
                continue;
            }
            if let Some(groups) = fetched {
                if !self.held_group(i).is_some_and(|g| groups.contains(&g)) {
                    continue;
                }
            }
            let value = *held.get(self.key(i)).ok_or(StoreError::Corrupt)?;
            if Some(entry_hash(self.key(i), value)) != self.entry_hashes[i] {
                return Err(StoreError::Corrupt);
            }
            self.values[i] = Some(value.into());
            self.trusted[i] = true;
        }
        Ok(())
    }

    /// Entry `i`'s hash, if it is hashed.
    pub fn entry_hash(&self, i: usize) -> Option<Hash> {
        self.entry_hashes[i]
    }

    /// The values records of the values a commit of this changed chunk
    /// must copy and does not have ([`Chunk::missing_values`]): those of
    /// its held slots, when it would be written whole
    /// (`record::chunk_record` at `version`; a delta keeps them in its base).
    pub(crate) fn values_to_copy(&mut self, version: u64) -> Vec<(Ref, Option<usize>)> {
        if self.copy_checked || !self.places.iter().any(|p| matches!(p, Place::Held(_))) {
            return Vec::new();
        }
        self.rehash();
        let slots: Vec<Slot> = (0..self.len()).map(|i| self.slot(i, version)).collect();
        // A base born at `version` was written ahead by this batch: the write drops it (`discard_unborn`).
        let stored = self.stored.as_ref().filter(|s| s.base.birth != version);
        let delta = match chunk_record(
            stored.map(|s| (&s.base, &*s.base_slots, &*s.base_groups)),
            &slots,
            self.group_roots(),
        ) {
            ChunkRecord::Full { .. } => None,
            ChunkRecord::Delta(delta) => Some(delta),
        };
        let base = stored.map(|s| s.base);
        let missing = if delta.is_some() { Vec::new() } else { self.missing_values() };
        self.planned = Some(Planned { version, base, delta });
        self.copy_checked = missing.is_empty();
        missing
    }

    /// How a commit at `version` writes this changed chunk, whose `slots`
    /// then are given: `record::chunk_record` over its stored base, or what
    /// [`Chunk::values_to_copy`] found for the same version and base.
    pub(crate) fn record_at(&mut self, version: u64, slots: &[Slot]) -> ChunkRecord {
        let stored = self.stored.as_ref();
        match self.planned.take() {
            Some(p) if p.version == version && p.base == stored.map(|s| s.base) => match p.delta {
                Some(delta) => ChunkRecord::Delta(delta),
                None => ChunkRecord::Full { slots: slots.to_vec(), groups: self.group_roots() },
            },
            _ => chunk_record(stored.map(|s| (&s.base, &*s.base_slots, &*s.base_groups)), slots, self.group_roots()),
        }
    }

    /// Slots as [`Chunk::slots`] makes them, but an entry with no record yet
    /// whose key and entry hash `stored` knows a place of (an entry record,
    /// or a full chunk record whose values records hold it) is referenced there, not written.
    pub(crate) fn slots_reusing(
        &mut self,
        version: u64,
        stored: impl Fn(&[u8], &Hash) -> Option<StoredAt>,
        new_entry: impl FnMut(&[u8], Ref),
    ) -> Vec<Slot> {
        for i in 0..self.len() {
            if self.places[i] == Place::New {
                let hash = self.entry_hashes[i].expect("chunk hashed at commit");
                if let Some(at) = stored(self.key(i), &hash) {
                    self.places[i] = self.place_of(at);
                }
            }
        }
        self.slots(version, new_entry)
    }

    /// A chunk loaded from a store: its verified slots, in-chunk tree and
    /// hash, and the values of its verified entry records (`None`: left in
    /// the store, for a paged head; that slot's key is not confirmed yet).
    pub fn from_stored(slots: &[Slot], values: Vec<Option<Box<[u8]>>>, tree: Vec<Hash>, stored: StoredChunk) -> Chunk {
        let trusted = values.iter().map(Option::is_some).collect();
        let mut keys = Keys::with_capacity(slots.len(), slots.iter().map(|s| s.key.len()).sum());
        for s in slots {
            keys.push(&s.key);
        }
        Chunk {
            keys,
            entry_hashes: slots.iter().map(|s| Some(*s.entry.hash())).collect(),
            places: slots
                .iter()
                .map(|s| match s.entry {
                    Entry::Record(r) => Place::Record(r.birth),
                    Entry::Held(_) => Place::Held(0),
                })
                .collect(),
            holders: vec![stored.base],
            hash: Some(stored.record.hash),
            tree,
            values,
            trusted,
            stored: Some(stored),
            persisted: true,
            ..Chunk::default()
        }
    }

    /// A chunk a paged head loads: its groups' entry hashes are checked
    /// when a write first uses them, not at the load (`tree` holds the group
    /// nodes and those above them, `hash::preorder_above_groups`).
    pub fn with_groups_unchecked(mut self) -> Chunk {
        self.unchecked = vec![true; group_count(self.len())];
        self
    }

    /// Checks the group of entry `i` (its entry hashes against its node)
    /// if it is not yet: before a write changes entry `i` in place.
    pub fn check_group_of(&mut self, i: usize) -> Result<(), StoreError> {
        self.check_group(i / GROUP_LEAVES)
    }

    /// Checks every group not yet checked: before a write moves entries.
    pub fn check_groups(&mut self) -> Result<(), StoreError> {
        (0..self.unchecked.len()).try_for_each(|j| self.check_group(j))
    }

    fn check_group(&mut self, j: usize) -> Result<(), StoreError> {
        if self.unchecked.get(j) != Some(&true) {
            return Ok(());
        }
        let m = self.len();
        let leaves: Vec<Hash> = self.entry_hashes[j * GROUP_LEAVES..m.min((j + 1) * GROUP_LEAVES)]
            .iter()
            .map(|h| h.expect("an unchecked group is unchanged"))
            .collect();
        if !fill_group(&mut self.tree, m, j, &leaves) {
            return Err(StoreError::Corrupt);
        }
        self.unchecked[j] = false;
        if !self.unchecked.contains(&true) {
            self.unchecked = Vec::new();
        }
        Ok(())
    }

    /// The committed chunk hash. Panics if the chunk was changed since.
    pub fn hash(&self) -> Hash {
        self.hash.expect("chunk hashed at commit")
    }

    pub fn hash_cached(&self) -> Option<Hash> {
        self.hash
    }

    /// The committed in-chunk multiproof for entries `[lo, hi)`.
    pub fn multiproof(&self, lo: usize, hi: usize) -> Vec<Hash> {
        debug_assert!(self.hash.is_some(), "chunk hashed at commit");
        multiproof(&self.tree, self.len(), lo, hi)
    }

    /// The committed in-chunk hashes of a multiproof revealing `positions` (increasing).
    pub fn sparse_multiproof(&self, positions: &[usize]) -> Vec<Hash> {
        debug_assert!(self.hash.is_some(), "chunk hashed at commit");
        sparse_multiproof(&self.tree, self.len(), positions)
    }

    /// The committed entry hashes, in key order.
    pub fn leaves(&self) -> Vec<Hash> {
        self.entry_hashes.iter().map(|h| h.expect("chunk hashed at commit")).collect()
    }

    /// The committed in-chunk root.
    pub fn root(&self) -> Hash {
        self.tree[0]
    }

    /// The committed in-chunk tree's group nodes (`hash::GROUP_LEVEL`), which a chunk record stores.
    pub fn group_roots(&self) -> Vec<Hash> {
        group_roots(&self.tree, self.len())
    }

    /// Hashes what changed since the last commit and returns the chunk hash.
    pub fn rehash(&mut self) -> Hash {
        if let Some(h) = self.hash {
            return h;
        }
        let m = self.len();
        let stale: Vec<usize> = (0..m).filter(|&i| self.entry_hashes[i].is_none()).collect();
        let fresh = entry_hashes(stale.iter().map(|&i| (self.key(i), self.value(i))));
        // A few changed values of an unreshaped chunk: rehash their paths only
        // (about log2 M hashes each, against M − 1 for the whole tree). So do
        // any number while some group is unchecked: a whole tree would take
        // its entry hashes unchecked.
        let by_path =
            !self.reshaped && self.tree.len() + 1 == 2 * m && (stale.len() * 8 < m || !self.unchecked.is_empty());
        for (&i, h) in stale.iter().zip(&fresh) {
            self.entry_hashes[i] = Some(*h);
            if by_path {
                update_inchunk_leaf(&mut self.tree, m, i, *h);
            }
        }
        if !by_path {
            let leaves: Vec<Hash> = self.entry_hashes.iter().map(|h| h.expect("just hashed")).collect();
            self.tree = inchunk_tree(&leaves);
        }
        self.reshaped = false;
        let h = chunk_hash(self.len(), &self.tree[0]);
        self.hash = Some(h);
        h
    }

    /// Bytes this chunk holds, counted from its contents (a paged head's
    /// budget): keys, values held, per entry its hash, record and
    /// bookkeeping, the in-chunk tree, and the base's slots for deltas.
    pub fn resident_bytes(&self) -> usize {
        const PER_ENTRY: usize = 4 + 8 + 16 + 33 + 16;
        let values: usize = self.values.iter().flatten().map(|v| v.len()).sum();
        let base = self.stored.as_ref().map_or(0, |s| s.base_bytes);
        let planned = self.planned.as_ref().and_then(|p| p.delta.as_ref()).map_or(0, |d| d.bytes());
        256 + planned + self.keys.byte_len() + values + self.len() * PER_ENTRY + self.tree.len() * 32 + base
    }

    pub fn entries(&self) -> impl ExactSizeIterator<Item = (&[u8], &[u8])> + '_ {
        (0..self.len()).map(move |i| (self.key(i), self.value(i)))
    }
}

/// The leaves of a pre-order in-chunk tree over `m` entries, in key order.
fn leaves_in_order(tree: &[Hash], m: usize) -> Vec<Hash> {
    fn walk(tree: &[Hash], p: usize, n: usize, out: &mut Vec<Hash>) {
        if n == 1 {
            out.push(tree[p]);
        } else {
            let k = left_size(n);
            walk(tree, p + 1, k, out);
            walk(tree, p + 2 * k, n - k, out);
        }
    }
    let mut out = Vec::with_capacity(m);
    walk(tree, 0, m, &mut out);
    out
}
