import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { client, startServer, waitFor, type TestServer } from './helpers.js';
import { openStore } from '../src/store/index.js';
import type { SnapshotDoc } from '../src/actors/host.js';
import { makeUser, ownerOf, type TestUser } from './fixtures.js';
import { fleet, makeWorkspace, newAgent, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { createWorkflow, ended, ManualClock, startRun, waitRun } from './workflows-helpers.js';
import { systemClock } from '../src/services/workflow-runs.js';
import type { IntentContext, StewardAgent } from '../src/agent/index.js';

const test = suite('workflows: steps performed by SDK agents');
let s: TestServer;
let owner: TestUser;
let ws: { id: string; slug: string };
let operator: TestUser;
let member: TestUser;
let echo: StewardAgent;
let failing: StewardAgent;
let limited: StewardAgent;
/** Intents each agent received, by DID. */
const received = new Map<string, IntentContext[]>();
/** Barriers: a name -> the step names that must all arrive before any goes on. */
const barriers = new Map<string, { want: number; arrived: Set<string>; wake: Array<() => void> }>();

function record(did: () => string, intent: IntentContext) {
  const list = received.get(did()) ?? [];
  list.push(intent);
  received.set(did(), list);
}

async function echoHandler(this: void, agent: () => StewardAgent, intent: IntentContext): Promise<unknown> {
  record(() => agent().did, intent);
  const p = intent.params;
  if (typeof p.barrier === 'string') {
    const b = barriers.get(p.barrier)!;
    b.arrived.add(String(p.me));
    if (b.arrived.size === b.want) for (const w of b.wake.splice(0)) w();
    else {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`${String(p.me)}: the other branch never arrived while this one was running`)), 5000);
        b.wake.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }
  return { action: intent.action, params: p, requestedBy: intent.requestedBy };
}

const agentStep = (id: string, agent: StewardAgent, params: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({
  id,
  name: `ask ${id}`,
  agentDid: agent.did,
  action: 'api_call',
  params,
  ...extra,
});
const delay = (id: string, ms: number, extra: Record<string, unknown> = {}) => ({ id, name: id, action: 'delay', params: { ms }, ...extra });
const calls = (a: StewardAgent) => received.get(a.did)?.length ?? 0;

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  ws = await makeWorkspace(owner, 'Agents');
  operator = await makeUser(s, { workspaces: { [ws.id]: 'operator' } });
  member = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  echo = await readyAgent(s, owner, { workspace: ws.id, capabilities: ['api_call', 'file_access'], onIntent: (i) => echoHandler(() => echo, i) });
  failing = await readyAgent(s, owner, {
    workspace: ws.id,
    capabilities: ['api_call'],
    onIntent: (i) => {
      record(() => failing.did, i);
      throw new Error('tool exploded');
    },
  });
  limited = await readyAgent(s, owner, { workspace: ws.id, capabilities: ['file_access'], onIntent: (i) => echoHandler(() => limited, i) });
  const g = await owner.api.post('/api/grants', { userDid: operator.user.did, agentDid: echo.did, capabilities: ['api_call'], expiresAt: null });
  assert.is(g.status, 201, g.text);
});

test.after(async () => {
  s.ctx.workflows.clock = systemClock;
  await stopAll(echo, failing, limited);
  await s.stop(true);
});

test('an agent step sends an intent as the person who started the run; the intent result is the output', async () => {
  const wf = await createWorkflow(owner, ws.id, {
    steps: [
      agentStep('a', echo, { q: '{{params.q}}', n: 2, list: [1, '{{params.q}}'] }),
      agentStep('b', echo, { n: '{{steps.a.output.params.n}}', first: '{{steps.a.output.params.list[0]}}', who: '{{steps.a.output.requestedBy}}' }, { dependsOn: ['a'] }),
    ],
  });
  const runId = await startRun(operator, wf, { q: 'weather' });
  const run = await waitRun(member, wf, runId, ended);
  assert.is(run.status, 'completed', JSON.stringify(run));
  assert.equal(run.steps.a.output, { action: 'api_call', params: { q: 'weather', n: 2, list: [1, 'weather'] }, requestedBy: operator.user.did });
  assert.equal(run.steps.b.output.params, { n: 2, first: 1, who: operator.user.did }, 'numbers stay numbers on the way to the agent');
  const audit = await s.ctx.c.audit.find({ action: 'intent.send', actor: operator.user.did });
  assert.ok(audit.length >= 2, 'the intents went through the intents path (audited as the operator)');
});

