/**
 * The peer list: what the user typed (one peer per line, its WebSocket URL
 * and/or libp2p multiaddr), what the running demo says about each peer
 * (`/peers.json`: its Byzantine mode), and the addresses a sync dials for
 * the chosen transport.
 * @module
 */

/** One serving peer as the demo launcher describes it in `/peers.json`. */
export interface DemoPeer {
  name: string;
  ws: string | null;
  libp2p: string | null;
  peerId?: string | null;
  /** `null`: honest; otherwise the Byzantine mode, e.g. `corrupt-value`. */
  mode: string | null;
  rate?: number | null;
}

/** `/peers.json`, served by `scripts/demo.mjs`. */
export interface DemoConfig {
  root: string;
  entryCount: number;
  chunk: number;
  chunkCount: number;
  seed: string;
  peers: DemoPeer[];
  /** The moving head (`/head.json`): a new version every `seconds`, `writes` writes each, the last `keepVersions` served; `null`: a fixed state. */
  follow?: { seconds: number; writes: number; keepVersions: number } | null;
}

export type Transport = 'ws' | 'libp2p' | 'both';

/** One line of the peer list. */
export interface PeerLine {
  /** `peer 1`, `peer 2`, … by line, or the demo's name for a known peer. */
  name: string;
  ws?: string;
  libp2p?: string;
  /** What the demo launcher says (display only; the client trusts no peer either way). */
  mode: string | null | undefined;
}

/** One address a sync dials, with what the table shows about it. */
export interface Dial {
  address: string;
  peer: string;
  transport: 'ws' | 'libp2p';
  mode: string | null | undefined;
}

/** The peer list text for the demo's peers: one line per peer, WebSocket URL then multiaddr. */
export function peerListText(peers: readonly DemoPeer[]): string {
  return peers.map((p) => [p.ws, p.libp2p].filter(Boolean).join('  ')).join('\n');
}

/**
 * Parses the peer list: a line holds a `ws://`/`wss://` URL and/or a
 * multiaddr (`/ip4/…`), separated by spaces; `#` starts a comment. Returns
 * the lines and the tokens it did not understand.
 */
export function parsePeerList(text: string, known: readonly DemoPeer[] = []): { lines: PeerLine[]; bad: string[] } {
  const lines: PeerLine[] = [];
  const bad: string[] = [];
  for (const raw of text.split('\n')) {
    const tokens = raw.replace(/#.*/, '').trim().split(/\s+/).filter(Boolean);
    if (tokens.length === 0) continue;
    const line: PeerLine = { name: `peer ${lines.length + 1}`, mode: undefined };
    for (const t of tokens) {
      if (/^wss?:\/\/\S+$/i.test(t) && line.ws === undefined) line.ws = t;
      else if (t.startsWith('/') && line.libp2p === undefined) line.libp2p = t;
      else bad.push(t);
    }
    if (line.ws === undefined && line.libp2p === undefined) continue;
    const demo = known.find((p) => (line.ws && p.ws === line.ws) || (line.libp2p && p.libp2p === line.libp2p));
    if (demo) {
      line.name = demo.name;
      line.mode = demo.mode;
    }
    lines.push(line);
  }
  return { lines, bad };
}

/** The addresses to dial for `transport`, in list order. */
export function dials(lines: readonly PeerLine[], transport: Transport): Dial[] {
  const out: Dial[] = [];
  for (const l of lines) {
    if (transport !== 'libp2p' && l.ws) out.push({ address: l.ws, peer: l.name, transport: 'ws', mode: l.mode });
    if (transport !== 'ws' && l.libp2p) out.push({ address: l.libp2p, peer: l.name, transport: 'libp2p', mode: l.mode });
  }
  return out;
}

/** How the table names a peer's mode. */
export function modeText(mode: string | null | undefined): string {
  if (mode === undefined) return 'unknown';
  return mode === null ? 'honest' : mode;
}
