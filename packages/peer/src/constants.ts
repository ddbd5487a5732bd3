/**
 * Serving limits. The wire limits themselves (`MAX_REQUEST_BYTES`,
 * `MAX_RESPONSE_BYTES`, `MAX_IN_FLIGHT_PER_CONNECTION`, …) come from
 * `@bpavl/light-client/wire` (`spec/wire.md`); these are the peer's own.
 * @module
 */

/**
 * Connections (WebSockets plus libp2p streams) served at once. "At the cap, a
 * new connection evicts the connection with nothing in flight that has been
 * idle longest; if every connection has requests in flight, the new one is
 * closed" (`spec/wire.md`, "Server limits").
 */
export const DEFAULT_MAX_CONNECTIONS = 256;

/**
 * "Answers queued in transports, over all connections, count against one
 * memory budget, in bytes" (`spec/wire.md`, "Server limits"): 256 MiB.
 */
export const DEFAULT_MEMORY_BUDGET_BYTES = 256 * 1024 * 1024;

/**
 * A socket whose WebSocket upgrade is not done this long after it connected
 * is closed (one deadline, `transports/handshake.ts`); on libp2p, noise, yamux
 * and protocol negotiation then get as long again (libp2p's
 * `inboundUpgradeTimeout`).
 */
export const HANDSHAKE_TIMEOUT_MS = 10_000;

/** A connection with nothing received and nothing in flight for this long is closed. */
export const DEFAULT_IDLE_TIMEOUT_MS = 120_000;

/**
 * Output high-water mark per connection: once this many response bytes are
 * handed to the transport but not yet flushed, the peer stops reading and
 * answering on that connection until the output drains below the low-water mark.
 * Bigger than one maximal chunk envelope (≈ 140 KiB at C = 256), so a
 * well-behaved client that reads its answers never waits on it.
 */
export const OUTPUT_HIGH_WATER_BYTES = 1024 * 1024;

/** See `OUTPUT_HIGH_WATER_BYTES`. */
export const OUTPUT_LOW_WATER_BYTES = 256 * 1024;

/** Requests answered per connection per event-loop turn, so connections take turns. */
export const REQUESTS_PER_TURN = 8;

/**
 * Largest WebSocket message accepted (`ws` `maxPayload`). A message carries
 * whole request frames (≤ 4 KiB each, `spec/wire.md`); 64 pipelined maximal
 * requests fit. Bigger messages close the socket (1009) before they are buffered.
 */
export const MAX_WS_MESSAGE_BYTES = 64 * (4096 + 4);

/** libp2p streams of `/bpavl/sync/1.0.0` one libp2p connection may open at once. */
export const MAX_STREAMS_PER_LIBP2P_CONNECTION = 8;

/**
 * Bytes of a state directory's file that the commands reading whole chunks
 * (`serve --db`, `check`) read through SQLite's memory map; the store's
 * default is none. Each chunk's entries lie on pages all over the file, and
 * a copied read costs a 64 KiB page each. On the 1M state: a sync from 3
 * such peers took 21–24 s with the map and 29–31 s without, and `check`
 * 13.4 s against 38.9 s (docs/storage.md, "The memory map, measured again").
 */
export const WHOLE_STATE_MMAP_BYTES = 1 << 30;

/**
 * The least time between two reads of a state directory's version records
 * by `serve --db` (`./followed.ts`), which reads them before a `ROOTS`
 * answer and before an `UNKNOWN_ROOT` one: requests for roots it does not
 * serve, however many, cost the database at most four such reads a second,
 * and one of them waits at most this long for its read.
 */
export const FOLLOW_INTERVAL_MS = 250;
