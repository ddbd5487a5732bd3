// The child of crash.test.ts's bulk case, run by Node itself (type stripping):
//   node bulk-child.ts DIR   opens the store in DIR, prints "ready", bulk-loads
//                            bulkEntries() in writes of 1 MiB (no cache),
//                            prints "loaded ROOT-HEX", then waits to be killed.
import { openState } from '../../src/index.ts';
import { bulkEntries } from './commits.ts';

const state = await openState({ path: process.argv[2]!, capacity: 16, cacheBytes: 0 });
process.stdout.write('ready\n');
const { root } = await state.bulkLoad(bulkEntries());
process.stdout.write(`loaded ${Buffer.from(root).toString('hex')}\n`);
setInterval(() => {}, 1000);
