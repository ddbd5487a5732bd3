// The error-code registry, checked mechanically: spec/errors.md lists
// exactly the codes the code can produce, each under the error type that
// produces it, and a code shared by Rust, WASM and TypeScript means the
// same error type in each. House rule: one error type per module, with
// stable codes (spec/errors.md); tests assert codes, never messages.
//
// Where the code defines its codes:
// - TypeScript: PROOF_ERROR_CODES and STORAGE_ERROR_CODES are exported lists,
//   imported here (the runtime source of truth). Every other TS error type
//   has only a union type (`export type XErrorCode = 'A' | 'B'`) or a literal
//   `readonly code` field; types do not exist at runtime, so those are read
//   from the .ts source with a regex (`union`, `errorClasses`). The regex
//   fails loudly on a union it cannot fully read (a member that is not a
//   string literal), so a code can never be skipped silently; and the set of
//   coded error classes is pinned (`TS_CLASSES`), so a new one fails here
//   until it is mapped to its spec table.
// - Rust: the `match` of each `fn code(&self) -> &'static str` in
//   crates/core/src/error.rs (the compiler makes the match exhaustive, so
//   its string literals are every code of the type). The set of files with
//   such a function is pinned (`RUST_CODE_FILES`).
// - WASM: packages/bpavl-wasm/src/convert.rs names each Rust type it throws
//   (`impl Coded for X { const NAME = "X" … X::code(self) }`).
// - Ban and report codes (never thrown to a caller, only recorded against a
//   peer): string literals in code-carrying positions of packages/*/src.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROOF_ERROR_CODES } from '../packages/light-client/src/errors.js';
import { STORAGE_ERROR_CODES } from '../packages/storage/src/errors.js';

const ROOT = join(import.meta.dirname, '..');
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

/** Files under `dir` (relative to the repository) whose names end in one of `exts`, skipping build output. */
function files(dir: string, exts: string[]): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(join(ROOT, d))) {
      if (['node_modules', 'dist', 'pkg', 'target'].includes(name)) continue;
      const p = join(d, name);
      if (statSync(join(ROOT, p)).isDirectory()) walk(p);
      else if (exts.some((e) => name.endsWith(e))) out.push(p);
    }
  };
  walk(dir);
  return out.sort();
}

const PACKAGES = readdirSync(join(ROOT, 'packages')).sort();
const CODE = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$/;

// ---------------------------------------------------------------------------
// spec/errors.md

interface Row {
  /** The backticked codes of the first cell (several for "`A`, `B`"). */
  readonly codes: string[];
  /** The first cell when it names no code, e.g. "(decoding and verification codes)". */
  readonly ref?: string;
  readonly meaning: string;
  /** Error types the meaning names in backticks (`SyncError`, `TransportError`, …). */
  readonly types: string[];
}
interface Table {
  /** "Decoding", "Tree operations", …: the `## ` heading without its parenthesis; "State store#1" for its second table. */
  readonly label: string;
  /** The paragraph just above the table. */
  readonly intro: string;
  readonly rows: Row[];
}
interface Section {
  readonly name: string;
  readonly text: string;
  readonly tables: Table[];
}

/**
 * The sections of a spec file and their `| code | meaning |` tables. `strict`
 * (spec/errors.md): every table has two columns and every first-column
 * backticked token is a code; otherwise other tables are read loosely.
 */
