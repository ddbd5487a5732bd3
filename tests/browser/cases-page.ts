// What the IndexedDB suite pages share (tests/browser/storage, tests/browser/store):
// each case runs on a database of its own, deleted afterwards; the results
// are shown in #summary, and #status is set to "done" for the spec to read.

/** What a suite page publishes. */
export interface CaseResults {
  passed: string[];
  failures: Array<{ name: string; error: string }>;
  ms: number;
}

async function deleteDatabase(name: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const req = indexedDB.deleteDatabase(name);
    req.onsuccess = () => resolve();
    req.onerror = () => reject(req.error);
  });
}

/** Runs every case in order, each given the name of a fresh database, and shows the results. */
export async function runCases(cases: ReadonlyArray<{ readonly name: string; run(database: string): Promise<void> }>, databasePrefix: string): Promise<CaseResults> {
  const t0 = performance.now();
  const results: CaseResults = { passed: [], failures: [], ms: 0 };
  for (const [i, c] of cases.entries()) {
    const database = `${databasePrefix}-${i}`;
    try {
      await c.run(database);
      results.passed.push(c.name);
    } catch (e) {
      results.failures.push({ name: c.name, error: e instanceof Error ? `${e.name}: ${e.message}\n${e.stack ?? ''}` : String(e) });
    } finally {
      await deleteDatabase(database);
    }
  }
  results.ms = performance.now() - t0;
  document.querySelector('#summary')!.textContent = JSON.stringify(results, null, 2);
  return results;
}

/** Marks the page done: the spec waits for `#status[data-state=done]`, then reads the published results. */
export function markDone(): void {
  const status = document.querySelector<HTMLElement>('#status')!;
  status.dataset.state = 'done';
  status.textContent = 'done';
}
