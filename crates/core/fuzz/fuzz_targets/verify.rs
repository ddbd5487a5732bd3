//! Every verifier (and `Rebuilder::add`) against a fixed tree. `data[0]` picks
//! the context, `data[1..]` is the proof or envelope. Only the exact valid
//! encoding for that context may verify; errors must carry a code.
#![no_main]

use std::sync::OnceLock;

use bpavl_core::hash::Hash;
use bpavl_core::{verify_absence, verify_chunk, verify_chunk_proof, verify_existence, verify_range, Rebuilder, Tree};
use libfuzzer_sys::fuzz_target;

enum Ctx {
    Existence(Vec<u8>, Vec<u8>),
    Absence(Vec<u8>),
    Range(Vec<u8>, Option<Vec<u8>>, usize),
    ChunkProof(u64),
    Envelope(u64),
}

struct Fixture {
    root: Hash,
    cases: Vec<(Ctx, Vec<u8>)>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let mut tree = Tree::new(3).unwrap();
        for i in 0u16..40 {
            tree.insert(&(i * 2 + 1).to_be_bytes(), &[i as u8; 3]).unwrap();
        }
        for i in (0u16..40).step_by(7) {
            tree.remove(&(i * 2 + 1).to_be_bytes());
        }
        let root = tree.commit().root;
        let mut cases = Vec::new();
        for i in [1u16, 3, 29, 79] {
            let k = i.to_be_bytes().to_vec();
            if let Some(v) = tree.get(&k).map(<[u8]>::to_vec) {
                let p = tree.prove_existence(&k).unwrap().encode();
                cases.push((Ctx::Existence(k, v), p));
            }
        }
        for k in [vec![0u8], vec![0, 2], vec![0, 30], vec![0xff]] {
            let p = tree.prove_absence(&k).unwrap().encode();
            cases.push((Ctx::Absence(k), p));
        }
        for (s, e, l) in
            [(vec![], None, 3), (vec![0, 10], Some(vec![0, 40]), 100), (vec![0, 50], None, 5), (vec![0xff], None, 1)]
        {
            let p = tree.prove_range(&s, e.as_deref(), l).unwrap().encode();
            cases.push((Ctx::Range(s, e, l), p));
        }
        for i in 0..tree.chunk_count() {
            cases.push((Ctx::ChunkProof(i), tree.prove_chunk(i).unwrap().encode()));
            cases.push((Ctx::Envelope(i), tree.export_chunk_bytes(i).unwrap()));
        }
        Fixture { root, cases }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, input)) = data.split_first() else { return };
    let f = fixture();
    let (ctx, valid) = &f.cases[sel as usize % f.cases.len()];
    let root = &f.root;
    let res: Result<(), &'static str> = match ctx {
        Ctx::Existence(k, v) => verify_existence(root, k, v, input).map(drop).map_err(|e| e.code()),
        Ctx::Absence(k) => verify_absence(root, k, input).map(drop).map_err(|e| e.code()),
        Ctx::Range(s, e, l) => verify_range(root, s, e.as_deref(), *l, input).map(drop).map_err(|e| e.code()),
        Ctx::ChunkProof(_) => match verify_chunk_proof(root, input) {
            // Any chunk's proof verifies against the root; it must be that chunk's.
            Ok(folded) => {
                let own = f.cases.iter().find(|(c, _)| matches!(c, Ctx::ChunkProof(i) if *i == folded.index));
                assert_eq!(Some(input), own.map(|(_, p)| p.as_slice()), "a forged chunk proof verified");
                return;
            }
            Err(e) => Err(e.code()),
        },
        Ctx::Envelope(i) => {
            let r = verify_chunk(root, *i, input).map(drop).map_err(|e| e.code());
            let rb = Rebuilder::new(*root).add(*i, input).map(drop).map_err(|e| e.code());
            assert_eq!(r, rb, "Rebuilder::add disagrees with verify_chunk");
            r
        }
    };
    match res {
        Ok(()) => assert_eq!(input, valid.as_slice(), "a different input verified"),
        Err(code) => assert!(!code.is_empty()),
    }
});
