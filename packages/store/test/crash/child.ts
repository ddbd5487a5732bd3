// The child of crash.test.ts, run by Node itself (type stripping):
//   node child.ts DIR   opens the store in DIR, prints "ready", then commits
//                       version after version (commits.ts), printing
//                       "VERSION ROOT-HEX" once each commit resolved, until killed.
import { openState } from '../../src/index.ts';
import { changes } from './commits.ts';

const print = (line: string) => process.stdout.write(`${line}\n`);
// No chunk cache: a large version's commit writes its chunks ahead (commits.ts).
const state = await openState({ path: process.argv[2]!, capacity: 16, cacheBytes: 0 });
print('ready');
for (let v = (state.head()?.version ?? 0) + 1; ; v++) {
  for (const [k, value] of changes(v)) {
    if (value === undefined) await state.delete(k);
    else await state.put(k, value);
  }
  const { version, root } = await state.commit();
  print(`${version} ${Buffer.from(root).toString('hex')}`);
}
