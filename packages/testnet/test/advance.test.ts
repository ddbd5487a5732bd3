// The demo's moving head (src/advance.ts, `serve --advance-on-stdin`): peers
// advanced by the same batches agree on every root; each serves the newest
// --keep-versions versions; and a stored state catches up through them, to
// the root and to the values the batches wrote.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catchUp, syncState } from '../../light-client/src/sync/index.js';
import { decodeRootsPayload } from '../../light-client/src/wire/messages.js';
import { Kind, Status } from '../../light-client/src/wire/constants.js';
import { MovingHead, toHex } from '../../peer/src/source.ts';
import { buildWorkloadTree, headWrites } from '../../peer/src/workload.ts';
import { openState } from '../../store/src/index.ts';
import { advanceHead } from '../src/advance.ts';
import { sleep, spawnTestnet, wasmReady, wsClient } from './support.ts';

beforeAll(wasmReady);

const fromHex = (h: string) => Uint8Array.from(Buffer.from(h, 'hex'));

describe('advanceHead', () => {
  it('two trees of one workload advanced by the same batches commit the same roots; the source serves the newest `keep` and frees the others', () => {
    const opts = { seed: 0n, entryCount: 3000, writes: 40, keep: 3 };
    const a = buildWorkloadTree({ entryCount: 3000, seed: 0n }, 16);
    const b = buildWorkloadTree({ entryCount: 3000, seed: 0n }, 16);
    const first = a.head();
    const firstRoot = first.root;
    const source = new MovingHead([first]);
    const other = new MovingHead([b.head()]);
    const roots: string[] = [];
    for (let step = 1; step <= 4; step++) {
      const x = advanceHead(a, source, opts, step);
      const y = advanceHead(b, other, opts, step);
      expect(x).toEqual(y);
      expect(x.version).toBe(step + 1);
      roots.push(x.root);
    }
    expect(new Set(roots).size).toBe(4);
    expect(source.trees().map((t) => toHex(t.root))).toEqual(roots.slice(-3));
    expect(source.lookup(firstRoot)).toBeUndefined();
    // A version no longer served is freed at once.
    expect(() => first.root).toThrow();
    expect(source.lookup(fromHex(roots[0]!))).toBeUndefined();
    expect(source.lookup(fromHex(roots[3]!))?.version).toBe(5);
  });
});

describe('bpavl-testnet serve --advance-on-stdin', () => {
  const dir = mkdtempSync(join(tmpdir(), 'bpavl-advance-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('usage errors exit 2', async () => {
    const cases: [string[], RegExp][] = [
      [['serve', '--db', dir, '--advance-on-stdin'], /--advance-on-stdin needs a tree in memory/],
      [['serve', '--advance-writes', '5'], /need --advance-on-stdin/],
      [['serve', '--advance-on-stdin', '--keep-versions', '0'], /--keep-versions must be in 1/],
    ];
    for (const [args, message] of cases) {
      const r = await spawnTestnet(args).done;
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(message);
    }
  }, 60_000);

  it('two peers agree on every new root, serve the newest --keep-versions, and a stored state catches up through them', async () => {
    const args = ['serve', '--json', '--entries', '3000', '--chunk', '16', '--libp2p-port', 'off', '--exit-on-stdin-end'];
    const moving = ['--advance-on-stdin', '--advance-writes', '30', '--keep-versions', '2'];
    // One of them lies on every answer, the catch-up's included: it advances all the same.
    const peers = [spawnTestnet([...args, ...moving], 'pipe', 120_000), spawnTestnet([...args, ...moving, '--byzantine', 'corrupt-value'], 'pipe', 120_000)];
    const lines = async (p: (typeof peers)[number], n: number) => {
      const until = Date.now() + 30_000;
      while (p.stdout().split('\n').length <= n && Date.now() < until) await sleep(20);
      return p.stdout().split('\n').slice(0, n).map((l) => JSON.parse(l));
    };
    try {
      const infos = await Promise.all(peers.map(async (p) => (await lines(p, 1))[0]));
      expect(infos[0].advance).toEqual({ writes: 30, keep: 2 });
      const first = infos[0].root as string;
      expect(infos[1].root).toBe(first);

      // The state at version 1, synced from them into a store on disk.
      const state = await openState({ path: join(dir, 'state') });
      await syncState({ root: fromHex(first), peers: infos.map((i) => i.ws), store: state });

      for (const p of peers) for (let i = 0; i < 3; i++) p.child.stdin!.write('advance\n');
      const advanced = await Promise.all(peers.map(async (p) => (await lines(p, 4)).slice(1)));
      expect(advanced[0]!.map((a) => a.step)).toEqual([1, 2, 3]);
      expect(advanced[1]).toEqual(advanced[0]);
      const newest = advanced[0]!.at(-1)!;

      // Served: the newest two versions, listed by ROOTS; the older ones are UNKNOWN_ROOT.
      const client = await wsClient(infos[0].ws);
      const roots = decodeRootsPayload((await client.request({ kind: Kind.Roots })).payload).map((r) => toHex(r.root));
      expect(roots).toEqual(advanced[0]!.slice(-2).map((a) => a.root));
      expect((await client.request({ kind: Kind.Chunk, root: fromHex(first), index: 0 })).status).toBe(Status.UnknownRoot);
      client.ws.close();

      // From version 1 to the newest root, past the lying peer: its values are the last batch's.
      const r = await catchUp({ store: state, root: fromHex(newest.root), peers: infos.map((i) => i.ws) });
      expect(toHex(state.head()!.root)).toBe(newest.root);
      expect(state.head()!.entryCount).toBe(newest.entryCount);
      expect(r.banned.map((b) => b.peer)).toEqual([infos[1].ws]);
      const last = headWrites(0n, 3000, 3, 30);
      for (const [i, w] of last.entries()) {
        // Only what no later write of the batch changed.
        if (last.slice(i + 1).some((x) => Buffer.compare(x.key, w.key) === 0)) continue;
        expect(await state.get(w.key)).toEqual(w.value);
      }
      await state.close();
    } finally {
      for (const p of peers) p.child.stdin!.end();
      for (const p of peers) expect((await p.done).code).toBe(0);
    }
  }, 120_000);
});
