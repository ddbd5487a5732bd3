/**
 * Tree files, written by `bpavl generate` and read by `bpavl serve --file`:
 * a fixed header, then every chunk envelope of one committed version.
 *
 * ```
 * magic     8 bytes  "BPAVLTF1"
 * root      32 bytes
 * version   u64be
 * capacity  u32be
 * entries   u64be
 * chunks    u32be
 * seed      u64be    the workload seed (bpavl generate), for information
 * chunk × chunks:
 *   length  u32be
 *   envelope (spec/chunk-format.md)
 * ```
 *
 * Loading trusts nothing but the header's root: every envelope goes through
 * `Rebuilder.add`, which verifies it against that root and its index, and the
 * rebuilt tree's root is checked again on `finish` (`spec/chunk-format.md`).
 * Pass `expectedRoot` to also pin the root itself.
 * @module
 */

import { open, readFile } from 'node:fs/promises';
import { Rebuilder, Tree } from '@bpavl/wasm';
import { toHex } from './source.ts';

const MAGIC = new TextEncoder().encode('BPAVLTF1');
const HEADER_LEN = 8 + 32 + 8 + 4 + 8 + 4 + 8;

/** The header of a tree file. */
export interface TreeFileHeader {
  root: Uint8Array;
  version: number;
  capacity: number;
  entryCount: number;
  chunkCount: number;
  seed: bigint;
}

/** A tree file that is not one (bad magic, truncated, inconsistent); `code` is stable. */
export class TreeFileError extends Error {
  readonly code: 'TREE_FILE_INVALID' | 'ROOT_MISMATCH';
  constructor(code: TreeFileError['code'], message: string) {
    super(message);
    this.name = 'TreeFileError';
    this.code = code;
  }
}

/** Writes `tree`'s last committed version to `path` (overwriting it). */
export async function writeTreeFile(path: string, tree: Tree, seed: bigint): Promise<TreeFileHeader> {
  const header: TreeFileHeader = {
    root: tree.head().root,
    version: tree.head().version,
    capacity: tree.capacity,
    entryCount: tree.len,
    chunkCount: tree.chunkCount,
    seed,
  };
  const fh = await open(path, 'w');
  try {
    const h = Buffer.alloc(HEADER_LEN);
    h.set(MAGIC, 0);
    h.set(header.root, 8);
    h.writeBigUInt64BE(BigInt(header.version), 40);
    h.writeUInt32BE(header.capacity, 48);
    h.writeBigUInt64BE(BigInt(header.entryCount), 52);
    h.writeUInt32BE(header.chunkCount, 60);
    h.writeBigUInt64BE(seed, 64);
    await fh.write(h);
    // Batches of envelopes, so a big tree is neither one huge buffer nor 100k tiny writes.
    let batch: Uint8Array[] = [];
    let batchBytes = 0;
    for (let i = 0; i < header.chunkCount; i++) {
      const env = tree.head().exportChunk(i);
      const len = Buffer.alloc(4);
      len.writeUInt32BE(env.length, 0);
      batch.push(len, env);
      batchBytes += 4 + env.length;
      if (batchBytes > 4 << 20) {
        await fh.write(Buffer.concat(batch));
        batch = [];
        batchBytes = 0;
      }
    }
    if (batch.length > 0) await fh.write(Buffer.concat(batch));
  } finally {
    await fh.close();
  }
  return header;
}

/** Reads only the header of a tree file. */
export function parseTreeFileHeader(bytes: Uint8Array): TreeFileHeader {
  if (bytes.length < HEADER_LEN || !MAGIC.every((b, i) => bytes[i] === b)) {
    throw new TreeFileError('TREE_FILE_INVALID', 'not a bpavl tree file (bad magic or too short)');
  }
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const num = (v: bigint, what: string): number => {
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new TreeFileError('TREE_FILE_INVALID', `${what} too large`);
    return Number(v);
  };
  return {
    root: new Uint8Array(b.subarray(8, 40)),
    version: num(b.readBigUInt64BE(40), 'version'),
    capacity: b.readUInt32BE(48),
    entryCount: num(b.readBigUInt64BE(52), 'entries'),
    chunkCount: b.readUInt32BE(60),
    seed: b.readBigUInt64BE(64),
  };
}

/**
 * Loads a tree file: rebuilds the tree from its chunks, each verified against
 * the header's root (and `expectedRoot`, if given). Call `init()` from
 * `@bpavl/wasm` first. Throws `TreeFileError` (`TREE_FILE_INVALID`,
 * `ROOT_MISMATCH`) or the rebuilder's error (with the spec `code`).
 */
export async function readTreeFile(path: string, expectedRoot?: Uint8Array): Promise<{ header: TreeFileHeader; tree: Tree }> {
  const bytes = await readFile(path);
  const header = parseTreeFileHeader(bytes);
  if (expectedRoot !== undefined && toHex(expectedRoot) !== toHex(header.root)) {
    throw new TreeFileError('ROOT_MISMATCH', `the file holds root ${toHex(header.root)}, not ${toHex(expectedRoot)}`);
  }
  if (header.chunkCount === 0) return { header, tree: emptyTree(header, bytes.length) };
  const rebuilder = new Rebuilder(header.root);
  try {
    let at = HEADER_LEN;
    for (let i = 0; i < header.chunkCount; i++) {
      if (at + 4 > bytes.length) throw new TreeFileError('TREE_FILE_INVALID', `truncated before chunk ${i}`);
      const len = bytes.readUInt32BE(at);
      at += 4;
      if (at + len > bytes.length) throw new TreeFileError('TREE_FILE_INVALID', `chunk ${i} is truncated`);
      rebuilder.add(i, bytes.subarray(at, at + len));
      at += len;
    }
    if (at !== bytes.length) throw new TreeFileError('TREE_FILE_INVALID', 'bytes after the last chunk');
    if (rebuilder.chunkCount !== header.chunkCount) {
      throw new TreeFileError('TREE_FILE_INVALID', `header says ${header.chunkCount} chunks, the root says ${rebuilder.chunkCount}`);
    }
  } catch (e) {
    rebuilder.free();
    throw e;
  }
  const tree = rebuilder.finish(header.version);
  if (tree.len !== header.entryCount || tree.capacity !== header.capacity) {
    tree.free();
    throw new TreeFileError('TREE_FILE_INVALID', 'header totals differ from the rebuilt tree');
  }
  return { header, tree };
}

/** An empty tree has no chunks to rebuild from: recreate it and compare roots. */
function emptyTree(header: TreeFileHeader, fileLength: number): Tree {
  if (fileLength !== HEADER_LEN || header.entryCount !== 0 || header.version > 1) {
    throw new TreeFileError('TREE_FILE_INVALID', 'an empty tree file must be a version 0 or 1 header alone');
  }
  const tree = new Tree(header.capacity);
  if (header.version === 1) tree.commit();
  if (toHex(tree.head().root) !== toHex(header.root)) {
    tree.free();
    throw new TreeFileError('ROOT_MISMATCH', "the empty tree does not have the header's root");
  }
  return tree;
}
