// A child process for the Node backend's tests, run by Node itself (type
// stripping) on the sources:
//   node child.ts write DIR   opens DIR as the writer and writes numbered
//                             batches (batches.ts) after the last one it finds,
//                             printing each number once its write resolved,
//                             until killed or COUNT batches (argv[4]) are written,
//                             PAUSE ms apart (argv[5]);
//   node child.ts hold DIR    opens DIR as the writer, prints "ready", waits to be killed;
//   node child.ts open DIR    tries to open DIR as the writer and prints the error code or "opened".
import { setTimeout as sleep } from 'node:timers/promises';
import { openNodeBackend } from '../src/node/index.ts';
import { batch, lastBatch, TABLES } from './batches.ts';

const [mode, path, count, pause] = process.argv.slice(2);
const print = (line: string) => process.stdout.write(`${line}\n`);

if (mode === 'open') {
  try {
    await (await openNodeBackend({ path, tables: TABLES })).close();
    print('opened');
  } catch (e) {
    print((e as { code?: string }).code ?? String(e));
  }
} else {
  const backend = await openNodeBackend({ path, tables: TABLES });
  print('ready');
  if (mode === 'write') {
    const first = (await lastBatch(backend)) + 1;
    for (let n = first; n < first + Number(count ?? Infinity); n++) {
      await backend.write(batch(n));
      print(String(n));
      if (pause) await sleep(Number(pause));
    }
    await backend.close();
  } else {
    setInterval(() => undefined, 1 << 30);
  }
}
