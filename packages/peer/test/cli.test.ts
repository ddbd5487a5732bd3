// The `bpavl` CLI as a user runs it (node bin/bpavl.mjs …) and its tree files.

import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kind, Status } from '@bpavl/light-client/wire';
import { verifyChunk } from '@bpavl/light-client/verify';
import { Tree } from '@bpavl/wasm';
import type { Libp2p } from 'libp2p';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTreeFileHeader, readTreeFile, writeTreeFile } from '../src/treefile.ts';
import { buildWorkloadTree } from '../src/workload.ts';
import { BIN, libp2pClient, libp2pDialer, spawnCli, wasmReady, wsClient } from './support.ts';

let dir: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  await wasmReady();
  dir = await mkdtemp(join(tmpdir(), 'bpavl-peer-test-'));
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

/** The test network's CLI (packages/testnet): `bpavl` whose `serve` can lie. */
const TESTNET_BIN = fileURLToPath(new URL('../../testnet/bin/bpavl-testnet.mjs', import.meta.url));

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Runs the CLI (or the test network's, `bin`) to completion (bounded). */
function run(args: string[], ms = 30_000, bin = BIN): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const cli = spawnCli(args, 'ignore', ms, bin);
  children.push(cli.child);
  return cli.done;
}

/**
 * Starts `bpavl serve … --json` (a liar: `bpavl-testnet serve … --byzantine`)
 * and resolves with its JSON line and the process.
 */
function serve(args: string[]): Promise<{ info: Record<string, unknown> & { root: string; ws: string; libp2p: string }; child: ChildProcess }> {
  const bin = args.includes('--byzantine') ? TESTNET_BIN : BIN;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, 'serve', '--json', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    let err = '';
    const t = setTimeout(() => reject(new Error(`serve did not start: ${err}`)), 30_000);
    child.stderr.on('data', (d) => (err += d));
    child.stdout.on('data', (d) => {
      out += d;
      const nl = out.indexOf('\n');
      if (nl >= 0) {
        clearTimeout(t);
        resolve({ info: JSON.parse(out.slice(0, nl)), child });
      }
    });
    child.on('exit', (code) => reject(new Error(`serve exited ${code}: ${err}`)));
  });
}

function exited(child: ChildProcess, ms: number): Promise<number | null> {
  return new Promise((resolve, reject) => {
    if (child.exitCode !== null) return resolve(child.exitCode);
    const t = setTimeout(() => reject(new Error('did not exit')), ms);
    child.on('exit', (code) => {
      clearTimeout(t);
      resolve(code);
    });
  });
}

describe('tree files', () => {
  it('round-trip, and every corruption is refused with a code', async () => {
    const tree = buildWorkloadTree({ entryCount: 700, seed: 11n }, 32);
    const file = join(dir, 'rt.bpavl');
    const header = await writeTreeFile(file, tree, 11n);
    expect(header.chunkCount).toBe(tree.chunkCount);
    const { tree: loaded } = await readTreeFile(file, tree.head().root);
    expect(hex(loaded.head().root)).toBe(hex(tree.head().root));
    expect(loaded.len).toBe(700);
    expect(loaded.head().version).toBe(1);

    const bytes = await readFile(file);
    const codeOf = async (b: Uint8Array, root?: Uint8Array) => {
      await writeFile(join(dir, 'bad.bpavl'), b);
      return readTreeFile(join(dir, 'bad.bpavl'), root).then(
        () => undefined,
        (e: { code?: string }) => e.code,
      );
    };
    const flipped = Buffer.from(bytes);
    flipped[bytes.length - 500]! ^= 1; // inside the last envelope
    expect(await codeOf(flipped)).toBe('ROOT_MISMATCH');
    expect(await codeOf(bytes.subarray(0, bytes.length - 1))).toBe('TREE_FILE_INVALID');
    expect(await codeOf(Buffer.concat([bytes, Buffer.of(0)]))).toBe('TREE_FILE_INVALID');
    expect(await codeOf(Buffer.from('not a tree file at all, not at all, really not'))).toBe('TREE_FILE_INVALID');
    expect(await codeOf(bytes, new Uint8Array(32))).toBe('ROOT_MISMATCH');
    const otherRoot = Buffer.from(bytes);
    otherRoot[8]! ^= 1; // the header's root: every chunk then fails against it
    expect(await codeOf(otherRoot)).toBe('ROOT_MISMATCH');
  });

  it('an empty tree', async () => {
    const empty = new Tree(8);
    empty.commit();
    const file = join(dir, 'empty.bpavl');
    await writeTreeFile(file, empty, 0n);
    const { tree } = await readTreeFile(file);
    expect(hex(tree.head().root)).toBe(hex(empty.head().root));
    expect(tree.len).toBe(0);
    expect(parseTreeFileHeader(await readFile(file)).chunkCount).toBe(0);
  });
});

