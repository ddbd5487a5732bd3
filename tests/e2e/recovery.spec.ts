// The demo's recovery paths under a moving head, end to end in Chromium:
// a sync whose root the peers stop serving, a reload mid-sync, catch-ups
// that fail, the kept state's size while following, the views during
// catch-ups, a second tab, and a Start sync with nothing to fetch. Two
// launchers (scripts/demo.mjs): one whose peers keep only 3 versions (a root
// expires in ~6 s), one with the default window. Every wait is on a
// selector or a poll with a bound, never a fixed sleep.
import { type BrowserContext, expect, type Page, test } from '@playwright/test';
import { type Demo, type DemoInfo, startDemo, stopDemo, watch } from './demo-process.ts';

test.describe.configure({ mode: 'serial' });

/** The launcher's published heads, oldest first. */
async function heads(info: DemoInfo): Promise<{ version: number; root: string }[]> {
  const res = await fetch(new URL('head.json', info.url));
  return ((await res.json()) as { heads: { version: number; root: string }[] }).heads;
}

/** The newest published head's version. */
async function newest(info: DemoInfo): Promise<number> {
  return (await heads(info)).at(-1)!.version;
}

async function open(page: Page, info: DemoInfo): Promise<void> {
  await page.goto(info.url);
  await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
  await expect(page.getByLabel('Trusted root')).toHaveValue(/^[0-9a-f]{64}$/);
}

/** From inside the page: `action` ('stop' or 'reload') once some chunks are kept, before all are (mid-sync by construction). */
async function midSync(page: Page, action: 'stop' | 'reload'): Promise<void> {
  await page.evaluate((action) => {
    const progress = document.querySelector<HTMLElement>('#progress-text')!;
    new MutationObserver((_, obs) => {
      if (Number(progress.dataset.stored ?? 0) > 0 && document.body.dataset.sync === 'running') {
        obs.disconnect();
        if (action === 'stop') document.querySelector<HTMLButtonElement>('#stop')!.click();
        else location.reload();
      }
    }).observe(progress, { attributes: true, attributeFilter: ['data-stored'] });
  }, action);
}

/** A kept state, from the last test or from a sync now (each test also runs alone: `-g`). */
async function ensureSynced(page: Page): Promise<void> {
  if (/^(synced|other)$/.test((await page.locator('#local-status').getAttribute('data-kept')) ?? '')) return;
  await page.getByRole('button', { name: 'Start sync' }).click();
  await expect(page.locator('#banner')).toHaveAttribute('data-state', 'verified', { timeout: 60_000 });
}

const banner = (page: Page) => page.locator('#banner');
const catchUps = (page: Page) => page.locator('#follow-log li');

/**
 * A launcher started with `args` and one page, for the describe that calls
 * it: each test goes on from the state the last one kept.
 */
function sharedDemo(args: string[]): { info: DemoInfo; context: BrowserContext; page: Page } {
  const shared = {} as { demo?: Demo; info: DemoInfo; context: BrowserContext; page: Page };
  test.beforeAll(async ({ browser }) => {
    test.setTimeout(600_000);
    shared.context = await browser.newContext();
    shared.page = await shared.context.newPage();
    shared.demo = await startDemo(args);
    shared.info = shared.demo.info;
  });
  test.afterAll(async () => {
    await shared.context.close();
    await stopDemo(shared.demo);
  });
  return shared;
}

