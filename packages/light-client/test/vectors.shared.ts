/**
 * The golden-vector suite of `spec/vectors/` (see its README for the JSON
 * shapes), written once and run against every implementation (noble's
 * PLATFORMS idea), through the one `Verifier` interface:
 * `runVectorSuite('ts', tsVerifier)` in vectors.test.ts and
 * `runVectorSuite('wasm', wasmVerifier(wasm))` in wasm.test.ts.
 *
 * The cases themselves live in `vectors.cases.ts` (no vitest, no Node
 * built-ins), which the browser suite (`tests/browser/`) runs too; this file
 * loads the JSON from disk and registers each case as a vitest test.
 */

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { VECTOR_FILES, vectorCases, type VectorSet } from './vectors.cases.js';
import type { Verifier } from '../src/verifier.js';

export {
  SPEC_CODES,
  hex,
  toHex,
  proofErrorCode,
  type Pair,
} from './vectors.cases.js';

// Any JSON shape; the suite reads fields by the README's names.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

export function loadVectors(name: string): Json {
  return JSON.parse(readFileSync(new URL(`../../../spec/vectors/${name}.json`, import.meta.url), 'utf8'));
}

/**
 * Registers the whole vector suite for `impl` under `describe(name)`, one
 * `describe` per vector file (see `vectorCases` for what is checked).
 */
export function runVectorSuite(name: string, impl: Verifier): void {
  const vectors = Object.fromEntries(VECTOR_FILES.map((f) => [f, loadVectors(f)])) as VectorSet;
  const cases = vectorCases(vectors, impl);
  describe(`vectors: ${name}`, () => {
    for (const file of VECTOR_FILES) {
      describe(`${file}.json`, () => {
        for (const c of cases.filter((c) => c.file === file)) {
          it(c.name, () => c.run((actual, expected) => expect(actual).toEqual(expected)));
        }
      });
    }
  });
}
