/**
 * HEAD is answered as GET without the body; /metrics is public unless METRICS_TOKEN is set, and
 * then needs that bearer token.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { connect } from 'node:net';
import { http, startServer, type TestServer } from './helpers.js';
import { isError } from './people-helpers.js';

const test = suite('http head and metrics');
const servers: TestServer[] = [];
const start = async (env: Record<string, string> = {}) => {
  const s = await startServer(env);
  servers.push(s);
  return s;
};

test.after(async () => {
  await Promise.all(servers.map((s) => s.stop(true)));
});

test('HEAD answers like GET: same status and headers, Content-Length of the GET body, no body', async () => {
  const s = await start();
  const get = await http(s.url, 'GET', '/api/openapi.json');
  const head = await http(s.url, 'HEAD', '/api/openapi.json');
  assert.is(head.status, 200);
  assert.is(head.text, '');
  assert.is(head.headers['content-type'], get.headers['content-type']);
  assert.is(head.headers['content-length'], String(Buffer.byteLength(get.text)));
  // Errors too: the status and headers of the GET, without a body.
  const missing = await http(s.url, 'HEAD', '/no/such/path');
  assert.is(missing.status, 404);
  assert.is(missing.text, '');
  const unauthorized = await http(s.url, 'HEAD', '/api/users/me');
  assert.is(unauthorized.status, 401);
  // A path without GET still refuses HEAD, and the Allow header offers HEAD only beside GET.
  const post = await http(s.url, 'HEAD', '/api/auth/challenge');
  assert.is(post.status, 405);
  assert.is(post.headers.allow, 'POST');
});

test('a HEAD answer leaves the connection usable for the next request', async () => {
  const s = await start();
  const sock = connect(s.port, '127.0.0.1');
  await new Promise<void>((resolve) => sock.once('connect', () => resolve()));
  let text = '';
  sock.on('data', (c: Buffer) => (text += c.toString('utf8')));
  const ended = new Promise<void>((resolve) => sock.on('end', () => resolve()));
  sock.write('HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  await ended;
  const answers = text.split(/(?=HTTP\/1\.1 )/);
  assert.is(answers.length, 2, text);
  assert.match(answers[0]!, /^HTTP\/1\.1 200 OK\r\n/);
  assert.ok(answers[0]!.endsWith('\r\n\r\n'), 'the HEAD answer has no body');
  assert.match(answers[1]!, /"status":"ok"/);
});

test('/metrics is public without METRICS_TOKEN', async () => {
  const s = await start();
  const r = await http(s.url, 'GET', '/metrics');
  assert.is(r.status, 200);
  assert.match(r.text, /steward_http_requests_total|http_request/);
});

test('with METRICS_TOKEN, /metrics needs the bearer token', async () => {
  const token = 'metrics-token-0123456789';
  const s = await start({ METRICS_TOKEN: token });
  const none = await http(s.url, 'GET', '/metrics');
  isError(none, 401, 'unauthorized');
  assert.match(String(none.headers['www-authenticate']), /^Bearer/);
  assert.not.match(none.text, /steward_|process_/);
  isError(await http(s.url, 'GET', '/metrics', { token: 'metrics-token-0123456788' }), 401);
  isError(await http(s.url, 'GET', '/metrics', { token: `${token}x` }), 401);
  isError(await http(s.url, 'GET', '/metrics', { headers: { authorization: `Basic ${token}` } }), 401);
  const ok = await http(s.url, 'GET', '/metrics', { token });
  assert.is(ok.status, 200);
  assert.match(ok.text, /# TYPE/);
  assert.not.match(ok.text, new RegExp(token), 'the token does not show up in the metrics');
  // The rest stays public.
  assert.is((await http(s.url, 'GET', '/healthz')).status, 200);
});

test.run();
