/**
 * The writer lock of a Node database directory: an exclusive transaction
 * held open on an empty SQLite file beside the data, `writer.lock`. SQLite
 * takes it as a POSIX advisory lock, which another process, or another
 * connection in this process, cannot take too, and which the kernel drops
 * when the holder dies, even by SIGKILL: no stale lock is ever left behind.
 * Readers never touch it.
 * @module
 */
import { DatabaseSync } from 'node:sqlite';
import { join } from 'node:path';
import { StorageError } from '../errors.ts';

export const LOCK_FILE = 'writer.lock';

/** A held writer lock; `release` lets the next writer in. */
export interface WriterLock {
  release(): void;
}

/**
 * Takes the writer lock of `dir` at once, or throws `STORE_LOCKED`.
 * @throws StorageError `STORE_LOCKED` while another writer holds it; `STORE_IO` when the file cannot be opened.
 */
export function takeWriterLock(dir: string): WriterLock {
  let db: DatabaseSync;
  try {
    db = new DatabaseSync(join(dir, LOCK_FILE), { timeout: 0 });
  } catch (cause) {
    throw new StorageError('STORE_IO', `cannot open ${join(dir, LOCK_FILE)}`, { cause });
  }
  try {
    db.exec('BEGIN EXCLUSIVE');
  } catch (cause) {
    db.close();
    throw new StorageError('STORE_LOCKED', `another writer has ${dir} open`, { cause });
  }
  return { release: () => db.close() };
}
