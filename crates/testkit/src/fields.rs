//! Every byte format of `spec/` (the four proofs of `proof-format.md` and
//! the chunk envelope of `chunk-format.md`) as a list of named fields: the
//! core's encoding, split by the field layout of `spec/layout.json`, the one
//! description of the formats that the test tools share (the TypeScript
//! tests read it too). The vector generator patches one field to make an
//! invalid case; the fuzz test takes field boundaries from here for its
//! targeted mutations. A split must consume the encoding exactly, so the
//! layout cannot drift from the core's encoders unnoticed.

use std::collections::HashMap;
use std::sync::OnceLock;

use bpavl_core::codec::put_varint;
use bpavl_core::hash::multiproof_len;
use bpavl_core::{AbsenceProof, ChunkEnvelope, ChunkProof, ExistenceProof, RangeProof};
use serde_json::Value;

use crate::codes::spec_dir;
use crate::sample::Kind;

/// What a field holds, independent of where it sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Format,
    Capacity,
    /// `M`, a chunk's entry count.
    ChunkSize,
    Pos,
    Lo,
    Hi,
    SegCount,
    /// An envelope's `key_height` byte.
    KeyHeight,
    /// An absence proof's neighbour flags.
    AbsenceFlags,
    /// A key as `bytes`: its length varint, then the key.
    Key,
    /// A value as `bytes`: its length varint, then the value.
    Value,
    /// In-chunk hashes, 32 bytes each.
    Hashes,
    ChunkRoot,
    PathLen,
    /// A path step's flags: side bit and parent height.
    StepFlags,
    SibChunks,
    SibEntries,
    SibHash,
}

impl Role {
    /// A role as `spec/layout.json` names it.
    fn from_layout(name: &str) -> Role {
        use Role::*;
        match name {
            "Format" => Format,
            "Capacity" => Capacity,
            "ChunkSize" => ChunkSize,
            "Pos" => Pos,
            "Lo" => Lo,
            "Hi" => Hi,
            "SegCount" => SegCount,
            "KeyHeight" => KeyHeight,
            "AbsenceFlags" => AbsenceFlags,
            "Key" => Key,
            "Value" => Value,
            "Hashes" => Hashes,
            "ChunkRoot" => ChunkRoot,
            "PathLen" => PathLen,
            "StepFlags" => StepFlags,
            "SibChunks" => SibChunks,
            "SibEntries" => SibEntries,
            "SibHash" => SibHash,
            other => panic!("spec/layout.json: role {other}"),
        }
    }

    /// Whether the field is a varint, or starts with one (a key or value length).
    pub fn has_varint(self) -> bool {
        use Role::*;
        matches!(self, Capacity | ChunkSize | Pos | Lo | Hi | SegCount | Key | Value | PathLen | SibChunks | SibEntries)
    }
}

#[derive(Clone, Debug)]
pub struct Field {
    /// Unique in its encoding, e.g. `capacity`, `left.step0.hash`, `seg1.key2`.
    pub name: String,
    pub role: Role,
    pub bytes: Vec<u8>,
}

/// An encoding as an ordered list of named fields.
#[derive(Clone, Debug, Default)]
pub struct Fields(pub Vec<Field>);

/// The canonical varint of `v`.
pub fn varint(v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, v);
    out
}

/// The encoding of `v` with one redundant trailing zero group.
pub fn noncanonical(v: u64) -> Vec<u8> {
    let mut out = varint(v);
    *out.last_mut().expect("a varint has a byte") |= 0x80;
    out.push(0x00);
    out
}

/// `bytes`: the length varint, then `b`.
pub fn bytes_field(b: &[u8]) -> Vec<u8> {
    let mut out = varint(b.len() as u64);
    out.extend_from_slice(b);
    out
}

/// The length in bytes of the varint at the start of `b`.
pub fn varint_len(b: &[u8]) -> usize {
    b.iter().position(|x| x & 0x80 == 0).expect("a complete varint") + 1
}

impl Fields {
    fn push(&mut self, name: impl Into<String>, role: Role, bytes: Vec<u8>) {
        self.0.push(Field { name: name.into(), role, bytes });
    }

    pub fn bytes(&self) -> Vec<u8> {
        Self::join(&self.0)
    }

    pub fn idx(&self, name: &str) -> usize {
        self.0.iter().position(|f| f.name == name).unwrap_or_else(|| panic!("no field {name}"))
    }