test('diamond with agents: the two branches are in the agent at the same time', async () => {
  barriers.set('diamond', { want: 2, arrived: new Set(), wake: [] });
  const wf = await createWorkflow(owner, ws.id, {
    steps: [
      delay('a', 1),
      agentStep('left', echo, { barrier: 'diamond', me: 'left' }, { dependsOn: ['a'] }),
      agentStep('right', echo, { barrier: 'diamond', me: 'right' }, { dependsOn: ['a'] }),
      agentStep('join', echo, { left: '{{steps.left.output.params.me}}', right: '{{steps.right.output.params.me}}' }, { dependsOn: ['left', 'right'] }),
    ],
  });
  const run = await waitRun(member, wf, await startRun(owner, wf), ended);
  assert.is(run.status, 'completed', JSON.stringify(run));
  const { left, right, join } = run.steps;
  const t = Date.parse;
  assert.ok(t(left.startedAt) <= t(right.completedAt) && t(right.startedAt) <= t(left.completedAt), 'the branches overlap');
  assert.ok(t(join.startedAt) >= Math.max(t(left.completedAt), t(right.completedAt)));
  assert.equal(join.output.params, { left: 'left', right: 'right' });
});

test('onError stop (the default): a failing agent fails the run; nothing new starts; the rest is cancelled', async () => {
  const wf = await createWorkflow(owner, ws.id, {
    steps: [agentStep('a', failing), delay('parallel', 600_000), agentStep('after', echo, {}, { dependsOn: ['a'] })],
  });
  const before = calls(echo);
  const run = await waitRun(member, wf, await startRun(owner, wf), ended);
  assert.is(run.status, 'failed');
  assert.is(run.error, "step 'a' failed: tool exploded");
  assert.is(run.steps.a.status, 'failed');
  assert.is(run.steps.a.error, 'tool exploded');
  assert.is(run.steps.a.attempts, 1);
  assert.is(run.steps.parallel.status, 'cancelled');
  assert.is(run.steps.after.status, 'cancelled');
  assert.is(calls(echo), before, 'the dependant never ran');
});

test('onError continue: the step is failed and its dependants still run; the run completes', async () => {
  const wf = await createWorkflow(owner, ws.id, {
    steps: [
      agentStep('a', failing, {}, { onError: 'continue' }),
      agentStep('b', echo, { upstream: '{{steps.a.status}}', why: '{{steps.a.error}}' }, { dependsOn: ['a'] }),
    ],
  });
  const run = await waitRun(member, wf, await startRun(owner, wf), ended);
  assert.is(run.status, 'completed');
  assert.is(run.steps.a.status, 'failed');
  assert.is(run.steps.b.status, 'completed');
  assert.equal(run.steps.b.output.params, { upstream: 'failed', why: 'tool exploded' });
});

test('onError retry: exponential back-off with jitter on the executor clock; retries n = n further attempts, then as stop', async () => {
  const clock = new ManualClock(Date.parse('2031-05-01T00:00:00.000Z'), 0.5);
  s.ctx.workflows.clock = clock;
  try {
    const wf = await createWorkflow(owner, ws.id, { steps: [agentStep('a', failing, {}, { onError: 'retry', retries: 2 }), agentStep('b', echo, {}, { dependsOn: ['a'] })] });
    const before = calls(failing);
    const runId = await startRun(owner, wf);

    // Attempt 1 fails; the retry waits for a timer: base 1000 ms, jitter 0.5 -> 500 + 0.5 * 500.
    let run = await waitRun(member, wf, runId, (r) => r.steps.a.retryAt !== null);
    await waitFor(() => clock.pending().length === 1);
    assert.is(calls(failing) - before, 1);
    assert.equal(
      clock.pending().map((t) => t.ms),
      [750],
    );
    assert.is(run.status, 'running');
    assert.is(run.steps.a.status, 'running');
    assert.is(run.steps.a.attempts, 1);
    assert.is(run.steps.a.error, 'tool exploded');
    assert.is(run.steps.a.retryAt, new Date(clock.now() + 750).toISOString());
    assert.is(calls(failing) - before, 1, 'no attempt before the timer fires');

    // Attempt 2 fails; the wait doubles: 1000 + 0.5 * 1000.
    clock.fire(clock.pending()[0]!);
    run = await waitRun(member, wf, runId, (r) => r.steps.a.attempts === 2 && r.steps.a.retryAt !== null);
    await waitFor(() => clock.pending().length === 1);
    assert.is(calls(failing) - before, 2);
    assert.equal(
      clock.pending().map((t) => t.ms),
      [1500],
    );

    // Attempt 3 (the last of 1 + 2) fails: the retries are spent and the run stops.
    clock.fire(clock.pending()[0]!);
    run = await waitRun(member, wf, runId, ended);
    assert.is(calls(failing) - before, 3);
    assert.is(run.status, 'failed');
    assert.is(run.steps.a.status, 'failed');
    assert.is(run.steps.a.attempts, 3);
    assert.is(run.steps.a.retryAt, null);
    assert.is(run.steps.b.status, 'cancelled');
    assert.equal(clock.pending(), [], 'no timer after the last attempt');
  } finally {
    s.ctx.workflows.clock = systemClock;
  }
});

