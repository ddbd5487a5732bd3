import { describe, expect, it, vi } from 'vitest';
import {
  decodeChunkEnvelope,
  ProofError,
  verifyChunk,
  type VerifiedChunk,
  type WasmChunkVerifier,
} from '../src/verify.js';
import { singleChunk, syntheticEntries } from './reference.js';
import { hex, loadVectors, proofErrorCode } from './vectors.shared.js';

describe('verifyChunk on synthetic single-chunk trees (independent reference hasher)', () => {
  it.each([1, 2, 3, 5, 100, 255, 256])('M = %i entries of 32-byte keys and 512-byte values', (m) => {
    const entries = syntheticEntries(m);
    const { root, envelope } = singleChunk(256, entries);
    const r = verifyChunk(root, 0, envelope);
    expect(r.index).toBe(0);
    expect(r.chunkCount).toBe(1);
    expect(r.entryCount).toBe(m);
    expect(r.capacity).toBe(256);
    expect(r.keyHeight).toBe(0);
    expect(r.entries).toEqual(entries);
    // Views into the envelope, not copies.
    expect(r.entries[0]![0].buffer).toBe(envelope.buffer);
  });

  it('keys and values at the limits (1024-byte key, 65536-byte value, empty value)', () => {
    const entries: [Uint8Array, Uint8Array][] = [
      [new Uint8Array(1024).fill(1), new Uint8Array(65536).fill(2)],
      [Uint8Array.of(2), new Uint8Array(0)],
    ];
    const { root, envelope } = singleChunk(4096, entries);
    expect(verifyChunk(root, 0, envelope).entries).toEqual(entries);
  });

  it('one flipped value byte is ROOT_MISMATCH', () => {
    const { root, envelope } = singleChunk(16, syntheticEntries(5, 4, 8));
    envelope[envelope.length - 2]! ^= 1;
    expect(proofErrorCode(() => verifyChunk(root, 0, envelope))).toBe('ROOT_MISMATCH');
  });
});

describe('decodeChunkEnvelope', () => {
  it('decodes a vector envelope without hashing, with its path', () => {
    const c = loadVectors('chunk_envelope').valid.find((c: { chunk_count: number; index: number }) => c.chunk_count > 2 && c.index > 0);
    const env = decodeChunkEnvelope(hex(c.envelope));
    expect(env.capacity).toBe(c.capacity);
    expect(env.keyHeight).toBe(c.key_height);
    expect(env.entries.length).toBe(c.chunk_entries.length);
    expect(env.path.length).toBeGreaterThan(0);
    const top = env.path[env.path.length - 1]!;
    expect(top.siblingHash.length).toBe(32);
    expect(top.parentHeight).toBeGreaterThan(0);
  });

  it('runs the same decoding checks as verifyChunk', () => {
    for (const c of loadVectors('chunk_envelope').invalid) {
      const decodeOnly = ['ROOT_MISMATCH', 'CHUNK_INDEX_MISMATCH', 'KEY_HEIGHT_MISMATCH'].includes(c.code);
      if (decodeOnly) expect(() => decodeChunkEnvelope(hex(c.envelope))).not.toThrow();
      else expect(proofErrorCode(() => decodeChunkEnvelope(hex(c.envelope)))).toBe(c.code);
    }
  });
});

describe('the WASM fast path hook (with a stand-in module)', () => {
  const c = loadVectors('chunk_envelope').valid.find((c: { chunk_entries: unknown[] }) => c.chunk_entries.length > 3);
  const root = hex(c.root);
  const envelope = hex(c.envelope);
  const ts: VerifiedChunk = verifyChunk(root, c.index, envelope);

  it('returns the same result as the TS path and frees the WASM object', () => {
    const free = vi.fn();
    const wasm: WasmChunkVerifier = {
      verifyChunk: vi.fn(() => ({
        index: ts.index,
        chunkCount: ts.chunkCount,
        entryCount: ts.entryCount,
        capacity: ts.capacity,
        keyHeight: ts.keyHeight,
        free,
      })),
    };
    const r = verifyChunk(root, c.index, envelope, { wasm });
    expect(r).toEqual(ts);
    expect(wasm.verifyChunk).toHaveBeenCalledWith(root, c.index, envelope);
    expect(free).toHaveBeenCalledOnce();
  });

  it('maps the module\'s coded Error to this package\'s ProofError', () => {
    const wasm: WasmChunkVerifier = {
      verifyChunk() {
        const e = new Error('root mismatch') as Error & { code: string };
        e.name = 'ProofError';
        e.code = 'ROOT_MISMATCH';
        throw e;
      },
    };
    try {
      verifyChunk(root, c.index, envelope, { wasm });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ProofError);
      expect((err as ProofError).code).toBe('ROOT_MISMATCH');
    }
  });

  it('passes other errors through, and validates arguments before calling WASM', () => {
    const boom = new Error('unreachable executed');
    const wasm: WasmChunkVerifier = {
      verifyChunk: vi.fn(() => {
        throw boom;
      }),
    };
    expect(() => verifyChunk(root, c.index, envelope, { wasm })).toThrow(boom);
    expect(() => verifyChunk(root, -1, envelope, { wasm })).toThrow(RangeError);
    expect(wasm.verifyChunk).toHaveBeenCalledOnce();
  });
});