test.describe('peers that keep 3 versions (a root expires in ~6 s)', () => {
  const s = sharedDemo(['--entries', '10000', '--chunk', '32', '--peers', '4', '--follow', '2', '--keep-versions', '3', '--byzantine', 'corrupt-value']);

  test('a stopped sync whose root expired: the field follows the head, the page says the root is no longer served, and the next Start sync verifies', async () => {
    test.setTimeout(120_000);
    const problems = watch(s.page);
    await open(s.page, s.info);
    await midSync(s.page, 'stop');
    await s.page.getByRole('button', { name: 'Start sync' }).click();
    await expect(banner(s.page)).toHaveAttribute('data-state', 'stopped', { timeout: 60_000 });
    const stoppedAt = await newest(s.info);
    // The stopped banner, the progress line and the local status agree on the chunks kept.
    const kept = Number(await banner(s.page).locator('[data-field=kept]').textContent());
    expect(kept).toBeGreaterThan(0);
    await expect(s.page.locator('#progress-text')).toHaveAttribute('data-stored', String(kept));
    await expect(s.page.locator('#local-status')).toHaveAttribute('data-chunks', String(kept));

    // Four heads later the stopped sync's root is no longer served; the field has followed the feed.
    await expect.poll(() => newest(s.info), { timeout: 30_000 }).toBeGreaterThan(stoppedAt + 4);
    await expect.poll(async () => (await s.page.getByLabel('Trusted root').inputValue()) === (await heads(s.info)).at(-1)!.root, { timeout: 10_000 }).toBe(true);

    await s.page.getByRole('button', { name: 'Start sync' }).click();
    await expect(banner(s.page)).toHaveAttribute('data-state', 'failed', { timeout: 60_000 });
    await expect(banner(s.page).locator('[data-field=code]')).toHaveText('UNKNOWN_ROOT');
    await expect(banner(s.page)).toContainText('no longer served');
    await expect(s.page.locator('#local-status')).toHaveAttribute('data-kept', 'none');
    expect((await heads(s.info)).map((h) => h.root)).toContain(await s.page.getByLabel('Trusted root').inputValue());

    await s.page.getByRole('button', { name: 'Start sync' }).click();
    await expect(banner(s.page)).toHaveAttribute('data-state', 'verified', { timeout: 60_000 });
    await expect(banner(s.page)).toContainText(/root verified/i);
    expect(problems).toEqual([]);
  });

  test('a catch-up that cannot reach the peers is tried again with a growing pause, its error shown meanwhile', async () => {
    test.setTimeout(120_000);
    await open(s.page, s.info);
    await ensureSynced(s.page);
    // Caught up to the head once, then the peers become unreachable.
    await expect(catchUps(s.page)).not.toHaveCount(0, { timeout: 30_000 });
    await s.page.routeWebSocket(/.*/, (ws) => ws.close());
    await s.page.evaluate(() => {
      const w = window as unknown as { attempts: number };
      w.attempts = 0;
      const progress = document.querySelector('#progress-text')!;
      new MutationObserver(() => {
        if (progress.textContent?.startsWith('Catching up from')) w.attempts++;
      }).observe(progress, { childList: true, characterData: true, subtree: true });
    });
    await expect(banner(s.page)).toHaveAttribute('data-state', 'failed', { timeout: 60_000 });
    await expect(banner(s.page).locator('[data-field=code]')).toHaveText(/^[A-Z_]+$/);
    await expect(s.page.locator('#progress-text')).toContainText('trying again in');
    const first = await s.page.evaluate(() => (window as unknown as { attempts: number }).attempts);
    // Six heads come in 12 s; with a 2, 4, 8 s pause at most three more tries start.
    const failedAt = await newest(s.info);
    await expect.poll(() => newest(s.info), { timeout: 30_000 }).toBeGreaterThan(failedAt + 5);
    const attempts = await s.page.evaluate(() => (window as unknown as { attempts: number }).attempts);
    expect(attempts - first).toBeLessThanOrEqual(3);
    await expect(banner(s.page)).toHaveAttribute('data-state', 'failed');
    await expect(banner(s.page)).toBeVisible();
  });
});

