import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { connect } from 'node:net';
import { request as httpRequest } from 'node:http';
import { z } from 'zod';
import { route } from '../src/http/router.js';
import { Ok } from '../src/http/answers.js';
import { DuplicateKeyError } from '../src/store/types.js';
import { http, startServer, type TestServer } from './helpers.js';

const test = suite('http core');
let s: TestServer;

test.before(async () => {
  s = await startServer({ BODY_LIMIT_BYTES: '2048' });
  s.ctx.router.add(
    route({
      method: 'POST',
      path: '/test/items/:id',
      auth: 'public',
      summary: 'test route with every kind of validation',
      params: z.object({ id: z.string().regex(/^\d+$/, { message: 'must be digits' }) }),
      query: z.object({ mode: z.enum(['fast', 'slow']).default('fast') }),
      body: z.object({ name: z.string().min(1), tags: z.array(z.string()).max(2).default([]) }),
      responses: { 201: z.strictObject({ id: z.string(), mode: z.enum(['fast', 'slow']), name: z.string(), tags: z.array(z.string()) }) },
      handler: (ctx) => ({ status: 201, body: { id: ctx.params.id, mode: ctx.query.mode, name: ctx.body.name, tags: ctx.body.tags } }),
    }),
    route({
      method: 'GET',
      path: '/test/dids/:did',
      auth: 'public',
      summary: 'echoes a decoded DID',
      params: z.object({ did: z.string().startsWith('did:') }),
      responses: { 200: z.strictObject({ did: z.string() }) },
      handler: (ctx) => ({ body: { did: ctx.params.did } }),
    }),
    route({
      method: 'GET',
      path: '/test/dids/search',
      auth: 'public',
      summary: 'a static segment beside a parameter',
      responses: { 200: z.strictObject({ static: z.literal(true) }) },
      handler: () => ({ body: { static: true } }),
    }),
    route({
      method: 'GET',
      path: '/test/boom',
      auth: 'public',
      summary: 'throws an unexpected error',
      responses: { 200: Ok },
      handler: () => {
        throw new Error('secret internal detail at /etc/passwd');
      },
    }),
    route({
      method: 'GET',
      path: '/test/dup',
      auth: 'public',
      summary: 'throws a duplicate key error from the store',
      responses: { 200: Ok },
      handler: () => {
        throw new DuplicateKeyError('things', 'name_1');
      },
    }),
    route({
      method: 'GET',
      path: '/test/private',
      auth: 'user',
      summary: 'needs a session',
      responses: { 200: z.strictObject({}) },
      handler: () => ({ body: {} }),
    }),
  );
});

test.after(async () => {
  await s.stop(true);
});

const isError = (body: any, code: string) => {
  assert.type(body?.error?.code, 'string', 'error.code present');
  assert.type(body?.error?.message, 'string', 'error.message present');
  assert.is(body.error.code, code);
  assert.equal(Object.keys(body), ['error']);
  assert.equal(Object.keys(body.error).sort(), ['code', 'message']);
};

test('GET /healthz answers without auth', async () => {
  const r = await http(s.url, 'GET', '/healthz');
  assert.is(r.status, 200);
  assert.is(r.body.status, 'ok');
  assert.match(String(r.headers['content-type']), /application\/json/);
});

test('GET /readyz reports the reachable store', async () => {
  const r = await http(s.url, 'GET', '/readyz');
  assert.is(r.status, 200);
  assert.equal(r.body, { status: 'ready', store: 'embedded' });
});

test('unknown path is 404 in the error shape', async () => {
  const r = await http(s.url, 'GET', '/no/such/thing');
  assert.is(r.status, 404);
  isError(r.body, 'not_found');
});

test('known path with the wrong method is 405 with Allow', async () => {
  const r = await http(s.url, 'DELETE', '/healthz');
  assert.is(r.status, 405);
  isError(r.body, 'method_not_allowed');
  assert.is(r.headers.allow, 'GET, HEAD');
});

test('valid request passes every schema and gets defaults', async () => {
  const r = await http(s.url, 'POST', '/test/items/42?mode=slow', { json: { name: 'x' } });
  assert.is(r.status, 201);
  assert.equal(r.body, { id: '42', mode: 'slow', name: 'x', tags: [] });
});

test('path parameter validation names the field', async () => {
  const r = await http(s.url, 'POST', '/test/items/abc', { json: { name: 'x' } });
  assert.is(r.status, 400);
  isError(r.body, 'validation_failed');
  assert.match(r.body.error.message, /path field 'id'/);
});

test('query validation names the field', async () => {
  const r = await http(s.url, 'POST', '/test/items/1?mode=medium', { json: { name: 'x' } });
  assert.is(r.status, 400);
  isError(r.body, 'validation_failed');
  assert.match(r.body.error.message, /query field 'mode'/);
});

test('body validation names the field, nested too', async () => {
  let r = await http(s.url, 'POST', '/test/items/1', { json: { name: '' } });
  assert.is(r.status, 400);
  assert.match(r.body.error.message, /body field 'name'/);
  r = await http(s.url, 'POST', '/test/items/1', { json: { name: 'a', tags: ['x', 5] } });
  assert.is(r.status, 400);
  assert.match(r.body.error.message, /body field 'tags\.1'/);
  r = await http(s.url, 'POST', '/test/items/1', { json: [1, 2] });
  assert.is(r.status, 400);
  isError(r.body, 'validation_failed');
});

test('invalid JSON is 400', async () => {
  const r = await http(s.url, 'POST', '/test/items/1', { raw: '{"name": ', headers: { 'content-type': 'application/json' } });
  assert.is(r.status, 400);
  isError(r.body, 'invalid_json');
});

