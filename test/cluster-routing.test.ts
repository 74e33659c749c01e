/**
 * Two Steward nodes on one store and a real nats-server: every way a service reaches a socket
 * routes to the node that holds it. A policy created on B re-certifies an agent connected to A
 * (and `sentTo` says so); an intent, an approval and a mention made on B reach an agent on A;
 * approve on A and reject on B at once: exactly one wins; B's live feed shows A's messages and
 * actor transitions.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { StewardAgent } from '../src/agent/index.js';
import { generateKeyPair } from '../src/domain/did.js';
import type { ChannelMessageContext } from '../src/agent/index.js';
import { waitFor } from './helpers.js';
import type { TestUser } from './fixtures.js';
import { approve, once, RawAgent, stopAll } from './fleet-helpers.js';
import { addMember, FeedClient, makeChannel, makeWorkspace } from './channels-helpers.js';
import { startCluster, type ClusterNodeServer, type TestCluster } from './cluster-nodes.js';

const test = suite('cluster: the ports across nodes');
let cl: TestCluster;
let A: ClusterNodeServer;
let B: ClusterNodeServer;
const agents: StewardAgent[] = [];
const sockets: Array<{ close(): void }> = [];

test.before(async () => {
  cl = await startCluster({ nodes: 2 });
  [A, B] = cl.nodes as [ClusterNodeServer, ClusterNodeServer];
});

test.after(async () => {
  for (const s of sockets) s.close();
  await stopAll(...agents);
  await cl.stop();
});

/** The owner, calling through `node`. */
const ownerOn = (node: ClusterNodeServer): TestUser => ({ ...cl.owner, api: cl.as(node) });

/** An SDK agent connected to `node`, approved (through `node`) and ready; both nodes see it online. */
async function readyOn(node: ClusterNodeServer, opts: Partial<ConstructorParameters<typeof StewardAgent>[0]> = {}): Promise<StewardAgent> {
  const agent = new StewardAgent({
    url: node.url,
    keys: generateKeyPair(),
    name: `agent-${Math.random().toString(36).slice(2, 8)}`,
    version: '1.0.0',
    capabilities: ['file_access', 'api_call'],
    reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
    ...opts,
  }).start();
  agents.push(agent);
  await approve(ownerOn(node), agent);
  await agent.waitFor('ready');
  for (const n of cl.nodes) await waitFor(() => n.ctx.agents.isOnline(agent.did));
  return agent;
}

test('a policy created on B reaches the agent connected to A: update_capabilities, a new certificate, and sentTo names it', async () => {
  const agent = await readyOn(A);
  const before = agent.certificate!.certificate.serial;
  const caps = once<any>(agent, 'capabilities');
  const r = await cl.as(B).post('/api/policies', { agentDid: agent.did, capabilities: ['api_call'] });
  assert.is(r.status, 201, r.text);
  assert.equal(r.body.sentTo, [agent.did]);
  assert.equal((await caps).capabilities, ['api_call']);
  // The new certificate, co-signed by the agent and stored.
  const stored = await waitFor(async () => {
    const certs = await A.ctx.c.certificates.find({ agentDid: agent.did });
    return certs.find((c) => JSON.parse(c.canonical).policyId === r.body.policy.id);
  });
  assert.is.not(stored._id, before);
  // And back: the policy deleted on B re-certifies it again.
  const del = await cl.as(B).del(`/api/policies/${r.body.policy.id}`);
  assert.is(del.status, 200, del.text);
  assert.equal(del.body.sentTo, [agent.did]);
});

test('an intent sent through B reaches the agent on A and its answer comes back', async () => {
  const agent = await readyOn(A, { onIntent: async ({ action, params }) => ({ action, echo: params }) });
  const r = await cl.as(B).post(`/api/agents/${encodeURIComponent(agent.did)}/intents`, { action: 'api_call', params: { q: 42 } });
  assert.is(r.status, 200, r.text);
  assert.equal(r.body.output, { action: 'api_call', echo: { q: 42 } });
  // Gone from A: B answers offline (409), as one process does.
  await agent.stop();
  await waitFor(() => !B.ctx.agents.isOnline(agent.did));
  const offline = await cl.as(B).post(`/api/agents/${encodeURIComponent(agent.did)}/intents`, { action: 'api_call', params: {} });
  assert.is(offline.status, 409, offline.text);
  assert.is(offline.body.error.code, 'agent_offline');
});

