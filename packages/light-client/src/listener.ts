/**
 * Listener isolation, shared by the sync, the catch-up and the query
 * client: what an `onEvent` or `subscribe` listener throws is dropped, so
 * that it can neither break the work it is told about (a read, a sync, a
 * catch-up) nor surface as an unhandled rejection.
 * @module
 */

/**
 * Calls `listener` (if any) with `event`; whatever it throws is ignored.
 * Internal.
 */
export function notify<E>(listener: ((event: E) => void) | undefined, event: E): void {
  try {
    listener?.(event);
  } catch {
    // A listener's error must not break the work it is told about.
  }
}
