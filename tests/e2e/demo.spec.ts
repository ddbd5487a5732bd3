// The demo end to end: scripts/demo.mjs starts its own small network on free
// ports (8 peers, 20,000 entries, chunk capacity 64, 2 of the peers lying, a
// fixed state: tests/e2e/follow.spec.ts moves the head), and headless
// Chromium (tests/browser/chromium.mjs, via playwright.config.ts) drives
// packages/demo-web against it. Every wait is on a selector or an
// event with a bound, never a fixed sleep. A screenshot of the finished sync
// is written to test-results/demo-sync-finished.png.
import { expect, type Page, test } from '@playwright/test';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type Demo, type DemoInfo, repoRoot, startDemo, stopDemo, watch } from './demo-process.ts';

const SCREENSHOT = join(repoRoot, 'test-results', 'demo-sync-finished.png');

/** The code an honest client gets from each lying mode the test starts. */
const EXPECTED_CODE: Record<string, string> = {
  'corrupt-value': 'ROOT_MISMATCH',
  'wrong-index': 'CHUNK_INDEX_MISMATCH',
};

let demo: Demo | undefined;
let info: DemoInfo;

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  // Builds the demo page first if it is stale (a few seconds; the WASM build, if missing, much longer).
  test.setTimeout(600_000);
  // A fixed state (--follow 0): tests/e2e/follow.spec.ts has the moving head.
  demo = await startDemo(['--entries', '20000', '--chunk', '64', '--peers', '8', '--follow', '0', '--byzantine', Object.keys(EXPECTED_CODE).join(',')]);
  info = demo.info;
});

test.afterAll(() => stopDemo(demo));

async function open(page: Page, transport: 'ws' | 'libp2p' | 'both' = 'ws'): Promise<void> {
  await page.goto(info.url);
  await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
  await page.getByLabel(transport === 'ws' ? 'WebSocket' : transport === 'libp2p' ? 'libp2p' : 'Both', { exact: true }).check();
}

/** Clicks Start and waits for the banner; returns its state. */
async function sync(page: Page): Promise<string> {
  const banner = page.locator('#banner');
  // The last run's outcome goes first: the page clears it only once the new run starts (after opening
  // the kept state), and a wait that met the old one would read the attribute as the new run clears it.
  await banner.evaluate((b) => delete (b as HTMLElement).dataset.state);
  await page.getByRole('button', { name: 'Start sync' }).click();
  await expect(banner).toHaveAttribute('data-state', /^(verified|failed|stopped)$/, { timeout: 120_000 });
  return (await banner.getAttribute('data-state'))!;
}

const rows = (page: Page) => page.locator('#peer-table tbody tr');

/**
 * Every liar is banned with its mode's code, and no honest peer is. With
 * `unaskedLiars`, a liar may end unbanned and with no code (it sent no
 * chunk: its first would have banned it), as long as one liar of each mode
 * is banned: with 16 peers over both transports a libp2p connection may
 * open too late to be asked anything before the sync ends (a clean-clone
 * CI run saw it once: a libp2p liar active, with nothing received).
 */
async function expectLiarsBannedOnly(page: Page, perPeer: number, unaskedLiars = false): Promise<void> {
  for (const [mode, code] of Object.entries(EXPECTED_CODE)) {
    const liar = rows(page).and(page.locator(`[data-mode="${mode}"]`));
    await expect(liar).toHaveCount(perPeer);
    let banned = 0;
    for (const row of await liar.all()) {
      if (unaskedLiars && (await row.getAttribute('data-status')) !== 'banned') {
        await expect(row).not.toHaveAttribute('data-code', /./);
        continue;
      }
      await expect(row).toHaveAttribute('data-status', 'banned');
      await expect(row).toHaveAttribute('data-code', code);
      await expect(row.locator('.state')).toContainText(code);
      banned++;
    }
    expect(banned).toBeGreaterThan(0);
  }
  const honest = rows(page).and(page.locator('[data-mode="honest"]'));
  await expect(honest).toHaveCount(perPeer * (info.peers.length - Object.keys(EXPECTED_CODE).length));
  for (const row of await honest.all()) await expect(row).not.toHaveAttribute('data-status', 'banned');
}