test('an approval made on B reaches the agent waiting on A, which completes its handshake there', async () => {
  const agent = new StewardAgent({
    url: A.url,
    keys: generateKeyPair(),
    name: 'waiting',
    version: '1.0.0',
    capabilities: ['file_access'],
    reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
  }).start();
  agents.push(agent);
  await agent.waitFor('pending');
  const r = await cl.as(B).post(`/api/registrations/${agent.registrationId}/approve`, { capabilities: ['file_access'] });
  assert.is(r.status, 200, r.text);
  await agent.waitFor('ready');
  assert.ok(A.ctx.agentPush.isOnline(agent.did), 'its socket stayed on A');
  assert.not.ok(B.ctx.agentPush.isOnline(agent.did));
});

/**
 * Holds each node's next read of the agent's pending registration until both nodes have made it,
 * so both decisions start from "pending" (the race at its closest). Released anyway after a while
 * in case one node never reads (it refused earlier).
 */
function bothReadPending(did: string): void {
  const waiting: Array<() => void> = [];
  for (const node of [A, B]) {
    const col = node.ctx.c.registrations;
    const findOne = col.findOne.bind(col);
    col.findOne = (async (filter: any, ...rest: any[]) => {
      const result = await findOne(filter, ...rest);
      if (filter?.agentDid === did && filter?.status === 'pending') {
        col.findOne = findOne;
        await new Promise<void>((resolve) => {
          waiting.push(resolve);
          if (waiting.length === 2) for (const w of waiting) w();
          else setTimeout(resolve, 2000).unref();
        });
      }
      return result;
    }) as typeof col.findOne;
  }
}

test('approve on A and reject on B at the same time: exactly one wins, in the store as in the answers', async () => {
  for (let round = 0; round < 3; round++) {
    const raw = new RawAgent(A.url);
    sockets.push(raw);
    await raw.authenticate({ name: `racer-${round}` });
    const pending = await raw.next('registration');
    bothReadPending(raw.keys.did);
    const [approved, rejected] = await Promise.all([
      cl.as(A).post(`/api/registrations/${pending.registrationId}/approve`, { capabilities: ['file_access'] }),
      cl.as(B).post(`/api/registrations/${pending.registrationId}/reject`, { reason: 'no' }),
    ]);
    const statuses = [approved.status, rejected.status].sort();
    assert.equal(statuses, [200, 409], `${approved.text} / ${rejected.text}`);
    const loser = approved.status === 409 ? approved : rejected;
    assert.is(loser.body.error.code, 'already_decided');
    const reg = (await A.ctx.c.registrations.findById(pending.registrationId))!;
    const agent = (await A.ctx.c.agents.findById(raw.keys.did))!;
    if (approved.status === 200) {
      assert.equal([reg.status, agent.status], ['approved', 'active']);
    } else {
      assert.equal([reg.status, agent.status], ['rejected', 'rejected']);
    }
    raw.close();
  }
});

test('a mention posted on B reaches the agent connected to A', async () => {
  const ws = await makeWorkspace(ownerOn(B), 'Mentions');
  const agent = await readyOn(A, { name: 'helper', workspace: ws.id });
  const ch = await makeChannel(ownerOn(B), { name: 'Support', workspaceId: ws.id });
  await addMember(ownerOn(B), ch.id, agent.did, 'agent');
  const got = once<ChannelMessageContext>(agent, 'channelMessage');
  const r = await cl.as(B).post(`/api/channels/${ch.id}/messages`, { content: 'hello @helper' });
  assert.is(r.status, 201, r.text);
  const ctx = await got;
  assert.is(ctx.message.id, r.body.message.id);
  assert.is(ctx.channelId, ch.id);
});

