/** The server's entry points, for tests, benchmarks and embedders; the composition root is src/app/. */
export { startSteward, StartupError, type StartOptions } from './app/start.js';
export type { Steward, StewardHandle } from './app/handle.js';
