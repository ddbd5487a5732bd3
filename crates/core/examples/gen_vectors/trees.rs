//! The trees every vector is taken from, built from fixed operation
//! sequences, and the naive facts (positions, windows) the cases are checked
//! against.

use bpavl_core::hash::{entry_hash, inchunk_tree, multiproof, Hash};
use bpavl_core::limits::min_fill;
use bpavl_core::{verify_chunk, Folded, Neighbour, RangeProof, Segment, Tree};
use bpavl_testkit::rng::SplitMix64;
use serde_json::Value;

use crate::cases::{h, kv, n, obj, s};

#[derive(Clone)]
pub enum Op {
    Insert(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
}

pub struct Built {
    pub name: &'static str,
    pub about: &'static str,
    pub capacity: usize,
    pub ops: Vec<Op>,
    pub tree: Tree,
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Per chunk, in index order: (key-height, entry count).
    pub shape: Vec<(u8, usize)>,
}

impl Built {
    pub fn new(name: &'static str, about: &'static str, capacity: usize, ops: Vec<Op>) -> Built {
        let mut tree = Tree::new(capacity).unwrap();
        for op in &ops {
            match op {
                Op::Insert(k, v) => {
                    tree.insert(k, v).unwrap();
                }
                Op::Remove(k) => {
                    tree.remove(k);
                }
            }
        }
        tree.commit();
        let entries: Vec<_> = tree.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        let shape = shape_of(&tree);
        Built { name, about, capacity, ops, tree, entries, shape }
    }

    pub fn root(&self) -> Hash {
        self.tree.head().root()
    }
    pub fn chunk_count(&self) -> u64 {
        self.shape.len() as u64
    }
    pub fn entry_count(&self) -> u64 {
        self.entries.len() as u64
    }
    /// What folding chunk `i`'s path must give, from the shape.
    pub fn folded(&self, i: u64) -> Folded {
        let key_height = self.shape[i as usize].0;
        Folded {
            root: self.root(),
            index: i,
            chunk_count: self.chunk_count(),
            entry_count: self.entry_count(),
            key_height,
        }
    }
    /// (chunk index, in-chunk position) of global entry `g`, from the shape.
    pub fn locate(&self, mut g: usize) -> (u64, usize) {
        for (i, &(_, m)) in self.shape.iter().enumerate() {
            if g < m {
                return (i as u64, g);
            }
            g -= m;
        }
        panic!("entry index out of range")
    }
    /// Global index of the first entry of chunk `i`.
    pub fn chunk_start(&self, i: usize) -> usize {
        self.shape[..i].iter().map(|s| s.1).sum()
    }
    pub fn key(&self, g: usize) -> Vec<u8> {
        self.entries[g].0.clone()
    }
    pub fn value_of(&self, key: &[u8]) -> Vec<u8> {
        self.entries.iter().find(|(k, _)| k == key).expect("present").1.clone()
    }
    pub fn index_of(&self, key: &[u8]) -> usize {
        self.entries.iter().position(|(k, _)| k == key).expect("present")
    }
    /// A neighbour built from the entry at global index `g`.
    pub fn neighbour(&self, g: usize) -> Neighbour {
        let (k, v) = self.entries[g].clone();
        Neighbour { key: k.clone(), value: v, witness: self.tree.head().prove_existence(&k).unwrap().witness }
    }
    /// The range-proof segment for entries `[lo, hi)` of chunk `index`.
    pub fn segment(&self, index: u64, lo: usize, hi: usize) -> Segment {
        let env = self.tree.head().export_chunk(index).unwrap();
        let leaves: Vec<Hash> = env.entries.iter().map(|(k, v)| entry_hash(k, v)).collect();
        let m = leaves.len();
        Segment {
            chunk_entries: m,
            lo,
            entries: env.entries[lo..hi].to_vec(),
            inchunk: multiproof(&inchunk_tree(&leaves), m, lo, hi),
            path: env.path,
        }
    }
    /// A range proof whose window is global entries `[g_lo, g_hi)`.
    pub fn window(&self, g_lo: usize, g_hi: usize) -> RangeProof {
        let mut segments = Vec::new();
        let mut g = g_lo;
        while g < g_hi {
            let (i, pos) = self.locate(g);
            let m = self.shape[i as usize].1;
            let hi = (pos + (g_hi - g)).min(m);
            segments.push(self.segment(i, pos, hi));
            g += hi - pos;
        }
        RangeProof { capacity: self.capacity, segments }
    }

