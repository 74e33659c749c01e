/**
 * Loads uWebSockets.js and tells whether the native binary loaded. The package silently falls
 * back to a slow JavaScript imitation when its binary does not load (or when UWS_USE_FALLBACK
 * is set); Steward refuses to run on it unless STEWARD_ALLOW_UWS_FALLBACK=1.
 */
import { createRequire } from 'node:module';
import type * as UWS from '@trufflesuite/uws-js-unofficial';

export type Uws = typeof UWS;
export type { TemplatedApp, HttpResponse, HttpRequest, WebSocket, us_listen_socket } from '@trufflesuite/uws-js-unofficial';

const require = createRequire(import.meta.url);
const PACKAGE = '@trufflesuite/uws-js-unofficial';

export interface LoadedUws {
  uws: Uws;
  native: boolean;
  /** The binary file when native, else why the fallback is in use. */
  detail: string;
}

let loaded: LoadedUws | undefined;

export function loadUws(): LoadedUws {
  if (loaded) return loaded;
  const binaryName = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  const uws = require(PACKAGE) as Uws;
  const binary = Object.keys(require.cache).find((k) => k.endsWith(`/binaries/${binaryName}`));
  loaded = binary
    ? { uws, native: true, detail: binary }
    : {
        uws,
        native: false,
        detail: process.env.UWS_USE_FALLBACK
          ? 'UWS_USE_FALLBACK is set'
          : `native binary ${binaryName} did not load for Node ${process.version}`,
      };
  return loaded;
}

/**
 * Listens on host:port without sharing it: uWS otherwise sets SO_REUSEPORT, so a second process
 * on the same port starts and takes half of the connections. Resolves to false when the port is
 * taken (by any process) or the address cannot be bound. The package's typings lack this overload.
 */
export function listenExclusive(u: Uws, app: UWS.TemplatedApp, host: string, port: number): Promise<UWS.us_listen_socket | false> {
  const listen = app.listen as unknown as (host: string, port: number, options: number, cb: (s: UWS.us_listen_socket | false) => void) => void;
  return new Promise((resolve) => listen.call(app, host, port, (u as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }).LIBUS_LISTEN_EXCLUSIVE_PORT, resolve));
}