test('the page loads with the trusted root, the peers and their modes', async ({ page }) => {
  const problems = watch(page);
  await open(page);
  await expect(page.getByLabel('Trusted root')).toHaveValue(info.root);
  await expect(page.getByRole('textbox', { name: /^Peers/ })).toHaveValue(new RegExp(info.peers[0]!.ws.replace(/[.]/g, '\\.')));
  await expect(rows(page)).toHaveCount(8);
  for (const p of info.peers) {
    const row = rows(page).and(page.locator(`[data-address="${p.ws}"]`));
    await expect(row).toHaveAttribute('data-mode', p.mode ?? 'honest');
    await expect(row).toContainText(p.mode ? `Byzantine: ${p.mode}` : 'honest');
  }
  await expect(page.locator('#grid .grid-empty')).toBeVisible();
  expect(problems).toEqual([]);
});

test('a WebSocket sync verifies the root; rejected chunks show; exactly the liars are banned', async ({ page }) => {
  const problems = watch(page);
  await page.setViewportSize({ width: 1366, height: 900 });
  await open(page, 'ws');
  expect(await sync(page)).toBe('verified');

  const banner = page.locator('#banner');
  await expect(banner).toContainText('Root verified');
  await expect(banner.locator('[data-field=root]')).toHaveText(info.root);
  await expect(page.locator('#grid .cell')).toHaveCount(info.chunkCount);
  await expect(page.locator('#grid .cell[data-state=verified]')).toHaveCount(info.chunkCount);
  await expect(page.locator('#progress')).toHaveJSProperty('value', info.chunkCount);

  // Each liar's first answer was rejected: the grid marks those chunks, the log lists them.
  const marked = page.locator('#grid .cell[data-marked=rejected]');
  expect(await marked.count()).toBeGreaterThanOrEqual(1);
  const rejected = Number(await banner.locator('[data-field=rejected]').textContent());
  expect(rejected).toBeGreaterThanOrEqual(2);
  await expect(page.locator('#log li')).toHaveCount(rejected);
  await expect(page.locator('#log')).toContainText('CHUNK_INDEX_MISMATCH');
  await expect(page.locator('#log')).toContainText('ROOT_MISMATCH');

  await expectLiarsBannedOnly(page, 1);

  // Cells explain themselves on keyboard focus and on hover; the screenshot
  // keeps the tooltip of a chunk that was rejected, then refetched.
  await page.locator('#grid .cell').first().focus();
  await page.keyboard.press('ArrowRight');
  await expect(page.locator('#grid .cell').nth(1)).toBeFocused();
  await expect(page.locator('#chunk-tip')).toContainText('Chunk 1');
  await page.keyboard.press('Escape');
  await expect(page.locator('#chunk-tip')).toBeHidden();
  await page.locator('#grid .cell').nth(1).blur();
  await marked.first().hover();
  await expect(page.locator('#chunk-tip')).toBeVisible();
  await expect(page.locator('#chunk-tip')).toContainText(/rejected from peer \d/);

  mkdirSync(join(repoRoot, 'test-results'), { recursive: true });
  await page.screenshot({ path: SCREENSHOT, fullPage: true });
  await test.info().attach('finished sync', { path: SCREENSHOT, contentType: 'image/png' });
  expect(problems).toEqual([]);
});

