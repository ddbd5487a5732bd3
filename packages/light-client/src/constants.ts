/**
 * Format bytes and limits, each quoting the spec rule behind it.
 *
 * Implements the tables of `spec/encoding.md` ("Format byte and versions",
 * "Limits"); the bounds on totals come from `spec/hashing.md` ("Chunk path").
 * @module
 */

/** "`0x01` existence proof" (encoding.md, format bytes). */
export const FORMAT_EXISTENCE = 0x01;
/** "`0x02` absence proof". */
export const FORMAT_ABSENCE = 0x02;
/** "`0x03` range proof". */
export const FORMAT_RANGE = 0x03;
/** "`0x04` chunk proof". */
export const FORMAT_CHUNK_PROOF = 0x04;
/** "`0x05` chunk envelope". */
export const FORMAT_CHUNK_ENVELOPE = 0x05;
/** "`0x0D` multiproof". */
export const FORMAT_MULTIPROOF = 0x0d;

/** "key length: 1 … 1024 bytes (empty keys are not allowed)". */
export const MAX_KEY_LEN = 1024;
/** "value length: 0 … 65536 bytes". */
export const MAX_VALUE_LEN = 65536;
/** "capacity `C`: 2 … 4096". */
export const MIN_CAPACITY = 2;
/** "capacity `C`: 2 … 4096". */
export const MAX_CAPACITY = 4096;
/** "tree height, chunk-path length: ≤ 48". */
export const MAX_HEIGHT = 48;
/** "total chunks: ≤ 2^32 − 1". */
export const MAX_CHUNKS = 0xffff_ffff;
/** "total entries: ≤ 2^53 − 1"; also the largest varint. */
export const MAX_ENTRIES = Number.MAX_SAFE_INTEGER;
/** "range query limit: 1 … 65536 entries". */
export const MAX_RANGE_LIMIT = 65536;
/** "multiproof query: 1 … 65536 keys". */
export const MAX_MULTIPROOF_KEYS = 65536;
/** Length of every hash: "All hashes are SHA-256 (FIPS 180-4), 32 bytes" (hashing.md). */
export const HASH_LEN = 32;
