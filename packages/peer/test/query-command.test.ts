// `bpavl get` and `bpavl range` with --peer, as a user runs them (node
// bin/bpavl.mjs …), against in-process peers on 127.0.0.1: one lying, one
// honest. The answers must be the tree's; the liar is reported banned.

import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Byzantine } from '../../testnet/src/byzantine.ts';
import { startPeer as startTestPeer } from '../../testnet/src/peer.ts';
import { startPeer, type RunningPeer } from '../src/peer.ts';
import { StaticTreeSource } from '../src/source.ts';
import { buildWorkloadTree, workloadEntry } from '../src/workload.ts';
import { spawnCli, wasmReady } from './support.ts';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const SEED = 5n;
const N = 500;
let root: string;
let liar: RunningPeer;
let honest: RunningPeer;
const children: ChildProcess[] = [];

beforeAll(async () => {
  await wasmReady();
  const snapshot = buildWorkloadTree({ entryCount: N, seed: SEED }, 32).head();
  root = hex(snapshot.root);
  const source = new StaticTreeSource([snapshot]);
  liar = await startTestPeer(source, { libp2pPort: null, byzantine: new Byzantine({ mode: 'corrupt-proof', rate: 1, seed: 1n }) });
  honest = await startPeer(source, { libp2pPort: null });
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await Promise.all([liar?.close(), honest?.close()]);
});

function run(args: string[]) {
  const cli = spawnCli(args, 'ignore', 30_000);
  children.push(cli.child);
  return cli.done;
}

const sorted = Array.from({ length: N }, (_, i) => workloadEntry(SEED, i)).sort(([a], [b]) => Buffer.compare(a, b));

describe('bpavl get / range --peer', () => {
  it('get: present and absent keys through a liar and an honest peer; the liar is banned', async () => {
    const [k, v] = workloadEntry(SEED, 7);
    const absent = 'ff'.repeat(33);
    const r = await run(['get', '--root', root, '--peer', liar.wsUrl!, '--peer', honest.wsUrl!, '--json', hex(k), absent]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      root,
      results: [{ key: hex(k), value: hex(v) }, { key: absent, value: null }],
      banned: [{ peer: liar.wsUrl, code: 'ROOT_MISMATCH' }],
    });
    const text = await run(['get', '--root', root, '--peer', honest.wsUrl!, hex(k)]);
    expect(text.stdout).toBe(`${hex(k)} ${hex(v)}\n`);
  }, 60_000);

  it('range: pages of 7 resumed to the end of [START, END)', async () => {
    const [start, end] = [sorted[20]![0], sorted[61]![0]];
    const r = await run(['range', '--root', root, '--peer', honest.wsUrl!, '--peer', liar.wsUrl!, '--page', '7', '--json', hex(start), hex(end)]);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.entries).toEqual(sorted.slice(20, 61).map(([k, v]) => ({ key: hex(k), value: hex(v) })));
    expect(out.pages).toBe(6);
  }, 60_000);

  it('only liars: exit 1 with NO_HONEST_PEERS (with --json, a JSON line naming the liar); bad arguments: exit 2; --help: exit 0', async () => {
    const r = await run(['get', '--root', root, '--peer', liar.wsUrl!, '--deadline', '3000', hex(workloadEntry(SEED, 1)[0])]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('NO_HONEST_PEERS');
    for (const cmd of ['get', 'range']) {
      const json = await run([cmd, '--root', root, '--peer', liar.wsUrl!, '--deadline', '3000', '--json', ...(cmd === 'get' ? [hex(workloadEntry(SEED, 1)[0])] : [])]);
      expect(json.code).toBe(1);
      expect(JSON.parse(json.stdout), cmd).toMatchObject({ error: 'NO_HONEST_PEERS', banned: [{ peer: liar.wsUrl, code: 'ROOT_MISMATCH' }] });
    }
    expect((await run(['get', '--root', 'xyz', '--peer', honest.wsUrl!, '00'])).code).toBe(2);
    expect((await run(['range', '--root', root, '--peer', honest.wsUrl!, '--page', '0'])).code).toBe(2);
    const help = await run(['range', '--help']);
    expect([help.code, help.stdout.startsWith('bpavl range')]).toEqual([0, true]);
  }, 60_000);
});
