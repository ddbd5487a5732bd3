/**
 * Scans read in pages: one round trip per page, no transaction or statement
 * held while the caller awaits between records, and at most one page in
 * memory. A scan sees each page as it was when that page was read.
 * @module
 */
import type { checkRange } from './checks.ts';

/** Records per round trip: large enough to amortise it, small enough to bound memory (≤ 256 chunk blobs ≈ 36 MB). */
export const SCAN_PAGE = 256;

/** One page: keys `≥ from` (or `> from` when `after`), `< end`, in order, at most `count`. */
export interface PageQuery {
  readonly from?: Uint8Array;
  readonly after: boolean;
  readonly end?: Uint8Array;
  readonly count: number;
}

export type ReadPage = (query: PageQuery) => Promise<Array<readonly [Uint8Array, Uint8Array]>>;

/** The records of a checked range, read page by page through `readPage`. */
export async function* pagedScan(
  readPage: ReadPage,
  { start, end, limit }: ReturnType<typeof checkRange>,
): AsyncGenerator<readonly [Uint8Array, Uint8Array]> {
  let from = start;
  let after = false;
  for (let left = limit; left > 0; ) {
    const count = Math.min(SCAN_PAGE, left);
    const page = await readPage({ from, after, end, count });
    yield* page;
    if (page.length < count) return;
    left -= page.length;
    from = page[page.length - 1][0];
    after = true;
  }
}
