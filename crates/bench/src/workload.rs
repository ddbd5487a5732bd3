//! The standard peer workload, byte for byte the one used to compare bpavl
//! with IAVL, JMT and @ethereumjs/mpt:
//!
//! - `key_i = SHA-256(u64be(i))`;
//! - `value_i = u64be(i) ‖ first 504 bytes of (B_0 ‖ … ‖ B_15)` with
//!   `B_j = SHA-256(key_i ‖ u8(j))`, so every value is 512 bytes;
//! - entries are inserted in ascending `i`;
//! - lookups on every 10th `i`, existence proofs for `i < min(N, 10000)`;
//! - absent keys `SHA-256(u64be(N + j))` for `j < 1000`.

use std::ops::Range;

use sha2::{Digest, Sha256};

/// Key length in bytes.
pub const KEY_LEN: usize = 32;
/// Value length in bytes.
pub const VALUE_LEN: usize = 512;
/// Lookups are made on every `LOOKUP_STRIDE`-th entry.
pub const LOOKUP_STRIDE: usize = 10;
/// Existence proofs are made for the first `MAX_PROVED` entries.
pub const MAX_PROVED: usize = 10_000;
/// Number of absent keys proved.
pub const ABSENT_KEYS: usize = 1_000;

pub type Key = [u8; KEY_LEN];

/// `SHA-256(u64be(i))`.
pub fn key(i: u64) -> Key {
    Sha256::digest(i.to_be_bytes()).into()
}

/// Writes `value_i` (for `key = key(i)`) into `out`.
pub fn write_value(i: u64, key: &Key, out: &mut [u8; VALUE_LEN]) {
    out[..8].copy_from_slice(&i.to_be_bytes());
    let mut block = [0u8; KEY_LEN + 1];
    block[..KEY_LEN].copy_from_slice(key);
    // 8 + 16·32 = 520 bytes would overflow by 8: the last block is cut.
    for (j, dst) in out[8..].chunks_mut(32).enumerate() {
        block[KEY_LEN] = j as u8;
        let b: [u8; 32] = Sha256::digest(block).into();
        dst.copy_from_slice(&b[..dst.len()]);
    }
}

/// `value_i`.
#[cfg(test)]
pub fn value(i: u64) -> [u8; VALUE_LEN] {
    let mut out = [0u8; VALUE_LEN];
    write_value(i, &key(i), &mut out);
    out
}

/// The first `n` entries of the workload, stored flat (no per-entry allocation).
pub struct Workload {
    keys: Vec<Key>,
    values: Vec<u8>,
}

impl Workload {
    /// Generates entries `0 … n−1`, spread over the available cores.
    pub fn generate(n: usize) -> Workload {
        let mut keys = vec![[0u8; KEY_LEN]; n];
        let mut values = vec![0u8; n * VALUE_LEN];
        let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
        let per_thread = n.div_ceil(threads).max(1);
        std::thread::scope(|s| {
            let key_parts = keys.chunks_mut(per_thread);
            let value_parts = values.chunks_mut(per_thread * VALUE_LEN);
            for (t, (ks, vs)) in key_parts.zip(value_parts).enumerate() {
                s.spawn(move || fill(t * per_thread, ks, vs));
            }
        });
        Workload { keys, values }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn key(&self, i: usize) -> &[u8] {
        &self.keys[i]
    }

    pub fn value(&self, i: usize) -> &[u8] {
        &self.values[i * VALUE_LEN..(i + 1) * VALUE_LEN]
    }

    /// `(key_i, value_i)` for `i` in `range`.
    pub fn entries(&self, range: Range<usize>) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        range.map(move |i| (self.key(i), self.value(i)))
    }

    /// SHA-256 over `key_0 ‖ value_0 ‖ key_1 ‖ value_1 ‖ …`: identifies the workload.
    pub fn sha256(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        for (k, v) in self.entries(0..self.len()) {
            h.update(k);
            h.update(v);
        }
        h.finalize().into()
    }

    /// The entries looked up: every `LOOKUP_STRIDE`-th.
    pub fn lookup_indices(&self) -> Vec<usize> {
        (0..self.len()).step_by(LOOKUP_STRIDE).collect()
    }

