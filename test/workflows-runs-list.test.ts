/**
 * Runs across workflows (GET /api/runs), bulk cancel (POST /api/runs/cancel) and a run's timeline
 * (GET /api/workflows/{id}/runs/{runId}/timeline), for every role, with runs the test starts,
 * fails and cancels itself; the timeline's retried step is performed by a real SDK agent.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { client, http, waitFor, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { isError, makeWorkspace, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { sessionAgent, type SessionAgent } from './channels-helpers.js';
import { createWorkflow, ended, startRun, waitRun } from './workflows-helpers.js';
import type { StewardAgent } from '../src/agent/index.js';

const test = suite('workflows: runs across workflows, bulk cancel, timeline');
let s: TestServer;
let owner: TestUser;
let wsA: { id: string; slug: string };
let wsB: { id: string; slug: string };
let adminA: TestUser;
let operatorA: TestUser;
let memberA: TestUser;
let operatorB: TestUser;
let globalAdmin: TestUser;
let outsider: TestUser;
let botA: SessionAgent;
let flaky: StewardAgent;
let flakyCalls = 0;

const delay = (id: string, ms: number, extra: Record<string, unknown> = {}) => ({ id, name: id, action: 'delay', params: { ms }, ...extra });
const postTo = (id: string, channelId: string) => ({ id, name: id, action: 'channel.post', params: { channelId, content: 'hello' } });

/** Runs this suite made, by name, for the listing checks. */
const runs: Record<string, { runId: string; workflowId: string }> = {};
let wfA1: string;
let wfA2: string;
let wfLong: string;
let wfB: string;

test.before(async () => {
  ({ s, owner } = await startWithOwner({ WORKFLOW_RETRY_BASE_MS: '1', WORKFLOW_RETRY_MAX_MS: '5' }));
  wsA = await makeWorkspace(owner, 'Runs A');
  wsB = await makeWorkspace(owner, 'Runs B');
  adminA = await makeUser(s, { workspaces: { [wsA.id]: 'admin' } });
  operatorA = await makeUser(s, { workspaces: { [wsA.id]: 'operator' } });
  memberA = await makeUser(s, { workspaces: { [wsA.id]: 'member' } });
  operatorB = await makeUser(s, { workspaces: { [wsB.id]: 'operator' } });
  globalAdmin = await makeUser(s, { isAdmin: true, role: 'admin' });
  outsider = await makeUser(s);
  botA = await sessionAgent(s, 'runs-bot', wsA.id);
  // Fails its first two intents, then answers.
  flaky = await readyAgent(s, owner, {
    workspace: wsA.id,
    capabilities: ['api_call'],
    onIntent: async () => {
      flakyCalls += 1;
      if (flakyCalls <= 2) throw new Error(`tool exploded (${flakyCalls})`);
      return { ok: flakyCalls };
    },
  });
  const g = await owner.api.post('/api/grants', { userDid: operatorA.user.did, agentDid: flaky.did, capabilities: ['api_call'], expiresAt: null });
  assert.is(g.status, 201, g.text);

  wfA1 = await createWorkflow(adminA, wsA.id, { steps: [delay('a', 1)] }, 'quick');
  wfA2 = await createWorkflow(adminA, wsA.id, { steps: [postTo('a', 'no-such-channel')] }, 'broken');
  wfLong = await createWorkflow(adminA, wsA.id, { steps: [delay('a', 1), delay('long', 600_000, { dependsOn: ['a'] })] }, 'long');
  wfB = await createWorkflow(owner, wsB.id, { steps: [delay('a', 1)] }, 'other');

  // In start order; each waits for the one before, so their start times are ordered.
  const run = async (name: string, who: TestUser, wf: string, until = ended) => {
    // Each run starts in a later millisecond than the one before (start times are kept to the millisecond).
    const before = Date.now();
    await waitFor(() => Date.now() > before, 1000, 1);
    const runId = await startRun(who, wf);
    await waitRun(who, wf, runId, until);
    runs[name] = { runId, workflowId: wf };
  };
  await run('completed', operatorA, wfA1);
  await run('failed', operatorA, wfA2);
  await run('byAdmin', adminA, wfA1);
  await run('inB', operatorB, wfB);
  await run('running', operatorA, wfLong, (r) => r.steps.long.status === 'running');
  await run('cancelled', operatorA, wfLong, (r) => r.steps.long.status === 'running');
  const c = await operatorA.api.post(`/api/workflows/${wfLong}/runs/${runs.cancelled!.runId}/cancel`);
  assert.is(c.status, 200, c.text);
});

