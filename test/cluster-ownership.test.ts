/**
 * Actors owned by shards across three nodes on one store and a real nats-server: each actor lives
 * on the node that owns its shard, and commands made on any node reach it there (a run started,
 * read and cancelled through the others); GET /api/admin/actors on any node lists every node's
 * actors; a stale owner's snapshot write, and its repair of a run's record, are refused and that
 * node stops acting for the shard; a
 * node that stops abruptly (no release, cut off its store, its bus and its agents' connections)
 * has its shards taken over within the lease, its running workflow run resumes on the new owner,
 * and its agents reconnect to the others through a load balancer.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { StewardAgent } from '../src/agent/index.js';
import { generateKeyPair } from '../src/domain/did.js';
import { claimDocument } from '../src/cluster/fence.js';
import { EPOCH_COUNTER_ID, type EpochCounterDoc } from '../src/store/cluster-docs.js';
import type { SnapshotDoc } from '../src/actors/host.js';
import { WORKFLOW_RUN_KIND } from '../src/actors/workflow-run.js';
import { waitFor } from './helpers.js';
import type { TestUser } from './fixtures.js';
import { approve, stopAll } from './fleet-helpers.js';
import { createWorkflow, startRun, waitRun } from './workflows-helpers.js';
import { startCluster, type ClusterNodeServer, type TestCluster } from './cluster-nodes.js';
import { TcpBalancer } from './tcp-balancer.js';

const test = suite('cluster: actors owned by shards');
let cl: TestCluster;
let nodes: ClusterNodeServer[];
let lb: TcpBalancer;
const agents: StewardAgent[] = [];

test.before(async () => {
  cl = await startCluster({ nodes: 3, env: { WORKFLOW_RETRY_BASE_MS: '50', WORKFLOW_RETRY_MAX_MS: '100' } });
  nodes = cl.nodes;
  // Every node has its share before the tests place anything.
  for (const n of nodes) await waitFor(() => n.ctx.cluster!.shards.ownedShards().size >= 5, 15_000);
  lb = await TcpBalancer.start(nodes.map(portOf));
});

test.after(async () => {
  await stopAll(...agents);
  await lb.close();
  await cl.stop();
});

const portOf = (n: ClusterNodeServer) => Number(new URL(n.url).port);
const ownerOn = (node: ClusterNodeServer): TestUser => ({ ...cl.owner, api: cl.as(node) });
const runKey = (runId: string) => `${WORKFLOW_RUN_KIND}:${runId}`;
/** The node that holds the actor `key` now. */
const holderOf = (key: string) => nodes.find((n) => n.ctx.cluster!.placement.isLocal(key));
const snapshots = () => nodes[0]!.ctx.store.collection<SnapshotDoc>('actor_snapshots');

/** A workflow whose one step waits `ms` (retried once when interrupted). */
const waiting = (ms: number) => ({ steps: [{ id: 'wait', name: 'wait', action: 'delay', params: { ms }, onError: 'retry', retries: 2 }] });

/** Starts runs through `via` until one lives on a node other than `via`; returns it and its holder. */
async function runElsewhere(via: ClusterNodeServer, wf: string, not?: ClusterNodeServer): Promise<{ runId: string; holder: ClusterNodeServer }> {
  for (;;) {
    const runId = await startRun(ownerOn(via), wf);
    const holder = holderOf(runKey(runId));
    if (holder && holder !== via && holder !== not) return { runId, holder };
  }
}

test('a run started on one node lives on the owner of its shard; the others read and cancel it there', async () => {
  const [n1, n2] = nodes as [ClusterNodeServer, ClusterNodeServer];
  const wf = await createWorkflow(ownerOn(n1), n1.ctx.defaultWorkspace._id, waiting(60_000));
  const { runId, holder } = await runElsewhere(n1, wf);
  // Only its holder has the actor in memory.
  await waitFor(() => holder.ctx.actors.peek(WORKFLOW_RUN_KIND, runId));
  for (const n of nodes) if (n !== holder) assert.is(n.ctx.actors.peek(WORKFLOW_RUN_KIND, runId), undefined, `${n.nodeId} holds ${runId} too`);
  // Read through every node: the step is running (the live state of the holder).
  for (const n of nodes) await waitRun(ownerOn(n), wf, runId, (run) => run.steps.wait?.status === 'running');
  const via = holder === n2 ? n1 : n2;
  const cancelled = await cl.as(via).post(`/api/workflows/${wf}/runs/${runId}/cancel`, {});
  assert.is(cancelled.status, 200, cancelled.text);
  assert.is(cancelled.body.status, 'cancelled');
  const again = await cl.as(via).post(`/api/workflows/${wf}/runs/${runId}/cancel`, {});
  assert.is(again.status, 409, again.text);
  assert.is(again.body.error.code, 'run_ended');
  await waitFor(async () => (await n1.ctx.c.workflowRuns.findById(runId))?.status === 'cancelled');
});

