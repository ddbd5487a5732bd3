// Child processes of the Node backend's tests (child.ts), started by PID and
// stopped by PID; none outlives its test.
import { spawn, type ChildProcess } from 'node:child_process';

const CHILD = new URL('./child.ts', import.meta.url).pathname;

export interface Child {
  readonly process: ChildProcess;
  /** Every line printed so far. */
  readonly lines: string[];
  /** Resolves once a line equal to `line` has been printed (rejects if the child exits first). */
  waitFor(line: string): Promise<void>;
  /** Resolves with every line once the child has exited. */
  readonly exited: Promise<string[]>;
}

export function startChild(...args: string[]): Child {
  return startScript(CHILD, ...args);
}

/** Runs the TypeScript file `script` in Node (type stripping) with `args`. */
export function startScript(script: string, ...args: string[]): Child {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let stderr = '';
  let partial = '';
  const waiters: Array<{ line: string; resolve(): void; reject(e: Error): void }> = [];
  child.stdout.setEncoding('utf8').on('data', (text: string) => {
    const parts = (partial + text).split('\n');
    partial = parts.pop()!;
    for (const line of parts) {
      lines.push(line);
      for (const w of waiters.filter((w) => w.line === line)) w.resolve();
    }
  });
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const exited = new Promise<string[]>((resolve) => {
    child.on('close', () => {
      for (const w of waiters) w.reject(new Error(`child ${args.join(' ')} exited (${child.exitCode ?? child.signalCode}) before "${w.line}": ${stderr}`));
      resolve(lines);
    });
  });
  return {
    process: child,
    lines,
    exited,
    waitFor: (line) =>
      lines.includes(line) ? Promise.resolve() : new Promise((resolve, reject) => waiters.push({ line, resolve, reject })),
  };
}

/** SIGKILLs `child` (by its PID) and waits until it is gone. */
export async function kill(child: Child): Promise<string[]> {
  if (child.process.exitCode === null && child.process.signalCode === null) process.kill(child.process.pid!, 'SIGKILL');
  return child.exited;
}

/** xorshift32: the same kill instants on every run (relative to each child's start). */
export function instants(seed: number): () => number {
  let x = seed;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}
