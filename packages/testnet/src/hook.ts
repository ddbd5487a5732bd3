/**
 * The test network's server hook: lies (`./byzantine.ts`), the Baseline
 * extension (`./baseline.ts`) and link emulation (`./link.ts`) plugged into
 * a serving peer's `SyncServer` through its `ServerHook`.
 * @module
 */

import { encodeFrame, encodeResponse, encodeResponseFrame, Kind, MAX_RESPONSE_BYTES, Status } from '@bpavl/light-client/wire';
import type { Answer, IncomingRequest, Reply, ServerHook } from '../../peer/src/hook.ts';
import { BaselineKind, type BaselineRequest, type BaselineServed, decodeBaselineRequest, encodeBaselineRootsPayload, isBaselineBody } from './baseline.ts';
import type { Byzantine, Lie } from './byzantine.ts';
import { isShaping, type LinkOptions, shapeConnection } from './link.ts';

/** What a test peer adds to an honest one; each part is optional. */
export interface TestnetOptions {
  /** Lie on some answers. */
  byzantine?: Byzantine;
  /** Also serve this Baseline state (kinds 5 and 6, `spec/benchmarks.md`). */
  baseline?: BaselineServed;
  /** Emulate a wide-area link on every connection's output. */
  link?: LinkOptions;
  /** Answer the catch-up kinds `BAD_REQUEST`, as a peer from before them (`spec/wire.md`, "Catch-up"). */
  predateCatchUp?: boolean;
}

/** The kinds a peer from before catch-up does not know. */
const CATCHUP_KINDS: ReadonlySet<number> = new Set([Kind.Nodes, Kind.Leaves, Kind.Entries, Kind.MultiLeaves, Kind.MultiEntries]);

/**
 * The `ServerHook` for `opts`, or undefined when nothing is added.
 *
 * @example
 * ```ts
 * const server = new SyncServer(source, { hook: testnetHook({ byzantine: new Byzantine({ mode: 'busy', rate: 1, seed: 1n }) }) });
 * ```
 */
export function testnetHook(opts: TestnetOptions): ServerHook | undefined {
  const { byzantine, baseline, predateCatchUp } = opts;
  const link = isShaping(opts.link) ? opts.link : undefined;
  if (byzantine === undefined && baseline === undefined && link === undefined && !predateCatchUp) return undefined;
  return {
    ...(link ? { connection: (conn) => shapeConnection(conn, link) } : {}),
    reply(req, honest) {
      if (predateCatchUp && CATCHUP_KINDS.has(req.kind)) return { kind: 'answer', status: Status.BadRequest };
      let answer = honest;
      let lie: Lie | undefined;
      if (baseline !== undefined && isBaselineBody(req.body)) {
        let breq: BaselineRequest;
        try {
          breq = decodeBaselineRequest(req.body);
        } catch {
          return undefined; // the honest BAD_REQUEST
        }
        answer = answerBaseline(baseline, breq);
        if (answer.status === Status.Ok && byzantine !== undefined) lie = byzantine.decideBaseline(breq, baseline, answer.payload!);
      } else if (byzantine !== undefined && req.request !== undefined && honest.status === Status.Ok) {
        lie = byzantine.decide(req.request, honest.tree, honest.payload!);
      }
      return lie === undefined ? (answer === honest ? undefined : { kind: 'answer', ...answer }) : lieReply(lie, req, answer);
    },
  };
}

/** The honest answer to a Baseline request (kinds 5 and 6). */
function answerBaseline(baseline: BaselineServed, req: BaselineRequest): Answer {
  if (req.kind === BaselineKind.Roots) {
    return { status: Status.Ok, payload: encodeBaselineRootsPayload([{ root: baseline.root, chunkCount: baseline.chunks.length }]) };
  }
  if (!equalBytes(req.root, baseline.root)) return { status: Status.UnknownRoot };
  if (req.index >= baseline.chunks.length) return { status: Status.OutOfRange };
  const payload = baseline.chunks[req.index]!;
  // The header is at most 11 bytes (version, kind, 8-byte id, status).
  if (payload.length + 11 > MAX_RESPONSE_BYTES) return { status: Status.Busy };
  return { status: Status.Ok, payload };
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** How the server carries out `lie` on its answer to `req`. */
function lieReply(lie: Lie, req: IncomingRequest, answer: Answer): Reply {
  const head = { id: req.id, kind: req.kind as Kind };
  const honest: Reply = { kind: 'answer', status: answer.status, payload: answer.payload };
  switch (lie.kind) {
    case 'payload':
      return { kind: 'answer', status: Status.Ok, payload: lie.payload };
    case 'busy':
      return { kind: 'answer', status: Status.Busy };
    case 'silent':
      return { kind: 'drop' };
    case 'slow':
      return { kind: 'delay', ms: lie.ms, reply: honest };
    case 'twice': {
      const first = encodeResponseFrame({ ...head, status: answer.status }, answer.payload);
      const second = encodeResponseFrame({ ...head, status: Status.Ok }, lie.payload);
      const both = new Uint8Array(first.length + second.length);
      both.set(first, 0);
      both.set(second, first.length);
      return { kind: 'raw', bytes: both, then: 'continue' };
    }
    case 'truncate': {
      const body = encodeResponse({ ...head, status: answer.status }, answer.payload);
      const frame = encodeFrame(body);
      return { kind: 'raw', bytes: frame.subarray(0, frame.length - body.length + (body.length >> 1)), then: 'mute' };
    }
    case 'oversize': {
      const prefix = [0x81, 0x80, 0x80, 0x04]; // uvarint(8 MiB + 1)
      const body = encodeResponse({ ...head, status: answer.status }, answer.payload);
      const out = new Uint8Array(prefix.length + Math.min(1024, body.length));
      out.set(prefix, 0);
      out.set(body.subarray(0, out.length - prefix.length), prefix.length);
      return { kind: 'raw', bytes: out, then: 'mute' };
    }
    case 'disconnect': {
      const frame = encodeFrame(encodeResponse({ ...head, status: answer.status }, answer.payload));
      return { kind: 'raw', bytes: frame.subarray(0, frame.length >> 1), then: 'close' };
    }
  }
}
