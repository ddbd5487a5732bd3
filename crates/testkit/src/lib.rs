//! Test tooling shared by `bpavl-core`'s tests and its vector generator
//! (`crates/core/examples/gen_vectors`), so that each byte format is written
//! down once outside the core:
//!
//! - [`fields`]: every format of `spec/` as a list of named fields, split by
//!   the field layout of `spec/layout.json` (which the TypeScript tests read
//!   too), from which the generator and the fuzz test take both the bytes
//!   and the field boundaries;
//! - [`codes`]: the error codes of `spec/errors.md`, by table;
//! - [`sample`]: a valid encoding with the context its verifier needs, and
//!   the decoder and verifier of each kind behind one call;
//! - [`guard`]: runs a call under `catch_unwind`, quietly;
//! - [`alloc`]: the counting allocator of the fuzz tests;
//! - [`rng`]: the one deterministic PRNG of the tests.

pub mod alloc;
pub mod codes;
pub mod fields;
pub mod guard;
pub mod rng;
pub mod sample;
