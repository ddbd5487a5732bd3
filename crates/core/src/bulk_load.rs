//! A bulk load (`spec/store-format.md`, "Bulk load"): a state built from
//! entries given in ascending key order, straight into store records. Chunks
//! are filled to the bulk fill, one group of slots short of the capacity,
//! and the inner tree is built balanced over them, so each chunk is hashed
//! and written once. An insert of the same entries one by one would rewrite
//! a chunk each time a later entry lands in it: for a large state of random
//! keys that is every chunk, at every commit. The shape depends on the
//! entries and the capacity alone, not on the order they arrived in before
//! they were sorted. No I/O: callers move the bytes.

use crate::codec::{check_key, check_value};
use crate::error::TreeError;
use crate::hash::{chunk_hash, empty_root, entry_hashes, group_level, inchunk_levels, Hash};
use crate::limits::{MAX_CAPACITY, MAX_CHUNKS, MAX_ENTRIES, MIN_CAPACITY};
use crate::persist::WriteSet;
use crate::record::{full_record_puts, Entry, Ref, Slot, Table, VersionRecord};
use crate::sync_store::{finish_version, inner_node, ChunkFacts, Sub};
use crate::tree::tree_error;

/// A bulk load into a store that holds no version, as version `version`.
///
/// ```
/// use bpavl_core::BulkLoad;
/// let mut load = BulkLoad::new(4, 1).unwrap();
/// for i in 0u8..10 { load.push(&[i + 1], &[i]).unwrap(); }
/// // One full chunk so far: its record and the values record of its one
/// // group (4 values). The 6 entries left become two chunks of 3 at the finish.
/// assert_eq!(load.take_puts().len(), 2);
/// let (_root, finished) = load.finish();
/// assert_eq!(finished.version, 1);
/// assert_eq!(finished.puts.len(), 2 * 2 + 2); // two chunks with their values, two inner nodes
/// ```
#[derive(Debug)]
pub struct BulkLoad {
    capacity: usize,
    version: u64,
    /// Entries not in a chunk yet: fewer than 2F (F the bulk fill), so that
    /// the last two chunks can share what is left (each at least ⌈C/2⌉).
    /// Never empty once an entry came (a chunk is made at 2F, leaving F), so
    /// the last key pushed is the last of them.
    keys: Vec<Box<[u8]>>,
    values: Vec<Box<[u8]>>,
    entries: u64,
    chunks: Vec<ChunkFacts>,
    puts: Vec<(Table, Ref, Vec<u8>)>,
    puts_bytes: usize,
}

impl BulkLoad {
    pub fn new(capacity: usize, version: u64) -> Result<BulkLoad, TreeError> {
        if !(MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity) {
            return Err(TreeError::CapacityInvalid);
        }
        Ok(BulkLoad {
            capacity,
            version,
            keys: Vec::with_capacity(2 * capacity),
            values: Vec::with_capacity(2 * capacity),
            entries: 0,
            chunks: Vec::new(),
            puts: Vec::new(),
            puts_bytes: 0,
        })
    }

