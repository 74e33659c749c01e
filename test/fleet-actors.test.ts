import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { makeUser } from './fixtures.js';
import { waitFor } from './helpers.js';
import { approvedKeys, isError, newAgent, RawAgent, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { FeedClient } from './channels-helpers.js';
import { signMessage } from '../src/domain/did.js';
import { certificateBytes } from '../src/domain/certificate.js';

const test = suite('actor inspection and the live feed');
const ctx = {} as Awaited<ReturnType<typeof startWithOwner>>;

test.before(async () => {
  Object.assign(ctx, await startWithOwner({ AGENT_OFFLINE_GRACE_MS: '0' }));
});
test.after(async () => {
  await ctx.s.stop(true);
});

test('GET /api/admin/actors lists live actors; GET /api/admin/actors/:id inspects one', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner);
  const pending = newAgent(s);
  await pending.waitFor('pending');
  const list = await owner.api.get('/api/admin/actors');
  assert.is(list.status, 200);
  const mine = list.body.actors.find((a: any) => a.id === agent.did);
  const { since, ...rest } = mine;
  assert.equal(rest, { kind: 'agent', id: agent.did, state: { active: { connection: 'online', certificate: 'current' } }, status: 'active' });
  assert.ok(Date.parse(since) > 0, 'since when it is in that state');
  assert.is(list.body.actors.find((a: any) => a.id === pending.did)?.state, 'pending');
  assert.ok((await owner.api.get('/api/admin/actors?kind=agent')).body.actors.length >= 2);
  assert.equal((await owner.api.get('/api/admin/actors?kind=workflow')).body.actors, []);

  const one = await owner.api.get(`/api/admin/actors/${encodeURIComponent(`agent:${agent.did}`)}`);
  assert.is(one.status, 200, one.text);
  assert.equal(one.body.actor.context, { did: agent.did, serial: agent.certificate!.certificate.serial, policyId: null });
  assert.is(one.body.actor.live, true);
  const viaQuery = await owner.api.get(`/api/admin/actors/${encodeURIComponent(agent.did)}?kind=agent`);
  assert.equal(viaQuery.body, one.body);
  isError(await owner.api.get('/api/admin/actors/agent%3Adid%3Akey%3Anope'), 404);
  isError(await owner.api.get('/api/admin/actors/nokind'), 404);
  isError(await owner.api.get('/api/admin/actors/ghost%3Ax'), 404);
  const member = await makeUser(s, { workspaces: { [s.ctx.defaultWorkspace._id]: 'owner' } });
  isError(await member.api.get('/api/admin/actors'), 403);
  await stopAll(agent, pending);
});

test('the feed streams actor transitions to a global admin (cookie on upgrade)', async () => {
  const { s, owner } = ctx;
  const f = new FeedClient(s.url, { cookie: `steward_session=${owner.token}` });
  await f.open();
  const welcome = await f.next((x) => x.type === 'welcome');
  assert.equal(welcome, { type: 'welcome', did: owner.user.did, isAdmin: true });
  f.send({ type: 'subscribe', topic: 'actors' });
  await f.next((x) => x.type === 'subscribed' && x.topic === 'actors');
  const agent = await readyAgent(s, owner);
  const online = await f.next((x) => x.type === 'actor.transition' && x.actorId === agent.did && x.event === 'CONNECTED');
  assert.equal(online, {
    type: 'actor.transition',
    actorId: agent.did,
    kind: 'agent',
    state: { active: { connection: 'online', certificate: 'current' } },
    event: 'CONNECTED',
    from: { active: { connection: 'offline', certificate: 'none' } },
  });
  // The pending state too, unless it was folded into a later transition of the same actor (docs/feed.md).
  const folded = f.wire.some((w) => w.type === 'batch' && w.foldedByType?.['actor.transition'] > 0);
  assert.ok(folded || f.frames.some((x) => x.type === 'actor.transition' && x.actorId === agent.did && x.state === 'pending'), 'the pending state too');
  await agent.stop();
  await f.next((x) => x.type === 'actor.transition' && x.actorId === agent.did && x.event === 'DISCONNECTED');
  f.send({ type: 'unsubscribe', topic: 'actors' });
  await f.next((x) => x.type === 'unsubscribed');
  f.close();
});

