// The demo's moving head end to end: scripts/demo.mjs with --follow 2 (the
// peers commit a new version every 2 s, 50 seeded writes each; the launcher
// publishes each root on /head.json), 8 peers of 20,000 entries at chunk
// capacity 64, 2 of them lying on every answer. Headless Chromium syncs,
// then the page catches its IndexedDB state up to each new root, one honest
// peer refusing connections meanwhile (as if restarting). Every wait
// is on a selector with a bound, never a fixed sleep. A screenshot of the
// page following is written to test-results/demo-follow.png.
import { expect, type Page, test } from '@playwright/test';
import { headWrites } from '../../packages/peer/src/workload.ts';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type Demo, type DemoInfo, repoRoot, startDemo, stopDemo, watch } from './demo-process.ts';

const SCREENSHOT = join(repoRoot, 'test-results', 'demo-follow.png');

/** The lying modes, each on every answer: both lie on the catch-up's requests too. */
const LIARS = ['corrupt-value', 'wrong-root'];
const WRITES = 50;

let demo: Demo | undefined;
let info: DemoInfo;

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  test.setTimeout(600_000);
  demo = await startDemo(['--entries', '20000', '--chunk', '64', '--peers', '8', '--follow', '2', '--follow-writes', String(WRITES), '--byzantine', LIARS.join(',')]);
  info = demo.info;
});

test.afterAll(() => stopDemo(demo));

/** The launcher's published heads, oldest first. */
async function heads(): Promise<{ version: number; root: string; bytes: number }[]> {
  const res = await fetch(new URL('head.json', info.url));
  return ((await res.json()) as { heads: { version: number; root: string; bytes: number }[] }).heads;
}

const catchUps = (page: Page) => page.locator('#follow-log li');

