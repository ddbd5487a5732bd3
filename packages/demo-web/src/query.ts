/**
 * The query panel: read one key through the query client
 * (`@bpavl/light-client/client`), asking the chosen peer first and the
 * others on failure, every answer verified here against the trusted root;
 * optionally the first peer lies (a byte of its proof flipped), and the
 * panel shows its ban and the answer from the next peer. Or read the tree
 * the last sync rebuilt.
 * @module
 */

import { createClient, type QueryEvent, type VerifiedProof } from '@bpavl/light-client/client';
import { connectAuto, type Connect } from '@bpavl/light-client/sync';
import type { Neighbour } from '@bpavl/light-client/verify';
import { decodeProofPayload, encodeProofPayload, Kind, Status } from '@bpavl/light-client/wire';
import type { State } from '@bpavl/store';
import { fromHex, msText, shortHex, toHex } from './format.js';
import type { Dial } from './peers.js';

/** Plain words for the codes a tampered or lying proof usually gets (spec/errors.md). */
const CODE_TEXT: Record<string, string> = {
  ROOT_MISMATCH: 'the proof does not hash to the trusted root',
  FORMAT_UNSUPPORTED: 'the format byte is not an existence or absence proof',
  TRUNCATED: 'the proof ended too early',
  TRAILING_BYTES: 'bytes are left after the proof',
  VARINT_NON_CANONICAL: 'a number is not in its canonical encoding',
  VARINT_OVERFLOW: 'a number is too large',
  CAPACITY_INVALID: 'the chunk capacity is impossible',
  CHUNK_SIZE_INVALID: 'a chunk size is impossible',
  CHUNK_FILL: 'a chunk is too empty for a multi-chunk tree',
  POSITION_INVALID: 'an in-chunk position is outside the chunk',
  PATH_TOO_LONG: 'the chunk path is too long',
  HEIGHT_INVALID: 'a height breaks the AVL rules',
  COUNT_INVALID: 'a subtree count is impossible',
  FLAGS_INVALID: 'a flags byte has a reserved bit set',
  ABSENCE_INVALID: 'the neighbours do not prove absence',
  KEYS_NOT_SORTED: 'keys are out of order',
};
export interface QueryDeps {
  /** The trusted root, or `undefined` (the setup form shows why). */
  root(): Uint8Array | undefined;
  /** The state this browser keeps for the trusted root, once it holds a verified sync of it. */
  local(): State | undefined;
  /** The addresses the peer selector offers. */
  dials(): readonly Dial[];
  /** The demo workload, to pick keys that exist. */
  workload(): { entries: number; seed: bigint } | undefined;
}

type Outcome = 'busy' | 'present' | 'absent' | 'error';

export class QueryPanel {
  private readonly deps: QueryDeps;
  private readonly keyInput = document.querySelector<HTMLInputElement>('#key')!;
  private readonly keyError = document.querySelector<HTMLElement>('#key-error')!;
  private readonly peerSelect = document.querySelector<HTMLSelectElement>('#query-peer')!;
  private readonly tamper = document.querySelector<HTMLInputElement>('#tamper')!;
  private readonly tamperByte = document.querySelector<HTMLInputElement>('#tamper-byte')!;
  private readonly askPeer = document.querySelector<HTMLButtonElement>('#ask-peer')!;
  private readonly askLocal = document.querySelector<HTMLButtonElement>('#ask-local')!;
  private readonly pickExisting = document.querySelector<HTMLButtonElement>('#key-existing')!;
  private readonly pickAbsent = document.querySelector<HTMLButtonElement>('#key-absent')!;
  private readonly out = document.querySelector<HTMLElement>('#query-result')!;

  constructor(deps: QueryDeps) {
    this.deps = deps;
    this.tamper.addEventListener('change', () => {
      this.tamperByte.disabled = !this.tamper.checked;
    });
    this.pickExisting.addEventListener('click', () => void this.pickExistingKey());
    this.pickAbsent.addEventListener('click', () => {
      this.setKey(crypto.getRandomValues(new Uint8Array(32)));
    });
    this.askPeer.addEventListener('click', () => void this.lookUpAtPeer());
    this.askLocal.addEventListener('click', () => void this.lookUpLocally());
    this.keyInput.addEventListener('input', () => {
      this.keyInput.removeAttribute('title');
      this.showKeyError(undefined);
    });
    if (!crypto.subtle) this.pickExisting.disabled = true;
  }

  /** Refills the peer selector (keeps the selection when it is still offered). */
  refreshPeers(): void {
    const keep = this.peerSelect.value;
    const frag = document.createDocumentFragment();
    for (const d of this.deps.dials()) {
      const o = document.createElement('option');
      o.value = d.address;
      const mode = d.mode === null ? 'honest' : d.mode === undefined ? '' : `Byzantine: ${d.mode}`;
      o.textContent = `${d.peer} · ${d.transport === 'ws' ? 'WebSocket' : 'libp2p'}${mode ? ` · ${mode}` : ''}`;
      frag.append(o);
    }
    this.peerSelect.replaceChildren(frag);
    if ([...this.peerSelect.options].some((o) => o.value === keep)) this.peerSelect.value = keep;
    this.askPeer.disabled = this.peerSelect.options.length === 0;
  }

