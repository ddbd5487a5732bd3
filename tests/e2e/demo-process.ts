// The demo launcher (scripts/demo.mjs --json) as the end-to-end suites start
// and stop it, and the page watch they share.
import { expect, type Page } from '@playwright/test';
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/** What `scripts/demo.mjs --json` prints. */
export interface DemoInfo {
  url: string;
  root: string;
  entryCount: number;
  chunk: number;
  chunkCount: number;
  follow: { seconds: number; writes: number; keepVersions: number } | null;
  peers: { name: string; ws: string; libp2p: string; mode: string | null; pid: number }[];
}

/** A running launcher. */
export interface Demo {
  child: ChildProcess;
  info: DemoInfo;
}

/** Starts `scripts/demo.mjs --json --port 0 ARGS`; resolves once its JSON line is out. */
export async function startDemo(args: string[]): Promise<Demo> {
  const child = spawn(process.execPath, ['scripts/demo.mjs', '--json', '--port', '0', ...args], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => {
    stderr = (stderr + d).slice(-8000);
  });
  const info = await new Promise<DemoInfo>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) => resolve(JSON.parse(line) as DemoInfo));
    child.once('exit', (code) => reject(new Error(`scripts/demo.mjs exited (${code}) before it was ready:\n${stderr}`)));
  });
  return { child, info };
}

/** SIGTERM; expects the launcher to exit with 0 having stopped every peer it started. */
export async function stopDemo(demo: Demo | undefined): Promise<void> {
  const child = demo?.child;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  const force = setTimeout(() => child.kill('SIGKILL'), 15_000);
  const code = await exited;
  clearTimeout(force);
  for (const p of demo.info.peers) expect(alive(p.pid), `${p.name} (pid ${p.pid}) still running`).toBe(false);
  expect(code).toBe(0);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Collects page errors, console errors and any request off this machine (the test expects none). */
export function watch(page: Page): string[] {
  const problems: string[] = [];
  const local = (url: string) => /^(https?|wss?):\/\/127\.0\.0\.1[:/]/.test(url) || url.startsWith('data:');
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console.error: ${m.text()}`);
  });
  page.on('request', (r) => {
    if (!local(r.url())) problems.push(`request off the machine: ${r.url()}`);
  });
  page.on('websocket', (ws) => {
    if (!local(ws.url())) problems.push(`WebSocket off the machine: ${ws.url()}`);
  });
  return problems;
}
