// Packaging rules: src uses no Node built-ins, and the verify entry pulls in
// nothing but its own modules and @noble/hashes (no WASM, no libp2p).
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ProofError, isProofError } from '../src/verify.js';

const srcDir = new URL('../src/', import.meta.url);
const sources = readdirSync(srcDir).filter((f) => f.endsWith('.ts'));
/** The code of a source file, without comments (doc examples import freely). */
const code = (file: string) =>
  readFileSync(new URL(file, srcDir), 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/^\s*\/\/.*$/gm, '');
const specifiers = (file: string) =>
  [...code(file).matchAll(/(?:import|export)[^'";]*?from\s+['"]([^'"]+)['"]/g)].map(
    (m) => m[1]!,
  );

describe('package rules', () => {
  it.each(sources)('%s imports only relative modules and @noble/hashes', (file) => {
    for (const s of specifiers(file)) {
      expect(s.startsWith('./') || s.startsWith('@noble/hashes/'), `${file}: ${s}`).toBe(true);
    }
    expect(code(file)).not.toMatch(/\brequire\(|\bprocess\.|\bBuffer\b|['"]node:/);
  });

  it('every src module cites the spec file it implements (or is glue)', () => {
    for (const file of sources) {
      const head = readFileSync(new URL(file, srcDir), 'utf8').slice(0, 600);
      expect(head.startsWith('/**'), file).toBe(true);
    }
  });

  it('ProofError has name and code, and isProofError works across copies', () => {
    const e = new ProofError('TRUNCATED');
    expect(e).toBeInstanceOf(Error);
    expect(e.name).toBe('ProofError');
    expect(e.code).toBe('TRUNCATED');
    expect(isProofError(e)).toBe(true);
    const foreign = Object.assign(new Error('x'), { name: 'ProofError', code: 'ROOT_MISMATCH' });
    expect(isProofError(foreign)).toBe(true);
    expect(isProofError(Object.assign(new Error('x'), { name: 'ProofError', code: 'NOPE' }))).toBe(false);
    expect(isProofError(new TypeError('x'))).toBe(false);
  });
});