test('the query panel reads through the client: a lying peer is banned with its code, the next peer answers', async ({ page }) => {
  const problems = watch(page);
  await open(page, 'ws');
  const result = page.locator('#query-result');
  const honest = info.peers.find((p) => p.mode === null)!;
  const lying = info.peers.find((p) => p.mode === 'corrupt-value')!;
  await page.getByLabel('Peer to ask first').selectOption(honest.ws);

  // An existing key: an existence proof, verified here, with its path, from the chosen peer; nobody banned.
  await page.getByRole('button', { name: 'Pick a key that exists' }).click();
  await expect(page.getByLabel(/^Key/)).toHaveValue(/^[0-9a-f]{64}$/);
  await page.getByRole('button', { name: 'Look up at peer' }).click();
  await expect(result).toHaveAttribute('data-outcome', 'present');
  await expect(result).toContainText('existence proof');
  await expect(result).not.toHaveAttribute('data-code', /.*/);
  await expect(result.locator('.path')).toContainText(new RegExp(`chunk \\d+ of ${info.chunkCount}`));
  const value = await result.locator('.value').textContent();
  const answerer = async () => /Present: (.+?) proved it/.exec((await result.locator('.q-head.good').textContent()) ?? '')?.[1];
  const chosen = await answerer();
  expect(chosen).toBeTruthy();

  // The same peer made to lie (a byte of its proof flipped): banned with the code, and the same value from the next peer.
  await page.getByLabel('Make this peer lie').check();
  await page.getByRole('button', { name: 'Look up at peer' }).click();
  await expect(result).toHaveAttribute('data-outcome', 'present');
  await expect(result).toHaveAttribute('data-code', 'ROOT_MISMATCH');
  await expect(result).toContainText('ROOT_MISMATCH');
  await expect(result).toContainText('Banned; the next peer was asked');
  await expect(result).toContainText('Tampered: byte');
  await expect(result.locator('.value')).toHaveText(value!);
  expect(await answerer()).not.toBe(chosen);

  // Flipping the format byte gives another code.
  await page.getByLabel(/^Byte to flip/).fill('0');
  await page.getByRole('button', { name: 'Look up at peer' }).click();
  await expect(result).toHaveAttribute('data-code', 'FORMAT_UNSUPPORTED');
  await expect(result).toHaveAttribute('data-outcome', 'present');
  await page.getByLabel('Make this peer lie').uncheck();

  // A random key: an absence proof with both neighbours.
  await page.getByRole('button', { name: 'Pick a random key' }).click();
  await page.getByRole('button', { name: 'Look up at peer' }).click();
  await expect(result).toHaveAttribute('data-outcome', 'absent');
  await expect(result).toContainText('absence proof');
  await expect(result.locator('.path li')).toHaveCount(2);

  // A real lying peer asked first: banned with its code, and the answer comes from another peer.
  await page.getByRole('button', { name: 'Pick a key that exists' }).click();
  await page.getByLabel('Peer to ask first').selectOption(lying.ws);
  await page.getByRole('button', { name: 'Look up at peer' }).click();
  await expect(result).toHaveAttribute('data-outcome', 'present');
  await expect(result).toHaveAttribute('data-code', 'ROOT_MISMATCH');
  await expect(result).toContainText('Banned; the next peer was asked');

  // The synced tree answers locally once a sync has verified.
  await expect(page.getByRole('button', { name: 'Look up in synced tree' })).toBeDisabled();
  expect(await sync(page)).toBe('verified');
  await page.getByRole('button', { name: 'Look up in synced tree' }).click();
  await expect(result).toHaveAttribute('data-outcome', 'present');
  await expect(result).toContainText('(the trusted root)');
  expect(problems).toEqual([]);
});

test('a libp2p sync completes, and bans the liars', async ({ page }) => {
  const problems = watch(page);
  await open(page, 'libp2p');
  await expect(rows(page).first()).toHaveAttribute('data-transport', 'libp2p');
  expect(await sync(page)).toBe('verified');
  await expect(page.locator('#banner [data-field=root]')).toHaveText(info.root);
  await expect(page.locator('#grid .cell[data-state=verified]')).toHaveCount(info.chunkCount);
  await expectLiarsBannedOnly(page, 1);
  expect(problems).toEqual([]);
});

