//! A valid encoding of one kind with the context its verifier needs, and the
//! decoder and verifier of each kind behind one call, for sweeps that feed
//! many inputs to every kind.

use bpavl_core::hash::Hash;
use bpavl_core::{
    verify_absence, verify_chunk, verify_chunk_proof, verify_existence, verify_range, AbsenceProof, ChunkEnvelope,
    ChunkProof, ExistenceProof, RangeProof, Rebuilder,
};

/// The five encoded objects of `spec/encoding.md`, in format-byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Existence,
    Absence,
    Range,
    ChunkProof,
    Envelope,
}

pub const KINDS: [Kind; 5] = [Kind::Existence, Kind::Absence, Kind::Range, Kind::ChunkProof, Kind::Envelope];

impl Kind {
    /// The format byte (`spec/encoding.md`).
    pub fn format(self) -> u8 {
        self as u8 + 1
    }

    /// The name that starts a file name in `tests/fuzz-crashers/`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Existence => "existence",
            Kind::Absence => "absence",
            Kind::Range => "range",
            Kind::ChunkProof => "chunkproof",
            Kind::Envelope => "envelope",
        }
    }

    pub fn from_name(s: &str) -> Option<Kind> {
        KINDS.into_iter().find(|k| k.name() == s)
    }

    /// This kind's index in [`KINDS`].
    pub fn idx(self) -> usize {
        self as usize
    }
}

/// The verifier's inputs besides the root and the encoding.
#[derive(Clone, Debug)]
pub enum Ctx {
    Existence { key: Vec<u8>, value: Vec<u8> },
    Absence { key: Vec<u8> },
    Range { start: Vec<u8>, end: Option<Vec<u8>>, limit: usize },
    ChunkProof,
    Envelope { index: u64 },
}

impl Ctx {
    /// The kind of object this context verifies.
    pub fn kind(&self) -> Kind {
        match self {
            Ctx::Existence { .. } => Kind::Existence,
            Ctx::Absence { .. } => Kind::Absence,
            Ctx::Range { .. } => Kind::Range,
            Ctx::ChunkProof => Kind::ChunkProof,
            Ctx::Envelope { .. } => Kind::Envelope,
        }
    }
}

/// A valid encoding, what it was taken for, and what verifies it.
#[derive(Clone, Debug)]
pub struct Sample {
    pub kind: Kind,
    pub what: String,
    pub root: Hash,
    pub ctx: Ctx,
    pub bytes: Vec<u8>,
}

impl Sample {
    pub fn new(what: impl Into<String>, root: Hash, ctx: Ctx, bytes: Vec<u8>) -> Sample {
        Sample { kind: ctx.kind(), what: what.into(), root, ctx, bytes }
    }
}

/// The prefix of a non-code string from [`decode_as`] or a caller's own
/// checks: a test failure, never a code from `spec/errors.md`.
pub const NOT_A_CODE: char = '<';

/// Decodes `input` as `kind`; Ok only if it also re-encodes to `input`
/// (encodings are canonical).
pub fn decode_as(kind: Kind, input: &[u8]) -> Result<(), &'static str> {
    let reencoded = match kind {
        Kind::Existence => ExistenceProof::decode(input).map_err(|e| e.code())?.encode(),
        Kind::Absence => AbsenceProof::decode(input).map_err(|e| e.code())?.encode(),
        Kind::Range => RangeProof::decode(input).map_err(|e| e.code())?.encode(),
        Kind::ChunkProof => ChunkProof::decode(input).map_err(|e| e.code())?.encode(),
        Kind::Envelope => ChunkEnvelope::decode(input).map_err(|e| e.code())?.encode(),
    };
    if reencoded != input {
        return Err("<decoded but re-encodes differently: non-canonical input accepted>");
    }
    Ok(())
}

/// Runs the verifier of `s`'s kind with `s`'s root and context on `input`.
pub fn verify_as(s: &Sample, input: &[u8]) -> Result<(), &'static str> {
    let root = &s.root;
    match &s.ctx {
        Ctx::Existence { key, value } => verify_existence(root, key, value, input).map(drop).map_err(|e| e.code()),
        Ctx::Absence { key } => verify_absence(root, key, input).map(drop).map_err(|e| e.code()),
        Ctx::Range { start, end, limit } => {
            verify_range(root, start, end.as_deref(), *limit, input).map(drop).map_err(|e| e.code())
        }
        Ctx::ChunkProof => verify_chunk_proof(root, input).map(drop).map_err(|e| e.code()),
        Ctx::Envelope { index } => verify_chunk(root, *index, input).map(drop).map_err(|e| e.code()),
    }
}

/// Adds `input` to a fresh rebuilder of `s`'s root at `s`'s index (an
/// envelope sample).
pub fn rebuild_add(s: &Sample, input: &[u8]) -> Result<(), &'static str> {
    let Ctx::Envelope { index } = s.ctx else { panic!("rebuild_add needs an envelope sample") };
    Rebuilder::new(s.root).add(index, input).map(drop).map_err(|e| e.code())
}
