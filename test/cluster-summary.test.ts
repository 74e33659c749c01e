/**
 * The fleet summary across two nodes on one store and a real nats-server: whichever node is
 * asked answers for the whole cluster. Changes made through A (a registration, an approval, a
 * membership, a deletion, runs) show in B's figures; agents connected to A count online on B,
 * once each, whichever node holds their actor; a change whose broadcast was lost (NATS down)
 * shows on B once the bus is back.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { StewardAgent } from '../src/agent/index.js';
import { AGENT_ACTOR_KIND } from '../src/actors/agent.js';
import { generateKeyPair, type Ed25519KeyPair } from '../src/domain/did.js';
import { client, waitFor } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { approve, enc, makeWorkspace, newAgent, stopAll } from './fleet-helpers.js';
import { createWorkflow, ended, startRun, waitRun } from './workflows-helpers.js';
import { startCluster, type ClusterNodeServer, type TestCluster } from './cluster-nodes.js';

const test = suite('cluster: the fleet summary');
let cl: TestCluster;
let A: ClusterNodeServer;
let B: ClusterNodeServer;
let ws: { id: string; slug: string; name: string };
let other: { id: string; slug: string; name: string };
/** A person of `ws` only. */
let member: TestUser;
const agents: StewardAgent[] = [];

test.before(async () => {
  cl = await startCluster({ nodes: 2 });
  [A, B] = cl.nodes as [ClusterNodeServer, ClusterNodeServer];
  // B has its share of the shards (it joined after A took them all), so some actors live on each.
  await waitFor(() => B.ctx.cluster!.shards.ownedShards().size >= 6, 20_000, 50);
  const brief = ({ id, slug, name }: { id: string; slug: string; name: string }) => ({ id, slug, name });
  ws = brief(await makeWorkspace(ownerOn(A), 'Summary'));
  other = brief(await makeWorkspace(ownerOn(A), 'Elsewhere'));
  member = await makeUser(A, { workspaces: { [ws.id]: 'member' } });
});

test.after(async () => {
  await stopAll(...agents);
  await cl.stop();
});

/** The owner, calling through `node`. */
const ownerOn = (node: ClusterNodeServer): TestUser => ({ ...cl.owner, api: cl.as(node) });

async function summary(node: ClusterNodeServer, who: TestUser = cl.owner): Promise<any> {
  const r = await client(node.url, who.token).get('/api/fleet/summary');
  assert.is(r.status, 200, r.text);
  return r.body;
}

/** Waits until `node`'s summary for `who` satisfies `ok`; the last one seen is in the failure. */
async function summaryWhen(node: ClusterNodeServer, ok: (b: any) => boolean, who: TestUser = cl.owner, timeoutMs = 10_000): Promise<any> {
  let last: any;
  try {
    return await waitFor(async () => {
      last = await summary(node, who);
      return ok(last) ? last : null;
    }, timeoutMs, 50);
  } catch {
    assert.unreachable(`${node.nodeId}'s summary never matched; last: ${JSON.stringify(last)}`);
  }
}

const wsOf = (b: any, id: string) => b.workspaces.find((w: any) => w.id === id);

/** Keys whose agent actor lives on `node`. */
function keysHeldBy(node: ClusterNodeServer): Ed25519KeyPair {
  for (;;) {
    const keys = generateKeyPair();
    if (node.ctx.cluster!.placement.isLocal(`${AGENT_ACTOR_KIND}:${keys.did}`)) return keys;
  }
}

