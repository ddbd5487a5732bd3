//! The IAVL-style Merkle AVL+ tree: one entry per leaf, inner nodes keyed by
//! the smallest key of their right subtree, hashes computed at commit.

use std::cmp::Ordering;

use sha2::{Digest, Sha256};

use crate::{check_entry, put_varint, Error, Hash};

/// Domain tag of a leaf hash.
const LEAF_TAG: u8 = 0x00;
/// Domain tag of an inner-node hash.
const INNER_TAG: u8 = 0x01;

/// One node. A leaf has height 0 and size 1.
pub(crate) struct Node {
    /// A leaf's key; for an inner node, the smallest key of its right subtree.
    pub(crate) key: Vec<u8>,
    pub(crate) height: u8,
    /// Number of leaves below (1 for a leaf).
    pub(crate) size: u64,
    /// Cached hash; `None` until computed, and again after a change below.
    hash: Option<Hash>,
    pub(crate) body: Body,
}

pub(crate) enum Body {
    Leaf(Vec<u8>),
    Inner(Box<Node>, Box<Node>),
}

impl Node {
    /// A leaf whose hash is computed later.
    pub(crate) fn leaf(key: Vec<u8>, value: Vec<u8>) -> Box<Node> {
        Box::new(Node { key, height: 0, size: 1, hash: None, body: Body::Leaf(value) })
    }

    /// An inner node over `left` and `right`, keyed by `key`.
    pub(crate) fn inner(key: Vec<u8>, left: Box<Node>, right: Box<Node>) -> Box<Node> {
        let mut node = Box::new(Node { key, height: 0, size: 0, hash: None, body: Body::Leaf(Vec::new()) });
        node.set_children(left, right);
        node
    }

    /// Installs the children and recomputes height and size; the hash is
    /// invalidated.
    fn set_children(&mut self, left: Box<Node>, right: Box<Node>) {
        self.height = 1 + left.height.max(right.height);
        self.size = left.size + right.size;
        self.hash = None;
        self.body = Body::Inner(left, right);
    }

    /// Removes an inner node's children (to be reinstalled by `set_children`).
    fn take_children(&mut self) -> (Box<Node>, Box<Node>) {
        match std::mem::replace(&mut self.body, Body::Leaf(Vec::new())) {
            Body::Inner(left, right) => (left, right),
            Body::Leaf(_) => unreachable!("take_children on a leaf"),
        }
    }

    /// The smallest key below this node: its leftmost leaf's.
    pub(crate) fn min_key(&self) -> &[u8] {
        let mut node = self;
        while let Body::Inner(left, _) = &node.body {
            node = left;
        }
        &node.key
    }

    /// The node's hash, computing (and caching) the missing ones below.
    pub(crate) fn hash(&mut self) -> Hash {
        if let Some(hash) = self.hash {
            return hash;
        }
        let mut pre = Vec::with_capacity(80);
        match &mut self.body {
            // H(0x00 ‖ height ‖ size ‖ len ‖ key ‖ len ‖ H(value))
            Body::Leaf(value) => {
                pre.push(LEAF_TAG);
                put_varint(&mut pre, 0);
                put_varint(&mut pre, 1);
                put_varint(&mut pre, self.key.len() as u64);
                pre.extend_from_slice(&self.key);
                put_varint(&mut pre, 32);
                pre.extend_from_slice(&Sha256::digest(value));
            }
            // H(0x01 ‖ height ‖ size ‖ H(left) ‖ H(right))
            Body::Inner(left, right) => {
                pre.push(INNER_TAG);
                put_varint(&mut pre, u64::from(self.height));
                put_varint(&mut pre, self.size);
                pre.extend_from_slice(&left.hash());
                pre.extend_from_slice(&right.hash());
            }
        }
        let hash: Hash = Sha256::digest(&pre).into();
        self.hash = Some(hash);
        hash
    }
}

/// Inserts or updates `key` below `node`; sets `replaced` on an update.
fn insert(mut node: Box<Node>, key: &[u8], value: &[u8], replaced: &mut bool) -> Box<Node> {
    if let Body::Leaf(old) = &mut node.body {
        return match key.cmp(&node.key) {
            Ordering::Equal => {
                *old = value.to_vec();
                node.hash = None;
                *replaced = true;
                node
            }
            Ordering::Less => Node::inner(node.key.clone(), Node::leaf(key.to_vec(), value.to_vec()), node),
            Ordering::Greater => Node::inner(key.to_vec(), node, Node::leaf(key.to_vec(), value.to_vec())),
        };
    }
    let (left, right) = node.take_children();
    // Keys below `node.key` go left, the others right (IAVL's rule).
    let (left, right) = if key < node.key.as_slice() {
        (insert(left, key, value, replaced), right)
    } else {
        (left, insert(right, key, value, replaced))
    };
    node.set_children(left, right);
    if *replaced {
        node
    } else {
        balance(node)
    }
}