test('the page syncs, then follows the moving head: each catch-up fetches a fraction of the state, and the liars are banned', async ({ page }) => {
  test.setTimeout(180_000);
  const problems = watch(page);
  expect(info.follow).toMatchObject({ seconds: 2, writes: WRITES });
  await page.goto(info.url);
  await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
  await expect(page.locator('#follow')).toBeVisible();
  // The trusted root is the feed's newest head.
  await expect(page.locator('#head-status')).toHaveAttribute('data-version', /^\d+$/);
  const start = await page.getByLabel('Trusted root').inputValue();
  expect((await heads()).map((h) => h.root)).toContain(start);

  await page.getByRole('button', { name: 'Start sync' }).click();
  await expect(page.locator('#banner')).toHaveAttribute('data-state', 'verified', { timeout: 120_000 });

  // One honest peer now refuses every new connection (as a peer that is restarting would): its refusals are
  // transient, not lies. The rejection log shows the liars' bans, and the refusals only as a quiet count.
  const restarting = new URL(info.peers.find((p) => p.mode === null)!.ws).host;
  await page.routeWebSocket((url) => url.host === restarting, (ws) => ws.close({ code: 1012, reason: 'restarting' }));
  // One read of the log (it is redrawn as each catch-up starts): the bans, the refusals' count, and raw refusal lines.
  const readLog = () =>
    page.evaluate(() => ({
      bans: document.querySelectorAll('#log li[data-ban]').length,
      transient: Number(document.querySelector<HTMLElement>('#log [data-transient]')?.dataset.transient ?? 0),
      raw: [...document.querySelectorAll<HTMLElement>('#log li[data-code]')].map((li) => li.dataset.code).filter((c) => /^(BUSY|CONNECT_FAILED|CONNECTION_CLOSED|TIMEOUT)$/.test(c!)),
    }));
  await expect.poll(async () => { const l = await readLog(); return l.bans > 0 && l.transient > 0; }, { timeout: 60_000 }).toBe(true);
  expect((await readLog()).raw).toEqual([]);

  // The kept state follows: three catch-ups at least, each to a newer published root.
  await expect.poll(() => catchUps(page).count(), { timeout: 90_000 }).toBeGreaterThanOrEqual(3);
  await page.getByLabel('Follow the head').uncheck();
  await expect(page.locator('body')).toHaveAttribute('data-sync', 'idle', { timeout: 30_000 });
  const published = await heads();
  const banned = new Set<string>();
  let previous = 0;
  for (const li of (await catchUps(page).all()).reverse()) {
    const version = Number(await li.getAttribute('data-version'));
    const root = await li.getAttribute('data-root');
    expect(published.find((h) => h.version === version)?.root).toBe(root);
    expect(version).toBeGreaterThan(previous);
    previous = version;
    // 50 writes touch at most 50 of ~450 chunks; a catch-up fetches far less than a full sync.
    const bytes = Number(await li.getAttribute('data-bytes'));
    const full = Number(await li.getAttribute('data-full'));
    expect(bytes).toBeGreaterThan(0);
    expect(bytes).toBeLessThan(full / 4);
    for (const p of (await li.getAttribute('data-peers'))!.split(' ').filter(Boolean)) banned.add(p);
  }
  // Exactly the liars were banned, over the catch-ups.
  const liars = info.peers.filter((p) => p.mode !== null).map((p) => p.ws);
  expect([...banned].sort()).toEqual(liars.sort());

  // The kept state is the last root caught up to: the banner, the trusted root and a value the last batch wrote agree.
  const last = catchUps(page).first();
  const lastRoot = (await last.getAttribute('data-root'))!;
  const lastVersion = Number(await last.getAttribute('data-version'));
  await expect(page.locator('#banner [data-field=root]')).toHaveText(lastRoot);
  // The grid describes that version, not the first sync's: its chunk count, the chunks the catch-up
  // changed (fetched) and those kept from the version before.
  const chunkCount = Number(await last.getAttribute('data-chunks'));
  const changed = Number(await last.getAttribute('data-changed'));
  expect(changed).toBeGreaterThan(0);
  expect(chunkCount).toBeGreaterThan(changed);
  await expect(page.locator('#grid')).toHaveAttribute('data-root', lastRoot);
  await expect(page.locator('#grid .cell')).toHaveCount(chunkCount);
  await expect(page.locator('#grid .cell[data-state=changed]')).toHaveCount(changed);
  await expect(page.locator('#grid .cell[data-state=kept]')).toHaveCount(chunkCount - changed);
  // The banner: the bytes fetched of a full sync's, and the version.
  const full = (await heads()).find((h) => h.version === lastVersion)!;
  await expect(page.locator('#banner [data-field=version]')).toHaveText(`head ${lastVersion}`);
  await expect(page.locator('#banner [data-field=full]')).toHaveAttribute('data-bytes', String(full.bytes));
  await expect(page.getByLabel('Trusted root')).toHaveValue(lastRoot);
  // Feed version v is the workload after batch v − 1; its last put that no later write changed is read locally.
  const step = lastVersion - 1;
  const written = headWrites(0n, info.entryCount, step, WRITES).filter((w, i, all) => w.value !== undefined && !all.slice(i + 1).some((x) => Buffer.compare(x.key, w.key) === 0));
  const w = written.at(-1)!;
  await page.getByLabel(/^Key/).fill(Buffer.from(w.key).toString('hex'));
  await page.getByRole('button', { name: 'Look up in synced tree' }).click();
  const result = page.locator('#query-result');
  await expect(result).toHaveAttribute('data-outcome', 'present');
  await expect(result).toContainText('(the trusted root)');
  await expect(result.locator('.value code')).toContainText(Buffer.from(w.value!.subarray(0, 24)).toString('hex'));

  mkdirSync(join(repoRoot, 'test-results'), { recursive: true });
  await page.screenshot({ path: SCREENSHOT, fullPage: true });
  await test.info().attach('following the head', { path: SCREENSHOT, contentType: 'image/png' });

  // A reload: the kept state is behind the head now, and the page catches it up without a sync.
  await page.reload();
  await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
  await expect(catchUps(page)).toHaveCount(1, { timeout: 60_000 });
  await expect(page.locator('#banner')).toHaveAttribute('data-state', 'verified');
  await expect(page.locator('#banner')).toContainText('Caught up');
  expect(Number(await catchUps(page).first().getAttribute('data-version'))).toBeGreaterThan(lastVersion);

  // Stop pressed as the next catch-up starts (from inside the page: mid-catch-up by construction):
  // it stops, following is off, and the next head starts nothing.
  await page.evaluate(() => {
    const progress = document.querySelector('#progress-text')!;
    new MutationObserver((_, obs) => {
      if (progress.textContent?.startsWith('Catching up')) {
        obs.disconnect();
        document.querySelector<HTMLButtonElement>('#stop')!.click();
      }
    }).observe(progress, { childList: true, characterData: true, subtree: true });
  });
  await expect(page.locator('#banner')).toHaveAttribute('data-state', 'stopped', { timeout: 30_000 });
  await expect(page.getByLabel('Follow the head')).not.toBeChecked();
  const shown = await catchUps(page).count();
  // Two heads later (a catch-up the first one started would be over or running by then).
  const seen = Number(await page.locator('#head-status').getAttribute('data-version'));
  await expect.poll(async () => Number(await page.locator('#head-status').getAttribute('data-version')), { timeout: 30_000 }).toBeGreaterThan(seen + 1);
  await expect(page.locator('body')).toHaveAttribute('data-sync', 'idle');
  expect(await catchUps(page).count()).toBe(shown);
  expect(problems).toEqual([]);
});
