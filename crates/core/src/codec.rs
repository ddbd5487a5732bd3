//! Canonical encoding primitives (`spec/encoding.md`): minimal varints,
//! length-prefixed bytes, and a reader that reports the first failing check.

use crate::error::ProofError;
use crate::hash::Hash;
use crate::limits::{MAX_CAPACITY, MAX_KEY_LEN, MAX_VALUE_LEN, MIN_CAPACITY};

/// Largest value a varint may carry: 2^53 − 1, exact in a JavaScript number.
const MAX_VARINT: u64 = (1 << 53) - 1;

/// Appends the minimal LEB128 encoding of `v` (`v ≤ 2^53 − 1`).
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    debug_assert!(v <= MAX_VARINT);
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `varint(len) ‖ bytes`.
pub fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Reads an encoded object front to back.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `buf` that expects `format` as its first byte.
    pub fn new(buf: &'a [u8], format: u8) -> Result<Self, ProofError> {
        let mut r = Reader { buf, pos: 0 };
        if r.u8()? != format {
            return Err(ProofError::FormatUnsupported);
        }
        Ok(r)
    }

    /// A reader over `buf`, which has no format byte (a wire message's body).
    pub fn plain(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Fails with `TRAILING_BYTES` unless every byte was read.
    pub fn finish(&self) -> Result<(), ProofError> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(ProofError::TrailingBytes)
        }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn u8(&mut self) -> Result<u8, ProofError> {
        let b = *self.buf.get(self.pos).ok_or(ProofError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], ProofError> {
        if self.buf.len() - self.pos < n {
            return Err(ProofError::Truncated);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn hash(&mut self) -> Result<Hash, ProofError> {
        Ok(self.take(32)?.try_into().expect("32 bytes"))
    }

    /// `n` consecutive hashes, without a length prefix.
    pub fn hashes(&mut self, n: usize) -> Result<Vec<Hash>, ProofError> {
        let raw = self.take(n.checked_mul(32).ok_or(ProofError::Truncated)?)?;
        Ok(raw.chunks_exact(32).map(|c| c.try_into().expect("32 bytes")).collect())
    }

    pub fn varint(&mut self) -> Result<u64, ProofError> {
        let mut value = 0u64;
        for i in 0..8 {
            let b = self.u8()?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                if i > 0 && b == 0 {
                    return Err(ProofError::VarintNonCanonical);
                }
                if value > MAX_VARINT {
                    return Err(ProofError::VarintOverflow);
                }
                return Ok(value);
            }
        }
        Err(ProofError::VarintOverflow)
    }

    /// A key: non-empty, at most `MAX_KEY_LEN` bytes.
    pub fn key(&mut self) -> Result<&'a [u8], ProofError> {
        let len = self.varint()?;
        if len == 0 {
            return Err(ProofError::KeyEmpty);
        }
        if len > MAX_KEY_LEN as u64 {
            return Err(ProofError::KeyTooLong);
        }
        self.take(len as usize)
    }

    /// A value: at most `MAX_VALUE_LEN` bytes.
    pub fn value(&mut self) -> Result<&'a [u8], ProofError> {
        let len = self.varint()?;
        if len > MAX_VALUE_LEN as u64 {
            return Err(ProofError::ValueTooLong);
        }
        self.take(len as usize)
    }

    /// A capacity `C` in `2 … 4096`.
    pub fn capacity(&mut self) -> Result<usize, ProofError> {
        let c = self.varint()?;
        if !(MIN_CAPACITY as u64..=MAX_CAPACITY as u64).contains(&c) {
            return Err(ProofError::CapacityInvalid);
        }
        Ok(c as usize)
    }

    /// A chunk's entry count `M` in `1 … capacity`.
    pub fn chunk_size(&mut self, capacity: usize) -> Result<usize, ProofError> {
        let m = self.varint()?;
        if m == 0 || m > capacity as u64 {
            return Err(ProofError::ChunkSizeInvalid);
        }
        Ok(m as usize)
    }
}

/// Checks a key given to a verifier or to the tree, in the spec's order.
pub fn check_key(key: &[u8]) -> Result<(), ProofError> {
    check_key_len(key.len())
}

/// [`check_key`] by the key's length alone, for callers that need not copy the key to check it.
pub fn check_key_len(len: usize) -> Result<(), ProofError> {
    if len == 0 {
        Err(ProofError::KeyEmpty)
    } else if len > MAX_KEY_LEN {
        Err(ProofError::KeyTooLong)
    } else {
        Ok(())
    }
}

/// Checks a value given to a verifier or to the tree.
pub fn check_value(value: &[u8]) -> Result<(), ProofError> {
    if value.len() > MAX_VALUE_LEN {
        Err(ProofError::ValueTooLong)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> Result<u64, ProofError> {
        let mut all = vec![0x09];
        all.extend_from_slice(bytes);
        let mut r = Reader::new(&all, 0x09)?;
        let v = r.varint()?;
        r.finish()?;
        Ok(v)
    }

    #[test]
    fn varints_round_trip_and_are_minimal() {
        for v in [0u64, 1, 127, 128, 300, 16383, 16384, MAX_VARINT] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(read(&out), Ok(v));
        }
        assert_eq!(read(&[0x80, 0x00]), Err(ProofError::VarintNonCanonical));
        assert_eq!(read(&[0x81]), Err(ProofError::Truncated));
        assert_eq!(read(&[0xff; 8]), Err(ProofError::VarintOverflow));
        assert_eq!(read(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x10]), Err(ProofError::VarintOverflow));
    }
}
