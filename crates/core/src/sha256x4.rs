//! Many SHA-256 digests at once, four messages side by side in the lanes of
//! one 128-bit vector.
//!
//! A single SHA-256 is one long dependency chain, so in WebAssembly its speed
//! is bound by that chain whatever the code looks like; the four lanes of
//! simd128 run four independent chains for little more than the cost of one
//! (figures: packages/bpavl-wasm/README.md, "Speed"). Verifying a chunk
//! is mostly independent hashes (its entries, then each level of its in-chunk
//! tree), so wasm32 builds with simd128 hash those here. Native builds keep
//! `sha2`, which uses the CPU's SHA instructions; they compile this module
//! only for its tests, on a portable stand-in for the vector type.

use crate::hash::Hash;

/// Work for the lanes: jobs, each a chain of messages in which every message
/// after the first may embed the digest of the one before (a proof's fold).
pub(crate) trait Jobs {
    fn count(&self) -> usize;
    /// Writes message `step` of job `job` into `out`, unpadded (`prev` is the
    /// digest of message `step − 1`), or returns false when the job has no
    /// such message: `prev` is then the job's result. Step 0 always exists.
    fn message(&self, job: usize, step: usize, prev: &Hash, out: &mut Vec<u8>) -> bool;
}

/// The result of every job, in order. Each lane takes the next job as soon as
/// its own is done, so jobs of different lengths mix freely.
pub(crate) fn run<J: Jobs + ?Sized>(jobs: &J) -> Vec<Hash> {
    struct Lane {
        job: usize,
        step: usize,
        /// The current message, padded to whole blocks.
        message: Vec<u8>,
        at: usize,
    }
    let count = jobs.count();
    let mut out = vec![[0u8; 32]; count];
    let mut next = 0;
    let mut start = |lane: &mut Lane| -> bool {
        if next == count {
            return false;
        }
        (lane.job, lane.step, lane.at) = (next, 0, 0);
        next += 1;
        lane.message.clear();
        assert!(jobs.message(lane.job, 0, &[0; 32], &mut lane.message), "every job has a first message");
        pad(&mut lane.message);
        true
    };
    let mut lanes: [Option<Lane>; 4] = std::array::from_fn(|_| {
        let mut lane = Lane { job: 0, step: 0, message: Vec::with_capacity(128), at: 0 };
        start(&mut lane).then_some(lane)
    });
    let mut state = IV.map(lanes::splat);
    const IDLE: [u8; 64] = [0; 64];
    while lanes.iter().any(Option::is_some) {
        let blocks = lanes.each_ref().map(|lane| match lane {
            Some(l) => l.message[l.at..l.at + 64].try_into().expect("64 bytes"),
            None => &IDLE,
        });
        compress4(&mut state, blocks);
        for (j, slot) in lanes.iter_mut().enumerate() {
            let Some(lane) = slot else { continue };
            lane.at += 64;
            if lane.at < lane.message.len() {
                continue;
            }
            let mut digest = [0u8; 32];
            for (i, word) in state.iter_mut().enumerate() {
                digest[4 * i..4 * i + 4].copy_from_slice(&lanes::get(*word, j).to_be_bytes());
                *word = lanes::set(*word, j, IV[i]);
            }
            lane.step += 1;
            lane.message.clear();
            lane.at = 0;
            if jobs.message(lane.job, lane.step, &digest, &mut lane.message) {
                pad(&mut lane.message);
                continue;
            }
            out[lane.job] = digest;
            if !start(lane) {
                *slot = None;
            }
        }
    }
    out
}

/// Appends SHA-256 padding: 0x80, zeros, the bit length as u64be.
fn pad(message: &mut Vec<u8>) {
    let bits = (message.len() as u64) * 8;
    message.push(0x80);
    message.resize((message.len() + 8).div_ceil(64) * 64 - 8, 0);
    message.extend_from_slice(&bits.to_be_bytes());
}

/// The digests of `count` independent messages, message `i` written into
/// its (empty) buffer by `write(i, buffer)`: one-step jobs.
pub(crate) fn digests(count: usize, write: impl Fn(usize, &mut Vec<u8>)) -> Vec<Hash> {
    struct Each<F>(usize, F);
    impl<F: Fn(usize, &mut Vec<u8>)> Jobs for Each<F> {
        fn count(&self) -> usize {
            self.0
        }
        fn message(&self, job: usize, step: usize, _prev: &Hash, out: &mut Vec<u8>) -> bool {
            if step == 0 {
                (self.1)(job, out);
            }
            step == 0
        }
    }
    run(&Each(count, write))
}

const IV: [u32; 8] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
    0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
    0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
    0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
];