function parseSpec(md: string, strict = true): Map<string, Section> {
  const sections = new Map<string, Section>();
  for (const chunk of md.split(/^## /m).slice(1)) {
    const lines = chunk.split('\n');
    const name = lines[0]!.replace(/\s*\(.*\)\s*$/, '').trim();
    const tables: Table[] = [];
    let para: string[] = [];
    let intro = '';
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      if (!line.startsWith('|')) {
        if (line.trim() === '') {
          if (para.length > 0) intro = para.join(' ');
          para = [];
        } else para.push(line.trim());
        continue;
      }
      const block: string[] = [];
      while (i < lines.length && lines[i]!.startsWith('|')) block.push(lines[i++]!);
      i--;
      if (strict) expect(block[1], `the table in "${name}" has a header separator`).toMatch(/^\|[-| ]+\|$/);
      const rows = block.slice(2).flatMap((l): Row[] => {
        // The meaning may contain " | " only inside backticks, which no row does: split on the first cell boundary.
        const m = /^\|\s*(.*?)\s*\|\s*(.*?)\s*\|$/.exec(l);
        if (!strict && m === null) return [];
        expect(m, `a two-column row in "${name}": ${l}`).not.toBeNull();
        const [, first, meaning] = m!;
        const codes = [...first!.matchAll(/`([^`]+)`/g)].map((x) => x[1]!).filter((c) => strict || CODE.test(c));
        for (const c of codes) expect(c, `a code in "${name}"`).toMatch(CODE);
        const types = [...meaning!.matchAll(/`(\w+Error)`/g)].map((x) => x[1]!);
        return [codes.length > 0 ? { codes, meaning: meaning!, types } : { codes, ref: first!, meaning: meaning!, types }];
      });
      tables.push({ label: tables.length === 0 ? name : `${name}#${tables.length}`, intro: para.length > 0 ? para.join(' ') : intro, rows });
      para = [];
    }
    sections.set(name, { name, text: chunk, tables });
  }
  return sections;
}

const errorsMd = read('spec/errors.md');
const spec = parseSpec(errorsMd);
const tables = new Map([...spec.values()].flatMap((s) => s.tables.map((t) => [t.label, t] as const)));

function table(label: string): Table {
  const t = tables.get(label);
  expect(t, `spec/errors.md has a table "${label}"`).toBeDefined();
  return t!;
}
const codesOf = (...labels: string[]): Set<string> => new Set(labels.flatMap((l) => table(l).rows.flatMap((r) => r.codes)));
/** Codes of the rows of `label` whose meaning names error type `type`. */
const typedCodes = (label: string, type: string): Set<string> =>
  new Set(table(label).rows.filter((r) => r.types.includes(type)).flatMap((r) => r.codes));
/** Every backticked code anywhere in a text (tables and prose). */
const mentioned = (text: string): Set<string> => new Set([...text.matchAll(/`([A-Z][A-Z0-9_]*[A-Z0-9])`/g)].map((m) => m[1]!));

const specMentions = mentioned(errorsMd);
/** The statuses of spec/wire.md ("Responses"): the other codes a peer can be given up or banned with. */
const wireStatuses = new Set(
  parseSpec(read('spec/wire.md'), false)
    .get('Responses')!
    .tables.flatMap((t) => t.rows.flatMap((r) => r.codes)),
);

// ---------------------------------------------------------------------------
// The code's codes

/** `export type <name> = 'A' | 'B' …;` in `file`: every member, which must all be string literals. */
function union(file: string, name: string): string[] {
  const m = new RegExp(`export type ${name}\\s*=([^;]*);`).exec(read(file));
  expect(m, `${file} declares ${name}`).not.toBeNull();
  return literalUnion(m![1]!, `${file}: ${name}`);
}
function literalUnion(body: string, what: string, shape = CODE): string[] {
  const codes = [...body.matchAll(/'([^']*)'/g)].map((x) => x[1]!);
  // Nothing but literals and `|`: a member such as `| OtherCode` would otherwise be skipped.
  expect(body.replace(/'[^']*'/g, '').replace(/[|\s]/g, ''), `${what} is a union of string literals only`).toBe('');
  for (const c of codes) expect(c, what).toMatch(shape);
  return codes;
}

interface TsClass {
  readonly file: string;
  readonly cls: string;
  /** Its `name` at runtime (`this.name = 'X'` or `override readonly name = 'X'`). */
  readonly name?: string;
  /** Its codes, or `'string'` for a `code: string` field. */
  readonly codes: string[] | 'string';
}

/**
 * Every `class X extends Error` of packages/<pkg>/src with a `readonly code`
 * field, and that field's codes: a literal (`code = 'X'`), an inline union
 * (`code: 'A' | 'B'`) or a named union declared in the package.
 */
function errorClasses(): TsClass[] {
  const out: TsClass[] = [];
  for (const pkg of PACKAGES) {
    const src = files(`packages/${pkg}/src`, ['.ts']);
    const unions = new Map<string, string>();
    for (const f of src) for (const m of read(f).matchAll(/export type (\w+Code)\s*=/g)) unions.set(m[1]!, f);
    for (const f of src) {
      const text = read(f);
      for (const m of text.matchAll(/class (\w+) extends Error\b[^{]*\{([\s\S]*?)\n\}/g)) {
        const [, cls, body] = m;
        const field = /readonly code(?:\s*:\s*([^;=]+?))?(?:\s*=\s*'([^']*)')?;/.exec(body!);
        if (field === null) continue;
        const name = (/this\.name = '(\w+)'/.exec(body!) ?? /readonly name = '(\w+)'/.exec(body!))?.[1];
        const [, type, literal] = field;
        let codes: string[] | 'string';
        if (literal !== undefined) codes = [literal];
        else if (type === 'string') codes = 'string';
        else if (/^\w+$/.test(type!)) {
          expect(unions.get(type!), `${f}: ${cls}'s code type ${type} is declared in packages/${pkg}/src`).toBeDefined();
          codes = union(unions.get(type!)!, type!);
        } else codes = literalUnion(type!, `${f}: ${cls}.code`);
        out.push({ file: f, cls: cls!, ...(name !== undefined && { name }), codes });
      }
    }
  }
  return out;
}

interface RustType {
  readonly type: string;
  readonly codes: string[];
  /** Variants whose code is another error's (`Chunk(e) => e.code()`). */
  readonly delegates: boolean;
}

/** Each `impl X { … fn code(&self) -> &'static str { match … } }` of a Rust file. */
function rustCodes(file: string): RustType[] {
  const out: RustType[] = [];
  for (const m of read(file).matchAll(/^impl (\w+) \{([\s\S]*?)^\}/gm)) {
    const body = /fn code\(&self\) -> &'static str \{([\s\S]*?)\n {4}\}/.exec(m[2]!);
    if (body === null) continue;
    const codes = [...body[1]!.matchAll(/"([^"]*)"/g)].map((x) => x[1]!);
    for (const c of codes) expect(c, `${file}: ${m[1]}`).toMatch(CODE);
    out.push({ type: m[1]!, codes, delegates: /\(e\) => e\.code\(\)/.test(body[1]!) });
  }
  return out;
}

const rust = new Map(rustCodes('crates/core/src/error.rs').map((t) => [t.type, t]));
const ts = errorClasses();
const tsCodes = (cls: string): string[] => {
  const c = ts.find((x) => x.cls === cls);
  expect(c, `a TS error class ${cls}`).toBeDefined();
  expect(c!.codes, `${cls} has literal codes`).not.toBe('string');
  return c!.codes as string[];
};

/** Non-comment lines of every packages/<pkg>/src/**.ts. */
const srcLines = PACKAGES.flatMap((pkg) =>
  files(`packages/${pkg}/src`, ['.ts']).flatMap((f) =>
    read(f)
      .split('\n')
      .map((text, i) => ({ at: `${f}:${i + 1}`, text }))
      .filter(({ text }) => !/^\s*(\/\/|\*|\/\*\*)/.test(text)),
  ),
);

/**
 * Codes a peer is banned or given up with, never thrown to a caller: the
 * literal of `pool.ban(peer, 'X', …)`, `new Lie('X')` (the query client's
 * ban reason) and a peer report's `code: 'X'` in the light client.
 */
const banCodes = new Set(
  srcLines
    .filter(({ at }) => at.startsWith('packages/light-client/'))
    .flatMap(({ text }) => [...text.matchAll(/(?:\.ban\(\s*[\w.!]+,\s*|new Lie\(|\bcode: )'([A-Z][A-Z0-9_]*)'/g)].map((m) => m[1]!)),
);

/**
 * Codes the CLI prints as its JSON `error` without an error class
 * (`{ error: 'ABORTED', … }`), and its fallbacks for a failure with no code
 * (`typeof code === 'string' ? code : 'FAILED'`), in packages/peer/src.
 */
const cliJsonCodes = new Set(
  srcLines
    .filter(({ at }) => at.startsWith('packages/peer/'))
    .flatMap(({ text }) => [...text.matchAll(/(?:\berror: |typeof \w+ === 'string' \? \w+ : )'([A-Z][A-Z0-9_]*)'/g)].map((m) => m[1]!)),
);

// ---------------------------------------------------------------------------
// Which spec table documents which error type

/**
 * The codes each error type may produce, by spec/errors.md. A cross-reference
 * the spec makes in prose ("raises the storage codes above", "keeps the
 * tree's codes") is taken only with the sentence that makes it, checked below.
 */
function documented(type: string): Set<string> {
  switch (type) {
    case 'ProofError':
      return codesOf('Decoding', 'Verification', 'Catch-up');
    case 'TreeError':
      return codesOf('Tree operations');
    case 'RebuildError':
      return codesOf('Rebuild');
    case 'StoreError': {
      // "The store raises the storage codes above, and these", and "A proof asked of a store keeps the tree's codes: `KEY_NOT_FOUND` …".
      const s = spec.get('State store')!.text;
      expect(s, 'the State store section takes in the storage codes').toContain('The store raises the storage codes above');
      const kept = /A proof asked of a store keeps the tree's codes:(.*?\.)(?:\s|$)/.exec(s);
      expect(kept, 'the State store section keeps the tree\'s proof codes').not.toBeNull();
      const treeKept = mentioned(kept![1]!);
      for (const c of treeKept) expect(codesOf('Tree operations').has(c), `${c}, kept from the tree, is a tree code`).toBe(true);
      return new Set([...codesOf('State store'), ...codesOf('Storage'), ...treeKept]);
    }
    case 'StorageError':
      return codesOf('Storage');
    case 'WireError':
      return codesOf('Wire');
    case 'SyncError':
    case 'TransportError':
      return typedCodes('Sync', type);
    case 'QueryError':
      return typedCodes('Query client', type);
    case 'TreeFileError':
    case 'ImportError':
    case 'Interrupted': {
      // The CLI's table, and a code its rows name (a tree file "whose contents do not give its root is `ROOT_MISMATCH`").
      const cli = table('State store#1');
      expect(cli.intro, 'the second State store table is the CLI\'s').toMatch(/`bpavl` CLI/);
      return new Set(cli.rows.flatMap((r) => [...r.codes, ...mentioned(r.meaning)]));
    }
    default:
      throw new Error(`no spec table for ${type}`);
  }
}

/** Every TS class with a `readonly code` field: its file, and the spec type it is. `null`: not a registry error (see the reason). */
const TS_CLASSES: Record<string, { file: string; type: string | null; why?: string }> = {
  ProofError: { file: 'packages/light-client/src/errors.ts', type: 'ProofError' },
  WireError: { file: 'packages/light-client/src/wire/errors.ts', type: 'WireError' },
  SyncError: { file: 'packages/light-client/src/sync/types.ts', type: 'SyncError' },
  TransportError: { file: 'packages/light-client/src/transport/types.ts', type: 'TransportError' },
  QueryError: { file: 'packages/light-client/src/client/errors.ts', type: 'QueryError' },
  Lie: { file: 'packages/light-client/src/client/ask.ts', type: null, why: 'carries a ban code inside the query client (never thrown to a caller): its literals are checked as ban codes' },
  StorageError: { file: 'packages/storage/src/errors.ts', type: 'StorageError' },
  StoreError: { file: 'packages/store/src/errors.ts', type: 'StoreError' },
  TreeFileError: { file: 'packages/peer/src/treefile.ts', type: 'TreeFileError' },
  ImportError: { file: 'packages/peer/src/db-commands.ts', type: 'ImportError' },
  Interrupted: { file: 'packages/peer/src/interrupt.ts', type: 'Interrupted' },
};

/** Files with a Rust `fn code(&self) -> &'static str`, and why each is (or is not) read here. */
const RUST_CODE_FILES: Record<string, string> = {
  'crates/core/src/error.rs': 'the registry: ProofError, TreeError, RebuildError, StoreError',
  'packages/bpavl-wasm/src/convert.rs': 'the WASM mapping: delegates to the core types (checked below)',
  'crates/core/examples/gen_vectors/cases.rs': 'the vector generator: delegates to the core types',
  // Not bpavl: the IAVL-style Baseline of the paper's benchmark (crates/baseline/README.md), thrown as `BaselineError`
  // by packages/baseline-wasm. Its codes (INNER_KEY_INVALID, STRUCTURE_INVALID, …) are not bpavl's and not in spec/errors.md.
  'crates/baseline/src/lib.rs': 'not bpavl (the benchmark baseline)',
};

// ---------------------------------------------------------------------------

describe('spec/errors.md parses', () => {
  it('into the sections and tables this test maps', () => {
    expect([...tables.keys()]).toEqual([
      'Decoding',
      'Verification',
      'Catch-up',
      'Wire',
      'Sync',
      'Query client',
      'Tree operations',
      'Rebuild',
      'Storage',
      'State store',
      'State store#1',
    ]);
    for (const t of tables.values()) expect(t.rows.length, t.label).toBeGreaterThan(0);
  });

  it('names the error type of every row where one section holds several (Sync, Query client)', () => {
    for (const label of ['Sync', 'Query client']) {
      for (const r of table(label).rows) expect(r.types, `${label}: ${r.codes}`).toHaveLength(1);
    }
  });

  it('lists a code once per table', () => {
    for (const t of tables.values()) {
      const codes = t.rows.flatMap((r) => r.codes);
      expect(codes, t.label).toEqual([...new Set(codes)]);
    }
  });

  it('shares a code between tables only where pinned here (a new clash must be decided, not slip in)', () => {
    const where = new Map<string, string[]>();
    for (const t of tables.values()) for (const c of t.rows.flatMap((r) => r.codes)) where.set(c, [...(where.get(c) ?? []), t.label]);
    const shared = Object.fromEntries([...where].filter(([, ls]) => ls.length > 1));
    expect(shared).toEqual({
      // The tree checks a key, value or capacity by the same rule as a decoder, with the same code (as TreeError).
      KEY_EMPTY: ['Decoding', 'Tree operations'],
      KEY_TOO_LONG: ['Decoding', 'Tree operations'],
      VALUE_TOO_LONG: ['Decoding', 'Tree operations'],
      CAPACITY_INVALID: ['Decoding', 'Tree operations'],
      KEYS_NOT_SORTED: ['Decoding', 'Tree operations'],
      // A malformed range query: ProofError when verifying, TreeError when proving.
      QUERY_INVALID: ['Verification', 'Tree operations'],
      // A rebuilt tree or a chunk that does not give the root (RebuildError), as a proof that does not (ProofError).
      ROOT_MISMATCH: ['Verification', 'Rebuild'],
      // The same failures, as SyncError or QueryError (each row names its type).
      NO_HONEST_PEERS: ['Sync', 'Query client'],
      NO_PEERS: ['Sync', 'Query client'],
      // The store raises the storage codes, with a store-specific meaning for these two.
      STORE_READ_ONLY: ['Storage', 'State store'],
      STORE_CORRUPT: ['Storage', 'State store'],
    });
  });
});

describe('every code the code defines is documented under its error type', () => {
  it('the Rust files with a code table are the ones known here', () => {
    const found = [...files('crates', ['.rs']), ...files('packages', ['.rs'])].filter((f) =>
      /fn code\(&self\) -> &'static str/.test(read(f)),
    );
    expect(found).toEqual(Object.keys(RUST_CODE_FILES).sort());
  });

  it('Rust (crates/core/src/error.rs)', () => {
    expect([...rust.keys()]).toEqual(['ProofError', 'TreeError', 'RebuildError', 'StoreError']);
    for (const [type, { codes }] of rust) {
      const doc = documented(type);
      expect(codes.filter((c) => !doc.has(c)), `${type} codes missing from spec/errors.md`).toEqual([]);
    }
    // RebuildError::Chunk(e) => e.code(): a chunk's ProofError code, which the Rebuild table allows as
    // "(decoding and verification codes)".
    expect(rust.get('RebuildError')!.delegates).toBe(true);
    expect(table('Rebuild').rows.map((r) => r.ref).filter(Boolean)).toEqual(['(decoding and verification codes)']);
    expect(read('crates/core/src/error.rs')).toMatch(/Chunk\(ProofError\)/);
  });

  it('WASM throws each Rust error under its own type name', () => {
    const convert = read('packages/bpavl-wasm/src/convert.rs');
    const impls = [...convert.matchAll(/impl Coded for (\w+) \{\s*const NAME: &'static str = "(\w+)";\s*fn code\(&self\) -> &'static str \{\s*(\w+)::code\(self\)/g)];
    expect(impls.map((m) => m[1])).toEqual(['ProofError', 'TreeError', 'StoreError', 'RebuildError']);
    for (const [, type, name, delegate] of impls) {
      expect(name, `the JS name of ${type}`).toBe(type);
      expect(delegate, `${type}'s code`).toBe(type);
      expect(rust.has(type!), `${type} is a core error type`).toBe(true);
    }
    expect(convert.match(/impl Coded for/g)).toHaveLength(impls.length);
    // The `BpavlError` the generated .d.ts declares names exactly those types.
    const names = /name: ((?:'\w+'(?:\s*\|\s*)?)+);/.exec(read('packages/bpavl-wasm/src/lib.rs'));
    expect(names).not.toBeNull();
    expect(literalUnion(names![1]!, 'BpavlError.name', /^\w+Error$/).sort()).toEqual(impls.map((m) => m[1]!).sort());
  });

  it('TypeScript: the coded error classes are the ones known here', () => {
    expect(Object.fromEntries(ts.map((c) => [c.cls, c.file]))).toEqual(
      Object.fromEntries(Object.entries(TS_CLASSES).map(([cls, { file }]) => [cls, file])),
    );
    for (const c of ts) expect(c.name, `${c.cls}'s runtime name`).toBe(c.cls);
  });

  it('TypeScript', () => {
    for (const c of ts) {
      const { type } = TS_CLASSES[c.cls]!;
      if (type === null) continue;
      expect(c.codes, c.cls).not.toBe('string');
      const doc = documented(type);
      expect((c.codes as string[]).filter((x) => !doc.has(x)), `${c.cls} (${c.file}) codes missing from spec/errors.md`).toEqual([]);
    }
  });

  it('TypeScript: the exported code lists are their union types, in spec order', () => {
    expect([...PROOF_ERROR_CODES]).toEqual(union('packages/light-client/src/errors.ts', 'ProofErrorCode'));
    expect([...STORAGE_ERROR_CODES]).toEqual(union('packages/storage/src/errors.ts', 'StorageErrorCode'));
    expect([...STORAGE_ERROR_CODES]).toEqual([...codesOf('Storage')]);
    // PROOF_ERROR_CODES is "in the order of spec/errors.md", less the ban-only KEY_COPY_MISMATCH (below).
    expect([...PROOF_ERROR_CODES]).toEqual([...codesOf('Decoding', 'Verification', 'Catch-up')].filter((c) => c !== 'KEY_COPY_MISMATCH'));
  });

  it('ban and report codes are documented codes or wire statuses', () => {
    expect(banCodes.size).toBeGreaterThan(0);
    const undocumented = [...banCodes].filter((c) => !specMentions.has(c) && !wireStatuses.has(c));
    expect(undocumented).toEqual([]);
  });

  it('no other code-like literal in packages/*/src is undocumented', () => {
    // A quoted code in a line that handles codes (`code`, a CLI's JSON `error:`, a ban, `fail(…)`): catches a
    // plain `Object.assign(new Error(…), { code: 'X' })`, a fallback code, or a comparison with a code nothing has.
    // Codes that occur but are not documented yet, each with where it occurs (none now).
    const PENDING: Record<string, string> = {};
    const found = new Map<string, string>();
    for (const { at, text } of srcLines) {
      if (!/\bcode\b|\berror:|\.ban\(|\bfail\(/.test(text)) continue;
      for (const m of text.matchAll(/'([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)'/g)) {
        const c = m[1]!;
        if (c.length < 4 || c.startsWith('SIG')) continue; // signal names
        if (!specMentions.has(c) && !wireStatuses.has(c)) found.set(c, found.get(c) ?? at);
      }
    }
    expect(Object.fromEntries([...found].filter(([c]) => !(c in PENDING)))).toEqual({});
    expect([...found.keys()].sort(), 'PENDING holds only what still occurs').toEqual(Object.keys(PENDING).sort());
  });
});

describe('every code spec/errors.md lists is produced by its error type', () => {
  /** The types a spec table documents, and what each defines. */
  const producers: [string, string[]][] = [
    ['Decoding', [...rust.get('ProofError')!.codes, ...PROOF_ERROR_CODES]],
    ['Verification', [...rust.get('ProofError')!.codes, ...PROOF_ERROR_CODES]],
    ['Catch-up', [...rust.get('ProofError')!.codes, ...PROOF_ERROR_CODES, ...banCodes]],
    ['Wire', tsCodes('WireError')],
    ['Tree operations', rust.get('TreeError')!.codes],
    ['Rebuild', rust.get('RebuildError')!.codes],
    ['Storage', [...STORAGE_ERROR_CODES]],
    ['State store', [...rust.get('StoreError')!.codes, ...tsCodes('StoreError')]],
    ['State store#1', [...tsCodes('TreeFileError'), ...tsCodes('ImportError'), ...tsCodes('Interrupted'), ...cliJsonCodes]],
  ];
  it.each(producers)('%s', (label, defined) => {
    const have = new Set(defined);
    expect([...codesOf(label)].filter((c) => !have.has(c)), `${label}: documented, but no error type defines it`).toEqual([]);
  });

  it.each([
    ['Sync', 'SyncError'],
    ['Sync', 'TransportError'],
    ['Query client', 'QueryError'],
  ])('%s (%s rows)', (label, type) => {
    expect([...typedCodes(label, type)].sort()).toEqual([...tsCodes(type)].sort());
  });

});

describe('the same code is the same error type in Rust, WASM and TypeScript', () => {
  it('ProofError: Rust, WASM and TS have the same codes', () => {
    expect([...PROOF_ERROR_CODES]).toEqual(rust.get('ProofError')!.codes);
  });

  it('StoreError: what the core throws through WASM is a TS StoreError code', () => {
    const store = new Set(tsCodes('StoreError'));
    expect(rust.get('StoreError')!.codes.filter((c) => !store.has(c))).toEqual([]);
  });

  it('no two error types of one language share a runtime name', () => {
    const names = ts.map((c) => c.name ?? c.cls);
    expect(names).toEqual([...new Set(names)]);
    // TS and WASM share only StoreError (a store error, either side) and ProofError (identical codes, above).
    const wasmNames = [...rust.keys()];
    expect(names.filter((n) => wasmNames.includes(n)).sort()).toEqual(['ProofError', 'StoreError']);
  });

  it('KEY_COPY_MISMATCH (Catch-up) is a ban code only: no error type throws it', () => {
    // spec/errors.md: "its sender is banned, the key copy never kept"; packages/light-client/src/sync/catchup.ts bans with it.
    expect(banCodes.has('KEY_COPY_MISMATCH')).toBe(true);
    expect(rust.get('ProofError')!.codes).not.toContain('KEY_COPY_MISMATCH');
  });
});

describe('tests assert only documented codes', () => {
  // Every test suite: vitest's, the browser and end-to-end ones. packages/baseline-wasm tests the benchmark
  // baseline, whose BaselineError codes are not bpavl's (see RUST_CODE_FILES).
  const testFiles = [
    ...PACKAGES.filter((p) => p !== 'baseline-wasm').flatMap((p) => {
      try {
        return files(`packages/${p}/test`, ['.ts']);
      } catch {
        return [];
      }
    }),
    ...files('tests', ['.ts']).filter((f) => !f.endsWith('errors-registry.test.ts')),
  ];
  /** Quoted strings that are not codes though shaped like one (not code assertions). */
  const NOT_CODES = new Set(['WS_ERR_UNSUPPORTED_MESSAGE_LENGTH']); // the ws library's close reason (light-client messages.test.ts)

  it('finds the test files', () => expect(testFiles.length).toBeGreaterThan(20));

  it('each asserted code is in spec/errors.md (or a wire status), and each name/code pair is documented', () => {
    const bad: string[] = [];
    for (const f of testFiles) {
      const text = read(f);
      // Codes a test makes up itself, on an error it throws to see it passed through (`{ code: 'KILLED' }`).
      const madeUp = new Set([...text.matchAll(/Object\.assign\(new Error\([^)]*\),\s*\{[^}]*\bcode: '(\w+)'/g)].map((m) => m[1]!));
      // Made up to check a guard refuses an unknown code (package tests of isProofError / isStorageError).
      for (const m of text.matchAll(/is\w+Error\(Object\.assign\(new Error\([^)]*\),\s*\{[^}]*\bcode: '(\w+)'/g)) madeUp.add(m[1]!);
      text.split('\n').forEach((line, i) => {
        const at = `${f}:${i + 1}`;
        // Any code-shaped string with an underscore (a table of cases, a helper's argument) …
        const shaped = [...line.matchAll(/['"`]([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)['"`]/g)].map((m) => m[1]!);
        // … and a one-word one where a code goes: `code: 'X'`, `code === 'X'`, `.code).toBe('X')`, a CLI's `error: 'X'`.
        const placed = [...line.matchAll(/(?:\bcode\b['"]?\s*(?::|===?)\s*|code\)\)?\.to(?:Be|Equal)\(|\berror:\s*|data-code', )'([A-Z][A-Z0-9_]*)'/g)].map((m) => m[1]!);
        for (const c of new Set([...shaped, ...placed])) {
          if (NOT_CODES.has(c) || madeUp.has(c)) continue;
          if (!specMentions.has(c) && !wireStatuses.has(c)) bad.push(`${at}: ${c}`);
        }
        // `{ name: 'XError', code: 'Y' }` and `expectCoded(e, 'XError', 'Y')`: Y must be documented for XError.
        for (const m of line.matchAll(/name: '(\w+Error)', code: '(\w+)'|expectCoded\([^,]+,\s*'(\w+Error)',\s*'(\w+)'\)/g)) {
          const type = m[1] ?? m[3]!;
          const code = m[2] ?? m[4]!;
          if (madeUp.has(code)) continue;
          const doc = type === 'RebuildError' ? new Set([...documented(type), ...codesOf('Decoding', 'Verification')]) : documented(type);
          if (!doc.has(code)) bad.push(`${at}: ${type} ${code}`);
        }
      });
    }
    expect(bad).toEqual([]);
  });
});
