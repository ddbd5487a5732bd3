// Serving peers for bench:sync: `bpavl-testnet serve` child processes
// (packages/testnet/bin/bpavl-testnet.mjs: the peer with link emulation, lies
// and the Baseline), each started on a free port on 127.0.0.1,
// and every one of them stopped at the end, also on an error or Ctrl-C.
//
// A child is started with --exit-on-stdin-end and a pipe as its stdin, so
// that it also stops if this process dies without cleaning up (even on
// SIGKILL: the pipe closes with us).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BPAVL = fileURLToPath(new URL('../../packages/testnet/bin/bpavl-testnet.mjs', import.meta.url));

/** Every child still running, by pid. */
const children = new Map();
let handlersInstalled = false;

/** SIGKILL whatever is left (synchronous: usable in an 'exit' handler). */
export function killAllNow() {
  for (const child of children.values()) {
    try {
      child.kill('SIGKILL');
    } catch {
      // Already gone.
    }
  }
  children.clear();
}

/**
 * Installs the process handlers that stop every child: on exit (SIGKILL),
 * and on SIGINT / SIGTERM (SIGTERM to each, SIGKILL after a grace period,
 * then exit 130 / 143). Idempotent.
 */
export function installCleanupHandlers(log) {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', killAllNow);
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ]) {
    process.on(signal, () => {
      log(`${signal}: stopping ${children.size} peer process(es)`);
      stopPeers([...children.values()].map((child) => ({ child })), 2000).finally(() => process.exit(code));
    });
  }
}

/**
 * Starts one `bpavl serve --json` child with `args` and resolves with its
 * info line (root, ws URL, baseline, link, …) and the ChildProcess. Rejects
 * (and kills the child) if it exits first or prints nothing within `timeoutMs`.
 */
export function startPeer(args, { timeoutMs, label }) {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [BPAVL, 'serve', '--json', '--exit-on-stdin-end', '--libp2p-port', 'off', '--host', '127.0.0.1', '--ws-port', '0', ...args],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    children.set(child.pid, child);
    let out = '';
    let err = '';
    let settled = false;
    const fail = (why) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      try {
        child.kill('SIGKILL');
      } catch {
        // Already gone.
      }
      reject(new Error(`${label}: ${why}${err.trim() ? `\n${err.trim().split('\n').slice(-10).join('\n')}` : ''}`));
    };
    const timer = setTimeout(() => fail(`no info line within ${timeoutMs} ms`), timeoutMs);
    child.once('exit', (code, signal) => {
      children.delete(child.pid);
      fail(`exited (${signal ?? code}) before it was ready`);
    });
    child.once('error', (e) => fail(`cannot start: ${e.message}`));
    child.stdin.on('error', () => {}); // EPIPE once the child is gone
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d) => {
      err = (err + d).slice(-8192);
    });
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d) => {
      if (settled) return;
      out += d;
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      let info;
      try {
        info = JSON.parse(out.slice(0, nl));
      } catch {
        return fail(`unexpected output: ${out.slice(0, 200)}`);
      }
      settled = true;
      clearTimeout(timer);
      resolve({ info, child, label, stderr: () => err });
    });
  });
}

/**
 * Starts every peer of `specs` ({ args, label }), at most `concurrency` at a
 * time. If one fails, the ones started are stopped and the error is thrown.
 */
export async function startPeers(specs, { concurrency, timeoutMs, log }) {
  const started = [];
  let next = 0;
  let failure;
  const worker = async () => {
    while (failure === undefined && next < specs.length) {
      const spec = specs[next++];
      try {
        const peer = await startPeer(spec.args, { timeoutMs, label: spec.label });
        started.push(Object.assign(peer, { spec }));
        log(`  ${spec.label.padEnd(22)} ${peer.info.ws}`);
      } catch (e) {
        failure ??= e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
  if (failure !== undefined) {
    await stopPeers(started);
    throw failure;
  }
  return specs.map((s) => started.find((p) => p.spec === s));
}

/** SIGTERM each peer (they stop cleanly), SIGKILL those still running after `graceMs`. */
export async function stopPeers(peers, graceMs = 5000) {
  await Promise.all(
    peers.map(({ child }) => {
      if (child.exitCode !== null || child.signalCode !== null) {
        children.delete(child.pid);
        return undefined;
      }
      return new Promise((resolve) => {
        const t = setTimeout(() => {
          try {
            child.kill('SIGKILL');
          } catch {
            // Already gone.
          }
        }, graceMs);
        child.once('exit', () => {
          clearTimeout(t);
          children.delete(child.pid);
          resolve();
        });
        try {
          child.kill('SIGTERM');
        } catch {
          clearTimeout(t);
          resolve();
        }
      });
    }),
  );
}
