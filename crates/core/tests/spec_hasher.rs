//! A stand-alone implementation of `spec/hashing.md` (and of the rebuild
//! shape algorithm of `spec/chunk-format.md` and the bulk load's shape of
//! `spec/store-format.md`), written from the spec alone: it uses `sha2`
//! directly and nothing from `bpavl_core`.
//!
//! It recomputes every root in `spec/vectors/trees.json` from the entries,
//! the per-chunk entry counts and the per-chunk key-heights, and every root
//! in `spec/vectors/bulk_load.json` both that way and from the bulk load's
//! rule alone (chunk sizes from the bulk fill, a balanced split); checks the empty
//! root and the spec's worked multiproof example; and re-verifies the valid
//! existence, range, chunk-proof and chunk-envelope vectors with its own
//! minimal decoder and chunk-path fold.

use std::path::PathBuf;

use serde_json::Value;
use sha2::{Digest, Sha256};

type H = [u8; 32];

fn sha(parts: &[&[u8]]) -> H {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// `0x00 ‖ u32be(len k) ‖ k ‖ u32be(len v) ‖ v`
fn entry_hash(k: &[u8], v: &[u8]) -> H {
    sha(&[&[0x00], &(k.len() as u32).to_be_bytes(), k, &(v.len() as u32).to_be_bytes(), v])
}

/// `0x01 ‖ left ‖ right`
fn node(l: &H, r: &H) -> H {
    sha(&[&[0x01], l, r])
}

/// `0x02 ‖ u32be(M) ‖ chunk_root`
fn chunk_hash(m: usize, chunk_root: &H) -> H {
    sha(&[&[0x02], &(m as u32).to_be_bytes(), chunk_root])
}

/// `0x03 ‖ u8(height) ‖ u64be(chunks) ‖ u64be(entries) ‖ left ‖ right`
fn inner_hash(height: u8, chunks: u64, entries: u64, l: &H, r: &H) -> H {
    sha(&[&[0x03, height], &chunks.to_be_bytes(), &entries.to_be_bytes(), l, r])
}

/// `0x04 ‖ u32be(C) ‖ u64be(chunks) ‖ u64be(entries) ‖ top`
fn root_hash(c: usize, chunks: u64, entries: u64, top: &H) -> H {
    sha(&[&[0x04], &(c as u32).to_be_bytes(), &chunks.to_be_bytes(), &entries.to_be_bytes(), top])
}

/// The largest power of two strictly less than `n` (`n ≥ 2`).
fn split(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

/// `mth(d[a..b])`, RFC 6962 shape with tag 0x01.
fn mth(d: &[H]) -> H {
    if d.len() == 1 {
        return d[0];
    }
    let k = split(d.len());
    node(&mth(&d[..k]), &mth(&d[k..]))
}

/// The prover's walk: the hashes of the maximal subtrees outside `[lo, hi)`.
fn multiproof(d: &[H], a: usize, lo: usize, hi: usize, out: &mut Vec<H>) {
    let b = a + d.len();
    if b <= lo || a >= hi {
        out.push(mth(d));
    } else if d.len() > 1 {
        let k = split(d.len());
        multiproof(&d[..k], a, lo, hi, out);
        multiproof(&d[k..], a + k, lo, hi, out);
    }
}

/// The verifier's walk over `[a, b)`: in-range leaves from `inner`, the rest
/// consumed from `proof` in order.
fn walk(a: usize, b: usize, lo: usize, hi: usize, inner: &[H], proof: &mut std::slice::Iter<H>) -> H {
    if b <= lo || a >= hi {
        return *proof.next().expect("enough proof hashes");
    }
    if b - a == 1 {
        return inner[a - lo];
    }
    let k = split(b - a);
    let l = walk(a, a + k, lo, hi, inner, proof);
    let r = walk(a + k, b, lo, hi, inner, proof);
    node(&l, &r)
}

fn count(m: usize, lo: usize, hi: usize) -> usize {
    fn go(a: usize, b: usize, lo: usize, hi: usize) -> usize {
        if b <= lo || a >= hi {
            1
        } else if b - a == 1 {
            0
        } else {
            let k = split(b - a);
            go(a, a + k, lo, hi) + go(a + k, b, lo, hi)
        }
    }
    go(0, m, lo, hi)
}

// --- the AVL shape from key-heights (spec/chunk-format.md, Rebuild) -------

enum Node {
    Chunk(usize),
    Inner { height: u8, left: Box<Node>, right: Box<Node> },
}

struct Pending {
    height: u8,
    left: Node,
}

fn shape(key_heights: &[u8]) -> Node {
    let mut current = Node::Chunk(0);
    let mut stack: Vec<Pending> = Vec::new();
    for (i, &kh) in key_heights.iter().enumerate().skip(1) {
        while stack.last().is_some_and(|t| t.height < kh) {
            let t = stack.pop().unwrap();
            current = Node::Inner { height: t.height, left: Box::new(t.left), right: Box::new(current) };
        }
        stack.push(Pending { height: kh, left: current });
        current = Node::Chunk(i);
    }
    while let Some(t) = stack.pop() {
        current = Node::Inner { height: t.height, left: Box::new(t.left), right: Box::new(current) };
    }
    current
}

/// Chunks `[lo, hi)` of a bulk load: the node over `[lo, mid)` and
/// `[mid, hi)`, `mid = lo + ⌈(hi − lo)/2⌉` (spec/store-format.md, Bulk load).
fn balanced(lo: usize, hi: usize) -> Node {
    if hi - lo <= 1 {
        return Node::Chunk(lo);
    }
    let mid = lo + (hi - lo).div_ceil(2);
    let (left, right) = (balanced(lo, mid), balanced(mid, hi));
    let height = 1 + node_height(&left).max(node_height(&right));
    Node::Inner { height, left: Box::new(left), right: Box::new(right) }
}

fn node_height(n: &Node) -> u8 {
    match n {
        Node::Chunk(_) => 0,
        Node::Inner { height, .. } => *height,
    }
}

/// A bulk load's chunk sizes for `n` entries at capacity `c`: chunks of
/// F = C − ⌊C/16⌋; if F does not divide N (> F), the last chunk of F and the
/// R = N mod F after it make one of F + R when that fits in C, else two of
/// ⌈(F + R)/2⌉ and ⌊(F + R)/2⌋; N ≤ C is one chunk of N.
fn bulk_sizes(n: usize, c: usize) -> Vec<usize> {
    let f = c - c / 16;
    if n <= c {
        return if n == 0 { vec![] } else { vec![n] };
    }
    let (full, r) = (n / f, n % f);
    let mut sizes = vec![f; full];
    if r > 0 {
        sizes.pop();
        if f + r <= c {
            sizes.push(f + r);
        } else {
            sizes.extend([(f + r).div_ceil(2), (f + r) / 2]);
        }
    }
    sizes
}

/// (hash, height, chunks, entries) of a subtree; asserts the AVL rules.
fn hash_node(n: &Node, chunk_hashes: &[H], sizes: &[usize]) -> (H, u8, u64, u64) {
    match n {
        Node::Chunk(i) => (chunk_hashes[*i], 0, 1, sizes[*i] as u64),
        Node::Inner { height, left, right } => {
            let (lh, lht, lc, le) = hash_node(left, chunk_hashes, sizes);
            let (rh, rht, rc, re) = hash_node(right, chunk_hashes, sizes);
            assert_eq!(*height, 1 + lht.max(rht), "recorded key-height is 1 + max(child heights)");
            assert!(lht.abs_diff(rht) <= 1, "children differ by at most 1");
            assert!(*height >= 1 && *height <= 48);
            let (c, e) = (lc + rc, le + re);
            (inner_hash(*height, c, e, &lh, &rh), *height, c, e)
        }
    }
}

/// The root of a tree given its sorted entries, per-chunk sizes and shape.
fn tree_root(capacity: usize, entries: &[(Vec<u8>, Vec<u8>)], sizes: &[usize], shape: &Node) -> H {
    if entries.is_empty() {
        assert!(sizes.is_empty());
        return root_hash(capacity, 0, 0, &[0u8; 32]);
    }
    assert_eq!(sizes.iter().sum::<usize>(), entries.len());
    let fill = capacity.div_ceil(2);
    let mut chunk_hashes = Vec::new();
    let mut at = 0;
    for &m in sizes {
        assert!(m >= 1 && m <= capacity && (sizes.len() == 1 || m >= fill), "chunk size limits");
        let d: Vec<H> = entries[at..at + m].iter().map(|(k, v)| entry_hash(k, v)).collect();
        chunk_hashes.push(chunk_hash(m, &mth(&d)));
        at += m;
    }
    let (top, _, chunks, total) = hash_node(shape, &chunk_hashes, sizes);
    assert_eq!((chunks, total), (sizes.len() as u64, entries.len() as u64));
    root_hash(capacity, chunks, total, &top)
}

// --- loading ---------------------------------------------------------------

fn load(name: &str) -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../spec/vectors").join(name);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}
fn bytes(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().unwrap()).unwrap()
}
fn num(v: &Value) -> u64 {
    v.as_u64().unwrap()
}
fn pairs(v: &Value) -> Vec<(Vec<u8>, Vec<u8>)> {
    v.as_array().unwrap().iter().map(|p| (bytes(&p[0]), bytes(&p[1]))).collect()
}

#[test]
fn trees_json_roots_from_the_spec() {
    let file = load("trees.json");
    let trees = file["trees"].as_array().unwrap();
    let mut checked = 0;
    for t in trees {
        let name = t["name"].as_str().unwrap();
        let capacity = num(&t["capacity"]) as usize;
        from_chunk_list(name, t, capacity, &pairs(&t["final_entries"]));
        checked += 1;
    }
    assert!(checked >= 5);
}

/// Checks that `entries` are strictly sorted, then a tree's root, counts and
/// height from its `chunk_list` (the shape from the key-heights, as a
/// rebuild makes it); gives the chunk sizes.
fn from_chunk_list(name: &str, t: &Value, capacity: usize, entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<usize> {
    for w in entries.windows(2) {
        assert!(w[0].0 < w[1].0, "{name}: entries strictly sorted");
    }
    let list = t["chunk_list"].as_array().unwrap();
    let sizes: Vec<usize> = list.iter().map(|c| num(&c["entry_count"]) as usize).collect();
    let key_heights: Vec<u8> = list.iter().map(|c| num(&c["key_height"]) as u8).collect();
    assert!(key_heights.first().is_none_or(|&kh| kh == 0), "{name}: chunk 0 has key-height 0");
    let shape = shape(&key_heights);
    let root = tree_root(capacity, entries, &sizes, &shape);
    assert_eq!(hex::encode(root), t["root"].as_str().unwrap(), "{name}: root");
    assert_eq!(num(&t["chunk_count"]), sizes.len() as u64);
    assert_eq!(num(&t["entry_count"]), entries.len() as u64);
    if !sizes.is_empty() {
        assert_eq!(num(&t["height"]), node_height(&shape) as u64, "{name}: height");
    }
    sizes
}

#[test]
fn bulk_load_json_roots_from_the_spec() {
    let file = load("bulk_load.json");
    let cases = file["valid"].as_array().unwrap();
    for t in cases {
        let name = t["name"].as_str().unwrap();
        let capacity = num(&t["capacity"]) as usize;
        let entries = pairs(&t["entries"]);
        let sizes = from_chunk_list(name, t, capacity, &entries);
        // The rule alone gives the same chunks and root.
        assert_eq!(sizes, bulk_sizes(entries.len(), capacity), "{name}: chunk sizes");
        let root = tree_root(capacity, &entries, &sizes, &balanced(0, sizes.len()));
        assert_eq!(hex::encode(root), t["root"].as_str().unwrap(), "{name}: root from the rule");
    }
    assert!(cases.len() >= 10);
    // Every invalid case breaks one of the load's input rules, checked here apart.
    for c in file["invalid"].as_array().unwrap() {
        let capacity = num(&c["capacity"]) as usize;
        let entries = pairs(&c["entries"]);
        let first_bad = entries
            .iter()
            .enumerate()
            .position(|(i, (k, _))| k.is_empty() || k.len() > 1024 || (i > 0 && k <= &entries[i - 1].0));
        let (at, code) = (c["at"].as_u64().map(|a| a as usize), c["code"].as_str().unwrap());
        if (2..=4096).contains(&capacity) {
            assert_eq!(at, first_bad, "{code}: the first entry that breaks a rule");
        } else {
            assert_eq!((at, code), (None, "CAPACITY_INVALID"));
        }
    }
}

#[test]
fn empty_root() {
    let expect = root_hash(2, 0, 0, &[0u8; 32]);
    let file = load("trees.json");
    let empty = file["trees"].as_array().unwrap().iter().find(|t| num(&t["entry_count"]) == 0).expect("an empty tree");
    assert_eq!(num(&empty["capacity"]), 2);
    assert_eq!(hex::encode(expect), empty["root"].as_str().unwrap());
    // The empty root commits to the capacity.
    assert_ne!(root_hash(3, 0, 0, &[0u8; 32]), expect);
}

#[test]
fn worked_multiproof_example() {
    // spec/hashing.md: M = 5, lo = 2, hi = 3 → H(d0,d1), d3, d4.
    let d: Vec<H> = (0u8..5).map(|i| entry_hash(&[i + 1], b"")).collect();
    let mut proof = Vec::new();
    multiproof(&d, 0, 2, 3, &mut proof);
    assert_eq!(proof, vec![node(&d[0], &d[1]), d[3], d[4]]);
    assert_eq!(count(5, 2, 3), 3);
    assert_eq!(mth(&d), node(&node(&node(&d[0], &d[1]), &node(&d[2], &d[3])), &d[4]));
    assert_eq!(walk(0, 5, 2, 3, &d[2..3], &mut proof.iter()), mth(&d));
    // Every range of every small chunk, and the ⌈log2 M⌉ bound for single entries.
    for m in 1..=33usize {
        let d: Vec<H> = (0..m).map(|i| entry_hash(&(i as u32 + 1).to_be_bytes(), b"v")).collect();
        let root = mth(&d);
        for lo in 0..m {
            for hi in lo + 1..=m {
                let mut p = Vec::new();
                multiproof(&d, 0, lo, hi, &mut p);
                assert_eq!(p.len(), count(m, lo, hi));
                let mut it = p.iter();
                assert_eq!(walk(0, m, lo, hi, &d[lo..hi], &mut it), root);
                assert!(it.next().is_none());
            }
            assert!(count(m, lo, lo + 1) <= (m as f64).log2().ceil() as usize);
        }
    }
}

// --- a minimal decoder for valid encodings, and the chunk-path fold --------

struct R<'a>(&'a [u8], usize);

impl R<'_> {
    fn u8(&mut self) -> u8 {
        self.1 += 1;
        self.0[self.1 - 1]
    }
    fn take(&mut self, n: usize) -> Vec<u8> {
        self.1 += n;
        self.0[self.1 - n..self.1].to_vec()
    }
    fn hash(&mut self) -> H {
        self.take(32).try_into().unwrap()
    }
    fn varint(&mut self) -> u64 {
        let mut v = 0u64;
        for i in 0..8 {
            let b = self.u8();
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                assert!(i == 0 || b != 0, "minimal varint");
                return v;
            }
        }
        panic!("varint too long")
    }
    fn bytes(&mut self) -> Vec<u8> {
        let n = self.varint() as usize;
        self.take(n)
    }
    fn end(&self) {
        assert_eq!(self.1, self.0.len(), "no trailing bytes");
    }
}

