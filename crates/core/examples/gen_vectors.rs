//! Writes the test vectors in `spec/vectors/` (see its README.md).
//!
//! ```sh
//! cargo run --release -q -p bpavl-core --example gen_vectors -- --out spec/vectors
//! ```
//!
//! Output is byte-for-byte deterministic: fixed seeds (an inline splitmix64),
//! no hash-map iteration, no timestamps, and a hand-written JSON printer whose
//! object keys keep insertion order. Every case is checked against the core
//! verifiers before it is written: a valid case must verify with exactly the
//! recorded outputs (which are also recomputed naively from the sorted entries),
//! and an invalid case must fail with exactly the recorded code. A wrong
//! expectation panics here and never reaches the files.

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;

use bpavl_core::codec::put_varint;
use bpavl_core::hash::{entry_hash, inchunk_tree, multiproof, Hash};
use bpavl_core::limits::min_fill;
use bpavl_core::{
    verify_absence, verify_chunk, verify_chunk_proof, verify_existence, verify_range, AbsenceProof, ChunkEnvelope,
    ChunkPath, ChunkProof, ExistenceProof, Neighbour, ProofError, RangeProof, Segment, Tree,
};

// ---------------------------------------------------------------------------
// Deterministic randomness

/// splitmix64: tiny, deterministic, good enough for test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

// ---------------------------------------------------------------------------
// JSON with insertion-ordered objects and a fixed pretty-printing style

