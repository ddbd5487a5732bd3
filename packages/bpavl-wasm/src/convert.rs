//! JS values in, JS values out, and Rust errors as coded JS errors.
//!
//! Argument rules (noble's convention): a value of the wrong type throws a
//! `TypeError`; a value of the right type that no call could accept (a root
//! that is not 32 bytes, a count that is not a non-negative safe integer)
//! throws a `RangeError`. Everything else goes to `bpavl-core` unchanged, so
//! out-of-spec values (capacity 1, limit 0, an empty key) get the spec's code.

use std::fmt::Display;

use bpavl_core::{Hash, ProofError, RebuildError, StoreError, TreeError};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// A `Uint8Array` argument, checked by `bytes` (a JS value of any type
    /// until then; the type only names it in the generated `.d.ts`).
    #[wasm_bindgen(typescript_type = "Uint8Array")]
    pub type Bytes;
    /// A `number` argument, checked by `uint` and `count`.
    #[wasm_bindgen(typescript_type = "number")]
    pub type Number;
}

#[wasm_bindgen(module = "/src/convert.js")]
extern "C" {
    #[wasm_bindgen(js_name = codedError)]
    fn coded_error(name: &str, code: &str, message: &str) -> JsValue;
    #[wasm_bindgen(js_name = typeError)]
    fn type_error(message: &str) -> JsValue;
    #[wasm_bindgen(js_name = rangeError)]
    pub(crate) fn range_error(message: &str) -> JsValue;
    #[wasm_bindgen(js_name = bytesLength)]
    fn bytes_length(v: &JsValue) -> f64;
    #[wasm_bindgen(js_name = copyBytes)]
    fn copy_bytes(v: &JsValue, dst: &mut [u8]);
    fn pairs(flat: &[u8], ends: &[u32]) -> JsValue;
    #[wasm_bindgen(js_name = existenceItemsSize, catch)]
    fn existence_items_size(items: &JsValue, size: &mut [f64]) -> Result<(), JsValue>;
    #[wasm_bindgen(js_name = copyExistenceItems)]
    fn copy_existence_items(items: &JsValue, flat: &mut [u8], ends: &mut [u32]);
    fn numbers(view: &[f64]) -> JsValue;
    #[wasm_bindgen(js_name = commitResult)]
    pub(crate) fn commit_result(version: f64, root: &[u8]) -> JsValue;
    #[wasm_bindgen(js_name = entryPosition)]
    fn entry_position(chunk_index: f64, position: f64, chunk_count: f64, entry_count: f64) -> JsValue;
    #[wasm_bindgen(js_name = chunkPosition)]
    pub(crate) fn chunk_position(index: f64, chunk_count: f64, entry_count: f64, key_height: f64) -> JsValue;
    fn neighbour(key: &[u8], value: &[u8], position: JsValue) -> JsValue;
    #[wasm_bindgen(js_name = absenceResult)]
    fn absence_result(left: JsValue, right: JsValue) -> JsValue;
    #[wasm_bindgen(js_name = rangeResult)]
    fn range_result(entries: JsValue, complete: bool, resume_key: Option<Vec<u8>>) -> JsValue;
    #[wasm_bindgen(js_name = multiproofResult)]
    fn multiproof_result(proof: &JsValue, spans: &[u32], present: &[u8], chunk_count: f64, entry_count: f64)
        -> JsValue;
}

/// A Rust error with a stable code from `spec/errors.md`.
pub(crate) trait Coded: Display {
    const NAME: &'static str;
    fn code(&self) -> &'static str;
}

impl Coded for ProofError {
    const NAME: &'static str = "ProofError";
    fn code(&self) -> &'static str {
        ProofError::code(self)
    }
}

impl Coded for TreeError {
    const NAME: &'static str = "TreeError";
    fn code(&self) -> &'static str {
        TreeError::code(self)
    }
}

impl Coded for StoreError {
    const NAME: &'static str = "StoreError";
    fn code(&self) -> &'static str {
        StoreError::code(self)
    }
}

impl Coded for RebuildError {
    const NAME: &'static str = "RebuildError";
    fn code(&self) -> &'static str {
        RebuildError::code(self)
    }
}

/// The JS `Error` thrown for `e`: `name` is its Rust type, `code` its code.
pub(crate) fn throw<E: Coded>(e: E) -> JsValue {
    throw_saying(&e, &e.to_string())
}

/// `e` as a coded error with a message of its own (the code is what callers test).
pub(crate) fn throw_saying<E: Coded>(e: &E, message: &str) -> JsValue {
    coded_error(E::NAME, e.code(), message)
}

/// A copy of the bytes of Uint8Array `v`.
pub(crate) fn bytes(v: &JsValue, what: &str) -> Result<Vec<u8>, JsValue> {
    let mut out = vec![0; bytes_len(v, what)?];
    copy_bytes(v, &mut out);
    Ok(out)
}