test('a body over the limit is 413 (declared length)', async () => {
  const r = await http(s.url, 'POST', '/test/items/1', { json: { name: 'x'.repeat(5000) } });
  assert.is(r.status, 413);
  isError(r.body, 'payload_too_large');
});

test('a chunked body over the limit is 413 without reading the rest', async () => {
  const url = new URL(s.url);
  const r = await new Promise<{ status: number; body: any }>((resolve, reject) => {
    const req = httpRequest(
      { method: 'POST', hostname: url.hostname, port: url.port, path: '/test/items/1', agent: false, headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } },
      (res) => {
        let t = '';
        res.on('data', (d) => (t += d));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(t) }));
      },
    );
    req.on('error', reject);
    // 8 chunks of 1 KiB: the server must answer after the third and not wait for the rest.
    let sent = 0;
    const tick = () => {
      if (sent++ < 8 && !req.destroyed) {
        req.write('x'.repeat(1024), () => setTimeout(tick, 5));
      } else req.end();
    };
    tick();
  });
  assert.is(r.status, 413);
  isError(r.body, 'payload_too_large');
});

test('percent-encoded DIDs in paths are decoded; static segments win', async () => {
  const did = 'did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK';
  let r = await http(s.url, 'GET', `/test/dids/${encodeURIComponent(did)}`);
  assert.is(r.status, 200);
  assert.is(r.body.did, did);
  r = await http(s.url, 'GET', '/test/dids/search');
  assert.equal(r.body, { static: true });
  r = await http(s.url, 'GET', '/test/dids/%E0%A4%A');
  assert.is(r.status, 400);
  isError(r.body, 'invalid_path');
});

test('unexpected errors are a 500 that leaks nothing', async () => {
  const r = await http(s.url, 'GET', '/test/boom');
  assert.is(r.status, 500);
  isError(r.body, 'internal');
  assert.not.match(r.text, /passwd|secret|at /);
});

test('a duplicate key from the store is 409', async () => {
  const r = await http(s.url, 'GET', '/test/dup');
  assert.is(r.status, 409);
  isError(r.body, 'conflict');
});

test('a route above public without a session is 401', async () => {
  const r = await http(s.url, 'GET', '/test/private');
  assert.is(r.status, 401);
  isError(r.body, 'unauthorized');
});

test('a client that disconnects mid-request does not hurt the server', async () => {
  const url = new URL(s.url);
  for (let i = 0; i < 20; i++) {
    await new Promise<void>((resolve) => {
      const sock = connect(Number(url.port), url.hostname, () => {
        sock.write(`POST /test/items/1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"name":`);
        setTimeout(() => {
          sock.destroy();
          resolve();
        }, 5);
      });
      sock.on('error', () => resolve());
    });
  }
  const r = await http(s.url, 'GET', '/healthz');
  assert.is(r.status, 200);
});

test('GET /metrics exposes request counts by route and status', async () => {
  await http(s.url, 'GET', '/healthz');
  const r = await http(s.url, 'GET', '/metrics');
  assert.is(r.status, 200);
  assert.match(String(r.headers['content-type']), /text\/plain/);
  assert.match(r.text, /steward_http_requests_total\{method="GET",route="\/healthz",status="200"\} \d+/);
  assert.match(r.text, /steward_http_request_duration_seconds_bucket\{le="[^"]+",method="GET",route="\/healthz",status="200"\}/);
  assert.match(r.text, /steward_http_requests_total\{method="GET",route="unmatched",status="404"\}/);
  // Store calls, one series per collection, operation and outcome, in prom-client's exposition.
  assert.match(r.text, /# TYPE steward_store_operation_duration_seconds histogram/);
  assert.match(r.text, /steward_store_operation_duration_seconds_bucket\{le="0\.0001",collection="[a-zA-Z]+",op="[a-zA-Z]+",outcome="ok"\} \d+/);
  const counts = [...r.text.matchAll(/^steward_store_operation_duration_seconds_count\{collection="([^"]+)",op="([^"]+)",outcome="ok"\} (\d+)$/gm)];
  assert.ok(counts.length > 0 && counts.every((m) => Number(m[3]) > 0));
  for (const [, collection, op, count] of counts) {
    const inf = new RegExp(`^steward_store_operation_duration_seconds_bucket\\{le="\\+Inf",collection="${collection}",op="${op}",outcome="ok"\\} (\\d+)$`, 'm').exec(r.text);
    assert.is(inf?.[1], count, `${collection}.${op}: the +Inf bucket holds every observation`);
  }
  assert.not.match(r.text, /outcome="error"/, 'no failed store call, no error series');
  assert.match(r.text, /# TYPE steward_open_sockets gauge/);
  assert.match(r.text, /# TYPE steward_live_actors gauge/);
});

test('GET /api/openapi.json lists every declared route with its schemas', async () => {
  const r = await http(s.url, 'GET', '/api/openapi.json');
  assert.is(r.status, 200);
  assert.is(r.body.openapi, '3.1.0');
  for (const def of s.ctx.router.routes()) {
    const p = def.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    assert.ok(r.body.paths[p]?.[def.method.toLowerCase()], `${def.method} ${def.path} documented`);
    assert.is(r.body.paths[p][def.method.toLowerCase()]['x-auth'], def.auth);
  }
  const op = r.body.paths['/test/items/{id}'].post;
  const names = op.parameters.map((p: any) => `${p.in}:${p.name}`).sort();
  assert.equal(names, ['path:id', 'query:mode']);
  assert.equal(op.requestBody.content['application/json'].schema.required, ['name']);
  assert.ok(r.body.paths['/test/private'].get.security.length > 0);
});

test.run();
