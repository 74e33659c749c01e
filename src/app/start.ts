/**
 * Starting a Steward: the native uWebSockets.js build, the Ed25519 implementation, a port that is
 * free, the store and its secret key, then everything else (build.ts). `startSteward` returns a
 * handle with the bound port and `close()` (graceful: stop listening, close sockets with 1001,
 * stop every part in reverse order, flush actor snapshots, close the store).
 */
import { readFile } from 'node:fs/promises';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { listenExclusive, loadUws, refusal as uwsRefusal, type LoadedUws } from '../http/uws.js';
import { createMetrics } from '../http/metrics.js';
import { selectEd25519 } from '../domain/ed25519.js';
import { startCryptoWorker } from '../domain/crypto-worker.js';
import { SecretKeyError, loadSecretKey } from '../domain/secrets.js';
import { openStore } from '../store/index.js';
import { StoreUnavailableError, type Store } from '../store/types.js';
import { embeddedStoreHoldsData } from '../store/data-dir.js';
import { build } from './build.js';
import { BusUnavailableError } from '../cluster/bus.js';
import { NodeIdInUseError } from '../cluster/membership.js';
import type { Steward } from './handle.js';

/** A start refused for a reason the operator can fix (the message says how). */
export class StartupError extends Error {
  override name = 'StartupError';
}

/** Seams for tests. */
export interface StartOptions {
  /** A wrapper put around the raw store (fault injection), before metrics wrap it. */
  wrapStore?: (store: Store) => Store;
  /**
   * A store opened by the caller and shared by several servers in one process (the cluster
   * tests' nodes): used instead of opening one, and left open at close. It is the only way to
   * run cluster mode on the embedded store.
   */
  sharedStore?: Store;
  /** The built dashboard to serve at `/` (default dist/web of this package). */
  uiDir?: string;
}

async function readVersion(): Promise<string> {
  try {
    const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    return pkg.version;
  } catch {
    const pkg = JSON.parse(await readFile(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
    return pkg.version;
  }
}

export async function startSteward(config: Config, log: Logger, options: StartOptions = {}): Promise<Steward> {
  const uws = loadUws();
  if (!uws.native) {
    if (!config.allowUwsFallback) throw new StartupError(uwsRefusal(uws));
    log.warn({ uws: 'fallback', build: uws.build, detail: uws.detail }, 'running on the uWebSockets.js JavaScript fallback (slow)');
  } else {
    log.info({ uws: 'native', build: uws.build, binary: uws.detail, skipped: uws.skipped }, `uWebSockets.js native binary loaded: ${uws.build}`);
  }
  let ed;
  try {
    ed = selectEd25519(config.ed25519);
  } catch (err) {
    throw new StartupError(`STEWARD_ED25519=libsodium: ${(err as Error).message}`);
  }
  if (config.ed25519 === 'auto' && ed.name !== 'libsodium') log.warn({ ed25519: ed.name }, 'libsodium (sodium-native) does not load here; Ed25519 runs on OpenSSL, about half as fast');
  else log.info({ ed25519: ed.name }, `Ed25519 on ${ed.name}`);
  startCryptoWorker();

  const embedded = !config.mongodbUri;
  if (config.cluster && embedded && !options.sharedStore) throw new StartupError('cluster mode (NATS_URL) needs MONGODB_URI: the embedded store belongs to one process');
  // A port in use is refused before anything touches the disk (a failed start changes nothing).
  if (config.port !== 0) await ensurePortFree(uws, config.host, config.port);
  const metrics = createMetrics();
  // Embedded: the store creates DATA_DIR (0700) and locks it against a second process.
  const rawStore = options.sharedStore
    ? leftOpen(options.sharedStore)
    : await openStore({
        dataDir: config.dataDir,
        mongodbUri: config.mongodbUri,
        mongodbDb: config.mongodbDb,
        compactMinBytes: config.storeCompactMinBytes,
        ...(config.cluster ? { cluster: { leaseMs: config.cluster.leaseMs } } : {}),
      }).catch(
        (err: unknown) => {
          throw err instanceof StoreUnavailableError && embedded ? new StartupError(err.message) : err;
        },
      );
  let started = false;
  let closeStarted: (() => Promise<void>) | undefined;
  try {
    const secretKey = await loadSecretKey({
      configured: config.secretKey,
      dataDir: config.dataDir,
      embedded,
      mayCreate: !embedded || !(await embeddedStoreHoldsData(config.dataDir)),
    });
    const built = await build({
      config,
      log,
      uws,
      embedded,
      metrics,
      rawStore: options.wrapStore ? options.wrapStore(rawStore) : rawStore,
      secretKey,
      version: await readVersion(),
      uiDir: options.uiDir,
      onCloseReady: (close) => (closeStarted = close),
      listen: (app) => listenExclusive(uws.uws, app, config.host, config.port),
    });
    if ('portTaken' in built) throw new StartupError(portRefused(config.host, config.port));
    started = true;
    return built.steward;
  } catch (err) {
    if (err instanceof SecretKeyError) throw new StartupError(err.message);
    if (err instanceof NodeIdInUseError) throw new StartupError(err.message);
    if (err instanceof BusUnavailableError) throw new StartupError(`${err.message}; check NATS_URL, or start NATS first`);
    throw err;
  } finally {
    // Whatever was started goes again, and the store's lock with it.
    if (!started) await (closeStarted ? closeStarted() : rawStore.close()).catch((err: unknown) => log.error({ err }, 'closing after a failed start failed'));
  }
}

/** A store whose close() leaves it open (its opener closes it). */
function leftOpen(store: Store): Store {
  return {
    get kind() {
      return store.kind;
    },
    collection: (name) => store.collection(name),
    ping: () => store.ping(),
    ...(store.time ? { time: () => store.time!() } : {}),
    close: async () => undefined,
  };
}

/** Refuses a port another process listens on (exclusive listen, then let go at once). */
async function ensurePortFree(uws: LoadedUws, host: string, port: number): Promise<void> {
  const probe = uws.uws.App();
  const socket = await listenExclusive(uws.uws, probe, host, port);
  if (!socket) throw new StartupError(portRefused(host, port));
  uws.uws.us_listen_socket_close(socket);
  (probe as unknown as { close?: () => void }).close?.();
}

const portRefused = (host: string, port: number) =>
  `port ${port} on ${host} is in use by another process (or the address cannot be bound here); stop that process, or set PORT (or HOST) to a free one`;