/// Restores the AVL balance of `node`, whose children differ in height by at
/// most two.
fn balance(mut node: Box<Node>) -> Box<Node> {
    let (left, right) = node.take_children();
    if left.height > right.height + 1 {
        let (outer, inner) = child_heights(&left);
        let left = if outer < inner { rotate_left(left) } else { left };
        node.set_children(left, right);
        rotate_right(node)
    } else if right.height > left.height + 1 {
        let (inner, outer) = child_heights(&right);
        let right = if outer < inner { rotate_right(right) } else { right };
        node.set_children(left, right);
        rotate_left(node)
    } else {
        node.set_children(left, right);
        node
    }
}

/// The heights of an inner node's children.
fn child_heights(node: &Node) -> (u8, u8) {
    match &node.body {
        Body::Inner(left, right) => (left.height, right.height),
        Body::Leaf(_) => unreachable!("child_heights of a leaf"),
    }
}

/// `(a, (b, c))` → `((a, b), c)`. Each inner node keeps its key, which stays
/// the smallest of its right subtree.
fn rotate_left(mut node: Box<Node>) -> Box<Node> {
    let (a, mut right) = node.take_children();
    let (b, c) = right.take_children();
    node.set_children(a, b);
    right.set_children(node, c);
    right
}

/// `((a, b), c)` → `(a, (b, c))`.
fn rotate_right(mut node: Box<Node>) -> Box<Node> {
    let (mut left, c) = node.take_children();
    let (a, b) = left.take_children();
    node.set_children(b, c);
    left.set_children(a, node);
    left
}

/// An IAVL-style Merkle AVL+ tree holding one entry per leaf.
///
/// ```
/// use bpavl_baseline::{BaselineTree, Importer, DEFAULT_CHUNK_BYTES};
///
/// let mut tree = BaselineTree::new();
/// tree.insert(b"alice", b"100").unwrap();
/// let root = tree.commit();
///
/// let mut importer = Importer::new();
/// for chunk in tree.export_chunks(DEFAULT_CHUNK_BYTES) {
///     importer.add_chunk(&chunk).unwrap();   // in order
/// }
/// assert_eq!(importer.finish().unwrap(), root);
/// ```
#[derive(Default)]
pub struct BaselineTree {
    pub(crate) root: Option<Box<Node>>,
}

impl BaselineTree {
    /// An empty tree.
    pub fn new() -> BaselineTree {
        BaselineTree { root: None }
    }

    /// Inserts `key` with `value`, or replaces its value; returns whether it
    /// replaced one. Fails on an empty or too long key or a too long value,
    /// leaving the tree unchanged.
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error> {
        check_entry(key, value)?;
        let mut replaced = false;
        self.root = Some(match self.root.take() {
            None => Node::leaf(key.to_vec(), value.to_vec()),
            Some(root) => insert(root, key, value, &mut replaced),
        });
        Ok(replaced)
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let mut node = self.root.as_deref()?;
        loop {
            match &node.body {
                Body::Inner(left, right) => node = if key < node.key.as_slice() { left } else { right },
                Body::Leaf(value) => return (node.key == key).then_some(value.as_slice()),
            }
        }
    }

    /// Number of entries.
    pub fn len(&self) -> u64 {
        self.root.as_ref().map_or(0, |root| root.size)
    }

    /// Whether the tree holds no entry.
    pub fn is_empty(&self) -> bool {
        self.root.is_none()
    }

