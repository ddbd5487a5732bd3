/**
 * SIGINT and SIGTERM for the commands that work through a state or sync
 * one (`sync`, `import`, `generate --db`, `prune`, `rollback`, `check`).
 * The first signal asks the command to stop at its next safe point (the
 * store is crash-safe: an uncommitted batch is dropped, committed versions
 * stay); the command then closes what it opened, reports the interruption
 * (`{"error":"ABORTED",…}` with `--json`, a line on stderr otherwise) and
 * exits 130. A command whose work was done when the signal came exits with
 * its own result instead. A second signal exits at once: 130, the
 * interruption reported if it was not yet, or the command's result if that
 * was printed already (never a success line then a failure status).
 * @module
 */

/** The exit status of an interrupted command (as a shell gives for SIGINT). */
export const EXIT_INTERRUPTED = 130;

/** Thrown at a safe point once a signal asked the command to stop. */
export class Interrupted extends Error {
  override readonly name = 'Interrupted';
  readonly code = 'ABORTED';
  constructor() {
    super('interrupted');
  }
}

/** A command's hold on SIGINT and SIGTERM ({@link interruptible}). */
export interface Interruption {
  /** Aborted at the first SIGINT or SIGTERM. */
  readonly signal: AbortSignal;
  /** Throws {@link Interrupted} once a signal came: called at each safe point. */
  check(): void;
  /**
   * Lets the event loop run (a signal is only seen then: a store's SQLite
   * calls never give it a turn), then `check()`s.
   */
  checkpoint(): Promise<void>;
  /**
   * The command's result is printed: a second signal now exits with
   * `status` and prints nothing more.
   */
  settled(status: number): void;
  /** Reports the interruption (once) and returns {@link EXIT_INTERRUPTED}. */
  aborted(): number;
  /** Removes the handlers. */
  dispose(): void;
}

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/** Marks the handler bin/bpavl.mjs holds the signals with while the command loads: replaced by {@link interruptible}'s. */
const EARLY = Symbol.for('bpavl.early-interrupt');

/**
 * Handles SIGINT and SIGTERM until `dispose()`; `report` prints the
 * interruption (the `--json` ABORTED line or the stderr message), called at
 * most once, by `aborted()` or by a second signal.
 */
export function interruptible(report: () => void): Interruption {
  const ctl = new AbortController();
  let reported = false;
  let result: number | undefined;
  const aborted = () => {
    if (!reported) {
      reported = true;
      report();
    }
    return EXIT_INTERRUPTED;
  };
  const onSignal = () => {
    if (!ctl.signal.aborted) {
      ctl.abort();
      return;
    }
    // A second signal while the command stops: at once (the store is crash-safe).
    process.exit(result ?? aborted());
  };
  for (const s of SIGNALS) {
    // Ours first: a signal that came while the command loaded and is not delivered yet is lost
    // if the signal has no listener for a moment (Node then stops watching it).
    process.on(s, onSignal);
    for (const l of process.listeners(s)) if ((l as unknown as Record<symbol, unknown>)[EARLY] === true) process.off(s, l);
  }
  return {
    signal: ctl.signal,
    check() {
      if (ctl.signal.aborted) throw new Interrupted();
    },
    async checkpoint() {
      await new Promise((resolve) => setImmediate(resolve));
      if (ctl.signal.aborted) throw new Interrupted();
    },
    settled(status) {
      result = status;
    },
    aborted,
    dispose() {
      for (const s of SIGNALS) process.off(s, onSignal);
    },
  };
}