    /// The entries given existence proofs: `i < min(N, MAX_PROVED)`.
    pub fn proved_indices(&self) -> Range<usize> {
        0..self.len().min(MAX_PROVED)
    }

    /// Keys not in the workload: `SHA-256(u64be(N + j))` for `j < ABSENT_KEYS`.
    pub fn absent_keys(&self) -> Vec<Key> {
        (0..ABSENT_KEYS as u64).map(|j| key(self.len() as u64 + j)).collect()
    }
}

/// Fills entries `first …` into the slices (one thread's share).
fn fill(first: usize, keys: &mut [Key], values: &mut [u8]) {
    for (off, (k, v)) in keys.iter_mut().zip(values.chunks_exact_mut(VALUE_LEN)).enumerate() {
        let i = (first + off) as u64;
        *k = key(i);
        write_value(i, k, v.try_into().expect("VALUE_LEN chunk"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha256_hex(data: &[u8]) -> String {
        hex::encode(Sha256::digest(data))
    }

    fn assert_prefix_suffix(hex: &str, prefix: &str, suffix: &str) {
        assert!(hex.starts_with(prefix) && hex.ends_with(suffix), "{hex} is not {prefix}…{suffix}");
    }

    #[test]
    fn key_0_matches_check_value() {
        assert_prefix_suffix(&hex::encode(key(0)), "af5570f5", "e83dfc");
    }

    #[test]
    fn value_0_matches_check_value() {
        let v = value(0);
        assert_eq!(v.len(), 512);
        assert_eq!(&v[..8], &[0u8; 8]);
        assert_prefix_suffix(&sha256_hex(&v), "94c8c3c3", "364fdda6");
    }

    #[test]
    fn value_layout_follows_the_formula() {
        let i = 7u64;
        let k = key(i);
        let mut blocks = Vec::new();
        for j in 0..16u8 {
            let mut pre = k.to_vec();
            pre.push(j);
            blocks.extend_from_slice(&Sha256::digest(&pre));
        }
        let mut expected = i.to_be_bytes().to_vec();
        expected.extend_from_slice(&blocks[..504]);
        assert_eq!(value(i).to_vec(), expected);
    }

    #[test]
    fn generated_entries_match_the_single_entry_functions() {
        // 37 is not a multiple of the thread count: exercises uneven splits.
        let w = Workload::generate(37);
        assert_eq!(w.len(), 37);
        for i in 0..37 {
            assert_eq!(w.key(i), &key(i as u64));
            assert_eq!(w.value(i), &value(i as u64));
        }
    }

    #[test]
    fn empty_workload() {
        let w = Workload::generate(0);
        assert!(w.is_empty());
        assert_eq!(hex::encode(w.sha256()), sha256_hex(b""));
    }

    // packages/peer/test/workload.test.ts pins the same 10k digest for the TS
    // generator (packages/peer/src/workload.ts): both make one workload.
    #[test]
    fn workload_sha256_10k() {
        let w = Workload::generate(10_000);
        assert_eq!(hex::encode(w.sha256()), WORKLOAD_SHA256_10K);
    }

    #[test]
    fn workload_sha256_100k() {
        let w = Workload::generate(100_000);
        assert_eq!(hex::encode(w.sha256()), WORKLOAD_SHA256_100K);
    }

    const WORKLOAD_SHA256_10K: &str = "d6b575d7b8eba603e94780e8242d3285d44e68cb4a4838368cad86b13077df6b";
    const WORKLOAD_SHA256_100K: &str = "a7e7b2cfbceaec5ccf7aec1277ad9ab188203d58d3573af162be22e67b51f795";

    #[test]
    fn query_sets() {
        let w = Workload::generate(25);
        assert_eq!(w.lookup_indices(), vec![0, 10, 20]);
        assert_eq!(w.proved_indices(), 0..25);
        let absent = w.absent_keys();
        assert_eq!(absent.len(), ABSENT_KEYS);
        assert_eq!(absent[0], key(25));
        assert_eq!(absent[999], key(25 + 999));
        let big = Workload { keys: vec![[0; 32]; 20_000], values: Vec::new() };
        assert_eq!(big.proved_indices(), 0..MAX_PROVED);
    }
}
