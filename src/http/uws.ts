/**
 * Loads uWebSockets.js from the first build in UWS_BUILDS whose native binary loads on this
 * Node.js and C library. uWebSockets.js is not on the npm registry from its author, and each
 * repackaged build covers only some Node lines and glibc versions, so Steward carries more than
 * one. When none loads, Steward refuses to start with a message that says why and what to
 * install, unless STEWARD_ALLOW_UWS_FALLBACK=1 lets it run on a slow JavaScript imitation.
 */
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type * as UWS from '@trufflesuite/uws-js-unofficial';

export type Uws = typeof UWS;
export type { TemplatedApp, HttpResponse, HttpRequest, WebSocket, us_listen_socket } from '@trufflesuite/uws-js-unofficial';

const require = createRequire(import.meta.url);

export interface UwsBuild {
  /** What require() takes: a package name (or, in tests, a package directory). */
  module: string;
  /** Directory of its `uws_<platform>_<arch>_<abi>.node` binaries, relative to its main file's. */
  binaries: string;
  /** Node.js major lines it has binaries for, and the least glibc they need: for the refusal message. */
  nodeLines: readonly number[];
  glibc: string;
  /** Its JavaScript imitation, if it ships one (used only with STEWARD_ALLOW_UWS_FALLBACK=1). */
  fallback?: string;
}

/**
 * Tried in this order; the first whose binary loads is used. The first covers Node 20 on older
 * C libraries (Debian 12's glibc 2.36); the second, an optional dependency, Node 20, 22 and 24
 * on glibc 2.38 or later. Both expose the same API for what Steward uses.
 */
export const UWS_BUILDS: readonly UwsBuild[] = [
  {
    module: '@trufflesuite/uws-js-unofficial',
    binaries: '../binaries',
    nodeLines: [20],
    glibc: '2.27',
    fallback: '@trufflesuite/uws-js-unofficial/dist/index.js',
  },
  { module: '@btc-vision/uwebsockets.js', binaries: '.', nodeLines: [20, 22, 24], glibc: '2.38' },
];

export interface SkippedBuild {
  module: string;
  reason: string;
}

export interface LoadedUws {
  uws: Uws;
  native: boolean;
  /** The build in use, `name@version` (when native fails: the one whose JavaScript imitation runs). */
  build: string;
  /** The binary file when native, else why no native build is in use. */
  detail: string;
  /** The builds tried before the one in use, with why each did not load. */
  skipped: SkippedBuild[];
  /** The builds that were tried, for the refusal message. */
  tried: readonly UwsBuild[];
}

/** What this process runs on, as the messages name it. */
export function runtime(): { node: string; abi: string; platform: string; glibc: string | null } {
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
  return {
    node: process.version,
    abi: process.versions.modules,
    platform: `${process.platform}-${process.arch}`,
    glibc: report?.header?.glibcVersionRuntime ?? null,
  };
}

const FALLBACK_REQUESTED = new Set(['1', 'true', 'True', 'TRUE']); // the values the trufflesuite build honours

let loaded: LoadedUws | undefined;

/** The uWebSockets.js this process serves with (loaded once). */
export function loadUws(): LoadedUws {
  loaded ??= pickUws(UWS_BUILDS, process.env);
  return loaded;
}

/** Tries `builds` in order and loads the first whose native binary loads; else a JavaScript imitation. */
export function pickUws(builds: readonly UwsBuild[], env: NodeJS.ProcessEnv = process.env): LoadedUws {
  const skipped: SkippedBuild[] = [];
  if (FALLBACK_REQUESTED.has(env.UWS_USE_FALLBACK ?? '')) {
    return fallbackOf(builds, 'UWS_USE_FALLBACK is set', skipped);
  }
  const binaryName = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  for (const build of builds) {
    let main: string;
    try {
      main = require.resolve(build.module);
    } catch {
      skipped.push({ module: build.module, reason: 'not installed' });
      continue;
    }
    const binary = join(dirname(main), build.binaries, binaryName);
    if (!existsSync(binary)) {
      skipped.push({ module: build.module, reason: `no binary for Node.js ${process.version} (ABI ${process.versions.modules}) on ${process.platform}-${process.arch}` });
      continue;
    }
    try {
      require(binary);
    } catch (err) {
      skipped.push({ module: build.module, reason: firstLine(err) });
      continue;
    }
    // The package's entry now finds its binary in require's cache and returns it.
    const uws = require(build.module) as Uws;
    return { uws, native: true, build: nameOf(main, build.module), detail: binary, skipped, tried: builds };
  }
  return fallbackOf(builds, `no native binary loads: ${skipped.map((s) => `${s.module}: ${s.reason}`).join('; ')}`, skipped);
}

function fallbackOf(builds: readonly UwsBuild[], detail: string, skipped: SkippedBuild[]): LoadedUws {
  const build = builds.find((b) => b.fallback);
  if (!build?.fallback) throw new Error(refusal({ detail, skipped, tried: builds }));
  const uws = require(build.fallback) as Uws;
  return { uws, native: false, build: `${nameOf(require.resolve(build.module), build.module)} (JavaScript fallback)`, detail, skipped, tried: builds };
}

/**
 * Why Steward refuses to start without a native build: this runtime (Node.js, ABI, platform,
 * glibc), why each build did not load, and what to install instead.
 */
export function refusal(loaded: Pick<LoadedUws, 'detail' | 'skipped' | 'tried'>): string {
  const rt = runtime();
  const lines = [
    `uWebSockets.js: no native build in use on Node.js ${rt.node} (ABI ${rt.abi}, ${rt.platform}, ${rt.glibc ? `glibc ${rt.glibc}` : 'no glibc'}); refusing to start on the slow JavaScript fallback.`,
  ];
  if (loaded.skipped.length === 0) {
    lines.push(`${loaded.detail}: unset it to use a native build, or set STEWARD_ALLOW_UWS_FALLBACK=1 to start anyway.`);
    return lines.join('\n');
  }
  for (const s of loaded.skipped) lines.push(`  ${s.module}: ${s.reason}`);
  lines.push(
    `Install one of: ${loaded.tried.map((b) => `Node.js ${orList(b.nodeLines)} on Linux with glibc ${b.glibc} or later (${b.module})`).join('; or ')}.`,
    'Then run `npm ci` (without --omit=optional), or use the Docker image. Set STEWARD_ALLOW_UWS_FALLBACK=1 to start anyway.',
  );
  return lines.join('\n');
}

function orList(xs: readonly number[]): string {
  return xs.length < 2 ? xs.join('') : `${xs.slice(0, -1).join(', ')} or ${xs[xs.length - 1]}`;
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n').find((l) => l.trim()) ?? text;
}

/** `name@version` from the package.json nearest above the package's main file. */
function nameOf(main: string, fallbackName: string): string {
  for (let dir = dirname(main); dir !== dirname(dir); dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (!existsSync(file)) continue;
    try {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name && pkg.version) return `${pkg.name}@${pkg.version}`;
    } catch {
      // unreadable: keep looking up
    }
  }
  return fallbackName;
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
