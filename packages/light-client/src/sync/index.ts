/**
 * `@bpavl/light-client/sync`: state sync from untrusted peers over
 * WebSocket and libp2p (`spec/wire.md`), verified chunk by chunk.
 * @module
 */

export { DEFAULT_STALL_TIMEOUT_MS, syncState } from './engine.js';
export { catchUp, type CatchUpEvent, type CatchUpOptions, type CatchUpPiece, type CatchUpResult, type CatchUpSession, type CatchUpTarget } from './catchup.js';
export * from './types.js';
export { closeTransports, connectAuto } from '../transport/auto.js';
export { connectWebSocket } from '../transport/ws.js';
export { FramedConnection, type BytePipe } from '../transport/framed.js';
export * from '../transport/types.js';
