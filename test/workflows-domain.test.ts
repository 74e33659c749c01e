import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { interpolate, InterpolationError, type Scope } from '../src/domain/workflow/interpolation.js';
import { ConditionError, evaluateCondition } from '../src/domain/workflow/conditions.js';
import { ATTEMPT_ERROR_MAX_CHARS, initialRunState, MAX_ATTEMPT_HISTORY, reduceRun, type RunEvent, type RunState } from '../src/domain/workflow/engine.js';
import { validateDefinition } from '../src/domain/workflow/definition.js';

const test = suite('workflows: interpolation, conditions and run rules');

const scope: Scope = {
  variables: { region: 'eu', limit: 10, tags: ['a', 'b'] },
  params: { who: 'Ada', dry: false, nothing: null },
  steps: {
    fetch: {
      status: 'completed',
      output: { items: [{ name: 'first', size: 1.5 }, { name: 'second' }], count: 2, ok: true, 'did:key:z6Mk': { n: 7 } },
      error: null,
    },
    skipped: { status: 'skipped', output: null, error: null },
  },
};

test('a string that is exactly one expression keeps the value and its type', () => {
  assert.equal(interpolate({ v: '{{variables.limit}}' }, scope), { v: 10 });
  assert.equal(interpolate({ v: '{{ params.dry }}' }, scope), { v: false });
  assert.equal(interpolate({ v: '{{params.nothing}}' }, scope), { v: null });
  assert.equal(interpolate({ v: '{{variables.tags}}' }, scope), { v: ['a', 'b'] });
  assert.equal(interpolate({ v: '{{steps.fetch.output}}' }, scope), { v: scope.steps.fetch!.output });
  assert.equal(interpolate({ v: '{{steps.fetch.output.items[0]}}' }, scope), { v: { name: 'first', size: 1.5 } });
  assert.equal(interpolate({ v: '{{steps.fetch.output.items[0].size}}' }, scope), { v: 1.5 });
  assert.equal(interpolate({ v: '{{steps.fetch.output.ok}}' }, scope), { v: true });
  assert.equal(interpolate({ v: '{{steps.fetch.status}}' }, scope), { v: 'completed' });
  assert.equal(interpolate({ v: "{{steps.fetch.output['did:key:z6Mk'].n}}" }, scope), { v: 7 });
  assert.equal(interpolate({ v: '{{steps.fetch.output["items"][1]["name"]}}' }, scope), { v: 'second' });
});

test('expressions inside a longer string are written into it (JSON for non-strings); objects and arrays are walked', () => {
  const out = interpolate(
    {
      text: 'Hi {{params.who}} from {{variables.region}}: {{steps.fetch.output.count}} items, first {{steps.fetch.output.items[0].name}}',
      json: 'tags={{variables.tags}} dry={{params.dry}} none={{params.nothing}}',
      list: ['{{variables.limit}}', { deep: ['{{steps.fetch.output.items[1].name}}'] }],
      plain: 'no braces } here {',
      number: 3,
    },
    scope,
  );
  assert.equal(out, {
    text: 'Hi Ada from eu: 2 items, first first',
    json: 'tags=["a","b"] dry=false none=null',
    list: [10, { deep: ['second'] }],
    plain: 'no braces } here {',
    number: 3,
  });
});

test('a reference to nothing fails with the path of the param', () => {
  const cases: Array<[unknown, RegExp]> = [
    [{ x: '{{params.missing}}' }, /^params.x: \{\{params.missing\}\} refers to nothing$/],
    [{ x: ['ok', 'a {{steps.fetch.output.items[5].name}}'] }, /^params.x.1: .*items\[5\]\.name\}\} refers to nothing/],
    [{ x: '{{steps.skipped.output.anything}}' }, /refers to nothing/],
    [{ x: '{{variables.tags.length}}' }, /refers to nothing/],
  ];
  for (const [value, message] of cases) {
    try {
      interpolate(value, scope);
      assert.unreachable('should throw');
    } catch (err) {
      assert.instance(err, InterpolationError);
      assert.match((err as Error).message, message);
    }
  }
});

test('conditions: CEL over variables, params and steps', () => {
  const yes = [
    'variables.limit > 5',
    'variables.limit + 1 == 11',
    'steps.fetch.output.items[0].size > 1',
    'steps.fetch.output.count == 2 && steps.fetch.output.ok',
    'steps.fetch.status == "completed"',
    'params.who.startsWith("A") && params.who.lowerAscii() == "ada"',
    '"b" in variables.tags',
    'size(steps.fetch.output.items) == 2',
    'steps.fetch.output.items.exists(i, i.name == "second")',
    '!has(params.missing)',
    'steps.skipped.status == "skipped"',
    'params.nothing == null',
    'variables.region in ["eu", "us"] ? true : false',
  ];
  for (const c of yes) assert.is(evaluateCondition(c, scope), true, c);
  for (const c of ['variables.limit < 5', 'params.dry', 'has(params.missing)']) assert.is(evaluateCondition(c, scope), false, c);
});

