/**
 * SHA-256: noble's (`@noble/hashes`, pinned), with one change in its block
 * function, so that it runs as fast in Chromium as in Node.
 *
 * Why: noble keeps the eight state words in object fields and starts each
 * block with `let { A, …, H } = this`. V8 in Chromium uses pointer
 * compression, whose small integers have 31 bits, so fields holding 32-bit
 * words hold heap numbers there; the 64 rounds then run in float64. Measured
 * on the CI machine (noble 2.4.0, Chromium 156, Node 24): noble's SHA-256 in
 * Chromium at 0.36–0.39× of Node. Loading the state with `| 0` keeps the
 * rounds in int32: 0.95×. Everything else (buffering, padding, output,
 * cloning) is noble's own, through the subclass. Tested against noble's
 * `sha256` (test/sha256.test.ts); worth proposing upstream.
 * @module
 */

import { _SHA256 } from '@noble/hashes/sha2.js';

// prettier-ignore
const K = /* @__PURE__ */ Uint32Array.from([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const W = /* @__PURE__ */ new Uint32Array(64);

const rotr = (w: number, s: number): number => (w << (32 - s)) | (w >>> s);

/** noble's SHA-256 whose block function reads its state as int32. */
export class Sha256 extends _SHA256 {
  protected override process(view: DataView, offset: number): void {
    for (let i = 0; i < 16; i++, offset += 4) W[i] = view.getUint32(offset, false);
    for (let i = 16; i < 64; i++) {
      const w15 = W[i - 15];
      const w2 = W[i - 2];
      const s0 = rotr(w15, 7) ^ rotr(w15, 18) ^ (w15 >>> 3);
      const s1 = rotr(w2, 17) ^ rotr(w2, 19) ^ (w2 >>> 10);
      W[i] = (s1 + W[i - 7] + s0 + W[i - 16]) | 0;
    }
    // The `| 0` is the whole point (see the module comment).
    let A = this.A | 0, B = this.B | 0, C = this.C | 0, D = this.D | 0;
    let E = this.E | 0, F = this.F | 0, G = this.G | 0, H = this.H | 0;
    for (let i = 0; i < 64; i++) {
      const sigma1 = rotr(E, 6) ^ rotr(E, 11) ^ rotr(E, 25);
      const T1 = (H + sigma1 + ((E & F) ^ (~E & G)) + K[i] + W[i]) | 0;
      const sigma0 = rotr(A, 2) ^ rotr(A, 13) ^ rotr(A, 22);
      const T2 = (sigma0 + ((A & B) ^ (A & C) ^ (B & C))) | 0;
      H = G;
      G = F;
      F = E;
      E = (D + T1) | 0;
      D = C;
      C = B;
      B = A;
      A = (T1 + T2) | 0;
    }
    this.set(A + this.A, B + this.B, C + this.C, D + this.D, E + this.E, F + this.F, G + this.G, H + this.H);
  }

  protected override roundClean(): void {
    W.fill(0);
  }
}
