//! # bpavl-core
//!
//! The B+AVL tree (Cattaneo, Batista, Pedone): a Merkle AVL tree whose leaves
//! are B+tree-style chunks of up to C sorted entries, each with its own
//! in-chunk hash tree. Per-entry proofs are the in-chunk path followed by the
//! chunk path. Chunks are self-verifiable: a syncing peer checks each one
//! against the trusted root alone, in any order, and rebuilds the identical
//! tree from them.
//!
//! Every byte format is specified in `spec/` at the repository root; this crate
//! implements those specs and has no wasm, file or network dependencies.
#![forbid(unsafe_code)]

mod bulk_load;
mod catchup;
mod chunk;
pub mod codec;
mod envelope;
mod error;
pub mod hash;
mod head;
mod keys;
pub mod limits;
mod load;
mod multiproof;
mod node;
pub mod pages;
pub mod path;
mod persist;
mod proof;
mod prove;
mod rebuild;
pub mod record;
#[cfg(any(test, all(target_arch = "wasm32", target_feature = "simd128")))]
mod sha256x4;
mod subtree;
mod sync_next;
mod sync_store;
mod tree;
mod verify_batch;

mod invariants;

pub use bulk_load::BulkLoad;
pub use catchup::{CatchUp, Fetch};
pub use envelope::{verify_chunk, ChunkEnvelope, VerifiedChunk, FORMAT_CHUNK_ENVELOPE};
pub use error::{ProofError, RebuildError, StoreError, TreeError};
pub use hash::Hash;
pub use load::Loader;
pub use multiproof::{
    check_multiproof_query, sparse_len, verify_multiproof, verify_multiproof_views, MultiNode, Multiproof,
    MultiproofResult, MultiproofViews, RevealedChunk, SingleAnswer, FORMAT_MULTIPROOF, MAX_MULTIPROOF_KEYS,
};
pub use path::{ChunkPath, Folded, PathStep};
pub use persist::WriteSet;
pub use proof::{
    check_range_query, verify_absence, verify_chunk_proof, verify_existence, verify_range, AbsenceProof, AbsenceResult,
    ChunkProof, EntryPosition, EntryWitness, ExistenceProof, Neighbour, ProvenNeighbour, RangeProof, RangeResult,
    Segment, FORMAT_ABSENCE, FORMAT_CHUNK_PROOF, FORMAT_EXISTENCE, FORMAT_RANGE,
};
pub use rebuild::Rebuilder;
pub use subtree::{
    bitmap_positions, positions_bitmap, verify_entries, verify_leaves, verify_subtree, TreePath, VerifiedEntry,
    VerifiedSubtree, WireNode, FORMAT_LEAVES, FORMAT_SUBTREE, MAX_SUBTREE_LEVELS,
};
pub use sync_store::{ChunkWrite, StoreSync, SyncProgress, FORMAT_SYNC_PROGRESS};
pub use tree::{Commit, Entries, Snapshot, Tree};
pub use verify_batch::{verify_existence_batch, ExistenceItem};
