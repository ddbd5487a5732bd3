//! The pieces a catch-up fetches (`spec/wire.md`, "Catch-up";
//! `spec/proof-format.md`, "Subtree" and "Leaves"): the inner nodes under a
//! position of a committed tree, the entry-hash list of a chunk, and chosen
//! entries of a chunk. Each is checked by hashing up to what the client
//! already trusts (`catchup.rs`), so a peer serves them as plain data.

use crate::codec::{put_bytes, put_varint, Reader};
use crate::error::{ProofError, TreeError};
use crate::hash::Hash;
use crate::limits::MAX_HEIGHT;
use crate::node::Node;
use crate::tree::Snapshot;

/// Format byte of a subtree (inner nodes in pre-order).
pub const FORMAT_SUBTREE: u8 = 0x0e;
/// Format byte of a chunk's entry-hash list.
pub const FORMAT_LEAVES: u8 = 0x0f;
/// Most levels one `NODES` request asks for.
pub const MAX_SUBTREE_LEVELS: u8 = MAX_HEIGHT;

/// A position in the inner tree: the turns from its top, `true` to the right.
///
/// Encoded as `depth u8 ‖ ⌈depth/8⌉ bytes`, turn `i` in bit `7 − i mod 8`
/// of byte `i / 8`, unused bits zero.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TreePath(Vec<bool>);

impl TreePath {
    /// The top of the tree.
    pub fn top() -> TreePath {
        TreePath(Vec::new())
    }

    pub fn turns(&self) -> &[bool] {
        &self.0
    }

    pub fn depth(&self) -> usize {
        self.0.len()
    }

    /// One step further down.
    pub fn child(&self, right: bool) -> TreePath {
        let mut turns = self.0.clone();
        turns.push(right);
        TreePath(turns)
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.0.len() as u8);
        let mut bytes = vec![0u8; self.0.len().div_ceil(8)];
        for (i, &right) in self.0.iter().enumerate() {
            if right {
                bytes[i / 8] |= 0x80 >> (i % 8);
            }
        }
        out.extend_from_slice(&bytes);
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Reads a path: `PATH_TOO_LONG` past depth 48, `FLAGS_INVALID` for a
    /// set unused bit.
    pub fn read(r: &mut Reader) -> Result<TreePath, ProofError> {
        let depth = r.u8()? as usize;
        if depth > MAX_HEIGHT as usize {
            return Err(ProofError::PathTooLong);
        }
        let bytes = r.take(depth.div_ceil(8))?;
        if depth % 8 != 0 && bytes[depth / 8] & (0xff >> (depth % 8)) != 0 {
            return Err(ProofError::FlagsInvalid);
        }
        Ok(TreePath((0..depth).map(|i| bytes[i / 8] & (0x80 >> (i % 8)) != 0).collect()))
    }

    /// A whole encoded path.
    pub fn decode(bytes: &[u8]) -> Result<TreePath, ProofError> {
        let mut r = Reader::plain(bytes);
        let path = TreePath::read(&mut r)?;
        r.finish()?;
        Ok(path)
    }
}

/// An inner node as a subtree lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireNode {
    pub height: u8,
    pub chunks: u64,
    pub entries: u64,
    /// Whether each child (left, right) is a chunk.
    pub left_is_chunk: bool,
    pub right_is_chunk: bool,
    pub left: Hash,
    pub right: Hash,
    /// The smallest key of the right subtree, as the peer says: a search
    /// hint, checked once that subtree's keys are known.
    pub key_copy: Vec<u8>,
}

impl WireNode {
    pub fn hash(&self) -> Hash {
        crate::hash::inner_hash(self.height, self.chunks, self.entries, &self.left, &self.right)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.height);
        put_varint(out, self.chunks);
        put_varint(out, self.entries);
        out.push(u8::from(self.left_is_chunk) | (u8::from(self.right_is_chunk) << 1));
        out.extend_from_slice(&self.left);
        out.extend_from_slice(&self.right);
        put_bytes(out, &self.key_copy);
    }

    pub fn read(r: &mut Reader) -> Result<WireNode, ProofError> {
        let height = r.u8()?;
        if height == 0 || height > MAX_HEIGHT {
            return Err(ProofError::HeightInvalid);
        }
        let chunks = r.varint()?;
        let entries = r.varint()?;
        let kinds = r.u8()?;
        if kinds & !3 != 0 {
            return Err(ProofError::FlagsInvalid);
        }
        let (left, right) = (r.hash()?, r.hash()?);
        let key_copy = r.key()?.to_vec();
        Ok(WireNode {
            height,
            chunks,
            entries,
            left_is_chunk: kinds & 1 != 0,
            right_is_chunk: kinds & 2 != 0,
            left,
            right,
            key_copy,
        })
    }

    pub(crate) fn of_record(n: &crate::record::NodeRecord) -> WireNode {
        use crate::record::Child;
        WireNode {
            height: n.height,
            chunks: n.chunk_count,
            entries: n.entry_count,
            left_is_chunk: matches!(n.left, Child::Chunk(_)),
            right_is_chunk: matches!(n.right, Child::Chunk(_)),
            left: n.left.record().hash,
            right: n.right.record().hash,
            key_copy: n.key_copy.clone(),
        }
    }

    fn of(node: &Node) -> Option<WireNode> {
        let Node::Inner(n) = node else { return None };
        Some(WireNode {
            height: n.height,
            chunks: n.chunks,
            entries: n.entries,
            left_is_chunk: n.left.is_chunk(),
            right_is_chunk: n.right.is_chunk(),
            left: n.left.hash(),
            right: n.right.hash(),
            key_copy: n.key.as_bytes().to_vec(),
        })
    }
}

