/**
 * The options the single-node and cluster drivers (bench/run.ts, bench/cluster.ts) share, read
 * once here so both take the same flag with the same default.
 */
import { flag } from './report.js';

/** Agents registered and connected (--agents, BENCH_AGENTS). */
export const N = flag('agents', 'BENCH_AGENTS', 500);
/** Load-generator processes the agents are spread over (--loadgens, BENCH_LOADGENS). */
export const LOADGENS = Math.max(1, flag('loadgens', 'BENCH_LOADGENS', 2));
/** Requests in flight at once (--concurrency, BENCH_CONCURRENCY). */
export const CONCURRENCY = flag('concurrency', 'BENCH_CONCURRENCY', 250);
/** Heartbeats per second (--rate, BENCH_HB_RATE). */
export const RATE = flag('rate', 'BENCH_HB_RATE', 2000);
/** Seconds of heartbeats (--seconds, BENCH_HB_SECONDS). */
export const HB_SECONDS = flag('seconds', 'BENCH_HB_SECONDS', 10);

/** Loopback source addresses per load generator: more local ports than one address has. */
const ADDRESSES_PER_LOADGEN = 4;

/** The loopback source addresses of load generator `g` (none shared with another). */
export function loadgenAddresses(g: number): string[] {
  return Array.from({ length: ADDRESSES_PER_LOADGEN }, (_, k) => `127.0.0.${2 + g * ADDRESSES_PER_LOADGEN + k}`);
}
