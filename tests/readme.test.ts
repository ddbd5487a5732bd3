// The READMEs' code examples, checked. Parsed from the READMEs at test time,
// so an edit that breaks an example fails here:
//
// (a) the ```sh walkthrough of README.md's "Keeping a state" section, run
//     line by line in a temporary directory (`bpavl` is
//     packages/peer/bin/bpavl.mjs) on small balances.jsonl and changes.jsonl
//     inputs: every line must exit 0, and what its comment promises is
//     checked against a model of the versions (values at the head and at
//     older versions, the listed versions, the rollback's head). Its
//     `bpavl serve --db` line runs in the background and is answered by
//     `bpavl get --root … --peer …` at two versions, by the "Syncing into a
//     state directory" block's sync-from-B line, and by README.md's query
//     client snippet, then stopped by PID (SIGTERM, exit 0).
// (b) every ```ts block of README.md and packages/*/README.md, type-checked
//     as a consumer's module (`@bpavl/…` imports resolve to the packages'
//     dist/ types, as installed), and every ```js block likewise as
//     JavaScript (checkJs), with the names a snippet leaves free declared in
//     one prelude (FREE_NAMES below).
//
// Needs the builds scripts/test.sh makes first (@bpavl/wasm's pkg/, the
// light client's, the storage's and the peer's dist/). About 20 s on an idle machine
// (the walkthrough's 100,000-entry generate and the 55 MB sync dominate).

