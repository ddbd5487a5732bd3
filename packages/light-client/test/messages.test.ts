// spec/wire.md, "What the client checks": the frames of a message are read
// one at a time and the first bad one decides (the rest is never looked
// at, so a message of millions of tiny frames costs one); over a real
// WebSocket, a message longer than one maximal response, or a text
// message, is MESSAGE_MALFORMED, and a maximal response is taken.

import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import { FramedConnection } from '../src/transport/framed.js';
import { connectWebSocket } from '../src/transport/ws.js';
import { Kind, MAX_RESPONSE_BYTES, MAX_RESPONSE_MESSAGE_BYTES, Status } from '../src/wire/constants.js';
import { encodeResponseFrame } from '../src/wire/messages.js';

const chunk0 = { kind: Kind.Chunk, root: new Uint8Array(32), index: 0 } as const;

/** A BUSY answer to request `id` (< 128). */
const busyTo = (id: number) => encodeResponseFrame({ id, kind: Kind.Chunk, status: Status.Busy });

describe('the frames of one message', () => {
  it('are checked in order: the first fault gives the code, and nothing after it is read', async () => {
    const conn = new FramedConnection('test', { send: () => {}, close: () => {} });
    let reason: Error | undefined;
    conn.onClose((e) => (reason = e));
    const answer = conn.request(chunk0, { timeoutMs: 5000 });
    // An answer to request 0, one to request 5 (never sent: MESSAGE_MALFORMED), then a non-minimal prefix
    // (FRAME_MALFORMED) and 4 MiB of empty frames, each of which would be a fault of its own.
    const head = Uint8Array.of(...busyTo(0), ...busyTo(5), 0x81, 0x00);
    const message = new Uint8Array(head.length + (4 << 20));
    message.set(head);
    conn.receive(message);
    expect((await answer).status).toBe(Status.Busy);
    expect(reason).toMatchObject({ name: 'WireError', code: 'MESSAGE_MALFORMED' });
  });
});

describe('WebSocket messages from a peer', () => {
  let wss: WebSocketServer | undefined;
  afterEach(async () => {
    await new Promise((r) => wss?.close(r));
    wss = undefined;
  });

  /** A server that answers the n-th message it receives with `replies[n]` (bytes, or a text message). */
  async function server(replies: (Uint8Array | string)[]): Promise<string> {
    wss = new WebSocketServer({ host: '127.0.0.1', port: 0, maxPayload: 1 << 20 });
    await new Promise<void>((r) => wss!.once('listening', () => r()));
    wss.on('connection', (ws: WebSocket) => {
      let n = 0;
      ws.on('message', () => {
        const reply = replies[n++];
        if (reply !== undefined) ws.send(reply, { binary: typeof reply !== 'string' });
      });
    });
    return `ws://127.0.0.1:${(wss.address() as { port: number }).port}`;
  }

  it('one maximal response is taken; a message one byte longer is MESSAGE_MALFORMED', async () => {
    // A body of exactly 8 MiB: version, kind, id 0, status, and the payload.
    const maximal = encodeResponseFrame({ id: 0, kind: Kind.Chunk, status: Status.Ok }, new Uint8Array(MAX_RESPONSE_BYTES - 4));
    expect(maximal.length).toBe(MAX_RESPONSE_MESSAGE_BYTES);
    const longer = new Uint8Array(MAX_RESPONSE_MESSAGE_BYTES + 1);
    longer.set(busyTo(1));
    const conn = await connectWebSocket(await server([maximal, longer]));
    let reason: Error | undefined;
    conn.onClose((e) => (reason = e));
    const res = await conn.request(chunk0, { timeoutMs: 5000 });
    expect(res.payload.length).toBe(MAX_RESPONSE_BYTES - 4);
    await expect(conn.request(chunk0, { timeoutMs: 5000 })).rejects.toMatchObject({ code: 'MESSAGE_MALFORMED' });
    expect(reason).toMatchObject({ name: 'WireError', code: 'MESSAGE_MALFORMED' });
  });

  it('in Node, the client offers no compression and refuses a message past the cap as it arrives', async () => {
    let extensions: string | undefined = 'not seen';
    const huge = new Uint8Array(16 << 20);
    huge.set(busyTo(0));
    const url = await server([huge]);
    wss!.on('headers', (_headers, req) => (extensions = req.headers['sec-websocket-extensions']));
    const conn = await connectWebSocket(url);
    expect(extensions).toBeUndefined();
    let reason: Error | undefined;
    conn.onClose((e) => (reason = e));
    await expect(conn.request(chunk0, { timeoutMs: 5000 })).rejects.toMatchObject({ code: 'MESSAGE_MALFORMED' });
    // Refused by `ws` at its cap (one maximal response), not after the runtime buffered 16 MiB.
    expect(reason?.message).toContain('WS_ERR_UNSUPPORTED_MESSAGE_LENGTH');
  });

  it('a text message is MESSAGE_MALFORMED', async () => {
    const conn = await connectWebSocket(await server(['\u0004\u0001\u0001\u0000\u0003']));
    await expect(conn.request(chunk0, { timeoutMs: 5000 })).rejects.toMatchObject({ code: 'MESSAGE_MALFORMED' });
  });
});