test('a sync over both transports completes', async ({ page }) => {
  const problems = watch(page);
  await open(page, 'both');
  await expect(rows(page)).toHaveCount(16);
  expect(await sync(page)).toBe('verified');
  await expect(page.locator('#banner [data-field=root]')).toHaveText(info.root);
  await expectLiarsBannedOnly(page, 2, true);
  expect(problems).toEqual([]);
});

test('Stop mid-sync leaves the page usable, and a new sync then succeeds', async ({ page }) => {
  const problems = watch(page);
  await open(page, 'ws');
  // Press Stop from inside the page as soon as the grid shows a verified
  // chunk: mid-sync by construction, with no timing guess.
  await page.evaluate(() => {
    const grid = document.querySelector('#grid')!;
    new MutationObserver((_, obs) => {
      if (grid.querySelector('.cell[data-state=verified]')) {
        obs.disconnect();
        document.querySelector<HTMLButtonElement>('#stop')!.click();
      }
    }).observe(grid, { subtree: true, childList: true, attributes: true });
  });
  expect(await sync(page)).toBe('stopped');
  await expect(page.locator('#banner')).toContainText('Stopped');
  const verified = await page.locator('#grid .cell[data-state=verified]').count();
  expect(verified).toBeGreaterThan(0);
  expect(verified).toBeLessThan(info.chunkCount);
  await expect(page.locator('#grid .cell[data-state=inflight]')).toHaveCount(0);
  await expect(page.getByRole('button', { name: 'Start sync' })).toBeEnabled();
  await expect(page.getByRole('button', { name: 'Stop' })).toBeDisabled();
  await expect(page.getByLabel('Trusted root')).toBeEditable();

  // The chunks verified before Stop are kept in IndexedDB: the new sync restores them instead of fetching them.
  await expect(page.locator('#local-status')).toHaveAttribute('data-kept', 'partial');
  // The banner's kept count is the store's, read when the sync settled (after its last writes).
  await expect(page.locator('#local-status')).toHaveAttribute('data-chunks', (await page.locator('#banner [data-field=kept]').textContent())!.replace(/\D/g, ''));
  expect(await sync(page)).toBe('verified');
  await expect(page.locator('#banner [data-field=root]')).toHaveText(info.root);
  const restored = await page.locator('#grid .cell[data-state=restored]').count();
  expect(restored).toBeGreaterThan(0);
  await expect(page.locator('#grid .cell[data-state=verified]')).toHaveCount(info.chunkCount - restored);
  expect(problems).toEqual([]);
});

test('a reload mid-sync resumes from IndexedDB; after another reload the query panel reads the kept state; Clear local data forgets it', async ({ page }) => {
  const problems = watch(page);
  await open(page, 'ws');
  await expect(page.locator('#local-status')).toHaveAttribute('data-kept', 'none');
  // Reload from inside the page once some chunks are durably kept, before all are: mid-sync by construction.
  await page.evaluate((total) => {
    const progress = document.querySelector<HTMLElement>('#progress-text')!;
    new MutationObserver((_, obs) => {
      const stored = Number(progress.dataset.stored ?? 0);
      if (stored > 0 && stored < total) {
        obs.disconnect();
        location.reload();
      }
    }).observe(progress, { attributes: true, attributeFilter: ['data-stored'] });
  }, info.chunkCount);
  await page.getByRole('button', { name: 'Start sync' }).click();
  await page.waitForEvent('load');
  await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
  const status = page.locator('#local-status');
  await expect(status).toHaveAttribute('data-kept', 'partial');
  const kept = Number(await status.getAttribute('data-chunks'));
  expect(kept).toBeGreaterThan(0);
  expect(kept).toBeLessThan(info.chunkCount);
  await expect(page.getByRole('button', { name: 'Look up in synced tree' })).toBeDisabled();

  // The resume: restored chunks in their own colour, only the others fetched (verified now), the root verified.
  expect(await sync(page)).toBe('verified');
  await expect(page.locator('#banner [data-field=root]')).toHaveText(info.root);
  await expect(page.locator('#banner [data-field=restored]')).toHaveText(String(kept));
  await expect(page.locator('#grid .cell[data-state=restored]')).toHaveCount(kept);
  await expect(page.locator('#grid .cell[data-state=verified]')).toHaveCount(info.chunkCount - kept);

  // Another reload: the kept state answers the query panel with no sync.
  await page.reload();
  await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
  await expect(status).toHaveAttribute('data-kept', 'synced');
  await page.getByRole('button', { name: 'Pick a key that exists' }).click();
  await page.getByRole('button', { name: 'Look up in synced tree' }).click();
  const result = page.locator('#query-result');
  await expect(result).toHaveAttribute('data-outcome', 'present');
  await expect(result).toContainText('(the trusted root)');

  await page.getByRole('button', { name: 'Clear local data' }).click();
  await expect(status).toHaveAttribute('data-kept', 'none');
  await expect(page.getByRole('button', { name: 'Look up in synced tree' })).toBeDisabled();
  expect(problems).toEqual([]);
});

