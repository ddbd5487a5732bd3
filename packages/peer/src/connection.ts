/**
 * `ByteConnection`: the one thing a transport provides to the sync server, a
 * bidirectional byte pipe with backpressure. Implemented for `ws` sockets
 * (`transports/ws.ts`) and libp2p streams (`transports/libp2p.ts`); tests can
 * implement it in memory.
 * @module
 */

/** What a transport tells the server; installed once with `ByteConnection.attach`. */
export interface ConnectionEvents {
  /** Bytes arrived (any split of the frame stream). */
  bytes(data: Uint8Array): void;
  /** Something that is not bytes arrived (a WebSocket text message): a protocol fault. */
  fault(): void;
  /** Output was flushed: `bufferedAmount` may have dropped. */
  drain(): void;
  /** The remote will send nothing more (a libp2p half-close); output may still go out. */
  end(): void;
  /** The connection is gone (either side closed it, or it failed). Called once. */
  closed(): void;
}

/** A bidirectional byte pipe with backpressure. */
export interface ByteConnection {
  /** Which transport and remote, for logs ("ws 127.0.0.1:51234", "libp2p 12D3…"). */
  readonly label: string;
  /** Installs the event handlers; called once, before any event is delivered. */
  attach(events: ConnectionEvents): void;
  /**
   * Queues bytes for sending. Never throws; bytes sent on a closed connection
   * are dropped. `written`, if the transport supports it, is called once
   * `bytes` are no longer needed (handed to the OS, or dropped on an error):
   * only then may they be reused. A transport may never call it.
   */
  send(bytes: Uint8Array, written?: () => void): void;
  /** Bytes handed to `send` that the transport has not flushed yet. */
  readonly bufferedAmount: number;
  /** Stop delivering `bytes` (the transport pushes back on the remote if it can). */
  pause(): void;
  /** Deliver `bytes` again. */
  resume(): void;
  /** Flushes queued output, then closes. */
  close(): void;
  /** Closes at once and drops queued output (a protocol fault). */
  abort(): void;
}