test('conditions: an evaluation error or a non-boolean result is a ConditionError', () => {
  for (const c of ['params.missing == 1', 'variables.limit', '"text"', 'params.who + 1 == 2']) {
    try {
      evaluateCondition(c, scope);
      assert.unreachable(c);
    } catch (err) {
      assert.instance(err, ConditionError, c);
    }
  }
});

// --- the run rules, event by event --------------------------------------------------------------

const T0 = '2030-01-01T00:00:00.000Z';
const at = (ms: number) => new Date(Date.parse(T0) + ms).toISOString();

function drive(state: RunState, events: RunEvent[]) {
  let s = state;
  const commands: unknown[] = [];
  for (const e of events) {
    const r = reduceRun(s, e);
    s = r.state;
    commands.push(...r.commands);
  }
  return { state: s, commands: commands as Array<{ type: string; stepId?: string; attempt?: number; at?: string }> };
}

const s = (id: string, extra: Record<string, unknown> = {}) => ({ id, name: id, action: 'delay', params: { ms: 1 }, ...extra });

test('rules: roots start together; a step starts once all its dependencies finished', () => {
  const def = validateDefinition({ steps: [s('a'), s('b'), s('c', { dependsOn: ['a', 'b'] })] });
  const r1 = drive(initialRunState(def, {}, T0), [{ type: 'START', at: T0 }]);
  assert.equal(r1.commands.map((c) => c.stepId), ['a', 'b']);
  const r2 = drive(r1.state, [{ type: 'STEP_DONE', stepId: 'a', attempt: 1, output: 1, at: at(10) }]);
  assert.equal(r2.commands, []);
  const r3 = drive(r2.state, [{ type: 'STEP_DONE', stepId: 'b', attempt: 1, output: 2, at: at(20) }]);
  assert.equal(r3.commands.map((c) => c.stepId), ['c']);
  const r4 = drive(r3.state, [{ type: 'STEP_DONE', stepId: 'c', attempt: 1, output: 3, at: at(50) }]);
  assert.is(r4.state.status, 'completed');
  assert.is(r4.state.steps.c!.durationMs, 30);
  assert.equal(r4.commands, [{ type: 'run.ended', status: 'completed', completedAt: at(50), error: null }]);
});

test('rules: stale reports are ignored; retry waits, then runs the next attempt; retries n means n + 1 attempts', () => {
  const def = validateDefinition({ steps: [s('a', { onError: 'retry', retries: 2 })] });
  let r = drive(initialRunState(def, {}, T0), [{ type: 'START', at: T0 }]);
  r = drive(r.state, [{ type: 'STEP_FAILED', stepId: 'a', attempt: 1, error: 'e1', retryable: true, backoffMs: 100, at: at(5) }]);
  assert.equal(r.commands, [{ type: 'step.wait', stepId: 'a', attempt: 1, at: at(105) }]);
  assert.is(r.state.steps.a!.status, 'running');
  assert.is(r.state.steps.a!.retryAt, at(105));
  r = drive(r.state, [{ type: 'STEP_DONE', stepId: 'a', attempt: 1, output: 'late', at: at(6) }]);
  assert.is(r.state.steps.a!.status, 'running', 'a report for an attempt that is not in flight changes nothing');
  r = drive(r.state, [{ type: 'RETRY_DUE', stepId: 'a', attempt: 1, at: at(105) }]);
  assert.equal(r.commands.map((c) => [c.type, c.attempt]), [['step.execute', 2]]);
  r = drive(r.state, [{ type: 'STEP_FAILED', stepId: 'a', attempt: 2, error: 'e2', retryable: true, backoffMs: 200, at: at(110) }]);
  r = drive(r.state, [{ type: 'RETRY_DUE', stepId: 'a', attempt: 2, at: at(310) }]);
  r = drive(r.state, [{ type: 'STEP_FAILED', stepId: 'a', attempt: 3, error: 'e3', retryable: true, backoffMs: 400, at: at(320) }]);
  assert.is(r.state.status, 'failed');
  assert.is(r.state.steps.a!.attempts, 3);
  assert.is(r.state.steps.a!.error, 'e3');
  assert.is(r.state.error, "step 'a' failed: e3");
});

