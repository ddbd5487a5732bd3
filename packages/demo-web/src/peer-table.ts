/**
 * The per-peer table: mode (what the demo launcher made the peer do), state
 * as the sync engine sees it (active, slow, banned with reason and code,
 * dropped), chunks served, bytes, rate and latency.
 * @module
 */

import { bytesText, count, msText, rateText } from './format.js';
import { type PeerStats, SyncModel } from './model.js';
import { type Dial, modeText } from './peers.js';

const STATE_TEXT: Record<PeerStats['status'], string> = {
  idle: 'idle',
  connecting: 'connecting',
  active: 'active',
  slow: 'slow',
  banned: 'banned',
  failed: 'dropped',
};

interface Row {
  tr: HTMLTableRowElement;
  state: HTMLTableCellElement;
  chunks: HTMLTableCellElement;
  bytes: HTMLTableCellElement;
  rate: HTMLTableCellElement;
  latency: HTMLTableCellElement;
}

export class PeerTable {
  private readonly tbody: HTMLTableSectionElement;
  private rows = new Map<string, Row>();

  constructor(tbody: HTMLTableSectionElement) {
    this.tbody = tbody;
  }

  /** One row per dialled address, all idle. */
  setDials(dials: readonly Dial[]): void {
    this.rows.clear();
    const frag = document.createDocumentFragment();
    for (const d of dials) {
      const tr = document.createElement('tr');
      tr.dataset.address = d.address;
      tr.dataset.peer = d.peer;
      tr.dataset.transport = d.transport;
      tr.dataset.mode = modeText(d.mode);
      const peer = document.createElement('th');
      peer.scope = 'row';
      const name = document.createElement('span');
      name.className = 'peer-name';
      name.textContent = `${d.peer} `;
      const tr2 = document.createElement('span');
      tr2.className = `transport ${d.transport}`;
      tr2.textContent = d.transport === 'ws' ? 'WebSocket' : 'libp2p';
      const addr = document.createElement('span');
      addr.className = 'addr';
      addr.textContent = d.address;
      addr.title = d.address;
      peer.append(name, tr2, addr);
      const mode = document.createElement('td');
      const badge = document.createElement('span');
      const m = modeText(d.mode);
      badge.className = `mode ${m === 'honest' ? 'honest' : m === 'unknown' ? 'unknown' : 'byzantine'}`;
      badge.textContent = m === 'honest' || m === 'unknown' ? m : `Byzantine: ${m}`;
      mode.append(badge);
      const cell = (cls = 'num') => {
        const td = document.createElement('td');
        td.className = cls;
        td.textContent = '—';
        return td;
      };
      const row: Row = { tr, state: cell('state'), chunks: cell(), bytes: cell(), rate: cell(), latency: cell() };
      tr.append(peer, mode, row.state, row.chunks, row.bytes, row.rate, row.latency);
      this.rows.set(d.address, row);
      this.setState(row, { address: d.address, status: 'idle', chunks: 0, bytes: 0, latencySumMs: 0, rejected: 0 });
      frag.append(tr);
    }
    this.tbody.replaceChildren(frag);
  }

  /** Refreshes `stats`'s row; `seconds` is the sync's duration so far. */
  update(stats: PeerStats, seconds: number): void {
    const row = this.rows.get(stats.address);
    if (!row) return;
    this.setState(row, stats);
    row.chunks.textContent = count(stats.chunks);
    row.bytes.textContent = stats.bytes > 0 ? bytesText(stats.bytes) : '0';
    row.rate.textContent = seconds > 0 && stats.bytes > 0 ? rateText(stats.bytes / seconds) : '—';
    const lat = SyncModel.latency(stats);
    row.latency.textContent = lat === undefined ? '—' : msText(lat);
  }

  private setState(row: Row, s: PeerStats): void {
    row.tr.dataset.status = s.status;
    if (s.code) row.tr.dataset.code = s.code;
    else delete row.tr.dataset.code;
    const badge = document.createElement('span');
    badge.className = `badge ${s.status}`;
    badge.textContent = STATE_TEXT[s.status];
    const parts: Node[] = [badge];
    if (s.code) {
      const code = document.createElement('code');
      code.className = 'code';
      code.textContent = s.code;
      parts.push(document.createTextNode(' '), code);
    }
    if (s.reason && s.status !== 'active') {
      const reason = document.createElement('span');
      reason.className = 'reason';
      reason.textContent = s.reason;
      parts.push(reason);
    }
    row.state.replaceChildren(...parts);
  }
}