test('feed: a token in a first auth frame; non-admins cannot follow actors; unknown channels are refused', async () => {
  const { s } = ctx;
  const member = await makeUser(s, { workspaces: { [s.ctx.defaultWorkspace._id]: 'member' } });
  const f = new FeedClient(s.url);
  await f.open();
  f.send({ type: 'subscribe', topic: 'actors' });
  assert.is((await f.next((x) => x.type === 'error')).code, 'unauthenticated');
  f.send({ type: 'auth', token: member.token });
  assert.is((await f.next((x) => x.type === 'welcome')).isAdmin, false);
  f.send({ type: 'subscribe', topic: 'actors' });
  assert.is((await f.next((x) => x.type === 'error' && x.code === 'forbidden')).code, 'forbidden');
  // Channel subscriptions belong to the channels area; an unknown channel is refused either way.
  f.send({ type: 'subscribe', channelId: 'no-such-channel' });
  const refused = await f.next((x) => x.type === 'error' && (x.code === 'not_available' || x.code === 'not_found'));
  assert.ok(refused);
  assert.is(f.closed, null, 'refusals keep the socket open');
  f.close();
});

test('feed: a bad token closes with 4401, an agent session with 4403', async () => {
  const { s, owner } = ctx;
  const bad = new FeedClient(s.url);
  await bad.open();
  bad.send({ type: 'auth', token: 'not-a-token' });
  assert.is((await bad.waitClosed()).code, 4401);
  const agent = await readyAgent(s, owner);
  const asAgent = new FeedClient(s.url);
  await asAgent.open();
  asAgent.send({ type: 'auth', token: agent.session!.token });
  assert.is((await asAgent.waitClosed()).code, 4403);
  await agent.stop();
});

test('feed: no authentication within 5 s closes with 4408; a cookie from another origin is ignored', async () => {
  const { s, owner } = ctx;
  const f = new FeedClient(s.url, { cookie: `steward_session=${owner.token}`, origin: 'http://evil.example' });
  await f.open();
  assert.is((await f.waitClosed(7000)).code, 4408);
  assert.not.ok(f.frames.some((x) => x.type === 'welcome'));
});

test('certificate region: an agent slow to co-sign a re-issued certificate shows reissuePending, then current', async () => {
  const { s, owner } = ctx;
  const keys = await approvedKeys(s, owner);
  const raw = new RawAgent(s.url, keys);
  await raw.authenticate();
  const first = await raw.acceptNextOffer();
  const path = `/api/admin/actors/${encodeURIComponent(`agent:${keys.did}`)}`;
  const stateOf = async () => (await owner.api.get(path)).body.actor;
  await waitFor(async () => (await stateOf())?.state?.active?.connection === 'online');
  const created = await owner.api.post('/api/policies', { agentDid: keys.did, capabilities: ['file_access'] });
  assert.is(created.status, 201, created.text);
  assert.equal(created.body.sentTo, [keys.did]);
  await raw.next('update_capabilities');
  const offer = await raw.next('certificate_offer');
  assert.is.not(offer.certificate.serial, first.certificate.serial);
  // No co-signature yet: once the hold on "reissue offered" is over, the actor says so.
  const pending = await waitFor(async () => {
    const a = await stateOf();
    return a?.state?.active?.certificate === 'reissuePending' ? a : null;
  }, 3000);
  assert.is(pending.context.serial, first.certificate.serial, 'the old certificate is still in force');
  raw.send({ type: 'certificate_accept', agentSignature: signMessage(keys, certificateBytes(offer.certificate)) });
  assert.is((await raw.next('ready')).certificate.serial, offer.certificate.serial);
  const current = await waitFor(async () => {
    const a = await stateOf();
    return a?.state?.active?.certificate === 'current' ? a : null;
  }, 3000);
  assert.equal(current.context, { did: keys.did, serial: offer.certificate.serial, policyId: created.body.policy.id });
  raw.close();
  await owner.api.del(`/api/policies/${created.body.policy.id}`);
});

test.run();