enum J {
    Null,
    Bool(bool),
    Num(u64),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

fn s(x: &str) -> J {
    J::Str(x.to_string())
}
fn n(x: u64) -> J {
    J::Num(x)
}
fn h(x: &[u8]) -> J {
    J::Str(hex(x))
}
fn oh(x: Option<&[u8]>) -> J {
    x.map_or(J::Null, h)
}
fn kv(entries: &[(Vec<u8>, Vec<u8>)]) -> J {
    J::Arr(entries.iter().map(|(k, v)| J::Arr(vec![h(k), h(v)])).collect())
}
fn obj(fields: Vec<(&str, J)>) -> J {
    J::Obj(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn hex(b: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * b.len());
    for &x in b {
        out.push(DIGITS[(x >> 4) as usize] as char);
        out.push(DIGITS[(x & 15) as usize] as char);
    }
    out
}

impl J {
    fn is_scalar(&self) -> bool {
        !matches!(self, J::Arr(_) | J::Obj(_))
    }

    fn write(&self, indent: usize, out: &mut String) {
        match self {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Num(x) => out.push_str(&x.to_string()),
            J::Str(x) => write_str(x, out),
            J::Arr(items) if items.is_empty() => out.push_str("[]"),
            // Arrays of scalars (entries, operations) stay on one line.
            J::Arr(items) if items.iter().all(J::is_scalar) => {
                out.push('[');
                for (i, it) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    it.write(indent, out);
                }
                out.push(']');
            }
            J::Arr(items) => {
                out.push_str("[\n");
                for (i, it) in items.iter().enumerate() {
                    push_indent(indent + 1, out);
                    it.write(indent + 1, out);
                    out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
                }
                push_indent(indent, out);
                out.push(']');
            }
            J::Obj(fields) if fields.is_empty() => out.push_str("{}"),
            J::Obj(fields) => {
                out.push_str("{\n");
                for (i, (k, v)) in fields.iter().enumerate() {
                    push_indent(indent + 1, out);
                    write_str(k, out);
                    out.push_str(": ");
                    v.write(indent + 1, out);
                    out.push_str(if i + 1 < fields.len() { ",\n" } else { "\n" });
                }
                push_indent(indent, out);
                out.push('}');
            }
        }
    }
}

fn push_indent(level: usize, out: &mut String) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn write_str(x: &str, out: &mut String) {
    out.push('"');
    for c in x.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

// ---------------------------------------------------------------------------
// Encodings split into named fields, so invalid cases can patch one field

fn varint(v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, v);
    out
}

/// The encoding of `v` with one redundant trailing zero group.
fn noncanonical(v: u64) -> Vec<u8> {
    let mut out = varint(v);
    *out.last_mut().unwrap() |= 0x80;
    out.push(0x00);
    out
}

fn bytes_field(b: &[u8]) -> Vec<u8> {
    let mut out = varint(b.len() as u64);
    out.extend_from_slice(b);
    out
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// An encoding as an ordered list of named fields.
#[derive(Clone, Default)]
struct Enc(Vec<(String, Vec<u8>)>);

impl Enc {
    fn push(&mut self, name: impl Into<String>, bytes: Vec<u8>) {
        self.0.push((name.into(), bytes));
    }
    fn bytes(&self) -> Vec<u8> {
        self.0.iter().flat_map(|(_, b)| b.clone()).collect()
    }
    fn idx(&self, name: &str) -> usize {
        self.0.iter().position(|(k, _)| k == name).unwrap_or_else(|| panic!("no field {name}"))
    }
    fn get(&self, name: &str) -> &[u8] {
        &self.0[self.idx(name)].1
    }
    /// Every byte before field `name`.
    fn upto(&self, name: &str) -> Vec<u8> {
        self.0[..self.idx(name)].iter().flat_map(|(_, b)| b.clone()).collect()
    }
    /// Every byte after field `name`.
    fn after(&self, name: &str) -> Vec<u8> {
        self.0[self.idx(name) + 1..].iter().flat_map(|(_, b)| b.clone()).collect()
    }
    /// The bytes of fields `from` (included) to `to` (excluded).
    fn span(&self, from: &str, to: &str) -> Vec<u8> {
        self.0[self.idx(from)..self.idx(to)].iter().flat_map(|(_, b)| b.clone()).collect()
    }
    /// The whole encoding with field `name` replaced.
    fn with(&self, name: &str, bytes: &[u8]) -> Vec<u8> {
        cat(&[&self.upto(name), bytes, &self.after(name)])
    }
}

fn enc_path(e: &mut Enc, p: &str, path: &ChunkPath) {
    e.push(format!("{p}path_len"), varint(path.steps.len() as u64));
    for (i, st) in path.steps.iter().enumerate() {
        e.push(format!("{p}step{i}.flags"), vec![((st.sibling_is_left as u8) << 7) | st.parent_height]);
        e.push(format!("{p}step{i}.chunks"), varint(st.sibling_chunks));
        e.push(format!("{p}step{i}.entries"), varint(st.sibling_entries));
        e.push(format!("{p}step{i}.hash"), st.sibling_hash.to_vec());
    }
}

fn enc_existence(pr: &ExistenceProof) -> Enc {
    let mut e = Enc::default();
    e.push("format", vec![0x01]);
    e.push("capacity", varint(pr.capacity as u64));
    let w = &pr.witness;
    e.push("M", varint(w.chunk_entries as u64));
    e.push("pos", varint(w.position as u64));
    e.push("hashes", w.inchunk.concat());
    enc_path(&mut e, "", &w.path);
    assert_eq!(e.bytes(), pr.encode(), "field encoder disagrees with ExistenceProof::encode");
    e
}

fn enc_absence(pr: &AbsenceProof) -> Enc {
    let mut e = Enc::default();
    e.push("format", vec![0x02]);
    e.push("capacity", varint(pr.capacity as u64));
    e.push("flags", vec![pr.left.is_some() as u8 | (pr.right.is_some() as u8) << 1]);
    for (p, nb) in [("left.", &pr.left), ("right.", &pr.right)] {
        if let Some(nb) = nb {
            e.push(format!("{p}key"), bytes_field(&nb.key));
            e.push(format!("{p}value"), bytes_field(&nb.value));
            e.push(format!("{p}M"), varint(nb.witness.chunk_entries as u64));
            e.push(format!("{p}pos"), varint(nb.witness.position as u64));
            e.push(format!("{p}hashes"), nb.witness.inchunk.concat());
            enc_path(&mut e, p, &nb.witness.path);
        }
    }
    assert_eq!(e.bytes(), pr.encode(), "field encoder disagrees with AbsenceProof::encode");
    e
}

fn enc_range(pr: &RangeProof) -> Enc {
    let mut e = Enc::default();
    e.push("format", vec![0x03]);
    e.push("capacity", varint(pr.capacity as u64));
    e.push("segments", varint(pr.segments.len() as u64));
    for (i, sg) in pr.segments.iter().enumerate() {
        let p = format!("seg{i}.");
        e.push(format!("{p}M"), varint(sg.chunk_entries as u64));
        e.push(format!("{p}lo"), varint(sg.lo as u64));
        e.push(format!("{p}hi"), varint((sg.lo + sg.entries.len()) as u64));
        for (j, (k, v)) in sg.entries.iter().enumerate() {
            e.push(format!("{p}key{j}"), bytes_field(k));
            e.push(format!("{p}value{j}"), bytes_field(v));
        }
        e.push(format!("{p}hashes"), sg.inchunk.concat());
        enc_path(&mut e, &p, &sg.path);
    }
    assert_eq!(e.bytes(), pr.encode(), "field encoder disagrees with RangeProof::encode");
    e
}

fn enc_chunk_proof(pr: &ChunkProof) -> Enc {
    let mut e = Enc::default();
    e.push("format", vec![0x04]);
    e.push("capacity", varint(pr.capacity as u64));
    e.push("M", varint(pr.chunk_entries as u64));
    e.push("chunk_root", pr.chunk_root.to_vec());
    enc_path(&mut e, "", &pr.path);
    assert_eq!(e.bytes(), pr.encode(), "field encoder disagrees with ChunkProof::encode");
    e
}

fn enc_envelope(env: &ChunkEnvelope) -> Enc {
    let mut e = Enc::default();
    e.push("format", vec![0x05]);
    e.push("capacity", varint(env.capacity as u64));
    e.push("key_height", vec![env.key_height]);
    e.push("M", varint(env.entries.len() as u64));
    for (j, (k, v)) in env.entries.iter().enumerate() {
        e.push(format!("key{j}"), bytes_field(k));
        e.push(format!("value{j}"), bytes_field(v));
    }
    enc_path(&mut e, "", &env.path);
    assert_eq!(e.bytes(), env.encode(), "field encoder disagrees with ChunkEnvelope::encode");
    e
}

/// A raw chunk path from `(flags, sibling chunks, sibling entries)` steps,
/// every sibling hash zero.
fn raw_path(steps: &[(u8, u64, u64)]) -> Vec<u8> {
    let mut out = varint(steps.len() as u64);
    for &(flags, c, en) in steps {
        out.push(flags);
        out.extend(varint(c));
        out.extend(varint(en));
        out.extend([0u8; 32]);
    }
    out
}

fn flip_last(b: &[u8]) -> Vec<u8> {
    let mut b = b.to_vec();
    *b.last_mut().unwrap() ^= 0x01;
    b
}

// ---------------------------------------------------------------------------
// Trees

#[derive(Clone)]
enum Op {
    Insert(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
}

struct Built {
    name: &'static str,
    about: &'static str,
    capacity: usize,
    ops: Vec<Op>,
    tree: Tree,
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Per chunk, in index order: (key-height, entry count).
    shape: Vec<(u8, usize)>,
}

impl Built {
    fn new(name: &'static str, about: &'static str, capacity: usize, ops: Vec<Op>) -> Built {
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
        let commit = tree.commit();
        let entries: Vec<_> = tree.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        let shape: Vec<(u8, usize)> = (0..tree.chunk_count())
            .map(|i| {
                let env = tree.export_chunk(i).unwrap();
                // Each export verifies at its own index with its own key-height.
                let v = verify_chunk(&commit.root, i, &env.encode()).unwrap();
                assert_eq!(v.key_height(), env.key_height);
                (env.key_height, env.entries.len())
            })
            .collect();
        // Sanity: the chunk sizes cut the sorted entries and obey the fill rule.
        assert_eq!(shape.iter().map(|s| s.1).sum::<usize>(), entries.len());
        let fill = min_fill(capacity);
        for &(_, m) in &shape {
            assert!(m >= 1 && m <= capacity && (shape.len() == 1 || m >= fill));
        }
        Built { name, about, capacity, ops, tree, entries, shape }
    }

    fn root(&self) -> Hash {
        self.tree.root()
    }
    fn chunks(&self) -> u64 {
        self.shape.len() as u64
    }
    fn total(&self) -> u64 {
        self.entries.len() as u64
    }
    /// (chunk index, in-chunk position) of global entry `g`, from the shape.
    fn locate(&self, mut g: usize) -> (u64, usize) {
        for (i, &(_, m)) in self.shape.iter().enumerate() {
            if g < m {
                return (i as u64, g);
            }
            g -= m;
        }
        panic!("entry index out of range")
    }
    /// Global index of the first entry of chunk `i`.
    fn chunk_start(&self, i: usize) -> usize {
        self.shape[..i].iter().map(|s| s.1).sum()
    }
    fn key(&self, g: usize) -> Vec<u8> {
        self.entries[g].0.clone()
    }
    fn value_of(&self, key: &[u8]) -> Vec<u8> {
        self.entries.iter().find(|(k, _)| k == key).expect("present").1.clone()
    }
    fn index_of(&self, key: &[u8]) -> usize {
        self.entries.iter().position(|(k, _)| k == key).expect("present")
    }
    /// A neighbour built from the entry at global index `g`.
    fn neighbour(&self, g: usize) -> Neighbour {
        let (k, v) = self.entries[g].clone();
        Neighbour { key: k.clone(), value: v, witness: self.tree.prove_existence(&k).unwrap().witness }
    }
    /// The range-proof segment for entries `[lo, hi)` of chunk `index`.
    fn segment(&self, index: u64, lo: usize, hi: usize) -> Segment {
        let env = self.tree.export_chunk(index).unwrap();
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
    fn window(&self, g_lo: usize, g_hi: usize) -> RangeProof {
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

    fn json(&self) -> J {
        let ops = self
            .ops
            .iter()
            .map(|op| match op {
                Op::Insert(k, v) => J::Arr(vec![s("insert"), h(k), h(v)]),
                Op::Remove(k) => J::Arr(vec![s("remove"), h(k)]),
            })
            .collect();
        let chunks = self
            .shape
            .iter()
            .enumerate()
            .map(|(i, &(kh, m))| {
                obj(vec![("index", n(i as u64)), ("key_height", n(kh as u64)), ("entries", n(m as u64))])
            })
            .collect();
        obj(vec![
            ("name", s(self.name)),
            ("description", s(self.about)),
            ("capacity", n(self.capacity as u64)),
            ("root", h(&self.root())),
            ("chunks", n(self.chunks())),
            ("entries", n(self.total())),
            ("height", n(self.tree.height() as u64)),
            ("ops", J::Arr(ops)),
            ("final_entries", kv(&self.entries)),
            ("chunk_list", J::Arr(chunks)),
        ])
    }
}

fn ins(k: impl AsRef<[u8]>, v: impl AsRef<[u8]>) -> Op {
    Op::Insert(k.as_ref().to_vec(), v.as_ref().to_vec())
}
fn rem(k: impl AsRef<[u8]>) -> Op {
    Op::Remove(k.as_ref().to_vec())
}

struct Trees {
    empty: Built,
    one: Built,
    five: Built,
    c3: Built,
    c4: Built,
    /// `c4` before its last insert: another version of the same tree.
    c4_prev: Built,
    c16: Built,
    c256: Built,
}

fn c4_key(i: usize) -> Vec<u8> {
    format!("key{i:03}").into_bytes()
}

fn build_trees() -> Trees {
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
    let mut rng = Rng(0x0003_0003);
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
    let mut rng = Rng(0x0004_0060);
    let mut order: Vec<usize> = (0..60).collect();
    rng.shuffle(&mut order);
    let ops: Vec<Op> = order.iter().map(|&i| ins(c4_key(2 * i), format!("value-{i}"))).collect();
    let c4_prev = Built::new("c4_sixty_prev", "c4_sixty before its last insert", 4, ops[..ops.len() - 1].to_vec());
    let c4 = Built::new("c4_sixty", "capacity 4: 60 keys key000, key002, … key118 inserted in random order", 4, ops);

    // Capacity 16: random binary keys and values of varied lengths, special
    // keys, then removals.
    let mut rng = Rng(0x0016_0300);
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
    let mut rng = Rng(0x0256_0600);
    let mut order: Vec<usize> = (0..600).collect();
    rng.shuffle(&mut order);
    let ops = order.iter().map(|&i| ins(format!("w{i:05}"), [i as u8])).collect();
    let c256 = Built::new(
        "c256_wide",
        "capacity 256: 600 keys w00000 … w00599 in random order (chunks of 128 or more entries)",
        256,
        ops,
    );

    Trees { empty, one, five, c3, c4, c4_prev, c16, c256 }
}

// ---------------------------------------------------------------------------
// Case collection

const ALL_DECODE: &[&str] = &[
    "TRUNCATED",
    "TRAILING_BYTES",
    "FORMAT_UNSUPPORTED",
    "VARINT_NON_CANONICAL",
    "VARINT_OVERFLOW",
    "CAPACITY_INVALID",
];
const PATH_CODES: &[&str] =
    &["CHUNK_SIZE_INVALID", "CHUNK_FILL", "PATH_TOO_LONG", "HEIGHT_INVALID", "COUNT_INVALID", "ROOT_MISMATCH"];

struct VectorFile {
    name: &'static str,
    description: &'static str,
    spec: &'static str,
    valid: Vec<J>,
    invalid: Vec<J>,
    codes: BTreeSet<&'static str>,
}

impl VectorFile {
    fn new(name: &'static str, description: &'static str, spec: &'static str) -> Self {
        VectorFile { name, description, spec, valid: Vec::new(), invalid: Vec::new(), codes: BTreeSet::new() }
    }

    /// Records an invalid case after checking that `result` is exactly `code`.
    fn invalid<T: std::fmt::Debug>(
        &mut self,
        why: &str,
        result: Result<T, ProofError>,
        code: &'static str,
        mut fields: Vec<(&str, J)>,
    ) {
        match result {
            Err(e) if e.code() == code => {}
            other => panic!("{}: invalid case {why:?}: expected {code}, got {other:?}", self.name),
        }
        self.codes.insert(code);
        fields.push(("code", s(code)));
        fields.push(("why", s(why)));
        self.invalid.push(obj(fields));
    }

    fn require(&self, codes: &[&[&str]]) {
        for &c in codes.iter().flat_map(|c| c.iter()) {
            assert!(self.codes.contains(c), "{}: no invalid case with code {c}", self.name);
        }
    }

    fn json(self) -> J {
        obj(vec![
            ("description", s(self.description)),
            ("spec", s(self.spec)),
            ("valid", J::Arr(self.valid)),
            ("invalid", J::Arr(self.invalid)),
        ])
    }
}

/// Decoding cases every object shares: empty input, format byte, capacity
/// varint, truncation and trailing bytes. `(why, bytes, code)`.
fn header_cases(e: &Enc, format: u8, capacity: usize) -> Vec<(String, Vec<u8>, &'static str)> {
    let b = e.bytes();
    let other = if format == 0x01 { 0x02 } else { 0x01 };
    vec![
        ("empty input".to_string(), vec![], "TRUNCATED"),
        ("only the format byte".into(), vec![format], "TRUNCATED"),
        ("capacity varint cut after a continuation byte".into(), vec![format, 0x80], "TRUNCATED"),
        ("last byte missing".into(), b[..b.len() - 1].to_vec(), "TRUNCATED"),
        ("half of the encoding".into(), b[..b.len() / 2].to_vec(), "TRUNCATED"),
        ("one zero byte appended".into(), cat(&[&b, &[0x00]]), "TRAILING_BYTES"),
        ("the encoding appended to itself".into(), cat(&[&b, &b]), "TRAILING_BYTES"),
        (format!("format byte 0x{other:02x} (another kind)"), e.with("format", &[other]), "FORMAT_UNSUPPORTED"),
        (
            format!("format byte 0x{:02x} (version 2 of this kind)", format | 0x10),
            e.with("format", &[format | 0x10]),
            "FORMAT_UNSUPPORTED",
        ),
        ("format byte 0x00".into(), e.with("format", &[0x00]), "FORMAT_UNSUPPORTED"),
        (
            "capacity with a redundant zero group".into(),
            e.with("capacity", &noncanonical(capacity as u64)),
            "VARINT_NON_CANONICAL",
        ),
        ("capacity 0x80 0x00 (zero, non-minimal)".into(), e.with("capacity", &[0x80, 0x00]), "VARINT_NON_CANONICAL"),
        ("capacity varint with 8 continuation bytes".into(), e.with("capacity", &[0xff; 8]), "VARINT_OVERFLOW"),
        (
            "capacity varint equal to 2^53".into(),
            e.with("capacity", &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10]),
            "VARINT_OVERFLOW",
        ),
        ("capacity 0".into(), e.with("capacity", &[0]), "CAPACITY_INVALID"),
        ("capacity 1".into(), e.with("capacity", &[1]), "CAPACITY_INVALID"),
        ("capacity 4097".into(), e.with("capacity", &varint(4097)), "CAPACITY_INVALID"),
        // The largest varint decodes; the capacity check then rejects it.
        ("capacity 2^53 - 1".into(), e.with("capacity", &varint((1 << 53) - 1)), "CAPACITY_INVALID"),
        ("format byte 0xff".into(), e.with("format", &[0xff]), "FORMAT_UNSUPPORTED"),
    ]
}

/// Cases on one chunk path, whose fields carry the prefix `p` in `e`.
/// `path` is the decoded path, `capacity` the tree's. `(why, bytes, code)`.
fn path_cases(e: &Enc, p: &str, path: &ChunkPath, capacity: usize) -> Vec<(String, Vec<u8>, &'static str)> {
    assert!(path.steps.len() >= 2, "path cases need a path of two or more steps");
    let c = capacity as u64;
    let fill = min_fill(capacity) as u64;
    let f = |name: &str| format!("{p}{name}");
    let st0 = &path.steps[0];
    let st1 = &path.steps[1];
    let flags0 = e.get(&f("step0.flags"))[0];
    let len = path.steps.len() as u64;
    let mut v: Vec<(String, Vec<u8>, &'static str)> = Vec::new();
    let at = |name: &str, bytes: &[u8]| e.with(&f(name), bytes);
    let replace_path = |raw: &[u8]| cat(&[&e.upto(&f("path_len")), raw, &e.after(&format!("{p}step{}.hash", len - 1))]);
    v.push((format!("{p}path length 49 (> 48)"), at("path_len", &varint(49)), "PATH_TOO_LONG"));
    v.push((format!("{p}path length 2^53 - 1"), at("path_len", &varint((1 << 53) - 1)), "PATH_TOO_LONG"));
    v.push((
        format!("{p}path length with a redundant zero group"),
        at("path_len", &noncanonical(len)),
        "VARINT_NON_CANONICAL",
    ));
    let steps_bytes = cat(&[
        &e.span(&f("step0.flags"), &format!("{p}step{}.hash", len - 1)),
        e.get(&format!("{p}step{}.hash", len - 1)),
    ]);
    v.push((
        format!("{p}path length one more than the steps present, input ends after them"),
        cat(&[&e.upto(&f("path_len")), &varint(len + 1), &steps_bytes]),
        "TRUNCATED",
    ));
    v.push((
        format!("{p}input ends inside the first sibling hash"),
        cat(&[&e.upto(&f("step0.hash")), &st0.sibling_hash[..16]]),
        "TRUNCATED",
    ));
    v.push((format!("{p}input ends before the first step's flags"), e.upto(&f("step0.flags")), "TRUNCATED"));
    // Heights.
    v.push((
        format!("{p}first step: parent height 0 (not above the chunk)"),
        at("step0.flags", &[flags0 & 0x80]),
        "HEIGHT_INVALID",
    ));
    v.push((
        format!("{p}first step: parent height 3 (chunk + 3)"),
        at("step0.flags", &[(flags0 & 0x80) | 3]),
        "HEIGHT_INVALID",
    ));
    v.push((
        format!("{p}first step: parent height 127"),
        at("step0.flags", &[(flags0 & 0x80) | 0x7f]),
        "HEIGHT_INVALID",
    ));
    v.push((
        format!("{p}second step: parent height equal to the first's"),
        at("step1.flags", &[((st1.sibling_is_left as u8) << 7) | st0.parent_height]),
        "HEIGHT_INVALID",
    ));
    // Heights 2, 4, …, 46, 47, then 49: within +2 of 47, but above 48.
    let mut steps: Vec<(u8, u64, u64)> = (1..=23).map(|i| (2 * i as u8, 1, c)).collect();
    steps.push((47, 1, c));
    steps.push((49, 1, c));
    v.push((
        format!("{p}25-step path reaching height 47, then parent height 49 (> 48)"),
        replace_path(&raw_path(&steps)),
        "HEIGHT_INVALID",
    ));
    // Counts.
    v.push((format!("{p}first sibling has 0 chunks"), at("step0.chunks", &varint(0)), "COUNT_INVALID"));
    v.push((
        format!("{p}first sibling entries below chunks * ceil(C/2)"),
        at("step0.entries", &varint(st0.sibling_chunks * fill - 1)),
        "COUNT_INVALID",
    ));
    v.push((
        format!("{p}first sibling entries above chunks * C"),
        at("step0.entries", &varint(st0.sibling_chunks * c + 1)),
        "COUNT_INVALID",
    ));
    v.push((
        format!("{p}one step whose sibling has 2^32 - 1 chunks: total chunks 2^32"),
        replace_path(&raw_path(&[(1, (1 << 32) - 1, ((1 << 32) - 1) * fill)])),
        "COUNT_INVALID",
    ));
    v.push((
        format!("{p}two steps with 2^31 sibling chunks each: total chunks above 2^32 - 1"),
        replace_path(&raw_path(&[(1, 1 << 31, (1 << 31) * fill), (2, 1 << 31, (1 << 31) * fill)])),
        "COUNT_INVALID",
    ));
    v.push((
        format!("{p}sibling with 2^53 - 1 chunks and 2^53 - 1 entries (chunks * ceil(C/2) overflows)"),
        replace_path(&raw_path(&[(1, (1 << 53) - 1, (1 << 53) - 1)])),
        "COUNT_INVALID",
    ));
    v.push((
        format!("{p}sibling chunk count varint with 8 continuation bytes"),
        at("step0.chunks", &[0xff; 8]),
        "VARINT_OVERFLOW",
    ));
    // Decodes, but does not hash to the root.
    v.push((
        format!("{p}first sibling hash corrupted"),
        at("step0.hash", &flip_last(&st0.sibling_hash)),
        "ROOT_MISMATCH",
    ));
    v.push((format!("{p}first step: sibling side flipped"), at("step0.flags", &[flags0 ^ 0x80]), "ROOT_MISMATCH"));
    let other_entries =
        if st1.sibling_entries < st1.sibling_chunks * c { st1.sibling_entries + 1 } else { st1.sibling_entries - 1 };
    v.push((
        format!("{p}second sibling entry count changed (still plausible)"),
        at("step1.entries", &varint(other_entries)),
        "ROOT_MISMATCH",
    ));
    let last = len - 1;
    let without_last = cat(&[
        &e.upto(&f("path_len")),
        &varint(last),
        &e.span(&f("step0.flags"), &format!("{p}step{last}.flags")),
        &e.after(&format!("{p}step{last}.hash")),
    ]);
    v.push((format!("{p}last step removed (path_len - 1)"), without_last, "ROOT_MISMATCH"));
    v
}

// ---------------------------------------------------------------------------
// existence.json

fn existence(t: &Trees) -> VectorFile {
    let mut f = VectorFile::new(
        "existence",
        "Existence proofs (format 0x01): verify_existence(root, key, value, proof). Valid cases return chunk_index, position and the tree's totals (chunks, entries); invalid cases fail with code.",
        "spec/proof-format.md, Existence proof (0x01)",
    );
    let valid = |f: &mut VectorFile, b: &Built, key: &[u8], about: &str| {
        let value = b.value_of(key);
        let proof = b.tree.prove_existence(key).unwrap().encode();
        let got = verify_existence(&b.root(), key, &value, &proof).unwrap();
        let (ci, pos) = b.locate(b.index_of(key));
        assert_eq!((got.chunk_index, got.position, got.chunk_count, got.entry_count), (ci, pos, b.chunks(), b.total()));
        f.valid.push(obj(vec![
            ("description", s(about)),
            ("tree", s(b.name)),
            ("root", h(&b.root())),
            ("key", h(key)),
            ("value", h(&value)),
            ("proof", h(&proof)),
            ("chunk_index", n(ci)),
            ("position", n(pos as u64)),
            ("chunks", n(b.chunks())),
            ("entries", n(b.total())),
        ]));
    };
    let c4 = &t.c4;
    valid(&mut f, &t.one, b"only", "single-chunk tree: M = 1, no in-chunk hashes, empty path, empty value");
    valid(&mut f, &t.five, b"c", "capacity 2");
    valid(&mut f, &t.c3, &t.c3.key(0), "capacity 3, first entry after removals");
    valid(&mut f, c4, &c4.key(0), "first entry of the tree");
    valid(&mut f, c4, &c4.key(59), "last entry of the tree");
    valid(&mut f, c4, &c4.key(29), "an entry in the middle");
    for i in [1usize, 5, 9] {
        let g = c4.chunk_start(i);
        valid(&mut f, c4, &c4.key(g), &format!("first entry of chunk {i}"));
        valid(&mut f, c4, &c4.key(g + c4.shape[i].1 - 1), &format!("last entry of chunk {i}"));
    }
    let c16 = &t.c16;
    valid(&mut f, c16, &[0x00], "the key 0x00 with an empty value (first entry)");
    valid(&mut f, c16, &[0x42], "a 1-byte key");
    valid(&mut f, c16, &[0xff; 1024], "a 1024-byte key (last entry)");
    valid(&mut f, c16, b"prefix", "a key whose value has 1000 bytes");
    valid(&mut f, c16, b"pref", "a key that is a prefix of the next key, empty value");
    let c256 = &t.c256;
    let big = (1..c256.shape.len()).find(|&i| c256.shape[i].1 > 140).expect("a chunk above 140 entries");
    let g = c256.chunk_start(big) + 140;
    valid(&mut f, c256, &c256.key(g), "capacity 256, position 140: two-byte varints for C, M and pos");

    // Invalid cases, built from one valid proof in c4_sixty.
    let root = c4.root();
    // Position 1 of a full chunk (every position of M = 4 has 2 in-chunk hashes).
    let ci = (5..c4.shape.len()).find(|&i| c4.shape[i].1 == 4).expect("a full chunk");
    let g = c4.chunk_start(ci) + 1;
    let key = c4.key(g);
    let value = c4.value_of(&key);
    let pr = c4.tree.prove_existence(&key).unwrap();
    let e = enc_existence(&pr);
    let m = pr.witness.chunk_entries as u64;
    let inv =
        |f: &mut VectorFile, why: &str, root: &Hash, key: &[u8], value: &[u8], proof: &[u8], code: &'static str| {
            let r = verify_existence(root, key, value, proof);
            let fields = vec![("root", h(root)), ("key", h(key)), ("value", h(value)), ("proof", h(proof))];
            f.invalid(why, r, code, fields);
        };
    for (why, bytes, code) in header_cases(&e, 0x01, 4) {
        inv(&mut f, &why, &root, &key, &value, &bytes, code);
    }
    // Inputs are checked before the proof is decoded.
    inv(&mut f, "empty key", &root, b"", &value, &e.bytes(), "KEY_EMPTY");
    inv(&mut f, "empty key and an empty proof: inputs are checked first", &root, b"", &value, &[], "KEY_EMPTY");
    inv(&mut f, "key of 1025 bytes", &root, &[0x6b; 1025], &value, &e.bytes(), "KEY_TOO_LONG");
    inv(&mut f, "value of 65537 bytes", &root, &key, &vec![0x76; 65537], &e.bytes(), "VALUE_TOO_LONG");
    // M and pos.
    inv(&mut f, "M = 0", &root, &key, &value, &e.with("M", &[0]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "M = C + 1", &root, &key, &value, &e.with("M", &varint(5)), "CHUNK_SIZE_INVALID");
    inv(
        &mut f,
        "M with a redundant zero group",
        &root,
        &key,
        &value,
        &e.with("M", &noncanonical(m)),
        "VARINT_NON_CANONICAL",
    );
    inv(&mut f, "pos = M", &root, &key, &value, &e.with("pos", &varint(m)), "POSITION_INVALID");
    inv(&mut f, "pos = 2^53 - 1", &root, &key, &value, &e.with("pos", &varint((1 << 53) - 1)), "POSITION_INVALID");
    inv(
        &mut f,
        "pos varint with 8 continuation bytes",
        &root,
        &key,
        &value,
        &e.with("pos", &[0xff; 8]),
        "VARINT_OVERFLOW",
    );
    inv(
        &mut f,
        "input ends inside the in-chunk hashes",
        &root,
        &key,
        &value,
        &cat(&[&e.upto("hashes"), &e.get("hashes")[..40]]),
        "TRUNCATED",
    );
    let mut under = pr.clone();
    under.witness.chunk_entries = 1;
    under.witness.position = 0;
    under.witness.inchunk.clear();
    inv(&mut f, "M = 1 < ceil(C/2) with a non-empty path", &root, &key, &value, &under.encode(), "CHUNK_FILL");
    for (why, bytes, code) in path_cases(&e, "", &pr.witness.path, 4) {
        inv(&mut f, &why, &root, &key, &value, &bytes, code);
    }
    // Decodes, but does not hash to the root.
    inv(&mut f, "wrong value", &root, &key, b"value-x", &e.bytes(), "ROOT_MISMATCH");
    inv(&mut f, "empty value instead of the real one", &root, &key, b"", &e.bytes(), "ROOT_MISMATCH");
    inv(
        &mut f,
        "proof of a neighbouring key",
        &root,
        &key,
        &value,
        &c4.tree.prove_existence(&c4.key(g + 1)).unwrap().encode(),
        "ROOT_MISMATCH",
    );
    inv(
        &mut f,
        "in-chunk hash corrupted",
        &root,
        &key,
        &value,
        &e.with("hashes", &flip_last(e.get("hashes"))),
        "ROOT_MISMATCH",
    );
    inv(
        &mut f,
        "pos changed to another position in the chunk",
        &root,
        &key,
        &value,
        &e.with("pos", &varint((pr.witness.position as u64 + 1) % m)),
        "ROOT_MISMATCH",
    );
    let single = enc_existence(&t.one.tree.prove_existence(b"only").unwrap());
    inv(
        &mut f,
        "single-chunk tree, capacity changed from 2 to 3",
        &t.one.root(),
        b"only",
        b"",
        &single.with("capacity", &[3]),
        "ROOT_MISMATCH",
    );
    let prev = t.c4_prev.tree.prove_existence(&key).unwrap().encode();
    inv(&mut f, "proof from the previous version of the tree", &root, &key, &value, &prev, "ROOT_MISMATCH");
    inv(
        &mut f,
        "valid proof checked against another tree's root",
        &t.c16.root(),
        &key,
        &value,
        &e.bytes(),
        "ROOT_MISMATCH",
    );
    inv(&mut f, "the empty root", &t.empty.root(), &key, &value, &e.bytes(), "ROOT_MISMATCH");

    f.require(&[ALL_DECODE, PATH_CODES, &["POSITION_INVALID", "KEY_EMPTY", "KEY_TOO_LONG", "VALUE_TOO_LONG"]]);
    f
}

// ---------------------------------------------------------------------------
// absence.json

fn absence(t: &Trees) -> VectorFile {
    let mut f = VectorFile::new(
        "absence",
        "Absence proofs (format 0x02): verify_absence(root, key, proof). Valid cases succeed (left_key / right_key name the neighbours the proof carries, for information); invalid cases fail with code.",
        "spec/proof-format.md, Absence proof (0x02)",
    );
    let valid = |f: &mut VectorFile, b: &Built, key: &[u8], about: &str| {
        let pr = b.tree.prove_absence(key).unwrap();
        let proof = pr.encode();
        verify_absence(&b.root(), key, &proof).unwrap();
        // Naive neighbours from the sorted entries.
        let left = b.entries.iter().rev().find(|(k, _)| k.as_slice() < key).map(|e| e.0.clone());
        let right = b.entries.iter().find(|(k, _)| k.as_slice() > key).map(|e| e.0.clone());
        assert_eq!(pr.left.as_ref().map(|x| x.key.clone()), left);
        assert_eq!(pr.right.as_ref().map(|x| x.key.clone()), right);
        f.valid.push(obj(vec![
            ("description", s(about)),
            ("tree", s(b.name)),
            ("root", h(&b.root())),
            ("key", h(key)),
            ("proof", h(&proof)),
            ("left_key", oh(left.as_deref())),
            ("right_key", oh(right.as_deref())),
        ]));
    };
    let c4 = &t.c4;
    valid(&mut f, &t.empty, b"anything", "empty tree: no neighbours");
    valid(&mut f, &t.one, b"a", "single entry, key below it: right neighbour only");
    valid(&mut f, &t.one, b"z", "single entry, key above it: left neighbour only");
    valid(&mut f, &t.five, b"bb", "capacity 2, between two entries");
    valid(&mut f, &t.c3, b"c", "capacity 3, a removed key");
    valid(&mut f, c4, b"a", "below the first entry: right neighbour only");
    valid(&mut f, c4, b"key", "a proper prefix of every key: right neighbour only");
    valid(&mut f, c4, b"z", "above the last entry: left neighbour only");
    valid(&mut f, c4, b"key119", "just above the last entry key118: left neighbour only");
    valid(&mut f, c4, b"key061", "between two entries");
    for i in [2usize, 7] {
        let g = c4.chunk_start(i);
        let mut k = c4.key(g - 1);
        k.push(b'0');
        valid(&mut f, c4, &k, &format!("between the last entry of chunk {} and the first of chunk {i}", i - 1));
    }
    valid(&mut f, &t.c16, b"prefi", "between \"pref\" and \"prefix\"");
    valid(&mut f, &t.c16, b"prefix\x00\x00", "just above \"prefix\\0\"");
    valid(&mut f, &t.c16, &[0x00, 0x00], "just above the first key 0x00");
    valid(&mut f, &t.c16, &[0xff; 1000], "a prefix of the 1024-byte last key");
    valid(&mut f, &t.c256, b"w00300x", "capacity 256");

    // Invalid cases around c4_sixty.
    let root = c4.root();
    // Entries g, g + 1, g + 2 in one full chunk.
    let ci = (2..c4.shape.len()).find(|&i| c4.shape[i].1 == 4).expect("a full chunk");
    let g = c4.chunk_start(ci) + 1;
    let mut key = c4.key(g);
    key.push(b'!'); // absent, between entries g and g + 1
    let pr = c4.tree.prove_absence(&key).unwrap();
    let e = enc_absence(&pr);
    let inv = |f: &mut VectorFile, why: &str, root: &Hash, key: &[u8], proof: &[u8], code: &'static str| {
        let r = verify_absence(root, key, proof);
        f.invalid(why, r, code, vec![("root", h(root)), ("key", h(key)), ("proof", h(proof))]);
    };
    for (why, bytes, code) in header_cases(&e, 0x02, 4) {
        inv(&mut f, &why, &root, &key, &bytes, code);
    }
    inv(&mut f, "empty key", &root, b"", &e.bytes(), "KEY_EMPTY");
    inv(&mut f, "empty key and an empty proof: the key is checked first", &root, b"", &[], "KEY_EMPTY");
    inv(&mut f, "key of 1025 bytes", &root, &[0x6b; 1025], &e.bytes(), "KEY_TOO_LONG");
    // Flags.
    inv(&mut f, "flags bit 2 set", &root, &key, &e.with("flags", &[0x07]), "FLAGS_INVALID");
    inv(&mut f, "flags bit 7 set", &root, &key, &e.with("flags", &[0x83]), "FLAGS_INVALID");
    inv(&mut f, "flags 0xff", &root, &key, &e.with("flags", &[0xff]), "FLAGS_INVALID");
    inv(&mut f, "input ends after the flags", &root, &key, &e.upto("left.key"), "TRUNCATED");
    inv(
        &mut f,
        "flags say left only, but both neighbours follow",
        &root,
        &key,
        &e.with("flags", &[0x01]),
        "TRAILING_BYTES",
    );
    inv(&mut f, "flags say both, but only the left neighbour follows", &root, &key, &e.upto("right.key"), "TRUNCATED");
    inv(
        &mut f,
        "flags say none (the tree is not empty)",
        &root,
        &key,
        &cat(&[&e.upto("flags"), &[0]]),
        "ROOT_MISMATCH",
    );
    // Neighbour fields.
    inv(&mut f, "left neighbour key length 0", &root, &key, &e.with("left.key", &[0]), "KEY_EMPTY");
    inv(
        &mut f,
        "left neighbour key length 1025",
        &root,
        &key,
        &e.upto("left.key").into_iter().chain(varint(1025)).collect::<Vec<_>>(),
        "KEY_TOO_LONG",
    );
    inv(
        &mut f,
        "right neighbour key length 1025, bytes present",
        &root,
        &key,
        &e.with("right.key", &bytes_field(&[0x6b; 1025])),
        "KEY_TOO_LONG",
    );
    inv(
        &mut f,
        "left neighbour key length beyond the input",
        &root,
        &key,
        &cat(&[&e.upto("left.key"), &varint(1000), b"key"]),
        "TRUNCATED",
    );
    inv(
        &mut f,
        "left neighbour value length 65537",
        &root,
        &key,
        &cat(&[&e.upto("left.value"), &varint(65537)]),
        "VALUE_TOO_LONG",
    );
    inv(
        &mut f,
        "right neighbour value length with a redundant zero group",
        &root,
        &key,
        &e.with("right.value", &cat(&[&noncanonical(e.get("right.value")[0] as u64), &e.get("right.value")[1..]])),
        "VARINT_NON_CANONICAL",
    );
    let m = pr.left.as_ref().unwrap().witness.chunk_entries as u64;
    inv(&mut f, "left neighbour M = 0", &root, &key, &e.with("left.M", &[0]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "right neighbour M = C + 1", &root, &key, &e.with("right.M", &[5]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "left neighbour pos = M", &root, &key, &e.with("left.pos", &varint(m)), "POSITION_INVALID");
    inv(&mut f, "right neighbour pos = M + 1", &root, &key, &e.with("right.pos", &varint(m + 1)), "POSITION_INVALID");
    let mut under = pr.clone();
    let w = &mut under.right.as_mut().unwrap().witness;
    w.chunk_entries = 1;
    w.position = 0;
    w.inchunk.clear();
    inv(&mut f, "right neighbour M = 1 < ceil(C/2) with a non-empty path", &root, &key, &under.encode(), "CHUNK_FILL");
    for (why, bytes, code) in path_cases(&e, "left.", &pr.left.as_ref().unwrap().witness.path, 4) {
        inv(&mut f, &why, &root, &key, &bytes, code);
    }
    for (why, bytes, code) in path_cases(&e, "right.", &pr.right.as_ref().unwrap().witness.path, 4) {
        inv(&mut f, &why, &root, &key, &bytes, code);
    }
    // Decodes, but does not hash to the root.
    inv(
        &mut f,
        "left neighbour value corrupted",
        &root,
        &key,
        &e.with("left.value", &bytes_field(b"value-x")),
        "ROOT_MISMATCH",
    );
    inv(
        &mut f,
        "right neighbour key changed (still above the key)",
        &root,
        &key,
        &e.with("right.key", &bytes_field(b"key999")),
        "ROOT_MISMATCH",
    );
    inv(
        &mut f,
        "left neighbour in-chunk hash corrupted",
        &root,
        &key,
        &e.with("left.hashes", &flip_last(e.get("left.hashes"))),
        "ROOT_MISMATCH",
    );
    let prev = t.c4_prev.tree.prove_absence(&key).unwrap().encode();
    inv(&mut f, "proof from the previous version of the tree", &root, &key, &prev, "ROOT_MISMATCH");
    inv(&mut f, "valid proof checked against another tree's root", &t.c16.root(), &key, &e.bytes(), "ROOT_MISMATCH");
    let empty3 = AbsenceProof { capacity: 3, left: None, right: None }.encode();
    inv(
        &mut f,
        "empty proof of capacity 3 against the capacity-2 empty root",
        &t.empty.root(),
        b"k",
        &empty3,
        "ROOT_MISMATCH",
    );
    let bad_right =
        AbsenceProof { right: Some(Neighbour { value: b"bad".to_vec(), ..pr.right.clone().unwrap() }), ..pr.clone() };
    inv(
        &mut f,
        "left neighbour valid, right neighbour value corrupted",
        &root,
        &key,
        &bad_right.encode(),
        "ROOT_MISMATCH",
    );
    // Neighbours that verify, but do not prove absence.
    let both = |l: usize, r: usize| {
        AbsenceProof { capacity: 4, left: Some(c4.neighbour(l)), right: Some(c4.neighbour(r)) }.encode()
    };
    let left_only = |l: usize| AbsenceProof { capacity: 4, left: Some(c4.neighbour(l)), right: None }.encode();
    let right_only = |r: usize| AbsenceProof { capacity: 4, left: None, right: Some(c4.neighbour(r)) }.encode();
    inv(
        &mut f,
        "present key between non-adjacent neighbours (same chunk)",
        &root,
        &c4.key(g + 1),
        &both(g, g + 2),
        "ABSENCE_INVALID",
    );
    let b7 = c4.chunk_start(7);
    inv(
        &mut f,
        "present key between non-adjacent neighbours (across chunks)",
        &root,
        &c4.key(b7),
        &both(b7 - 1, b7 + 1),
        "ABSENCE_INVALID",
    );
    let mut k2 = c4.key(b7);
    k2.push(b'0');
    inv(
        &mut f,
        "absent key between neighbours two chunks apart",
        &root,
        &k2,
        &both(b7 - 1, b7 + c4.shape[7].1),
        "ABSENCE_INVALID",
    );
    inv(&mut f, "key below the left neighbour", &root, b"key000", &e.bytes(), "ABSENCE_INVALID");
    inv(&mut f, "key above the right neighbour", &root, b"z", &e.bytes(), "ABSENCE_INVALID");
    inv(&mut f, "key equal to the left neighbour", &root, &c4.key(g), &e.bytes(), "ABSENCE_INVALID");
    inv(&mut f, "key equal to the right neighbour", &root, &c4.key(g + 1), &e.bytes(), "ABSENCE_INVALID");
    inv(&mut f, "neighbours swapped", &root, &key, &both(g + 1, g), "ABSENCE_INVALID");
    inv(&mut f, "left neighbour only, but it is not the last entry", &root, &key, &left_only(g), "ABSENCE_INVALID");
    inv(
        &mut f,
        "right neighbour only, but it is not the first entry",
        &root,
        &key,
        &right_only(g + 1),
        "ABSENCE_INVALID",
    );
    let mut kb = c4.key(b7 - 1);
    kb.push(b'0'); // between chunks 6 and 7
    inv(
        &mut f,
        "left neighbour only, last entry of a chunk that is not the last",
        &root,
        &kb,
        &left_only(b7 - 1),
        "ABSENCE_INVALID",
    );
    inv(
        &mut f,
        "right neighbour only, first entry of a chunk that is not the first",
        &root,
        &kb,
        &right_only(b7),
        "ABSENCE_INVALID",
    );

    f.require(&[
        ALL_DECODE,
        PATH_CODES,
        &["POSITION_INVALID", "KEY_EMPTY", "KEY_TOO_LONG", "VALUE_TOO_LONG", "FLAGS_INVALID", "ABSENCE_INVALID"],
    ]);
    f
}

// ---------------------------------------------------------------------------
// range.json

/// What a range query returns, computed naively from the sorted entries.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn naive_range(b: &Built, start: &[u8], end: Option<&[u8]>, limit: usize) -> (Entries, bool, Option<Vec<u8>>) {
    let mut matching = b.entries.iter().filter(|(k, _)| k.as_slice() >= start && end.is_none_or(|e| k.as_slice() < e));
    let results: Vec<_> = matching.by_ref().take(limit).cloned().collect();
    let next = matching.next().map(|e| e.0.clone());
    (results, next.is_none(), next)
}

fn range(t: &Trees) -> VectorFile {
    let mut f = VectorFile::new(
        "range",
        "Range proofs (format 0x03): verify_range(root, start, end, limit, proof); end null means unbounded. Valid cases return results (key/value pairs), complete, and resume_key (null when complete); invalid cases fail with code.",
        "spec/proof-format.md, Range proof (0x03)",
    );
    let valid = |f: &mut VectorFile, b: &Built, start: &[u8], end: Option<&[u8]>, limit: usize, about: &str| {
        let proof = b.tree.prove_range(start, end, limit).unwrap().encode();
        let got = verify_range(&b.root(), start, end, limit, &proof).unwrap();
        let (results, complete, resume) = naive_range(b, start, end, limit);
        assert_eq!((&got.entries, got.complete, &got.resume_key), (&results, complete, &resume), "{about}");
        f.valid.push(obj(vec![
            ("description", s(about)),
            ("tree", s(b.name)),
            ("root", h(&b.root())),
            ("start", h(start)),
            ("end", oh(end)),
            ("limit", n(limit as u64)),
            ("proof", h(&proof)),
            ("results", kv(&results)),
            ("complete", J::Bool(complete)),
            ("resume_key", oh(resume.as_deref())),
        ]));
    };
    let c4 = &t.c4;
    valid(&mut f, &t.empty, b"", None, 1, "empty tree: no segments, complete");
    valid(&mut f, &t.one, b"", None, 10, "single entry, whole tree");
    valid(&mut f, &t.five, b"b", Some(b"d"), 10, "capacity 2, two results");
    valid(&mut f, &t.c3, b"", None, 100, "capacity 3, whole tree after removals");
    valid(&mut f, c4, b"", None, 65536, "whole tree, largest limit");
    valid(&mut f, c4, b"", None, 10, "first 10 entries: incomplete, resume at the 11th");
    valid(
        &mut f,
        c4,
        b"key020",
        Some(b"key040"),
        100,
        "start is present: left neighbour key018, successor key040 >= end",
    );
    valid(&mut f, c4, b"key021", Some(b"key031"), 3, "absent start, limit reached: incomplete");
    valid(&mut f, c4, b"key021", Some(b"key023"), 5, "one result");
    valid(&mut f, c4, b"key0211", Some(b"key0215"), 5, "no results between two adjacent entries");
    valid(&mut f, c4, b"z", None, 5, "start above the last entry: only the left neighbour");
    valid(&mut f, c4, b"a", Some(b"b"), 5, "end below the first entry: only the successor");
    valid(&mut f, c4, b"key100", None, 65536, "tail of the tree, no successor");
    valid(&mut f, c4, b"key020", Some(b"key030"), 5, "exactly limit results, successor >= end: complete");
    valid(&mut f, c4, b"key110", None, 5, "exactly limit results up to the last entry: complete");
    valid(&mut f, c4, b"key013", Some(b"key091"), 1000, "spanning many chunks");
    valid(&mut f, c4, b"key", Some(b"key0"), 3, "no results, start below the first entry");
    let g = c4.chunk_start(4);
    valid(
        &mut f,
        c4,
        &c4.key(g),
        Some(&c4.key(g + 3)),
        10,
        "start is the first key of chunk 4: the left neighbour is in chunk 3",
    );
    let g = c4.chunk_start(8);
    valid(&mut f, c4, &c4.key(g - 2), None, 2, "results end at a chunk boundary, the successor starts the next chunk");
    valid(&mut f, &t.c16, b"", None, 65536, "capacity 16, whole tree");
    valid(&mut f, &t.c16, b"pre", Some(b"prefix\x01"), 10, "the prefix family");
    valid(&mut f, &t.c16, &[0xff], None, 65536, "every key from 0xff on, up to the 1024-byte last key");
    valid(&mut f, &t.c256, b"w00100", Some(b"w00400"), 300, "capacity 256: two-byte varints for M, lo and hi");

    // Invalid cases around c4_sixty. The base query crosses chunks.
    let root = c4.root();
    let b5 = c4.chunk_start(5);
    let start = c4.key(b5 - 1); // left neighbour in chunk 4, results from chunk 4 on
    let end = c4.key(b5 + c4.shape[5].1 + 1); // results end at chunk 6's first entry, its second is the successor
    let limit = 1000;
    let pr = c4.tree.prove_range(&start, Some(&end), limit).unwrap();
    assert_eq!(pr.segments.len(), 3);
    let e = enc_range(&pr);
    let q = |start: &[u8], end: Option<&[u8]>, limit: usize, proof: &[u8], root: &Hash| -> Vec<(&'static str, J)> {
        vec![("root", h(root)), ("start", h(start)), ("end", oh(end)), ("limit", n(limit as u64)), ("proof", h(proof))]
    };
    let inv = |f: &mut VectorFile, why: &str, proof: &[u8], code: &'static str| {
        let r = verify_range(&root, &start, Some(&end), limit, proof);
        f.invalid(why, r, code, q(&start, Some(&end), limit, proof, &root));
    };
    let invq = |f: &mut VectorFile,
                why: &str,
                root: &Hash,
                st: &[u8],
                en: Option<&[u8]>,
                lim: usize,
                proof: &[u8],
                code: &'static str| {
        let r = verify_range(root, st, en, lim, proof);
        f.invalid(why, r, code, q(st, en, lim, proof, root));
    };
    for (why, bytes, code) in header_cases(&e, 0x03, 4) {
        inv(&mut f, &why, &bytes, code);
    }
    // Query checks, before decoding.
    let b = e.bytes();
    invq(&mut f, "start of 1025 bytes", &root, &[0x6b; 1025], None, 10, &b, "KEY_TOO_LONG");
    invq(
        &mut f,
        "start of 1025 bytes and limit 0: start is checked first",
        &root,
        &[0x6b; 1025],
        None,
        0,
        &b,
        "KEY_TOO_LONG",
    );
    invq(&mut f, "end present and empty", &root, b"", Some(b""), 10, &b, "KEY_EMPTY");
    invq(&mut f, "end of 1025 bytes", &root, b"", Some(&[0x6b; 1025]), 10, &b, "KEY_TOO_LONG");
    invq(&mut f, "limit 0", &root, &start, Some(&end), 0, &b, "QUERY_INVALID");
    invq(&mut f, "limit 65537", &root, &start, Some(&end), 65537, &b, "QUERY_INVALID");
    invq(&mut f, "end equal to start", &root, &start, Some(&start), 10, &b, "QUERY_INVALID");
    invq(&mut f, "end below start", &root, &end, Some(&start), 10, &b, "QUERY_INVALID");
    invq(
        &mut f,
        "limit 0 and an empty proof: the query is checked first",
        &root,
        &start,
        Some(&end),
        0,
        &[],
        "QUERY_INVALID",
    );
    // Segment count.
    inv(
        &mut f,
        "segment count with a redundant zero group",
        &e.with("segments", &noncanonical(3)),
        "VARINT_NON_CANONICAL",
    );
    inv(
        &mut f,
        "segment count 2^53 - 1, nothing follows",
        &cat(&[&e.upto("segments"), &varint((1 << 53) - 1)]),
        "TRUNCATED",
    );
    inv(&mut f, "segment count one more than present", &e.with("segments", &[4]), "TRUNCATED");
    inv(&mut f, "segment count one less than present", &e.with("segments", &[2]), "TRAILING_BYTES");
    inv(&mut f, "segment count 0 (the tree is not empty)", &cat(&[&e.upto("segments"), &[0]]), "ROOT_MISMATCH");
    // Segment header.
    let m0 = pr.segments[0].chunk_entries as u64;
    let lo0 = pr.segments[0].lo as u64;
    inv(&mut f, "first segment M = 0", &e.with("seg0.M", &[0]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "second segment M = C + 1", &e.with("seg1.M", &[5]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "first segment lo = M", &e.with("seg0.lo", &varint(m0)), "POSITION_INVALID");
    inv(&mut f, "first segment hi = lo", &e.with("seg0.hi", &varint(lo0)), "POSITION_INVALID");
    inv(&mut f, "first segment hi < lo", &e.with("seg0.hi", &varint(lo0.saturating_sub(1))), "POSITION_INVALID");
    inv(&mut f, "first segment hi = M + 1", &e.with("seg0.hi", &varint(m0 + 1)), "POSITION_INVALID");
    inv(&mut f, "second segment lo with 8 continuation bytes", &e.with("seg1.lo", &[0xff; 8]), "VARINT_OVERFLOW");
    // Entries.
    let s1 = &pr.segments[1];
    inv(
        &mut f,
        "second segment: first two keys swapped",
        &{
            let mut x = enc_range(&pr);
            let (a, bb) = (x.idx("seg1.key0"), x.idx("seg1.key1"));
            let tmp = x.0[a].1.clone();
            x.0[a].1 = x.0[bb].1.clone();
            x.0[bb].1 = tmp;
            x.bytes()
        },
        "KEYS_NOT_SORTED",
    );
    inv(
        &mut f,
        "second segment's first key equal to the first segment's last key",
        &e.with("seg1.key0", &bytes_field(&pr.segments[0].entries.last().unwrap().0)),
        "KEYS_NOT_SORTED",
    );
    inv(
        &mut f,
        "segments in reverse order",
        &{
            let mut rev = pr.clone();
            rev.segments.reverse();
            rev.encode()
        },
        "KEYS_NOT_SORTED",
    );
    inv(&mut f, "second segment: a key of length 0", &e.with("seg1.key1", &[0]), "KEY_EMPTY");
    inv(&mut f, "second segment: a key of length 1025", &cat(&[&e.upto("seg1.key1"), &varint(1025)]), "KEY_TOO_LONG");
    inv(
        &mut f,
        "second segment: a value of length 65537",
        &cat(&[&e.upto("seg1.value1"), &varint(65537)]),
        "VALUE_TOO_LONG",
    );
    inv(&mut f, "input ends inside a key", &cat(&[&e.upto("seg1.key1"), &e.get("seg1.key1")[..3]]), "TRUNCATED");
    let mut under = pr.clone();
    under.segments[1] =
        Segment { chunk_entries: 1, lo: 0, entries: s1.entries[..1].to_vec(), inchunk: vec![], path: s1.path.clone() };
    inv(&mut f, "second segment M = 1 < ceil(C/2) with a non-empty path", &under.encode(), "CHUNK_FILL");
    for (why, bytes, code) in path_cases(&e, "seg1.", &s1.path, 4) {
        inv(&mut f, &why, &bytes, code);
    }
    // Decodes, but does not hash to the root.
    inv(&mut f, "a result's value corrupted", &e.with("seg1.value0", &bytes_field(b"value-x")), "ROOT_MISMATCH");
    inv(
        &mut f,
        "last segment's in-chunk hash corrupted",
        &e.with("seg2.hashes", &flip_last(e.get("seg2.hashes"))),
        "ROOT_MISMATCH",
    );
    let prev = t.c4_prev.tree.prove_range(&start, Some(&end), limit).unwrap().encode();
    inv(&mut f, "proof from the previous version of the tree", &prev, "ROOT_MISMATCH");
    invq(
        &mut f,
        "valid proof checked against another tree's root",
        &t.c16.root(),
        &start,
        Some(&end),
        limit,
        &e.bytes(),
        "ROOT_MISMATCH",
    );
    // Windows whose segments all verify, but are not what a prover builds.
    let (gs, ge) = (c4.index_of(&start), c4.index_of(&end)); // window is [gs - 1, ge]
    assert_eq!(pr, c4.window(gs - 1, ge + 1), "the window helper reproduces the prover");
    let w = |a: usize, b: usize| c4.window(a, b).encode();
    inv(
        &mut f,
        "left neighbour omitted: the window starts at start, not at the tree's first entry",
        &w(gs, ge + 1),
        "RANGE_INVALID",
    );
    inv(&mut f, "an extra entry before the left neighbour", &w(gs - 2, ge + 1), "RANGE_INVALID");
    inv(&mut f, "successor omitted: the window stops before the tree's last entry", &w(gs - 1, ge), "RANGE_INVALID");
    inv(&mut f, "an extra entry after the successor", &w(gs - 1, ge + 2), "RANGE_INVALID");
    inv(&mut f, "results stop early: the last result offered as the successor", &w(gs - 1, ge - 1), "RANGE_INVALID");
    let mut gap = pr.clone();
    gap.segments.remove(1);
    inv(&mut f, "gap: the middle segment (a whole chunk) removed", &gap.encode(), "RANGE_INVALID");
    let mut gap = pr.clone();
    let (i1, m1) = (5u64, c4.shape[5].1);
    gap.segments[1] = c4.segment(i1, 0, m1 - 1);
    inv(&mut f, "gap: the middle segment stops one entry before its chunk's end", &gap.encode(), "RANGE_INVALID");
    let mut gap = pr.clone();
    gap.segments[1] = c4.segment(i1, 1, m1);
    inv(&mut f, "gap: the middle segment starts at lo = 1", &gap.encode(), "RANGE_INVALID");
    let small = c4.tree.prove_range(&start, Some(&end), 5).unwrap().encode();
    invq(
        &mut f,
        "too many results: a proof for limit 5 checked with limit 3",
        &root,
        &start,
        Some(&end),
        3,
        &small,
        "RANGE_INVALID",
    );
    invq(
        &mut f,
        "a proof for limit 3 checked with limit 5 (the successor would be a 4th result)",
        &root,
        &start,
        Some(&end),
        5,
        &c4.tree.prove_range(&start, Some(&end), 3).unwrap().encode(),
        "RANGE_INVALID",
    );
    invq(
        &mut f,
        "a proof for end key040 checked with unbounded end",
        &root,
        b"key020",
        None,
        100,
        &c4.tree.prove_range(b"key020", Some(b"key040"), 100).unwrap().encode(),
        "RANGE_INVALID",
    );
    invq(
        &mut f,
        "a proof for start key020 checked with start key030",
        &root,
        b"key030",
        Some(b"key040"),
        100,
        &c4.tree.prove_range(b"key020", Some(b"key040"), 100).unwrap().encode(),
        "RANGE_INVALID",
    );
    invq(
        &mut f,
        "a proof for start key030 checked with start key020",
        &root,
        b"key020",
        Some(b"key040"),
        100,
        &c4.tree.prove_range(b"key030", Some(b"key040"), 100).unwrap().encode(),
        "RANGE_INVALID",
    );

    f.require(&[
        ALL_DECODE,
        PATH_CODES,
        &[
            "POSITION_INVALID",
            "KEY_EMPTY",
            "KEY_TOO_LONG",
            "VALUE_TOO_LONG",
            "KEYS_NOT_SORTED",
            "RANGE_INVALID",
            "QUERY_INVALID",
        ],
    ]);
    f
}

// ---------------------------------------------------------------------------
// chunk_proof.json

fn chunk_proof(t: &Trees) -> VectorFile {
    let mut f = VectorFile::new(
        "chunk_proof",
        "Chunk proofs (format 0x04): verify_chunk_proof(root, proof). Valid cases return the chunk's index, the tree's totals (chunks, entries) and the chunk's key_height; invalid cases fail with code.",
        "spec/proof-format.md, Chunk proof (0x04)",
    );
    for b in [&t.one, &t.five, &t.c3, &t.c4, &t.c256] {
        for i in 0..b.chunks() {
            let proof = b.tree.prove_chunk(i).unwrap().encode();
            let got = verify_chunk_proof(&b.root(), &proof).unwrap();
            let kh = b.shape[i as usize].0;
            assert_eq!((got.index, got.chunk_count, got.entry_count, got.key_height), (i, b.chunks(), b.total(), kh));
            f.valid.push(obj(vec![
                ("tree", s(b.name)),
                ("root", h(&b.root())),
                ("proof", h(&proof)),
                ("index", n(i)),
                ("chunks", n(b.chunks())),
                ("entries", n(b.total())),
                ("key_height", n(kh as u64)),
            ]));
        }
    }
    let c4 = &t.c4;
    let root = c4.root();
    let pr = c4.tree.prove_chunk(6).unwrap();
    let e = enc_chunk_proof(&pr);
    let inv = |f: &mut VectorFile, why: &str, root: &Hash, proof: &[u8], code: &'static str| {
        let r = verify_chunk_proof(root, proof);
        f.invalid(why, r, code, vec![("root", h(root)), ("proof", h(proof))]);
    };
    for (why, bytes, code) in header_cases(&e, 0x04, 4) {
        inv(&mut f, &why, &root, &bytes, code);
    }
    inv(&mut f, "M = 0", &root, &e.with("M", &[0]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "M = C + 1", &root, &e.with("M", &[5]), "CHUNK_SIZE_INVALID");
    inv(
        &mut f,
        "M with a redundant zero group",
        &root,
        &e.with("M", &noncanonical(pr.chunk_entries as u64)),
        "VARINT_NON_CANONICAL",
    );
    inv(
        &mut f,
        "input ends inside the chunk root",
        &root,
        &cat(&[&e.upto("chunk_root"), &pr.chunk_root[..31]]),
        "TRUNCATED",
    );
    inv(&mut f, "M = 1 < ceil(C/2) with a non-empty path", &root, &e.with("M", &[1]), "CHUNK_FILL");
    for (why, bytes, code) in path_cases(&e, "", &pr.path, 4) {
        inv(&mut f, &why, &root, &bytes, code);
    }
    inv(&mut f, "chunk root corrupted", &root, &e.with("chunk_root", &flip_last(&pr.chunk_root)), "ROOT_MISMATCH");
    let other_m = if pr.chunk_entries == 4 { 3 } else { 4 };
    inv(&mut f, "M changed (still between ceil(C/2) and C)", &root, &e.with("M", &[other_m]), "ROOT_MISMATCH");
    inv(
        &mut f,
        "proof from the previous version of the tree",
        &root,
        &t.c4_prev.tree.prove_chunk(6).unwrap().encode(),
        "ROOT_MISMATCH",
    );
    inv(&mut f, "valid proof checked against another tree's root", &t.c16.root(), &e.bytes(), "ROOT_MISMATCH");
    let single = t.one.tree.prove_chunk(0).unwrap();
    inv(
        &mut f,
        "single-chunk proof with the capacity changed",
        &t.one.root(),
        &ChunkProof { capacity: 3, ..single }.encode(),
        "ROOT_MISMATCH",
    );

    f.require(&[ALL_DECODE, PATH_CODES]);
    f
}

// ---------------------------------------------------------------------------
// chunk_envelope.json

fn chunk_envelope(t: &Trees) -> VectorFile {
    let mut f = VectorFile::new(
        "chunk_envelope",
        "Chunk envelopes (format 0x05): verify_chunk(root, index, envelope). Valid cases return the capacity, key_height, the tree's totals (chunks, entries) and the chunk's entries (chunk_entries); invalid cases fail with code.",
        "spec/chunk-format.md, Encoding (0x05) and Verification",
    );
    for b in [&t.one, &t.five, &t.c3, &t.c4, &t.c16, &t.c256] {
        for i in 0..b.chunks() {
            let env = b.tree.export_chunk(i).unwrap();
            let bytes = env.encode();
            assert_eq!(bytes, b.tree.export_chunk_bytes(i).unwrap());
            let got = verify_chunk(&b.root(), i, &bytes).unwrap();
            let g = b.chunk_start(i as usize);
            let (kh, m) = b.shape[i as usize];
            let entries = &b.entries[g..g + m];
            let got_entries: Vec<_> = got.entries().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
            assert_eq!(
                (
                    got.index(),
                    got.chunk_count(),
                    got.entry_count(),
                    got.capacity(),
                    got.key_height(),
                    got_entries.as_slice()
                ),
                (i, b.chunks(), b.total(), b.capacity, kh, entries)
            );
            f.valid.push(obj(vec![
                ("tree", s(b.name)),
                ("root", h(&b.root())),
                ("index", n(i)),
                ("envelope", h(&bytes)),
                ("capacity", n(b.capacity as u64)),
                ("key_height", n(kh as u64)),
                ("chunks", n(b.chunks())),
                ("entries", n(b.total())),
                ("chunk_entries", kv(entries)),
            ]));
        }
    }
    let c4 = &t.c4;
    let root = c4.root();
    let idx = (1..c4.chunks())
        .find(|&i| c4.shape[i as usize].1 == 4 && c4.shape[i as usize].0 >= 2)
        .expect("a full chunk with key-height >= 2");
    let env = c4.tree.export_chunk(idx).unwrap();
    let e = enc_envelope(&env);
    let kh = env.key_height;
    let inv = |f: &mut VectorFile, why: &str, root: &Hash, index: u64, bytes: &[u8], code: &'static str| {
        let r = verify_chunk(root, index, bytes);
        f.invalid(
            why,
            r.map(|v| v.index()),
            code,
            vec![("root", h(root)), ("index", n(index)), ("envelope", h(bytes))],
        );
    };
    for (why, bytes, code) in header_cases(&e, 0x05, 4) {
        inv(&mut f, &why, &root, idx, &bytes, code);
    }
    inv(&mut f, "key_height 49", &root, idx, &e.with("key_height", &[49]), "HEIGHT_INVALID");
    inv(&mut f, "key_height 0xff", &root, idx, &e.with("key_height", &[0xff]), "HEIGHT_INVALID");
    inv(&mut f, "input ends after the key_height", &root, idx, &e.upto("M"), "TRUNCATED");
    inv(&mut f, "M = 0", &root, idx, &e.with("M", &[0]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "M = C + 1", &root, idx, &e.with("M", &[5]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "M with a redundant zero group", &root, idx, &e.with("M", &noncanonical(4)), "VARINT_NON_CANONICAL");
    inv(&mut f, "first key of length 0", &root, idx, &e.with("key0", &[0]), "KEY_EMPTY");
    inv(
        &mut f,
        "second key of length 1025, bytes present",
        &root,
        idx,
        &e.with("key1", &bytes_field(&[0x6b; 1025])),
        "KEY_TOO_LONG",
    );
    inv(
        &mut f,
        "key length varint with 8 continuation bytes",
        &root,
        idx,
        &e.with("key1", &[0xff; 8]),
        "VARINT_OVERFLOW",
    );
    inv(
        &mut f,
        "input ends inside the third key",
        &root,
        idx,
        &cat(&[&e.upto("key2"), &e.get("key2")[..3]]),
        "TRUNCATED",
    );
    inv(
        &mut f,
        "third value of length 65537",
        &root,
        idx,
        &cat(&[&e.upto("value2"), &varint(65537)]),
        "VALUE_TOO_LONG",
    );
    inv(
        &mut f,
        "value length with a redundant zero group",
        &root,
        idx,
        &e.with("value0", &cat(&[&noncanonical(e.get("value0")[0] as u64), &e.get("value0")[1..]])),
        "VARINT_NON_CANONICAL",
    );
    let swapped = {
        let mut x = env.clone();
        x.entries.swap(1, 2);
        x.encode()
    };
    inv(&mut f, "second and third entries swapped", &root, idx, &swapped, "KEYS_NOT_SORTED");
    let dup = e.with("key1", e.get("key0"));
    inv(&mut f, "second key equal to the first", &root, idx, &dup, "KEYS_NOT_SORTED");
    let dup_long_value = cat(&[&e.upto("key1"), e.get("key0"), &varint(65537)]);
    inv(
        &mut f,
        "second key equal to the first, then a value of length 65537: the key order is checked before the value",
        &root,
        idx,
        &dup_long_value,
        "KEYS_NOT_SORTED",
    );
    let mut under = env.clone();
    under.entries.truncate(1);
    inv(
        &mut f,
        "only the first entry kept (M = 1 < ceil(C/2)), path unchanged",
        &root,
        idx,
        &under.encode(),
        "CHUNK_FILL",
    );
    for (why, bytes, code) in path_cases(&e, "", &env.path, 4) {
        inv(&mut f, &why, &root, idx, &bytes, code);
    }
    // Decodes, but does not hash to the root.
    inv(&mut f, "a value corrupted", &root, idx, &e.with("value1", &bytes_field(b"value-x")), "ROOT_MISMATCH");
    let mut k3 = env.entries[3].0.clone();
    k3.push(b'x');
    inv(&mut f, "the last key changed (still sorted)", &root, idx, &e.with("key3", &bytes_field(&k3)), "ROOT_MISMATCH");
    let mut fewer = env.clone();
    fewer.entries.pop();
    inv(&mut f, "last entry dropped (M = 3, still >= ceil(C/2))", &root, idx, &fewer.encode(), "ROOT_MISMATCH");
    inv(
        &mut f,
        "the same chunk from the previous version of the tree",
        &root,
        idx,
        &t.c4_prev.tree.export_chunk(idx).unwrap().encode(),
        "ROOT_MISMATCH",
    );
    inv(&mut f, "a chunk of another tree", &root, idx, &t.c16.tree.export_chunk(1).unwrap().encode(), "ROOT_MISMATCH");
    inv(&mut f, "valid envelope checked against another tree's root", &t.c16.root(), idx, &e.bytes(), "ROOT_MISMATCH");
    inv(
        &mut f,
        "corrupted value and wrong index: the root is checked first",
        &root,
        idx + 1,
        &e.with("value1", &bytes_field(b"value-x")),
        "ROOT_MISMATCH",
    );
    inv(&mut f, "valid chunk, expected index one higher", &root, idx + 1, &e.bytes(), "CHUNK_INDEX_MISMATCH");
    inv(&mut f, "valid chunk, expected index one lower", &root, idx - 1, &e.bytes(), "CHUNK_INDEX_MISMATCH");
    inv(
        &mut f,
        "chunk 0, expected index 1",
        &root,
        1,
        &c4.tree.export_chunk(0).unwrap().encode(),
        "CHUNK_INDEX_MISMATCH",
    );
    inv(&mut f, "valid chunk, expected index 2^32", &root, 1 << 32, &e.bytes(), "CHUNK_INDEX_MISMATCH");
    inv(
        &mut f,
        "wrong index and wrong key_height: the index is checked first",
        &root,
        idx + 1,
        &e.with("key_height", &[kh + 1]),
        "CHUNK_INDEX_MISMATCH",
    );
    inv(
        &mut f,
        "key_height byte one higher, nothing else changed",
        &root,
        idx,
        &e.with("key_height", &[kh + 1]),
        "KEY_HEIGHT_MISMATCH",
    );
    inv(
        &mut f,
        "key_height byte one lower, nothing else changed",
        &root,
        idx,
        &e.with("key_height", &[kh - 1]),
        "KEY_HEIGHT_MISMATCH",
    );
    inv(
        &mut f,
        "key_height byte 48, nothing else changed",
        &root,
        idx,
        &e.with("key_height", &[48]),
        "KEY_HEIGHT_MISMATCH",
    );
    let first = enc_envelope(&c4.tree.export_chunk(0).unwrap());
    inv(
        &mut f,
        "chunk 0 with key_height 1 instead of 0",
        &root,
        0,
        &first.with("key_height", &[1]),
        "KEY_HEIGHT_MISMATCH",
    );
    let single = enc_envelope(&t.one.tree.export_chunk(0).unwrap());
    inv(
        &mut f,
        "single-chunk tree, key_height 1 instead of 0",
        &t.one.root(),
        0,
        &single.with("key_height", &[1]),
        "KEY_HEIGHT_MISMATCH",
    );

    f.require(&[
        ALL_DECODE,
        PATH_CODES,
        &[
            "KEY_EMPTY",
            "KEY_TOO_LONG",
            "VALUE_TOO_LONG",
            "KEYS_NOT_SORTED",
            "CHUNK_INDEX_MISMATCH",
            "KEY_HEIGHT_MISMATCH",
        ],
    ]);
    f
}

// ---------------------------------------------------------------------------

const README: &str = r#"# bpavl test vectors (v1)

Generated, committed, and checked: do not edit by hand. `npm test` regenerates
this directory into a temporary one and fails with
`spec/vectors is stale: run npm run vectors` if a single byte differs. This
README is written by the generator too (it is a string in
`crates/core/examples/gen_vectors.rs`).

```sh
npm run vectors
# = cargo run --release -q -p bpavl-core --example gen_vectors -- --out spec/vectors
```

## How they are made

`crates/core/examples/gen_vectors.rs` builds a few trees from fixed operation
sequences (an inline splitmix64 with fixed seeds; no clock, no hash-map
order), commits them, and takes proofs and chunk envelopes from them with
`bpavl-core`. Invalid cases are made by surgically editing a valid encoding:
the generator splits each encoding into named fields (format, capacity, M,
pos, each key, each path step's flags / counts / hash, ...), asserts that the
fields concatenate to the core encoder's output, and then replaces, truncates
or extends one field, or re-encodes a decoded proof with one field changed.
Before anything is written, every valid case is verified by the core verifier
and its outputs are compared with values computed naively from the sorted
entries, and every invalid case is run through the core verifier, which must
fail with exactly the recorded code. The generator also asserts that each file
covers every error code that applies to its object.

`crates/core/tests/vectors.rs` replays all of this through the public API, and
`crates/core/tests/spec_hasher.rs` recomputes every tree root from
`trees.json` with a stand-alone implementation of `spec/hashing.md` and
`spec/chunk-format.md` (it does not use the tree code).

## Conventions

- All byte strings are lowercase hex (`""` is empty). Numbers are JSON
  integers; every number here is below 2^53.
- Every file has a top-level `description` and a `spec` pointer.
- Proof files have `valid` and `invalid` arrays. An invalid case has the same
  inputs as a valid one, plus `code` (from `spec/errors.md`) and `why`. An
  implementation must fail with exactly `code`: where several checks could
  fail, the spec fixes which runs first, and some cases exist to pin that
  order (e.g. "empty key and an empty proof: inputs are checked first").
- `tree` names the tree in `trees.json` a case was taken from (information
  only; `root` is what a verifier trusts).

## Files

### `trees.json`

`{ description, spec, trees: [tree] }`, each tree:

| field | meaning |
|---|---|
| `name`, `description` | |
| `capacity` | `C` |
| `root` | root hash of the committed tree |
| `chunks`, `entries`, `height` | totals and AVL height of the committed tree |
| `ops` | `["insert", key, value]` / `["remove", key]`, applied in order to `Tree::new(capacity)`, then one commit. The shape depends on this history, so replay it to rebuild the same tree (removing an absent key is a no-op). |
| `final_entries` | `[key, value]` in key order |
| `chunk_list` | per chunk in index order: `{ index, key_height, entries }` |

Cutting `final_entries` by the `entries` counts gives the chunks; the
key-heights give the AVL shape (`spec/chunk-format.md`, the stack algorithm);
with `spec/hashing.md` that reproduces `root`.

### `existence.json` — `verify_existence(root, key, value, proof)`

valid: `{ description, tree, root, key, value, proof, chunk_index, position, chunks, entries }`
(`chunks`, `entries`: the tree's totals).
invalid: `{ root, key, value, proof, code, why }`.

### `absence.json` — `verify_absence(root, key, proof)`

valid: `{ description, tree, root, key, proof, left_key, right_key }`; the
verifier returns nothing, `left_key` / `right_key` (hex or `null`) name the
neighbours in the proof.
invalid: `{ root, key, proof, code, why }`.

### `range.json` — `verify_range(root, start, end, limit, proof)`

`end` is hex or `null` (unbounded); `start` may be `""`.
valid: `{ description, tree, root, start, end, limit, proof, results, complete, resume_key }`,
`results` as `[key, value]` pairs, `resume_key` hex or `null`.
invalid: `{ root, start, end, limit, proof, code, why }`.

### `chunk_proof.json` — `verify_chunk_proof(root, proof)`

valid: `{ tree, root, proof, index, chunks, entries, key_height }`.
invalid: `{ root, proof, code, why }`.

### `chunk_envelope.json` — `verify_chunk(root, index, envelope)`

`index` is the expected index.
valid: `{ tree, root, index, envelope, capacity, key_height, chunks, entries, chunk_entries }`,
`chunk_entries` as `[key, value]` pairs.
invalid: `{ root, index, envelope, code, why }`.
"#;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut out: Option<PathBuf> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = args.next().map(PathBuf::from),
            other => {
                eprintln!("gen_vectors: unknown argument {other:?}\nusage: gen_vectors --out DIR");
                std::process::exit(2);
            }
        }
    }
    let Some(out) = out else {
        eprintln!("usage: gen_vectors --out DIR");
        std::process::exit(2);
    };
    fs::create_dir_all(&out).expect("create the output directory");

    let t = build_trees();
    let trees = [&t.empty, &t.one, &t.five, &t.c3, &t.c4, &t.c16, &t.c256];
    let trees_json = obj(vec![
        (
            "description",
            s("Trees built by replaying ops (insert key value / remove key, hex) on Tree::new(capacity), then committing once. root, chunks, entries and height describe the committed tree; final_entries are its entries in key order; chunk_list gives, per chunk in index order, its key_height and entry count, from which the AVL shape is rebuilt (spec/chunk-format.md, Rebuild)."),
        ),
        ("spec", s("spec/hashing.md; spec/chunk-format.md, Rebuild")),
        ("trees", J::Arr(trees.iter().map(|b| b.json()).collect())),
    ]);
    write(&out, "trees.json", &trees_json);
    for file in [existence(&t), absence(&t), range(&t), chunk_proof(&t), chunk_envelope(&t)] {
        let name = format!("{}.json", file.name);
        write(&out, &name, &file.json());
    }
    fs::write(out.join("README.md"), README).expect("write README.md");
}

fn write(dir: &std::path::Path, name: &str, j: &J) {
    let mut text = String::new();
    j.write(0, &mut text);
    text.push('\n');
    fs::write(dir.join(name), text).unwrap_or_else(|e| panic!("write {name}: {e}"));
}
