import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import cron from 'node-cron';
import { client, waitFor, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { isError, makeWorkspace, startWithOwner } from './people-helpers.js';
import { createWorkflow, ended, waitRun } from './workflows-helpers.js';

const test = suite('workflows: schedules');
let s: TestServer;
let owner: TestUser;
let ws: { id: string; slug: string };
let admin: TestUser;
let operator: TestUser;
let member: TestUser;
let outsider: TestUser;
let wf: string;

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  ws = await makeWorkspace(owner, 'Cron');
  admin = await makeUser(s, { workspaces: { [ws.id]: 'admin' } });
  operator = await makeUser(s, { workspaces: { [ws.id]: 'operator' } });
  member = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  outsider = await makeUser(s);
  wf = await createWorkflow(admin, ws.id, { steps: [{ id: 'wait', name: 'wait', action: 'delay', params: { ms: '{{params.ms}}' } }] });
});

test.after(async () => {
  await s.stop(true);
});

/** The hour (0-23) in a time zone at a moment. */
const hourIn = (zone: string, at: Date) => Number(new Intl.DateTimeFormat('en-GB', { timeZone: zone, hour: '2-digit', hourCycle: 'h23' }).format(at));

const schedule = (who: TestUser, body: Record<string, unknown>) => who.api.post('/api/schedules', body);

test('create: 201 with the schedule; its next firing is computed in its time zone; listed and read back', async () => {
  const r = await schedule(admin, { workflowId: wf, cron: '0 9 * * *', timezone: 'Asia/Tokyo', params: { ms: 1 } });
  assert.is(r.status, 201, r.text);
  assert.is(r.body.success, true);
  const sc = r.body.schedule;
  assert.equal(Object.keys(sc).sort(), ['createdAt', 'createdBy', 'cron', 'id', 'lastRunAt', 'lastRunId', 'nextRunAt', 'params', 'timezone', 'workflowId', 'workspaceId']);
  assert.is(sc.workflowId, wf);
  assert.is(sc.workspaceId, ws.id);
  assert.is(sc.timezone, 'Asia/Tokyo');
  assert.equal(sc.params, { ms: 1 });
  assert.is(sc.createdBy, admin.user.did);
  // 09:00 in Tokyo (UTC+9, no daylight saving) is 00:00 UTC.
  assert.match(sc.nextRunAt, /T00:00:00\.000Z$/);
  assert.ok(Date.parse(sc.nextRunAt) > Date.now());
  const ny = await schedule(admin, { workflowId: wf, cron: '30 9 * * 1', timezone: 'America/New_York' });
  assert.is(ny.status, 201, ny.text);
  const next = new Date(ny.body.schedule.nextRunAt);
  assert.is(hourIn('America/New_York', next), 9);
  assert.is(next.getUTCMinutes(), 30);
  assert.is(new Intl.DateTimeFormat('en-US', { timeZone: 'America/New_York', weekday: 'short' }).format(next), 'Mon');
  const utc = await schedule(admin, { workflowId: wf, cron: '15 * * * *' });
  assert.is(utc.body.schedule.timezone, 'UTC', 'the zone defaults to UTC');

  const list = await member.api.get('/api/schedules');
  assert.is(list.status, 200);
  assert.is(list.body.success, true);
  assert.equal(list.body.schedules.map((x: any) => x.id).sort(), [sc.id, ny.body.schedule.id, utc.body.schedule.id].sort());
  assert.equal((await member.api.get(`/api/schedules?workflowId=${wf}`)).body.schedules.length, 3);
  assert.equal((await owner.api.get(`/api/schedules?workspaceId=${ws.slug}`)).body.schedules.length, 3);
  assert.equal((await outsider.api.get('/api/schedules')).body.schedules, []);
  const one = await member.api.get(`/api/schedules/${sc.id}`);
  assert.is(one.body.schedule.cron, '0 9 * * *');
  isError(await outsider.api.get(`/api/schedules/${sc.id}`), 404, 'not_found');
  assert.ok(await s.ctx.c.audit.findOne({ action: 'schedule.create', target: sc.id }));
  for (const x of [sc, ny.body.schedule, utc.body.schedule]) assert.is((await admin.api.del(`/api/schedules/${x.id}`)).status, 200);
});

