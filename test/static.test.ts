/**
 * The dashboard's files at `/` (src/http/static.ts), over real HTTP: security headers, caching,
 * the fallback to index.html for page navigations, compression by Accept-Encoding, a HEAD, and
 * the API, health and metrics paths left to the router, the API reference page at /api/docs, and
 * the compressed forms the build writes beside its files. A small build is written to a temporary
 * directory, so these tests do not depend on `vite build`.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdir, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { brotliCompressSync, brotliDecompressSync, constants as zlib, gunzipSync, gzipSync } from 'node:zlib';
import { http, startServer, tempDir, type TestServer } from './helpers.js';

const test = suite('dashboard static files');

const INDEX = '<!doctype html><html><head><script type="module" src="/assets/index-Ab12Cd34.js"></script></head><body><div id="app"></div></body></html>';
// Compressible and over the compression threshold.
const SCRIPT = `export const steward = ${JSON.stringify('dashboard '.repeat(400))};\n`;
const HTML = { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' };
const DOCS = '<!doctype html><html><head><script type="module" src="/assets/api-docs-Ef56Gh78.js"></script></head><body><main id="swagger-ui"></main></body></html>';
/** Compressed forms as a build writes them (faster settings than the server's, so their bytes differ from what it would make). */
const BUILT_BR = brotliCompressSync(SCRIPT, { params: { [zlib.BROTLI_PARAM_QUALITY]: 1 } });
const BUILT_GZ = gzipSync(SCRIPT, { level: 1 });
const serverBr = (text: string) => brotliCompressSync(text, { params: { [zlib.BROTLI_PARAM_QUALITY]: 10, [zlib.BROTLI_PARAM_SIZE_HINT]: text.length } });

let s: TestServer;
let bare: TestServer;
let uiDir: string;