/// The round constants, each in all four lanes.
const K4: [lanes::U32x4; 64] = {
    let mut k4 = [lanes::splat_const(0); 64];
    let mut i = 0;
    while i < 64 {
        k4[i] = lanes::splat_const(K[i]);
        i += 1;
    }
    k4
};

/// Sixteen rounds over the schedule words, the working variables renamed
/// round by round instead of moved.
macro_rules! rounds16 {
    ($round:ident, $k:expr, [$($w:ident),*], [$($v:ident),*]) => {
        rounds16!(@go $round, $k, 0, [$($w),*], [$($v),*]);
    };
    (@go $round:ident, $k:expr, $i:expr, [], [$($v:ident),*]) => {};
    (@go $round:ident, $k:expr, $i:expr, [$w:ident $(, $rest:ident)*],
        [$a:ident, $b:ident, $c:ident, $d:ident, $e:ident, $f:ident, $g:ident, $h:ident]) => {
        $round!($a, $b, $c, $d, $e, $f, $g, $h, $k[$i], $w);
        rounds16!(@go $round, $k, $i + 1, [$($rest),*], [$h, $a, $b, $c, $d, $e, $f, $g]);
    };
}

/// One SHA-256 compression of four blocks, one per lane.
fn compress4(state: &mut [lanes::U32x4; 8], blocks: [&[u8; 64]; 4]) {
    use lanes::*;
    let rotr = |x: U32x4, n: u32| or(shr(x, n), shl(x, 32 - n));
    let w = |i: usize| load_be(blocks, i);
    let (mut w0, mut w1, mut w2, mut w3, mut w4, mut w5, mut w6, mut w7) =
        (w(0), w(1), w(2), w(3), w(4), w(5), w(6), w(7));
    let (mut w8, mut w9, mut w10, mut w11, mut w12, mut w13, mut w14, mut w15) =
        (w(8), w(9), w(10), w(11), w(12), w(13), w(14), w(15));
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
    macro_rules! round {
        ($a:ident, $b:ident, $c:ident, $d:ident, $e:ident, $f:ident, $g:ident, $h:ident, $k:expr, $w:ident) => {
            let sum1 = xor(xor(rotr($e, 6), rotr($e, 11)), rotr($e, 25));
            let choose = select($f, $g, $e);
            let t1 = add(add($h, sum1), add(choose, add($k, $w)));
            let sum0 = xor(xor(rotr($a, 2), rotr($a, 13)), rotr($a, 22));
            let majority = select($c, $a, xor($a, $b));
            $d = add($d, t1);
            $h = add(t1, add(sum0, majority));
        };
    }
    // w[i] += σ1(w[i-2]) + w[i-7] + σ0(w[i-15]), in place over a window of 16.
    macro_rules! schedule {
        ($w:ident, $m2:ident, $m7:ident, $m15:ident) => {
            let s1 = xor(xor(rotr($m2, 17), rotr($m2, 19)), shr($m2, 10));
            let s0 = xor(xor(rotr($m15, 7), rotr($m15, 18)), shr($m15, 3));
            $w = add(add($w, s1), add($m7, s0));
        };
    }
    for (n, k) in K4.chunks_exact(16).enumerate() {
        if n > 0 {
            schedule!(w0, w14, w9, w1);
            schedule!(w1, w15, w10, w2);
            schedule!(w2, w0, w11, w3);
            schedule!(w3, w1, w12, w4);
            schedule!(w4, w2, w13, w5);
            schedule!(w5, w3, w14, w6);
            schedule!(w6, w4, w15, w7);
            schedule!(w7, w5, w0, w8);
            schedule!(w8, w6, w1, w9);
            schedule!(w9, w7, w2, w10);
            schedule!(w10, w8, w3, w11);
            schedule!(w11, w9, w4, w12);
            schedule!(w12, w10, w5, w13);
            schedule!(w13, w11, w6, w14);
            schedule!(w14, w12, w7, w15);
            schedule!(w15, w13, w8, w0);
        }
        rounds16!(
            round,
            k,
            [w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15],
            [a, b, c, d, e, f, g, h]
        );
    }
    for (s, v) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
        *s = add(*s, v);
    }
}