describe('bpavl CLI', () => {
  let dialer: Libp2p;
  beforeAll(async () => {
    dialer = await libp2pDialer();
  });
  afterAll(async () => {
    await dialer?.stop();
  });

  it('generate, then serve --file over ws and libp2p, then stop on SIGTERM', async () => {
    const file = join(dir, 'gen.bpavl');
    const gen = await run(['generate', '--entries', '2000', '--chunk', '64', '--seed', '3', '--out', file, '--json']);
    expect(gen.code, gen.stderr).toBe(0);
    const g = JSON.parse(gen.stdout) as { root: string; chunkCount: number };
    expect(g.root).toBe(hex(buildWorkloadTree({ entryCount: 2000, seed: 3n }, 64).head().root));

    const { info, child } = await serve(['--file', file, '--root', g.root]);
    expect(info.root).toBe(g.root);
    expect(info.chunkCount).toBe(g.chunkCount);
    expect(info.ws).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/);
    expect(info.libp2p).toMatch(/^\/ip4\/127\.0\.0\.1\/tcp\/\d+\/ws\/p2p\/12D3\w+$/);
    const root = Buffer.from(info.root, 'hex');
    for (const c of [await wsClient(info.ws), await libp2pClient(dialer, info.libp2p)]) {
      for (const index of [0, g.chunkCount - 1]) {
        const r = await c.request({ kind: Kind.Chunk, root, index });
        expect(r.status).toBe(Status.Ok);
        verifyChunk(root, index, r.payload);
      }
      c.close();
    }
    child.kill('SIGTERM');
    expect(await exited(child, 10_000)).toBe(0);
  }, 60_000);

  it('serve --entries N stops on SIGTERM during its tree build, promptly: exit 0, nothing served or printed', async () => {
    // Far more entries than 20 s build: without slices the signal waits for the build's end.
    const run = spawnCli(['serve', '--entries', '3000000', '--ws-port', '0', '--libp2p-port', 'off', '--json'], 'ignore', 20_000);
    // Past start-up (the handlers are in place), well inside the build.
    await new Promise((r) => setTimeout(r, 1500));
    expect(run.child.exitCode).toBeNull();
    const sent = Date.now();
    run.child.kill('SIGTERM');
    const { code, stdout, stderr } = await run.done;
    expect(code, stderr).toBe(0);
    expect(stdout).toBe('');
    expect(Date.now() - sent).toBeLessThan(5_000);
  }, 60_000);

  it('serve --byzantine wrong-index lies; SIGINT stops it', async () => {
    const { info, child } = await serve(['--entries', '500', '--chunk', '32', '--byzantine', 'wrong-index', '--libp2p-port', 'off']);
    expect(info.libp2p).toBeNull();
    expect(info.byzantine).toEqual({ mode: 'wrong-index', rate: 1 });
    const root = Buffer.from(info.root, 'hex');
    const c = await wsClient(info.ws);
    const r = await c.request({ kind: Kind.Chunk, root, index: 1 });
    expect(() => verifyChunk(root, 1, r.payload)).toThrow(expect.objectContaining({ code: 'CHUNK_INDEX_MISMATCH' }));
    c.close();
    child.kill('SIGINT');
    expect(await exited(child, 10_000)).toBe(0);
  }, 60_000);

  it('the standard workload: serve with defaults prints the npm start root', async () => {
    // 100,000 entries, chunk 256, seed 0: the root `npm start` (crates/bench summary) prints.
    const { info, child } = await serve(['--ws-port', '0']);
    expect(info.root).toBe('db5455ca1fab302197884f255d0633f19b3001110619a3b0437ef30c5d575044');
    expect(info.chunkCount).toBe(541);
    child.kill('SIGTERM');
    expect(await exited(child, 10_000)).toBe(0);
  }, 60_000);

  it('usage errors exit 2 with a message', async () => {
    const cases: [string[], RegExp][] = [
      [[], /usage: bpavl <command>/],
      [['nope'], /unknown command "nope"/],
      [['serve', '--chunk', '1'], /--chunk must be in 2 … 4096/],
      [['serve', '--file', 'x', '--entries', '3'], /exclude each other/],
      [['serve', '--ws-port', 'off', '--libp2p-port', 'off'], /nothing to serve on/],
      [['serve', '--memory-budget', '8'], /--memory-budget must be in 16 … /],
      [['serve', '--bogus'], /Unknown option '--bogus'/],
      [['generate', '--entries', '10'], /--out FILE is required/],
    ];
    const testnetCases: [string[], RegExp][] = [
      [['serve', '--byzantine', 'lie-a-lot'], /unknown Byzantine mode/],
      [['serve', '--byzantine', 'silent:2'], /rate must be in \(0, 1\]/],
    ];
    for (const [args, message, bin] of [...cases.map((c) => [...c, BIN] as const), ...testnetCases.map((c) => [...c, TESTNET_BIN] as const)]) {
      const r = await run(args, 30_000, bin);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr + r.stdout, args.join(' ')).toMatch(message);
    }
    const help = await run(['serve', '--help'], 30_000, TESTNET_BIN);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--byzantine MODE[:RATE]');
    expect((await run(['serve', '--help'])).stdout).not.toContain('--byzantine');
  }, 60_000);

  it('a missing or corrupt --file exits 1 with the code', async () => {
    const r = await run(['serve', '--file', join(dir, 'missing.bpavl')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/ENOENT/);
    await writeFile(join(dir, 'junk.bpavl'), 'junk');
    const j = await run(['serve', '--file', join(dir, 'junk.bpavl')]);
    expect(j.code).toBe(1);
    expect(j.stderr).toMatch(/TREE_FILE_INVALID/);
  }, 60_000);
});

