import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { isError, makeWorkspace, startWithOwner } from './people-helpers.js';

const test = suite('workflows: definitions');
let s: TestServer;
let owner: TestUser;
let ws: { id: string; slug: string };
let other: { id: string; slug: string };
let wsAdmin: TestUser;
let operator: TestUser;
let member: TestUser;
let outsider: TestUser;

const step = (id: string, extra: Record<string, unknown> = {}) => ({ id, name: `Step ${id}`, action: 'delay', params: { ms: 1 }, ...extra });

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  ws = await makeWorkspace(owner, 'Flows');
  other = await makeWorkspace(owner, 'Elsewhere');
  wsAdmin = await makeUser(s, { workspaces: { [ws.id]: 'admin' } });
  operator = await makeUser(s, { workspaces: { [ws.id]: 'operator' } });
  member = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  outsider = await makeUser(s, { workspaces: { [other.id]: 'owner' } });
});

test.after(async () => {
  await s.stop(true);
});

const create = (who: TestUser, body: Record<string, unknown>) => who.api.post('/api/workflows', body);

test('create: 201 {success, id, name, workspaceId}; detail {workflow: {id, name, definition}}; audited', async () => {
  const definition = {
    steps: [step('a'), step('b', { dependsOn: ['a'], params: { ms: '{{steps.a.output.ms}}' }, onError: 'retry', retries: 2 })],
    variables: { greeting: 'hi' },
    triggers: [{ kind: 'manual' }],
  };
  const r = await create(wsAdmin, { name: 'Nightly', description: 'every night', workspaceId: ws.slug, definition });
  assert.is(r.status, 201, r.text);
  assert.equal(Object.keys(r.body).sort(), ['id', 'name', 'success', 'workspaceId']);
  assert.is(r.body.success, true);
  assert.is(r.body.name, 'Nightly');
  assert.is(r.body.workspaceId, ws.id, 'a slug is resolved to the id');
  const d = await member.api.get(`/api/workflows/${r.body.id}`);
  assert.is(d.status, 200, d.text);
  assert.is(d.body.workflow.id, r.body.id);
  assert.is(d.body.workflow.name, 'Nightly');
  assert.equal(d.body.workflow.definition, definition);
  assert.ok(await s.ctx.c.audit.findOne({ action: 'workflow.create', target: r.body.id }));
});

test('list: members see their workspaces, global admins all; filters workspaceId and createdBy; stepCount', async () => {
  const mine = await create(owner, { name: 'Other one', workspaceId: other.id, definition: { steps: [step('x'), step('y'), step('z')] } });
  assert.is(mine.status, 201, mine.text);
  const byMember = await member.api.get('/api/workflows');
  assert.is(byMember.status, 200);
  assert.is(byMember.body.success, true);
  assert.ok(byMember.body.workflows.every((w: any) => w.workspaceId === ws.id), 'only their workspace');
  const nightly = byMember.body.workflows.find((w: any) => w.name === 'Nightly');
  assert.equal(Object.keys(nightly).sort(), ['createdAt', 'createdBy', 'description', 'id', 'name', 'stepCount', 'updatedAt', 'workspaceId']);
  assert.is(nightly.stepCount, 2);
  assert.is(nightly.createdBy, wsAdmin.user.did);
  assert.is(nightly.description, 'every night');

  const all = await owner.api.get('/api/workflows');
  assert.ok(all.body.workflows.some((w: any) => w.id === mine.body.id));
  assert.ok(all.body.workflows.some((w: any) => w.id === nightly.id));
  const filtered = await owner.api.get(`/api/workflows?workspaceId=${other.slug}`);
  assert.equal(filtered.body.workflows.map((w: any) => w.id), [mine.body.id]);
  assert.is(filtered.body.workflows[0].stepCount, 3);
  const byCreator = await owner.api.get(`/api/workflows?createdBy=${encodeURIComponent(wsAdmin.user.did!)}`);
  assert.equal(byCreator.body.workflows.map((w: any) => w.id), [nightly.id]);
  isError(await member.api.get(`/api/workflows?workspaceId=${other.id}`), 404, 'not_found');
  isError(await member.api.get(`/api/workflows/${mine.body.id}`), 404, 'not_found');
  isError(await http(s.url, 'GET', '/api/workflows'), 401, 'unauthorized');
});

test('create: 403 below workspace admin, 404 for a workspace the caller does not see, 409 for a taken name', async () => {
  const body = { name: 'X', workspaceId: ws.id, definition: { steps: [step('a')] } };
  isError(await create(operator, body), 403, 'forbidden');
  isError(await create(member, body), 403, 'forbidden');
  isError(await create(outsider, body), 404, 'not_found');
  isError(await create(wsAdmin, { ...body, workspaceId: 'nope' }), 404, 'not_found');
  isError(await create(wsAdmin, { ...body, name: ' nightly ' }), 409, 'name_taken');
  assert.is(await s.ctx.c.workflows.count({ name: 'X' }), 0);
});