test('onError retry: an attempt that succeeds after a failure completes the step', async () => {
  let n = 0;
  const flaky = await readyAgent(s, owner, {
    workspace: ws.id,
    capabilities: ['api_call'],
    onIntent: () => {
      n++;
      if (n === 1) throw new Error('first try fails');
      return { try: n };
    },
  });
  const clock = new ManualClock(Date.now(), 0);
  s.ctx.workflows.clock = clock;
  try {
    const wf = await createWorkflow(owner, ws.id, { steps: [agentStep('a', flaky, {}, { onError: 'retry' })] });
    const runId = await startRun(owner, wf);
    await waitFor(() => clock.pending().length === 1);
    assert.equal(
      clock.pending().map((t) => t.ms),
      [500],
      'jitter 0 gives half the exponential wait',
    );
    clock.fire(clock.pending()[0]!);
    const run = await waitRun(member, wf, runId, ended);
    assert.is(run.status, 'completed');
    assert.is(run.steps.a.attempts, 2);
    assert.is(run.steps.a.error, null);
    assert.equal(run.steps.a.output, { try: 2 });
  } finally {
    s.ctx.workflows.clock = systemClock;
    await flaky.stop();
  }
});

test('gates: a step refused by the agent\'s capability gate, and one refused by the grant check, fail with their messages', async () => {
  const wf = await createWorkflow(owner, ws.id, {
    steps: [
      agentStep('not-granted-to-agent', limited, {}, { onError: 'continue' }),
      agentStep('no-grant', failing, {}, { onError: 'continue' }),
      agentStep('allowed', echo, {}, { onError: 'continue' }),
    ],
  });
  const before = calls(limited);
  // The operator has a grant on `echo` only; `limited` holds file_access, not api_call.
  const grant = await owner.api.post('/api/grants', { userDid: operator.user.did, agentDid: limited.did, capabilities: ['api_call'], expiresAt: null });
  assert.is(grant.status, 201, grant.text);
  const run = await waitRun(member, wf, await startRun(operator, wf), ended);
  assert.is(run.status, 'completed');
  assert.is(run.steps['not-granted-to-agent'].status, 'failed');
  assert.is(run.steps['not-granted-to-agent'].error, "Capability 'api_call' is not granted");
  assert.is(calls(limited), before, "the agent's gate refused before its handler");
  assert.is(run.steps['no-grant'].status, 'failed');
  assert.is(run.steps['no-grant'].error, "no unexpired grant covers 'api_call' on this agent (forbidden)");
  assert.is(run.steps.allowed.status, 'completed');
});

test('without agentDid: broadcast to the online agents of the workspace that hold the capability; output by DID', async () => {
  const bws = await makeWorkspace(owner, 'Broadcast');
  const one = await readyAgent(s, owner, { workspace: bws.id, capabilities: ['api_call'], onIntent: () => ({ from: 'one' }) });
  const two = await readyAgent(s, owner, {
    workspace: bws.id,
    capabilities: ['api_call'],
    onIntent: () => {
      throw new Error('two is broken');
    },
  });
  const noCap = await readyAgent(s, owner, { workspace: bws.id, capabilities: ['file_access'], onIntent: () => ({ from: 'noCap' }) });
  const offline = await readyAgent(s, owner, { workspace: bws.id, capabilities: ['api_call'], onIntent: () => ({ from: 'offline' }) });
  await offline.stop();
  await waitFor(() => !fleet(s).gateway.isOnline(offline.did));
  try {
    const wf = await createWorkflow(owner, bws.id, {
      steps: [
        { id: 'all', name: 'ask all', action: 'api_call', params: { q: 1 } },
        { id: 'none', name: 'nobody holds it', action: 'mail_send', params: {}, onError: 'continue', dependsOn: ['all'] },
        { id: 'files', name: 'files', action: 'file_access', params: {}, dependsOn: ['all'] },
      ],
    });
    const run = await waitRun(owner, wf, await startRun(owner, wf), ended);
    assert.is(run.steps.all.status, 'completed');
    assert.equal(run.steps.all.output, {
      [one.did]: { ok: true, output: { from: 'one' } },
      [two.did]: { ok: false, error: 'two is broken' },
    });
    assert.is(run.steps.none.status, 'failed');
    assert.is(run.steps.none.error, "no online agent of the workspace holds 'mail_send'");
    assert.equal(run.steps.files.output, { [noCap.did]: { ok: true, output: { from: 'noCap' } } });
    assert.is(run.status, 'completed');
  } finally {
    await stopAll(one, two, noCap);
  }
});

