/**
 * Serves the built dashboard (`npm run build` writes it to dist/web) at `/`. Files are read into
 * memory at start, with their gzip and brotli forms made once; hashed assets are cached for good,
 * index.html never; a page navigation to any other path outside the API answers index.html, so
 * the dashboard's own routes survive a reload. Every answer carries the security headers below.
 * Paths under /api/ and /ws/, /healthz, /readyz and /metrics are never touched (the handler
 * yields to the router), nor is anything a program asks for without accepting HTML — except the
 * pages of the build that live under those paths (the API reference at /api/docs). A file's
 * compressed forms are read from beside it when the build wrote them (`npm run build:web` does)
 * and they are not older than the file, else made once at start.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants as zlib, gzipSync } from 'node:zlib';
import type { HttpRequest, HttpResponse, TemplatedApp } from './uws.js';
import type { Logger } from '../log.js';

/** The dashboard needs nothing from elsewhere: scripts, styles, images and sockets are its own. */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
};

/** Path prefixes that belong to the server, never to the dashboard. */
export const SERVER_PATHS = ['/api', '/ws', '/healthz', '/readyz', '/metrics'];

/** Pages of the build served at a server path: the interactive API reference (web/api-docs.html), over /api/openapi.json. */
const SERVER_PAGES: Readonly<Record<string, string>> = { '/api/docs': '/api-docs.html', '/api/docs/': '/api-docs.html' };

const IMMUTABLE = 'public, max-age=31536000, immutable';
/** Vite names hashed files `name-<hash>.ext` under assets/. */
const HASHED = /^\/assets\/.+-[A-Za-z0-9_-]{8,}\.[a-z0-9]+$/;

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.webmanifest': 'application/manifest+json',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
  '.map': 'application/json; charset=utf-8',
};
const COMPRESSIBLE = new Set(['.html', '.js', '.mjs', '.css', '.json', '.svg', '.txt', '.map', '.webmanifest']);

interface StaticFile {
  type: string;
  cacheControl: string;
  identity: Buffer;
  gzip: Buffer | null;
  br: Buffer | null;
}

export interface UiBundle {
  dir: string;
  files: Map<string, StaticFile>;
}

/** Where `npm run build` puts the dashboard, from this file in src/http or in dist/src/http. */
export function defaultUiDir(): string {
  const here = fileURLToPath(new URL('.', import.meta.url));
  const root = here.split(sep).includes('dist') ? join(here, '..', '..', '..') : join(here, '..', '..');
  return join(root, 'dist', 'web');
}

function walk(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walk(p));
    else out.push(p);
  }
  return out;
}

/** Reads a build into memory; null when the directory holds no index.html (no build). */
export function loadUi(dir: string): UiBundle | null {
  let paths: string[];
  try {
    if (!statSync(join(dir, 'index.html')).isFile()) return null;
    paths = walk(dir);
  } catch {
    return null;
  }
  const files = new Map<string, StaticFile>();
  for (const path of paths) {
    const rel = '/' + relative(dir, path).split(sep).join('/');
    if (rel.endsWith('.gz') || rel.endsWith('.br')) continue;
    const ext = extname(rel).toLowerCase();
    const identity = readFileSync(path);
    const compress = COMPRESSIBLE.has(ext) && identity.length >= 512;
    // Compressed by the build (scripts/build-web.mjs) when it wrote them after the file; else once, here.
    const since = statSync(path).mtimeMs;
    const builtBr = compress ? builtForm(`${path}.br`, since) : null;
    const builtGz = compress ? builtForm(`${path}.gz`, since) : null;
    const built = builtBr !== null || builtGz !== null;
    const gzip = !compress ? null : built ? builtGz : gzipSync(identity, { level: 9 });
    const br = !compress
      ? null
      : built
        ? builtBr
        : brotliCompressSync(identity, {
            params: { [zlib.BROTLI_PARAM_QUALITY]: 10, [zlib.BROTLI_PARAM_SIZE_HINT]: identity.length },
          });
    files.set(rel, {
      type: TYPES[ext] ?? 'application/octet-stream',
      cacheControl: ext === '.html' ? 'no-store' : HASHED.test(rel) ? IMMUTABLE : 'no-cache',
      identity,
      gzip: gzip && gzip.length < identity.length ? gzip : null,
      br: br && br.length < identity.length ? br : null,
    });
  }
  return { dir, files };
}

/** A compressed form the build wrote beside a file, unless it is missing or older than the file (left from an earlier build). */
function builtForm(path: string, since: number): Buffer | null {
  if (!existsSync(path) || statSync(path).mtimeMs < since) return null;
  return readFileSync(path);
}

const isServerPath = (path: string) => SERVER_PATHS.some((p) => path === p || path.startsWith(p + '/'));