    pub fn json(&self) -> Value {
        let ops = self
            .ops
            .iter()
            .map(|op| match op {
                Op::Insert(k, v) => Value::Array(vec![s("insert"), h(k), h(v)]),
                Op::Remove(k) => Value::Array(vec![s("remove"), h(k)]),
            })
            .collect();
        obj(vec![
            ("name", s(self.name)),
            ("description", s(self.about)),
            ("capacity", n(self.capacity as u64)),
            ("root", h(&self.root())),
            ("chunk_count", n(self.chunk_count())),
            ("entry_count", n(self.entry_count())),
            ("height", n(self.tree.height() as u64)),
            ("ops", Value::Array(ops)),
            ("final_entries", kv(&self.entries)),
            ("chunk_list", chunk_list(&self.shape)),
        ])
    }
}

/// Per chunk of a committed tree, in index order: (key-height, entry count).
/// Each chunk's export verifies at its own index with its own key-height,
/// the sizes cut the sorted entries, and each obeys the fill rule.
pub fn shape_of(tree: &Tree) -> Vec<(u8, usize)> {
    let root = tree.head().root();
    let shape: Vec<(u8, usize)> = (0..tree.chunk_count())
        .map(|i| {
            let env = tree.head().export_chunk(i).unwrap();
            let v = verify_chunk(&root, i, &env.encode()).unwrap();
            assert_eq!(v.key_height(), env.key_height);
            (env.key_height, env.entries.len())
        })
        .collect();
    assert_eq!(shape.iter().map(|s| s.1 as u64).sum::<u64>(), tree.len());
    let (capacity, fill) = (tree.capacity(), min_fill(tree.capacity()));
    for &(_, m) in &shape {
        assert!(m >= 1 && m <= capacity && (shape.len() == 1 || m >= fill));
    }
    shape
}

/// `chunk_list` of trees.json and bulk_load.json.
pub fn chunk_list(shape: &[(u8, usize)]) -> Value {
    let rows = shape.iter().enumerate().map(|(i, &(kh, m))| {
        obj(vec![("index", n(i as u64)), ("key_height", n(kh as u64)), ("entry_count", n(m as u64))])
    });
    Value::Array(rows.collect())
}

pub fn ins(k: impl AsRef<[u8]>, v: impl AsRef<[u8]>) -> Op {
    Op::Insert(k.as_ref().to_vec(), v.as_ref().to_vec())
}
pub fn rem(k: impl AsRef<[u8]>) -> Op {
    Op::Remove(k.as_ref().to_vec())
}

pub struct Trees {
    pub empty: Built,
    pub one: Built,
    pub five: Built,
    pub c3: Built,
    pub c4: Built,
    /// `c4` before its last insert: another version of the same tree.
    pub c4_prev: Built,
    pub c16: Built,
    pub c256: Built,
    /// The largest capacity, two chunks.
    pub c4096: Built,
    /// The longest value and key, for valid cases at the limits.
    pub limits: Built,
}

pub fn c4_key(i: usize) -> Vec<u8> {
    format!("key{i:03}").into_bytes()
}

pub fn build_trees() -> Trees {
    let empty = Built::new("c2_empty", "capacity 2, no entries: the empty root", 2, vec![]);
    let one = Built::new(
        "c2_one",
        "capacity 2, one entry with an empty value: a single chunk, empty paths",
        2,
        vec![ins("only", "")],
    );
    let five = Built::new(
        "c2_five",
        "capacity 2, five single-letter keys inserted out of order",
        2,
        ["e", "b", "d", "a", "c"].iter().enumerate().map(|(i, k)| ins(k, [b'0' + i as u8])).collect(),
    );

    // Capacity 3: 26 letters in random order, one overwrite, then removals
    // (one of an absent key) that exercise borrowing and merging.
    let mut rng = SplitMix64::new(0x0003_0003);
    let mut letters: Vec<u8> = (b'a'..=b'z').collect();
    rng.shuffle(&mut letters);
    let mut ops: Vec<Op> = letters.iter().map(|&c| ins([c], [c, c])).collect();
    ops.push(ins("m", "overwritten"));
    for k in ["c", "d", "q", "x", "zz", "a", "n"] {
        ops.push(rem(k));
    }
    let c3 = Built::new(
        "c3_removals",
        "capacity 3: 26 inserts in random order, an overwrite, 7 removals (one of an absent key)",
        3,
        ops,
    );

    // Capacity 4: even-numbered keys key000 … key118 in random order, so that
    // odd numbers are absent keys between them.
    let mut rng = SplitMix64::new(0x0004_0060);
    let mut order: Vec<usize> = (0..60).collect();
    rng.shuffle(&mut order);
    let ops: Vec<Op> = order.iter().map(|&i| ins(c4_key(2 * i), format!("value-{i}"))).collect();
    let c4_prev = Built::new("c4_sixty_prev", "c4_sixty before its last insert", 4, ops[..ops.len() - 1].to_vec());
    let c4 = Built::new("c4_sixty", "capacity 4: 60 keys key000, key002, … key118 inserted in random order", 4, ops);

    // Capacity 16: random binary keys and values of varied lengths, special
    // keys, then removals.
    let mut rng = SplitMix64::new(0x0016_0300);
    let mut ops = vec![
        ins([0x00], ""),                        // the smallest possible key, empty value
        ins([0x42], "B"),                       // a 1-byte key
        ins(vec![0xffu8; 1024], "longest key"), // a key of the maximum length
        ins("pre", "prefix family"),
        ins("pref", ""),
        ins("prefix", vec![0x5a; 1000]), // a long value
        ins(b"prefix\x00", "zero-extended"),
    ];
    let mut inserted = Vec::new();
    for _ in 0..330 {
        let klen = 1 + rng.below(48) as usize;
        let vlen = if rng.below(8) == 0 { 0 } else { rng.below(64) as usize };
        let k = rng.bytes(klen);
        inserted.push(k.clone());
        ops.push(Op::Insert(k, rng.bytes(vlen)));
    }
    for _ in 0..30 {
        let k = inserted[rng.below(inserted.len() as u64) as usize].clone();
        ops.push(Op::Remove(k));
    }
    let c16 = Built::new(
        "c16_mixed",
        "capacity 16: ~330 random binary keys (1–48 bytes) and values (0–63 bytes), a 1-byte key, the key 0x00, a 1024-byte key, a prefix family, a 1000-byte value, then 30 removals",
        16,
        ops,
    );

    // Capacity 256: multi-byte varints for the capacity and for M, pos, lo, hi.
    let mut rng = SplitMix64::new(0x0256_0600);
    let mut order: Vec<usize> = (0..600).collect();
    rng.shuffle(&mut order);
    let ops = order.iter().map(|&i| ins(format!("w{i:05}"), [i as u8])).collect();
    let c256 = Built::new(
        "c256_wide",
        "capacity 256: 600 keys w00000 … w00599 in random order (chunks of 128 or more entries)",
        256,
        ops,
    );

    // Capacity 4096 (the largest): one more entry than a chunk holds, so two chunks.
    let ops = (0..4097).map(|i| ins(format!("k{i:04}"), [i as u8])).collect();
    let c4096 =
        Built::new("c4096_two", "capacity 4096 (the largest): 4097 keys k0000 … k4096 in order, two chunks", 4096, ops);

    // The longest value and the longest key next to short ones.
    let mut ops: Vec<Op> = (b'a'..=b'h').map(|c| ins([c], [c])).collect();
    ops.push(ins("big", vec![0x76; 65536]));
    ops.push(ins(vec![0x6d; 1024], "m"));
    let limits = Built::new(
        "c4_limits",
        "capacity 4: keys a … h, the key big with a 65536-byte value (the longest), a 1024-byte key",
        4,
        ops,
    );

    Trees { empty, one, five, c3, c4, c4_prev, c16, c256, c4096, limits }
}
