//! Keys and values of the model-based tests: a small domain, so that
//! updates and removals hit, with keys of three lengths.

/// Key `k`: its two bytes, then 0 … 2 bytes `k`.
pub fn key(k: u16) -> Vec<u8> {
    let mut v = k.to_be_bytes().to_vec();
    v.extend(std::iter::repeat_n(b'k', (k % 3) as usize));
    v
}

/// The value written for key `k` with `seed`: 0 … 39 bytes.
pub fn value(k: u16, seed: u8) -> Vec<u8> {
    vec![seed; (k as usize + seed as usize) % 40]
}
