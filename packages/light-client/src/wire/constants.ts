/**
 * Protocol id, version and limits of the sync wire protocol
 * (`spec/wire.md`). Each limit quotes the spec rule behind it.
 * @module
 */

/** libp2p protocol id: "… over a libp2p stream with protocol id `/bpavl/sync/1.0.0`". */
export const PROTOCOL_ID = '/bpavl/sync/1.0.0';

/** "Version 1 is this document." */
export const WIRE_VERSION = 1;

/** "response body ≤ 8 MiB (8,388,608 bytes)". */
export const MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

/** "request body ≤ 4 KiB (4,096 bytes)". */
export const MAX_REQUEST_BYTES = 4096;

/** "length prefix ≤ 4 bytes (enough for both limits), minimal". */
export const MAX_PREFIX_BYTES = 4;

/** "a peer one response per message": the largest WebSocket message a client takes, one maximal frame. */
export const MAX_RESPONSE_MESSAGE_BYTES = MAX_RESPONSE_BYTES + MAX_PREFIX_BYTES;

/** "A peer serves at most 64 requests in flight per connection and answers the excess with `BUSY`." */
export const MAX_IN_FLIGHT_PER_CONNECTION = 64;

/** "MULTIPROOF … (1 ≤ count ≤ 256 …)": keys per `MULTIPROOF` request. */
export const MAX_MULTIPROOF_REQUEST_KEYS = 256;

/** "MULTILEAVES … MULTIENTRIES … (1 ≤ count ≤ 256)": chunks per request. */
export const MAX_MULTI_CHUNKS = 256;

/** "NODES … levels u8 (1 … 48)": tree levels per `NODES` request. */
export const MAX_NODES_LEVELS = 48;

/** "a tree path … depth u8 (≤ 48)". */
export const MAX_PATH_DEPTH = 48;

/** "ENTRIES … bitmap … 1 … 512 bytes" (⌈4096 / 8⌉: one bit per entry of the largest chunk). */
export const MAX_BITMAP_BYTES = 512;

/** Request kinds: "1 CHUNK, 2 PROOF, 3 RANGE, 4 ROOTS, 6 MULTIPROOF, 7 NODES, 8 LEAVES, 9 ENTRIES, 10 MULTILEAVES, 11 MULTIENTRIES" (5 is retired). */
export const Kind = { Chunk: 1, Proof: 2, Range: 3, Roots: 4, Multiproof: 6, Nodes: 7, Leaves: 8, Entries: 9, MultiLeaves: 10, MultiEntries: 11 } as const;
/** A request kind. */
export type Kind = (typeof Kind)[keyof typeof Kind];

/** Response statuses: "0 OK, 1 UNKNOWN_ROOT, 2 OUT_OF_RANGE, 3 BUSY, 4 BAD_REQUEST". */
export const Status = { Ok: 0, UnknownRoot: 1, OutOfRange: 2, Busy: 3, BadRequest: 4 } as const;
/** A response status. */
export type Status = (typeof Status)[keyof typeof Status];
