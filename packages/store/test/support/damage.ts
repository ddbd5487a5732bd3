// Damage the store tests and the CLI tests do to a state directory on disk
// (the Node backend: one SQLite file), as an operator's audit found it.
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

/**
 * Flips the last byte (part of the root) of the record of `version` in the
 * state directory `dir`, in one SQLite transaction: a record that fails its
 * checks.
 */
export function damageVersionRecord(dir: string, version: number): void {
  const sqlite = new DatabaseSync(join(dir, 'data.sqlite'));
  const key = new Uint8Array(8);
  new DataView(key.buffer).setBigUint64(0, BigInt(version));
  try {
    sqlite.exec('BEGIN');
    const { v } = sqlite.prepare('SELECT v FROM versions WHERE k = ?').get(key) as { v: Uint8Array };
    const damaged = Uint8Array.from(v);
    damaged[damaged.length - 1]! ^= 0x41;
    sqlite.prepare('UPDATE versions SET v = ? WHERE k = ?').run(damaged, key);
    sqlite.exec('COMMIT');
  } finally {
    sqlite.close();
  }
}
