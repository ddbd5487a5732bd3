/**
 * Reused output buffers for response frames. A chunk answer is ~100 KB
 * (`spec/chunk-format.md`, C = 256); allocating a fresh buffer for each one
 * kept the serving peer's garbage collector busy for about as long as it
 * spent sending. A frame is written into a pooled buffer and the buffer comes
 * back when the transport reports it written (`ByteConnection.send`'s
 * `written`). A buffer whose transport never reports is simply not reused
 * (the garbage collector takes it), so a lost callback costs an allocation,
 * never a frame overwritten while it waits to be sent.
 * @module
 */

/** Bytes of each pooled buffer: a maximal chunk envelope at C = 256 (~140 KiB) fits; bigger frames are not pooled. */
export const FRAME_POOL_BUFFER_BYTES = 256 * 1024;

/** Free buffers kept at most (8 MiB). */
export const FRAME_POOL_MAX_FREE = 32;

/** A frame's memory, and what to call once the transport no longer needs it. */
export interface FrameSpace {
  /** At least the size asked for. */
  readonly bytes: Uint8Array;
  /** Returns the buffer to the pool; only the first call counts. Absent for a buffer that is not pooled. */
  readonly release?: () => void;
}

/**
 * A free list of equal buffers.
 *
 * @example
 * ```ts
 * const pool = new FramePool();
 * const space = pool.take(frameSize);
 * const frame = encodeResponseFrame(head, payload, () => space.bytes);
 * conn.send(frame, space.release);
 * ```
 */
export class FramePool {
  readonly #free: ArrayBuffer[] = [];
  readonly #bufferBytes: number;
  readonly #maxFree: number;

  constructor(bufferBytes = FRAME_POOL_BUFFER_BYTES, maxFree = FRAME_POOL_MAX_FREE) {
    this.#bufferBytes = bufferBytes;
    this.#maxFree = maxFree;
  }

  /** Free buffers held now. */
  get freeCount(): number {
    return this.#free.length;
  }

  /** Space for a frame of `size` bytes: a pooled buffer, or a fresh array if `size` is over the buffer size. */
  take(size: number): FrameSpace {
    if (size > this.#bufferBytes) return { bytes: new Uint8Array(size) };
    const buffer = this.#free.pop() ?? new ArrayBuffer(this.#bufferBytes);
    let out = false;
    return {
      bytes: new Uint8Array(buffer),
      release: () => {
        if (out) return;
        out = true;
        if (this.#free.length < this.#maxFree) this.#free.push(buffer);
      },
    };
  }
}
