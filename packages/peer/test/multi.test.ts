// MULTILEAVES and MULTIENTRIES answers (spec/wire.md, "Catch-up"): each
// part is exactly the LEAVES or ENTRIES answer of its chunk, in the order
// asked; the answer is cut after the most parts that fit (at least one),
// and only its last ENTRIES part may itself be cut. The same from a
// version read from storage.
import { Kind, multiParts, Status } from '@bpavl/light-client/wire';
import { init, Tree } from '@bpavl/wasm';
import { beforeAll, expect, it } from 'vitest';
import { multiAnswer, type MultiRequest, storedMultiAnswer } from '../src/multi.ts';
import { SyncServer } from '../src/server.ts';
import type { ServedTree, StoredTree } from '../src/source.ts';
import { StaticTreeSource } from '../src/source.ts';
import { withoutCatchUp } from './support.ts';

beforeAll(async () => {
  await init();
});

const enc = (s: string) => new TextEncoder().encode(s);

/** A tree of `n` entries at capacity 4 with `valueBytes`-byte values. */
function tree(n: number, valueBytes: number): ServedTree {
  const t = new Tree(4);
  for (let i = 0; i < n; i++) t.insert(enc(`key-${String(i).padStart(4, '0')}`), new Uint8Array(valueBytes).fill(i & 0xff));
  t.commit();
  return t.head();
}

/** The encoded paths (depth ≤ 6) that name a chunk of `t`, left to right. */
function chunkPaths(t: ServedTree): Uint8Array[] {
  const out: Uint8Array[] = [];
  const walk = (depth: number, turns: number) => {
    const path = depth === 0 ? Uint8Array.of(0) : Uint8Array.of(depth, turns << (8 - depth));
    try {
      t.exportLeaves!(path);
      out.push(path);
    } catch {
      if (depth < 6) for (const turn of [0, 1]) walk(depth + 1, (turns << 1) | turn);
    }
  };
  walk(0, 0);
  return out;
}

const leavesOf = (paths: Uint8Array[]): MultiRequest => ({ id: 1, kind: Kind.MultiLeaves, root: new Uint8Array(32), paths });
/** `MULTIENTRIES` of every position of each chunk at `paths` (`bitmap`: the same positions of each). */
const entriesOf = (t: ServedTree, paths: Uint8Array[], bitmap?: Uint8Array): MultiRequest => ({
  id: 1,
  kind: Kind.MultiEntries,
  root: new Uint8Array(32),
  // A LEAVES body is 0x0F ‖ M ‖ …: M < 128 here, one byte.
  chunks: paths.map((path) => ({ path, bitmap: bitmap ?? Uint8Array.of((1 << t.exportLeaves!(path)[1]!) - 1) })),
});

it('each part is its chunk’s LEAVES answer, in the order asked, cut after the parts that fit', () => {
  const t = tree(40, 8);
  const paths = chunkPaths(t).slice(0, 5).reverse();
  expect(paths.length).toBe(5);
  const single = paths.map((p) => t.exportLeaves!(p));
  expect([...multiParts(multiAnswer(t, leavesOf(paths), 8 << 20)!, 5)]).toEqual(single);
  // Room for two parts (each with a length byte, and k) but not three.
  const two = 1 + single[0]!.length + 1 + single[1]!.length + 1 + 8;
  expect([...multiParts(multiAnswer(t, leavesOf(paths), two)!, 5)]).toEqual(single.slice(0, 2));
  // One part always comes, however little room there is.
  expect([...multiParts(multiAnswer(t, leavesOf(paths), 10)!, 5)]).toEqual(single.slice(0, 1));
});

it('each part is its chunk’s ENTRIES answer; only the last part is cut', () => {
  // Chunks of 2 to 4 entries of 30 KB: a part holds up to 120 KB.
  const t = tree(24, 30_000);
  const paths = chunkPaths(t).slice(0, 4);
  const asked = entriesOf(t, paths);
  const whole = asked.kind === Kind.MultiEntries ? asked.chunks.map((c) => t.exportEntries!(c.path, c.bitmap, 8 << 20)) : [];
  expect([...multiParts(multiAnswer(t, asked, 8 << 20)!, 4)]).toEqual(whole);
  // 70 KB: the first part is cut to the entries that fit, and nothing follows it.
  const cut = [...multiParts(multiAnswer(t, asked, 70_000)!, 4)];
  expect(cut.length).toBe(1);
  expect(cut[0]!.length).toBeLessThan(whole[0]!.length);
  expect(cut[0]).toEqual(t.exportEntries!(paths[0]!, Uint8Array.of((1 << t.exportLeaves!(paths[0]!)[1]!) - 1), 70_000 - 6));
  // The first part whole and a maximal entry's room left: a second part comes; short of it, none does.
  const roomy = whole[0]!.length + 200_000;
  expect([...multiParts(multiAnswer(t, asked, roomy)!, 4)].length).toBeGreaterThan(1);
  expect([...multiParts(multiAnswer(t, asked, whole[0]!.length + 40_000)!, 4)]).toEqual(whole.slice(0, 1));
});

it('a version read from storage answers the same; a path that names no chunk, or a bad bitmap, fails the request', async () => {
  const t = tree(40, 8);
  const paths = chunkPaths(t);
  const stored: StoredTree = {
    stored: true,
    root: t.root,
    version: t.version,
    chunkCount: t.chunkCount,
    exportChunk: async (i) => t.exportChunk(i),
    prove: async () => {
      throw new Error('not asked');
    },
    proveRange: async (a, b, l) => t.proveRange(a, b, l),
    exportLeaves: async (p) => t.exportLeaves!(p),
    exportEntries: async (p, b, m) => t.exportEntries!(p, b, m),
  };
  for (const req of [leavesOf(paths), entriesOf(t, paths, Uint8Array.of(0x01))]) {
    expect(await storedMultiAnswer(stored, req, 8 << 20)).toEqual(multiAnswer(t, req, 8 << 20));
  }
  const server = new SyncServer(new StaticTreeSource([t]));
  const ask = async (req: MultiRequest) => (await server.answer({ ...req, root: t.root })).status;
  expect(await ask(leavesOf(paths))).toBe(Status.Ok);
  expect(await ask(leavesOf([paths[0]!, Uint8Array.of(6, 0)]))).toBe(Status.OutOfRange);
  expect(await ask(entriesOf(t, paths, Uint8Array.of(0xff)))).toBe(Status.BadRequest);
  // A tree that serves no catch-up pieces answers BAD_REQUEST, as a peer that predates them.
  const older = withoutCatchUp(t);
  expect((await new SyncServer(new StaticTreeSource([older])).answer({ ...leavesOf(paths), root: t.root })).status).toBe(Status.BadRequest);
});