test.describe('peers that keep the default window', () => {
  const s = sharedDemo(['--entries', '20000', '--chunk', '64', '--peers', '8', '--follow', '2', '--follow-writes', '50', '--byzantine', 'corrupt-value,wrong-index']);

  test('a reload mid-sync, then Start sync once the head moved on: the unfinished sync resumes, then the page catches up to the newest head', async () => {
    test.setTimeout(180_000);
    const problems = watch(s.page);
    await open(s.page, s.info);
    await midSync(s.page, 'reload');
    await s.page.getByRole('button', { name: 'Start sync' }).click();
    await s.page.waitForEvent('load');
    await expect(s.page.locator('body')).toHaveAttribute('data-ready', 'true');
    const status = s.page.locator('#local-status');
    const kept = Number(await status.getAttribute('data-chunks'));
    expect(kept).toBeGreaterThan(0);
    // The field shows the newest head, which is not the root of the unfinished sync once the head moved.
    const reloadedAt = await newest(s.info);
    await expect.poll(() => newest(s.info), { timeout: 30_000 }).toBeGreaterThan(reloadedAt + 1);
    await expect(status).toHaveAttribute('data-kept', 'other-partial');

    // The sync's banner is replaced by the first catch-up's within a second, and its grid by the new version's
    // once that catch-up ends: the banner's restored count and the grid's restored cells are noted as it shows.
    await s.page.evaluate(() => {
      const b = document.querySelector<HTMLElement>('#banner')!;
      new MutationObserver((_, obs) => {
        const restored = b.querySelector('[data-field=restored]');
        if (restored) {
          obs.disconnect();
          document.body.dataset.restored = restored.textContent ?? '';
          document.body.dataset.restoredCells = String(document.querySelectorAll('#grid .cell[data-state=restored]').length);
        }
      }).observe(b, { childList: true, subtree: true });
    });
    await s.page.getByRole('button', { name: 'Start sync' }).click();
    await expect(s.page.locator('body')).toHaveAttribute('data-restored', String(kept), { timeout: 60_000 });
    await expect(s.page.locator('body')).toHaveAttribute('data-restored-cells', String(kept));
    // Then the page catches up to the newest head.
    await expect(catchUps(s.page)).not.toHaveCount(0, { timeout: 60_000 });
    await expect(banner(s.page)).toHaveAttribute('data-state', 'verified');
    expect(problems).toEqual([]);
  });

  test('following: the sync result stays shown, the kept state keeps 3 versions, and after a reload the table, the rejections and the grid show the catch-up and the kept state', async () => {
    test.setTimeout(180_000);
    const problems = watch(s.page);
    await open(s.page, s.info);
    await ensureSynced(s.page);
    await s.page.evaluate(() => {
      const w = window as unknown as { hidden: number };
      w.hidden = 0;
      const b = document.querySelector<HTMLElement>('#banner')!;
      new MutationObserver(() => {
        if (b.hidden) w.hidden++;
      }).observe(b, { attributes: true, attributeFilter: ['hidden'] });
    });
    // The state the last test kept catches up at once; the banner is never hidden by catch-ups.
    await expect.poll(() => catchUps(s.page).count(), { timeout: 90_000 }).toBeGreaterThanOrEqual(5);
    expect(await s.page.evaluate(() => (window as unknown as { hidden: number }).hidden)).toBe(0);
    await expect(banner(s.page)).toContainText(/root verified/i);
    const status = s.page.locator('#local-status');
    await expect(status).toHaveAttribute('data-versions', /^[123]$/);
    await expect(status).toContainText('last 3 versions');
    // The "This demo" line follows the head too.
    await expect(s.page.locator('#workload')).toContainText(/head version \d+/);

    // Each catch-up bans the liars again: the peer table and the rejection log show it.
    for (const mode of ['corrupt-value', 'wrong-index']) {
      await expect(s.page.locator(`#peer-table tbody tr[data-mode="${mode}"]`)).toHaveAttribute('data-status', 'banned', { timeout: 30_000 });
    }
    await expect(s.page.locator('#log li')).not.toHaveCount(0);
    await expect(s.page.locator('#peer-table tbody tr[data-status=connecting]')).toHaveCount(0);

    // The grid shows the kept state after a reload.
    await s.page.reload();
    await expect(s.page.locator('body')).toHaveAttribute('data-ready', 'true');
    await expect(s.page.locator('#grid .cell')).not.toHaveCount(0);
    await expect(s.page.locator('#grid .grid-empty')).toHaveCount(0);
    expect(problems).toEqual([]);
  });

  test('Start sync at the root already kept fetches nothing and keeps the last results', async () => {
    test.setTimeout(120_000);
    await open(s.page, s.info);
    await ensureSynced(s.page);
    await expect(catchUps(s.page)).not.toHaveCount(0, { timeout: 60_000 });
    await s.page.getByLabel('Follow the head').uncheck();
    await expect(s.page.locator('body')).toHaveAttribute('data-sync', 'idle', { timeout: 30_000 });
    await expect(s.page.locator('#local-status')).toHaveAttribute('data-kept', 'synced');
    const log = await s.page.locator('#log li').count();
    const shown = await banner(s.page).innerHTML();
    await s.page.getByRole('button', { name: 'Start sync' }).click();
    await expect(s.page.locator('#progress-text')).toContainText('Nothing to sync');
    await expect(s.page.locator('#log li')).toHaveCount(log);
    expect(await banner(s.page).innerHTML()).toBe(shown);
    await expect(s.page.locator('#peer-table tbody tr[data-status=connecting]')).toHaveCount(0);
    await expect(s.page.locator('body')).toHaveAttribute('data-sync', 'idle');
  });

  test('a second tab: the state is open in another tab, Clear is refused there; a tab whose database is deleted stops following and says so', async () => {
    test.setTimeout(120_000);
    await open(s.page, s.info);
    await ensureSynced(s.page);
    const second = await s.context.newPage();
    await open(second, s.info);
    await expect(second.locator('#local-status')).toContainText('Another tab');
    await second.getByRole('button', { name: 'Clear local data' }).click();
    await expect(second.locator('#local-status')).toContainText('Not cleared');
    expect(await s.page.evaluate(async () => (await indexedDB.databases()).map((d) => d.name))).toContain('bpavl-demo-state');

    // The first tab's database deleted under it (as a browser's "clear site data" would): it stops following and says so.
    await s.page.getByLabel('Follow the head').check();
    await second.evaluate(
      () =>
        new Promise<void>((resolve, reject) => {
          const req = indexedDB.deleteDatabase('bpavl-demo-state');
          req.onsuccess = () => resolve();
          req.onerror = () => reject(req.error);
        }),
    );
    await expect(s.page.getByLabel('Follow the head')).not.toBeChecked({ timeout: 30_000 });
    await expect(banner(s.page)).toHaveAttribute('data-state', 'failed');
    await expect(banner(s.page)).toContainText('following the head stopped');
  });

  test('the key field names a workload entry only while it holds that entry', async () => {
    await open(s.page, s.info);
    await s.page.getByRole('button', { name: 'Pick a key that exists' }).click();
    await expect(s.page.getByLabel(/^Key/)).toHaveAttribute('title', /^entry #\d+ of the demo workload$/);
    await s.page.getByRole('button', { name: 'Pick a random key' }).click();
    await expect(s.page.getByLabel(/^Key/)).not.toHaveAttribute('title', /./);
  });
});
