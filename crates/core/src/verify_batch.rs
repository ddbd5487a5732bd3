//! Many existence proofs verified in one call, with the same result for each
//! as `verify_existence`. A proof's fold is one chain of dependent hashes, so
//! a single verification cannot go faster than serial SHA-256; in WebAssembly
//! with SIMD, four proofs' chains run side by side instead (`sha256x4`;
//! figures: packages/bpavl-wasm/README.md, "Speed"). Elsewhere it is
//! `verify_existence` in a loop.

use crate::error::ProofError;
use crate::hash::Hash;
use crate::proof::EntryPosition;

/// One item to verify: key, value and encoded existence proof.
pub type ExistenceItem<'a> = (&'a [u8], &'a [u8], &'a [u8]);

/// `verify_existence(root, key, value, proof)` for every item, in order.
pub fn verify_existence_batch(root: &Hash, items: &[ExistenceItem]) -> Vec<Result<EntryPosition, ProofError>> {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return lanes::verify(root, items);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    items.iter().map(|&(key, value, proof)| crate::proof::verify_existence(root, key, value, proof)).collect()
}

#[cfg(any(test, all(target_arch = "wasm32", target_feature = "simd128")))]
mod lanes {
    use super::ExistenceItem;
    use crate::codec::{check_key, check_value};
    use crate::error::ProofError;
    use crate::hash::{EntryPreimage, Hash, Link};
    use crate::path::Unrooted;
    use crate::proof::{EntryPosition, ExistenceProof};
    use crate::sha256x4::{run, Jobs};

    /// Proofs decoded and queued at once: bounds the links held in memory.
    const GROUP: usize = 1024;

    /// A decoded proof waiting for its chain to be hashed: first from the
    /// entry to its chunk (`links[..path]`), then from the chunk to the root
    /// (`links[path..]`).
    struct Pending<'a> {
        item: usize,
        key: &'a [u8],
        value: &'a [u8],
        position: usize,
        links: Vec<Link>,
        path: usize,
        unrooted: Unrooted,
    }

    impl Pending<'_> {
        fn path(&self) -> &[Link] {
            &self.links[self.path..]
        }
    }

    /// The entry-to-chunk chains.
    impl Jobs for [Pending<'_>] {
        fn count(&self) -> usize {
            self.len()
        }

        fn message(&self, job: usize, step: usize, prev: &Hash, out: &mut Vec<u8>) -> bool {
            let p = &self[job];
            if step == 0 {
                EntryPreimage::new(p.key, p.value).parts().iter().for_each(|part| out.extend_from_slice(part));
                return true;
            }
            let Some(link) = p.links[..p.path].get(step - 1) else { return false };
            link.preimage(prev, out);
            true
        }
    }

    /// A chunk-to-root chain: a chunk hash and the path above it.
    struct PathJob<'p> {
        chunk: Hash,
        path: &'p [Link],
    }

    impl Jobs for [PathJob<'_>] {
        fn count(&self) -> usize {
            self.len()
        }

        fn message(&self, job: usize, step: usize, prev: &Hash, out: &mut Vec<u8>) -> bool {
            let j = &self[job];
            let Some(link) = j.path.get(step) else { return false };
            link.preimage(if step == 0 { &j.chunk } else { prev }, out);
            true
        }
    }

    pub(super) fn verify(root: &Hash, items: &[ExistenceItem]) -> Vec<Result<EntryPosition, ProofError>> {
        let mut results = Vec::with_capacity(items.len());
        for group in items.chunks(GROUP) {
            let mut pending = Vec::with_capacity(group.len());
            for &(key, value, proof) in group {
                // The checks, in verify_existence's order.
                match check_key(key).and_then(|_| check_value(value)).and_then(|_| ExistenceProof::decode(proof)) {
                    Err(e) => results.push(Err(e)),
                    Ok(p) => {
                        let mut links = Vec::with_capacity(32);
                        let unrooted = p.witness.links(p.capacity, &mut links);
                        let path =
                            links.iter().position(|l| matches!(l, Link::Chunk { .. })).expect("a chunk link") + 1;
                        let position = p.witness.position;
                        pending.push(Pending { item: results.len(), key, value, position, links, path, unrooted });
                        results.push(Err(ProofError::RootMismatch));
                    }
                }
            }
            let chunks = run(pending.as_slice());
            // Proofs of entries of one chunk share the chunk's path: a run of
            // them (a batch of keys in key order) hashes the path once.
            let mut jobs: Vec<PathJob> = Vec::new();
            let job_of: Vec<usize> = pending
                .iter()
                .zip(&chunks)
                .map(|(p, &chunk)| {
                    if !jobs.last().is_some_and(|j| j.chunk == chunk && j.path == p.path()) {
                        jobs.push(PathJob { chunk, path: p.path() });
                    }
                    jobs.len() - 1
                })
                .collect();
            let roots = run(jobs.as_slice());
            for (p, job) in pending.iter().zip(job_of) {
                let digest = roots[job];
                if digest == *root {
                    results[p.item] = Ok(EntryPosition::at(&p.unrooted.with_root(digest), p.position));
                }
            }
        }
        results
    }

    #[cfg(test)]
    mod tests {
        use crate::proof::verify_existence;
        use crate::Tree;

        #[test]
        fn lanes_agree_with_one_at_a_time() {
            let mut tree = Tree::new(8).unwrap();
            for i in 0..500u32 {
                let value = vec![i as u8; (i as usize * 37) % 300];
                tree.insert(&i.to_be_bytes(), &value).unwrap();
            }
            let root = tree.commit().root;
            let mut owned = Vec::new();
            for i in 0..600u32 {
                let key = i.to_be_bytes().to_vec();
                let value = tree.get(&key).map(<[u8]>::to_vec).unwrap_or_default();
                let mut proof = tree.head().prove_existence(&(i % 500).to_be_bytes()).unwrap().encode();
                match i % 7 {
                    // A flipped bit, a cut, a wrong value, a foreign proof.
                    1 => {
                        let at = (i as usize * 13) % proof.len();
                        proof[at] ^= 1 << (i % 8);
                    }
                    2 => proof.truncate(proof.len() / 2),
                    3 => owned.push((key.clone(), b"other".to_vec(), proof.clone())),
                    _ => {}
                }
                owned.push((key, value, proof));
            }
            owned.push((vec![], vec![], vec![]));
            let items: Vec<_> = owned.iter().map(|(k, v, p)| (k.as_slice(), v.as_slice(), p.as_slice())).collect();
            let want: Vec<_> = items.iter().map(|&(k, v, p)| verify_existence(&root, k, v, p)).collect();
            assert!(want.iter().filter(|r| r.is_ok()).count() > 300);
            assert_eq!(super::verify(&root, &items), want);
        }
    }
}
