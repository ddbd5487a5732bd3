/**
 * The chunk grid: one cell per chunk, coloured by state, with a tooltip on
 * hover and on keyboard focus (one tab stop; arrow keys, Home and End move).
 * @module
 */

import type { Cell } from './model.js';

export class ChunkGrid {
  private readonly el: HTMLElement;
  private readonly tip: HTMLElement;
  private readonly describe: (index: number) => { label: string; html: string };
  private readonly emptyText: string;
  private cells: HTMLElement[] = [];
  /** The cell in the tab order (roving tabindex). */
  private current = 0;
  /** The cell the tooltip describes. */
  private tipFor: number | undefined;

  constructor(el: HTMLElement, tip: HTMLElement, describe: (index: number) => { label: string; html: string }) {
    this.el = el;
    this.tip = tip;
    this.describe = describe;
    this.emptyText = el.textContent?.trim() ?? '';
    el.addEventListener('pointerover', (e) => {
      const i = this.indexOf(e.target);
      if (i !== undefined) this.showTip(i);
    });
    el.addEventListener('pointerleave', () => {
      if (!this.el.contains(document.activeElement)) this.hideTip();
      else this.showTip(this.current);
    });
    el.addEventListener('focusin', (e) => {
      const i = this.indexOf(e.target);
      if (i !== undefined) {
        this.current = i;
        this.showTip(i);
      }
    });
    el.addEventListener('focusout', (e) => {
      if (!this.el.contains(e.relatedTarget as Node | null)) this.hideTip();
    });
    el.addEventListener('keydown', (e) => this.onKey(e));
  }

  get size(): number {
    return this.cells.length;
  }

  /** Back to "no chunks yet". */
  reset(): void {
    this.hideTip();
    this.cells = [];
    this.current = 0;
    const p = document.createElement('p');
    p.className = 'grid-empty';
    p.textContent = this.emptyText;
    this.el.replaceChildren(p);
    this.el.dataset.empty = 'true';
    this.el.removeAttribute('role');
    this.el.setAttribute('aria-label', 'Chunks');
  }

  /** Creates `total` pending cells. */
  build(total: number): void {
    const frag = document.createDocumentFragment();
    this.cells = [];
    for (let i = 0; i < total; i++) {
      const c = document.createElement('div');
      c.className = 'cell';
      c.setAttribute('role', 'listitem');
      c.tabIndex = i === 0 ? 0 : -1;
      c.dataset.index = String(i);
      c.dataset.state = 'pending';
      this.cells.push(c);
      frag.append(c);
    }
    this.current = 0;
    this.el.replaceChildren(frag);
    this.el.dataset.empty = 'false';
    this.el.setAttribute('role', 'list');
    this.el.setAttribute('aria-label', `Chunks, ${total} in all`);
    // Small trees get bigger cells.
    this.el.style.setProperty('--cell', total <= 200 ? '18px' : total <= 1200 ? '13px' : '9px');
  }

  /** Shows `cell`'s state on chunk `index`. */
  update(index: number, cell: Cell): void {
    const c = this.cells[index];
    if (!c) return;
    c.dataset.state = cell.state;
    if (cell.rejections.length > 0) c.dataset.marked = 'rejected';
    if (this.tipFor === index) this.showTip(index);
  }

  private indexOf(target: EventTarget | null): number | undefined {
    const t = target as HTMLElement | null;
    if (!t?.classList?.contains('cell')) return undefined;
    return Number(t.dataset.index);
  }

  private showTip(index: number): void {
    const cell = this.cells[index];
    if (!cell) return;
    const { label, html } = this.describe(index);
    cell.setAttribute('aria-label', label);
    this.tip.innerHTML = html;
    this.tip.hidden = false;
    this.tipFor = index;
    // Under the cell, or above it when the window has no room below;
    // horizontally within the card.
    const host = this.tip.offsetParent as HTMLElement | null;
    if (!host) return;
    const hr = host.getBoundingClientRect();
    const cr = cell.getBoundingClientRect();
    const tw = this.tip.offsetWidth;
    const th = this.tip.offsetHeight;
    let left = cr.left - hr.left + cr.width / 2 - tw / 2;
    left = Math.max(8, Math.min(left, hr.width - tw - 8));
    let top = cr.bottom - hr.top + 6;
    if (cr.bottom + 6 + th > window.innerHeight && cr.top - th - 6 >= 0) top = cr.top - hr.top - th - 6;
    this.tip.style.left = `${left}px`;
    this.tip.style.top = `${top}px`;
    cell.setAttribute('aria-describedby', this.tip.id);
  }

  private hideTip(): void {
    this.tip.hidden = true;
    if (this.tipFor !== undefined) this.cells[this.tipFor]?.removeAttribute('aria-describedby');
    this.tipFor = undefined;
  }

  private columns(): number {
    const first = this.cells[0];
    if (!first) return 1;
    const top = first.offsetTop;
    let n = 0;
    while (n < this.cells.length && this.cells[n]!.offsetTop === top) n++;
    return Math.max(1, n);
  }

  private onKey(e: KeyboardEvent): void {
    if (this.cells.length === 0) return;
    let next = this.current;
    const cols = this.columns();
    switch (e.key) {
      case 'ArrowRight':
        next += 1;
        break;
      case 'ArrowLeft':
        next -= 1;
        break;
      case 'ArrowDown':
        next += cols;
        break;
      case 'ArrowUp':
        next -= cols;
        break;
      case 'Home':
        next = 0;
        break;
      case 'End':
        next = this.cells.length - 1;
        break;
      case 'Escape':
        this.hideTip();
        return;
      default:
        return;
    }
    e.preventDefault();
    next = Math.max(0, Math.min(this.cells.length - 1, next));
    this.cells[this.current]!.tabIndex = -1;
    this.current = next;
    const c = this.cells[next]!;
    c.tabIndex = 0;
    c.focus();
  }
}