    /// Adds the entry after the last one. `KEYS_NOT_SORTED` unless its key
    /// is above the last key, `KEY_EMPTY`, `KEY_TOO_LONG`, `VALUE_TOO_LONG`
    /// or `TREE_FULL`; the load is unchanged then and may go on.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<(), TreeError> {
        check_key(key).map_err(tree_error)?;
        check_value(value).map_err(tree_error)?;
        if self.keys.last().is_some_and(|last| key <= &last[..]) {
            return Err(TreeError::KeysNotSorted);
        }
        if self.entries == MAX_ENTRIES || self.chunks.len() as u64 + 2 > MAX_CHUNKS {
            return Err(TreeError::TreeFull);
        }
        self.keys.push(key.into());
        self.values.push(value.into());
        self.entries += 1;
        let fill = bulk_fill(self.capacity);
        if self.keys.len() == 2 * fill {
            self.seal(fill);
        }
        Ok(())
    }

    /// Entries pushed so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Bytes of the records [`BulkLoad::take_puts`] would hand over (keys and values).
    pub fn puts_bytes(&self) -> usize {
        self.puts_bytes
    }

    /// The records of the chunks filled since the last call: each chunk's
    /// full chunk record and its values records, born at the load's version.
    pub fn take_puts(&mut self) -> Vec<(Table, Ref, Vec<u8>)> {
        self.puts_bytes = 0;
        std::mem::take(&mut self.puts)
    }

    /// The root, and the rest: the last chunks, the inner node records and
    /// the version record (written last, it makes the version visible).
    pub fn finish(mut self) -> (Hash, WriteSet) {
        // The last chunk of the fill and the rest: one chunk if they fit in
        // C, else two halves, each then of at least ⌈C/2⌉.
        let left = self.keys.len();
        if left > self.capacity {
            self.seal(left.div_ceil(2));
        }
        if !self.keys.is_empty() {
            self.seal(self.keys.len());
        }
        let mut out = WriteSet { version: self.version, puts: self.take_puts(), ..WriteSet::default() };
        if self.chunks.is_empty() {
            let root = empty_root(self.capacity);
            let record = VersionRecord { capacity: self.capacity, chunk_count: 0, entry_count: 0, top: None, root };
            out.version_record = record.encode();
            return (root, out);
        }
        let top = balanced(&self.chunks, self.version, &mut out);
        (finish_version(self.capacity, top, &mut out), out)
    }

    /// Makes a chunk of the first `m` pending entries.
    fn seal(&mut self, m: usize) {
        let keys: Vec<Box<[u8]>> = self.keys.drain(..m).collect();
        let values: Vec<Box<[u8]>> = self.values.drain(..m).collect();
        let hashes = entry_hashes(keys.iter().zip(&values).map(|(k, v)| (&k[..], &v[..])));
        let levels = inchunk_levels(&hashes);
        let hash = chunk_hash(m, &levels[levels.len() - 1][0]);
        let slots: Vec<Slot> = keys.iter().zip(hashes).map(|(key, hash)| Slot::new(key, Entry::Held(hash))).collect();
        let puts = full_record_puts(Ref { birth: self.version, hash }, &slots, group_level(&levels), |i| &values[i]);
        self.puts_bytes += puts.iter().map(|(_, _, bytes)| bytes.len()).sum::<usize>();
        self.puts.extend(puts);
        let first_key = keys.into_iter().next().expect("a chunk holds an entry");
        self.chunks.push(ChunkFacts { hash, entries: m as u64, key_height: 0, first_key });
    }
}

/// The entries of a bulk-loaded chunk but the last two: C − ⌊C/16⌋, one
/// group of slots short of the capacity, so that the first inserts into it
/// need no split. At C = 256 with 32-byte keys its record (16.3 KB) is also
/// small enough for four to a 64 KiB page of the Node backend, where full
/// chunks fit three (`docs/store.md`, "The bulk fill").
const fn bulk_fill(capacity: usize) -> usize {
    capacity - capacity / 16
}