  /** Enables or disables the local lookup (a verified state is kept or not). */
  setTreeAvailable(available: boolean): void {
    this.askLocal.disabled = !available;
  }

  private setKey(key: Uint8Array): void {
    this.keyInput.value = toHex(key);
    // The hover text names a workload entry: pickExistingKey sets it again after this.
    this.keyInput.removeAttribute('title');
    this.showKeyError(undefined);
  }

  private showKeyError(message: string | undefined): void {
    this.keyError.hidden = message === undefined;
    this.keyError.textContent = message ?? '';
    if (message === undefined) this.keyInput.removeAttribute('aria-invalid');
    else this.keyInput.setAttribute('aria-invalid', 'true');
  }

  /** A key of the demo workload: SHA-256(u64be(i)), or SHA-256(u64be(seed) ‖ u64be(i)). */
  private async pickExistingKey(): Promise<void> {
    const w = this.deps.workload();
    if (!w || w.entries === 0) {
      this.showKeyError('The demo workload is unknown here (no /peers.json); paste a key instead.');
      return;
    }
    const i = Math.floor(Math.random() * w.entries);
    const msg = new DataView(new ArrayBuffer(w.seed === 0n ? 8 : 16));
    if (w.seed === 0n) msg.setBigUint64(0, BigInt(i));
    else {
      msg.setBigUint64(0, w.seed);
      msg.setBigUint64(8, BigInt(i));
    }
    this.setKey(new Uint8Array(await crypto.subtle.digest('SHA-256', msg.buffer)));
    this.keyInput.title = `entry #${i} of the demo workload`;
  }

  private key(): Uint8Array | undefined {
    const key = fromHex(this.keyInput.value);
    if (!key || key.length === 0) {
      this.showKeyError('Enter a key as hex (1 … 1024 bytes), or pick one.');
      this.keyInput.focus();
      return undefined;
    }
    if (key.length > 1024) {
      this.showKeyError('Keys are at most 1024 bytes.');
      return undefined;
    }
    return key;
  }

  private show(outcome: Outcome, html: string, code?: string): void {
    this.out.hidden = false;
    this.out.dataset.outcome = outcome;
    if (code) this.out.dataset.code = code;
    else delete this.out.dataset.code;
    this.out.innerHTML = html;
  }

  private async lookUpAtPeer(): Promise<void> {
    const root = this.deps.root();
    const key = this.key();
    if (!root || !key) return;
    const first = this.deps.dials().find((d) => d.address === this.peerSelect.value);
    if (!first) return;
    // The chosen peer first (a fresh client tries peers in order until it has measured them), then its transport's others.
    const dials = [first, ...this.deps.dials().filter((d) => d.transport === first.transport && d !== first)];
    const name = (address: string) => {
      const d = dials.find((x) => x.address === address);
      return d ? `${esc(d.peer)} (${d.transport === 'ws' ? 'WebSocket' : 'libp2p'})` : esc(address);
    };
    const tampered = this.tamper.checked ? { address: first.address, byte: this.tamperByte.value === '' ? undefined : Number(this.tamperByte.value), note: '' } : undefined;
    const bans: { peer: string; code: string }[] = [];
    let answeredBy: string | undefined;
    let ms = 0;
    const onEvent = (e: QueryEvent) => {
      if (e.type === 'banned') bans.push(e);
      if (e.type === 'verified') [answeredBy, ms] = [e.peer, e.ms];
    };
    this.askPeer.disabled = true;
    this.show('busy', `<p>Asking ${name(first.address)}…</p>`);
    // No hedge before the deadline: the chosen peer answers (or lies, or times out) alone, so what it did is what is shown.
    // With the default 50 ms hedge a slow first connect let another peer answer before the liar was caught.
    const client = createClient({ root, peers: dials.map((d) => d.address), connect: lyingFirst(tampered), onEvent, deadlineMs: 8000, hedgeAfterMs: 8000 });
    try {
      const proof = await client.proof(key);
      const note = tampered?.note ? `<p class="tamper-note">${tampered.note}</p>` : '';
      const banned = bans.map((b) => `<p class="q-head bad">✗ ${name(b.peer)} lied: <code class="code">${b.code}</code>, ${esc(CODE_TEXT[b.code] ?? 'its answer does not verify')}. Banned; the next peer was asked.</p>`).join('');
      const who = name(answeredBy ?? '');
      this.show(proof.value === undefined ? 'absent' : 'present', `${banned}${note}${answerHtml(proof, who, ms)}`, bans[0]?.code);
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      this.show(
        'error',
        `<p class="q-head bad">✗ ${typeof code === 'string' ? `<code class="code">${esc(code)}</code> ` : ''}${esc((e as Error).message ?? String(e))}</p>`,
        typeof code === 'string' ? code : undefined,
      );
    } finally {
      client.close();
      this.askPeer.disabled = this.peerSelect.options.length === 0;
    }
  }

