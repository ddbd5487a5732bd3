/**
 * The throughput chart (uPlot: ~50 kB, canvas, no dependencies): verified
 * MB/s over a 1 s sliding window, and the running average.
 * @module
 */

import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { rateText } from './format.js';
import { type Sample, throughput } from './model.js';

export class ThroughputChart {
  private readonly el: HTMLElement;
  private readonly caption: HTMLElement;
  private plot: uPlot | undefined;

  constructor(el: HTMLElement, caption: HTMLElement) {
    this.el = el;
    this.caption = caption;
    new ResizeObserver(() => this.plot?.setSize(this.size())).observe(el);
    this.reset();
  }

  private size(): { width: number; height: number } {
    return { width: Math.max(200, this.el.clientWidth), height: 170 };
  }

  reset(): void {
    this.plot?.destroy();
    const css = getComputedStyle(document.documentElement);
    const accent = css.getPropertyValue('--accent').trim() || '#3867d6';
    const muted = css.getPropertyValue('--muted').trim() || '#667';
    const grid = css.getPropertyValue('--line').trim() || '#e5e7eb';
    const axis = { stroke: muted, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    this.plot = new uPlot(
      {
        ...this.size(),
        cursor: { y: false, points: { size: 6 } },
        legend: { show: true, live: false },
        scales: { x: { time: false }, y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
        axes: [
          { ...axis, label: 'seconds', labelSize: 20, values: (_u, ticks) => ticks.map((t) => `${t}`) },
          { ...axis, label: 'MB/s', labelSize: 20, size: 44 },
        ],
        series: [
          { label: 't', value: (_u, v) => (v == null ? '–' : `${v.toFixed(1)} s`) },
          {
            label: 'MB/s',
            stroke: accent,
            width: 2,
            fill: `${accent}22`,
            points: { show: false },
            value: (_u, v) => (v == null ? '–' : v.toFixed(1)),
          },
          {
            label: 'average',
            stroke: muted,
            width: 1.5,
            dash: [5, 4],
            points: { show: false },
            value: (_u, v) => (v == null ? '–' : v.toFixed(1)),
          },
        ],
      },
      [[], [], []],
      this.el,
    );
    this.caption.textContent = 'Verified MB/s over time.';
  }

  update(samples: readonly Sample[], final = false): void {
    const { t, rate } = throughput(samples, 1);
    const mbps = rate.map((r) => r / 1e6);
    const avg = samples.map((s) => (s.t > 0 ? s.bytes / s.t / 1e6 : 0));
    this.plot?.setData([t, mbps, avg]);
    if (final && samples.length > 1) {
      const last = samples[samples.length - 1]!;
      const peak = Math.max(...rate);
      this.caption.textContent = `Verified throughput: peak ${rateText(peak)}, average ${rateText(last.t > 0 ? last.bytes / last.t : 0)} over ${last.t.toFixed(1)} s.`;
    }
  }
}