/** Brotli, else gzip, else none, as the client accepts (a `;q=0` refuses a coding). */
export function chooseEncoding(acceptEncoding: string, file: StaticFile): 'br' | 'gzip' | null {
  const accepted = new Set<string>();
  for (const part of acceptEncoding.toLowerCase().split(',')) {
    const [name, ...params] = part.trim().split(';');
    if (!name) continue;
    const q = params.map((x) => x.trim()).find((x) => x.startsWith('q='));
    if (q && Number(q.slice(2)) === 0) continue;
    accepted.add(name.trim());
  }
  if (file.br && accepted.has('br')) return 'br';
  if (file.gzip && (accepted.has('gzip') || accepted.has('*'))) return 'gzip';
  return null;
}

const NOT_BUILT_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Steward</title></head>
<body><h1>Steward</h1><p>The dashboard has not been built on this server. Run <code>npm run build</code>
(it builds the server and the dashboard into <code>dist/</code>) and restart Steward.</p>
<p>The HTTP interface is served under <code>/api/</code> as usual.</p></body></html>
`;
const NOT_BUILT_JSON = JSON.stringify({
  error: { code: 'ui_not_built', message: 'the dashboard has not been built: run npm run build and restart Steward' },
});

export interface StaticOptions {
  /** The built dashboard (default: dist/web of this package). */
  dir?: string;
  log: Logger;
}

/**
 * Registers GET and HEAD handlers that uWS tries before the router's catch-all (method-specific
 * handlers take precedence over `any`); whatever is not the dashboard's yields to the router.
 */
export function attachStatic(app: TemplatedApp, opts: StaticOptions): UiBundle | null {
  const dir = opts.dir ?? defaultUiDir();
  const started = Date.now();
  const ui = loadUi(dir);
  if (ui) opts.log.info({ dir, files: ui.files.size, ms: Date.now() - started }, 'dashboard loaded');
  else opts.log.info({ dir }, 'no dashboard build found; `/` explains how to build it');

  const handle = (res: HttpResponse, req: HttpRequest, head: boolean) => {
    const path = req.getUrl();
    const page = SERVER_PAGES[path];
    if (!page && isServerPath(path)) return void req.setYield(true); // the router's
    const acceptsHtml = req.getHeader('accept').includes('text/html');
    let file: StaticFile | undefined;
    if (ui && page) {
      file = ui.files.get(page);
    } else if (ui) {
      let decoded = path;
      try {
        decoded = decodeURIComponent(path);
      } catch {
        // not percent-encoding: looked up as it is
      }
      file = ui.files.get(decoded === '/' ? '/index.html' : decoded);
      // A page navigation to one of the dashboard's own routes (no file there) gets the app.
      if (!file && acceptsHtml && !decoded.startsWith('/assets/')) file = ui.files.get('/index.html');
    } else if (path === '/' || page || acceptsHtml) {
      const html = acceptsHtml || (path !== '/' && !page);
      writeAnswer(res, head, {
        status: '404 Not Found',
        type: html ? 'text/html; charset=utf-8' : 'application/json; charset=utf-8',
        cacheControl: 'no-store',
        body: Buffer.from(html ? NOT_BUILT_HTML : NOT_BUILT_JSON),
        encoding: null,
      });
      return;
    }
    if (!file) return void req.setYield(true); // the router's
    const encoding = chooseEncoding(req.getHeader('accept-encoding'), file);
    writeAnswer(res, head, {
      status: '200 OK',
      type: file.type,
      cacheControl: file.cacheControl,
      body: encoding === 'br' ? file.br! : encoding === 'gzip' ? file.gzip! : file.identity,
      encoding,
      vary: file.gzip !== null || file.br !== null,
    });
  };
  app.get('/*', (res, req) => handle(res, req, false));
  app.head('/*', (res, req) => handle(res, req, true));
  return ui;
}

interface Answer {
  status: string;
  type: string;
  cacheControl: string;
  body: Buffer;
  encoding: 'br' | 'gzip' | null;
  vary?: boolean;
}

function writeAnswer(res: HttpResponse, head: boolean, a: Answer): void {
  res.cork(() => {
    res.writeStatus(a.status);
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) res.writeHeader(k, v);
    res.writeHeader('content-type', a.type);
    res.writeHeader('cache-control', a.cacheControl);
    if (a.encoding) res.writeHeader('content-encoding', a.encoding);
    if (a.vary) res.writeHeader('vary', 'Accept-Encoding');
    if (head) {
      // uWS writes the length it is told for a body it does not send; its binding does not count
      // endWithoutBody as an answer, so an abort handler must be there.
      res.onAborted(() => {});
      res.endWithoutBody(a.body.length);
    } else {
      res.end(a.body);
    }
  });
}
