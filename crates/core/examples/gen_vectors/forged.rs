//! Chunks that no tree of the vectors has, made up together with the root
//! their paths fold to: a 48-step path (the longest) and a pair of chunks
//! that verify but rebuild into a shape the AVL rules forbid.

use bpavl_core::hash::{chunk_hash, entry_hash, Hash};
use bpavl_core::{ChunkEnvelope, ChunkPath, ChunkProof, Folded, PathStep};
use bpavl_testkit::rng::SplitMix64;

/// Capacity 2: a one-entry chunk fills it enough (⌈2/2⌉ = 1).
const CAPACITY: usize = 2;

fn one_entry(key: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![(key.to_vec(), b"v".to_vec())]
}

fn hash_of(env: &ChunkEnvelope) -> Hash {
    let (k, v) = &env.entries[0];
    chunk_hash(1, &entry_hash(k, v))
}

/// What a verifier must return for `env`, folded by the core.
pub fn fold(env: &ChunkEnvelope) -> Folded {
    env.path.fold(env.capacity, env.entries.len(), hash_of(env))
}

/// The chunk proof of the same chunk as `env`.
pub fn chunk_proof(env: &ChunkEnvelope) -> ChunkProof {
    let (k, v) = &env.entries[0];
    ChunkProof { capacity: env.capacity, chunk_entries: 1, chunk_root: entry_hash(k, v), path: env.path.clone() }
}

/// A one-entry chunk under 48 ancestors, parent heights 1 … 48, siblings on
/// alternate sides (right first), each of one chunk of 2 entries; with the
/// index, totals and key-height counted naively from the steps.
pub fn long_path() -> (ChunkEnvelope, Folded) {
    let mut rng = SplitMix64::new(0x0048_0048);
    let steps: Vec<PathStep> = (1..=48u8)
        .map(|h| PathStep {
            sibling_is_left: h % 2 == 0,
            parent_height: h,
            sibling_chunks: 1,
            sibling_entries: 2,
            sibling_hash: rng.bytes(32).try_into().expect("32 bytes"),
        })
        .collect();
    let left = steps.iter().filter(|s| s.sibling_is_left).count() as u64;
    // The chunk's first key sits in its lowest ancestor that has it on the right.
    let key_height = steps.iter().find(|s| s.sibling_is_left).map_or(0, |s| s.parent_height);
    let env = ChunkEnvelope { capacity: CAPACITY, key_height, entries: one_entry(b"deep"), path: ChunkPath { steps } };
    let folded = fold(&env);
    let want = (left, 49, 1 + 48 * 2, key_height);
    assert_eq!((folded.index, folded.chunk_count, folded.entry_count, folded.key_height), want, "48-step path");
    (env, folded)
}

/// Two one-entry chunks under one inner node of height 2 (the AVL rules
/// make it 1): each envelope verifies against the root, since a path step
/// may rise by 2, but the rebuilt tree breaks the rule `height = 1 + max(child
/// heights)`.
pub fn bad_shape() -> ([ChunkEnvelope; 2], Hash) {
    let step = |sibling_is_left, sibling: &ChunkEnvelope| PathStep {
        sibling_is_left,
        parent_height: 2,
        sibling_chunks: 1,
        sibling_entries: 1,
        sibling_hash: hash_of(sibling),
    };
    let bare = |key: &[u8], key_height| ChunkEnvelope {
        capacity: CAPACITY,
        key_height,
        entries: one_entry(key),
        path: ChunkPath { steps: vec![] },
    };
    let (a, b) = (bare(b"a", 0), bare(b"b", 2));
    let first = ChunkEnvelope { path: ChunkPath { steps: vec![step(false, &b)] }, ..a.clone() };
    let second = ChunkEnvelope { path: ChunkPath { steps: vec![step(true, &a)] }, ..b };
    let root = fold(&first).root;
    assert_eq!(fold(&second).root, root, "both chunks fold to one root");
    ([first, second], root)
}
