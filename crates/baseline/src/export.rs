//! Export by post-order traversal into fixed-size chunks, and the in-order
//! importer that rebuilds the tree node by node (IAVL's export/import).
//!
//! A record is `u8 height` followed by
//! - for a leaf (height 0): `varint len ‖ key ‖ varint len ‖ value`;
//! - for an inner node: `varint size ‖ varint len ‖ key`.
//!
//! A chunk is one or more whole records; it carries no index, no proof and
//! no header.

use crate::tree::{Body, Node};
use crate::{check_entry, put_varint, BaselineTree, Error, Hash, MAX_HEIGHT, MAX_KEY_LEN};

impl BaselineTree {
    /// Serializes the tree by post-order traversal into chunks of at most
    /// `chunk_bytes` bytes each (a record larger than that gets a chunk of
    /// its own). Chunk `i` is element `i`; the client must apply them in
    /// order. The empty tree exports no chunk.
    pub fn export_chunks(&self, chunk_bytes: usize) -> Vec<Vec<u8>> {
        let mut packer = Packer { chunk_bytes, chunks: Vec::new(), current: Vec::new(), record: Vec::new() };
        if let Some(root) = &self.root {
            packer.post_order(root);
        }
        if !packer.current.is_empty() {
            packer.chunks.push(packer.current);
        }
        packer.chunks
    }
}

/// Packs records into chunks.
struct Packer {
    chunk_bytes: usize,
    chunks: Vec<Vec<u8>>,
    current: Vec<u8>,
    /// Scratch space for the record being encoded.
    record: Vec<u8>,
}

impl Packer {
    /// Emits the records of `node`'s subtree: left, right, then the node.
    fn post_order(&mut self, node: &Node) {
        if let Body::Inner(left, right) = &node.body {
            self.post_order(left);
            self.post_order(right);
        }
        self.record.clear();
        self.record.push(node.height);
        match &node.body {
            Body::Leaf(value) => {
                put_bytes(&mut self.record, &node.key);
                put_bytes(&mut self.record, value);
            }
            Body::Inner(..) => {
                put_varint(&mut self.record, node.size);
                put_bytes(&mut self.record, &node.key);
            }
        }
        if !self.current.is_empty() && self.current.len() + self.record.len() > self.chunk_bytes {
            self.chunks.push(std::mem::take(&mut self.current));
        }
        self.current.extend_from_slice(&self.record);
    }
}

/// Appends `varint len ‖ bytes`.
fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A bounded reader over one chunk.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, Error> {
        let (&b, rest) = self.rest.split_first().ok_or(Error::Truncated)?;
        self.rest = rest;
        Ok(b)
    }

    /// An unsigned LEB128 varint of at most 9 bytes (63 bits).
    fn varint(&mut self) -> Result<u64, Error> {
        let mut v = 0u64;
        for i in 0..9 {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Error::VarintOverflow)
    }

    /// `varint len ‖ bytes`, with the length checked against `max` (reported
    /// as `too_long`) before anything is read or allocated.
    fn bytes(&mut self, max: usize, too_long: Error) -> Result<&'a [u8], Error> {
        let len = self.varint()?;
        if len > max as u64 {
            return Err(too_long);
        }
        let (bytes, rest) = self.rest.split_at_checked(len as usize).ok_or(Error::Truncated)?;
        self.rest = rest;
        Ok(bytes)
    }
}

/// Rebuilds a tree from its chunks, applied in export order.
///
/// Every record is decoded with bounded reads and checked structurally
/// (sorted leaves, heights, sizes, inner keys), so that a finished import is
/// a valid tree; but nothing is checked against the trusted root before
/// [`finish`](Importer::finish). After an error the import has failed: every
/// later call returns the same error.
#[derive(Default)]
pub struct Importer {
    /// Completed subtrees awaiting their parent, deepest last; their hashes
    /// are computed on arrival. Boxed because they become children as they are.
    #[allow(clippy::vec_box)]
    stack: Vec<Box<Node>>,
    /// The key of the last leaf, to check order.
    last_key: Option<Vec<u8>>,
    /// The first error, which ends the import.
    failed: Option<Error>,
}

impl Importer {
    /// An importer expecting chunk 0.
    pub fn new() -> Importer {
        Importer::default()
    }

