/**
 * A server process's memory as the benchmarks read it (bench/server.ts, bench/floor-server.ts;
 * run with --expose-gc): RSS as the process has it (what an operator sees), then the heap after a
 * full collection (what is really held). The collection itself compacts little and returns few pages.
 */
import { getHeapSpaceStatistics } from 'node:v8';

/** The full collection --expose-gc provides. */
const gc = (globalThis as { gc?: () => void }).gc;

export function memory() {
  const rssAsIs = process.memoryUsage.rss();
  gc?.();
  gc?.();
  const m = process.memoryUsage();
  // Committed (space_size) and used bytes of each V8 heap space: where RSS beyond heapUsed sits.
  const spaces = Object.fromEntries(getHeapSpaceStatistics().map((x) => [x.space_name, { size: x.space_size, used: x.space_used_size }]));
  return { rssAsIs, rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers, spaces };
}
