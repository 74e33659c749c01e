/**
 * Once across the cluster, not once per node: a cron firing runs on one of three nodes; the token
 * roll-up runs on the holder of its lease and folds every node's ledger; an agent that moves to
 * another node has nothing counted twice; an outgoing bridge delivery left by a node that is gone
 * is made once by another.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { waitFor } from './helpers.js';
import type { TestUser } from './fixtures.js';
import { approvedKeys, heartbeat, RawAgent } from './fleet-helpers.js';
import { makeChannel } from './channels-helpers.js';
import { createWorkflow } from './workflows-helpers.js';
import { StandIn } from './stand-in-server.js';
import { startCluster, type ClusterNodeServer, type TestCluster } from './cluster-nodes.js';
import { storeKind } from './store-backend.js';

const test = suite('cluster: once, not once per node');
let cl: TestCluster;
let nodes: ClusterNodeServer[];
let remote: StandIn;
const sockets: Array<{ close(): void }> = [];

test.before(async () => {
  remote = await StandIn.start();
  cl = await startCluster({ nodes: 3, env: { TOKEN_ROLLUP_INTERVAL_SECONDS: '3600' } });
  nodes = cl.nodes;
});

test.after(async () => {
  for (const s of sockets) s.close();
  await cl.stop();
  await remote.close();
});

const ownerOn = (node: ClusterNodeServer): TestUser => ({ ...cl.owner, api: cl.as(node) });

test('the nodes share the store of this run: the embedded store, or MongoDB (the stand-in or MONGODB_URI)', async () => {
  assert.is(cl.store.kind, storeKind === 'embedded' ? 'embedded' : 'mongodb', cl.target);
  for (const n of nodes) assert.is(n.ctx.store.kind, cl.store.kind, n.nodeId);
});

test('a schedule made on one node is armed on all three, and each firing runs once', async () => {
  const [n1, , n3] = nodes as [ClusterNodeServer, ClusterNodeServer, ClusterNodeServer];
  const wf = await createWorkflow(ownerOn(n1), n1.ctx.defaultWorkspace._id, { steps: [{ id: 'wait', name: 'wait', action: 'delay', params: { ms: 0 } }] });
  const r = await cl.as(n1).post('/api/schedules', { workflowId: wf, cron: '* * * * * *', params: {} });
  assert.is(r.status, 201, r.text);
  const id = r.body.schedule.id;
  // Every node armed it (its next firing is its own task's).
  for (const n of nodes) await waitFor(async () => (await cl.as(n).get(`/api/schedules/${id}`)).body.schedule.nextRunAt !== null);
  const entries = () => n3.ctx.c.audit.find({ action: 'workflow.run', 'details.scheduleId': id });
  await waitFor(async () => (await entries()).length >= 4, 15_000);
  assert.is((await cl.as(n3).del(`/api/schedules/${id}`)).status, 200);
  const byFiring = new Map<string, number>();
  for (const e of await entries()) byFiring.set(String(e.details.fireTime), (byFiring.get(String(e.details.fireTime)) ?? 0) + 1);
  assert.ok(byFiring.size >= 4, `${byFiring.size} firings`);
  for (const [fireTime, runs] of byFiring) assert.is(runs, 1, `firing at ${fireTime} ran ${runs} times`);
  const runs = await n1.ctx.c.workflowRuns.count({ workflowId: wf });
  assert.is(runs, [...byFiring.values()].reduce((a, b) => a + b, 0));
});

test('an agent that moves to another node: its ready there names the seq stored by the first, and nothing is counted twice', async () => {
  const [A, B] = nodes as [ClusterNodeServer, ClusterNodeServer];
  const before = (await cl.as(A).get('/api/stats/tokens')).body.allTime;
  const keys = await approvedKeys(A, ownerOn(A));
  const a = new RawAgent(A.url, keys);
  sockets.push(a);
  await a.authenticate();
  await a.acceptNextOffer();
  for (let seq = 1; seq <= 3; seq++) {
    a.send(heartbeat(seq, 10, 1));
    assert.is((await a.next('heartbeat_ack')).seq, seq);
  }
  a.close();
  await waitFor(() => !B.ctx.agents.isOnline(keys.did));
  const b = new RawAgent(B.url, keys);
  sockets.push(b);
  await b.authenticate();
  const ready = await b.acceptNextOffer();
  assert.is(ready.lastHeartbeatSeq, 3, 'B read what A stored');
  // A heartbeat stored before (its ack lost) is acknowledged and not counted again.
  b.send(heartbeat(3, 10, 1));
  assert.is((await b.next('heartbeat_ack')).seq, 3);
  b.send(heartbeat(4, 5, 5));
  assert.is((await b.next('heartbeat_ack')).seq, 4);
  const after = (await cl.as(B).get('/api/stats/tokens')).body.allTime;
  assert.equal({ p: after.promptTokens - before.promptTokens, c: after.completionTokens - before.completionTokens }, { p: 35, c: 8 });
  b.close();
});

test('one node holds the roll-up: it folds what every node wrote, and the agent keeps the highest seq of all', async () => {
  const [A, B] = nodes as [ClusterNodeServer, ClusterNodeServer];
  const keys = await approvedKeys(A, ownerOn(A));
  for (const [node, seqs] of [
    [A, [1, 2]],
    [B, [3, 4]],
  ] as const) {
    const raw = new RawAgent(node.url, keys);
    sockets.push(raw);
    await raw.authenticate();
    await raw.acceptNextOffer();
    for (const seq of seqs) {
      raw.send(heartbeat(seq, 100, 10));
      await raw.next('heartbeat_ack');
    }
    raw.close();
    await waitFor(() => !nodes.some((n) => n.ctx.agents.isOnline(keys.did)));
  }
  const lease = (await A.ctx.c.clusterClaims.findById('lease:token-rollup')) as { owner: string } | null;
  const holders = nodes.filter((n) => n.ctx.cluster!.nodeKey === lease?.owner);
  assert.is(holders.length, 1, 'one holder');
  // Roll-ups everywhere: the others fold nothing; the holder folds once its documents are old enough.
  await waitFor(
    async () => {
      for (const n of nodes) await n.ctx.fleet.tokens.rollup();
      const usage = await A.ctx.c.tokenUsage.findById(keys.did);
      return usage?.allTime !== undefined && (await A.ctx.c.tokenLedger.count({ dids: keys.did })) === 0 ? usage : null;
    },
    20_000,
    200,
  );
  const usage = (await A.ctx.c.tokenUsage.findById(keys.did))!;
  assert.is(usage.lastSeq, 4);
  assert.equal([usage.allTime.promptTokens, usage.allTime.completionTokens], [400, 40]);
});

test('an outgoing bridge delivery left by a node that is gone is claimed and made once by one of the others', async () => {
  const [n1] = nodes as [ClusterNodeServer];
  const ch = await makeChannel(ownerOn(n1), { name: 'Outbound' });
  const r = await cl.as(n1).post(`/api/channels/${ch.id}/bridges`, {
    externalService: 'webhook',
    externalChannelId: 'ext-out',
    externalChannelName: 'out',
    externalWorkspaceId: 'platform',
    config: { secret: 'whsec-0123456789abcdef0123456789abcdef', outgoingUrl: `${remote.url}/hook` },
  });
  assert.is(r.status, 201, r.text);
  const id = 'left-by-a-dead-node';
  const past = new Date(Date.now() - 60_000).toISOString();
  await n1.ctx.c.bridgeOutbox.insertOne({
    _id: id,
    bridgeId: r.body.bridge.id,
    service: 'webhook',
    body: JSON.stringify({ deliveryId: id, message: { content: 'left behind' } }),
    html: '',
    attempt: 0,
    createdAt: past,
    nextAttemptAt: past,
    claimedBy: 'gone/0000',
    claimedUntil: past,
    claimToken: 'old',
  });
  await waitFor(async () => (await n1.ctx.c.bridgeOutbox.findById(id)) === null, 15_000);
  const made = remote.received.filter((x) => x.headers['x-steward-delivery'] === id);
  assert.is(made.length, 1);
});

test.run();