    /// Applies the next chunk: decodes its records and grows the tree.
    pub fn add_chunk(&mut self, chunk: &[u8]) -> Result<(), Error> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        let result = self.apply(chunk);
        if let Err(error) = result {
            self.failed = Some(error);
        }
        result
    }

    fn apply(&mut self, chunk: &[u8]) -> Result<(), Error> {
        if chunk.is_empty() {
            return Err(Error::Truncated);
        }
        let mut reader = Reader { rest: chunk };
        while !reader.rest.is_empty() {
            let height = reader.byte()?;
            if height > MAX_HEIGHT {
                return Err(Error::HeightInvalid);
            }
            let node = if height == 0 {
                let key = reader.bytes(MAX_KEY_LEN, Error::KeyTooLong)?;
                let value = reader.bytes(crate::MAX_VALUE_LEN, Error::ValueTooLong)?;
                self.leaf(key, value)?
            } else {
                let size = reader.varint()?;
                let key = reader.bytes(MAX_KEY_LEN, Error::KeyTooLong)?;
                self.inner(height, size, key)?
            };
            // A valid stream never holds more than one pending subtree per level.
            if self.stack.len() > usize::from(MAX_HEIGHT) {
                return Err(Error::StructureInvalid);
            }
            self.stack.push(node);
        }
        Ok(())
    }

    /// A leaf, whose key must follow the previous leaf's.
    fn leaf(&mut self, key: &[u8], value: &[u8]) -> Result<Box<Node>, Error> {
        check_entry(key, value)?;
        if self.last_key.as_deref().is_some_and(|last| last >= key) {
            return Err(Error::KeysNotSorted);
        }
        self.last_key = Some(key.to_vec());
        let mut node = Node::leaf(key.to_vec(), value.to_vec());
        node.hash();
        Ok(node)
    }

    /// An inner node adopting the two topmost pending subtrees, once its
    /// height, size and key are checked against them.
    fn inner(&mut self, height: u8, size: u64, key: &[u8]) -> Result<Box<Node>, Error> {
        let [left, right] = match self.stack.len().checked_sub(2) {
            Some(at) => [&self.stack[at], &self.stack[at + 1]],
            None => return Err(Error::StructureInvalid),
        };
        if height != 1 + left.height.max(right.height) || left.height.abs_diff(right.height) > 1 {
            return Err(Error::HeightInvalid);
        }
        if size != left.size + right.size {
            return Err(Error::CountInvalid);
        }
        if key != right.min_key() {
            return Err(Error::InnerKeyInvalid);
        }
        let right = self.stack.pop().expect("two pending subtrees");
        let left = self.stack.pop().expect("two pending subtrees");
        let mut node = Node::inner(key.to_vec(), left, right);
        node.hash();
        Ok(node)
    }

    /// Completes the import and returns the rebuilt tree's root hash, the
    /// only thing the client compares with its trusted root.
    pub fn finish(self) -> Result<Hash, Error> {
        self.finish_tree().map(|mut tree| tree.commit())
    }

    /// Completes the import and returns the rebuilt tree (hashes computed).
    /// With no chunk applied, that is the empty tree.
    pub fn finish_tree(mut self) -> Result<BaselineTree, Error> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        match self.stack.len() {
            0 | 1 => Ok(BaselineTree { root: self.stack.pop() }),
            _ => Err(Error::RebuildIncomplete),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::tree::tests::random_tree;

    fn import(chunks: &[Vec<u8>]) -> Result<Hash, Error> {
        let mut importer = Importer::new();
        for chunk in chunks {
            importer.add_chunk(chunk)?;
        }
        importer.finish()
    }

    #[test]
    fn random_trees_round_trip_at_any_chunk_size() {
        let mut rng = SmallRng::seed_from_u64(3);
        for n in [1, 2, 5, 64, 777, 5000] {
            let (mut tree, model) = random_tree(&mut rng, n);
            let root = tree.commit();
            for chunk_bytes in [0, 1, 100, 4096, crate::DEFAULT_CHUNK_BYTES] {
                let chunks = tree.export_chunks(chunk_bytes);
                // Records are whole (here at most 107 bytes): a chunk exceeds
                // `chunk_bytes` only when it holds a single large record, and
                // every chunk but the last is nearly full.
                let bytes: usize = chunks.iter().map(Vec::len).sum();
                for chunk in &chunks {
                    assert!(!chunk.is_empty() && chunk.len() <= chunk_bytes.max(107));
                }
                if chunk_bytes > 107 {
                    assert!(chunks.len() <= bytes / (chunk_bytes - 107) + 1);
                }
                assert_eq!(import(&chunks), Ok(root), "n = {n}, chunk_bytes = {chunk_bytes}");
            }
            let mut copy = {
                let mut importer = Importer::new();
                for chunk in tree.export_chunks(2048) {
                    importer.add_chunk(&chunk).unwrap();
                }
                importer.finish_tree().unwrap()
            };
            assert_eq!(copy.len(), n as u64);
            for (key, value) in &model {
                assert_eq!(copy.get(key), Some(value.as_slice()));
            }
            // The imported tree is a working tree.
            copy.insert(b"\x00extra", b"x").unwrap();
            tree.insert(b"\x00extra", b"x").unwrap();
            assert_eq!(copy.commit(), tree.commit());
        }
    }

    #[test]
    fn empty_tree_exports_nothing_and_imports_to_the_empty_root() {
        let mut tree = BaselineTree::new();
        assert!(tree.export_chunks(100).is_empty());
        assert_eq!(import(&[]), Ok(tree.commit()));
    }

    #[test]
    fn a_corrupted_value_is_detected_only_by_the_final_root() {
        let mut rng = SmallRng::seed_from_u64(4);
        let (mut tree, _) = random_tree(&mut rng, 2000);
        let root = tree.commit();
        let mut chunks = tree.export_chunks(4096);
        // A chunk ends with a whole record; find one whose last record is a
        // leaf with a non-empty value, and flip that value's last byte.
        let mut importer = Importer::new();
        let victim = (0..chunks.len())
            .find(|&i| {
                importer.add_chunk(&chunks[i]).unwrap();
                importer.stack.last().is_some_and(|n| matches!(&n.body, Body::Leaf(v) if !v.is_empty()))
            })
            .expect("a chunk ending in a non-empty value");
        *chunks[victim].last_mut().unwrap() ^= 1;
        let mut importer = Importer::new();
        for chunk in &chunks {
            importer.add_chunk(chunk).expect("every chunk is accepted");
        }
        let got = importer.finish().expect("the import completes");
        assert_ne!(got, root, "only the final root reveals the corruption");
    }

    #[test]
    fn every_single_byte_corruption_is_an_error_or_a_wrong_root() {
        let mut rng = SmallRng::seed_from_u64(5);
        let (mut tree, _) = random_tree(&mut rng, 300);
        let root = tree.commit();
        let chunks = tree.export_chunks(2048);
        for i in 0..chunks.len() {
            for at in 0..chunks[i].len() {
                let mut bad = chunks.clone();
                bad[i][at] ^= 1 << rng.gen_range(0..8);
                assert_ne!(import(&bad), Ok(root), "chunk {i}, byte {at}");
            }
        }
    }

    #[test]
    fn reordered_missing_or_truncated_chunks_never_reach_the_root() {
        let mut rng = SmallRng::seed_from_u64(6);
        let (mut tree, _) = random_tree(&mut rng, 1000);
        let root = tree.commit();
        let chunks = tree.export_chunks(1024);
        assert!(chunks.len() > 4);
        let mut swapped = chunks.clone();
        swapped.swap(1, 2);
        assert_ne!(import(&swapped), Ok(root));
        for missing in 0..chunks.len() {
            let mut fewer = chunks.clone();
            fewer.remove(missing);
            assert_ne!(import(&fewer), Ok(root), "without chunk {missing}");
        }
        let mut cut = chunks.clone();
        cut[2].pop();
        assert_eq!(import(&cut), Err(Error::Truncated));
        let mut doubled = chunks.clone();
        doubled.push(chunks[0].clone());
        assert_ne!(import(&doubled), Ok(root));
    }

    /// One record, hand-encoded.
    fn leaf(key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        put_bytes(&mut out, key);
        put_bytes(&mut out, value);
        out
    }

    fn inner(height: u8, size: u64, key: &[u8]) -> Vec<u8> {
        let mut out = vec![height];
        put_varint(&mut out, size);
        put_bytes(&mut out, key);
        out
    }

    fn import_error(records: &[Vec<u8>]) -> &'static str {
        import(&[records.concat()]).unwrap_err().code()
    }

    #[test]
    fn malformed_records_fail_with_their_code() {
        let (a, b, c) = (leaf(b"a", b"1"), leaf(b"b", b"2"), leaf(b"c", b"3"));
        assert_eq!(import(&[[a.clone(), b.clone(), inner(1, 2, b"b")].concat()]).map(|_| ()), Ok(()));
        assert_eq!(import(&[Vec::new()]), Err(Error::Truncated));
        assert_eq!(import_error(&[vec![0, 1]]), "TRUNCATED");
        assert_eq!(
            import_error(&[vec![0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]]),
            "VARINT_OVERFLOW"
        );
        assert_eq!(import_error(&[leaf(b"", b"1")]), "KEY_EMPTY");
        assert_eq!(import_error(&[leaf(&[7; MAX_KEY_LEN + 1], b"1")]), "KEY_TOO_LONG");
        assert_eq!(import_error(&[leaf(b"k", &vec![7; crate::MAX_VALUE_LEN + 1])]), "VALUE_TOO_LONG");
        assert_eq!(import_error(&[b.clone(), a.clone()]), "KEYS_NOT_SORTED");
        assert_eq!(import_error(&[a.clone(), a.clone()]), "KEYS_NOT_SORTED");
        assert_eq!(import_error(&[vec![MAX_HEIGHT + 1]]), "HEIGHT_INVALID");
        assert_eq!(import_error(&[a.clone(), b.clone(), inner(2, 2, b"b")]), "HEIGHT_INVALID");
        // ((a, b), c) is fine, but not a 3-high node over heights 1 and 0 …
        let ab = [a.clone(), b.clone(), inner(1, 2, b"b")].concat();
        assert_eq!(import(&[[ab.clone(), c.clone(), inner(2, 3, b"c")].concat()]).map(|_| ()), Ok(()));
        assert_eq!(import_error(&[ab.clone(), c.clone(), inner(3, 3, b"c")]), "HEIGHT_INVALID");
        // … nor an unbalanced one: (((a, b), c), d) as a 3-high node over 2 and 0.
        let abc = [ab.clone(), c.clone(), inner(2, 3, b"c")].concat();
        assert_eq!(import_error(&[abc, leaf(b"d", b"4"), inner(3, 4, b"d")]), "HEIGHT_INVALID");
        assert_eq!(import_error(&[a.clone(), b.clone(), inner(1, 3, b"b")]), "COUNT_INVALID");
        assert_eq!(import_error(&[a.clone(), b.clone(), inner(1, 2, b"a")]), "INNER_KEY_INVALID");
        assert_eq!(import_error(&[ab.clone(), c.clone(), inner(2, 3, b"b")]), "INNER_KEY_INVALID");
        assert_eq!(import_error(&[a.clone(), inner(1, 1, b"a")]), "STRUCTURE_INVALID");
        assert_eq!(import_error(&[a.clone(), b.clone()]), "REBUILD_INCOMPLETE");
        // More pending subtrees than levels.
        let leaves: Vec<_> = (0..=u32::from(MAX_HEIGHT) + 1).map(|i| leaf(&i.to_be_bytes(), b"")).collect();
        assert_eq!(import_error(&leaves), "STRUCTURE_INVALID");
    }

    #[test]
    fn an_error_ends_the_import() {
        let mut importer = Importer::new();
        assert_eq!(importer.add_chunk(&[0, 1]), Err(Error::Truncated));
        assert_eq!(importer.add_chunk(&leaf(b"a", b"1")), Err(Error::Truncated));
        assert_eq!(importer.finish(), Err(Error::Truncated));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = SmallRng::seed_from_u64(7);
        let (tree, _) = random_tree(&mut rng, 200);
        let valid = tree.export_chunks(512);
        for round in 0..20_000 {
            let mut importer = Importer::new();
            for _ in 0..rng.gen_range(1..4) {
                let chunk: Vec<u8> = if round % 2 == 0 {
                    // Pure noise, biased towards small heights and lengths.
                    (0..rng.gen_range(0..300))
                        .map(|_| if rng.gen_bool(0.5) { rng.gen_range(0..4) } else { rng.gen() })
                        .collect()
                } else {
                    // A valid chunk with a few random bytes overwritten.
                    let mut chunk = valid[rng.gen_range(0..valid.len())].clone();
                    for _ in 0..rng.gen_range(1..4) {
                        let at = rng.gen_range(0..chunk.len());
                        chunk[at] = rng.gen();
                    }
                    chunk
                };
                let _ = importer.add_chunk(&chunk);
            }
            let _ = importer.finish();
        }
    }
}
