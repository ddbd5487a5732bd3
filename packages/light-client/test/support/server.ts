// A minimal serving peer for the sync engine's own tests: honest CHUNK
// answers from a @bpavl/wasm tree, plus a few ways to lie. The real peer
// (packages/peer) is exercised by the integration suites in tests/.
import { Tree } from '@bpavl/wasm';
import { WebSocketServer, type WebSocket } from 'ws';
import { decodeRequest, encodeFrame, encodeResponse, FrameDecoder, Kind, MAX_REQUEST_BYTES, Status } from '../../src/wire/index.js';

export type Misbehaviour = 'honest' | 'corrupt' | 'wrong-index' | 'silent' | 'busy';

export interface TestPeer {
  url: string;
  requests: number;
  sockets: Set<WebSocket>;
  close(): Promise<void>;
}

/** A tree of `n` entries with 64-byte values, committed. */
export function buildTree(n: number, capacity: number, seed = 1): { tree: Tree; root: Uint8Array } {
  const tree = new Tree(capacity);
  for (let i = 0; i < n; i++) {
    const key = new TextEncoder().encode(`key-${seed}-${String(i * 7919 % n).padStart(8, '0')}`);
    tree.insert(key, new Uint8Array(64).fill((i * seed) & 0xff));
  }
  return { tree, root: tree.commit().root };
}

export async function startPeer(tree: Tree, mode: Misbehaviour = 'honest'): Promise<TestPeer> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((r) => wss.once('listening', () => r()));
  const root = tree.head().root;
  const peer: TestPeer = {
    url: `ws://127.0.0.1:${(wss.address() as { port: number }).port}`,
    requests: 0,
    sockets: new Set(),
    close: () =>
      new Promise<void>((r) => {
        for (const s of peer.sockets) s.terminate();
        wss.close(() => r());
      }),
  };
  wss.on('connection', (ws) => {
    peer.sockets.add(ws);
    ws.on('close', () => peer.sockets.delete(ws));
    const decoder = new FrameDecoder(MAX_REQUEST_BYTES);
    ws.on('message', (data: Buffer) => {
      for (const body of decoder.push(new Uint8Array(data))) {
        const req = decodeRequest(body);
        if (req.kind !== Kind.Chunk) continue;
        peer.requests += 1;
        if (mode === 'silent') continue;
        const head = { id: req.id, kind: req.kind };
        if (mode === 'busy') {
          ws.send(encodeFrame(encodeResponse({ ...head, status: Status.Busy })));
          continue;
        }
        if (Buffer.compare(Buffer.from(req.root), Buffer.from(root)) !== 0) {
          ws.send(encodeFrame(encodeResponse({ ...head, status: Status.UnknownRoot })));
          continue;
        }
        const count = tree.chunkCount;
        if (req.index >= count) {
          ws.send(encodeFrame(encodeResponse({ ...head, status: Status.OutOfRange })));
          continue;
        }
        let env = tree.head().exportChunk(mode === 'wrong-index' ? (req.index + 1) % count : req.index);
        if (mode === 'corrupt') {
          env = env.slice();
          env[Math.floor(env.length / 2)]! ^= 0x01;
        }
        ws.send(encodeFrame(encodeResponse({ ...head, status: Status.Ok }, env)));
      }
    });
  });
  return peer;
}