test('create: 400 for a missing name, workspace or definition, or an unknown field', async () => {
  isError(await create(wsAdmin, { workspaceId: ws.id, definition: { steps: [step('a')] } }), 400, 'validation_failed');
  isError(await create(wsAdmin, { name: 'n', definition: { steps: [step('a')] } }), 400, 'validation_failed');
  isError(await create(wsAdmin, { name: 'n', workspaceId: ws.id }), 400, 'validation_failed');
  isError(await create(wsAdmin, { name: 'n', workspaceId: ws.id, definition: [] }), 400, 'validation_failed');
  isError(await create(wsAdmin, { name: 'n', workspaceId: ws.id, definition: { steps: [step('a')] }, extra: 1 }), 400, 'validation_failed');
});

/** Each refused definition with a fragment its message must contain (the step it names). */
const REFUSED: Array<[string, unknown, RegExp]> = [
  ['no steps field', { variables: {} }, /'steps' is required/],
  ['empty steps', { steps: [] }, /steps/],
  ['a step without an action', { steps: [{ id: 'a', name: 'A', params: {} }] }, /step 'a' \(steps\[0\]\): 'action' is required/],
  ['a step without params', { steps: [{ id: 'a', name: 'A', action: 'delay' }] }, /step 'a' \(steps\[0\]\): 'params' is required/],
  ['a step without an id', { steps: [{ name: 'A', action: 'delay', params: {} }] }, /steps\[0\]: 'id' is required/],
  ['a step with an unknown field', { steps: [step('a', { depends_on: ['b'] })] }, /step 'a' \(steps\[0\]\): unknown field 'depends_on'/],
  ['a bad step id', { steps: [step('a b')] }, /step 'a b' \(steps\[0\]\): id may hold only letters, digits/],
  ['a bad agentDid', { steps: [step('a', { agentDid: 'agent-1' })] }, /step 'a' \(steps\[0\]\): agentDid must be a DID/],
  ['retries not a whole number', { steps: [step('a', { onError: 'retry', retries: 1.5 })] }, /step 'a' \(steps\[0\]\): retries must be integer/],
  ['onError not stop/continue/retry', { steps: [step('a'), step('b', { onError: 'ignore' })] }, /step 'b' \(steps\[1\]\): onError must be one of stop, continue, retry/],
  ['repeated step ids', { steps: [step('a'), step('b'), step('a')] }, /step 'a': the id is used by more than one step/],
  ['dependsOn names an unknown step', { steps: [step('a'), step('b', { dependsOn: ['a', 'ghost'] })] }, /step 'b': dependsOn names 'ghost'/],
  ['a step depending on itself', { steps: [step('a', { dependsOn: ['a'] })] }, /step 'a': the dependencies form a cycle \(a -> a\)/],
  [
    'a cycle',
    { steps: [step('a'), step('b', { dependsOn: ['a', 'd'] }), step('c', { dependsOn: ['b'] }), step('d', { dependsOn: ['c'] })] },
    /step 'b': the dependencies form a cycle \(b -> d -> c -> b\)/,
  ],
  ['an unclosed interpolation', { steps: [step('a', { params: { text: 'hello {{params.name' } })] }, /step 'a': params.text: '\{\{' at position 7 is not closed/],
  ['an empty interpolation', { steps: [step('a', { params: { text: '{{ }}' } })] }, /step 'a': params.text: \{\{\}\} is empty/],
  ['an unknown root', { steps: [step('a', { params: { x: '{{secrets.key}}' } })] }, /step 'a': params.x: \{\{secrets.key\}\}: an expression starts with variables, params or steps/],
  ['a bad index', { steps: [step('a'), step('b', { dependsOn: ['a'], params: { x: ['{{steps.a.output.items[x]}}'] } })] }, /step 'b': params.x.0: .*\[\.\.\.\] takes an index/],
  ['a step field other than output/status/error', { steps: [step('a'), step('b', { dependsOn: ['a'], params: { x: '{{steps.a.result}}' } })] }, /step 'b': params.x: .*expected .output, .status or .error/],
  ['a variable without a name', { steps: [step('a', { params: { x: '{{variables}}' } })] }, /step 'a': params.x: .*name a value after 'variables'/],
  ['a reference to an unknown step', { steps: [step('a', { params: { x: '{{steps.ghost.output}}' } })] }, /step 'a': params.x: \{\{steps.ghost.output\}\} names 'ghost', which is not a step/],
  [
    'a reference to a step it does not depend on',
    { steps: [step('a'), step('b'), step('c', { dependsOn: ['a'], params: { nested: { deep: 'x {{steps.b.output}}' } } })] },
    /step 'c': params.nested.deep: \{\{steps.b.output\}\} reads step 'b', which 'c' does not depend on/,
  ],
  ['a condition that does not parse', { steps: [step('a'), step('b', { condition: 'steps.a.output.ok ==' })] }, /step 'b': the condition does not parse: at 1:/],
  ['an empty condition', { steps: [step('a', { condition: '' })] }, /step 'a' \(steps\[0\]\): condition must NOT have fewer than 1 characters/],
  ['a definition with an unknown field', { steps: [step('a')], trigger: 'cron' }, /definition: unknown field 'trigger'/],
];