/// The positions a bitmap asks for (`ENTRIES`): `⌈m/8⌉` bytes, bit `p % 8`
/// (least significant first) of byte `p / 8` for position `p`; at least one
/// bit, none at `m` or above. `POSITION_INVALID` otherwise.
pub fn bitmap_positions(bitmap: &[u8], m: usize) -> Result<Vec<usize>, ProofError> {
    if bitmap.len() != m.div_ceil(8) {
        return Err(ProofError::PositionInvalid);
    }
    let positions: Vec<usize> = (0..bitmap.len() * 8).filter(|&p| bitmap[p / 8] & (1 << (p % 8)) != 0).collect();
    if positions.is_empty() || positions.last().is_some_and(|&p| p >= m) {
        return Err(ProofError::PositionInvalid);
    }
    Ok(positions)
}

/// The bitmap of `positions` (each below `m`).
pub fn positions_bitmap(positions: &[usize], m: usize) -> Vec<u8> {
    let mut bitmap = vec![0u8; m.div_ceil(8)];
    for &p in positions {
        bitmap[p / 8] |= 1 << (p % 8);
    }
    bitmap
}

impl Snapshot {
    fn at(&self, path: &TreePath) -> Option<&Node> {
        let mut node = self.top.as_ref()?;
        for &right in path.turns() {
            let Node::Inner(n) = node else { return None };
            node = if right { &n.right } else { &n.left };
        }
        Some(node)
    }

    fn chunk_at_path(&self, path: &TreePath) -> Result<&crate::chunk::Chunk, TreeError> {
        match self.at(path) {
            Some(Node::Leaf(c)) => Ok(c),
            _ => Err(TreeError::ChunkOutOfRange),
        }
    }

    /// The subtree (`0x0E`) under `path`: its inner nodes in pre-order, down
    /// to `levels` levels (1 … 48), cut after the most nodes that fit
    /// `max_bytes` (at least one). `CHUNK_OUT_OF_RANGE` unless `path` names
    /// an inner node; `QUERY_INVALID` for `levels` outside 1 … 48.
    pub fn export_subtree(&self, path: &TreePath, levels: u8, max_bytes: usize) -> Result<Vec<u8>, TreeError> {
        check_levels(levels)?;
        let top = self.at(path).filter(|n| !n.is_chunk()).ok_or(TreeError::ChunkOutOfRange)?;
        write_subtree(self.capacity, top, levels, max_bytes, expand_node)
    }

    /// The entry-hash list (`0x0F`) of the chunk at `path`
    /// (`CHUNK_OUT_OF_RANGE` if `path` names no chunk).
    pub fn export_leaves(&self, path: &TreePath) -> Result<Vec<u8>, TreeError> {
        Ok(leaves_bytes(&self.chunk_at_path(path)?.leaves()))
    }

    /// The `ENTRIES` answer for the chunk at `path`: `k varint ‖ k × (key
    /// bytes ‖ value bytes)` for the first k positions the bitmap asks for,
    /// k the most that fit `max_bytes` (at least one). `CHUNK_OUT_OF_RANGE`
    /// if `path` names no chunk, `QUERY_INVALID` for a bitmap that is not
    /// one of this chunk's.
    pub fn export_entries(&self, path: &TreePath, bitmap: &[u8], max_bytes: usize) -> Result<Vec<u8>, TreeError> {
        let chunk = self.chunk_at_path(path)?;
        let positions = bitmap_positions(bitmap, chunk.len()).map_err(|_| TreeError::QueryInvalid)?;
        Ok(entries_bytes(positions.iter().map(|&p| (chunk.key(p), chunk.value(p))), max_bytes))
    }
}

