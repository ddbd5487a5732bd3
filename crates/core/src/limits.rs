//! Limits from `spec/encoding.md`. Every decoder and every tree operation
//! enforces them; nothing larger is ever accepted or allocated.

/// Longest key, in bytes. Keys are never empty.
pub const MAX_KEY_LEN: usize = 1024;
/// Longest value, in bytes.
pub const MAX_VALUE_LEN: usize = 65536;
/// Smallest chunk capacity.
pub const MIN_CAPACITY: usize = 2;
/// Largest chunk capacity.
pub const MAX_CAPACITY: usize = 4096;
/// Default chunk capacity, as in the paper's evaluation.
pub const DEFAULT_CAPACITY: usize = 256;
/// Highest inner node; enough for any AVL tree with fewer than 2^32 chunks.
pub const MAX_HEIGHT: u8 = 48;
/// Most chunks in a tree.
pub const MAX_CHUNKS: u64 = (1 << 32) - 1;
/// Most entries in a tree (exact in a JavaScript number).
pub const MAX_ENTRIES: u64 = (1 << 53) - 1;
/// Largest `limit` of a range query.
pub const MAX_RANGE_LIMIT: usize = 65536;

/// The fewest entries a chunk of a multi-chunk tree holds: ⌈C/2⌉.
pub const fn min_fill(capacity: usize) -> usize {
    capacity.div_ceil(2)
}
