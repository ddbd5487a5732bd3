//! Errors with stable codes (`spec/errors.md`). Callers branch on `code()`,
//! which is identical in Rust, WASM and TypeScript; messages are for people.

use thiserror::Error;

/// Why bytes failed to decode, or a proof or chunk failed to verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ProofError {
    /// The input ended before the object did.
    #[error("input is truncated")]
    Truncated,
    /// Bytes are left after the object.
    #[error("trailing bytes after the object")]
    TrailingBytes,
    /// The format byte is not the one this decoder reads.
    #[error("unsupported format byte")]
    FormatUnsupported,
    /// A varint has a redundant trailing zero group.
    #[error("non-canonical varint")]
    VarintNonCanonical,
    /// A varint is longer than 8 bytes or exceeds 2^53 − 1.
    #[error("varint overflow")]
    VarintOverflow,
    /// The capacity is outside 2 … 4096.
    #[error("capacity out of range")]
    CapacityInvalid,
    /// A chunk's entry count is 0 or above the capacity.
    #[error("chunk entry count out of range")]
    ChunkSizeInvalid,
    /// A chunk of a multi-chunk tree holds fewer than ⌈C/2⌉ entries.
    #[error("chunk is under-filled")]
    ChunkFill,
    /// An in-chunk position or range is outside the chunk, or empty.
    #[error("in-chunk position out of range")]
    PositionInvalid,
    /// A key has length 0.
    #[error("empty key")]
    KeyEmpty,
    /// A key is longer than 1024 bytes.
    #[error("key too long")]
    KeyTooLong,
    /// A value is longer than 65536 bytes.
    #[error("value too long")]
    ValueTooLong,
    /// Keys are not strictly increasing.
    #[error("keys are not strictly increasing")]
    KeysNotSorted,
    /// A chunk path has more than 48 steps.
    #[error("chunk path too long")]
    PathTooLong,
    /// A height breaks the AVL rules.
    #[error("invalid height")]
    HeightInvalid,
    /// A sibling count is impossible, or the totals exceed their bounds.
    #[error("invalid count")]
    CountInvalid,
    /// A flags byte has a reserved bit set.
    #[error("reserved flag bits set")]
    FlagsInvalid,
    /// The data does not hash to the trusted root.
    #[error("root mismatch")]
    RootMismatch,
    /// A valid chunk of this tree, but not at the expected index.
    #[error("chunk index mismatch")]
    ChunkIndexMismatch,
    /// The envelope's key-height differs from the authenticated one.
    #[error("key-height mismatch")]
    KeyHeightMismatch,
    /// The neighbours do not prove absence.
    #[error("absence proof does not prove absence")]
    AbsenceInvalid,
    /// The range window is not contiguous, omits entries, or exceeds the limit.
    #[error("range proof window is invalid")]
    RangeInvalid,
    /// A range or multiproof query is malformed.
    #[error("invalid query")]
    QueryInvalid,
    /// A multiproof opens a node with nothing revealed below it, or reveals
    /// an entry no asked key needs.
    #[error("multiproof reveals more than the query needs")]
    MultiproofInvalid,
    /// A catch-up node does not hash to what its parent (or the root) names.
    #[error("node does not match its parent")]
    NodeMismatch,
    /// A chunk's entry-hash list does not give the chunk hash its parent names.
    #[error("entry-hash list does not match its chunk")]
    LeavesMismatch,
    /// An entry does not hash to the entry hash at its position.
    #[error("entry does not match its entry hash")]
    EntryMismatch,
    /// A catch-up node's kinds are not what its height and chunk count allow.
    #[error("node's child kinds do not match its height and chunk count")]
    KindsMismatch,
}