/// A node of a tree in memory, as `write_subtree` walks it.
fn expand_node<'a>(node: &&'a Node) -> Result<Option<(WireNode, [&'a Node; 2])>, TreeError> {
    Ok(match node {
        Node::Inner(n) => WireNode::of(node).map(|w| (w, [&n.left, &n.right])),
        _ => None,
    })
}

/// `QUERY_INVALID` unless 1 ≤ `levels` ≤ 48.
pub(crate) fn check_levels(levels: u8) -> Result<(), TreeError> {
    if levels == 0 || levels > MAX_SUBTREE_LEVELS {
        return Err(TreeError::QueryInvalid);
    }
    Ok(())
}

/// A subtree from `top` down: `expand` gives a node's wire form and its two
/// children, or `None` for a chunk. Pre-order, `levels` deep, cut after the
/// most nodes that fit `max_bytes` (at least one, and two when the first one's
/// kinds need its inner child: `spec/catchup.md`, "Kinds").
pub(crate) fn write_subtree<T, E>(
    capacity: usize,
    top: T,
    levels: u8,
    max_bytes: usize,
    mut expand: impl FnMut(&T) -> Result<Option<(WireNode, [T; 2])>, E>,
) -> Result<Vec<u8>, E> {
    let mut out = vec![FORMAT_SUBTREE];
    put_varint(&mut out, capacity as u64);
    let mut todo = vec![(top, 1u8)];
    let (mut emitted, mut least) = (0, 1);
    while let Some((node, level)) = todo.pop() {
        let Some((wire, [left, right])) = expand(&node)? else { continue };
        let before = out.len();
        wire.encode(&mut out);
        if out.len() > max_bytes && emitted >= least {
            out.truncate(before);
            break;
        }
        if emitted == 0 && levels > 1 && wire.kinds_forced() == Ok(false) {
            least = 2;
        }
        emitted += 1;
        if level < levels {
            todo.push((right, level + 1));
            todo.push((left, level + 1));
        }
    }
    Ok(out)
}

/// The leaves object (`0x0F`) of a chunk with these entry hashes.
pub(crate) fn leaves_bytes(leaves: &[Hash]) -> Vec<u8> {
    let mut out = Vec::with_capacity(3 + 32 * leaves.len());
    out.push(FORMAT_LEAVES);
    put_varint(&mut out, leaves.len() as u64);
    for h in leaves {
        out.extend_from_slice(h);
    }
    out
}

/// The `ENTRIES` answer: the first k of `entries` that fit `max_bytes` (at least one).
pub(crate) fn entries_bytes<'a>(entries: impl Iterator<Item = (&'a [u8], &'a [u8])>, max_bytes: usize) -> Vec<u8> {
    let (mut body, mut k) = (Vec::new(), 0u64);
    for (key, value) in entries {
        let before = body.len();
        put_bytes(&mut body, key);
        put_bytes(&mut body, value);
        if k > 0 && body.len() + 8 > max_bytes {
            body.truncate(before);
            break;
        }
        k += 1;
    }
    let mut out = Vec::with_capacity(body.len() + 3);
    put_varint(&mut out, k);
    out.extend_from_slice(&body);
    out
}

/// A subtree that checked: the capacity it carries and its nodes, each at
/// its path, in the order they came (pre-order), and whether its kinds are
/// proven (`spec/catchup.md`, "Kinds"): a node whose kinds are not must be
/// asked again, its children's kinds being only the peer's word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedSubtree {
    pub capacity: usize,
    pub nodes: Vec<(TreePath, WireNode, bool)>,
}

impl WireNode {
    /// Whether the node's kinds are all its height and chunk count allow
    /// (`spec/catchup.md`, "Kinds"): height 1 has two chunks, height 2 with
    /// 3 chunks one chunk and one inner node, any other two inner nodes
    /// (`KINDS_MISMATCH` otherwise). `Ok(false)` for height 2 with 3 chunks,
    /// where only the inner child, once read, shows which side it is.
    fn kinds_forced(&self) -> Result<bool, ProofError> {
        let (forced, chunks) = match (self.height, self.chunks) {
            (1, _) => (true, 2),
            (2, 3) => (false, 1),
            _ => (true, 0),
        };
        let claimed = u8::from(self.left_is_chunk) + u8::from(self.right_is_chunk);
        let ok = claimed == chunks && (forced || self.left_is_chunk != self.right_is_chunk);
        if ok {
            Ok(forced)
        } else {
            Err(ProofError::KindsMismatch)
        }
    }
}

