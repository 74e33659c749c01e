/**
 * The NATS bus where it differs from the in-process one: a server killed and restarted under it,
 * credentials in server URLs, a server that is not there.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { BusUnavailableError, type Bus, type BusStatus } from '../src/cluster/bus.js';
import { connectNatsBus, natsServers, redactNatsUrl } from '../src/cluster/bus-nats.js';
import { eventually, recordingLog } from './cluster-helpers.js';
import { startNatsServer, type NatsServer } from './nats-server.js';

const test = suite('nats bus');
const log = recordingLog();
const servers: NatsServer[] = [];
const buses: Bus[] = [];

async function server(args: string[] = []): Promise<NatsServer> {
  const s = await startNatsServer(args);
  servers.push(s);
  return s;
}

async function bus(url: string): Promise<Bus> {
  const b = await connectNatsBus({ servers: [url], log, reconnectWaitMs: 50 });
  buses.push(b);
  return b;
}

test.after(async () => {
  await Promise.all(buses.map((b) => b.close()));
  await Promise.all(servers.map((s) => s.stop()));
});

test('a server killed and restarted: clients reconnect, subscriptions resume, what was published meanwhile is lost and publish says so', async () => {
  const srv = await server();
  const [a, b] = [await bus(srv.url), await bus(srv.url)];
  const statusA: BusStatus[] = [];
  const statusB: BusStatus[] = [];
  a.onStatus((s) => statusA.push(s));
  b.onStatus((s) => statusB.push(s));
  const got: unknown[] = [];
  b.subscribe('steward.t.x', (m) => void got.push(m.data));
  b.subscribe('steward.t.ask', (m) => void m.respond!({ pong: m.data }));
  await b.flush();
  assert.is(a.publish('steward.t.x', 1), true);
  await eventually(() => got.length === 1, 'the first message');

  await srv.kill();
  await eventually(() => a.status === 'reconnecting' && b.status === 'reconnecting', 'both clients notice');
  assert.is(a.publish('steward.t.x', 2), false, 'dropped while disconnected, and the caller is told');
  const err = await a.request('steward.t.ask', 1, { timeoutMs: 600_000 }).then(
    () => assert.unreachable('a request while disconnected'),
    (e: unknown) => e,
  );
  assert.instance(err, BusUnavailableError);
  assert.is((err as BusUnavailableError).status, 'reconnecting');
  await a.flush().then(
    () => assert.unreachable('flush while disconnected'),
    (e: unknown) => assert.instance(e, BusUnavailableError),
  );
  // A subscription made while disconnected is sent when the connection is back.
  const late: unknown[] = [];
  b.subscribe('steward.t.late', (m) => void late.push(m.data));

  await srv.restart();
  await eventually(() => a.status === 'connected' && b.status === 'connected', 'both clients reconnect');
  await b.flush();
  assert.is(a.publish('steward.t.x', 3), true);
  assert.is(a.publish('steward.t.late', 'hello'), true);
  await eventually(() => got.length === 2 && late.length === 1, 'messages after the restart');
  assert.equal(got, [1, 3], 'the message published while the server was down is lost');
  assert.equal(late, ['hello']);
  assert.equal(await a.request('steward.t.ask', 'again', { timeoutMs: 10_000 }), { pong: 'again' });
  assert.equal(statusA, ['reconnecting', 'connected']);
  assert.equal(statusB, ['reconnecting', 'connected']);
});

test('close while the server is down ends at once', async () => {
  const srv = await server();
  const a = await bus(srv.url);
  await srv.kill();
  await eventually(() => a.status === 'reconnecting', 'disconnected');
  await a.close();
  assert.is(a.status, 'closed');
});

test('credentials in the server URL are used, and never appear in errors', async () => {
  const srv = await server(['--user', 'steward', '--pass', 's3cret-pass']);
  const good = await bus(`nats://steward:s3cret-pass@127.0.0.1:${srv.port}`);
  good.subscribe('steward.t.auth', (m) => void m.respond!('ok'));
  await good.flush();
  assert.is(await good.request('steward.t.auth', null, { timeoutMs: 10_000 }), 'ok');
  for (const url of [`nats://steward:wrong-pass@127.0.0.1:${srv.port}`, `nats://127.0.0.1:${srv.port}`]) {
    const err = (await connectNatsBus({ servers: [url], log, connectTimeoutMs: 5000 }).then(
      (b) => {
        buses.push(b);
        return assert.unreachable(`connected with ${redactNatsUrl(url)}`);
      },
      (e: unknown) => e,
    )) as Error;
    assert.instance(err, BusUnavailableError);
    assert.not.match(err.message, /s3cret|wrong-pass/);
  }
});

test('no server: connecting fails with BusUnavailableError naming the address', async () => {
  const srv = await server();
  await srv.stop();
  const err = (await connectNatsBus({ servers: [`nats://127.0.0.1:${srv.port}`], log, connectTimeoutMs: 5000 }).then(
    () => assert.unreachable('connected to nothing'),
    (e: unknown) => e,
  )) as Error;
  assert.instance(err, BusUnavailableError);
  assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${srv.port}`));
});

test('natsServers takes credentials out of URLs; redactNatsUrl hides them', () => {
  assert.equal(natsServers(['nats://u:p%40ss@a:4222', 'nats://b:4222']), { servers: ['nats://a:4222', 'nats://b:4222'], user: 'u', pass: 'p@ss' });
  assert.equal(natsServers(['tls://tok@a:4443']), { servers: ['tls://a:4443'], token: 'tok' });
  assert.throws(() => natsServers(['not a url:pass@x']), (e: Error) => !/pass/.test(e.message));
  assert.is(redactNatsUrl('nats://u:p@host:4222'), 'nats://***@host:4222');
  assert.is(redactNatsUrl('nats://host:4222'), 'nats://host:4222');
});

test.run();
