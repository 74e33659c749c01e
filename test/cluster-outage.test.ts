/**
 * Two nodes and a nats-server that is killed and started again. While NATS is down each node
 * says so on /readyz (503), answers what it holds itself, and answers 503 cluster_unavailable
 * for what another node holds; when NATS is back the nodes recover by themselves: /readyz is
 * ready, commands and intents cross nodes again. /metrics shows the bus and the owned shards.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { StewardAgent } from '../src/agent/index.js';
import { generateKeyPair } from '../src/domain/did.js';
import { waitFor } from './helpers.js';
import type { TestUser } from './fixtures.js';
import { approve, stopAll } from './fleet-helpers.js';
import { makeChannel } from './channels-helpers.js';
import { startCluster, type ClusterNodeServer, type TestCluster } from './cluster-nodes.js';

const test = suite('cluster: NATS down and back');
let cl: TestCluster;
let A: ClusterNodeServer;
let B: ClusterNodeServer;
const agents: StewardAgent[] = [];

test.before(async () => {
  cl = await startCluster({ nodes: 2 });
  [A, B] = cl.nodes as [ClusterNodeServer, ClusterNodeServer];
});

test.after(async () => {
  await stopAll(...agents);
  await cl.stop();
});

const ownerOn = (node: ClusterNodeServer): TestUser => ({ ...cl.owner, api: cl.as(node) });

test('/readyz reports the bus and the shards; /metrics the bus messages and owned shards', async () => {
  // (Polled: a node whose renewal is late counts no shard until the next one.)
  const r = await waitFor(async () => {
    const res = await cl.as(A).get('/readyz');
    return res.status === 200 && res.body.cluster.ownedShards > 0 && res.body.cluster.nodes === 2 ? res : null;
  }, 10_000, 50);
  assert.is(r.body.cluster.nodeId, A.nodeId);
  assert.is(r.body.cluster.bus, 'connected');
  assert.is(r.body.cluster.shards, 16);
  // Something crossed the bus (the nodes' presence and feed announcements at least).
  const value = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  const m = await waitFor(async () => {
    const res = await cl.as(A).get('/metrics');
    return value(res.text, 'steward_cluster_owned_shards') === A.ctx.cluster!.shards.ownedShards().size ? res : null;
  }, 10_000, 50);
  assert.is(value(m.text, 'steward_bus_connected'), 1);
  assert.ok(/^steward_bus_messages_total\{direction="sent"\} [1-9]/m.test(m.text), 'bus messages counted');
  assert.ok(m.text.includes('steward_bus_request_duration_seconds'), 'request latency exported');
});

test('NATS killed: each node answers what it holds and 503 for the rest; NATS back: they recover by themselves', async () => {
  // B has its share of the shards by now (it joined after A took them all).
  await waitFor(() => B.ctx.cluster!.shards.ownedShards().size >= 6, 20_000, 50);
  // A channel whose actor lives on A, and an agent connected to A.
  let tries = 0;
  let ch = await makeChannel(ownerOn(A), { name: `Outage ${tries}` });
  while (!A.ctx.cluster!.placement.isLocal(`channel:${ch.id}`)) ch = await makeChannel(ownerOn(A), { name: `Outage ${++tries}` });
  const agent = new StewardAgent({
    url: A.url,
    keys: generateKeyPair(),
    name: 'steady',
    version: '1.0.0',
    capabilities: ['api_call'],
    reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
    onIntent: async ({ params }) => ({ echo: params }),
  }).start();
  agents.push(agent);
  await approve(ownerOn(A), agent);
  await agent.waitFor('ready');
  await waitFor(() => B.ctx.agents.isOnline(agent.did));

  await cl.nats.kill();
  for (const n of [A, B]) await waitFor(() => n.ctx.cluster!.bus.status !== 'connected');
  for (const n of [A, B]) {
    const ready = await cl.as(n).get('/readyz');
    assert.is(ready.status, 503, ready.text);
    assert.is(ready.body.error.code, 'not_ready');
  }
  // What A holds, A answers; what A holds, B cannot reach.
  const here = await cl.as(A).post(`/api/channels/${ch.id}/messages`, { content: 'still here' });
  assert.is(here.status, 201, here.text);
  const there = await cl.as(B).post(`/api/channels/${ch.id}/messages`, { content: 'cut off' });
  assert.is(there.status, 503, there.text);
  assert.is(there.body.error.code, 'cluster_unavailable');

  await cl.nats.restart();
  for (const n of [A, B]) await waitFor(async () => (await cl.as(n).get('/readyz')).status === 200, 15_000, 50);
  const posted = await waitFor(async () => {
    const r = await cl.as(B).post(`/api/channels/${ch.id}/messages`, { content: 'back' });
    return r.status === 201 ? r : null;
  }, 10_000, 100);
  assert.is(posted.body.message.content, 'back');
  // The agent's subject is served again on A: an intent through B reaches it.
  await waitFor(() => B.ctx.agents.isOnline(agent.did), 10_000);
  const intent = await cl.as(B).post(`/api/agents/${encodeURIComponent(agent.did)}/intents`, { action: 'api_call', params: { n: 1 } });
  assert.is(intent.status, 200, intent.text);
  assert.equal(intent.body.output, { echo: { n: 1 } });
});

test.run();
