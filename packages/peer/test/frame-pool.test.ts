// Response frames are written into reused buffers (src/frame-pool.ts): a
// buffer goes back to the pool only once the transport reports the frame
// written, so no frame changes while it waits to be sent, and a buffer is
// never in two frames at once.

import { decodeResponse, encodeFrame, encodeRequest, FrameDecoder, Kind, MAX_RESPONSE_BYTES } from '@bpavl/light-client/wire';
import { verifyChunk } from '@bpavl/light-client/verify';
import type { Snapshot } from '@bpavl/wasm';
import { beforeAll, describe, expect, it } from 'vitest';
import { FRAME_POOL_BUFFER_BYTES, FramePool } from '../src/frame-pool.ts';
import { SyncServer } from '../src/server.ts';
import { StaticTreeSource } from '../src/source.ts';
import { MemoryConnection, smallTree, wasmReady } from './support.ts';

let big: Snapshot;

beforeAll(async () => {
  await wasmReady();
  big = smallTree(3000, 256).tree.head(); // chunks of ≈ 70 … 140 KB
});

/** Keeps every frame sent (the very bytes, not a copy) and its `written` callback, for the test to call. */
class HoldingConnection extends MemoryConnection {
  readonly held: { frame: Uint8Array; copy: Uint8Array; written: (() => void) | undefined }[] = [];
  override send(bytes: Uint8Array, written?: () => void): void {
    this.held.push({ frame: bytes, copy: bytes.slice(), written });
    super.send(bytes);
  }
}

describe('FramePool', () => {
  it('reuses a released buffer, once, and never pools an oversized frame', () => {
    const pool = new FramePool(1024, 2);
    const a = pool.take(100);
    expect(a.bytes.length).toBeGreaterThanOrEqual(100);
    a.release!();
    a.release!(); // a second release must not put the buffer in twice
    expect(pool.freeCount).toBe(1);
    const b = pool.take(100);
    const c = pool.take(100);
    expect(b.bytes.buffer).toBe(a.bytes.buffer);
    expect(c.bytes.buffer).not.toBe(b.bytes.buffer);
    const big = pool.take(1025);
    expect(big.release).toBeUndefined();
    expect(big.bytes.length).toBe(1025);
    for (const s of [b, c, pool.take(10)]) s.release!();
    expect(pool.freeCount).toBe(2); // at most maxFree kept
  });
});

describe('SyncServer frames in pooled buffers', () => {
  const ask = (conn: MemoryConnection, ids: number[]) => {
    for (const id of ids) conn.events.bytes(encodeFrame(encodeRequest({ id, kind: Kind.Chunk, root: big.root, index: id % big.chunkCount })));
  };

  /** Decodes one whole frame and verifies its chunk (by the id's index). */
  const check = (frame: Uint8Array) => {
    const [body] = new FrameDecoder(MAX_RESPONSE_BYTES).push(frame.slice());
    const res = decodeResponse(body!);
    verifyChunk(big.root, res.id % big.chunkCount, res.payload);
  };

  it('does not reuse a buffer before the frame is written, then reuses it', async () => {
    const server = new SyncServer(new StaticTreeSource([big]));
    const conn = new HoldingConnection();
    conn.autoFlush = false;
    server.handleConnection(conn);
    const first = Array.from({ length: 6 }, (_, i) => i); // under the output high-water mark (1 MiB)
    ask(conn, first);
    expect(await conn.client.waitResponses(first.length, 5000)).toBe(true);
    const pending = conn.held.splice(0);
    expect(pending).toHaveLength(first.length);
    // Nothing was written yet: every frame has its own buffer, unchanged.
    expect(new Set(pending.map((h) => h.frame.buffer)).size).toBe(pending.length);
    for (const h of pending) {
      expect(h.frame.length).toBeLessThanOrEqual(FRAME_POOL_BUFFER_BYTES);
      expect(h.written).toBeTypeOf('function');
      expect(Buffer.compare(h.frame, h.copy)).toBe(0);
      check(h.frame);
    }
    // Written (twice, to be sure a double report is harmless): the buffers come back.
    for (const h of pending) {
      h.written!();
      h.written!();
    }
    expect(server.frames.freeCount).toBe(pending.length);
    const second = Array.from({ length: 6 }, (_, i) => 100 + i);
    conn.flush();
    ask(conn, second);
    expect(await conn.client.waitResponses(first.length + second.length, 5000)).toBe(true);
    const again = conn.held.splice(0);
    const reused = new Set(pending.map((h) => h.frame.buffer));
    expect(again.every((h) => reused.has(h.frame.buffer))).toBe(true);
    expect(new Set(again.map((h) => h.frame.buffer)).size).toBe(again.length);
    for (const h of again) {
      expect(Buffer.compare(h.frame, h.copy)).toBe(0);
      check(h.frame);
    }
    server.close();
  });
});
