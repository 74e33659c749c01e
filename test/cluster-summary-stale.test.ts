/**
 * Out-of-date certificates in the fleet summary across two nodes on one store and a real
 * nats-server: a policy change made through one node puts an offline agent's certificate out of
 * date on both; the agent co-signing its new terms on the other node clears it on both; an agent
 * both offered new terms on one node's socket and out of date counts once on either node.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPair, type Ed25519KeyPair } from '../src/domain/did.js';
import { client, waitFor } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { approve, enc, makeWorkspace, newAgent, RawAgent, stopAll } from './fleet-helpers.js';
import { startCluster, type ClusterNodeServer, type TestCluster } from './cluster-nodes.js';

const test = suite('cluster: out-of-date certificates in the fleet summary');
let cl: TestCluster;
let A: ClusterNodeServer;
let B: ClusterNodeServer;
let ws: { id: string };
/** A person of `ws` only. */
let member: TestUser;
const raws: RawAgent[] = [];

test.before(async () => {
  cl = await startCluster({ nodes: 2, env: { AGENT_OFFLINE_GRACE_MS: '0' } });
  [A, B] = cl.nodes as [ClusterNodeServer, ClusterNodeServer];
  // B is one of A's live nodes (it has its share of the shards): A's policy changes reach it.
  await waitFor(() => B.ctx.cluster!.shards.ownedShards().size >= 6, 20_000, 50);
  ws = await makeWorkspace({ ...cl.owner, api: cl.as(A) }, 'Narrowed');
  member = await makeUser(A, { workspaces: { [ws.id]: 'member' } });
});

test.after(async () => {
  await stopAll(...raws);
  await cl.stop();
});

const awaiting = async (node: ClusterNodeServer, who: TestUser = cl.owner): Promise<number> => {
  const r = await client(node.url, who.token).get('/api/fleet/summary');
  assert.is(r.status, 200, r.text);
  return r.body.certificatesAwaitingReissue;
};

/** Waits until `node`'s figure for `who` is `n`; the last one seen is in the failure. */
async function awaitingBecomes(node: ClusterNodeServer, n: number, who: TestUser = cl.owner): Promise<void> {
  let last: number | undefined;
  try {
    await waitFor(async () => (last = await awaiting(node, who)) === n, 10_000, 50);
  } catch {
    assert.unreachable(`${node.nodeId}: certificatesAwaitingReissue never became ${n}; last: ${last}`);
  }
}

const offlineEverywhere = (did: string) => waitFor(() => !A.ctx.agents.isOnline(did) && !B.ctx.agents.isOnline(did), 10_000);

/** Connects the agent to `node`; its handshake co-signs the certificate offered. */
async function connect(node: ClusterNodeServer, keys: Ed25519KeyPair): Promise<{ raw: RawAgent; ready: any }> {
  const raw = new RawAgent(node.url, keys);
  raws.push(raw);
  await raw.authenticate();
  return { raw, ready: await raw.acceptNextOffer() };
}

test('a policy created through A puts an offline agent out of date on B; co-signed on B, cleared on A; deleted through B, out of date on A', async () => {
  const keys = generateKeyPair();
  const sdk = newAgent(A, { name: 'narrowed', keys, workspace: ws.id });
  await approve({ ...cl.owner, api: cl.as(A) }, sdk);
  await sdk.waitFor('ready');
  await sdk.stop();
  await offlineEverywhere(keys.did);
  for (const node of [A, B]) await awaitingBecomes(node, 0);

  const created = await cl.as(A).post('/api/policies', { workspaceId: ws.id, capabilities: ['file_access'] });
  assert.is(created.status, 201, created.text);
  for (const node of [B, A]) {
    await awaitingBecomes(node, 1);
    await awaitingBecomes(node, 1, member);
  }

  // It comes back on B and co-signs the policy's terms there: A hears of it.
  const { raw, ready } = await connect(B, keys);
  assert.is(ready.certificate.policyId, created.body.policy.id);
  for (const node of [A, B]) await awaitingBecomes(node, 0);

  await raw.close();
  await offlineEverywhere(keys.did);
  assert.is((await cl.as(B).del(`/api/policies/${created.body.policy.id}`)).status, 200);
  for (const node of [A, B]) await awaitingBecomes(node, 1);
});

test('an agent offered new terms on B and out of date counts once on either node, and still once it left without co-signing', async () => {
  const before = await awaiting(A);
  const keys = generateKeyPair();
  const sdk = newAgent(B, { name: 'slow', keys });
  await approve({ ...cl.owner, api: cl.as(B) }, sdk);
  await sdk.waitFor('ready');
  await sdk.stop();
  await offlineEverywhere(keys.did);
  const { raw } = await connect(B, keys);
  const actor = async () => (await cl.as(A).get(`/api/admin/actors/${enc(`agent:${keys.did}`)}`)).body.actor;
  await waitFor(async () => (await actor())?.state?.active?.connection === 'online', 10_000, 50);

  const created = await cl.as(A).post('/api/policies', { agentDid: keys.did, capabilities: ['file_access'] });
  assert.is(created.status, 201, created.text);
  assert.equal(created.body.sentTo, [keys.did]);
  await raw.next('certificate_offer'); // not co-signed
  await waitFor(async () => (await actor())?.state?.active?.certificate === 'reissuePending', 10_000, 50);
  for (const node of [A, B]) await awaitingBecomes(node, before + 1);
  // Still once, whichever node is asked (B counts its socket's offer, A adds B's offers not already out of date).
  for (const node of [A, B]) assert.is(await awaiting(node), before + 1);

  // Gone without co-signing: B forgets the offer, but the certificate it holds is still out of date.
  await raw.close();
  await offlineEverywhere(keys.did);
  await waitFor(async () => (await actor())?.state?.active?.connection === 'offline', 10_000, 50);
  for (const node of [A, B]) assert.is(await awaiting(node), before + 1);

  // Back on A, it co-signs the policy's terms at its handshake: neither node counts it.
  const { ready } = await connect(A, keys);
  assert.is(ready.certificate.policyId, created.body.policy.id);
  for (const node of [A, B]) await awaitingBecomes(node, before);
});

test.run();