/// The tree over `chunks` (in key order) that splits each range in two
/// halves, the left one taking the odd chunk: AVL-balanced, since halves
/// differ by at most one chunk and so their heights by at most one.
fn balanced(chunks: &[ChunkFacts], version: u64, out: &mut WriteSet) -> Sub {
    if chunks.len() == 1 {
        return Sub::chunk(&chunks[0], version);
    }
    let mid = chunks.len().div_ceil(2);
    let left = balanced(&chunks[..mid], version, out);
    let right = balanced(&chunks[mid..], version, out);
    inner_node(&chunks[mid].first_key, left, right, version, out, |_, _| None)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use sha2::{Digest, Sha256};

    use super::*;
    use crate::hash::{entry_hash, inchunk_tree, inner_hash, root_hash};
    use crate::limits::min_fill;
    use crate::record::ChunkRecord;
    use crate::Loader;

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;
    type Records = HashMap<(Table, Ref), Vec<u8>>;

    fn entries(n: u32) -> Entries {
        let mut e: Entries =
            (0..n).map(|i| (Sha256::digest(i.to_be_bytes()).to_vec(), vec![i as u8; 3 + (i % 7) as usize])).collect();
        e.sort();
        e
    }

    /// A finished load of `input`, its records taken every `every` entries.
    fn load(input: &[(Vec<u8>, Vec<u8>)], c: usize, every: usize) -> (Records, Vec<u8>) {
        let mut load = BulkLoad::new(c, 1).unwrap();
        let mut records = HashMap::new();
        for (i, (k, v)) in input.iter().enumerate() {
            load.push(k, v).unwrap();
            if i % every == 0 {
                records.extend(load.take_puts().into_iter().map(|(t, r, b)| ((t, r), b)));
            }
        }
        let (root, w) = load.finish();
        assert_eq!(VersionRecord::decode(&w.version_record, c).unwrap().root, root);
        assert!(w.stale.is_empty() && w.discarded.is_empty());
        records.extend(w.puts.into_iter().map(|(t, r, b)| ((t, r), b)));
        (records, w.version_record)
    }

    /// The chunk sizes of a load of `n` entries at capacity `c`, in key order.
    fn sizes(n: u32, c: usize) -> Vec<usize> {
        let (records, _) = load(&entries(n), c, 1);
        let mut chunks: Vec<(Vec<u8>, usize)> = records
            .iter()
            .filter(|((t, _), _)| *t == Table::Chunks)
            .map(|(_, bytes)| match ChunkRecord::decode(bytes, c).unwrap() {
                ChunkRecord::Full { slots, .. } => (slots[0].key.as_slice().to_vec(), slots.len()),
                ChunkRecord::Delta { .. } => panic!("a bulk load writes full chunks"),
            })
            .collect();
        chunks.sort();
        chunks.into_iter().map(|(_, m)| m).collect()
    }

    /// The chunk sizes the rule gives, computed apart from the load: chunks
    /// of F = C − ⌊C/16⌋, the last of them and the rest R one chunk when
    /// F + R ≤ C, else two halves.
    fn rule_sizes(n: usize, c: usize) -> Vec<usize> {
        let f = c - c / 16;
        let mut sizes = vec![f; n / f];
        let rest = n % f;
        match sizes.pop() {
            Some(_) if rest > 0 && f + rest <= c => sizes.push(f + rest),
            Some(_) if rest > 0 => sizes.extend([(f + rest).div_ceil(2), (f + rest) / 2]),
            Some(last) => sizes.push(last),
            None if rest > 0 => sizes.push(rest),
            None => {}
        }
        sizes
    }

    #[test]
    fn chunks_hold_the_bulk_fill_but_the_last_two_which_share_the_rest() {
        assert_eq!(sizes(0, 4), Vec::<usize>::new());
        assert_eq!(sizes(3, 4), vec![3]);
        assert_eq!(sizes(4, 4), vec![4]);
        assert_eq!(sizes(5, 4), vec![3, 2]);
        assert_eq!(sizes(8, 4), vec![4, 4]);
        assert_eq!(sizes(9, 4), vec![4, 3, 2]);
        assert_eq!(sizes(12, 4), vec![4, 4, 4]);
        // Below C = 16 the fill is C; at 16 it is 15, at 256 it is 240.
        assert_eq!(sizes(31, 16), vec![15, 16]);
        assert_eq!(sizes(46, 16), vec![15, 15, 16]);
        assert_eq!(sizes(48, 16), vec![15, 15, 9, 9]);
        assert_eq!(sizes(250, 256), vec![250]);
        assert_eq!(sizes(1001, 256), vec![240, 240, 240, 141, 140]);
        for (n, c) in [(1000, 3), (1001, 256), (77, 2), (513, 256), (497, 256), (496, 256), (1000, 17), (4000, 4096)] {
            let s = sizes(n, c);
            assert_eq!(s, rule_sizes(n as usize, c), "n = {n}, C = {c}");
            assert_eq!(s.iter().sum::<usize>(), n as usize);
            assert!(s.iter().all(|&m| m <= c && (s.len() == 1 || m >= min_fill(c))), "{s:?}");
        }
    }

    #[test]
    fn refuses_keys_out_of_order_and_bad_entries_and_goes_on() {
        let mut load = BulkLoad::new(2, 1).unwrap();
        load.push(b"b", b"1").unwrap();
        assert_eq!(load.push(b"b", b"2"), Err(TreeError::KeysNotSorted));
        assert_eq!(load.push(b"a", b"2"), Err(TreeError::KeysNotSorted));
        assert_eq!(load.push(b"", b"2"), Err(TreeError::KeyEmpty));
        assert_eq!(load.push(&[1; 1025], b"2"), Err(TreeError::KeyTooLong));
        assert_eq!(load.push(b"c", &[0; 65537]), Err(TreeError::ValueTooLong));
        load.push(b"c", b"3").unwrap();
        assert_eq!(load.entries(), 2);
        assert_eq!(BulkLoad::new(1, 1).unwrap_err(), TreeError::CapacityInvalid);
        assert_eq!(BulkLoad::new(4097, 1).unwrap_err(), TreeError::CapacityInvalid);
    }

    /// The loaded version, read back through the store's loader (every
    /// record checked against its hash), is a tree of exactly the entries
    /// whose invariants and hashes all hold.
    #[test]
    fn the_loaded_version_is_a_valid_tree_of_the_entries() {
        for (n, c) in [(0, 4), (1, 2), (2, 2), (3, 2), (50, 2), (100, 3), (129, 4), (1000, 16), (3000, 256)] {
            let input = entries(n);
            let (records, version_record) = load(&input, c, 97);
            let loader = Loader::new(1, &version_record, c).unwrap();
            let tree = loader.load_from(|table, r| records.get(&(table, *r)).map(Vec::as_slice)).unwrap();
            tree.check_invariants().unwrap();
            let got: Entries = tree.head().iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
            assert_eq!(got, input, "n = {n}, C = {c}");
        }
    }

    /// The root, recomputed here from the rule alone: chunks of the bulk fill
    /// but the last two, and each range of chunks split with the odd one on
    /// the left.
    #[test]
    fn the_root_is_that_of_the_balanced_tree_of_bulk_filled_chunks() {
        fn top(chunks: &[(usize, Hash)]) -> (u8, u64, u64, Hash) {
            if let [(m, hash)] = chunks {
                return (0, 1, *m as u64, *hash);
            }
            let mid = chunks.len().div_ceil(2);
            let (l, r) = (top(&chunks[..mid]), top(&chunks[mid..]));
            let height = 1 + l.0.max(r.0);
            (height, l.1 + r.1, l.2 + r.2, inner_hash(height, l.1 + r.1, l.2 + r.2, &l.3, &r.3))
        }
        for (n, c) in [(1000, 16), (37, 4), (5, 4), (256, 256), (3000, 256)] {
            let input = entries(n);
            let mut at = 0;
            let chunks: Vec<(usize, Hash)> = rule_sizes(n as usize, c)
                .iter()
                .map(|&m| {
                    let leaves: Vec<Hash> = input[at..at + m].iter().map(|(k, v)| entry_hash(k, v)).collect();
                    at += m;
                    (m, chunk_hash(m, &inchunk_tree(&leaves)[0]))
                })
                .collect();
            let (_, chunk_count, entry_count, hash) = top(&chunks);
            let (_, version_record) = load(&input, c, 1);
            let record = VersionRecord::decode(&version_record, c).unwrap();
            assert_eq!(record.root, root_hash(c, chunk_count, entry_count, &hash), "n = {n}, C = {c}");
            assert_eq!((record.chunk_count, record.entry_count), (chunk_count, n as u64));
        }
    }
}