test("B's live feed shows the messages posted on A and the transitions of A's actors", async () => {
  // A channel and an agent whose actors live on A (the owner of their shards).
  let tries = 0;
  let ch = await makeChannel(ownerOn(A), { name: `Live ${tries}` });
  while (!A.ctx.cluster!.placement.isLocal(`channel:${ch.id}`)) ch = await makeChannel(ownerOn(A), { name: `Live ${++tries}` });
  let keys = generateKeyPair();
  while (!A.ctx.cluster!.placement.isLocal(`agent:${keys.did}`)) keys = generateKeyPair();
  const feed = await FeedClient.connect(B.url, cl.owner.token);
  sockets.push(feed);
  assert.equal(await feed.subscribe(ch.id), { type: 'subscribed', channelId: ch.id });
  feed.send({ type: 'subscribe', topic: 'actors' });
  await feed.next((f) => f.type === 'subscribed' && f.topic === 'actors');
  // A hears of B's interest through the bus; until then a post on A reaches nobody on B.
  await waitFor(() => hasRemoteInterest(A, `channel:${ch.id}`));
  const posted = await cl.as(A).post(`/api/channels/${ch.id}/messages`, { content: 'from A' });
  assert.is(posted.status, 201, posted.text);
  const created = await feed.next((f) => f.type === 'message.created');
  assert.equal(created, { type: 'message.created', channelId: ch.id, message: posted.body.message });
  const agent = await readyOn(A, { keys });
  assert.ok(A.ctx.actors.peek('agent', agent.did), "the agent's actor is on A");
  const transition = await feed.next((f) => f.type === 'actor.transition' && f.actorId === agent.did && f.event === 'CONNECTED');
  assert.is(transition.kind, 'agent');
});

/** Whether `node` knows another node follows the feed topic (its frames then go over the bus). */
function hasRemoteInterest(node: ClusterNodeServer, topic: string): boolean {
  const topics = (node.ctx.fleet.feed as unknown as { deps: { topics: { hasSubscribers(t: string): boolean } } }).deps.topics;
  return topics.hasSubscribers(topic);
}

test("B's agents list follows what A changes: an approval, an LLM setting, a disconnection's lastSeen, a deletion", async () => {
  const enc = encodeURIComponent;
  const agent = await readyOn(A);
  const rowOn = async (node: ClusterNodeServer) => (await cl.as(node).get(`/api/agents?q=${enc(agent.did)}`)).body.agents[0];
  await waitFor(async () => (await rowOn(B))?.isOnline === true);
  assert.is((await rowOn(B)).llmProvider, null);
  assert.is((await cl.as(A).put(`/api/agents/${enc(agent.did)}/llm-config`, { provider: 'anthropic', model: 'claude-sonnet-4' })).status, 200);
  await waitFor(async () => (await rowOn(B)).llmModel === 'claude-sonnet-4');
  await agent.stop();
  await waitFor(async () => (await rowOn(A)).isOnline === false);
  const lastSeen = (await rowOn(A)).lastSeen;
  assert.ok(lastSeen);
  await waitFor(async () => (await rowOn(B)).lastSeen === lastSeen && (await rowOn(B)).isOnline === false);
  assert.is((await cl.as(A).del(`/api/agents/${enc(agent.did)}`)).status, 200);
  await waitFor(async () => (await rowOn(B)) === undefined);
  assert.is((await cl.as(B).get(`/api/agents/search?q=${enc(agent.did)}`)).body.agents.length, 0);
});

test("B's agents list: a change whose broadcast was lost shows once the bus is back, read from the change log, with no read of every row", async () => {
  const enc = encodeURIComponent;
  const agent = await readyOn(A);
  const rowOn = async (node: ClusterNodeServer) => (await cl.as(node).get(`/api/agents?q=${enc(agent.did)}`)).body.agents[0];
  await waitFor(async () => (await rowOn(B))?.isOnline === true);

  await cl.nats.kill();
  for (const n of [A, B]) await waitFor(() => n.ctx.cluster!.bus.status !== 'connected');
  assert.is((await cl.as(A).put(`/api/agents/${enc(agent.did)}/llm-config`, { provider: 'anthropic', model: 'claude-haiku-4' })).status, 200);
  assert.is((await rowOn(A)).llmModel, 'claude-haiku-4');

  // B's reads of every row are counted: catching up needs none.
  const agents = B.ctx.c.agents;
  const find = agents.find;
  let whole = 0;
  agents.find = (async (...args: Parameters<typeof find>) => {
    if (JSON.stringify(args[0]) === '{"status":"active"}') whole++;
    return find.apply(agents, args);
  }) as typeof find;
  try {
    await cl.nats.restart();
    for (const n of [A, B]) await waitFor(() => n.ctx.cluster!.bus.status === 'connected', 15_000, 50);
    await waitFor(async () => (await rowOn(B)).llmModel === 'claude-haiku-4', 15_000);
    assert.is(whole, 0, 'B read every row');
  } finally {
    agents.find = find;
  }
});

test.run();