test('a kept state the store refuses (an older layout) is never read: the page says so, and Clear local data starts over', async ({ page }) => {
  const problems = watch(page);
  await open(page, 'ws');
  expect(await sync(page)).toBe('verified');
  // The store record as layout 3 wrote it (spec/store-format.md): same capacity, layout byte 3.
  await page.evaluate(async () => {
    const db = await new Promise<IDBDatabase>((resolve, reject) => {
      const req = indexedDB.open('bpavl-demo-state');
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    const key = new TextEncoder().encode('store');
    const record = await new Promise<Uint8Array>((resolve, reject) => {
      const req = db.transaction('meta').objectStore('meta').get(key);
      req.onsuccess = () => resolve(new Uint8Array(req.result));
      req.onerror = () => reject(req.error);
    });
    if (record[record.length - 1] !== 4) throw new Error(`the kept store is in layout ${record[record.length - 1]}, not 4`);
    record[record.length - 1] = 3;
    await new Promise<void>((resolve, reject) => {
      const tx = db.transaction('meta', 'readwrite');
      tx.objectStore('meta').put(record, key);
      tx.oncomplete = () => resolve();
      tx.onerror = () => reject(tx.error);
    });
    db.close();
  });
  await page.reload();
  await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
  const status = page.locator('#local-status');
  await expect(status).toHaveAttribute('data-kept', 'error');
  await expect(status).toContainText('STORE_CORRUPT');
  expect(await sync(page)).toBe('failed');
  await expect(page.locator('#banner [data-field=code]')).toHaveText('STORE_CORRUPT');
  await expect(page.locator('#banner')).toContainText('Clear local data');
  await page.getByRole('button', { name: 'Clear local data' }).click();
  await expect(status).toHaveAttribute('data-kept', 'none');
  expect(await sync(page)).toBe('verified');
  await expect(page.locator('#banner [data-field=root]')).toHaveText(info.root);
  await page.getByRole('button', { name: 'Clear local data' }).click();
  await expect(status).toHaveAttribute('data-kept', 'none');
  expect(problems).toEqual([]);
});

test('a wrong root fails clearly: every peer refuses it', async ({ page }) => {
  const problems = watch(page);
  await open(page, 'ws');
  // A well-formed root no peer serves: each answers UNKNOWN_ROOT and is dropped.
  await page.getByLabel('Trusted root').fill(info.root.replace(/^./, (c) => (c === '0' ? '1' : '0')));
  expect(await sync(page)).toBe('failed');
  await expect(page.locator('#banner [data-field=code]')).toHaveText('NO_HONEST_PEERS');
  await expect(rows(page).and(page.locator('[data-status=failed]'))).toHaveCount(8);
  // Not hex at all: the form says so and nothing starts.
  await page.getByLabel('Trusted root').fill('not a root');
  await page.getByRole('button', { name: 'Start sync' }).click();
  await expect(page.getByLabel('Trusted root')).toHaveAttribute('aria-invalid', 'true');
  await expect(page.locator('#root-error')).toBeVisible();
  expect(problems).toEqual([]);
});
