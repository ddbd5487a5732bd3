// The child of crash.test.ts, run by Node itself (type stripping):
//   node child.ts DIR   opens the store in DIR, prints "ready", then commits
//                       version after version (commits.ts), printing
//                       "VERSION ROOT-HEX" once each commit resolved, until killed.
import { openState } from '../../src/index.ts';
import { changes } from './commits.ts';

const print = (line: string) => process.stdout.write(`${line}\n`);
// No chunk cache and a small batch: a large version (commits.ts), put 100
// entries a call, writes changed chunks ahead between its puts and at its commit.
const state = await openState({ path: process.argv[2]!, capacity: 16, cacheBytes: 0, batchBytes: 200_000 });
print('ready');
for (let v = (state.head()?.version ?? 0) + 1; ; v++) {
  const all = changes(v);
  const puts = all.filter((change): change is readonly [Uint8Array, Uint8Array] => change[1] !== undefined);
  if (puts.length === all.length) {
    for (let at = 0; at < puts.length; at += 100) await state.putMany(puts.slice(at, at + 100));
  } else {
    for (const [k, value] of all) {
      if (value === undefined) await state.delete(k);
      else await state.put(k, value);
    }
  }
  const { version, root } = await state.commit();
  print(`${version} ${Buffer.from(root).toString('hex')}`);
}
