// An honest query peer (spec/wire.md) that uses its freedom to answer BUSY:
// PROOF and MULTIPROOF from a @bpavl/wasm tree, except that the first
// `busyFirst` MULTIPROOF requests of each connection are answered BUSY
// ("retry later"). Counts the requests it gets, by kind.
import type { Tree } from '@bpavl/wasm';
import { WebSocketServer } from 'ws';
import { decodeRequest, encodeProofPayload, encodeResponseFrame, FrameDecoder, Kind, MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES, Status } from '../../src/wire/index.js';

export interface BusyProofPeer {
  url: string;
  /** Requests received, by kind. */
  requests: Map<Kind, number>;
  close(): Promise<void>;
}

export async function startBusyProofPeer(tree: Tree, busyFirst: number): Promise<BusyProofPeer> {
  const snap = tree.head();
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((r) => wss.once('listening', () => r()));
  const requests = new Map<Kind, number>();
  wss.on('connection', (ws) => {
    const decoder = new FrameDecoder(MAX_REQUEST_BYTES);
    let busyLeft = busyFirst;
    ws.on('message', (data: Buffer) => {
      for (const body of decoder.push(new Uint8Array(data))) {
        const req = decodeRequest(body);
        requests.set(req.kind, (requests.get(req.kind) ?? 0) + 1);
        const head = { id: req.id, kind: req.kind };
        if (req.kind === Kind.Multiproof && busyLeft > 0) {
          busyLeft--;
          ws.send(encodeResponseFrame({ ...head, status: Status.Busy }));
        } else if (req.kind === Kind.Multiproof) {
          ws.send(encodeResponseFrame({ ...head, status: Status.Ok }, snap.proveMulti([...req.keys], MAX_RESPONSE_BYTES - 64)));
        } else if (req.kind === Kind.Proof) {
          const value = snap.get(req.key);
          const payload = value === undefined ? { present: false, proof: snap.proveAbsence(req.key) } : { present: true, value, proof: snap.proveExistence(req.key) };
          ws.send(encodeResponseFrame({ ...head, status: Status.Ok }, encodeProofPayload(payload)));
        } else ws.send(encodeResponseFrame({ ...head, status: Status.BadRequest }));
      }
    });
  });
  return {
    url: `ws://127.0.0.1:${(wss.address() as { port: number }).port}`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        for (const s of wss.clients) s.terminate();
        wss.close(() => r());
      }),
  };
}
