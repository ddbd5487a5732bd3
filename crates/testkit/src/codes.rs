//! The error codes of `spec/errors.md`, read from its tables so that the
//! tests follow the spec.

use std::collections::BTreeSet;
use std::path::Path;

/// The codes of the tables the core's tests check against.
pub struct Codes {
    pub decoding: BTreeSet<String>,
    pub verification: BTreeSet<String>,
    pub rebuild: BTreeSet<String>,
}

impl Codes {
    /// A code a verifier may return: from the Decoding or Verification table.
    pub fn is_verifier_code(&self, code: &str) -> bool {
        self.decoding.contains(code) || self.verification.contains(code)
    }
}

/// The `spec/` folder of this repository.
pub fn spec_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../spec"))
}

/// Reads the Decoding, Verification and Rebuild tables of `spec/errors.md`:
/// every upper-case code in backticks in a row's first cell.
pub fn load_codes() -> Codes {
    let text = std::fs::read_to_string(spec_dir().join("errors.md")).expect("spec/errors.md");
    let mut codes = Codes { decoding: BTreeSet::new(), verification: BTreeSet::new(), rebuild: BTreeSet::new() };
    let mut section = "";
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            section = h.trim();
            continue;
        }
        if !line.starts_with("| `") {
            continue;
        }
        let set = if section.starts_with("Decoding") {
            &mut codes.decoding
        } else if section.starts_with("Verification") {
            &mut codes.verification
        } else if section.starts_with("Rebuild") {
            &mut codes.rebuild
        } else {
            continue;
        };
        let cell = line.split('|').nth(1).unwrap_or("");
        for (i, tok) in cell.split('`').enumerate() {
            if i % 2 == 1 && !tok.is_empty() && tok.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
                set.insert(tok.to_string());
            }
        }
    }
    for c in ["TRUNCATED", "TRAILING_BYTES", "FORMAT_UNSUPPORTED", "VARINT_OVERFLOW", "COUNT_INVALID"] {
        assert!(codes.decoding.contains(c), "errors.md parse: {c} missing from Decoding");
    }
    for c in ["ROOT_MISMATCH", "CHUNK_INDEX_MISMATCH", "RANGE_INVALID"] {
        assert!(codes.verification.contains(c), "errors.md parse: {c} missing from Verification");
    }
    assert!(codes.rebuild.contains("REBUILD_INCOMPLETE"), "errors.md parse: Rebuild table");
    codes
}