/// Checks a `NODES` answer for `path` asked with `levels`
/// (`spec/catchup.md`, "Subtree"): for the top, `anchor` is the trusted
/// root (which commits to the capacity); below it, the hash of the position
/// (its parent's child hash), and the answer must carry `capacity`, the
/// capacity the client holds. Every node must hash to what its parent names
/// (`NODE_MISMATCH`); decoding codes as the spec orders them.
pub fn verify_subtree(
    path: &TreePath,
    anchor: &Hash,
    levels: u8,
    capacity: usize,
    bytes: &[u8],
) -> Result<VerifiedSubtree, ProofError> {
    let mut r = Reader::new(bytes, FORMAT_SUBTREE)?;
    let carried = r.capacity()?;
    let mut todo = vec![(path.clone(), *anchor, 1u8)];
    let mut nodes: Vec<(TreePath, WireNode, bool)> = Vec::new();
    loop {
        let Some((at, want, level)) = todo.pop() else { return Err(ProofError::TrailingBytes) };
        let node = WireNode::read(&mut r)?;
        let hash = node.hash();
        let ok = if at.depth() == 0 {
            crate::hash::root_hash(carried, node.chunks, node.entries, &hash) == want
        } else {
            hash == want && (path.depth() == 0 || carried == capacity)
        };
        if !ok {
            return Err(ProofError::NodeMismatch);
        }
        // The node read before this one, with kinds that only its inner child proves, was
        // listed just now (pre-order): this node hashed to the hash it names on that side.
        if let Some(parent) = nodes.last_mut().filter(|(p, _, _)| at.depth() == p.depth() + 1) {
            parent.2 = true;
        }
        let proven = node.kinds_forced()?;
        if level < levels {
            if !node.right_is_chunk {
                todo.push((at.child(true), node.right, level + 1));
            }
            if !node.left_is_chunk {
                todo.push((at.child(false), node.left, level + 1));
            }
        }
        nodes.push((at, node, proven));
        if r.remaining() == 0 {
            // The first node's inner child is always asked with it and fits: a cut before it is no answer.
            if nodes.len() == 1 && !proven && levels > 1 {
                return Err(ProofError::Truncated);
            }
            return Ok(VerifiedSubtree { capacity: carried, nodes });
        }
    }
}

/// Checks a `LEAVES` answer (`spec/catchup.md`, "Leaves") against the
/// chunk hash its parent names, in a tree of `capacity`; returns the entry
/// hashes (`LEAVES_MISMATCH` if they do not give the chunk hash).
pub fn verify_leaves(chunk: &Hash, capacity: usize, bytes: &[u8]) -> Result<Vec<Hash>, ProofError> {
    verify_leaf_groups(chunk, capacity, bytes).map(|(leaves, _)| leaves)
}

/// [`verify_leaves`], with the chunk's group nodes (`hash::GROUP_LEVEL`),
/// which the tree it hashed holds: a catch-up stores them in the chunk's record.
pub(crate) fn verify_leaf_groups(
    chunk: &Hash,
    capacity: usize,
    bytes: &[u8],
) -> Result<(Vec<Hash>, Vec<Hash>), ProofError> {
    let mut r = Reader::new(bytes, FORMAT_LEAVES)?;
    let m = r.chunk_size(capacity)?;
    let leaves = r.hashes(m)?;
    r.finish()?;
    let levels = crate::hash::inchunk_levels(&leaves);
    if crate::hash::chunk_hash(m, &levels[levels.len() - 1][0]) != *chunk {
        return Err(ProofError::LeavesMismatch);
    }
    let groups = crate::hash::group_level(&levels).to_vec();
    Ok((leaves, groups))
}

/// An entry that checked against its leaf.
pub type VerifiedEntry<'a> = (usize, &'a [u8], &'a [u8]);

/// Checks an `ENTRIES` answer (`spec/catchup.md`, "Entries") to a request
/// with `bitmap`, against the chunk's `leaves`: k entries, 1 ≤ k ≤ the
/// positions asked (`COUNT_INVALID`), each hashing to the leaf at its
/// position (`ENTRY_MISMATCH`). Returns each with its position.
/// `POSITION_INVALID` for a bitmap that is not one of this chunk's.
pub fn verify_entries<'a>(
    leaves: &[Hash],
    bitmap: &[u8],
    bytes: &'a [u8],
) -> Result<Vec<VerifiedEntry<'a>>, ProofError> {
    let positions = bitmap_positions(bitmap, leaves.len())?;
    let mut r = Reader::plain(bytes);
    // Compared as read: on wasm32 a cast first would wrap 2^32 + 1 to 1.
    let k = r.varint()?;
    if k == 0 || k > positions.len() as u64 {
        return Err(ProofError::CountInvalid);
    }
    let k = k as usize;
    let mut out = Vec::with_capacity(k);
    for &p in &positions[..k] {
        let (key, value) = (r.key()?, r.value()?);
        if crate::hash::entry_hash(key, value) != leaves[p] {
            return Err(ProofError::EntryMismatch);
        }
        out.push((p, key, value));
    }
    r.finish()?;
    Ok(out)
}
