//! Sorted keys in one byte buffer with end offsets, so that a binary search
//! touches two small arrays instead of chasing a pointer per key; a prefix
//! per key settles most comparisons. Chunks of the tree and chunks cached
//! for paged reads both hold their keys this way.

/// The first 8 bytes of `key`, zero-padded, as a big-endian integer. If
/// `prefix(a) < prefix(b)` then `a < b`; equal prefixes need the full keys.
pub(crate) fn prefix(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Keys {
    /// `ends[i]` is the exclusive end of key `i` in `bytes`.
    ends: Vec<u32>,
    /// `prefixes[i]` is `prefix(key i)`.
    prefixes: Vec<u64>,
    bytes: Vec<u8>,
}

impl Keys {
    /// Room for `count` keys of `bytes` bytes in all.
    pub fn with_capacity(count: usize, bytes: usize) -> Keys {
        Keys { ends: Vec::with_capacity(count), prefixes: Vec::with_capacity(count), bytes: Vec::with_capacity(bytes) }
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Bytes of the keys themselves.
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    fn start(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.ends[i - 1] as usize
        }
    }

    pub fn key(&self, i: usize) -> &[u8] {
        &self.bytes[self.start(i)..self.ends[i] as usize]
    }

    /// `Ok(i)` if key `i` equals `key`, else `Err(i)` where it would go.
    pub fn search(&self, key: &[u8]) -> Result<usize, usize> {
        let p = prefix(key);
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.prefixes[mid].cmp(&p).then_with(|| self.key(mid).cmp(key)) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// Adds `key` after the last (the caller keeps the order).
    pub fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len() as u32);
        self.prefixes.push(prefix(key));
    }

    /// Puts `key` at position `i`.
    pub fn insert(&mut self, i: usize, key: &[u8]) {
        let start = self.start(i);
        self.bytes.splice(start..start, key.iter().copied());
        for end in &mut self.ends[i..] {
            *end += key.len() as u32;
        }
        self.ends.insert(i, (start + key.len()) as u32);
        self.prefixes.insert(i, prefix(key));
    }

    /// Takes key `i` out.
    pub fn remove(&mut self, i: usize) -> Box<[u8]> {
        let (start, end) = (self.start(i), self.ends[i] as usize);
        let key: Box<[u8]> = self.bytes.drain(start..end).collect();
        self.ends.remove(i);
        self.prefixes.remove(i);
        for e in &mut self.ends[i..] {
            *e -= key.len() as u32;
        }
        key
    }

    /// Moves keys `at..` into new `Keys`.
    pub fn split_off(&mut self, at: usize) -> Keys {
        let start = self.start(at);
        let bytes = self.bytes.split_off(start);
        let ends = self.ends.split_off(at).into_iter().map(|e| e - start as u32).collect();
        Keys { ends, prefixes: self.prefixes.split_off(at), bytes }
    }

    /// Adds every key of `other` after the last (all greater).
    pub fn append(&mut self, other: &Keys) {
        let base = self.bytes.len() as u32;
        self.bytes.extend_from_slice(&other.bytes);
        self.ends.extend(other.ends.iter().map(|e| e + base));
        self.prefixes.extend_from_slice(&other.prefixes);
    }
}
