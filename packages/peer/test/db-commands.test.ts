// The `bpavl` commands on a state directory (src/db-commands.ts), run as a
// user runs them: real child processes on a real SQLite database. The round
// trip import → versions → get/prove/range at the head and at an old
// version → import more → prune → rollback → check; a malformed import line;
// an import into an empty state as a bulk load;
// `generate --db` against the workload's own tree; damage that `check` finds;
// a damaged version record, which leaves the other versions readable.
import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { verifyAbsence, verifyExistence, verifyRange } from '@bpavl/wasm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DB_USAGE } from '../src/db-commands.ts';
import { buildWorkloadTree, workloadEntry } from '../src/workload.ts';
import { BIN, cliJson, spawnCli, wasmReady } from './support.ts';
import { damageVersionRecord } from '../../store/test/support/damage.ts';
import { spawn } from 'node:child_process';

let dir: string;
beforeAll(async () => {
  await wasmReady();
  dir = await mkdtemp(join(tmpdir(), 'bpavl-db-cli-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const hex = (s: string) => Buffer.from(s).toString('hex');
const bytes = (h: string) => new Uint8Array(Buffer.from(h, 'hex'));

const json = cliJson;

const lines = (entries: Record<string, string>) => Object.entries(entries).map(([key, value]) => `${JSON.stringify({ key, value })}\n`).join('');

describe('the help of the state directory commands', () => {
  it('lists an option line for every flag of its usage line', () => {
    for (const [command, help] of Object.entries(DB_USAGE)) {
      const usage = help.split('\n')[0]!;
      for (const flag of usage.match(/--[a-z0-9-]+/g) ?? []) expect(help, `${command} ${flag}`).toMatch(new RegExp(`^  ${flag}\\b`, 'm'));
    }
  });
});

describe('bpavl on a state directory', { timeout: 120_000 }, () => {
  it('import, versions, get/prove/range at any version, prune, rollback and check', async () => {
    const db = join(dir, 'round-trip');
    const first = join(dir, 'first.jsonl');
    await writeFile(first, lines({ alice: '100', bob: '7', carol: '42' }));
    const imported = await json(['import', '--db', db, '--utf8', '--batch', '2', first]);
    expect(imported.code, imported.stderr).toBe(0);
    expect(imported.out).toMatchObject({ entries: 3, version: 2 });

    const second = join(dir, 'second.jsonl');
    await writeFile(second, lines({ alice: '101', dave: '5' }));
    expect((await json(['import', '--db', db, '--utf8', second])).out).toMatchObject({ entries: 2, version: 3 });

    const { out: listed } = await json(['versions', '--db', db]);
    expect(listed.versions.map((v: { version: number }) => v.version)).toEqual([1, 2, 3]);
    const root = (v: number) => bytes(listed.versions.find((x: { version: number }) => x.version === v).root);

    // Values at the head and at version 2, each with a proof checked here again.
    const got = await json(['get', '--db', db, '--utf8', 'alice', 'dave', 'zed']);
    expect(got.out.results).toEqual([
      { key: hex('alice'), value: hex('101') },
      { key: hex('dave'), value: hex('5') },
      { key: hex('zed'), value: null },
    ]);
    expect((await json(['get', '--db', db, '--utf8', '--version', '2', 'alice', 'dave'])).out.results).toEqual([
      { key: hex('alice'), value: hex('100') },
      { key: hex('dave'), value: null },
    ]);
    const present = (await json(['prove', '--db', db, '--utf8', '--version', '2', 'carol'])).out;
    expect(present).toMatchObject({ version: 2, kind: 'existence', value: hex('42') });
    verifyExistence(root(2), bytes(hex('carol')), bytes(hex('42')), bytes(present.proof));
    const absent = (await json(['prove', '--db', db, '--utf8', 'bobby'])).out;
    expect(absent).toMatchObject({ version: 3, kind: 'absence', value: null });
    verifyAbsence(root(3), bytes(hex('bobby')), bytes(absent.proof));
    const range = (await json(['range', '--db', db, '--utf8', '--limit', '2', 'b'])).out;
    expect(range.entries).toEqual([
      { key: hex('bob'), value: hex('7') },
      { key: hex('carol'), value: hex('42') },
    ]);
    expect(range.complete).toBe(false);
    expect(range.resumeKey).toBe(hex('dave'));

    expect((await json(['prune', '--db', db, '--keep', '2', '--vacuum'])).out.kept).toEqual([2, 3]);
    const gone = await json(['get', '--db', db, '--version', '1', hex('alice')]);
    expect([gone.code, gone.out.error]).toEqual([1, 'VERSION_UNKNOWN']);
    expect((await json(['rollback', '--db', db, '--to', '2'])).out).toMatchObject({ version: 2 });
    expect((await json(['get', '--db', db, '--utf8', 'alice'])).out.results).toEqual([{ key: hex('alice'), value: hex('100') }]);
    expect(await json(['check', '--db', db])).toMatchObject({ code: 0, out: { versions: 1, damaged: [] } });
  });

  it('a malformed line stops the import with its line number; the last commit stays', async () => {
    const db = join(dir, 'malformed');
    const good = join(dir, 'good.jsonl');
    await writeFile(good, lines({ [hex('a')]: hex('1') }));
    const { out: before } = await json(['import', '--db', db, good]);
    for (const [content, line] of [
      [`${lines({ [hex('b')]: hex('2') })}{"key": "00"\n`, 2],
      [`\n${lines({ [hex('c')]: hex('3') })}{"key": "zz", "value": "00"}\n`, 3],
      [`{"key": "00", "value": 1}\n`, 1],
    ] as const) {
      const bad = join(dir, 'bad.jsonl');
      await writeFile(bad, content);
      const r = await json(['import', '--db', db, '--batch', '1', bad]);
      expect([r.code, r.out.error, r.out.line]).toEqual([1, 'IMPORT_LINE_INVALID', line]);
    }
    // Batches committed before the bad line stay committed; nothing after it is.
    const { out: after } = await json(['versions', '--db', db]);
    expect(after.versions.at(0).root).toBe(before.root);
    expect((await json(['get', '--db', db, hex('b'), hex('c')])).out.results.map((r: { value: string | null }) => r.value)).toEqual([hex('2'), hex('3')]);
  });

  it('an unfinished sync holds the directory: another write says SYNC_PENDING and how to finish or discard it', async () => {
    const db = join(dir, 'pending');
    // A sync of a root no peer serves (here: no peer at all) leaves its unfinished state behind.
    const sync = await spawnCli(['sync', '--db', db, '--root', '22'.repeat(32), '--peer', 'ws://127.0.0.1:9'], 'ignore', 60_000).done;
    expect(sync.code).toBe(1);
    const file = join(dir, 'one.jsonl');
    await writeFile(file, lines({ [hex('a')]: hex('1') }));
    const { code, stderr } = await spawnCli(['import', '--db', db, file], 'ignore', 60_000).done;
    expect(code).toBe(1);
    expect(stderr).toContain('(SYNC_PENDING)');
    expect(stderr).toContain('--discard-unfinished');
  });

  it('import into an empty state is a bulk load: sorted on disk, one version, the root of the entries alone', async () => {
    // 3,000 entries of 300 bytes in random order, the first 100 keys written twice (the second line wins).
    const entries = Array.from({ length: 3000 }, (_, i) => [createHash('sha256').update(`k${i}`).digest('hex'), Buffer.alloc(300, i & 0xff).toString('hex')]);
    const text = (list: string[][]) => list.map(([key, value]) => `${JSON.stringify({ key, value })}\n`).join('');
    const again = entries.slice(0, 100).map(([k]) => [k!, hex('again')]);
    const file = join(dir, 'bulk.jsonl');
    await writeFile(file, text([...entries, ...again]));
    const db = join(dir, 'bulk');
    const r = await json(['import', '--db', db, file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.out).toMatchObject({ entries: 3100, lines: 3100, bulk: true, version: 1, entryCount: 3000 });
    // The same entries in another order, each key once: the same state.
    const reversed = join(dir, 'bulk-reversed.jsonl');
    await writeFile(reversed, text([...again, ...entries.slice(100)].reverse()));
    const other = await json(['import', '--db', join(dir, 'bulk-reversed'), reversed]);
    expect(other.out.root).toBe(r.out.root);
    const got = await json(['get', '--db', db, entries[0]![0]!, entries[2999]![0]!]);
    expect(got.out.results.map((x: { value: string }) => x.value)).toEqual([hex('again'), entries[2999]![1]]);
    expect((await json(['check', '--db', db])).out).toEqual({ versions: 1, damaged: [], gone: [] });
    // A second import goes in as commits on top; no sort files stay behind.
    expect((await json(['import', '--db', db, file])).out).toMatchObject({ bulk: false, version: 2, entryCount: 3000 });
    expect((await readdir(db)).filter((f) => f.startsWith('bpavl-sort-'))).toEqual([]);
  });

  it('a malformed line stops a bulk load with its line number and leaves the state empty', async () => {
    const db = join(dir, 'bulk-malformed');
    const bad = join(dir, 'bulk-bad.jsonl');
    const good = Array.from({ length: 50 }, (_, i) => `${JSON.stringify({ key: hex(`k${i}`), value: hex('v') })}\n`).join('');
    for (const [content, line] of [
      [`${good}{"key": "", "value": "00"}\n`, 51],
      [`${good}{"key": "${'ab'.repeat(1025)}", "value": "00"}\n`, 51],
      [`${good}${good}{"key": "00", "value": "zz"}\n`, 101],
    ] as const) {
      await writeFile(bad, content);
      const r = await json(['import', '--db', db, bad]);
      expect([r.code, r.out.error, r.out.line]).toEqual([1, 'IMPORT_LINE_INVALID', line]);
      expect((await json(['versions', '--db', db])).out.versions).toEqual([]);
    }
    expect((await readdir(db)).filter((f) => f.startsWith('bpavl-sort-'))).toEqual([]);
    // A file of no entries makes no version: the import after it is still a bulk load.
    await writeFile(bad, '\n');
    expect((await json(['import', '--db', db, bad])).out).toMatchObject({ entries: 0, bulk: true, version: 0 });
    await writeFile(bad, good);
    expect((await json(['import', '--db', db, bad])).out).toMatchObject({ entries: 50, bulk: true, version: 1 });
  });

  it('generate --db writes the workload: the same root as the tree built in memory', async () => {
    const db = join(dir, 'generated');
    const r = await json(['generate', '--db', db, '--entries', '3000', '--chunk', '32', '--seed', '4', '--batch', '1000']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.out).toMatchObject({ version: 3, entryCount: 3000, capacity: 32 });
    const tree = buildWorkloadTree({ entryCount: 3000, seed: 4n }, 32);
    expect(r.out.root).toBe(Buffer.from(tree.head().root).toString('hex'));
    expect(r.out.chunkCount).toBe(tree.chunkCount);
    const page = (await json(['range', '--db', db, '--limit', '5'])).out;
    expect(verifyRange(tree.head().root, new Uint8Array(0), undefined, 5, tree.head().proveRange(new Uint8Array(0), undefined, 5)).entries.map(([k]) => Buffer.from(k).toString('hex'))).toEqual(
      page.entries.map((e: { key: string }) => e.key),
    );
    tree.free();
  });

  it('generate --db --batch-mib 0 writes its one batch ahead between slices: the same root', async () => {
    // 40,000 entries in slices of 16,384: the batch outgrows a bound of nothing twice before its commit.
    const db = join(dir, 'bounded');
    const r = await json(['generate', '--db', db, '--entries', '40000', '--chunk', '32', '--seed', '5', '--batch', '40000', '--batch-mib', '0']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.out).toMatchObject({ version: 1, entryCount: 40_000 });
    const tree = buildWorkloadTree({ entryCount: 40_000, seed: 5n }, 32);
    expect(r.out.root).toBe(Buffer.from(tree.head().root).toString('hex'));
    tree.free();
    expect((await json(['check', '--db', db])).code).toBe(0);
  });

  it('check finds a damaged record and says where', async () => {
    const db = join(dir, 'damaged');
    expect((await json(['generate', '--db', db, '--entries', '400', '--chunk', '8'])).code).toBe(0);
    const more = join(dir, 'more.jsonl');
    await writeFile(more, lines({ [hex('zz')]: hex('1') }));
    expect((await json(['import', '--db', db, more])).code).toBe(0);
    expect((await json(['check', '--db', db])).out).toEqual({ versions: 2, damaged: [], gone: [] });
    const sqlite = new DatabaseSync(join(db, 'data.sqlite'));
    const flip = (table: string, key: Uint8Array) => {
      const { v } = sqlite.prepare(`SELECT v FROM ${table} WHERE k = ?`).get(key) as { v: Uint8Array };
      const damaged = Uint8Array.from(v);
      damaged[damaged.length - 1]! ^= 1;
      sqlite.prepare(`UPDATE ${table} SET v = ? WHERE k = ?`).run(damaged, key);
    };
    // An inner-node record that only version 1 uses (a stale mark of version 2 names it:
    // u64be(2) ‖ table 1 (nodes) ‖ record key, spec/store-format.md).
    const stale = (sqlite.prepare('SELECT k FROM stale').all() as { k: Uint8Array }[]).map((r) => r.k).find((k) => k[8] === 1)!;
    flip('nodes', stale.subarray(9));
    expect((await json(['check', '--db', db])).out).toEqual({ versions: 2, damaged: [{ version: 1, code: 'STORE_CORRUPT', message: expect.any(String) }], gone: [] });
    expect((await json(['get', '--db', db, hex('zz')])).out.results).toEqual([{ key: hex('zz'), value: hex('1') }]); // the head still reads
    // A record that both versions use: found in each.
    const row = sqlite.prepare('SELECT k FROM entries LIMIT 1 OFFSET 100').get() as { k: Uint8Array };
    flip('entries', row.k);
    sqlite.close();
    const r = await json(['check', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.out.damaged).toEqual([1, 2].map((version) => ({ version, code: 'STORE_CORRUPT', message: expect.any(String) })));
    // A damaged version record: named by its version, and the other version is still checked.
    damageVersionRecord(db, 1);
    const named = await json(['check', '--db', db]);
    expect(named.code).toBe(1);
    expect(named.out).toEqual({
      versions: 2,
      damaged: [
        { version: 1, code: 'STORE_CORRUPT', message: expect.stringContaining('the record of version 1') },
        { version: 2, code: 'STORE_CORRUPT', message: expect.any(String) },
      ],
      gone: [],
    });
    // A version key that names no version: found as the state opens, before any version is listed.
    const records = new DatabaseSync(join(db, 'data.sqlite'));
    records.prepare('INSERT INTO versions (k, v) VALUES (?, ?)').run(new Uint8Array([1, 2, 3]), new Uint8Array([7]));
    records.close();
    const opened = await json(['check', '--db', db]);
    expect(opened.code).toBe(1);
    expect(opened.out).toEqual({ versions: null, damaged: [{ version: 'records', code: 'STORE_CORRUPT', message: expect.any(String) }], gone: [] });
  });

  it('a damaged version record: the other versions read, versions and check name it, writes are refused naming it, and a prune or a rollback past it repairs', async () => {
    const db = join(dir, 'damaged-record');
    const roots: string[] = [];
    for (let v = 1; v <= 4; v++) {
      const file = join(dir, `record-${v}.jsonl`);
      await writeFile(file, lines({ [hex(`key ${v}`)]: hex(`value ${v}`) }));
      const r = await json(['import', '--db', db, '--batch', '1', file]);
      expect(r.code, r.stderr).toBe(0);
      roots.push(r.out.root);
    }
    damageVersionRecord(db, 2);
    const CORRUPT_2 = expect.stringContaining('the record of version 2');

    // Listed all the same, but the exit status says the state is damaged, as check's does.
    const listed = await json(['versions', '--db', db]);
    expect(listed.code).toBe(1);
    expect(listed.out).toEqual({ versions: [1, 3, 4].map((version) => ({ version, root: roots[version - 1] })), damaged: [{ version: 2, code: 'STORE_CORRUPT', message: CORRUPT_2 }] });
    const text = await spawnCli(['versions', '--db', db]).done;
    expect(text.code).toBe(1);
    expect(text.stdout.trim().split('\n').map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual([`1 ${roots[0]}`, '2 damaged:', `3 ${roots[2]}`, `4 ${roots[3]}`]);

    for (const v of [1, 3, 4]) expect((await json(['get', '--db', db, '--version', String(v), hex(`key ${v}`)])).out.results).toEqual([{ key: hex(`key ${v}`), value: hex(`value ${v}`) }]);
    expect(await json(['get', '--db', db, '--version', '2', hex('key 1')])).toMatchObject({ code: 1, out: { error: 'STORE_CORRUPT', message: CORRUPT_2 } });

    const checked = await json(['check', '--db', db]);
    expect(checked.code).toBe(1);
    expect(checked.out).toEqual({ versions: 4, damaged: [{ version: 2, code: 'STORE_CORRUPT', message: CORRUPT_2 }], gone: [] });
    const checkText = await spawnCli(['check', '--db', db]).done;
    expect(checkText.code).toBe(1);
    expect(checkText.stdout).toMatch(/^version 2: STORE_CORRUPT the record of version 2: .*\n3 other versions verified\n$/);

    // Writes are refused, naming the version; so are a prune that keeps it and a rollback onto it.
    const more = join(dir, 'record-more.jsonl');
    await writeFile(more, lines({ [hex('key 5')]: hex('value 5') }));
    for (const args of [['import', '--db', db, more], ['prune', '--db', db, '--keep', '3'], ['rollback', '--db', db, '--to', '2']]) {
      expect(await json(args)).toMatchObject({ code: 1, out: { error: 'STORE_CORRUPT', message: CORRUPT_2 } });
    }
    // A rollback below it (on a copy) repairs the state, as does a prune past it.
    const copy = join(dir, 'damaged-record-copy');
    cpSync(db, copy, { recursive: true });
    // There, the head's record damaged too: a read of the head is refused, not answered from version 3.
    damageVersionRecord(copy, 4);
    expect(await json(['get', '--db', copy, hex('key 3')])).toMatchObject({ code: 1, out: { error: 'STORE_CORRUPT', message: expect.stringContaining('the record of version 4') } });
    expect((await json(['get', '--db', copy, '--version', '3', hex('key 3')])).out.results).toEqual([{ key: hex('key 3'), value: hex('value 3') }]);
    expect(await json(['rollback', '--db', copy, '--to', '1'])).toMatchObject({ code: 0, out: { version: 1, root: roots[0] } });
    expect((await json(['check', '--db', copy])).out).toEqual({ versions: 1, damaged: [], gone: [] });
    expect(await json(['prune', '--db', db, '--keep', '2'])).toMatchObject({ code: 0, out: { kept: [3, 4] } });
    expect(await json(['versions', '--db', db])).toMatchObject({ code: 0, out: { versions: [3, 4].map((version) => ({ version, root: roots[version - 1] })), damaged: [] } });
    expect((await json(['check', '--db', db])).out).toEqual({ versions: 2, damaged: [], gone: [] });
    expect(await json(['import', '--db', db, more])).toMatchObject({ code: 0, out: { version: 5 } });
  });

  it('check finds a version record whose entry count is not its tree’s, though its root hashes the counts it states', async () => {
    const db = join(dir, 'miscounted');
    expect((await json(['generate', '--db', db, '--entries', '400', '--chunk', '8'])).code).toBe(0);
    const sqlite = new DatabaseSync(join(db, 'data.sqlite'));
    const { k, v } = sqlite.prepare('SELECT k, v FROM versions').get() as { k: Uint8Array; v: Uint8Array };
    // The version record (spec/store-format.md): 0x07, capacity, chunk_count, entry_count (varints), top, top ref, root.
    let at = 1;
    const varint = () => {
      let [n, shift] = [0, 0];
      for (;;) {
        const b = v[at++]!;
        n += (b & 0x7f) * 2 ** shift;
        shift += 7;
        if (b < 0x80) return n;
      }
    };
    const [capacity, chunks] = [varint(), varint()];
    const countAt = at;
    const entries = varint();
    expect(entries).toBe(400);
    at += 1; // top kind
    varint(); // the top ref's birth
    const top = v.subarray(at, at + 32);
    const forged = Uint8Array.from(v);
    forged.set([0x91, 0x03], countAt); // 401, in as many bytes as 400
    const head = new Uint8Array(21);
    const view = new DataView(head.buffer);
    head[0] = 0x04;
    view.setUint32(1, capacity);
    view.setBigUint64(5, BigInt(chunks));
    view.setBigUint64(13, 401n);
    forged.set(createHash('sha256').update(head).update(top).digest(), forged.length - 32);
    sqlite.prepare('UPDATE versions SET v = ? WHERE k = ?').run(forged, k);
    sqlite.close();
    const r = await json(['check', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.out.damaged).toEqual([{ version: 1, code: 'STORE_CORRUPT', message: expect.stringContaining("does not verify against the version's root") }]);
  });

  it('two serve --db processes share one database; a client syncs an old and the new version from them', async () => {
    const db = join(dir, 'served');
    expect((await json(['generate', '--db', db, '--entries', '3000', '--chunk', '32', '--batch', '1500'])).code).toBe(0);
    const { out: listed } = await json(['versions', '--db', db]);
    expect(listed.versions).toHaveLength(2);
    const servers: ChildProcess[] = [];
    try {
      const infos = [];
      for (let i = 0; i < 2; i++) {
        const child = spawn(process.execPath, [BIN, 'serve', '--db', db, '--json', '--libp2p-port', 'off', '--exit-on-stdin-end'], { stdio: ['pipe', 'pipe', 'inherit'] });
        servers.push(child);
        infos.push(
          await new Promise<{ ws: string; versions: number; root: string }>((resolve, reject) => {
            let buf = '';
            const t = setTimeout(() => reject(new Error('serve --db did not start')), 30_000);
            child.stdout!.on('data', (d) => {
              buf += d;
              if (buf.includes('\n')) {
                clearTimeout(t);
                resolve(JSON.parse(buf.split('\n')[0]!));
              }
            });
          }),
        );
      }
      for (const info of infos) expect(info).toMatchObject({ versions: 2, root: listed.versions[1].root });
      const peers = infos.flatMap((i) => ['--peer', i.ws]);
      for (const { root } of listed.versions) {
        const r = await json(['sync', '--root', root, ...peers]);
        expect(r.code, r.stderr).toBe(0);
        expect(r.out.root).toBe(root);
      }
      // Verified reads from the stored versions (PROOFS answered from storage) equal the local reads.
      const keys = [0, 1, 1499, 1500, 2999].map((i) => Buffer.from(workloadEntry(0n, i)[0]).toString('hex'));
      keys.push('00'.repeat(32)); // absent
      for (const [i, { root }] of listed.versions.entries()) {
        const remote = await json(['get', '--root', root, ...peers, ...keys]);
        expect(remote.code, remote.stderr).toBe(0);
        const local = await json(['get', '--db', db, '--version', String(i + 1), ...keys]);
        expect(remote.out.results).toEqual(local.out.results);
        expect(remote.out.results.filter((x: { value: string | null }) => x.value !== null)).toHaveLength(i === 0 ? 3 : 5);
      }
    } finally {
      for (const child of servers) child.kill('SIGTERM');
    }
  });

  it('usage errors exit 2', async () => {
    for (const args of [['versions'], ['prune', '--db', join(dir, 'x')], ['get', '--db', join(dir, 'x')], ['import', '--db', join(dir, 'x')], ['import', '--db', join(dir, 'x'), join(dir, 'no-such-file.jsonl')], ['generate', '--db', join(dir, 'x'), '--batch-mib', 'lots'], ['versions', '--db', join(dir, 'x'), '--chunk', '8'], ['import', '--db', join(dir, 'x'), '--seed', '1', join(dir, 'x.jsonl')]]) {
      expect((await spawnCli(args, 'ignore', 30_000).done).code).toBe(2);
    }
  });
});
