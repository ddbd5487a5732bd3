// The SIGINT/SIGTERM helper of the commands that write a state or sync one
// (src/interrupt.ts), driven in this process: the signals are emitted to its
// listeners and process.exit is stubbed. The commands themselves are run as
// child processes in db-signals.test.ts and sync-db.test.ts.
import { afterEach, expect, it, vi } from 'vitest';
import { EXIT_INTERRUPTED, Interrupted, interruptible } from '../src/interrupt.ts';

afterEach(() => vi.restoreAllMocks());

/** process.exit, stubbed: records the status instead of exiting. */
function stubExit(): number[] {
  const exits: number[] = [];
  vi.spyOn(process, 'exit').mockImplementation(((code?: number) => void exits.push(code ?? 0)) as never);
  return exits;
}

it('the first SIGINT or SIGTERM asks the command to stop at its next safe point', async () => {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    const reports: string[] = [];
    const interrupt = interruptible(() => reports.push('ABORTED'));
    try {
      interrupt.check();
      await interrupt.checkpoint();
      process.emit(signal);
      expect(interrupt.signal.aborted).toBe(true);
      expect(() => interrupt.check()).toThrow(Interrupted);
      await expect(interrupt.checkpoint()).rejects.toBeInstanceOf(Interrupted);
      expect(reports).toEqual([]);
      expect(interrupt.aborted()).toBe(EXIT_INTERRUPTED);
      expect(interrupt.aborted()).toBe(EXIT_INTERRUPTED);
      expect(reports).toEqual(['ABORTED']);
    } finally {
      interrupt.dispose();
    }
  }
});

it('a second signal exits at once: 130, reported once, or the status of the result already printed', () => {
  const listeners = () => process.listenerCount('SIGINT') + process.listenerCount('SIGTERM');
  const before = listeners();
  const exits = stubExit();
  const reports: string[] = [];
  const stopping = interruptible(() => reports.push('ABORTED'));
  try {
    process.emit('SIGINT');
    process.emit('SIGTERM');
    expect(exits).toEqual([130]);
    expect(reports).toEqual(['ABORTED']);
    // Reported by the forced exit: the command's own report prints nothing more.
    expect(stopping.aborted()).toBe(130);
    expect(reports).toEqual(['ABORTED']);
  } finally {
    stopping.dispose();
  }

  const done = interruptible(() => reports.push('late'));
  try {
    done.settled(0);
    process.emit('SIGTERM');
    process.emit('SIGINT');
    expect(exits).toEqual([130, 0]);
    expect(reports).toEqual(['ABORTED']);
  } finally {
    done.dispose();
  }
  expect(listeners()).toBe(before);
});

it('replaces the handler bin/bpavl.mjs holds the signals with while the command loads', () => {
  const early = vi.fn();
  (early as unknown as Record<symbol, boolean>)[Symbol.for('bpavl.early-interrupt')] = true;
  process.on('SIGINT', early);
  process.on('SIGTERM', early);
  const interrupt = interruptible(() => {});
  try {
    expect(process.listeners('SIGINT')).not.toContain(early);
    expect(process.listeners('SIGTERM')).not.toContain(early);
    process.emit('SIGTERM');
    expect(early).not.toHaveBeenCalled();
    expect(interrupt.signal.aborted).toBe(true);
  } finally {
    interrupt.dispose();
    process.off('SIGINT', early);
    process.off('SIGTERM', early);
  }
});
