//! What every vector file shares: the JSON helpers, the file with its
//! checked invalid cases, and the decoding cases of the header and of a
//! chunk path, made by patching one field of a valid encoding.

use std::collections::BTreeSet;

use bpavl_core::limits::min_fill;
use bpavl_core::{ChunkPath, ProofError, RebuildError, TreeError};
use bpavl_testkit::fields::{noncanonical, raw_path, varint, Fields};
use serde_json::{json, Value};

/// A hex string.
pub fn h(x: &[u8]) -> Value {
    json!(hex::encode(x))
}
/// A hex string, or `null`.
pub fn oh(x: Option<&[u8]>) -> Value {
    x.map_or(Value::Null, h)
}
pub fn s(x: &str) -> Value {
    json!(x)
}
pub fn n(x: u64) -> Value {
    json!(x)
}
/// Entries as `[key, value]` hex pairs.
pub fn kv(entries: &[(Vec<u8>, Vec<u8>)]) -> Value {
    entries.iter().map(|(k, v)| json!([hex::encode(k), hex::encode(v)])).collect()
}
/// An object whose keys keep this order.
pub fn obj(fields: Vec<(&str, Value)>) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

pub fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// `b` with its last bit flipped.
pub fn flip_last(b: &[u8]) -> Vec<u8> {
    let mut b = b.to_vec();
    *b.last_mut().expect("a non-empty field") ^= 0x01;
    b
}

pub const ALL_DECODE: &[&str] = &[
    "TRUNCATED",
    "TRAILING_BYTES",
    "FORMAT_UNSUPPORTED",
    "VARINT_NON_CANONICAL",
    "VARINT_OVERFLOW",
    "CAPACITY_INVALID",
];
pub const PATH_CODES: &[&str] =
    &["CHUNK_SIZE_INVALID", "CHUNK_FILL", "PATH_TOO_LONG", "HEIGHT_INVALID", "COUNT_INVALID", "ROOT_MISMATCH"];

/// An error with a stable code from `spec/errors.md`.
pub trait Coded: std::fmt::Debug {
    fn code(&self) -> &'static str;
}

impl Coded for ProofError {
    fn code(&self) -> &'static str {
        ProofError::code(self)
    }
}

impl Coded for RebuildError {
    fn code(&self) -> &'static str {
        RebuildError::code(self)
    }
}

impl Coded for TreeError {
    fn code(&self) -> &'static str {
        TreeError::code(self)
    }
}

pub struct VectorFile {
    pub name: &'static str,
    pub description: &'static str,
    pub spec: &'static str,
    pub valid: Vec<Value>,
    pub invalid: Vec<Value>,
    pub codes: BTreeSet<&'static str>,
}

impl VectorFile {
    pub fn new(name: &'static str, description: &'static str, spec: &'static str) -> Self {
        VectorFile { name, description, spec, valid: Vec::new(), invalid: Vec::new(), codes: BTreeSet::new() }
    }

    /// Records an invalid case after checking that `result` is exactly `code`.
    pub fn invalid<T: std::fmt::Debug, E: Coded>(
        &mut self,
        why: &str,
        result: Result<T, E>,
        code: &'static str,
        mut fields: Vec<(&str, Value)>,
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

    pub fn require(&self, codes: &[&[&str]]) {
        for &c in codes.iter().flat_map(|c| c.iter()) {
            assert!(self.codes.contains(c), "{}: no invalid case with code {c}", self.name);
        }
    }

    pub fn json(self) -> Value {
        obj(vec![
            ("description", s(self.description)),
            ("spec", s(self.spec)),
            ("valid", Value::Array(self.valid)),
            ("invalid", Value::Array(self.invalid)),
        ])
    }
}

/// Decoding cases every object shares: empty input, format byte, capacity
/// varint, truncation and trailing bytes, and that decoding fails before the
/// root is compared. `(why, bytes, code)`.
pub fn header_cases(e: &Fields, format: u8, capacity: usize) -> Vec<(String, Vec<u8>, &'static str)> {
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
        ("last byte flipped (in the last sibling hash)".into(), flip_last(&b), "ROOT_MISMATCH"),
        (
            "last byte flipped and one byte appended: decoding fails before the root is compared".into(),
            cat(&[&flip_last(&b), &[0]]),
            "TRAILING_BYTES",
        ),
        (
            "capacity varint of 7 continuation bytes, then the end of input".into(),
            cat(&[&[format], &[0x80; 7]]),
            "TRUNCATED",
        ),
        (
            "capacity varint of 8 continuation bytes, then the end of input: the 8th byte's continuation bit fails before the read past the end".into(),
            cat(&[&[format], &[0x80; 8]]),
            "VARINT_OVERFLOW",
        ),
    ]
}

/// Cases on one chunk path, whose fields carry the prefix `p` in `e`.
/// `path` is the decoded path, `capacity` the tree's. `(why, bytes, code)`.
pub fn path_cases(e: &Fields, p: &str, path: &ChunkPath, capacity: usize) -> Vec<(String, Vec<u8>, &'static str)> {
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
    // Rules that only one check catches, and check orders.
    let side0 = flags0 & 0x80;
    let side1 = e.get(&f("step1.flags"))[0] & 0x80;
    v.push((
        format!("{p}first step: parent height 3, the second step 1 above it (only the +2 rule catches it)"),
        replace_path(&raw_path(&[(side0 | 3, 1, c), (side1 | 4, 1, c)])),
        "HEIGHT_INVALID",
    ));
    v.push((
        format!("{p}first step: parent height 0 and 0 sibling chunks: the height is checked before the counts"),
        e.with_all(&[(&f("step0.flags"), &[side0]), (&f("step0.chunks"), &[0])]),
        "HEIGHT_INVALID",
    ));
    v.push((
        format!(
            "{p}first sibling has 0 chunks and 0 entries (the entry bounds hold: only the non-zero rule catches it)"
        ),
        e.with_all(&[(&f("step0.chunks"), &[0]), (&f("step0.entries"), &[0])]),
        "COUNT_INVALID",
    ));
    v.push((
        format!(
            "{p}a sibling of 2^32 - 1 chunks, then the end of input: the totals are checked after sib_entries is read"
        ),
        cat(&[&e.upto(&f("step0.chunks")), &varint((1 << 32) - 1)]),
        "TRUNCATED",
    ));
    v
}