impl ProofError {
    /// The stable code from `spec/errors.md`.
    pub fn code(&self) -> &'static str {
        use ProofError::*;
        match self {
            Truncated => "TRUNCATED",
            TrailingBytes => "TRAILING_BYTES",
            FormatUnsupported => "FORMAT_UNSUPPORTED",
            VarintNonCanonical => "VARINT_NON_CANONICAL",
            VarintOverflow => "VARINT_OVERFLOW",
            CapacityInvalid => "CAPACITY_INVALID",
            ChunkSizeInvalid => "CHUNK_SIZE_INVALID",
            ChunkFill => "CHUNK_FILL",
            PositionInvalid => "POSITION_INVALID",
            KeyEmpty => "KEY_EMPTY",
            KeyTooLong => "KEY_TOO_LONG",
            ValueTooLong => "VALUE_TOO_LONG",
            KeysNotSorted => "KEYS_NOT_SORTED",
            PathTooLong => "PATH_TOO_LONG",
            HeightInvalid => "HEIGHT_INVALID",
            CountInvalid => "COUNT_INVALID",
            FlagsInvalid => "FLAGS_INVALID",
            RootMismatch => "ROOT_MISMATCH",
            ChunkIndexMismatch => "CHUNK_INDEX_MISMATCH",
            KeyHeightMismatch => "KEY_HEIGHT_MISMATCH",
            AbsenceInvalid => "ABSENCE_INVALID",
            RangeInvalid => "RANGE_INVALID",
            QueryInvalid => "QUERY_INVALID",
            MultiproofInvalid => "MULTIPROOF_INVALID",
            NodeMismatch => "NODE_MISMATCH",
            LeavesMismatch => "LEAVES_MISMATCH",
            EntryMismatch => "ENTRY_MISMATCH",
            KindsMismatch => "KINDS_MISMATCH",
        }
    }
}

/// Why a tree operation was refused. The tree is left unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum TreeError {
    /// A key has length 0.
    #[error("empty key")]
    KeyEmpty,
    /// A key is longer than 1024 bytes.
    #[error("key too long")]
    KeyTooLong,
    /// A value is longer than 65536 bytes.
    #[error("value too long")]
    ValueTooLong,
    /// The capacity is outside 2 … 4096.
    #[error("capacity out of range")]
    CapacityInvalid,
    /// An existence proof was asked for an absent key.
    #[error("key not found")]
    KeyNotFound,
    /// An absence proof was asked for a present key.
    #[error("key exists")]
    KeyExists,
    /// A chunk index at or above the committed chunk count.
    #[error("chunk index out of range")]
    ChunkOutOfRange,
    /// An insert would exceed 2^32 − 1 chunks or 2^53 − 1 entries.
    #[error("tree is full")]
    TreeFull,
    /// A range query is malformed.
    #[error("invalid range query")]
    QueryInvalid,
    /// A bulk load was handed a key not above the one before.
    #[error("keys are not strictly increasing")]
    KeysNotSorted,
}

impl TreeError {
    /// The stable code from `spec/errors.md`.
    pub fn code(&self) -> &'static str {
        use TreeError::*;
        match self {
            KeyEmpty => "KEY_EMPTY",
            KeyTooLong => "KEY_TOO_LONG",
            ValueTooLong => "VALUE_TOO_LONG",
            CapacityInvalid => "CAPACITY_INVALID",
            KeyNotFound => "KEY_NOT_FOUND",
            KeyExists => "KEY_EXISTS",
            ChunkOutOfRange => "CHUNK_OUT_OF_RANGE",
            TreeFull => "TREE_FULL",
            QueryInvalid => "QUERY_INVALID",
            KeysNotSorted => "KEYS_NOT_SORTED",
        }
    }
}

/// Why a rebuild could not accept a chunk or finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RebuildError {
    /// The chunk failed verification against the rebuilder's root.
    #[error("chunk rejected: {0}")]
    Chunk(ProofError),
    /// Finish was called while chunks are missing.
    #[error("chunks are missing")]
    Incomplete,
    /// The rebuilt tree does not reproduce the trusted root.
    #[error("rebuilt tree does not match the trusted root")]
    RootMismatch,
}

impl RebuildError {
    /// The stable code from `spec/errors.md`.
    pub fn code(&self) -> &'static str {
        match self {
            RebuildError::Chunk(e) => e.code(),
            RebuildError::Incomplete => "REBUILD_INCOMPLETE",
            RebuildError::RootMismatch => "ROOT_MISMATCH",
        }
    }
}

impl From<ProofError> for RebuildError {
    fn from(e: ProofError) -> Self {
        RebuildError::Chunk(e)
    }
}

/// Why a state-store record was refused (`spec/store-format.md`). Storage is
/// not trusted: a record that fails any check is corrupt, whatever rule it
/// broke, so callers never mistake it for bad input of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum StoreError {
    /// A record is missing, malformed, or does not hash to what its parent names.
    #[error("store record is corrupt")]
    Corrupt,
    /// The version was never committed, or was pruned or rolled back.
    #[error("unknown version")]
    VersionUnknown,
}

impl StoreError {
    /// The stable code from `spec/errors.md`.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Corrupt => "STORE_CORRUPT",
            StoreError::VersionUnknown => "VERSION_UNKNOWN",
        }
    }
}

/// A decoding rule broken by a stored record makes the record corrupt.
impl From<ProofError> for StoreError {
    fn from(_: ProofError) -> Self {
        StoreError::Corrupt
    }
}