    /// Hashes every node changed since the last commit and returns the root
    /// hash; the empty tree's root is SHA-256 of the empty string.
    pub fn commit(&mut self) -> Hash {
        match &mut self.root {
            Some(root) => root.hash(),
            None => Sha256::digest([]).into(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use rand::rngs::SmallRng;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};

    use super::*;

    /// Checks order, inner keys, heights, sizes and balance; returns the
    /// subtree's (min key, max key).
    fn check(node: &Node) -> (&[u8], &[u8]) {
        match &node.body {
            Body::Leaf(_) => {
                assert_eq!((node.height, node.size), (0, 1));
                (&node.key, &node.key)
            }
            Body::Inner(left, right) => {
                let (left_min, left_max) = check(left);
                let (right_min, right_max) = check(right);
                assert!(left_max < right_min, "keys out of order");
                assert_eq!(node.key, right_min, "inner key is not the right subtree's minimum");
                assert_eq!(node.height, 1 + left.height.max(right.height));
                assert!(left.height.abs_diff(right.height) <= 1, "unbalanced");
                assert_eq!(node.size, left.size + right.size);
                (left_min, right_max)
            }
        }
    }

    /// A tree of `n` random entries (random keys of 1..=40 bytes, random
    /// values of 0..=64 bytes) inserted in random order, with its model.
    pub(crate) fn random_tree(rng: &mut SmallRng, n: usize) -> (BaselineTree, BTreeMap<Vec<u8>, Vec<u8>>) {
        let mut model = BTreeMap::new();
        while model.len() < n {
            let key: Vec<u8> = (0..rng.gen_range(1..=40)).map(|_| rng.gen()).collect();
            let value: Vec<u8> = (0..rng.gen_range(0..=64)).map(|_| rng.gen()).collect();
            model.insert(key, value);
        }
        let mut entries: Vec<_> = model.iter().collect();
        entries.shuffle(rng);
        let mut tree = BaselineTree::new();
        for (key, value) in entries {
            assert!(!tree.insert(key, value).unwrap());
        }
        (tree, model)
    }

    #[test]
    fn random_trees_hold_their_entries_and_stay_balanced() {
        let mut rng = SmallRng::seed_from_u64(1);
        for n in [1, 2, 3, 7, 100, 1000, 5000] {
            let (tree, model) = random_tree(&mut rng, n);
            check(tree.root.as_ref().unwrap());
            assert_eq!(tree.len(), n as u64);
            // Height within the AVL bound 1.44·log2(n + 2).
            assert!(f64::from(tree.root.as_ref().unwrap().height) <= 1.45 * ((n + 2) as f64).log2());
            for (key, value) in &model {
                assert_eq!(tree.get(key), Some(value.as_slice()));
            }
            assert_eq!(tree.get(b""), None);
            assert_eq!(tree.get(&[0xff; 41]), None);
        }
    }

    #[test]
    fn sorted_inserts_stay_balanced() {
        let mut tree = BaselineTree::new();
        for i in 0u32..4096 {
            tree.insert(&i.to_be_bytes(), b"v").unwrap();
        }
        check(tree.root.as_ref().unwrap());
        assert_eq!(tree.root.as_ref().unwrap().height, 12);
    }

    #[test]
    fn root_depends_on_content_not_on_insert_order_of_the_same_shape() {
        let mut a = BaselineTree::new();
        let mut b = BaselineTree::new();
        for (k, v) in [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")] {
            a.insert(k, v).unwrap();
        }
        // b, a, c builds the same balanced shape.
        for (k, v) in [(b"b", b"2"), (b"a", b"1"), (b"c", b"3")] {
            b.insert(k, v).unwrap();
        }
        assert_eq!(a.commit(), b.commit());
        assert!(b.insert(b"c", b"4").unwrap());
        assert_ne!(a.commit(), b.commit());
        assert_eq!(b.get(b"c"), Some(&b"4"[..]));
        assert_eq!(b.len(), 3);
    }

    /// Drops every cached hash below `node`.
    fn forget_hashes(node: &mut Node) {
        node.hash = None;
        if let Body::Inner(left, right) = &mut node.body {
            forget_hashes(left);
            forget_hashes(right);
        }
    }

    #[test]
    fn cached_hashes_are_invalidated_by_inserts_and_updates() {
        let mut rng = SmallRng::seed_from_u64(2);
        let (mut tree, model) = random_tree(&mut rng, 500);
        let keys: Vec<_> = model.keys().cloned().collect();
        let mut previous = tree.commit();
        for round in 0u8..5 {
            for key in keys.iter().step_by(7 + usize::from(round)) {
                assert!(tree.insert(key, &[round]).unwrap());
            }
            for i in 0..20u8 {
                assert!(!tree.insert(&[0xee, round, i], b"new").unwrap());
            }
            let root = tree.commit();
            assert_ne!(root, previous);
            forget_hashes(tree.root.as_mut().unwrap());
            assert_eq!(tree.commit(), root);
            previous = root;
        }
        check(tree.root.as_ref().unwrap());
        assert_eq!(tree.len(), 500 + 100);
    }

    #[test]
    fn hashes_follow_the_documented_preimages() {
        let mut tree = BaselineTree::new();
        assert_eq!(tree.commit(), <Hash>::from(Sha256::digest(b"")));
        tree.insert(b"k", b"v").unwrap();
        let leaf_k = |key: &[u8], value: &[u8]| -> Hash {
            let mut pre = vec![0x00, 0, 1, key.len() as u8];
            pre.extend_from_slice(key);
            pre.push(32);
            pre.extend_from_slice(&Sha256::digest(value));
            Sha256::digest(&pre).into()
        };
        assert_eq!(tree.commit(), leaf_k(b"k", b"v"));
        tree.insert(b"m", b"w").unwrap();
        let mut pre = vec![0x01, 1, 2];
        pre.extend_from_slice(&leaf_k(b"k", b"v"));
        pre.extend_from_slice(&leaf_k(b"m", b"w"));
        assert_eq!(tree.commit(), <Hash>::from(Sha256::digest(&pre)));
    }

    #[test]
    fn limits_are_enforced_and_leave_the_tree_unchanged() {
        let mut tree = BaselineTree::new();
        assert_eq!(tree.insert(b"", b"v"), Err(Error::KeyEmpty));
        assert_eq!(tree.insert(&[1; crate::MAX_KEY_LEN + 1], b"v").unwrap_err().code(), "KEY_TOO_LONG");
        assert_eq!(tree.insert(b"k", &vec![0; crate::MAX_VALUE_LEN + 1]), Err(Error::ValueTooLong));
        assert!(tree.is_empty());
        tree.insert(&[1; crate::MAX_KEY_LEN], &vec![0; crate::MAX_VALUE_LEN]).unwrap();
        assert_eq!(tree.len(), 1);
    }
}