#[derive(Debug, PartialEq)]
struct Fold {
    root: H,
    index: u64,
    chunks: u64,
    entries: u64,
    key_height: u8,
}

/// Reads a chunk path and folds `h` (a chunk of `m` entries) to the root,
/// exactly as the pseudo-code in spec/hashing.md.
fn fold_path(r: &mut R, capacity: usize, m: usize, mut h: H) -> Fold {
    let len = r.varint();
    assert!(len <= 48);
    let (mut height, mut chunks, mut entries, mut index, mut key_height) = (0u8, 1u64, m as u64, 0u64, 0u8);
    for _ in 0..len {
        let flags = r.u8();
        let (sibling_is_left, parent_height) = (flags & 0x80 != 0, flags & 0x7f);
        assert!(height < parent_height && parent_height <= height + 2);
        let (sib_chunks, sib_entries, sib_hash) = (r.varint(), r.varint(), r.hash());
        chunks += sib_chunks;
        entries += sib_entries;
        if sibling_is_left {
            index += sib_chunks;
            if key_height == 0 {
                key_height = parent_height;
            }
            h = inner_hash(parent_height, chunks, entries, &sib_hash, &h);
        } else {
            h = inner_hash(parent_height, chunks, entries, &h, &sib_hash);
        }
        height = parent_height;
    }
    Fold { root: root_hash(capacity, chunks, entries, &h), index, chunks, entries, key_height }
}

