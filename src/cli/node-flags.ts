/**
 * How the Steward server's process is started, however it is started: the `steward` executable's
 * `#!` line (src/cli/index.ts), `npm start` and the Docker image all set these (test/node-flags.test.ts
 * checks the three against this file and runs the `#!` line), and the benchmarks start their
 * server with them. Measured on 18,000 held agents (docs/performance.md, 2026-11-26).
 *
 * `--max-semi-space-size=4` keeps V8's young generation at 8 MiB at most. Without a cap, the
 * allocations of thousands of agents connecting at once grow it to 32 MiB, and V8 gives that back
 * only when its memory reducer runs, which it starts by itself when allocation is slow; a held
 * fleet allocates near that threshold, so whether a server sat at 6.5 or at 9 KiB per agent came
 * down to chance. With the cap, scavenges are more frequent under load (about 8 % more server CPU
 * at 20,000 heartbeats per second). These V8 options act only at start, hence the launchers.
 *
 * `MALLOC_ARENA_MAX=2` limits glibc's malloc to two arenas: the threads that touch native memory
 * (the crypto worker, libuv's pool) otherwise get one each, and what the connection storm leaves
 * in them varied the held server's memory by up to 15 MiB from run to run.
 */
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4'];
export const SERVER_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '2' };
