//! # bpavl-baseline
//!
//! The *Baseline* state-sync strategy of the B+AVL paper (§V), against which
//! bpavl's self-verifiable chunks are benchmarked: a Tendermint/IAVL-style
//! Merkle AVL+ tree with **one entry per leaf**, served by traversing the
//! tree into fixed-size chunks that carry **no proofs**.
//!
//! - [`BaselineTree`]: insert (or update), get, `commit()` → root hash.
//!   Leaves hold `(key, value)`; inner nodes hold a copy of the smallest key
//!   of their right subtree, their height, their size and both children's
//!   hashes, as in IAVL.
//! - [`BaselineTree::export_chunks`]: a post-order traversal (IAVL's export
//!   order) emits one record per node; records are packed into chunks of
//!   about `chunk_bytes`.
//! - [`Importer`]: the client applies the chunks **in order**, node by node,
//!   and only [`Importer::finish`] yields a root to compare with the trusted
//!   one. A lying peer is therefore detected only once every chunk is in, and
//!   it cannot be told which chunk was bad.
//!
//! The hashing and record formats are in this crate's `README.md`.
#![forbid(unsafe_code)]

mod export;
mod tree;

pub use export::Importer;
pub use tree::BaselineTree;

use thiserror::Error;

/// A SHA-256 digest.
pub type Hash = [u8; 32];

/// Longest key, in bytes (as in bpavl). Keys are never empty.
pub const MAX_KEY_LEN: usize = 1024;
/// Longest value, in bytes (as in bpavl).
pub const MAX_VALUE_LEN: usize = 65536;
/// Highest node accepted on import; an AVL tree this high holds more than
/// 2^43 entries.
pub const MAX_HEIGHT: u8 = 64;
/// Default chunk size: about one bpavl chunk envelope at the default
/// capacity (C = 256, 512-byte values).
pub const DEFAULT_CHUNK_BYTES: usize = 100 * 1024;

/// Why an insert or an import failed. Callers branch on [`Error::code`],
/// whose strings follow `spec/errors.md` where a code already exists there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Error {
    /// A chunk is empty, or ends inside a record.
    #[error("input is truncated")]
    Truncated,
    /// A varint is longer than 9 bytes.
    #[error("varint overflow")]
    VarintOverflow,
    /// A key has length 0.
    #[error("empty key")]
    KeyEmpty,
    /// A key is longer than [`MAX_KEY_LEN`].
    #[error("key too long")]
    KeyTooLong,
    /// A value is longer than [`MAX_VALUE_LEN`].
    #[error("value too long")]
    ValueTooLong,
    /// Leaf keys are not strictly increasing.
    #[error("keys are not strictly increasing")]
    KeysNotSorted,
    /// A height is above [`MAX_HEIGHT`], is not one more than the higher
    /// child's, or the children's heights differ by more than one.
    #[error("invalid height")]
    HeightInvalid,
    /// An inner node's size is not the sum of its children's.
    #[error("invalid size")]
    CountInvalid,
    /// An inner node's key is not the smallest key of its right subtree.
    #[error("inner key is not the smallest key of the right subtree")]
    InnerKeyInvalid,
    /// An inner node has fewer than two pending subtrees to adopt, or more
    /// pending subtrees are open than a valid tree can have.
    #[error("records do not form a tree")]
    StructureInvalid,
    /// `finish` was called before the stream closed to a single tree.
    #[error("import is incomplete")]
    RebuildIncomplete,
}

impl Error {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Truncated => "TRUNCATED",
            Error::VarintOverflow => "VARINT_OVERFLOW",
            Error::KeyEmpty => "KEY_EMPTY",
            Error::KeyTooLong => "KEY_TOO_LONG",
            Error::ValueTooLong => "VALUE_TOO_LONG",
            Error::KeysNotSorted => "KEYS_NOT_SORTED",
            Error::HeightInvalid => "HEIGHT_INVALID",
            Error::CountInvalid => "COUNT_INVALID",
            Error::InnerKeyInvalid => "INNER_KEY_INVALID",
            Error::StructureInvalid => "STRUCTURE_INVALID",
            Error::RebuildIncomplete => "REBUILD_INCOMPLETE",
        }
    }
}

/// Checks a key and a value against the limits.
fn check_entry(key: &[u8], value: &[u8]) -> Result<(), Error> {
    if key.is_empty() {
        Err(Error::KeyEmpty)
    } else if key.len() > MAX_KEY_LEN {
        Err(Error::KeyTooLong)
    } else if value.len() > MAX_VALUE_LEN {
        Err(Error::ValueTooLong)
    } else {
        Ok(())
    }
}

/// Appends `v` as an unsigned LEB128 varint.
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