#[test]
fn valid_existence_proofs_fold_with_the_spec() {
    let file = load("existence.json");
    for c in file["valid"].as_array().unwrap() {
        let proof = bytes(&c["proof"]);
        let mut r = R(&proof, 0);
        assert_eq!(r.u8(), 0x01);
        let capacity = r.varint() as usize;
        let m = r.varint() as usize;
        let pos = r.varint() as usize;
        let hashes: Vec<H> = (0..count(m, pos, pos + 1)).map(|_| r.hash()).collect();
        let leaf = entry_hash(&bytes(&c["key"]), &bytes(&c["value"]));
        let chunk_root = walk(0, m, pos, pos + 1, &[leaf], &mut hashes.iter());
        let f = fold_path(&mut r, capacity, m, chunk_hash(m, &chunk_root));
        r.end();
        assert_eq!(hex::encode(f.root), c["root"].as_str().unwrap());
        assert_eq!(
            (f.index, pos as u64, f.chunks, f.entries),
            (num(&c["chunk_index"]), num(&c["position"]), num(&c["chunk_count"]), num(&c["entry_count"]))
        );
    }
}

#[test]
fn valid_range_proofs_fold_with_the_spec() {
    let file = load("range.json");
    for c in file["valid"].as_array().unwrap() {
        let proof = bytes(&c["proof"]);
        let root = c["root"].as_str().unwrap();
        let mut r = R(&proof, 0);
        assert_eq!(r.u8(), 0x03);
        let capacity = r.varint() as usize;
        let segments = r.varint();
        if segments == 0 {
            assert_eq!(hex::encode(root_hash(capacity, 0, 0, &[0u8; 32])), root);
        }
        let mut window = Vec::new();
        let mut prev: Option<(u64, usize, usize)> = None; // (index, hi, M)
        for _ in 0..segments {
            let (m, lo, hi) = (r.varint() as usize, r.varint() as usize, r.varint() as usize);
            let mut d = Vec::new();
            for _ in lo..hi {
                let (k, v) = (r.bytes(), r.bytes());
                d.push(entry_hash(&k, &v));
                window.push(k);
            }
            let hashes: Vec<H> = (0..count(m, lo, hi)).map(|_| r.hash()).collect();
            let chunk_root = walk(0, m, lo, hi, &d, &mut hashes.iter());
            let f = fold_path(&mut r, capacity, m, chunk_hash(m, &chunk_root));
            assert_eq!(hex::encode(f.root), root);
            if let Some((pi, phi, pm)) = prev {
                assert!(f.index == pi + 1 && phi == pm && lo == 0, "contiguous segments");
            }
            prev = Some((f.index, hi, m));
        }
        r.end();
        // Every result is in the window, in order.
        let results: Vec<Vec<u8>> = pairs(&c["results"]).into_iter().map(|(k, _)| k).collect();
        let at = window.iter().position(|k| results.first().is_none_or(|f| k == f)).unwrap_or(0);
        if !results.is_empty() {
            assert_eq!(&window[at..at + results.len()], results.as_slice());
        }
    }
}