test.before(async () => {
  uiDir = await tempDir('steward-ui-');
  await mkdir(join(uiDir, 'assets'));
  await writeFile(join(uiDir, 'index.html'), INDEX);
  await writeFile(join(uiDir, 'assets', 'index-Ab12Cd34.js'), SCRIPT);
  await writeFile(join(uiDir, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  await writeFile(join(uiDir, 'api-docs.html'), DOCS);
  // Compressed by the build beside the file; and a leftover older than its file, which must not be served.
  await writeFile(join(uiDir, 'assets', 'pre-Ab12Cd34.js'), SCRIPT);
  await writeFile(join(uiDir, 'assets', 'pre-Ab12Cd34.js.br'), BUILT_BR);
  await writeFile(join(uiDir, 'assets', 'pre-Ab12Cd34.js.gz'), BUILT_GZ);
  await writeFile(join(uiDir, 'assets', 'stale-Ab12Cd34.js'), SCRIPT);
  await writeFile(join(uiDir, 'assets', 'stale-Ab12Cd34.js.br'), BUILT_BR);
  const past = new Date(Date.now() - 3_600_000);
  await utimes(join(uiDir, 'assets', 'stale-Ab12Cd34.js.br'), past, past);
  s = await startServer({}, undefined, { uiDir });
  bare = await startServer({}, undefined, { uiDir: join(uiDir, 'nothing-here') });
});

test.after(async () => {
  await s?.stop(true);
  await bare?.stop(true);
  await rm(uiDir, { recursive: true, force: true });
});

function securityHeaders(h: Record<string, string | string[] | undefined>, what: string) {
  const csp = String(h['content-security-policy']);
  assert.ok(csp.includes("default-src 'self'"), `${what}: CSP default-src ${csp}`);
  assert.ok(csp.includes("frame-ancestors 'none'"), `${what}: CSP frame-ancestors`);
  assert.ok(csp.includes("script-src 'self'") && !csp.includes('unsafe-inline'), `${what}: no inline scripts`);
  assert.ok(csp.includes("style-src 'self'"), `${what}: styles from the site only`);
  assert.ok(csp.includes("connect-src 'self'"), `${what}: the feed socket`);
  assert.ok(csp.includes("img-src 'self' data:"), `${what}: QR images`);
  assert.is(h['x-content-type-options'], 'nosniff', what);
  assert.is(h['referrer-policy'], 'no-referrer', what);
}

test('/ is index.html, never cached, with the security headers', async () => {
  const r = await http(s.url, 'GET', '/', { headers: HTML });
  assert.is(r.status, 200);
  assert.is(r.text, INDEX);
  assert.ok(String(r.headers['content-type']).startsWith('text/html'));
  assert.is(r.headers['cache-control'], 'no-store');
  securityHeaders(r.headers, '/');
});

test('a page navigation to a dashboard route answers index.html (reload of a shared link)', async () => {
  for (const path of ['/agents', '/agents/did%3Akey%3Az6MkTest?tab=certificate', '/channels/abc/threads/def']) {
    const r = await http(s.url, 'GET', path, { headers: HTML });
    assert.is(r.status, 200, path);
    assert.is(r.text, INDEX, path);
    assert.is(r.headers['cache-control'], 'no-store', path);
    securityHeaders(r.headers, path);
  }
});

test('hashed assets are cached immutably and compressed as the client accepts', async () => {
  const path = '/assets/index-Ab12Cd34.js';
  const plain = await http(s.url, 'GET', path);
  assert.is(plain.status, 200);
  assert.is(plain.bytes.toString(), SCRIPT);
  assert.is(plain.headers['content-encoding'], undefined);
  assert.ok(String(plain.headers['content-type']).startsWith('text/javascript'));
  assert.is(plain.headers['cache-control'], 'public, max-age=31536000, immutable');
  assert.is(plain.headers.vary, 'Accept-Encoding');
  securityHeaders(plain.headers, path);

  const br = await http(s.url, 'GET', path, { headers: { 'accept-encoding': 'gzip, deflate, br' } });
  assert.is(br.headers['content-encoding'], 'br');
  assert.ok(br.bytes.length < SCRIPT.length / 4, `brotli shrinks it (${br.bytes.length})`);
  assert.is(brotliDecompressSync(br.bytes).toString(), SCRIPT);

  const gz = await http(s.url, 'GET', path, { headers: { 'accept-encoding': 'gzip' } });
  assert.is(gz.headers['content-encoding'], 'gzip');
  assert.is(gunzipSync(gz.bytes).toString(), SCRIPT);

  const refused = await http(s.url, 'GET', path, { headers: { 'accept-encoding': 'br;q=0, gzip' } });
  assert.is(refused.headers['content-encoding'], 'gzip', 'a coding with q=0 is not used');
});

test('other files are revalidated; small ones are sent as they are', async () => {
  const r = await http(s.url, 'GET', '/favicon.svg', { headers: { 'accept-encoding': 'br, gzip' } });
  assert.is(r.status, 200);
  assert.is(r.headers['content-type'], 'image/svg+xml');
  assert.is(r.headers['cache-control'], 'no-cache');
  assert.is(r.headers['content-encoding'], undefined);
});

test('a missing asset is 404, not index.html', async () => {
  const r = await http(s.url, 'GET', '/assets/gone-Zz99Yy88.js', { headers: HTML });
  assert.is(r.status, 404);
  assert.is(r.body.error.code, 'not_found');
});

test('HEAD answers the headers and the length without a body', async () => {
  const r = await http(s.url, 'GET', '/');
  const h = await http(s.url, 'HEAD', '/');
  assert.is(h.status, 200);
  assert.is(h.bytes.length, 0);
  assert.is(Number(h.headers['content-length']), r.bytes.length);
  securityHeaders(h.headers, 'HEAD /');
});

test('the compressed forms the build wrote beside a file are served as they are; one older than its file is not', async () => {
  assert.not.equal(BUILT_BR, serverBr(SCRIPT), 'the planted form differs from what the server would make');
  const br = await http(s.url, 'GET', '/assets/pre-Ab12Cd34.js', { headers: { 'accept-encoding': 'br, gzip' } });
  assert.is(br.status, 200);
  assert.is(br.headers['content-encoding'], 'br');
  assert.ok(br.bytes.equals(BUILT_BR), 'the build\'s brotli form');
  const gz = await http(s.url, 'GET', '/assets/pre-Ab12Cd34.js', { headers: { 'accept-encoding': 'gzip' } });
  assert.is(gz.headers['content-encoding'], 'gzip');
  assert.ok(gz.bytes.equals(BUILT_GZ), 'the build\'s gzip form');
  const plain = await http(s.url, 'GET', '/assets/pre-Ab12Cd34.js');
  assert.is(plain.bytes.toString(), SCRIPT);
  assert.is((await http(s.url, 'GET', '/assets/pre-Ab12Cd34.js.br')).status, 404, 'the compressed files are not files of the site');

  const stale = await http(s.url, 'GET', '/assets/stale-Ab12Cd34.js', { headers: { 'accept-encoding': 'br' } });
  assert.is(stale.headers['content-encoding'], 'br');
  assert.not.ok(stale.bytes.equals(BUILT_BR), 'a leftover older than its file is not served');
  assert.is(brotliDecompressSync(stale.bytes).toString(), SCRIPT);
});

test('/api/docs is the API reference page of the build, for a browser and a program alike; other /api/docs paths are the router\'s', async () => {
  for (const path of ['/api/docs', '/api/docs/']) {
    for (const headers of [HTML, {}]) {
      const r = await http(s.url, 'GET', path, { headers });
      assert.is(r.status, 200, path);
      assert.is(r.text, DOCS, path);
      assert.ok(String(r.headers['content-type']).startsWith('text/html'), path);
      assert.is(r.headers['cache-control'], 'no-store', path);
      securityHeaders(r.headers, path);
    }
  }
  const head = await http(s.url, 'HEAD', '/api/docs');
  assert.is(head.status, 200);
  assert.is(Number(head.headers['content-length']), DOCS.length);
  const other = await http(s.url, 'GET', '/api/docs/nothing', { headers: HTML });
  assert.is(other.status, 404);
  assert.is(other.body.error.code, 'not_found');
  const bareDocs = await http(bare.url, 'GET', '/api/docs', { headers: HTML });
  assert.is(bareDocs.status, 404);
  assert.ok(bareDocs.text.includes('npm run build'), 'without a build it says how to make one');
});

test('API, health, metrics and feed paths are the router\'s, even for a browser', async () => {
  const me = await http(s.url, 'GET', '/api/users/me', { headers: HTML });
  assert.is(me.status, 401);
  assert.is(me.body.error.code, 'unauthorized');
  const unknownApi = await http(s.url, 'GET', '/api/no-such-thing', { headers: HTML });
  assert.is(unknownApi.status, 404);
  assert.is(unknownApi.body.error.code, 'not_found');
  const health = await http(s.url, 'GET', '/healthz', { headers: HTML });
  assert.is(health.status, 200);
  assert.is(health.body.status, 'ok');
  assert.is((await http(s.url, 'GET', '/readyz', { headers: HTML })).body.status, 'ready');
  const metrics = await http(s.url, 'GET', '/metrics', { headers: HTML });
  assert.is(metrics.status, 200);
  assert.ok(metrics.text.includes('steward_http_requests_total'));
  const feed = await http(s.url, 'GET', '/ws/feed', { headers: HTML });
  assert.not.ok(feed.text.includes('<div id="app">'), 'the feed path is not the dashboard');
  const openapi = await http(s.url, 'GET', '/api/openapi.json', { headers: HTML });
  assert.is(openapi.status, 200);
  assert.ok(openapi.body.paths['/api/users/me']);
  const post = await http(s.url, 'POST', '/api/auth/challenge', { json: { did: 'nope' }, headers: HTML });
  assert.is(post.status, 400, 'POSTs go to the router');
});

test('a program that does not ask for HTML gets the router\'s 404 for an unknown path', async () => {
  const r = await http(s.url, 'GET', '/no/such/thing');
  assert.is(r.status, 404);
  assert.is(r.body.error.code, 'not_found');
});

test('without a build, `/` says how to build the dashboard and the API works', async () => {
  const page = await http(bare.url, 'GET', '/', { headers: HTML });
  assert.is(page.status, 404);
  assert.ok(page.text.includes('npm run build'), page.text);
  securityHeaders(page.headers, 'not built');
  const json = await http(bare.url, 'GET', '/');
  assert.is(json.body.error.code, 'ui_not_built');
  assert.ok(json.body.error.message.includes('npm run build'));
  assert.is((await http(bare.url, 'GET', '/healthz')).status, 200);
  assert.is((await http(bare.url, 'GET', '/api/users/me')).status, 401);
});

test.run();