/// The four-lane vector: wasm simd128.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod lanes {
    use core::arch::wasm32::*;

    pub type U32x4 = v128;

    #[inline(always)]
    pub fn splat(x: u32) -> U32x4 {
        u32x4_splat(x)
    }
    pub const fn splat_const(x: u32) -> U32x4 {
        u32x4(x, x, x, x)
    }
    #[inline(always)]
    pub fn add(a: U32x4, b: U32x4) -> U32x4 {
        u32x4_add(a, b)
    }
    #[inline(always)]
    pub fn xor(a: U32x4, b: U32x4) -> U32x4 {
        v128_xor(a, b)
    }
    #[inline(always)]
    pub fn or(a: U32x4, b: U32x4) -> U32x4 {
        v128_or(a, b)
    }
    #[inline(always)]
    pub fn shr(a: U32x4, n: u32) -> U32x4 {
        u32x4_shr(a, n)
    }
    #[inline(always)]
    pub fn shl(a: U32x4, n: u32) -> U32x4 {
        u32x4_shl(a, n)
    }
    /// The bits of `a` where `mask` is set, of `b` elsewhere.
    #[inline(always)]
    pub fn select(a: U32x4, b: U32x4, mask: U32x4) -> U32x4 {
        v128_bitselect(a, b, mask)
    }
    /// Big-endian word `i` of each block.
    #[inline(always)]
    pub fn load_be(blocks: [&[u8; 64]; 4], i: usize) -> U32x4 {
        let le = |b: &[u8; 64]| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().expect("4 bytes"));
        let v = u32x4(le(blocks[0]), le(blocks[1]), le(blocks[2]), le(blocks[3]));
        i8x16_shuffle::<3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12>(v, v)
    }
    pub fn get(v: U32x4, lane: usize) -> u32 {
        match lane {
            0 => u32x4_extract_lane::<0>(v),
            1 => u32x4_extract_lane::<1>(v),
            2 => u32x4_extract_lane::<2>(v),
            _ => u32x4_extract_lane::<3>(v),
        }
    }
    pub fn set(v: U32x4, lane: usize, x: u32) -> U32x4 {
        match lane {
            0 => u32x4_replace_lane::<0>(v, x),
            1 => u32x4_replace_lane::<1>(v, x),
            2 => u32x4_replace_lane::<2>(v, x),
            _ => u32x4_replace_lane::<3>(v, x),
        }
    }
}

/// The four-lane vector as a plain array, so native tests run the same code.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
mod lanes {
    pub type U32x4 = [u32; 4];

    pub fn splat(x: u32) -> U32x4 {
        [x; 4]
    }
    pub const fn splat_const(x: u32) -> U32x4 {
        [x; 4]
    }
    pub fn add(a: U32x4, b: U32x4) -> U32x4 {
        std::array::from_fn(|j| a[j].wrapping_add(b[j]))
    }
    pub fn xor(a: U32x4, b: U32x4) -> U32x4 {
        std::array::from_fn(|j| a[j] ^ b[j])
    }
    pub fn or(a: U32x4, b: U32x4) -> U32x4 {
        std::array::from_fn(|j| a[j] | b[j])
    }
    pub fn shr(a: U32x4, n: u32) -> U32x4 {
        a.map(|x| x >> n)
    }
    pub fn shl(a: U32x4, n: u32) -> U32x4 {
        a.map(|x| x << n)
    }
    pub fn select(a: U32x4, b: U32x4, mask: U32x4) -> U32x4 {
        std::array::from_fn(|j| (a[j] & mask[j]) | (b[j] & !mask[j]))
    }
    pub fn load_be(blocks: [&[u8; 64]; 4], i: usize) -> U32x4 {
        blocks.map(|b| u32::from_be_bytes(b[4 * i..4 * i + 4].try_into().expect("4 bytes")))
    }
    pub fn get(v: U32x4, lane: usize) -> u32 {
        v[lane]
    }
    pub fn set(mut v: U32x4, lane: usize, x: u32) -> U32x4 {
        v[lane] = x;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::digests;
    use sha2::{Digest, Sha256};

    fn message(len: usize, seed: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 + seed * 7 + len) as u8).collect()
    }

    #[test]
    fn matches_sha2_for_every_length_mixed_in_lanes() {
        // Lengths 0..=300 cover every padding case (55, 56, 63, 64 bytes…);
        // a shuffled order makes lanes finish at different blocks.
        let mut lens: Vec<usize> = (0..=300).collect();
        lens.sort_by_key(|&l| (l * 7919) % 301);
        let messages: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, &l)| message(l, i)).collect();
        let got = digests(messages.len(), |i, out| out.extend_from_slice(&messages[i]));
        assert_eq!(got.len(), messages.len());
        for (m, d) in messages.iter().zip(&got) {
            assert_eq!(d[..], Sha256::digest(m)[..], "length {}", m.len());
        }
    }

    #[test]
    fn fewer_messages_than_lanes() {
        for count in 0..=5 {
            let messages: Vec<Vec<u8>> = (0..count).map(|i| message(100 + 40 * i, i)).collect();
            let want: Vec<[u8; 32]> = messages.iter().map(|m| Sha256::digest(m).into()).collect();
            assert_eq!(digests(count, |i, out| out.extend_from_slice(&messages[i])), want);
        }
    }
}
