import { describe, expect, it } from 'vitest';
import { compareBytes, decodeVarint, encodeVarint, Reader } from '../src/codec.js';
import { ProofError } from '../src/errors.js';
import { proofErrorCode } from './vectors.shared.js';

const MAX = Number.MAX_SAFE_INTEGER;

describe('varints (spec/encoding.md)', () => {
  it('round-trips and is minimal', () => {
    for (const v of [0, 1, 127, 128, 300, 16383, 16384, 2 ** 32 - 1, 2 ** 32, 2 ** 49 - 1, 2 ** 49, MAX]) {
      const enc = encodeVarint(v);
      expect(decodeVarint(enc)).toBe(v);
      // minimal: the last byte is non-zero unless the value is 0
      if (v > 0) expect(enc[enc.length - 1]).not.toBe(0);
    }
    expect(Array.from(encodeVarint(300))).toEqual([0xac, 0x02]);
    expect(encodeVarint(MAX).length).toBe(8);
  });

  it('rejects non-canonical, overflowing and truncated varints with the spec codes', () => {
    const code = (...b: number[]) => proofErrorCode(() => decodeVarint(Uint8Array.from(b)));
    expect(code(0x80, 0x00)).toBe('VARINT_NON_CANONICAL');
    expect(code(0xff, 0x80, 0x00)).toBe('VARINT_NON_CANONICAL');
    // a zero group on the 8th byte is non-canonical before it is anything else
    expect(code(0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00)).toBe('VARINT_NON_CANONICAL');
    expect(code(0x81)).toBe('TRUNCATED');
    expect(code()).toBe('TRUNCATED');
    expect(code(...new Array(8).fill(0xff))).toBe('VARINT_OVERFLOW'); // continuation on the 8th byte
    expect(code(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x10)).toBe('VARINT_OVERFLOW'); // 2^53
    expect(code(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)).toBe('VARINT_OVERFLOW'); // 2^56 − 1
    expect(decodeVarint(Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f))).toBe(MAX);
    expect(code(0x01, 0x00)).toBe('TRAILING_BYTES');
  });

  it('encodeVarint validates its argument like noble', () => {
    expect(() => encodeVarint('1' as unknown as number)).toThrow(TypeError);
    expect(() => encodeVarint(-1)).toThrow(RangeError);
    expect(() => encodeVarint(1.5)).toThrow(RangeError);
    expect(() => encodeVarint(2 ** 53)).toThrow(RangeError);
  });
});

describe('Reader', () => {
  it('checks the format byte: empty input is TRUNCATED, another byte FORMAT_UNSUPPORTED', () => {
    expect(proofErrorCode(() => new Reader(new Uint8Array(0), 1))).toBe('TRUNCATED');
    expect(proofErrorCode(() => new Reader(Uint8Array.of(0x11), 1))).toBe('FORMAT_UNSUPPORTED');
  });

  it('reads keys and values in the spec order of checks', () => {
    const r = (...b: number[]) => new Reader(Uint8Array.from(b));
    expect(proofErrorCode(() => r(0x00).key())).toBe('KEY_EMPTY');
    expect(proofErrorCode(() => r(0x81, 0x08).key())).toBe('KEY_TOO_LONG'); // 1025
    expect(proofErrorCode(() => r(0x02, 0x61).key())).toBe('TRUNCATED');
    expect(proofErrorCode(() => r(0x81, 0x80, 0x04).value())).toBe('VALUE_TOO_LONG'); // 65537
    expect(r(0x00).value().length).toBe(0);
    expect(proofErrorCode(() => r(0x01).capacity())).toBe('CAPACITY_INVALID');
    expect(proofErrorCode(() => r(0x81, 0x20).capacity())).toBe('CAPACITY_INVALID'); // 4097
    expect(r(0x80, 0x20).capacity()).toBe(4096);
    expect(proofErrorCode(() => r(0x00).chunkSize(4))).toBe('CHUNK_SIZE_INVALID');
    expect(proofErrorCode(() => r(0x05).chunkSize(4))).toBe('CHUNK_SIZE_INVALID');
  });

  it('returns views, not copies', () => {
    const buf = Uint8Array.of(0x02, 0x61, 0x62);
    const key = new Reader(buf).key();
    expect(key.buffer).toBe(buf.buffer);
  });

  it('throws ProofError instances with name and code', () => {
    try {
      decodeVarint(Uint8Array.of(0x80));
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ProofError);
      expect((err as ProofError).name).toBe('ProofError');
      expect((err as ProofError).code).toBe('TRUNCATED');
    }
  });
});

describe('compareBytes', () => {
  it('is memcmp order with a proper prefix first', () => {
    const c = (a: number[], b: number[]) => Math.sign(compareBytes(Uint8Array.from(a), Uint8Array.from(b)));
    expect(c([1], [1, 0])).toBe(-1);
    expect(c([1, 0], [1])).toBe(1);
    expect(c([2], [1, 255])).toBe(1);
    expect(c([], [])).toBe(0);
    expect(c([0xff], [0x7f])).toBe(1);
  });
});
