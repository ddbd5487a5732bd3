//! Every decoder on arbitrary bytes: no panic, and anything accepted must
//! re-encode to exactly the input (encodings are canonical).
#![no_main]

use bpavl_core::{AbsenceProof, ChunkEnvelope, ChunkProof, ExistenceProof, RangeProof};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = ExistenceProof::decode(data) {
        assert_eq!(p.encode(), data, "existence proof is not canonical");
    }
    if let Ok(p) = AbsenceProof::decode(data) {
        assert_eq!(p.encode(), data, "absence proof is not canonical");
    }
    if let Ok(p) = RangeProof::decode(data) {
        assert_eq!(p.encode(), data, "range proof is not canonical");
    }
    if let Ok(p) = ChunkProof::decode(data) {
        assert_eq!(p.encode(), data, "chunk proof is not canonical");
    }
    if let Ok(e) = ChunkEnvelope::decode(data) {
        assert_eq!(e.encode(), data, "chunk envelope is not canonical");
    }
});
