// In-memory peer connections for the query client's tests (no sockets):
// each request is answered by a function of the peer's address.

import { afterEach, vi } from 'vitest';
import { createClient, type Client } from '../../src/client/index.js';
import type { Connect, PeerConnection, RequestBody } from '../../src/transport/types.js';
import { Kind, MAX_RESPONSE_BYTES, Status } from '../../src/wire/constants.js';
import type { Response } from '../../src/wire/messages.js';
import { buildTree } from './server.js';

/** A response that never comes. */
export const never = () => new Promise<Response>(() => {});

/** Connections that answer each request with `answer(address, req)`; by default no request is ever answered. */
export function fakeConnect(answer: (address: string, req: RequestBody) => Promise<Response> = never): Connect {
  return async (address) => {
    const conn: PeerConnection = {
      address,
      isClosed: false,
      close() {},
      onClose() {},
      request: (req) => answer(address, req),
    };
    return conn;
  };
}

/** A tree's honest MULTIPROOF answers, for the peers `honest` names (the others never answer); 40 of its keys. */
export function honestAnswers(honest: ReadonlySet<string>) {
  const { tree, root } = buildTree(300, 16);
  const snap = tree.head();
  const keys = Array.from({ length: 40 }, (_, i) => new TextEncoder().encode(`key-1-${String(i * 7).padStart(8, '0')}`));
  /** The honest answer to a MULTIPROOF request. */
  const prove = (req: RequestBody): Promise<Response> => {
    if (req.kind !== Kind.Multiproof) return never();
    return Promise.resolve({ id: 0, kind: Kind.Multiproof, status: Status.Ok, payload: snap.proveMulti([...req.keys], MAX_RESPONSE_BYTES - 64) });
  };
  const answer = (address: string, req: RequestBody): Promise<Response> => (honest.has(address) ? prove(req) : never());
  return { root, keys, answer, prove };
}

/**
 * `createClient` for a test file: each client it makes is closed after each
 * test, and vitest's real clock restored (a test may take the fake one).
 */
export function trackedClients(): (opts: Parameters<typeof createClient>[0]) => Client {
  const clients: Client[] = [];
  afterEach(() => {
    for (const c of clients.splice(0)) c.close();
    vi.useRealTimers();
  });
  return (opts) => {
    const c = createClient(opts);
    clients.push(c);
    return c;
  };
}