test('GET /api/admin/actors on any node lists the actors of every node', async () => {
  const [n1, n2, n3] = nodes as [ClusterNodeServer, ClusterNodeServer, ClusterNodeServer];
  const wf = await createWorkflow(ownerOn(n1), n1.ctx.defaultWorkspace._id, waiting(60_000));
  const { runId, holder } = await runElsewhere(n1, wf);
  const viewer = holder === n3 ? n2 : n3;
  const r = await cl.as(viewer).get('/api/admin/actors?kind=workflow-run');
  assert.is(r.status, 200, r.text);
  const listed = r.body.actors.find((a: any) => a.id === runId);
  assert.ok(listed, `${runId} is not listed by ${viewer.nodeId}: ${r.text}`);
  assert.is(listed.node, holder.nodeId);
  // One actor, inspected through a node that does not hold it, is the holder's live one.
  const one = await cl.as(viewer).get(`/api/admin/actors/${encodeURIComponent(`workflow-run:${runId}`)}`);
  assert.is(one.status, 200, one.text);
  assert.is(one.body.actor.live, true);
  await cl.as(viewer).post(`/api/workflows/${wf}/runs/${runId}/cancel`, {});
});

test("a stale owner's snapshot write is refused, and that node stops acting for the shard", async () => {
  const [n1] = nodes as [ClusterNodeServer];
  const wf = await createWorkflow(ownerOn(n1), n1.ctx.defaultWorkspace._id, waiting(60_000));
  const { runId, holder } = await runElsewhere(n1, wf);
  const key = runKey(runId);
  const placement = holder.ctx.cluster!.placement;
  const shard = placement.shardOf(key);
  await waitRun(ownerOn(holder), wf, runId, (run) => run.steps.wait?.status === 'running');
  await holder.ctx.actors.flush();
  // Another owner takes the actor over without the holder knowing (it paused, say): a new epoch
  // from the cluster's counter, stamped on the actor's snapshot.
  const counter = (await holder.ctx.c.clusterShards.findOneAndUpdate({ _id: EPOCH_COUNTER_ID }, { $inc: { next: 1 } })) as EpochCounterDoc;
  const newer = { shard, epoch: counter.next };
  assert.ok(newer.epoch > placement.fenceFor(key)!.epoch);
  await claimDocument(snapshots(), key, newer);
  await claimDocument(holder.ctx.c.workflowRuns, runId, newer);
  const before = (await snapshots().findById(key))!;
  // The holder still thinks it owns the run; cancelling it changes its actor, whose write is refused.
  const r = await cl.as(holder).post(`/api/workflows/${wf}/runs/${runId}/cancel`, {});
  assert.is(r.status, 200, r.text);
  await waitFor(() => !holder.ctx.cluster!.shards.isOwner(shard));
  const after = (await snapshots().findById(key))!;
  assert.equal(after.fence, newer);
  assert.is(after.snapshot, before.snapshot, 'the stale write did not land');
  // Nor the end of the run on its record (the run's owned document).
  await holder.ctx.actors.flush();
  assert.is((await holder.ctx.c.workflowRuns.findById(runId))!.status, 'running');
  // Refused in the store (the snapshot, or the run's record, whichever came first), not merely skipped.
  assert.ok(holder.logs.some((l) => /a snapshot write was refused|a workflow run's end was refused/.test(l)), 'a refusal is logged');
});

test("a stale owner's repair of a run's record is refused: the newer owner's record stands", async () => {
  const [n1] = nodes as [ClusterNodeServer];
  const placement = n1.ctx.cluster!.placement;
  // A record of a run in a shard n1 owns that never got a snapshot (its start was lost): resuming
  // the shard repairs it as failed.
  let runId = '';
  for (let i = 0; !placement.isLocal(runKey(runId)); i++) runId = `never-started-${i}`;
  const shard = placement.shardOf(runKey(runId));
  await n1.ctx.c.workflowRuns.insertOne({
    _id: runId,
    workflowId: 'wf-gone',
    workspaceId: n1.ctx.defaultWorkspace._id,
    status: 'running',
    startedAt: new Date().toISOString(),
    completedAt: null,
    error: null,
    startedBy: { type: 'person', userId: 'u', did: 'did:key:z' },
  });
  // Another owner took the shard over without n1 knowing (it paused, say) and claimed the record.
  const counter = (await n1.ctx.c.clusterShards.findOneAndUpdate({ _id: EPOCH_COUNTER_ID }, { $inc: { next: 1 } })) as EpochCounterDoc;
  const newer = { shard, epoch: counter.next };
  assert.ok(newer.epoch > placement.fenceFor(runKey(runId))!.epoch);
  await claimDocument(n1.ctx.c.workflowRuns, runId, newer);
  // n1 resumes the shard (as after taking it) and repairs the record it thinks it owns.
  await (n1.ctx.workflows as unknown as { resume(shard: number): Promise<void> }).resume(shard);
  const record = (await n1.ctx.c.workflowRuns.findById(runId))!;
  assert.equal([record.status, record.fence], ['running', newer], 'the stale repair did not land');
  assert.ok(n1.logs.some((l) => l.includes("a repair of a workflow run's record was refused")), 'the refusal is logged');
  await waitFor(() => !n1.ctx.cluster!.shards.isOwner(shard));
  await n1.ctx.c.workflowRuns.deleteOne({ _id: runId });
});

test('a node stopped abruptly: its shards are taken within the lease, its running run resumes elsewhere, its agents reconnect to the others', async () => {
  const [n1] = nodes as [ClusterNodeServer];
  // Three agents through the balancer: one on each node.
  const mine: StewardAgent[] = [];
  for (let i = 0; i < 3; i++) {
    const agent = new StewardAgent({
      url: lb.url,
      keys: generateKeyPair(),
      name: `roamer-${i}`,
      version: '1.0.0',
      capabilities: ['file_access'],
      reconnect: { initialDelayMs: 50, maxDelayMs: 300 },
    }).start();
    agents.push(agent);
    mine.push(agent);
    await approve(ownerOn(n1), agent);
    await agent.waitFor('ready');
  }
  const wf = await createWorkflow(ownerOn(n1), n1.ctx.defaultWorkspace._id, waiting(3000));
  const { runId, holder: victim } = await runElsewhere(n1, wf);
  await waitRun(ownerOn(n1), wf, runId, (run) => run.steps.wait?.status === 'running');
  await victim.ctx.actors.flush();
  const theirs = mine.filter((a) => victim.ctx.agentPush.isOnline(a.did));
  assert.ok(theirs.length > 0, 'an agent is connected to the victim');
  const owned = [...victim.ctx.cluster!.shards.ownedShards().keys()];
  const survivors = nodes.filter((n) => n !== victim);

  // The crash: no release, no goodbye. Its store, its bus and its agents' connections are cut.
  victim.faults.add({ collection: '*', op: '*', mode: 'fail', times: Infinity });
  await victim.ctx.cluster!.bus.close();
  lb.down(portOf(victim));

  // Within the lease (and a renewal round) every one of its shards has another owner.
  await waitFor(() => owned.every((s) => survivors.some((n) => n.ctx.cluster!.shards.isOwner(s))), 15_000, 50);
  // The run resumes on the new owner and completes (its interrupted attempt retried there).
  const done = await waitRun(ownerOn(n1), wf, runId, (run) => run.status !== 'running', 20_000);
  assert.is(done.status, 'completed', JSON.stringify(done));
  assert.ok(done.steps.wait.attempts >= 2, `attempts: ${done.steps.wait.attempts}`);
  // Its agents are back, on the others, and every survivor sees them online.
  for (const agent of theirs) {
    await waitFor(() => survivors.some((n) => n.ctx.agentPush.isOnline(agent.did)), 15_000);
    for (const n of survivors) await waitFor(() => n.ctx.agents.isOnline(agent.did), 15_000);
  }
});

test.run();