test.after(async () => {
  await stopAll(flaky);
  await s.stop(true);
});

const ids = (r: { body: { runs: Array<{ runId: string }> } }) => r.body.runs.map((x) => x.runId);
const order = (...names: string[]) => names.map((n) => runs[n]!.runId);

test('GET /api/runs: the runs of every workflow the caller may read, newest first, with the workflow name', async () => {
  const r = await memberA.api.get('/api/runs');
  assert.is(r.status, 200, r.text);
  assert.equal(ids(r), order('cancelled', 'running', 'byAdmin', 'failed', 'completed'));
  assert.equal({ total: r.body.total, page: r.body.page, pageSize: r.body.pageSize, totalPages: r.body.totalPages }, { total: 5, page: 1, pageSize: 20, totalPages: 1 });
  const failed = r.body.runs.find((x: any) => x.runId === runs.failed!.runId);
  assert.equal(Object.keys(failed).sort(), ['completedAt', 'error', 'runId', 'startedAt', 'startedBy', 'status', 'workflowId', 'workflowName']);
  assert.is(failed.workflowName, 'broken');
  assert.is(failed.status, 'failed');
  assert.match(failed.error, /^step 'a' failed: /);
  assert.equal(failed.startedBy, { type: 'person', userId: operatorA.user._id, did: operatorA.user.did });

  // An agent's session sees the runs of its workspaces; B's operator only B's; a global admin all.
  assert.equal(ids(await botA.api.get('/api/runs')), ids(r));
  assert.equal(ids(await operatorB.api.get('/api/runs')), order('inB'));
  assert.equal(ids(await globalAdmin.api.get('/api/runs')), order('cancelled', 'running', 'inB', 'byAdmin', 'failed', 'completed'));
  assert.equal(ids(await owner.api.get('/api/runs')), ids(await globalAdmin.api.get('/api/runs')));
  const none = await outsider.api.get('/api/runs');
  assert.is(none.status, 200, none.text);
  assert.equal([none.body.runs, none.body.total], [[], 0]);
  isError(await http(s.url, 'GET', '/api/runs'), 401);
});

test('GET /api/runs: filters by status, workspace, workflow, starter and start time; pages', async () => {
  const get = async (who: TestUser, query: string) => {
    const r = await who.api.get(`/api/runs?${query}`);
    assert.is(r.status, 200, `${query}: ${r.text}`);
    return ids(r);
  };
  assert.equal(await get(memberA, 'status=failed'), order('failed'));
  assert.equal(await get(memberA, 'status=cancelled'), order('cancelled'));
  assert.equal(await get(memberA, 'status=running'), order('running'));
  assert.equal(await get(globalAdmin, `workspace=${wsB.slug}`), order('inB'));
  assert.equal(await get(globalAdmin, `workspace=${wsA.id}&status=completed`), order('byAdmin', 'completed'));
  assert.equal(await get(memberA, `workflowId=${wfA1}`), order('byAdmin', 'completed'));
  assert.equal(await get(memberA, `startedBy=${encodeURIComponent(adminA.user.did!)}`), order('byAdmin'));
  const failedAt = (await memberA.api.get(`/api/workflows/${wfA2}/runs/${runs.failed!.runId}`)).body.startedAt as string;
  assert.equal(await get(memberA, `from=${encodeURIComponent(failedAt)}`), order('cancelled', 'running', 'byAdmin', 'failed'));
  assert.equal(await get(memberA, `to=${encodeURIComponent(failedAt)}`), order('completed'));
  assert.equal(await get(memberA, 'from=2000-01-01&to=2000-01-02'), []);

  const p2 = await memberA.api.get('/api/runs?page=2&pageSize=2');
  assert.equal(ids(p2), order('byAdmin', 'failed'));
  assert.equal([p2.body.total, p2.body.page, p2.body.pageSize, p2.body.totalPages], [5, 2, 2, 3]);

  // A workspace or workflow the caller may not see answers 404, as one that does not exist.
  isError(await memberA.api.get(`/api/runs?workspace=${wsB.slug}`), 404, 'not_found');
  isError(await memberA.api.get('/api/runs?workspace=nope'), 404, 'not_found');
  isError(await memberA.api.get(`/api/runs?workflowId=${wfB}`), 404, 'not_found');
  isError(await botA.api.get(`/api/runs?workflowId=${wfB}`), 404, 'not_found');
  // Bad input.
  isError(await memberA.api.get('/api/runs?status=lost'), 400);
  isError(await memberA.api.get('/api/runs?pageSize=101'), 400);
  isError(await memberA.api.get('/api/runs?page=0'), 400);
  isError(await memberA.api.get('/api/runs?from=yesterday'), 400);
});

