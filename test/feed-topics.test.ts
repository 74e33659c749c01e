/**
 * The live feed's named topics (/ws/feed, docs/feed.md): presence, registrations, runs, audit and
 * actors, each to the people the matching HTTP route answers and to no one else; `at` on every
 * frame (FeedClient fails the run on a frame without it); filters; rights re-checked when a
 * person leaves a workspace.
 *
 * "Never to another" is shown with a sentinel: a later event the other subscriber does receive.
 * A subscriber's frames leave in the order they were published, so a frame it was wrongly sent
 * would have come before the sentinel.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { makeUser, type TestUser } from './fixtures.js';
import { RawAgent, approveRegistration, makeWorkspace, startWithOwner } from './fleet-helpers.js';
import { generateKeyPair } from '../src/domain/did.js';
import { FeedClient, RawAgentSink } from './channels-helpers.js';
import { createWorkflow, ended, startRun, waitRun } from './workflows-helpers.js';

const test = suite('live feed topics');
const ctx = {} as Awaited<ReturnType<typeof startWithOwner>> & {
  a: { id: string; slug: string };
  b: { id: string; slug: string };
  memberA: TestUser;
  memberB: TestUser;
};

test.before(async () => {
  Object.assign(ctx, await startWithOwner({ AGENT_OFFLINE_GRACE_MS: '0', FEED_BATCH_WINDOW_MS: '20' }));
  ctx.a = await makeWorkspace(ctx.owner, 'Feed A');
  ctx.b = await makeWorkspace(ctx.owner, 'Feed B');
  ctx.memberA = await makeUser(ctx.s, { workspaces: { [ctx.a.id]: 'member' } });
  ctx.memberB = await makeUser(ctx.s, { workspaces: { [ctx.b.id]: 'member' } });
});
test.after(async () => {
  await ctx.s.stop(true);
});

async function subscribed(who: TestUser, topic: string, filters: Record<string, unknown> = {}): Promise<FeedClient> {
  const f = await FeedClient.connect(ctx.s.url, who.token);
  f.send({ type: 'subscribe', topic, ...filters });
  const answer = await f.next((x) => (x.type === 'subscribed' && x.topic === topic) || x.type === 'error');
  assert.equal(answer, { type: 'subscribed', topic }, `subscribe to ${topic}: ${JSON.stringify(answer)}`);
  return f;
}

async function refused(who: TestUser, topic: string, filters: Record<string, unknown> = {}): Promise<any> {
  const f = await FeedClient.connect(ctx.s.url, who.token);
  f.send({ type: 'subscribe', topic, ...filters });
  const answer = await f.next((x) => x.type === 'error' || x.type === 'subscribed');
  f.close();
  return answer;
}

test('presence: agents online and offline reach the members of their workspace and global admins, no one else', async () => {
  const { s, owner, a, b, memberA, memberB } = ctx;
  const admin = await subscribed(owner, 'presence');
  const fa = await subscribed(memberA, 'presence');
  const fb = await subscribed(memberB, 'presence');
  const onlyB = await subscribed(owner, 'presence', { workspaceId: b.slug });
  const agentA = await RawAgentSink.ready(s, owner, 'presence-a', a.slug);
  const online = await fa.next((x) => x.type === 'presence' && x.did === agentA.did);
  assert.equal(online, { type: 'presence', did: agentA.did, workspaceIds: [a.id], online: true });
  assert.ok(await admin.next((x) => x.type === 'presence' && x.did === agentA.did && x.online));
  agentA.close();
  assert.equal(await fa.next((x) => x.type === 'presence' && x.did === agentA.did), { type: 'presence', did: agentA.did, workspaceIds: [a.id], online: false });

  // The sentinel: an agent of workspace B, which memberB and the narrowed subscription do see.
  const agentB = await RawAgentSink.ready(s, owner, 'presence-b', b.slug);
  for (const f of [fb, onlyB]) {
    await f.next((x) => x.type === 'presence' && x.did === agentB.did && x.online);
    assert.not.ok(f.frames.some((x) => x.did === agentA.did), 'nothing about an agent of another workspace');
  }
  // ...and memberA never hears of it: its next frame is about agentA's return.
  const agentA2 = await RawAgentSink.ready(s, owner, 'presence-a2', a.slug);
  await fa.next((x) => x.type === 'presence' && x.did === agentA2.did);
  assert.not.ok(fa.frames.some((x) => x.did === agentB.did), 'nothing about an agent of another workspace');

  // A workspace the person does not see is refused as one that does not exist.
  const r = await refused(memberA, 'presence', { workspaceId: b.slug });
  assert.equal(r, { type: 'error', code: 'not_found', message: `workspace ${b.slug} not found`, topic: 'presence' });
  assert.is((await refused(memberA, 'presence', { workspaceId: 'nowhere' })).code, 'not_found');
  assert.is((await refused(memberA, 'presence', { workspaceId: 42 })).code, 'invalid_filter');
  assert.is((await refused(memberA, 'nothing-like-it')).code, 'unknown_topic');
  for (const f of [admin, fa, fb, onlyB]) f.close();
  agentB.close();
  agentA2.close();
});

test('registrations: new and decided, for global admins only; an agent session gets no feed at all', async () => {
  const { s, owner, memberA } = ctx;
  const f = await subscribed(owner, 'registrations');
  assert.equal(await refused(memberA, 'registrations'), { type: 'error', code: 'forbidden', message: "topic 'registrations' is for global admins", topic: 'registrations' });
  const agent = new RawAgent(s.url);
  await agent.authenticate({ name: 'registered' });
  const registration = await agent.next('registration');
  const pending = await f.next((x) => x.type === 'registration' && x.did === agent.keys.did);
  assert.equal(pending, { type: 'registration', id: registration.registrationId, did: agent.keys.did, name: 'registered', status: 'pending' });
  await approveRegistration(owner, registration.registrationId, ['file_access']);
  assert.equal(await f.next((x) => x.type === 'registration' && x.did === agent.keys.did), { ...pending, status: 'approved' });
  const ready = await agent.acceptNextOffer();
  const asAgent = new FeedClient(s.url);
  await asAgent.open();
  asAgent.send({ type: 'auth', token: ready.session.token });
  assert.is((await asAgent.waitClosed()).code, 4403);
  agent.close();
  f.close();
});

test('runs: run and step transitions to members of the run\'s workspace; a workflow of another workspace is not found', async () => {
  const { owner, a, b, memberA, memberB } = ctx;
  const definition = { steps: [{ id: 'wait', name: 'wait', action: 'delay', params: { ms: 1 } }] };
  const wfA = await createWorkflow(owner, a.id, definition);
  const wfB = await createWorkflow(owner, b.id, definition);
  const fa = await subscribed(memberA, 'runs', { workflowId: wfA });
  const fb = await subscribed(memberB, 'runs');
  const runA = await startRun(owner, wfA);
  await waitRun(owner, wfA, runA, ended);
  // Frames about the run and about its step fold to the latest within a window: the last of each is certain.
  const seen: any[] = [];
  for (;;) {
    const x = await fa.next('run');
    seen.push(x);
    assert.is(x.runId, runA);
    if (x.stepId === undefined && x.status !== 'running') break;
  }
  assert.equal(seen[seen.length - 1], { type: 'run', workflowId: wfA, runId: runA, status: 'completed' });
  const steps = seen.filter((x) => x.stepId === 'wait');
  assert.ok(steps.length >= 1, 'the step\'s transitions');
  assert.equal(steps[steps.length - 1], { type: 'run', workflowId: wfA, runId: runA, status: steps[steps.length - 1].status, stepId: 'wait', attempt: 1, stepStatus: 'completed' });
  const folded = fa.wire.filter((w) => w.type === 'batch').reduce((n, w) => n + w.folded, 0);
  // started, the step running and completed, the run completed: what was not received was folded.
  assert.is(seen.length + folded, 4, `${seen.length} frames and ${folded} folded`);

  const runB = await startRun(owner, wfB);
  await fb.next((x) => x.type === 'run' && x.runId === runB);
  assert.not.ok(fb.frames.some((x) => x.runId === runA), 'nothing about a run of another workspace');
  assert.not.ok(fa.frames.some((x) => x.runId === runB), 'nothing about another workflow');
  assert.equal(await refused(memberB, 'runs', { workflowId: wfA }), { type: 'error', code: 'not_found', message: `no workflow ${wfA}`, topic: 'runs' });
  fa.close();
  fb.close();
});

test('audit: a live tail for global admins, with the route\'s filters', async () => {
  const { owner, memberA } = ctx;
  assert.is((await refused(memberA, 'audit')).code, 'forbidden');
  const all = await subscribed(owner, 'audit');
  const members = await subscribed(owner, 'audit', { action: 'workspace.member.*' });
  const created = await makeWorkspace(owner, 'Audited');
  const entry = (await all.next((x) => x.type === 'audit' && x.entry.target === created.id)).entry;
  const listed = await owner.api.get(`/api/audit?action=workspace.create&target=${created.id}`);
  assert.equal(entry, listed.body.entries[0], 'the entry as GET /api/audit shows it');
  const extra = await makeUser(ctx.s);
  const added = await owner.api.post(`/api/workspaces/${created.id}/members`, { userDid: extra.user.did, role: 'member' });
  assert.is(added.status, 201, added.text);
  const first = await members.next('audit');
  assert.is(first.entry.action, 'workspace.member.add', 'the workspace.create entry did not pass the filter');
  all.close();
  members.close();
});

test('actors: narrowed by kind and by id', async () => {
  const { s, owner, a } = ctx;
  assert.is((await refused(ctx.memberA, 'actors')).code, 'forbidden');
  const keys = generateKeyPair();
  const byId = await subscribed(owner, 'actors', { id: keys.did });
  const runsOnly = await subscribed(owner, 'actors', { kind: 'workflow-run' });
  const other = await RawAgentSink.ready(s, owner, 'actors-other');
  const raw = new RawAgent(s.url, keys);
  await raw.authenticate({ name: 'actors-mine' });
  const reg = await raw.next('registration');
  await approveRegistration(owner, reg.registrationId, ['file_access']);
  await raw.acceptNextOffer();
  const mine = await byId.next((x) => x.type === 'actor.transition' && x.event === 'CONNECTED');
  assert.equal(Object.keys(mine).sort(), ['actorId', 'event', 'from', 'kind', 'state', 'type']);
  assert.is(mine.actorId, keys.did);
  assert.ok(byId.frames.every((x) => x.actorId === keys.did), 'only the agent asked for');

  const wf = await createWorkflow(owner, a.id, { steps: [{ id: 'w', name: 'w', action: 'delay', params: { ms: 1 } }] });
  const run = await startRun(owner, wf);
  await runsOnly.next((x) => x.type === 'actor.transition' && x.actorId === run);
  assert.ok(runsOnly.frames.every((x) => x.kind === 'workflow-run'), 'no agent transitions');
  other.close();
  raw.close();
  byId.close();
  runsOnly.close();
});

test('rights are re-checked when a person leaves a workspace', async () => {
  const { s, owner, a, b } = ctx;
  const both = await makeUser(s, { workspaces: { [a.id]: 'member', [b.id]: 'member' } });
  const wfA = await createWorkflow(owner, a.id, { steps: [{ id: 'w', name: 'w', action: 'delay', params: { ms: 1 } }] });
  const f = await subscribed(both, 'presence');
  f.send({ type: 'subscribe', topic: 'runs', workflowId: wfA });
  await f.next((x) => x.type === 'subscribed' && x.topic === 'runs');
  const left = await owner.api.del(`/api/workspaces/${a.id}/members/${both.user._id}`);
  assert.is(left.status, 200, left.text);
  assert.equal(await f.next((x) => x.type === 'unsubscribed'), { type: 'unsubscribed', topic: 'runs', reason: 'access_lost' });
  // presence stays, narrowed to workspace B: an agent of A comes online, then one of B.
  const agentA = await RawAgentSink.ready(s, owner, 'left-a', a.slug);
  const agentB = await RawAgentSink.ready(s, owner, 'left-b', b.slug);
  await f.next((x) => x.type === 'presence' && x.did === agentB.did);
  assert.not.ok(f.frames.some((x) => x.did === agentA.did), 'nothing about the workspace it left');
  agentA.close();
  agentB.close();
  f.close();
});

test.run();