/// The length of a `Uint8Array` argument, without copying it (a TypeError for anything else).
pub(crate) fn bytes_len(v: &JsValue, what: &str) -> Result<usize, JsValue> {
    let len = bytes_length(v);
    if len < 0.0 {
        return Err(type_error(&format!("{what} must be a Uint8Array")));
    }
    Ok(len as usize)
}

/// The keys, values and proofs of `{ key, value, proof }[]` laid end to end,
/// and where each ends (three offsets an item). A TypeError for anything else.
pub(crate) fn existence_items(items: &JsValue) -> Result<(Vec<u8>, Vec<u32>), JsValue> {
    let mut size = [0.0; 2]; // [bytes, items]
    existence_items_size(items, &mut size)?;
    let (mut flat, mut ends) = (vec![0; size[0] as usize], vec![0; 3 * size[1] as usize]);
    copy_existence_items(items, &mut flat, &mut ends);
    Ok((flat, ends))
}

/// `None` for `undefined` or `null` (`v` is `None`), else the bytes of Uint8Array `v`.
pub(crate) fn opt_bytes(v: Option<&JsValue>, what: &str) -> Result<Option<Vec<u8>>, JsValue> {
    v.map(|v| bytes(v, what)).transpose()
}

/// A 32-byte root hash.
pub(crate) fn root(v: &JsValue) -> Result<Hash, JsValue> {
    let b = bytes(v, "root")?;
    b.try_into().map_err(|b: Vec<u8>| range_error(&format!("root must be 32 bytes, got {}", b.len())))
}

/// A non-negative safe integer (0 … 2^53 − 1).
pub(crate) fn uint(v: &JsValue, what: &str) -> Result<u64, JsValue> {
    let Some(f) = v.as_f64() else {
        return Err(type_error(&format!("{what} must be a number")));
    };
    // Also false for NaN and ±Infinity.
    if !((0.0..=9_007_199_254_740_991.0).contains(&f) && f.fract() == 0.0) {
        return Err(range_error(&format!("{what} must be a non-negative safe integer, got {f}")));
    }
    Ok(f as u64)
}

/// A count for `bpavl-core`. Above `usize::MAX` (2^32 − 1 on wasm32) it
/// saturates: already beyond every limit (capacity, range limit) the core checks.
pub(crate) fn count(v: &JsValue, what: &str) -> Result<usize, JsValue> {
    uint(v, what).map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// A range limit: `TypeError` unless a number. Any number that is not an
/// integer in 1 … 65536 becomes 0, which the core rejects as `QUERY_INVALID`
/// in the spec's order (after the key checks), exactly as the TS verifier does.
pub(crate) fn range_limit(v: &JsValue) -> Result<usize, JsValue> {
    let Some(f) = v.as_f64() else {
        return Err(type_error("limit must be a number"));
    };
    Ok(if f.fract() == 0.0 && (1.0..=65536.0).contains(&f) { f as usize } else { 0 })
}

/// `[key, value][]`, each a fresh Uint8Array.
pub(crate) fn entries<'a>(it: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> JsValue {
    let (mut flat, mut ends) = (Vec::new(), Vec::new());
    for (k, v) in it {
        flat.extend_from_slice(k);
        ends.push(flat.len() as u32);
        flat.extend_from_slice(v);
        ends.push(flat.len() as u32);
    }
    pairs(&flat, &ends)
}

/// `number[]`.
pub(crate) fn number_array(it: impl Iterator<Item = u64>) -> JsValue {
    let v: Vec<f64> = it.map(|n| n as f64).collect();
    numbers(&v)
}

pub(crate) fn position(p: &bpavl_core::EntryPosition) -> JsValue {
    entry_position(p.chunk_index as f64, p.position as f64, p.chunk_count as f64, p.entry_count as f64)
}

pub(crate) fn absence(r: bpavl_core::AbsenceResult) -> JsValue {
    let side = |n: Option<bpavl_core::ProvenNeighbour>| {
        n.map_or(JsValue::UNDEFINED, |n| neighbour(&n.key, &n.value, position(&n.position)))
    };
    absence_result(side(r.left), side(r.right))
}

pub(crate) fn range(r: bpavl_core::RangeResult) -> JsValue {
    let list = entries(r.entries.iter().map(|(k, v)| (k.as_slice(), v.as_slice())));
    range_result(list, r.complete, r.resume_key)
}

/// The values as views into the caller's `proof` (whose bytes, copied into
/// wasm memory, are `bytes`): only their offsets cross the boundary.
pub(crate) fn multiproof(proof: &JsValue, bytes: &[u8], r: bpavl_core::MultiproofViews) -> JsValue {
    let base = bytes.as_ptr() as usize;
    let (mut spans, mut present) = (Vec::with_capacity(2 * r.values.len()), Vec::with_capacity(r.values.len()));
    for v in &r.values {
        let at = v.map_or(0, |v| v.as_ptr() as usize - base) as u32;
        spans.extend_from_slice(&[at, at + v.map_or(0, |v| v.len() as u32)]);
        present.push(v.is_some() as u8);
    }
    multiproof_result(proof, &spans, &present, r.chunk_count as f64, r.entry_count as f64)
}