test('POST /api/runs/cancel: operator or higher on each run; answers per run what happened; audited', async () => {
  const a1 = await startRun(operatorA, wfLong);
  const a2 = await startRun(operatorA, wfLong);
  const b1 = await startRun(operatorB, await createWorkflow(owner, wsB.id, { steps: [delay('long', 600_000)] }, 'long-b'));
  await waitRun(operatorA, wfLong, a2, (r) => r.steps.long?.status === 'running');

  // Refusals first: nothing is cancelled by them.
  isError(await http(s.url, 'POST', '/api/runs/cancel', { json: { runIds: [a1] } }), 401);
  isError(await botA.api.post('/api/runs/cancel', { runIds: [a1] }), 403, 'forbidden');
  isError(await operatorA.api.post('/api/runs/cancel', { runIds: [] }), 400);
  isError(await operatorA.api.post('/api/runs/cancel', { runIds: Array.from({ length: 101 }, (_, i) => `r${i}`) }), 400);
  isError(await operatorA.api.post('/api/runs/cancel', {}), 400);
  const m = await memberA.api.post('/api/runs/cancel', { runIds: [a1, b1] });
  assert.is(m.status, 200, m.text);
  assert.equal(m.body.results, [
    { runId: a1, outcome: 'forbidden' },
    { runId: b1, outcome: 'not_found' },
  ]);
  const o = await outsider.api.post('/api/runs/cancel', { runIds: [a1] });
  assert.equal(o.body.results, [{ runId: a1, outcome: 'not_found' }]);
  assert.is((await operatorA.api.get(`/api/workflows/${wfLong}/runs/${a1}`)).body.status, 'running');

  const r = await operatorA.api.post('/api/runs/cancel', { runIds: [a1, a2, runs.completed!.runId, b1, 'no-such-run', a1] });
  assert.is(r.status, 200, r.text);
  assert.equal(r.body.results, [
    { runId: a1, outcome: 'cancelled' },
    { runId: a2, outcome: 'cancelled' },
    { runId: runs.completed!.runId, outcome: 'already_finished' },
    { runId: b1, outcome: 'not_found' },
    { runId: 'no-such-run', outcome: 'not_found' },
  ]);
  for (const id of [a1, a2]) {
    const run = await waitRun(memberA, wfLong, id, ended);
    assert.is(run.status, 'cancelled');
    assert.is(run.error, `cancelled by ${operatorA.user.did}`);
    assert.ok(await s.ctx.c.audit.findOne({ action: 'workflow.run.cancel', target: id, actor: operatorA.user.did }), `cancel of ${id} audited`);
  }
  assert.is((await operatorB.api.get(`/api/runs?status=running`)).body.runs[0].runId, b1, "B's run was left alone");
  const again = await operatorA.api.post('/api/runs/cancel', { runIds: [a1] });
  assert.equal(again.body.results, [{ runId: a1, outcome: 'already_finished' }]);

  // A global admin cancels anywhere.
  const g = await globalAdmin.api.post('/api/runs/cancel', { runIds: [b1] });
  assert.equal(g.body.results, [{ runId: b1, outcome: 'cancelled' }]);
  assert.ok(await s.ctx.c.audit.findOne({ action: 'workflow.run.cancel', target: b1, actor: globalAdmin.user.did }));
});