test('an agent registered, approved, connected, disconnected and deleted through A: B follows, for an admin and for a member', async () => {
  const before = await summary(B);
  const agent = newAgent(A, { name: 'summed', workspace: ws.id });
  agents.push(agent);
  await agent.waitFor('pending');
  let b = await summaryWhen(B, (x) => x.agents.pending === before.agents.pending + 1);
  assert.is(b.agents.total, before.agents.total + 1);
  assert.is(b.registrationsPending, before.registrationsPending + 1);

  await approve(ownerOn(A), agent);
  await agent.waitFor('ready');
  b = await summaryWhen(B, (x) => x.agents.online === before.agents.online + 1 && x.agents.pending === before.agents.pending);
  assert.is(b.agents.total, before.agents.total + 1);
  assert.equal(wsOf(b, ws.id), { ...ws, total: 1, online: 1 });
  for (const node of [A, B]) {
    const m = await summaryWhen(node, (x) => x.agents.online === 1, member);
    assert.equal(m.agents, { total: 1, online: 1, pending: 0, rejected: 0 });
    assert.equal(m.workspaces, [{ ...ws, total: 1, online: 1 }]);
  }

  // A membership made on A.
  const joined = await cl.as(A).post(`/api/workspaces/${other.id}/agents`, { agentDid: agent.did });
  assert.ok(joined.status === 200 || joined.status === 201, joined.text);
  b = await summaryWhen(B, (x) => wsOf(x, other.id).total === 1);
  assert.equal(wsOf(b, other.id), { ...other, total: 1, online: 1 });
  assert.is(b.agents.total, before.agents.total + 1, 'an agent in two workspaces counts once');

  await agent.stop();
  for (const node of [A, B]) {
    b = await summaryWhen(node, (x) => x.agents.online === before.agents.online);
    assert.equal(wsOf(b, ws.id), { ...ws, total: 1, online: 0 });
    assert.equal((await summaryWhen(node, (x) => x.agents.online === 0, member)).agents, { total: 1, online: 0, pending: 0, rejected: 0 });
  }

  assert.is((await cl.as(A).del(`/api/agents/${enc(agent.did)}`)).status, 200);
  b = await summaryWhen(B, (x) => x.agents.total === before.agents.total);
  assert.equal(wsOf(b, ws.id), { ...ws, total: 0, online: 0 });
  assert.equal(wsOf(b, other.id), { ...other, total: 0, online: 0 });
  assert.equal((await summary(B, member)).agents, { total: 0, online: 0, pending: 0, rejected: 0 });
});

test('agents connected to A count online once on both nodes, whether their actor lives on A or on B', async () => {
  const before = await summary(B);
  const onA = newAgent(A, { name: 'actor-on-a', keys: keysHeldBy(A), workspace: ws.id });
  const onB = newAgent(A, { name: 'actor-on-b', keys: keysHeldBy(B), workspace: ws.id });
  agents.push(onA, onB);
  for (const agent of [onA, onB]) {
    await approve(ownerOn(A), agent);
    await agent.waitFor('ready');
  }
  for (const node of [A, B]) await waitFor(() => node.ctx.agents.isOnline(onA.did) && node.ctx.agents.isOnline(onB.did));
  // Each actor has heard CONNECTED (relayed to B for the second) before the figures are read.
  for (const [node, agent] of [[A, onA], [B, onB]] as const) {
    await waitFor(() => (node.ctx.actors.getLive(AGENT_ACTOR_KIND, agent.did)?.getSnapshot() as any)?.value?.active?.connection === 'online');
  }
  for (const node of [A, B]) {
    const b = await summaryWhen(node, (x) => x.agents.online >= before.agents.online + 2);
    assert.is(b.agents.online, before.agents.online + 2, `${node.nodeId}: each agent once`);
    assert.is(wsOf(b, ws.id).online, 2, `${node.nodeId}: per workspace`);
    assert.equal((await summary(node, member)).agents, { total: 2, online: 2, pending: 0, rejected: 0 });
  }
  await stopAll(onA, onB);
  for (const node of [A, B]) await summaryWhen(node, (x) => x.agents.online === before.agents.online);
});

