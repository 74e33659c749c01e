import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Disconnection } from '../src/agent/index.js';
import { generateKeyPair, type Ed25519KeyPair } from '../src/domain/did.js';
import { sourceOf } from '../src/services/registration-limits.js';
import { ownerOf } from './fixtures.js';
import { http, waitFor, type HttpResult } from './helpers.js';
import { isError, newAgent, startWithOwner, stopAll } from './fleet-helpers.js';

const test = suite('the registration queue: limits on pending registrations, paging');

/** POST /api/agents/register from a chosen loopback address (Linux accepts all of 127.0.0.0/8). */
function registerFrom(baseUrl: string, localAddress: string, keys: Ed25519KeyPair = generateKeyPair()): Promise<HttpResult> {
  const json = { name: `from-${localAddress}`, version: '1.0.0', capabilities: ['api_call'], publicKey: keys.publicKey };
  return http(baseUrl, 'POST', '/api/agents/register', { json, localAddress });
}

test('pending registrations are limited in all and per source address; a refusal is 429 with Retry-After (HTTP) or 4429 (socket) and changes nothing', async () => {
  let { s, owner } = await startWithOwner({ AGENT_PENDING_REGISTRATIONS_MAX: '3', AGENT_PENDING_REGISTRATIONS_PER_ADDRESS_MAX: '2' });
  const c = () => s.ctx.c;
  const first = generateKeyPair();
  assert.is((await registerFrom(s.url, '127.0.0.1', first)).status, 201);
  assert.is((await registerFrom(s.url, '127.0.0.1')).status, 201);

  // A third from the same address: refused, nothing stored.
  const before = { agents: await c().agents.count(), registrations: await c().registrations.count() };
  const refusedKeys = generateKeyPair();
  const perAddress = await registerFrom(s.url, '127.0.0.1', refusedKeys);
  assert.is(perAddress.status, 429);
  assert.is(perAddress.body.error.code, 'too_many_registrations');
  assert.match(perAddress.body.error.message, /2 registrations from this address already await a decision/);
  assert.is(perAddress.headers['retry-after'], '60');
  assert.is(await c().agents.findById(refusedKeys.did), null);
  assert.equal({ agents: await c().agents.count(), registrations: await c().registrations.count() }, before);

  // An agent already pending is never refused: it gets its registration back.
  const again = await registerFrom(s.url, '127.0.0.1', first);
  assert.is(again.status, 201);
  assert.is(again.body.agentId, first.did);

  // Another address has room of its own, up to the total.
  assert.is((await registerFrom(s.url, '127.0.0.2')).status, 201);
  const total = await registerFrom(s.url, '127.0.0.3');
  assert.is(total.status, 429);
  assert.match(total.body.error.message, /3 registrations already await a decision/);
  assert.is(total.headers['retry-after'], '60');

  // On the socket: an error frame, close 4429, and the SDK keeps trying.
  const agent = newAgent(s, { socketOptions: { localAddress: '127.0.0.4' } });
  try {
    const errors: any[] = [];
    agent.on('serverError', (f) => errors.push(f));
    const seen: Disconnection[] = [];
    agent.on('disconnected', (d: Disconnection) => seen.push(d));
    await waitFor(() => seen.length >= 2);
    assert.is(seen[0]!.code, 4429);
    assert.ok(seen.every((d) => d.willRetry));
    assert.match(seen[0]!.message, /closed with 4429: too many connection attempts or pending registrations; try again later/);
    assert.is(errors[0].code, 'too_many_registrations');
    assert.is(await c().agents.findById(agent.did), null);
    assert.is(await c().registrations.count({ agentDid: agent.did }), 0);

    // An admin decides one: a place frees, and the waiting agent's next attempt takes it.
    const [oldest] = (await owner.api.get('/api/registrations')).body.registrations;
    assert.is((await owner.api.post(`/api/registrations/${oldest.id}/reject`, { reason: 'not ours' })).status, 200);
    await agent.waitFor('pending', 20_000);
  } finally {
    await stopAll(agent);
  }

  // The count is the store's: after a restart the queue is still full.
  s = await s.restart();
  owner = await ownerOf(s);
  assert.is((await registerFrom(s.url, '127.0.0.5')).status, 429);
  // Deleting a pending agent frees its place too.
  assert.is((await owner.api.del(`/api/agents/${encodeURIComponent(agent.did)}`)).status, 200);
  assert.is((await registerFrom(s.url, '127.0.0.5')).status, 201);
  assert.is((await registerFrom(s.url, '127.0.0.6')).status, 429);
  await s.stop(true);
});

test('the source of a registration: an IPv4 address, or the /64 of an IPv6 one', () => {
  assert.is(sourceOf('203.0.113.7'), '203.0.113.7');
  assert.is(sourceOf('0000:0000:0000:0000:0000:ffff:7f00:0002'), '127.0.0.2');
  assert.is(sourceOf('::ffff:10.1.2.3'), '10.1.2.3');
  assert.is(sourceOf('2001:0db8:0000:0042:0000:8a2e:0370:7334'), '2001:db8:0:42::/64');
  assert.is(sourceOf('2001:db8:0:42:ffff::1'), '2001:db8:0:42::/64');
  assert.is(sourceOf('0000:0000:0000:0000:0000:0000:0000:0001'), '0:0:0:0::/64');
});

test('GET /api/registrations is paged, oldest first: page and pageSize, with total and totalPages beside the registrations', async () => {
  const { s, owner } = await startWithOwner();
  const dids: string[] = [];
  for (let i = 0; i < 205; i++) {
    const r = await registerFrom(s.url, '127.0.0.1');
    assert.is(r.status, 201);
    dids.push(r.body.agentId);
  }
  const first = await owner.api.get('/api/registrations');
  assert.is(first.status, 200);
  assert.is(first.body.registrations.length, 100, 'a default page of 100');
  assert.equal(
    { total: first.body.total, page: first.body.page, pageSize: first.body.pageSize, totalPages: first.body.totalPages },
    { total: 205, page: 1, pageSize: 100, totalPages: 3 },
  );
  assert.equal(first.body.availableCapabilities.length, 8);

  const pages = [first.body.registrations];
  for (const page of [2, 3]) pages.push((await owner.api.get(`/api/registrations?page=${page}`)).body.registrations);
  assert.equal(pages.map((p) => p.length), [100, 100, 5]);
  const all = pages.flat();
  assert.equal(new Set(all.map((r: any) => r.agentDid)), new Set(dids), 'every registration once');
  const times = all.map((r: any) => r.requestedAt);
  assert.equal(times, [...times].sort(), 'oldest first');

  const small = await owner.api.get('/api/registrations?page=2&pageSize=7');
  assert.equal(small.body.registrations, all.slice(7, 14));
  assert.equal([small.body.total, small.body.totalPages], [205, 30]);
  const beyond = await owner.api.get('/api/registrations?page=9');
  assert.equal([beyond.status, beyond.body.registrations, beyond.body.total], [200, [], 205]);
  isError(await owner.api.get('/api/registrations?pageSize=1001'), 400, 'validation_failed');
  isError(await owner.api.get('/api/registrations?page=0'), 400, 'validation_failed');
  await s.stop(true);
});

test.run();