#[test]
fn valid_chunk_proofs_fold_with_the_spec() {
    let file = load("chunk_proof.json");
    for c in file["valid"].as_array().unwrap() {
        let proof = bytes(&c["proof"]);
        let mut r = R(&proof, 0);
        assert_eq!(r.u8(), 0x04);
        let capacity = r.varint() as usize;
        let m = r.varint() as usize;
        let chunk_root = r.hash();
        let f = fold_path(&mut r, capacity, m, chunk_hash(m, &chunk_root));
        r.end();
        assert_eq!(hex::encode(f.root), c["root"].as_str().unwrap());
        assert_eq!(
            (f.index, f.chunks, f.entries, f.key_height as u64),
            (num(&c["index"]), num(&c["chunk_count"]), num(&c["entry_count"]), num(&c["key_height"]))
        );
    }
}

#[test]
fn valid_chunk_envelopes_fold_with_the_spec() {
    let file = load("chunk_envelope.json");
    for c in file["valid"].as_array().unwrap() {
        let env = bytes(&c["envelope"]);
        let mut r = R(&env, 0);
        assert_eq!(r.u8(), 0x05);
        let capacity = r.varint() as usize;
        let key_height = r.u8();
        let m = r.varint() as usize;
        let mut entries = Vec::new();
        for _ in 0..m {
            let (k, v) = (r.bytes(), r.bytes());
            entries.push((k, v));
        }
        let d: Vec<H> = entries.iter().map(|(k, v)| entry_hash(k, v)).collect();
        let f = fold_path(&mut r, capacity, m, chunk_hash(m, &mth(&d)));
        r.end();
        assert_eq!(hex::encode(f.root), c["root"].as_str().unwrap());
        assert_eq!(f.key_height, key_height, "the envelope's key_height is the folded one");
        assert_eq!(
            (f.index, f.chunks, f.entries, capacity as u64, key_height as u64),
            (
                num(&c["index"]),
                num(&c["chunk_count"]),
                num(&c["entry_count"]),
                num(&c["capacity"]),
                num(&c["key_height"])
            )
        );
        assert_eq!(entries, pairs(&c["chunk_entries"]));
    }
}
