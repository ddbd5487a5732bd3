// What the store tests check after a sync or a catch-up: the state
// directory's head holds exactly a tree's entries, under its root.
import type { Tree } from '@bpavl/wasm';
import { expect } from 'vitest';
import { openState } from '../../src/index.ts';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** The head of the state at `path` (version `version`, if given) holds every entry of `tree` and nothing else. */
export async function expectHolds(path: string, tree: Tree, version?: number): Promise<void> {
  const state = await openState({ path, readOnly: true });
  try {
    if (version !== undefined) expect(state.head()?.version).toBe(version);
    expect(hex(state.head()!.root)).toBe(hex(tree.head().root));
  } finally {
    await state.close();
  }
  await expectRetained(path, tree, version);
}

/** Version `version` (default: the head) of the state at `path` holds every entry of `tree` and nothing else, under its root. */
export async function expectRetained(path: string, tree: Tree, version?: number): Promise<void> {
  const state = await openState({ path, readOnly: true });
  try {
    const at = { version: version ?? state.head()!.version };
    expect(hex(state.versions().find((v) => v.version === at.version)!.root)).toBe(hex(tree.head().root));
    let n = 0;
    for await (const [k, v] of state.range(undefined, undefined, at)) {
      expect(hex(v)).toBe(hex(tree.get(k)!));
      n++;
    }
    expect(n).toBe(tree.len);
  } finally {
    await state.close();
  }
}
