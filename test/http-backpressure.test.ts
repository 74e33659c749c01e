/**
 * A client that pipelines thousands of requests and never reads the answers: the server keeps at
 * most one unread answer for it (its memory stays where it was), closes the connection, and
 * keeps serving everyone else.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { connect, type Socket } from 'node:net';
import { rawResponse, route } from '../src/http/router.js';
import { http, sleep, startServer, type TestServer } from './helpers.js';

const test = suite('http backpressure');
let s: TestServer;
/** An answer far larger than what the kernel takes at once, so most of it waits for the reader. */
const big = JSON.stringify({ items: Array.from({ length: 16 * 1024 }, (_, i) => `${i}:`.padEnd(1000, 'x')) });

test.before(async () => {
  s = await startServer();
  s.ctx.router.add(
    route({ method: 'GET', path: '/test/big', auth: 'public', summary: 'a 16 MiB answer', responses: { 200: rawResponse('application/json', 'a large body') }, handler: () => ({ raw: { contentType: 'application/json', data: big } }) }),
  );
});

test.after(async () => {
  await s.stop(true);
});

const MiB = 1024 * 1024;

/** Writes a chunk and resolves once the kernel has taken it (or the socket failed). */
const writeAll = (sock: Socket, data: string) =>
  new Promise<void>((resolve) => {
    sock.write(data, () => resolve());
  });

test('a pipelining client that never reads holds one answer at most, and is disconnected', async () => {
  // The OpenAPI document: a public answer of about 100 KiB, four thousand of which would take
  // hundreds of MiB if each were buffered for a client that does not read.
  const doc = await http(s.url, 'GET', '/api/openapi.json');
  assert.is(doc.status, 200);
  assert.ok(doc.text.length > 50_000, `the answer is large (${doc.text.length} bytes)`);

  const baseline = process.memoryUsage().rss;
  const sock = connect(s.port, '127.0.0.1');
  sock.pause(); // never read
  let closed = false;
  sock.on('error', () => undefined); // a reset shows up as an error on a later write
  sock.on('close', () => (closed = true));
  await new Promise<void>((resolve) => sock.once('connect', () => resolve()));

  const request = 'GET /api/openapi.json HTTP/1.1\r\nHost: steward\r\n\r\n';
  let peak = 0;
  const sample = () => (peak = Math.max(peak, process.memoryUsage().rss - baseline));
  for (let i = 0; i < 40 && !closed; i++) {
    await writeAll(sock, request.repeat(100)); // 4,000 requests in all
    sample();
  }
  // Until the server has closed the connection, keep knocking (a write to a closed connection
  // fails and closes this socket) and keep watching the memory.
  for (let i = 0; i < 300 && !closed; i++) {
    await sleep(50);
    sample();
    if (!closed) await writeAll(sock, '\r\n');
  }
  sample();
  assert.ok(peak < 64 * MiB, `the server's memory grew by ${(peak / MiB).toFixed(1)} MiB`);
  assert.ok(closed, 'the server closed the connection');

  const other = await http(s.url, 'GET', '/healthz');
  assert.is(other.status, 200, 'another client is served');
  sock.destroy();
});

test('a client that reads slowly gets its whole large answer', async () => {
  const sock = connect(s.port, '127.0.0.1');
  await new Promise<void>((resolve) => sock.once('connect', () => resolve()));
  sock.pause();
  await writeAll(sock, 'GET /test/big HTTP/1.1\r\nHost: steward\r\nConnection: close\r\n\r\n');
  await sleep(100); // the server fills the socket and waits
  const chunks: Buffer[] = [];
  const done = new Promise<void>((resolve) => sock.on('end', () => resolve()));
  sock.on('data', (c: Buffer) => {
    chunks.push(c);
    sock.pause();
    setTimeout(() => sock.resume(), 1); // a slow reader
  });
  sock.resume();
  await done;
  const text = Buffer.concat(chunks).toString('utf8');
  const body = text.slice(text.indexOf('\r\n\r\n') + 4);
  assert.is(body.length, big.length);
  assert.ok(body === big, 'the body arrives whole and in order');
  sock.destroy();
});

test.run();
