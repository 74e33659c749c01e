/**
 * The Node options the Steward server runs with, however it is started: the `steward`
 * executable's `#!` line (src/cli/index.ts), `npm start` and the Docker image's CMD all carry them
 * (test/node-flags.test.ts checks the three), and the benchmarks start their server with them.
 *
 * `--max-semi-space-size=4` keeps V8's young generation at 8 MiB at most. Without a cap, the
 * allocations of thousands of agents connecting at once grow it to 32 MiB, and V8 gives that back
 * only when its memory reducer runs, which it starts by itself when allocation is slow; a held
 * fleet allocates near that threshold, so whether a server of 18,000 agents sat at 6.5 or at 9 KiB
 * per agent after its connection storm came down to chance (docs/performance.md, 2026-11-26).
 * With the cap, scavenges are more frequent under load (about 8 % more server CPU at 20,000
 * heartbeats per second, measured).
 */
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4'];