test('channel.post goes through the channel service as the person who started the run', async () => {
  const ch = await owner.api.post('/api/channels', { name: 'Flow news', workspaceId: ws.id, isPublic: true });
  assert.is(ch.status, 201, ch.text);
  const channelId = ch.body.channel.id;
  const wf = await createWorkflow(owner, ws.id, {
    steps: [{ id: 'say', name: 'say', action: 'channel.post', params: { channelId, content: 'Deployed {{params.version}}' } }],
  });
  const run = await waitRun(owner, wf, await startRun(owner, wf, { version: 'v2' }), ended);
  assert.is(run.status, 'completed', JSON.stringify(run));
  assert.is(run.steps.say.output.content, 'Deployed v2');
  assert.is(run.steps.say.output.authorDid, owner.user.did);
  const msgs = await owner.api.get(`/api/channels/${channelId}/messages`);
  assert.ok(msgs.body.messages.some((m: any) => m.id === run.steps.say.output.id && m.content === 'Deployed v2'));

  // The operator can read the public channel but is not a member: posting is refused.
  const refused = await waitRun(member, wf, await startRun(operator, wf, { version: 'v3' }), ended);
  assert.is(refused.status, 'failed');
  assert.match(refused.steps.say.error, /membership.*\(not_a_member\)/);
});

test('restart in the middle of a run: the agent step in flight is interrupted, retried once the agent is back, and the run completes', async () => {
  let first = true;
  const slowHandler = async (i: IntentContext) => {
    record(() => slowDid, i);
    if (first) {
      first = false;
      await new Promise(() => undefined); // never answers: the server goes down meanwhile
    }
    return { answeredBy: 'agent after the restart' };
  };
  const slow = await readyAgent(s, owner, { workspace: ws.id, capabilities: ['api_call'], onIntent: slowHandler });
  const slowDid = slow.did;
  const wf = await createWorkflow(owner, ws.id, {
    steps: [agentStep('a', slow, {}, { onError: 'retry', retries: 100 }), agentStep('b', echo, { got: '{{steps.a.output.answeredBy}}' }, { dependsOn: ['a'] })],
  });
  const runId = await startRun(owner, wf);
  await waitFor(() => calls(slow) === 1);

  // Shut down while the intent is unanswered (the server closes the agents' sockets itself).
  const env = s.env;
  await s.stop();
  const store = await openStore({ dataDir: s.dataDir });
  const snap = await store.collection<SnapshotDoc>('actor_snapshots').findById(`workflow-run:${runId}`);
  await store.close();
  const stored = JSON.parse(snap!.snapshot).context.steps.a;
  assert.equal([stored.status, stored.attempts, stored.retryAt], ['running', 1, null], 'stored as in flight, not as failed by the shutdown');
  await stopAll(slow, echo, failing, limited);

  s = await startServer({ ...env, WORKFLOW_RETRY_BASE_MS: '20', WORKFLOW_RETRY_MAX_MS: '100' }, s.dataDir);
  owner = await ownerOf(s);
  const m = { ...member, api: client(s.url, member.token) };
  // The same agents come back to the new address.
  const slowBack = newAgent(s, { keys: slow['opts'].keys, capabilities: ['api_call'], onIntent: slowHandler });
  echo = newAgent(s, { keys: echo['opts'].keys, capabilities: ['api_call', 'file_access'], onIntent: (i) => echoHandler(() => echo, i) });
  failing = newAgent(s, { keys: failing['opts'].keys, capabilities: ['api_call'] });
  limited = newAgent(s, { keys: limited['opts'].keys, capabilities: ['file_access'] });
  try {
    const run = await waitRun(m, wf, runId, ended, 20_000);
    assert.is(run.status, 'completed', JSON.stringify(run));
    assert.ok(run.steps.a.attempts >= 2, 'the interrupted attempt counted as a failed one');
    assert.equal(run.steps.a.output, { answeredBy: 'agent after the restart' });
    assert.equal(run.steps.b.output.params, { got: 'agent after the restart' });
    assert.ok(calls(slow) >= 2);
  } finally {
    await slowBack.stop();
  }
});

test.run();