test('create: 400 for a bad cron expression or time zone, nothing stored', async () => {
  const before = await s.ctx.c.workflowSchedules.count({});
  const bad: Array<[Record<string, unknown>, RegExp]> = [
    [{ cron: '61 * * * *' }, /body field 'cron': not a valid cron expression/],
    [{ cron: 'every day' }, /body field 'cron': not a valid cron expression/],
    [{ cron: '* * *' }, /body field 'cron': not a valid cron expression \(expected 5 or 6 fields/],
    [{ cron: '' }, /body field 'cron'/],
    [{ cron: '0 9 * * *', timezone: 'Mars/Olympus' }, /body field 'timezone': not an IANA time zone name/],
    [{ cron: '0 9 * * *', timezone: '+01:00' }, /body field 'timezone': not an IANA time zone name/],
    [{ cron: '0 9 * * *', params: 'x' }, /body field 'params'/],
  ];
  for (const [body, message] of bad) {
    const r = await schedule(admin, { workflowId: wf, ...body });
    isError(r, 400, 'validation_failed');
    assert.match(r.body.error.message, message);
  }
  isError(await schedule(admin, { cron: '0 9 * * *' }), 400, 'validation_failed');
  assert.is(await s.ctx.c.workflowSchedules.count({}), before);
});

test('create and delete: workspace admin or global admin; 404 for workflows the caller does not see', async () => {
  isError(await schedule(operator, { workflowId: wf, cron: '0 9 * * *' }), 403, 'forbidden');
  isError(await schedule(outsider, { workflowId: wf, cron: '0 9 * * *' }), 404, 'not_found');
  isError(await schedule(admin, { workflowId: 'nope', cron: '0 9 * * *' }), 404, 'not_found');
  const r = await schedule(owner, { workflowId: wf, cron: '0 9 * * *' });
  assert.is(r.status, 201);
  const id = r.body.schedule.id;
  isError(await operator.api.del(`/api/schedules/${id}`), 403, 'forbidden');
  isError(await outsider.api.del(`/api/schedules/${id}`), 404, 'not_found');
  assert.ok(cron.getTasks().has(`workflow-schedule-${id}`) || [...cron.getTasks().values()].some((t) => t.name === `workflow-schedule-${id}`));
  const del = await admin.api.del(`/api/schedules/${id}`);
  assert.is(del.status, 200, del.text);
  assert.equal(del.body, { success: true });
  isError(await admin.api.get(`/api/schedules/${id}`), 404, 'not_found');
  assert.not.ok([...cron.getTasks().values()].some((t) => t.name === `workflow-schedule-${id}`), 'the task is gone');
  isError(await admin.api.del(`/api/schedules/${id}`), 404, 'not_found');
});

test('a per-second schedule fires runs in its time zone with its params, as its creator; a zone where the hour does not match never fires', async () => {
  // Seconds field first: every second, but only during this hour and the next one in Tokyo.
  const now = new Date();
  const h = hourIn('Asia/Tokyo', now);
  const hours = `${h},${(h + 1) % 24}`;
  const tokyo = await schedule(admin, { workflowId: wf, cron: `* * ${hours} * * *`, timezone: 'Asia/Tokyo', params: { ms: 2 } });
  assert.is(tokyo.status, 201, tokyo.text);
  // The same hours read in UTC are nine hours away from now: this one must not fire meanwhile.
  const utc = await schedule(admin, { workflowId: wf, cron: `* * ${hours} * * *`, timezone: 'UTC', params: { ms: 2 } });
  assert.is(utc.status, 201, utc.text);
  const tokyoId = tokyo.body.schedule.id;

  const runs = await waitFor(async () => {
    const list = await s.ctx.c.workflowRuns.find({ 'startedBy.scheduleId': tokyoId });
    return list.length >= 2 ? list : null;
  }, 10_000);
  const run = await waitRun(member, wf, runs[0]!._id, ended);
  assert.is(run.status, 'completed');
  assert.equal(run.params, { ms: 2 });
  assert.equal(run.steps.wait.output, { ms: 2 });
  assert.equal(run.startedBy, { type: 'schedule', scheduleId: tokyoId, userId: admin.user._id, did: admin.user.did });
  assert.is(await s.ctx.c.workflowRuns.count({ 'startedBy.scheduleId': utc.body.schedule.id }), 0);
  const listed = await member.api.get(`/api/schedules/${tokyoId}`);
  assert.ok(listed.body.schedule.lastRunId);
  assert.ok(listed.body.schedule.lastRunAt);
  assert.is((await admin.api.del(`/api/schedules/${tokyoId}`)).status, 200);
  assert.is((await admin.api.del(`/api/schedules/${utc.body.schedule.id}`)).status, 200);
});

test('a schedule whose creator may no longer run the workflow is skipped', async () => {
  // A schedule of someone who has since been demoted to member (made through the service, since
  // the route would refuse a member): every firing is skipped.
  const demoted = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  const doc = await s.ctx.schedules.create((await s.ctx.c.workflows.findById(wf))!, { cron: '* * * * * *', timezone: 'UTC', params: { ms: 1 } }, {
    kind: 'user',
    userId: demoted.user._id,
    did: demoted.user.did!,
    name: demoted.user.name,
    isOwner: false,
    isAdmin: false,
    role: 'member',
    sessionId: 'test',
    via: 'bearer',
  });
  const control = await schedule(admin, { workflowId: wf, cron: '* * * * * *', params: { ms: 1 } });
  await waitFor(async () => (await s.ctx.c.workflowRuns.count({ 'startedBy.scheduleId': control.body.schedule.id })) >= 2, 10_000);
  assert.is(await s.ctx.c.workflowRuns.count({ 'startedBy.scheduleId': doc._id }), 0);
  await admin.api.del(`/api/schedules/${doc._id}`);
  await admin.api.del(`/api/schedules/${control.body.schedule.id}`);
});

test('schedules are restored after a restart and fire again', async () => {
  const r = await schedule(admin, { workflowId: wf, cron: '* * * * * *', params: { ms: 1 } });
  assert.is(r.status, 201);
  const id = r.body.schedule.id;
  s = await s.restart();
  const restartedAt = new Date().toISOString();
  const a = { ...admin, api: client(s.url, admin.token) };
  const got = await a.api.get(`/api/schedules/${id}`);
  assert.is(got.status, 200);
  assert.ok(got.body.schedule.nextRunAt, 'armed again');
  await waitFor(async () => (await s.ctx.c.workflowRuns.count({ 'startedBy.scheduleId': id, startedAt: { $gt: restartedAt } })) >= 1, 10_000);
  assert.is((await a.api.del(`/api/schedules/${id}`)).status, 200);
});

test('deleting the user who created a schedule deletes the schedule', async () => {
  const leaver = await makeUser(s, { workspaces: { [ws.id]: 'admin' } });
  const r = await client(s.url, leaver.token).post('/api/schedules', { workflowId: wf, cron: '0 9 * * *' });
  assert.is(r.status, 201, r.text);
  const o = { ...owner, api: client(s.url, owner.token) };
  const del = await o.api.del(`/api/users/${encodeURIComponent(leaver.user.did!)}`);
  assert.is(del.status, 200, del.text);
  assert.is(await s.ctx.c.workflowSchedules.findById(r.body.schedule.id), null);
});

test.run();