    pub fn get(&self, name: &str) -> &[u8] {
        &self.0[self.idx(name)].bytes
    }

    fn join(fields: &[Field]) -> Vec<u8> {
        fields.iter().flat_map(|f| f.bytes.iter().copied()).collect()
    }

    /// Every byte before field `name`.
    pub fn upto(&self, name: &str) -> Vec<u8> {
        Self::join(&self.0[..self.idx(name)])
    }

    /// Every byte after field `name`.
    pub fn after(&self, name: &str) -> Vec<u8> {
        Self::join(&self.0[self.idx(name) + 1..])
    }

    /// The bytes of fields `from` (included) to `to` (excluded).
    pub fn span(&self, from: &str, to: &str) -> Vec<u8> {
        Self::join(&self.0[self.idx(from)..self.idx(to)])
    }

    /// The whole encoding with field `name` replaced by `bytes`.
    pub fn with(&self, name: &str, bytes: &[u8]) -> Vec<u8> {
        [self.upto(name), bytes.to_vec(), self.after(name)].concat()
    }

    /// The whole encoding with several fields replaced, for cases where two
    /// checks fail at once and the spec fixes which one runs first.
    pub fn with_all(&self, patches: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = self.clone();
        for &(name, bytes) in patches {
            let i = out.idx(name);
            out.0[i].bytes = bytes.to_vec();
        }
        out.bytes()
    }

    /// Each field with its byte offset in the encoding.
    pub fn offsets(&self) -> impl Iterator<Item = (usize, &Field)> {
        self.0.iter().scan(0, |off, f| {
            let at = *off;
            *off += f.bytes.len();
            Some((at, f))
        })
    }

    /// The fields of a valid encoding of `kind`, split by `spec/layout.json`
    /// (panics on bytes the layout does not consume exactly).
    pub fn of(kind: Kind, bytes: &[u8]) -> Fields {
        let format = &layout()["formats"][kind.name()];
        assert_eq!(format["byte"].as_u64(), Some(kind.format() as u64), "spec/layout.json: {}", kind.name());
        let mut s = Splitter { bytes, pos: 0, vars: HashMap::new(), out: Fields::default() };
        s.items(&format["fields"], "", &[]);
        assert_eq!(s.pos, bytes.len(), "spec/layout.json does not consume a valid {} encoding", kind.name());
        s.out
    }
}

/// `spec/layout.json`, read once.
fn layout() -> &'static Value {
    static LAYOUT: OnceLock<Value> = OnceLock::new();
    LAYOUT.get_or_init(|| {
        let text = std::fs::read_to_string(spec_dir().join("layout.json")).expect("spec/layout.json");
        serde_json::from_str(&text).expect("spec/layout.json is JSON")
    })
}

/// Reads fields front to back as the layout describes them.
struct Splitter<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// The value of each u8 and varint read, by full name.
    vars: HashMap<String, u64>,
    out: Fields,
}

/// `template` with each `{v}` replaced by the index `v` has in `index`
/// (innermost repeat last; an inner index hides an outer one of its name).
fn fill(template: &str, index: &[(&str, u64)]) -> String {
    index.iter().rev().fold(template.to_string(), |t, (v, k)| t.replace(&format!("{{{v}}}"), &k.to_string()))
}

