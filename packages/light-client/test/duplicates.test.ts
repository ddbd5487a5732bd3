// spec/wire.md, "Duplicates": a second response to a request already
// answered on the same connection is RESPONSE_DUPLICATE (the connection is
// dropped); a late answer to a request that timed out is accepted once.
// The bytes are the spec's worked example.

import { describe, expect, it } from 'vitest';
import { FramedConnection } from '../src/transport/framed.js';
import { Kind, Status } from '../src/wire/constants.js';
import type { Response } from '../src/wire/messages.js';

/** A BUSY answer to CHUNK request 0: length 4, version 1, kind 1, id 0, status 3. */
const BUSY_TO_0 = Uint8Array.of(0x04, 0x01, 0x01, 0x00, 0x03);

function connection() {
  const sent: Uint8Array[] = [];
  let closed = false;
  const conn = new FramedConnection('test', { send: (b) => sent.push(b), close: () => (closed = true) });
  let reason: Error | undefined;
  conn.onClose((e) => (reason = e));
  return { conn, sent, isClosed: () => closed, reason: () => reason };
}

const chunk0 = { kind: Kind.Chunk, root: new Uint8Array(32), index: 0 } as const;

describe('duplicate responses', () => {
  it('a second response with the same id closes the connection with RESPONSE_DUPLICATE', async () => {
    const { conn, isClosed, reason } = connection();
    const answer = conn.request(chunk0, { timeoutMs: 5000 });
    conn.receive(Uint8Array.of(...BUSY_TO_0, ...BUSY_TO_0));
    const res: Response = await answer;
    expect(res.status).toBe(Status.Busy);
    expect(isClosed()).toBe(true);
    expect(reason()).toMatchObject({ name: 'WireError', code: 'RESPONSE_DUPLICATE' });
  });

  it('a late answer to a timed-out request is accepted once; a second copy is a duplicate', async () => {
    const { conn, isClosed, reason } = connection();
    await expect(conn.request(chunk0, { timeoutMs: 10 })).rejects.toMatchObject({ code: 'TIMEOUT' });
    conn.receive(BUSY_TO_0);
    expect(isClosed()).toBe(false);
    conn.receive(BUSY_TO_0);
    expect(reason()).toMatchObject({ code: 'RESPONSE_DUPLICATE' });
  });

  it('an answer to an id never sent is MESSAGE_MALFORMED', () => {
    const { conn, reason } = connection();
    conn.receive(BUSY_TO_0);
    expect(reason()).toMatchObject({ code: 'MESSAGE_MALFORMED' });
  });
});
