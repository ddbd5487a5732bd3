// The child of crash.test.ts's bulk case, run by Node itself (type stripping):
//   node bulk-child.ts DIR   opens the store in DIR, prints "ready", bulk-loads
//                            bulkEntries() in writes of 1 MiB (no cache) as
//                            `bpavl import` does (sorted on disk under DIR by
//                            the sort's workers, in runs of 64 kB, handed to the load as buffers of records), prints
//                            "loaded ROOT-HEX",
//                            then waits to be killed.
import { openState } from '../../src/index.ts';
import { sortRecords } from '../../src/sort.node.ts';
import { bulkEntries } from './commits.ts';

const dir = process.argv[2]!;
const state = await openState({ path: dir, capacity: 16, cacheBytes: 0 });
process.stdout.write('ready\n');
const sort = (entries: Iterable<readonly [Uint8Array, Uint8Array]> | AsyncIterable<readonly [Uint8Array, Uint8Array]>) => sortRecords(entries, { dir, runBytes: 64_000 });
const { root } = await state.bulkLoad(sort(bulkEntries()));
process.stdout.write(`loaded ${Buffer.from(root).toString('hex')}\n`);
setInterval(() => {}, 1000);
