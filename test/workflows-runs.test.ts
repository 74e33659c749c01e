import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { client, waitFor, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { isError, makeWorkspace, startWithOwner } from './people-helpers.js';
import { createWorkflow, ended, startRun, waitRun } from './workflows-helpers.js';
import type { UserPrincipal } from '../src/domain/principal.js';

const test = suite('workflows: runs');
let s: TestServer;
let owner: TestUser;
let ws: { id: string; slug: string };
let admin: TestUser;
let operator: TestUser;
let member: TestUser;
let outsider: TestUser;

interface Post {
  author: string;
  channelId: string;
  content: string;
  at: number;
}
const posts: Post[] = [];
/** Channel ids whose posts wait until `release(channelId)`. */
const held = new Set<string>();
const releases = new Map<string, () => void>();
const release = (channelId: string) => releases.get(channelId)!();
/** Channel ids whose posts wait until every channel of the group has been entered. */
let barrier: { members: Set<string>; entered: Set<string>; wake: Array<() => void> } | null = null;

function installPoster(server: TestServer) {
  server.ctx.workflows.channelPoster = {
    async post(author: UserPrincipal, channelId: string, content: string) {
      posts.push({ author: author.did, channelId, content, at: Date.now() });
      if (barrier?.members.has(channelId)) {
        const b = barrier;
        b.entered.add(channelId);
        if (b.entered.size === b.members.size) for (const w of b.wake.splice(0)) w();
        else {
          await new Promise<void>((resolve, reject) => {
            const t = setTimeout(() => reject(new Error(`${channelId}: the other branch never started while this one ran`)), 5000);
            b.wake.push(() => {
              clearTimeout(t);
              resolve();
            });
          });
        }
      }
      if (held.has(channelId)) await new Promise<void>((resolve) => releases.set(channelId, resolve));
      if (channelId === 'missing') throw new Error('no channel missing');
      return { messageId: `m-${posts.length}`, channelId, items: [{ name: 'posted', wait: 3 }] };
    },
  };
}

test.before(async () => {
  ({ s, owner } = await startWithOwner({ WORKFLOW_RETRY_BASE_MS: '1', WORKFLOW_RETRY_MAX_MS: '5' }));
  ws = await makeWorkspace(owner, 'Runs');
  admin = await makeUser(s, { workspaces: { [ws.id]: 'admin' } });
  operator = await makeUser(s, { workspaces: { [ws.id]: 'operator' } });
  member = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  outsider = await makeUser(s);
  installPoster(s);
});

test.after(async () => {
  await s.stop(true);
});

const delay = (id: string, ms: unknown, extra: Record<string, unknown> = {}) => ({ id, name: `delay ${id}`, action: 'delay', params: { ms }, ...extra });
const post = (id: string, channelId: string, content: string, extra: Record<string, unknown> = {}) => ({
  id,
  name: `post ${id}`,
  action: 'channel.post',
  params: { channelId, content },
  ...extra,
});

test('run: 202 {runId, status: running} before the steps run; the Run of §2.12; the starter is recorded', async () => {
  const wf = await createWorkflow(admin, ws.id, { steps: [post('a', 'held-1', 'hello')] });
  held.add('held-1');
  const r = await operator.api.post(`/api/workflows/${wf}/run`, { params: { x: 1 } });
  assert.is(r.status, 202, r.text);
  assert.equal(Object.keys(r.body).sort(), ['runId', 'status']);
  assert.is(r.body.status, 'running');
  const runId = r.body.runId;
  const running = await waitRun(member, wf, runId, (run) => run.steps.a.status === 'running');
  assert.is(running.status, 'running');
  assert.is(running.completedAt, null);
  await waitFor(() => releases.has('held-1'));
  assert.is((await member.api.get(`/api/workflows/${wf}/runs/${runId}`)).body.steps.a.status, 'running', 'the step waits for its channel');
  release('held-1');
  const run = await waitRun(member, wf, runId, ended);
  for (const k of ['runId', 'status', 'startedAt', 'completedAt', 'steps']) assert.ok(k in run, `Run has ${k}`);
  assert.is(run.runId, runId);
  assert.is(run.status, 'completed');
  assert.ok(Date.parse(run.completedAt) >= Date.parse(run.startedAt));
  assert.is(run.steps.a.status, 'completed');
  assert.type(run.steps.a.durationMs, 'number');
  assert.equal(run.steps.a.output, { messageId: run.steps.a.output.messageId, channelId: 'held-1', items: [{ name: 'posted', wait: 3 }] });
  assert.equal(run.params, { x: 1 });
  assert.equal(run.startedBy, { type: 'person', userId: operator.user._id, did: operator.user.did });
  assert.is(posts.find((p) => p.channelId === 'held-1')!.author, operator.user.did, 'the step acts as the person who started the run');
  assert.ok(await s.ctx.c.audit.findOne({ action: 'workflow.run', target: wf }));
});

test('diamond: both branches run at the same time; the join starts after both', async () => {
  const wf = await createWorkflow(admin, ws.id, {
    steps: [
      delay('a', 1),
      post('b', 'left', 'left branch', { dependsOn: ['a'] }),
      post('c', 'right', 'right branch', { dependsOn: ['a'] }),
      delay('d', 1, { dependsOn: ['b', 'c'] }),
    ],
  });
  barrier = { members: new Set(['left', 'right']), entered: new Set(), wake: [] };
  const runId = await startRun(operator, wf);
  const run = await waitRun(member, wf, runId, ended);
  barrier = null;
  assert.is(run.status, 'completed', JSON.stringify(run));
  const { a, b, c, d } = run.steps;
  for (const st of [a, b, c, d]) assert.is(st.status, 'completed');
  const t = (x: string) => Date.parse(x);
  // Each branch waited (in the channel stand-in) until the other had started: they overlapped.
  assert.ok(t(b.startedAt) <= t(c.completedAt) && t(c.startedAt) <= t(b.completedAt), 'the branches overlap in time');
  assert.ok(t(a.completedAt) <= t(b.startedAt) && t(a.completedAt) <= t(c.startedAt), 'the branches start after a');
  assert.ok(t(d.startedAt) >= Math.max(t(b.completedAt), t(c.completedAt)), 'd starts after both branches');
});

test('interpolation in a run: every form, nested paths, type kept; params override variables', async () => {
  const before = posts.length;
  const wf = await createWorkflow(admin, ws.id, {
    variables: { channel: 'news', region: 'eu', tags: ['x', 'y'], ms: 999 },
    steps: [
      delay('a', '{{params.ms}}'),
      post('b', '{{variables.channel}}', 'Hi {{params.who}} ({{variables.region}}): waited {{steps.a.output.ms}} ms; tags {{variables.tags}}', {
        dependsOn: ['a'],
      }),
      delay('c', '{{steps.b.output.items[0].wait}}', { dependsOn: ['b'] }),
      post('d', "{{steps.b.output['channelId']}}", '{{steps.b.output.items[0].name}} / {{steps.c.status}} / {{steps.a.output}}', { dependsOn: ['c'] }),
    ],
  });
  const runId = await startRun(operator, wf, { ms: 5, who: 'Ada', region: 'us' });
  const run = await waitRun(member, wf, runId, ended);
  assert.is(run.status, 'completed', JSON.stringify(run));
  assert.equal(run.steps.a.output, { ms: 5 }, '{{params.ms}} stayed a number (a string would fail the delay)');
  assert.equal(run.steps.c.output, { ms: 3 }, 'a nested number from a step output stayed a number');
  const mine = posts.slice(before);
  assert.equal(
    mine.map((p) => [p.channelId, p.content]),
    [
      ['news', 'Hi Ada (us): waited 5 ms; tags ["x","y"]'],
      ['news', 'posted / completed / {"ms":5}'],
    ],
  );
});

test('conditions: true runs, false skips; a step whose dependencies were all skipped is skipped too', async () => {
  const wf = await createWorkflow(admin, ws.id, {
    variables: { mode: 'lite' },
    steps: [
      delay('a', 2),
      delay('b', 1, { dependsOn: ['a'], condition: 'steps.a.output.ms == 2 && params.go' }),
      delay('c', 1, { dependsOn: ['a'], condition: 'steps.a.output.ms > 100' }),
      delay('d', 1, { dependsOn: ['c'] }),
      delay('e', 1, { dependsOn: ['c', 'd'] }),
      delay('f', 1, { dependsOn: ['b', 'c'] }),
      delay('g', 1, { condition: 'variables.mode == "full"' }),
      delay('h', 1, { dependsOn: ['g'], condition: 'true' }),
    ],
  });
  const runId = await startRun(operator, wf, { go: true });
  const run = await waitRun(member, wf, runId, ended);
  assert.is(run.status, 'completed');
  const statuses = Object.fromEntries(Object.entries(run.steps).map(([id, st]: [string, any]) => [id, st.status]));
  assert.equal(statuses, { a: 'completed', b: 'completed', c: 'skipped', d: 'skipped', e: 'skipped', f: 'completed', g: 'skipped', h: 'skipped' });
  assert.is(run.steps.c.durationMs, null);
  assert.is(run.steps.c.output, null);

  const again = await waitRun(member, wf, await startRun(operator, wf, { go: false, mode: 'full' }), ended);
  assert.is(again.steps.b.status, 'skipped');
  assert.is(again.steps.g.status, 'completed', 'the param overrides the variable in conditions too');
  assert.is(again.steps.h.status, 'completed');
});

test('a condition that cannot be evaluated fails its step without retries', async () => {
  const wf = await createWorkflow(admin, ws.id, { steps: [delay('a', 1, { condition: 'params.missing == 1', onError: 'retry' })] });
  const run = await waitRun(member, wf, await startRun(operator, wf), ended);
  assert.is(run.status, 'failed');
  assert.is(run.steps.a.status, 'failed');
  assert.is(run.steps.a.attempts, 0);
  assert.match(run.steps.a.error, /^condition: .*missing/);
  assert.match(run.error, /step 'a' failed: condition:/);
});

test('an unknown action fails the step with a clear error; bad params fail without retries', async () => {
  const wf = await createWorkflow(admin, ws.id, {
    steps: [
      { id: 'x', name: 'x', action: 'teleport', params: {}, onError: 'continue' },
      { id: 'y', name: 'y', action: 'teleport', agentDid: 'did:key:z6MkexampleAgent', params: {}, onError: 'continue' },
      delay('z', -5, { onError: 'retry', retries: 5 }),
    ],
  });
  const run = await waitRun(member, wf, await startRun(operator, wf), ended);
  assert.is(run.steps.x.status, 'failed');
  assert.match(run.steps.x.error, /^unknown action 'teleport': use a capability \(file_access, .*\) to ask agents, or a server action \(channel.post, delay\)/);
  assert.match(run.steps.y.error, /^unknown action 'teleport': an agent step's action is a capability/);
  assert.is(run.steps.z.status, 'failed');
  assert.is(run.steps.z.attempts, 1, 'no retry for params that cannot work');
  assert.match(run.steps.z.error, /delay: params.ms must be a whole number/);
  assert.is(run.status, 'failed');
});

test('a reference to nothing at run time fails the step and names it', async () => {
  const wf = await createWorkflow(admin, ws.id, { steps: [delay('a', '{{params.ms}}')] });
  const run = await waitRun(member, wf, await startRun(operator, wf), ended);
  assert.is(run.status, 'failed');
  assert.is(run.steps.a.error, 'params.ms: {{params.ms}} refers to nothing');
});

test('onError without agents: continue lets dependants run and the run complete; stop cancels the rest', async () => {
  const wf = await createWorkflow(admin, ws.id, {
    steps: [post('a', 'missing', 'x', { onError: 'continue' }), delay('b', 1, { dependsOn: ['a'] })],
  });
  const run = await waitRun(member, wf, await startRun(operator, wf), ended);
  assert.is(run.status, 'completed');
  assert.is(run.steps.a.status, 'failed');
  assert.is(run.steps.a.error, 'no channel missing');
  assert.is(run.steps.b.status, 'completed');

  const stop = await createWorkflow(admin, ws.id, {
    steps: [post('a', 'missing', 'x'), delay('b', 60_000), delay('c', 1, { dependsOn: ['a'] })],
  });
  const failed = await waitRun(member, stop, await startRun(operator, stop), ended);
  assert.is(failed.status, 'failed');
  assert.is(failed.error, "step 'a' failed: no channel missing");
  assert.is(failed.steps.b.status, 'cancelled');
  assert.is(failed.steps.c.status, 'cancelled');
});

test('cancel: operator or higher; the run and its unfinished steps are cancelled; 409 once ended', async () => {
  const wf = await createWorkflow(admin, ws.id, { steps: [delay('a', 1), delay('long', 600_000, { dependsOn: ['a'] }), delay('after', 1, { dependsOn: ['long'] })] });
  const runId = await startRun(operator, wf);
  await waitRun(member, wf, runId, (run) => run.steps.long.status === 'running');
  isError(await member.api.post(`/api/workflows/${wf}/runs/${runId}/cancel`), 403, 'forbidden');
  isError(await outsider.api.post(`/api/workflows/${wf}/runs/${runId}/cancel`), 404, 'not_found');
  const r = await operator.api.post(`/api/workflows/${wf}/runs/${runId}/cancel`);
  assert.is(r.status, 200, r.text);
  assert.is(r.body.status, 'cancelled');
  assert.is(r.body.steps.a.status, 'completed');
  assert.is(r.body.steps.long.status, 'cancelled');
  assert.is(r.body.steps.after.status, 'cancelled');
  assert.match(r.body.error, /^cancelled by did:key:/);
  isError(await operator.api.post(`/api/workflows/${wf}/runs/${runId}/cancel`), 409, 'run_ended');
  const got = await member.api.get(`/api/workflows/${wf}/runs/${runId}`);
  assert.is(got.body.status, 'cancelled');
  const list = await waitFor(async () => {
    const l = await member.api.get(`/api/workflows/${wf}/runs?status=cancelled`);
    return l.body.runs.length === 1 ? l : null;
  });
  assert.is(list.body.runs[0].runId, runId);
  assert.ok(await s.ctx.c.audit.findOne({ action: 'workflow.run.cancel', target: runId }));
});

test('run: 403 below operator, 404 for outsiders and unknown workflows or runs, 400 for params that are not an object', async () => {
  const wf = await createWorkflow(admin, ws.id, { steps: [delay('a', 1)] });
  isError(await member.api.post(`/api/workflows/${wf}/run`, {}), 403, 'forbidden');
  isError(await outsider.api.post(`/api/workflows/${wf}/run`, {}), 404, 'not_found');
  isError(await operator.api.post('/api/workflows/nope/run', {}), 404, 'not_found');
  isError(await operator.api.post(`/api/workflows/${wf}/run`, { params: [1] }), 400, 'validation_failed');
  isError(await operator.api.post(`/api/workflows/${wf}/run`, { params: {}, extra: true }), 400, 'validation_failed');
  isError(await member.api.get(`/api/workflows/${wf}/runs/nope`), 404, 'not_found');
  assert.is(await s.ctx.c.workflowRuns.count({ workflowId: wf }), 0);
  const other = await createWorkflow(admin, ws.id, { steps: [delay('a', 1)] });
  const runId = await startRun(operator, other);
  isError(await member.api.get(`/api/workflows/${wf}/runs/${runId}`), 404, 'not_found');
  isError(await outsider.api.get(`/api/workflows/${other}/runs/${runId}`), 404, 'not_found');
});

test('runs list: newest first, paged, filtered by status, each with who started it', async () => {
  const wf = await createWorkflow(admin, ws.id, { steps: [delay('a', 1)] });
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const id = await startRun(i === 0 ? admin : operator, wf);
    await waitRun(member, wf, id, ended);
    ids.push(id);
  }
  const page = await member.api.get(`/api/workflows/${wf}/runs?pageSize=2`);
  assert.is(page.status, 200, page.text);
  assert.is(page.body.total, 3);
  assert.is(page.body.totalPages, 2);
  assert.equal(page.body.runs.map((r: any) => r.runId), [ids[2], ids[1]]);
  const second = await member.api.get(`/api/workflows/${wf}/runs?pageSize=2&page=2`);
  assert.equal(second.body.runs.map((r: any) => r.runId), [ids[0]]);
  assert.equal(second.body.runs[0].startedBy, { type: 'person', userId: admin.user._id, did: admin.user.did });
  assert.is(second.body.runs[0].status, 'completed');
  isError(await member.api.get(`/api/workflows/${wf}/runs?status=done`), 400, 'validation_failed');
});

test('restart: attempts in flight fail with `interrupted` and onError decides; the runs then go on to their end', async () => {
  const goesOn = await createWorkflow(admin, ws.id, {
    steps: [delay('slow', 600_000, { onError: 'continue' }), delay('next', 1, { dependsOn: ['slow'] })],
  });
  const retried = await createWorkflow(admin, ws.id, { steps: [delay('slow', 600_000, { onError: 'retry', retries: 1 })] });
  const stops = await createWorkflow(admin, ws.id, { steps: [delay('slow', 600_000), delay('never', 1, { dependsOn: ['slow'] })] });
  const run1 = await startRun(operator, goesOn);
  const run2 = await startRun(operator, retried);
  const run3 = await startRun(operator, stops);
  await waitRun(member, goesOn, run1, (r) => r.steps.slow.status === 'running');
  await waitRun(member, retried, run2, (r) => r.steps.slow.status === 'running');
  await waitRun(member, stops, run3, (r) => r.steps.slow.status === 'running');

  s = await s.restart();
  installPoster(s);
  const m = { ...member, api: client(s.url, member.token) };

  const one = await waitRun(m, goesOn, run1, ended);
  assert.is(one.status, 'completed', JSON.stringify(one));
  assert.is(one.steps.slow.status, 'failed');
  assert.is(one.steps.slow.error, 'interrupted');
  assert.is(one.steps.next.status, 'completed');
  assert.equal(one.steps.next.output, { ms: 1 });

  const two = await waitRun(m, retried, run2, (r) => r.steps.slow.attempts === 2 && r.steps.slow.retryAt === null);
  assert.is(two.status, 'running', 'the interrupted attempt is retried');
  assert.is(two.steps.slow.error, 'interrupted');

  const three = await waitRun(m, stops, run3, ended);
  assert.is(three.status, 'failed');
  assert.is(three.error, "step 'slow' failed: interrupted");
  assert.is(three.steps.never.status, 'cancelled');

  // A second restart interrupts the last allowed attempt: the retries are spent, the run fails.
  s = await s.restart();
  installPoster(s);
  const m2 = { ...member, api: client(s.url, member.token) };
  const twoAgain = await waitRun(m2, retried, run2, ended);
  assert.is(twoAgain.status, 'failed');
  assert.is(twoAgain.steps.slow.attempts, 2);
  const listed = await m2.api.get(`/api/workflows/${goesOn}/runs`);
  assert.is(listed.body.runs[0].status, 'completed', 'the listing record follows the run');
});

test.run();
