//! Every byte format of `spec/` (the four proofs of `proof-format.md` and
//! the chunk envelope of `chunk-format.md`) written once as a list of named
//! fields. The vector generator patches one field to make an invalid case;
//! the fuzz test takes field boundaries from here for its targeted
//! mutations. Each encoder asserts that its fields concatenate to the core
//! encoder's bytes, so the two can never drift apart.

use bpavl_core::codec::put_varint;
use bpavl_core::{AbsenceProof, ChunkEnvelope, ChunkPath, ChunkProof, EntryWitness, ExistenceProof, RangeProof};

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
        self.0.iter().flat_map(|f| f.bytes.iter().copied()).collect()
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

    /// The fields of a valid encoding of `kind` (panics on invalid bytes).
    pub fn of(kind: Kind, bytes: &[u8]) -> Fields {
        let what = kind.name();
        let fields = match kind {
            Kind::Existence => existence(&ExistenceProof::decode(bytes).unwrap_or_else(|e| panic!("{what}: {e:?}"))),
            Kind::Absence => absence(&AbsenceProof::decode(bytes).unwrap_or_else(|e| panic!("{what}: {e:?}"))),
            Kind::Range => range(&RangeProof::decode(bytes).unwrap_or_else(|e| panic!("{what}: {e:?}"))),
            Kind::ChunkProof => chunk_proof(&ChunkProof::decode(bytes).unwrap_or_else(|e| panic!("{what}: {e:?}"))),
            Kind::Envelope => envelope(&ChunkEnvelope::decode(bytes).unwrap_or_else(|e| panic!("{what}: {e:?}"))),
        };
        assert_eq!(fields.bytes(), bytes, "the {what} decoder accepted a non-canonical encoding");
        fields
    }

    fn path(&mut self, p: &str, path: &ChunkPath) {
        self.push(format!("{p}path_len"), Role::PathLen, varint(path.steps.len() as u64));
        for (i, st) in path.steps.iter().enumerate() {
            let flags = ((st.sibling_is_left as u8) << 7) | st.parent_height;
            self.push(format!("{p}step{i}.flags"), Role::StepFlags, vec![flags]);
            self.push(format!("{p}step{i}.chunks"), Role::SibChunks, varint(st.sibling_chunks));
            self.push(format!("{p}step{i}.entries"), Role::SibEntries, varint(st.sibling_entries));
            self.push(format!("{p}step{i}.hash"), Role::SibHash, st.sibling_hash.to_vec());
        }
    }

    fn witness(&mut self, p: &str, w: &EntryWitness) {
        self.push(format!("{p}M"), Role::ChunkSize, varint(w.chunk_entries as u64));
        self.push(format!("{p}pos"), Role::Pos, varint(w.position as u64));
        self.push(format!("{p}hashes"), Role::Hashes, w.inchunk.concat());
        self.path(p, &w.path);
    }

    fn header(format: u8, capacity: usize) -> Fields {
        let mut e = Fields::default();
        e.push("format", Role::Format, vec![format]);
        e.push("capacity", Role::Capacity, varint(capacity as u64));
        e
    }
}

/// An existence proof (`0x01`): `format capacity M pos hashes path…`.
pub fn existence(pr: &ExistenceProof) -> Fields {
    let mut e = Fields::header(0x01, pr.capacity);
    e.witness("", &pr.witness);
    assert_eq!(e.bytes(), pr.encode(), "field encoder disagrees with ExistenceProof::encode");
    e
}

/// An absence proof (`0x02`): `format capacity flags`, then per neighbour
/// (prefix `left.` / `right.`) `key value M pos hashes path…`.
pub fn absence(pr: &AbsenceProof) -> Fields {
    let mut e = Fields::header(0x02, pr.capacity);
    e.push("flags", Role::AbsenceFlags, vec![pr.left.is_some() as u8 | (pr.right.is_some() as u8) << 1]);
    for (p, nb) in [("left.", &pr.left), ("right.", &pr.right)] {
        if let Some(nb) = nb {
            e.push(format!("{p}key"), Role::Key, bytes_field(&nb.key));
            e.push(format!("{p}value"), Role::Value, bytes_field(&nb.value));
            e.witness(p, &nb.witness);
        }
    }
    assert_eq!(e.bytes(), pr.encode(), "field encoder disagrees with AbsenceProof::encode");
    e
}

/// A range proof (`0x03`): `format capacity segments`, then per segment
/// (prefix `seg{i}.`) `M lo hi key{j} value{j}… hashes path…`.
pub fn range(pr: &RangeProof) -> Fields {
    let mut e = Fields::header(0x03, pr.capacity);
    e.push("segments", Role::SegCount, varint(pr.segments.len() as u64));
    for (i, sg) in pr.segments.iter().enumerate() {
        let p = format!("seg{i}.");
        e.push(format!("{p}M"), Role::ChunkSize, varint(sg.chunk_entries as u64));
        e.push(format!("{p}lo"), Role::Lo, varint(sg.lo as u64));
        e.push(format!("{p}hi"), Role::Hi, varint((sg.lo + sg.entries.len()) as u64));
        for (j, (k, v)) in sg.entries.iter().enumerate() {
            e.push(format!("{p}key{j}"), Role::Key, bytes_field(k));
            e.push(format!("{p}value{j}"), Role::Value, bytes_field(v));
        }
        e.push(format!("{p}hashes"), Role::Hashes, sg.inchunk.concat());
        e.path(&p, &sg.path);
    }
    assert_eq!(e.bytes(), pr.encode(), "field encoder disagrees with RangeProof::encode");
    e
}

/// A chunk proof (`0x04`): `format capacity M chunk_root path…`.
pub fn chunk_proof(pr: &ChunkProof) -> Fields {
    let mut e = Fields::header(0x04, pr.capacity);
    e.push("M", Role::ChunkSize, varint(pr.chunk_entries as u64));
    e.push("chunk_root", Role::ChunkRoot, pr.chunk_root.to_vec());
    e.path("", &pr.path);
    assert_eq!(e.bytes(), pr.encode(), "field encoder disagrees with ChunkProof::encode");
    e
}

/// A chunk envelope (`0x05`): `format capacity key_height M key{j} value{j}… path…`.
pub fn envelope(env: &ChunkEnvelope) -> Fields {
    let mut e = Fields::header(0x05, env.capacity);
    e.push("key_height", Role::KeyHeight, vec![env.key_height]);
    e.push("M", Role::ChunkSize, varint(env.entries.len() as u64));
    for (j, (k, v)) in env.entries.iter().enumerate() {
        e.push(format!("key{j}"), Role::Key, bytes_field(k));
        e.push(format!("value{j}"), Role::Value, bytes_field(v));
    }
    e.path("", &env.path);
    assert_eq!(e.bytes(), env.encode(), "field encoder disagrees with ChunkEnvelope::encode");
    e
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