  /** Reads the key from the state kept in this browser (IndexedDB): every record checked against its hash. */
  private async lookUpLocally(): Promise<void> {
    const state = this.deps.local();
    const root = this.deps.root();
    const key = this.key();
    const head = state?.head();
    if (!state || !head || !key) return;
    try {
      const value = await state.get(key);
      const rootOk = root !== undefined && toHex(head.root) === toHex(root);
      const rootLine = `<p class="muted">Synced state kept in this browser: ${head.entryCount.toLocaleString('en-US')} entries, root <code>${shortHex(toHex(head.root), 10)}</code>${rootOk ? ' (the trusted root)' : ''}.</p>`;
      if (value) {
        this.show('present', `<p class="q-head good">✓ Present in the synced state, read locally: no network.</p>${valueHtml(value)}${rootLine}`);
      } else {
        this.show('absent', `<p class="q-head good">✓ Absent from the synced state, read locally: no network.</p>${rootLine}`);
      }
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      this.show('error', `<p class="q-head bad">✗ ${typeof code === 'string' ? `<code class="code">${esc(code)}</code> ` : ''}${esc((e as Error).message ?? String(e))}</p>`, typeof code === 'string' ? code : undefined);
    }
  }
}

function hex2(b: number): string {
  return b.toString(16).padStart(2, '0');
}

function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A `connect` whose connection to `lie.address` flips byte `lie.byte` (default: the last) of every PROOF answer's proof. */
function lyingFirst(lie: { address: string; byte: number | undefined; note: string } | undefined): Connect {
  if (!lie) return connectAuto;
  return async (address, signal) => {
    const conn = await connectAuto(address, signal);
    if (address !== lie.address) return conn;
    const request = conn.request.bind(conn);
    conn.request = async (req, opts) => {
      const res = await request(req, opts);
      if (req.kind !== Kind.Proof || res.status !== Status.Ok) return res;
      const payload = decodeProofPayload(res.payload);
      const proof = payload.proof.slice();
      const at = Math.max(0, Math.min(proof.length - 1, Math.floor(lie.byte ?? proof.length - 1)));
      const before = proof[at]!;
      proof[at] = before ^ 0xff;
      lie.note = `Tampered: byte ${at} of ${proof.length} flipped, 0x${hex2(before)} → 0x${hex2(proof[at]!)}.`;
      return { ...res, payload: encodeProofPayload({ ...payload, proof }) };
    };
    return conn;
  };
}

function answerHtml(p: VerifiedProof, who: string, ms: number): string {
  if (p.value !== undefined) {
    const pos = p.position!;
    return `<p class="q-head good">✓ Present: ${who} proved it (${p.proof.length}-byte existence proof, answered and verified in ${msText(ms)}).</p>
      ${valueHtml(p.value)}
      <p class="path" aria-label="Proof path">Path: <span>trusted root</span> ▸ <span>chunk ${pos.chunkIndex} of ${pos.chunkCount}</span> ▸ <span>entry ${pos.position}</span> <span class="muted">(${pos.entryCount.toLocaleString('en-US')} entries in all)</span></p>`;
  }
  const { left, right } = p.absence!;
  return `<p class="q-head good">✓ Absent: ${who} proved it (${p.proof.length}-byte absence proof, answered and verified in ${msText(ms)}).</p>
    ${neighboursHtml(left, right)}`;
}

function valueHtml(value: Uint8Array): string {
  const hex = toHex(value.subarray(0, 24));
  return `<p class="value">Value (${value.length} bytes): <code>${hex}${value.length > 24 ? '…' : ''}</code></p>`;
}

function neighbourHtml(side: string, n: Neighbour | undefined): string {
  if (!n) return `<li>${side}: none (the key is beyond the tree's ${side === 'left' ? 'first' : 'last'} entry)</li>`;
  return `<li>${side} neighbour <code>${shortHex(toHex(n.key), 8)}</code>: <span>trusted root</span> ▸ <span>chunk ${n.chunkIndex} of ${n.chunkCount}</span> ▸ <span>entry ${n.position}</span></li>`;
}

function neighboursHtml(left: Neighbour | undefined, right: Neighbour | undefined): string {
  const why =
    left && right
      ? 'The two neighbours are adjacent in the tree, so no key lies between them.'
      : left || right
        ? 'The neighbour is at the edge of the tree.'
        : 'The tree is empty.';
  return `<ul class="path" aria-label="Proof paths">${neighbourHtml('left', left)}${neighbourHtml('right', right)}</ul><p class="muted">${why}</p>`;
}