for (const [what, definition, message] of REFUSED) {
  test(`refused with 400 invalid_definition naming the step: ${what}`, async () => {
    const before = await s.ctx.c.workflows.count({});
    const r = await create(wsAdmin, { name: `refused ${what}`, workspaceId: ws.id, definition });
    isError(r, 400, 'invalid_definition');
    assert.match(r.body.error.message, message);
    assert.is(await s.ctx.c.workflows.count({}), before, 'nothing stored');
  });
}

test('an indirect dependency may be read; interpolation in nested params and arrays is accepted', async () => {
  const r = await create(wsAdmin, {
    name: 'indirect',
    workspaceId: ws.id,
    definition: {
      steps: [
        step('a'),
        step('b', { dependsOn: ['a'] }),
        step('c', { dependsOn: ['b'], params: { list: ['{{steps.a.output}}', { k: "{{ steps.a.output['x-y'][0] }}" }], s: '{{steps.a.status}}' } }),
      ],
    },
  });
  assert.is(r.status, 201, r.text);
});

test('update: PUT replaces, PATCH changes some fields; both check the definition; 403 below admin', async () => {
  const created = await create(wsAdmin, { name: 'Editable', workspaceId: ws.id, definition: { steps: [step('a')] } });
  const id = created.body.id;
  const put = await wsAdmin.api.put(`/api/workflows/${id}`, { name: 'Edited', description: 'new', definition: { steps: [step('a'), step('b')] } });
  assert.is(put.status, 200, put.text);
  assert.is(put.body.success, true);
  assert.is(put.body.workflow.name, 'Edited');
  assert.is(put.body.workflow.definition.steps.length, 2);
  const patch = await wsAdmin.api.patch(`/api/workflows/${id}`, { description: 'patched' });
  assert.is(patch.status, 200, patch.text);
  assert.is(patch.body.workflow.name, 'Edited');
  assert.is(patch.body.workflow.description, 'patched');
  const list = await member.api.get(`/api/workflows?workspaceId=${ws.id}`);
  assert.is(list.body.workflows.find((w: any) => w.id === id).stepCount, 2);

  const bad = await wsAdmin.api.patch(`/api/workflows/${id}`, { definition: { steps: [step('a', { dependsOn: ['zzz'] })] } });
  isError(bad, 400, 'invalid_definition');
  assert.match(bad.body.error.message, /step 'a'/);
  isError(await wsAdmin.api.patch(`/api/workflows/${id}`, {}), 400, 'validation_failed');
  isError(await wsAdmin.api.put(`/api/workflows/${id}`, { name: 'Nightly', definition: { steps: [step('a')] } }), 409, 'name_taken');
  isError(await operator.api.patch(`/api/workflows/${id}`, { name: 'Mine' }), 403, 'forbidden');
  isError(await outsider.api.patch(`/api/workflows/${id}`, { name: 'Mine' }), 404, 'not_found');
  const after = await member.api.get(`/api/workflows/${id}`);
  assert.is(after.body.workflow.name, 'Edited');
  assert.is(after.body.workflow.definition.steps.length, 2);
});

test('delete: 403 below admin; 200 removes the workflow, its schedules and runs', async () => {
  const created = await create(wsAdmin, { name: 'Doomed', workspaceId: ws.id, definition: { steps: [step('a')] } });
  const id = created.body.id;
  const run = await operator.api.post(`/api/workflows/${id}/run`, {});
  assert.is(run.status, 202, run.text);
  const sched = await wsAdmin.api.post('/api/schedules', { workflowId: id, cron: '0 3 * * *', timezone: 'Europe/Paris' });
  assert.is(sched.status, 201, sched.text);
  isError(await operator.api.del(`/api/workflows/${id}`), 403, 'forbidden');
  const del = await wsAdmin.api.del(`/api/workflows/${id}`);
  assert.is(del.status, 200, del.text);
  assert.equal(del.body, { success: true, runs: 1, schedules: 1 });
  isError(await member.api.get(`/api/workflows/${id}`), 404, 'not_found');
  isError(await member.api.get(`/api/workflows/${id}/runs/${run.body.runId}`), 404, 'not_found');
  assert.is(await s.ctx.c.workflowSchedules.count({ workflowId: id }), 0);
  assert.is(await s.ctx.c.workflowRuns.count({ workflowId: id }), 0);
  assert.is(await s.ctx.actors.exists('workflow-run', run.body.runId), false);
});

test('deleting a workspace deletes its workflows', async () => {
  const temp = await makeWorkspace(owner, 'Temporary');
  const created = await create(owner, { name: 'Temp flow', workspaceId: temp.id, definition: { steps: [step('a')] } });
  assert.is(created.status, 201);
  const del = await owner.api.del(`/api/workspaces/${temp.id}`);
  assert.is(del.status, 200, del.text);
  assert.is(await s.ctx.c.workflows.findById(created.body.id), null);
});

test.run();