test('rules: RESUME fails attempts in flight with `interrupted` and re-arms waits', () => {
  const def = validateDefinition({
    steps: [s('a', { onError: 'continue' }), s('b', { onError: 'retry', retries: 1 }), s('c', { onError: 'retry' }), s('d', { dependsOn: ['a'] })],
  });
  let r = drive(initialRunState(def, {}, T0), [
    { type: 'START', at: T0 },
    { type: 'STEP_FAILED', stepId: 'c', attempt: 1, error: 'x', retryable: true, backoffMs: 1000, at: at(1) },
  ]);
  r = drive(r.state, [{ type: 'RESUME', at: at(100), backoffMs: { b: 50 } }]);
  assert.is(r.state.steps.a!.status, 'failed');
  assert.is(r.state.steps.a!.error, 'interrupted');
  assert.is(r.state.steps.b!.status, 'running');
  assert.is(r.state.steps.b!.error, 'interrupted');
  assert.equal(
    r.commands.map((c) => [c.type, c.stepId, c.at ?? null]),
    [
      ['step.execute', 'd', null],
      ['step.wait', 'b', at(150)],
      ['step.wait', 'c', at(1001)],
    ],
  );
});

test('attempts: each attempt recorded with its start, end, outcome, error and retry wait; bounded per step', () => {
  const def = validateDefinition({
    steps: [s('a', { onError: 'retry', retries: 2 }), s('b', { dependsOn: ['a'], condition: 'false' }), s('c', { dependsOn: ['a'] }), s('d', { onError: 'retry', retries: 100 })],
  });
  const long = 'x'.repeat(ATTEMPT_ERROR_MAX_CHARS + 100);
  const r = drive(initialRunState(def, {}, T0), [
    { type: 'START', at: T0 },
    { type: 'STEP_FAILED', stepId: 'a', attempt: 1, error: 'boom', retryable: true, backoffMs: 100, at: at(10) },
    { type: 'RETRY_DUE', stepId: 'a', attempt: 1, at: at(110) },
    { type: 'STEP_FAILED', stepId: 'a', attempt: 2, error: long, retryable: true, backoffMs: 50, at: at(120) },
    { type: 'RETRY_DUE', stepId: 'a', attempt: 2, at: at(170) },
    { type: 'STEP_DONE', stepId: 'a', attempt: 3, output: 1, at: at(200) },
  ]);
  const a = r.state.steps.a!.history!;
  assert.equal(a[0], { attempt: 1, startedAt: T0, finishedAt: at(10), outcome: 'failed', error: 'boom', retryAt: at(110) });
  assert.equal(a[1]!.retryAt, at(170));
  assert.is(a[1]!.error, `${'x'.repeat(ATTEMPT_ERROR_MAX_CHARS)}…`, 'an attempt keeps a clipped error');
  assert.is(r.state.steps.a!.error, null);
  assert.equal(a[2], { attempt: 3, startedAt: at(170), finishedAt: at(200), outcome: 'succeeded', error: null, retryAt: null });
  assert.equal(r.state.steps.b!.history, [], 'a skipped step ran no attempt');
  assert.equal(r.state.steps.c!.history, [{ attempt: 1, startedAt: at(200), finishedAt: null, outcome: 'running', error: null, retryAt: null }]);

  // d fails 30 times: the latest MAX_ATTEMPT_HISTORY attempts are kept, with their numbers.
  let state = r.state;
  for (let n = 1; n <= 30; n++) {
    state = drive(state, [
      { type: 'STEP_FAILED', stepId: 'd', attempt: n, error: `e${n}`, retryable: true, backoffMs: 1, at: at(1000 + n * 10) },
      { type: 'RETRY_DUE', stepId: 'd', attempt: n, at: at(1001 + n * 10) },
    ]).state;
  }
  const d = state.steps.d!.history!;
  assert.is(d.length, MAX_ATTEMPT_HISTORY);
  assert.equal(d.map((h) => h.attempt), Array.from({ length: MAX_ATTEMPT_HISTORY }, (_, i) => 31 - MAX_ATTEMPT_HISTORY + 1 + i));
  assert.is(d.at(-2)!.error, 'e30');
  assert.is(d.at(-1)!.outcome, 'running');

  // Cancelling ends the attempts in flight as cancelled.
  const cancelled = drive(state, [{ type: 'CANCEL', at: at(5000), by: 'did:key:someone' }]).state;
  assert.equal(cancelled.steps.c!.history!.at(-1), { attempt: 1, startedAt: at(200), finishedAt: at(5000), outcome: 'cancelled', error: null, retryAt: null });
  assert.is(cancelled.steps.d!.history!.at(-1)!.outcome, 'cancelled');
});

test.run();