describe('bpavl sync, against peers in other processes', () => {
  it('syncs from a mix of ws and libp2p peers, banning the liar', async () => {
    const honest = await serve(['--entries', '3000', '--chunk', '32', '--seed', '7']);
    const liar = await serve(['--entries', '3000', '--chunk', '32', '--seed', '7', '--byzantine', 'wrong-index']);
    expect(liar.info.root).toBe(honest.info.root);
    const r = await run(['sync', '--root', honest.info.root, '--peer', liar.info.ws, '--peer', honest.info.libp2p, '--peer', honest.info.ws, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    expect(out.root).toBe(honest.info.root);
    expect(out.entryCount).toBe(3000);
    expect(out.banned).toEqual([{ peer: liar.info.ws, reason: 'sent an invalid chunk', code: 'CHUNK_INDEX_MISMATCH' }]);
    // Without --json: a readable summary on stdout.
    const text = await run(['sync', '--root', honest.info.root, '--peer', honest.info.ws]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`root verified ${honest.info.root}`);
    for (const p of [honest, liar]) p.child.kill('SIGTERM');
  }, 120_000);

  it('runs again in the same process with the memory settings (bin/bpavl.mjs); BPAVL_NODE_TUNED=1 skips that', async () => {
    // A "peer" that takes the connection and never answers: once the sync has dialled it,
    // the launcher's choice is made, and the process's command line and environment show it.
    const sockets: Socket[] = [];
    const silent = createServer((s) => sockets.push(s));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    try {
      for (const tuned of [true, false]) {
        const env = { ...process.env, BPAVL_NODE_TUNED: tuned ? '' : '1', MALLOC_ARENA_MAX: '' };
        const child = spawn(process.execPath, [BIN, 'sync', '--root', 'ab'.repeat(32), '--peer', `ws://127.0.0.1:${port}`], { stdio: 'ignore', env });
        children.push(child);
        const dialled = sockets.length;
        const until = Date.now() + 20_000;
        while (sockets.length === dialled && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
        expect(sockets.length, 'the sync dialled its peer').toBeGreaterThan(dialled);
        const argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
        const environ = readFileSync(`/proc/${child.pid}/environ`, 'utf8').split('\0');
        expect(argv.includes('--max-semi-space-size=4')).toBe(tuned);
        expect(argv.includes('--optimize-for-size')).toBe(tuned);
        expect(environ.includes('BPAVL_NODE_TUNED=1')).toBe(true);
        // Set but empty in the parent: the user's own setting is kept.
        expect(environ.includes('MALLOC_ARENA_MAX=')).toBe(true);
        expect(environ.includes('MALLOC_MMAP_THRESHOLD_=65536')).toBe(tuned);
        child.kill('SIGKILL');
        await exited(child, 10_000).catch(() => undefined);
      }
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  }, 60_000);

  it('fails with NO_HONEST_PEERS (exit 1) when every peer lies, and checks its arguments', async () => {
    const liar = await serve(['--entries', '500', '--chunk', '8', '--byzantine', 'corrupt-value', '--libp2p-port', 'off']);
    const r = await run(['sync', '--root', liar.info.root, '--peer', liar.info.ws, '--json']);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout.trim()).error).toBe('NO_HONEST_PEERS');
    expect(JSON.parse(r.stdout.trim()).peers).toEqual([{ peer: liar.info.ws, outcome: 'banned', reason: 'sent an invalid chunk', code: 'ROOT_MISMATCH' }]);
    // A peer that answers only BUSY: reported as such, within the stall bound (4 s: under a
    // loaded clean-clone run, 1 s did not always see the connection open).
    const busy = await serve(['--entries', '500', '--chunk', '8', '--byzantine', 'busy', '--libp2p-port', 'off']);
    const b = await run(['sync', '--root', busy.info.root, '--peer', busy.info.ws, '--stall-timeout', '4000', '--json']);
    expect(b.code).toBe(1);
    expect(JSON.parse(b.stdout.trim())).toMatchObject({ error: 'NO_HONEST_PEERS', peers: [{ peer: busy.info.ws, outcome: 'busy', code: 'BUSY' }] });
    busy.child.kill('SIGTERM');
    liar.child.kill('SIGTERM');
    const bad = await run(['sync', '--root', 'abc', '--peer', 'ws://127.0.0.1:1']);
    expect(bad.code).toBe(2);
    expect(bad.stderr + bad.stdout).toMatch(/--root must be 64 hex digits/);
    const none = await run(['sync', '--root', 'ab'.repeat(32)]);
    expect(none.code).toBe(2);
    // Past a timer's longest delay it would fire at once (and the sync give up on every peer at once).
    const long = await run(['sync', '--root', 'ab'.repeat(32), '--peer', 'ws://127.0.0.1:1', '--stall-timeout', String(2 ** 31)]);
    expect(long.code).toBe(2);
    // A peer no transport dials is a usage error, not a peer that failed to connect after the others.
    for (const command of ['sync', 'get']) {
      const odd = await run([command, '--root', 'ab'.repeat(32), '--peer', 'ws://127.0.0.1:1', '--peer', 'http://127.0.0.1:1', ...(command === 'get' ? ['00'] : [])]);
      expect(odd.code).toBe(2);
      expect(odd.stderr).toMatch(/--peer http:\/\/127\.0\.0\.1:1/);
    }
  }, 120_000);
});