test('a run started and failed through A, and one running: B counts them', async () => {
  const owner = ownerOn(A);
  const before = await summary(B);
  const waiting = await createWorkflow(owner, ws.id, { steps: [{ id: 'wait', name: 'wait', action: 'delay', params: { ms: 600_000 } }] });
  const failing = await createWorkflow(owner, ws.id, { steps: [{ id: 'post', name: 'post', action: 'channel.post', params: {} }] });
  const running = await startRun(owner, waiting);
  const failed = await startRun(owner, failing);
  assert.is((await waitRun(owner, failing, failed, ended)).status, 'failed');
  const b = await summaryWhen(B, (x) => x.runs.running === before.runs.running + 1 && x.runs.failedLast24h === before.runs.failedLast24h + 1);
  assert.equal(b.runs, { running: before.runs.running + 1, failedLast24h: before.runs.failedLast24h + 1 });
  assert.equal((await summary(B, member)).runs, { running: 1, failedLast24h: 1 });
  assert.is((await cl.as(A).post(`/api/workflows/${waiting}/runs/${running}/cancel`, {})).status, 200);
  await summaryWhen(B, (x) => x.runs.running === before.runs.running);
});

test('a change whose broadcast was lost (NATS down) shows on B once the bus is back', async () => {
  const before = await summary(B, member);
  const agent = newAgent(A, { name: 'cut-off', workspace: ws.id });
  agents.push(agent);
  await approve(ownerOn(A), agent);
  await agent.waitFor('ready');
  await summaryWhen(B, (x) => x.agents.online === before.agents.online + 1 && x.agents.total === before.agents.total + 1, member);

  await cl.nats.kill();
  for (const n of [A, B]) await waitFor(() => n.ctx.cluster!.bus.status !== 'connected');
  // Made on A while no broadcast can leave it: B does not hear of it.
  const joined = await cl.as(A).post(`/api/workspaces/${other.id}/agents`, { agentDid: agent.did });
  assert.ok(joined.status === 200 || joined.status === 201, joined.text);
  assert.is(wsOf(await summary(A), other.id).total, 1);
  assert.is(wsOf(await summary(B), other.id).total, 0, 'B missed it');

  await cl.nats.restart();
  for (const n of [A, B]) await waitFor(() => n.ctx.cluster!.bus.status === 'connected', 15_000, 50);
  const b = await summaryWhen(B, (x) => wsOf(x, other.id).total === 1, cl.owner, 15_000);
  assert.is(wsOf(b, other.id).total, 1);
  // The socket facts survive the recomputation: the agent is still online (it is on A).
  await summaryWhen(B, (x) => wsOf(x, other.id).online === 1 && wsOf(x, ws.id).online === before.agents.online + 1);
});

test('an agent that reconnects to another node within its grace period counts once: the node it left stops counting it', async () => {
  // A third node that keeps agents in their grace period for longer than the test lasts.
  const C = await cl.add('n3', { AGENT_OFFLINE_GRACE_MS: '600000' });
  const before = await summary(A);
  const keys = generateKeyPair();
  const first = newAgent(C, { name: 'mover', keys, workspace: ws.id });
  agents.push(first);
  await approve(ownerOn(C), first);
  await first.waitFor('ready');
  for (const node of [A, B, C]) await summaryWhen(node, (x) => x.agents.online === before.agents.online + 1);

  await first.stop();
  const again = newAgent(A, { name: 'mover', keys, workspace: ws.id });
  agents.push(again);
  await again.waitFor('ready');
  await waitFor(() => !C.ctx.agentPush.isOnline(keys.did) && C.ctx.agents.isOnline(keys.did));
  // Its actor has heard A's CONNECTED (A's own count is made as A hands it over) before the figures are read.
  const serial = again.certificate!.certificate.serial;
  await waitFor(() => cl.nodes.some((n) => (n.ctx.actors.getLive(AGENT_ACTOR_KIND, keys.did)?.getSnapshot() as any)?.context?.serial === serial));
  for (const node of [A, B, C]) {
    const b = await summaryWhen(node, (x) => x.agents.online === before.agents.online + 1);
    assert.is(wsOf(b, ws.id).online, wsOf(before, ws.id).online + 1, `${node.nodeId}: once per workspace`);
  }
  await again.stop();
  for (const node of [A, B, C]) await summaryWhen(node, (x) => x.agents.online === before.agents.online);
});

test.run();