test("timeline: a retried agent step's attempts with start, end, error and retry wait; skipped and cancelled steps", async () => {
  const wf = await createWorkflow(adminA, wsA.id, {
    steps: [
      { id: 'ask', name: 'ask', agentDid: flaky.did, action: 'api_call', params: {}, onError: 'retry', retries: 3 },
      delay('never', 1, { dependsOn: ['ask'], condition: 'false' }),
      delay('wait', 600_000, { dependsOn: ['ask'] }),
    ],
  });
  const runId = await startRun(operatorA, wf);
  await waitRun(memberA, wf, runId, (r) => r.steps.wait.status === 'running');
  const c = await operatorA.api.post(`/api/workflows/${wf}/runs/${runId}/cancel`);
  assert.is(c.status, 200, c.text);

  const r = await memberA.api.get(`/api/workflows/${wf}/runs/${runId}/timeline`);
  assert.is(r.status, 200, r.text);
  const t = r.body;
  assert.equal(Object.keys(t).sort(), ['finishedAt', 'runId', 'startedAt', 'status', 'steps']);
  assert.is(t.runId, runId);
  assert.is(t.status, 'cancelled');
  assert.ok(t.finishedAt >= t.startedAt);
  assert.equal(t.steps.map((x: any) => x.stepId), ['ask', 'never', 'wait']);

  const ask = t.steps[0].attempts;
  assert.equal(ask.map((x: any) => [x.attempt, x.outcome]), [[1, 'failed'], [2, 'failed'], [3, 'succeeded']]);
  assert.match(ask[0].error, /tool exploded \(1\)/);
  assert.match(ask[1].error, /tool exploded \(2\)/);
  assert.is(ask[2].error, null);
  assert.is(ask[2].retryAt, null);
  for (let i = 0; i < 2; i++) {
    assert.ok(ask[i].finishedAt >= ask[i].startedAt);
    assert.ok(ask[i].retryAt >= ask[i].finishedAt, 'the retry wait starts when the attempt failed');
    assert.ok(ask[i + 1].startedAt >= ask[i].finishedAt, 'the next attempt starts after this one');
  }
  assert.equal(t.steps[1].attempts.map((x: any) => x.outcome), ['skipped']);
  const wait = t.steps[2].attempts;
  assert.equal(wait.map((x: any) => [x.attempt, x.outcome, x.finishedAt]), [[1, 'cancelled', t.finishedAt]]);
  assert.is(flakyCalls, 3, 'the agent got one intent per attempt');

  // Who may see it: as the run.
  assert.equal((await botA.api.get(`/api/workflows/${wf}/runs/${runId}/timeline`)).body, t);
  assert.equal((await globalAdmin.api.get(`/api/workflows/${wf}/runs/${runId}/timeline`)).body, t);
  isError(await outsider.api.get(`/api/workflows/${wf}/runs/${runId}/timeline`), 404, 'not_found');
  isError(await operatorB.api.get(`/api/workflows/${wf}/runs/${runId}/timeline`), 404, 'not_found');
  isError(await memberA.api.get(`/api/workflows/${wfA1}/runs/${runId}/timeline`), 404, 'not_found');
  isError(await memberA.api.get(`/api/workflows/${wf}/runs/no-such-run/timeline`), 404, 'not_found');
  isError(await http(s.url, 'GET', `/api/workflows/${wf}/runs/${runId}/timeline`), 401);
});

test('timeline: a failed run, and the runs list and timeline after a restart', async () => {
  const failedRun = runs.failed!;
  const t = (await memberA.api.get(`/api/workflows/${failedRun.workflowId}/runs/${failedRun.runId}/timeline`)).body;
  assert.is(t.status, 'failed');
  assert.equal(t.steps[0].attempts.map((x: any) => [x.attempt, x.outcome, x.retryAt]), [[1, 'failed', null]]);
  assert.match(t.steps[0].attempts[0].error, /no-such-channel/);

  const before = (await memberA.api.get('/api/runs')).body;
  await stopAll(flaky);
  s = await s.restart();
  const api = client(s.url, memberA.token);
  assert.equal((await api.get('/api/runs')).body.runs.map((x: any) => x.runId), before.runs.map((x: any) => x.runId));
  assert.equal((await api.get(`/api/workflows/${failedRun.workflowId}/runs/${failedRun.runId}/timeline`)).body, t);
});

test.run();