import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const repo = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(repo, 'packages', 'peer', 'bin', 'bpavl.mjs');
const work = mkdtempSync(join(tmpdir(), 'bpavl-readme-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

// ---------------------------------------------------------------- markdown

interface Block {
  /** The README, relative to the repository. */
  file: string;
  lang: string;
  /** 1-based line of the block's first code line in the README. */
  line: number;
  text: string;
}

/** The fenced code blocks of `file` (relative to the repository), optionally only those under the heading starting `section`. */
function codeBlocks(file: string, section?: string): Block[] {
  const lines = readFileSync(join(repo, file), 'utf8').split('\n');
  const blocks: Block[] = [];
  let inSection = section === undefined;
  let sectionLevel = 0;
  for (let i = 0; i < lines.length; i++) {
    const heading = /^(#+) (.*)$/.exec(lines[i]!);
    if (heading && section !== undefined) {
      if (heading[2]!.startsWith(section)) {
        inSection = true;
        sectionLevel = heading[1]!.length;
      } else if (inSection && heading[1]!.length <= sectionLevel) inSection = false;
      continue;
    }
    const fence = /^```(\w*)\s*$/.exec(lines[i]!);
    if (!fence) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !lines[end]!.startsWith('```')) end++;
    if (inSection) blocks.push({ file, lang: fence[1]!, line: start + 1, text: lines.slice(start, end).join('\n') });
    i = end;
  }
  return blocks;
}

/** The one ```sh block of README.md's section `section`. */
function shBlock(section: string): Block {
  const blocks = codeBlocks('README.md', section).filter((b) => b.lang === 'sh');
  if (blocks.length === 0) throw new Error(`README.md has no sh block under "${section}"`);
  return blocks[0]!;
}

/** One shell line of a block: its words (no quoting in these blocks) and where it is. */
interface Command {
  words: string[];
  /** `README.md:LINE: the line`, for messages. */
  where: string;
}

/** The commands of a sh block: each line without its `# comment`, blank and comment-only lines skipped. */
function commands(block: Block): Command[] {
  const out: Command[] = [];
  block.text.split('\n').forEach((raw, i) => {
    const code = raw.replace(/(^|\s)#.*$/, '').trim();
    if (code !== '') out.push({ words: code.split(/\s+/), where: `${block.file}:${block.line + i}: ${raw.trim()}` });
  });
  return out;
}

// ---------------------------------------------------------------- running bpavl

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `bpavl ARGS` in `cwd`, to its end (killed after `ms`). */
function bpavl(args: string[], cwd: string, ms = 30_000): Run {
  const r = spawnSync(process.execPath, [BIN, ...args], { cwd, encoding: 'utf8', timeout: ms, killSignal: 'SIGKILL', maxBuffer: 64 << 20 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Runs a README command (`bpavl …`) and requires exit 0. */
function runLine(cmd: Command, cwd: string): Run {
  expect(cmd.words[0], cmd.where).toBe('bpavl');
  const r = bpavl(cmd.words.slice(1), cwd);
  if (r.code !== 0) throw new Error(`${cmd.where}\nexited ${r.code}\n${r.stdout.slice(0, 2000)}\n${r.stderr.slice(0, 2000)}`);
  return r;
}

/** `bpavl serve …` in the background; resolves once it prints its WebSocket URL. */
async function startServe(cmd: Command, cwd: string): Promise<{ child: ChildProcess; ws: string; exited: Promise<number | null> }> {
  const child = spawn(process.execPath, [BIN, ...cmd.words.slice(1)], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const ws = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${cmd.where}\nprinted no ws:// URL in 15 s\n${stdout}\n${stderr}`));
    }, 15_000);
    child.stdout!.on('data', (d) => {
      stdout += d;
      const m = /^ws\s+(ws:\/\/127\.0\.0\.1:\d+)$/m.exec(stdout);
      if (m) {
        clearTimeout(t);
        resolve(m[1]!);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`${cmd.where}\nexited ${code} before serving\n${stdout}\n${stderr}`));
    });
  });
  return { child, ws, exited };
}

// ---------------------------------------------------------------- the model

const hexOf = (s: string): string => Buffer.from(s, 'utf8').toString('hex');

/** balances.jsonl: the README's `{"key": "alice", "value": "100"}` lines. */
const BALANCES: [string, string][] = [
  ['alice', '100'],
  ['bob', '250'],
  ['carol', '75'],
  ['dave', '1'],
];
/** changes.jsonl: alice and bob change, then enough new accounts for several commits of the README's import. */
const CHANGES: [string, string][] = [['alice', '90'], ['bob', '260']];
for (let i = 0; i < 2500; i++) CHANGES.push([`user-${String(i).padStart(4, '0')}`, String(i)]);

/** The UTF-8 keys' values at each version (the generated workload's keys are SHA-256 digests, never these). */
type Values = Map<string, string>;

function jsonl(lines: [string, string][]): string {
  return lines.map(([key, value]) => JSON.stringify({ key, value }) + '\n').join('');
}

/** Flag value of `--name V` in `words`, or undefined. */
function flag(words: string[], name: string): string | undefined {
  const i = words.indexOf(name);
  return i < 0 ? undefined : words[i + 1];
}

/** The operands of a command: its words after the subcommand without `--flag [value]` pairs. */
function operands(words: string[], valueFlags: string[]): string[] {
  const out: string[] = [];
  for (let i = 2; i < words.length; i++) {
    if (valueFlags.includes(words[i]!)) i++;
    else if (!words[i]!.startsWith('--')) out.push(words[i]!);
  }
  return out;
}

/** "KEY VALUE" / "KEY (absent)" lines of `bpavl get`, in hex, as the model predicts them. */
function expectedGet(keys: string[], values: Values): string[] {
  return keys.map((k) => `${hexOf(k)} ${values.has(k) ? hexOf(values.get(k)!) : '(absent)'}`);
}

function versionsOf(stdout: string): { version: number; root: string }[] {
  return stdout
    .trim()
    .split('\n')
    .map((l) => {
      const m = /^(\d+) ([0-9a-f]{64})$/.exec(l);
      if (!m) throw new Error(`not a "VERSION ROOT" line: ${l}`);
      return { version: Number(m[1]), root: m[2]! };
    });
}

// ---------------------------------------------------------------- (a) the walkthrough

describe('README.md, "Keeping a state": the walkthrough', () => {
  it('runs every line, in order, and does what its comments say', { timeout: 120_000 }, async () => {
    const block = shBlock('Keeping a state');
    const cmds = commands(block);
    const dir = mkdtempSync(join(work, 'state-'));
    writeFileSync(join(dir, 'balances.jsonl'), jsonl(BALANCES));
    writeFileSync(join(dir, 'changes.jsonl'), jsonl(CHANGES));

    // versions[v - 1]: the UTF-8 keys' values at version v.
    let versions: Values[] = [];
    const head = () => versions.at(-1)!;
    const seen = new Set<string>();
    let served: Awaited<ReturnType<typeof startServe>> | undefined;
    let stopped: number | null | string | undefined;
    try {
      for (const cmd of cmds) {
        const w = cmd.words;
        const sub = w[1]!;
        seen.add(sub);
        expect(flag(w, '--db'), `${cmd.where}: every line works on the state directory`).toBeDefined();
        if (sub === 'serve') {
          served = await startServe(cmd, dir);
          await answerServe(served.ws, dir, versions);
          continue;
        }
        const r = runLine(cmd, dir);
        const where = `${cmd.where}\n${r.stdout.slice(0, 1000)}`;
        switch (sub) {
          case 'import': {
            const file = operands(w, ['--db', '--batch', '--batch-mib']).at(-1)!;
            const lines = file === 'balances.jsonl' ? BALANCES : file === 'changes.jsonl' ? CHANGES : undefined;
            expect(lines, `${cmd.where}: an input the test writes`).toBeDefined();
            if (versions.length === 0 && flag(w, '--batch') === undefined) {
              // A bulk load: version 1.
              expect(r.stdout, where).toMatch(/bulk load\); version 1,/);
              versions = [new Map(lines)];
            } else {
              const batch = Number(flag(w, '--batch') ?? 100_000);
              const values = new Map(head());
              lines!.forEach(([k, v], i) => {
                values.set(k, v);
                if ((i + 1) % batch === 0 || i === lines!.length - 1) versions.push(new Map(values));
              });
              expect(r.stdout, where).toContain(`version ${versions.length},`);
            }
            break;
          }
          case 'generate':
            versions.push(new Map(head()));
            expect(r.stdout, where).toMatch(new RegExp(`^version ${versions.length}, root [0-9a-f]{64}$`, 'm'));
            break;
          case 'versions':
            expect(
              versionsOf(r.stdout).map((v) => v.version),
              where,
            ).toEqual(versions.map((_, i) => i + 1));
            break;
          case 'get': {
            const at = flag(w, '--version');
            const values = at === undefined ? head() : versions[Number(at) - 1]!;
            const keys = operands(w, ['--db', '--version']);
            expect(keys.length, cmd.where).toBeGreaterThan(0);
            expect(r.stdout.trim().split('\n'), where).toEqual(expectedGet(keys, values));
            break;
          }
          case 'prove': {
            const key = operands(w, ['--db', '--version'])[0]!;
            const p = JSON.parse(r.stdout.trim()) as Record<string, unknown>;
            expect(p, where).toMatchObject({ version: versions.length, key: hexOf(key), kind: 'existence', value: hexOf(head().get(key)!) });
            expect(p.proof, where).toMatch(/^[0-9a-f]+$/);
            break;
          }
          case 'range': {
            const [start, end] = operands(w, ['--db', '--version', '--limit']);
            const limit = Number(flag(w, '--limit') ?? 1000);
            const lines = r.stdout.trim().split('\n');
            // A range cut at the limit ends with where the next page starts.
            const more = /^\(more from ([0-9a-f]+)\)$/.exec(lines.at(-1)!);
            if (more) lines.pop();
            const keys = lines.map((l) => l.split(' ')[0]!);
            expect(keys.length, where).toBeGreaterThan(0);
            expect(keys.length, where).toBe(more ? limit : Math.min(keys.length, limit));
            if (more) expect(more[1]! > keys.at(-1)!, where).toBe(true);
            expect([...keys].sort(), where).toEqual(keys);
            for (const k of keys) {
              expect(k >= hexOf(start ?? ''), where).toBe(true);
              if (end !== undefined) expect(k < hexOf(end), where).toBe(true);
            }
            break;
          }
          case 'prune': {
            const keep = Number(flag(w, '--keep'));
            const kept = versions.map((_, i) => i + 1).slice(-keep);
            expect(r.stdout, where).toContain(`kept versions ${kept.join(', ')}`);
            break;
          }
          case 'rollback': {
            const to = Number(flag(w, '--to'));
            expect(versions.length, `${cmd.where}: the rollback discards a later version`).toBeGreaterThan(to);
            versions = versions.slice(0, to);
            expect(r.stdout, where).toMatch(new RegExp(`^head is version ${to}, root [0-9a-f]{64}$`, 'm'));
            const listed = bpavl(['versions', '--db', flag(w, '--db')!], dir);
            expect(versionsOf(listed.stdout).at(-1)!.version, 'the head after the rollback').toBe(to);
            break;
          }
          case 'check':
            expect(r.stdout, where).toContain(`${versions.length} versions verified`);
            break;
          default:
            throw new Error(`${cmd.where}: a command this test does not know (${sub}): teach it what to check`);
        }
      }
      // The section promises all of these; a README that drops one should drop it here too.
      for (const sub of ['import', 'generate', 'versions', 'get', 'prove', 'range', 'prune', 'rollback', 'check', 'serve'])
        expect(seen, `the walkthrough runs bpavl ${sub}`).toContain(sub);
    } finally {
      // Stopped by its PID, whatever happened above.
      if (served) {
        served.child.kill('SIGTERM');
        stopped = await Promise.race([served.exited, new Promise<string>((r) => setTimeout(() => r('timeout'), 10_000))]);
        if (stopped === 'timeout') served.child.kill('SIGKILL');
      }
    }
    expect(stopped, 'bpavl serve --db stops on SIGTERM with exit 0').toBe(0);
  });
});

/**
 * Asks the `serve --db` of the walkthrough: `bpavl get` at the head's root
 * and at version 1's (every retained version is served), the sync-from-B
 * line of "Syncing into a state directory", and README.md's query client
 * snippet, run against it.
 */
async function answerServe(ws: string, dir: string, versions: Values[]): Promise<void> {
  const roots = versionsOf(bpavl(['versions', '--db', './state'], dir).stdout);
  expect(roots.length).toBe(versions.length);
  const keys = ['alice', 'bob', 'carol', 'user-2499'];
  for (const v of [roots.length, 1]) {
    const r = bpavl(['get', '--root', roots[v - 1]!.root, '--peer', ws, '--utf8', ...keys], dir);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n'), `bpavl get --peer at version ${v}`).toEqual(expectedGet(keys, versions[v - 1]!));
  }

  // "…and C syncs from B, verified against the same root".
  const sync = commands(shBlock('Syncing into a state directory')).find((c) => c.words[1] === 'sync' && c.words.filter((x) => x === '--peer').length === 1 && !c.words.includes('--discard-unfinished'));
  expect(sync, 'the "Syncing into a state directory" block syncs C from B alone').toBeDefined();
  const head = roots.at(-1)!.root;
  const words = sync!.words.map((x) => (x === '$ROOT' ? head : /^ws:\/\//.test(x) ? ws : x));
  const synced = runLine({ words, where: sync!.where }, dir);
  expect(synced.stdout, sync!.where).toContain(`root verified ${head}`);
  const into = flag(words, '--db')!;
  const got = bpavl(['get', '--db', into, '--utf8', ...keys], dir);
  expect(got.code, got.stderr).toBe(0);
  expect(got.stdout.trim().split('\n'), `the state synced into ${into}`).toEqual(expectedGet(keys, versions.at(-1)!));

  await runClientSnippet(ws, head, dir);
}

/**
 * README.md's "Verified reads in a dapp" snippet as a Node module (Node
 * strips its types), its peers pointed at the served state and its free
 * names bound: `root` the head, `key` alice, `keys` [alice, bob, nobody],
 * `start`/`end` a … b, `show` collecting the entries.
 */
async function runClientSnippet(ws: string, root: string, dir: string): Promise<void> {
  const [block] = codeBlocks('README.md', 'Verified reads in a dapp').filter((b) => b.lang === 'ts');
  expect(block, 'README.md has a ts block under "Verified reads in a dapp"').toBeDefined();
  const body = block!.text.replace(/ws:\/\/127\.0\.0\.1:\d+/g, ws);
  const prelude = [
    `const hex = (s) => Uint8Array.from(Buffer.from(s, 'hex'));`,
    `const utf8 = (s) => new TextEncoder().encode(s);`,
    `const root = hex('${root}');`,
    `const key = utf8('alice');`,
    `const keys = ['alice', 'bob', 'nobody'].map(utf8);`,
    `const start = utf8('a'), end = utf8('b');`,
    `const shown = [];`,
    `const show = (entries) => shown.push(...entries);`,
  ].join('\n');
  const report = `\nconsole.log(JSON.stringify({ balance: balance && Buffer.from(balance).toString(), values: values.map((v) => v && Buffer.from(v).toString()), shown: shown.length }));\n`;
  const file = join(dir, 'client-snippet.mts');
  writeFileSync(file, `${prelude}\n${body}\n${report}`);
  linkNodeModules(dir);
  const r = spawnSync(process.execPath, [file], { cwd: dir, encoding: 'utf8', timeout: 20_000, killSignal: 'SIGKILL' });
  expect(r.status, `${block!.file}:${block!.line}: the client snippet ran\n${r.stdout}\n${r.stderr}`).toBe(0);
  const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { balance: string; values: (string | undefined)[]; shown: number };
  expect(out.balance).toBe('90');
  expect(out.values).toEqual(['90', '260', null]); // JSON: undefined in an array is null
  expect(out.shown).toBeGreaterThan(0);
}

/** `dir/node_modules` → the repository's, so that `@bpavl/…` resolves as installed. */
function linkNodeModules(dir: string): void {
  if (!readdirSync(dir).includes('node_modules')) symlinkSync(join(repo, 'node_modules'), join(dir, 'node_modules'), 'dir');
}

// ---------------------------------------------------------------- (b) the ts blocks

/**
 * The names the READMEs' ts snippets leave free (the values a caller has, or
 * what an earlier snippet of the same README imported), declared for all.
 * A snippet's own declarations and imports shadow these.
 */
const FREE_NAMES = `
type Bytes = Uint8Array;
declare const root: Bytes, newRoot: Bytes, newer: Bytes;
declare const key: Bytes, value: Bytes, proof: Bytes, envelope: Bytes, other: Bytes;
declare const keys: Bytes[];
declare const start: Bytes, end: Bytes, a: Bytes, b: Bytes, c: Bytes;
declare const hash: Bytes, bytes: Bytes, staleHash: Bytes, HEAD: Bytes;
declare const peers: string[];
declare const dir: string;
declare const entries: Iterable<readonly [Bytes, Bytes]>;
declare const wasm: typeof import('@bpavl/wasm');
declare const onEvent: NonNullable<Parameters<typeof import('@bpavl/light-client/sync').syncState>[0]['onEvent']>;
declare const syncState: typeof import('@bpavl/light-client/sync').syncState;
declare const openState: typeof import('@bpavl/store').openState;
declare const holdsNoState: typeof import('@bpavl/store').holdsNoState;
declare const reader: import('@bpavl/store').State;
declare function show(entries: unknown): void;
declare function use(entries: unknown): void;
declare function store(key: Bytes, value: Bytes): void;
declare function banPeer(code?: string): void;
declare const rebuilder: import('@bpavl/wasm').Rebuilder;
declare const i: number;
`;

describe('the READMEs\' ts and js blocks', () => {
  const readmes = ['README.md', ...readdirSync(join(repo, 'packages')).map((p) => `packages/${p}/README.md`)].filter((f) => {
    try {
      readFileSync(join(repo, f));
      return true;
    } catch {
      return false;
    }
  });
  const blocks = readmes.flatMap((f) => codeBlocks(f)).filter((b) => ['ts', 'typescript', 'js', 'javascript'].includes(b.lang));

  it('finds the blocks', () => {
    expect(blocks.filter((b) => b.lang === 'ts').length).toBeGreaterThanOrEqual(10);
    expect(blocks.filter((b) => b.lang === 'js').length).toBeGreaterThanOrEqual(4);
  });

  it('type-check as a consumer\'s modules (js blocks with checkJs)', { timeout: 60_000 }, () => {
    const dir = mkdtempSync(join(work, 'ts-'));
    linkNodeModules(dir);
    const names = new Map<string, Block>();
    blocks.forEach((b, i) => {
      const name = `snippet-${i}.${b.lang.startsWith('t') ? 'ts' : 'js'}`;
      names.set(name, b);
      writeFileSync(join(dir, name), `${b.text}\nexport {};\n`);
    });
    writeFileSync(join(dir, 'free-names.d.ts'), FREE_NAMES);
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    // useUnknownInCatchVariables off: a JavaScript caller reads `e.code` of
    // a caught error as it is; the ts snippets narrow with instanceof anyway.
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        extends: join(repo, 'tsconfig.json'),
        compilerOptions: { noEmit: true, types: ['node'], allowImportingTsExtensions: true, allowJs: true, checkJs: true, useUnknownInCatchVariables: false, declaration: false, declarationMap: false, sourceMap: false },
        include: ['*.ts', '*.js'],
      }),
    );
    const tsc = join(repo, 'node_modules', 'typescript', 'bin', 'tsc');
    const r = spawnSync(process.execPath, [tsc, '-p', dir, '--pretty', 'false'], { cwd: dir, encoding: 'utf8', timeout: 50_000 });
    // Point each error at its README line.
    const errors = `${r.stdout}${r.stderr}`
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => {
        const m = /^(snippet-\d+\.[jt]s)\((\d+),(\d+)\): (.*)$/.exec(l);
        const b = m && names.get(m[1]!);
        return b ? `${b.file}:${b.line + Number(m![2]) - 1}:${m![3]}: ${m![4]}` : l;
      });
    expect(errors).toEqual([]);
    expect(r.status).toBe(0);
  });
});