impl Splitter<'_> {
    fn take(&mut self, n: usize) -> Vec<u8> {
        let b = self.bytes.get(self.pos..self.pos + n).expect("the encoding ends inside a field").to_vec();
        self.pos += n;
        b
    }

    fn varint(&mut self) -> (u64, Vec<u8>) {
        let b = self.take(varint_len(&self.bytes[self.pos..]));
        (b.iter().rev().fold(0, |v, x| v << 7 | u64::from(x & 0x7f)), b)
    }

    /// A number, the value of a field under `prefix`, or two of these
    /// joined by `+` or `-`.
    fn eval(&self, e: &str, prefix: &str) -> u64 {
        if let Some((a, b)) = e.split_once('+') {
            return self.eval(a, prefix) + self.eval(b, prefix);
        }
        if let Some((a, b)) = e.split_once('-') {
            return self.eval(a, prefix) - self.eval(b, prefix);
        }
        let name = format!("{prefix}{e}");
        e.parse()
            .unwrap_or_else(|_| *self.vars.get(&name).unwrap_or_else(|| panic!("spec/layout.json: no field {name}")))
    }

    fn items(&mut self, items: &Value, prefix: &str, index: &[(&str, u64)]) {
        for item in items.as_array().expect("a list of layout items") {
            if let Some(field) = item.as_array() {
                self.field(field, prefix, index);
            } else if let Some(piece) = item["piece"].as_str() {
                self.items(&layout()["pieces"][piece], prefix, index);
            } else if let Some(count) = item["repeat"].as_str() {
                let var = item["as"].as_str().expect("repeat: as");
                for k in 0..self.eval(count, prefix) {
                    let index = [index, &[(var, k)]].concat();
                    let prefix = prefix.to_string() + &fill(item["prefix"].as_str().unwrap_or(""), &index);
                    self.items(&item["body"], &prefix, &index);
                }
            } else if let Some([flags, bit]) = item["if_bit"].as_array().map(Vec::as_slice) {
                let (flags, bit) = (flags.as_str().expect("if_bit: a field"), bit.as_u64().expect("if_bit: a bit"));
                if self.eval(flags, prefix) >> bit & 1 == 1 {
                    let prefix = prefix.to_string() + item["prefix"].as_str().unwrap_or("");
                    self.items(&item["body"], &prefix, index);
                }
            } else {
                panic!("spec/layout.json: unknown item {item}");
            }
        }
    }

    fn field(&mut self, field: &[Value], prefix: &str, index: &[(&str, u64)]) {
        let text = |i: usize| field[i].as_str().expect("a field is [name, type, role, …]");
        let name = prefix.to_string() + &fill(text(0), index);
        let bytes = match text(1) {
            "u8" => {
                let b = self.take(1);
                self.vars.insert(name.clone(), b[0].into());
                b
            }
            "varint" => {
                let (v, b) = self.varint();
                self.vars.insert(name.clone(), v);
                b
            }
            "hash" => self.take(32),
            "bytes" => {
                let (n, mut b) = self.varint();
                b.extend(self.take(n as usize));
                b
            }
            "hashes" => {
                let args: Vec<usize> = field[3]
                    .as_array()
                    .expect("hashes: [M, lo, hi]")
                    .iter()
                    .map(|e| self.eval(e.as_str().expect("an expression"), prefix) as usize)
                    .collect();
                self.take(32 * multiproof_len(args[0], args[1], args[2]))
            }
            other => panic!("spec/layout.json: type {other}"),
        };
        self.out.push(name, Role::from_layout(text(2)), bytes);
    }
}

/// An existence proof (`0x01`): `format capacity M pos hashes path…`.
pub fn existence(pr: &ExistenceProof) -> Fields {
    Fields::of(Kind::Existence, &pr.encode())
}

/// An absence proof (`0x02`): `format capacity flags`, then per neighbour
/// (prefix `left.` / `right.`) `key value M pos hashes path…`.
pub fn absence(pr: &AbsenceProof) -> Fields {
    Fields::of(Kind::Absence, &pr.encode())
}

/// A range proof (`0x03`): `format capacity segments`, then per segment
/// (prefix `seg{i}.`) `M lo hi key{j} value{j}… hashes path…`.
pub fn range(pr: &RangeProof) -> Fields {
    Fields::of(Kind::Range, &pr.encode())
}

/// A chunk proof (`0x04`): `format capacity M chunk_root path…`.
pub fn chunk_proof(pr: &ChunkProof) -> Fields {
    Fields::of(Kind::ChunkProof, &pr.encode())
}

/// A chunk envelope (`0x05`): `format capacity key_height M key{j} value{j}… path…`,
/// a path being `path_len step{i}.flags step{i}.chunks step{i}.entries step{i}.hash…`.
pub fn envelope(env: &ChunkEnvelope) -> Fields {
    Fields::of(Kind::Envelope, &env.encode())
}

/// A raw chunk path from `(flags, sibling chunks, sibling entries)` steps,
/// every sibling hash zero: for paths no tree of the tests has.
pub fn raw_path(steps: &[(u8, u64, u64)]) -> Vec<u8> {
    let mut out = varint(steps.len() as u64);
    for &(flags, c, en) in steps {
        out.push(flags);
        out.extend(varint(c));
        out.extend(varint(en));
        out.extend([0u8; 32]);
    }
    out
}
