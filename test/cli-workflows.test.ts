/**
 * The admin CLI on workflows and the audit log, as a real `steward` process against a real
 * server: workflows list/run (--wait, by name)/runs/cancel and audit with its filters, each
 * table and --json checked against what the API says.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, type TestServer } from './helpers.js';
import type { TestUser } from './fixtures.js';
import { makeWorkspace, startWithOwner } from './people-helpers.js';
import { createWorkflow, ended, startRun, waitRun } from './workflows-helpers.js';
import { cliHome, fails, ok, tableRows, type CliHome } from './cli-helpers.js';
import { time } from '../src/cli/admin/output.js';

const test = suite('steward CLI: workflows, audit');
let s: TestServer;
let owner: TestUser;
let ws: { id: string; slug: string };
let cli: CliHome;
let quick: string;
let broken: string;
let slow: string;

const api = async (path: string) => {
  const r = await http(s.url, 'GET', path, { token: owner.token });
  assert.is(r.status, 200, r.text);
  return r.body;
};
const delay = (id: string, ms: number, extra: Record<string, unknown> = {}) => ({ id, name: id, action: 'delay', params: { ms }, ...extra });

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  ws = await makeWorkspace(owner, 'Flows');
  quick = await createWorkflow(owner, ws.id, { steps: [delay('first', 1), delay('second', 1, { dependsOn: ['first'] })] }, 'quick');
  broken = await createWorkflow(owner, ws.id, { steps: [delay('bad', -1)] }, 'broken');
  slow = await createWorkflow(owner, ws.id, { steps: [delay('long', 3_600_000)] }, 'slow');
  // Names are unique within a workspace, not across them.
  await createWorkflow(owner, ws.id, { steps: [delay('x', 1)] }, 'twin');
  await createWorkflow(owner, (await makeWorkspace(owner, 'Other')).id, { steps: [delay('x', 1)] }, 'twin');
  cli = await cliHome(owner.keys);
  assert.is((await cli.run('login', s.url)).code, 0);
});

test.after(async () => {
  await s.stop(true);
});

test('workflows list: --json as the API (filters too), the table for people', async () => {
  const all = ok(await cli.run('workflows', 'list', '--json'));
  assert.equal(all, await api('/api/workflows'));
  assert.is(all.workflows.length, 5);
  assert.equal(ok(await cli.run('workflows', 'list', '--workspace', ws.slug, '--created-by', owner.keys.did, '--json')), await api(`/api/workflows?workspaceId=${ws.slug}&createdBy=${encodeURIComponent(owner.keys.did)}`));
  const r = await cli.run('workflows', 'list');
  assert.is(r.code, 0);
  // The table names each workspace by its slug, as agents list does.
  const slugs = new Map((await api('/api/workspaces')).workspaces.map((w: any) => [w.id, w.slug]));
  assert.equal(new Set(slugs.values()).has(ws.slug), true);
  assert.equal(
    tableRows(r.stdout, ['ID', 'NAME', 'WORKSPACE', 'STEPS', 'UPDATED', 'DESCRIPTION']),
    all.workflows.map((w: any) => ({ ID: w.id, NAME: w.name, WORKSPACE: slugs.get(w.workspaceId), STEPS: String(w.stepCount), UPDATED: time(w.updatedAt), DESCRIPTION: '-' })),
  );
  assert.ok(r.stdout.includes(` ${ws.slug} `), r.stdout);
});

test('workflows run: by name, --wait until it ends (exit 0 completed, 1 failed), or at once with the run id', async () => {
  const done = await cli.run('workflows', 'run', 'quick', '--wait', '--params', '{"who":"cli"}');
  assert.is(done.code, 0, done.stderr);
  const runId = /^Run +(\S+)\n/.exec(done.stdout)?.[1];
  assert.ok(runId, done.stdout);
  const run = await api(`/api/workflows/${quick}/runs/${runId}`);
  assert.is(run.status, 'completed');
  assert.equal(run.params, { who: 'cli' });
  assert.match(done.stdout, new RegExp(`\\nWorkflow +${quick}\\nStatus +completed\\nStarted +${time(run.startedAt)} by ${owner.keys.did}\\n`));
  assert.equal(
    tableRows(done.stdout, ['STEP', 'STATUS', 'ATTEMPTS', 'DURATION', 'OUTPUT / ERROR']).map((x) => [x.STEP, x.STATUS, x['OUTPUT / ERROR']]),
    [
      ['first', 'completed', '{"ms":1}'],
      ['second', 'completed', '{"ms":1}'],
    ],
  );

  const waited = ok(await cli.run('workflows', 'run', quick, '--wait', '--json'));
  assert.equal(waited, await api(`/api/workflows/${quick}/runs/${waited.runId}`));

  const failed = await cli.run('workflows', 'run', 'broken', '--wait');
  assert.is(failed.code, 1);
  const failedId = /^Run +(\S+)\n/.exec(failed.stdout)?.[1];
  const failedRun = await api(`/api/workflows/${broken}/runs/${failedId}`);
  assert.is(failedRun.status, 'failed');
  assert.match(failed.stdout, /\nStatus +failed\n/);
  assert.is(failed.stderr, `steward: run ${failedId} failed${failedRun.error ? `: ${failedRun.error}` : ''}\n`);

  const started = ok(await cli.run('workflows', 'run', 'slow', '--json'));
  assert.equal(Object.keys(started).sort(), ['runId', 'status']);
  assert.is(started.status, 'running');
  assert.is((await api(`/api/workflows/${slow}/runs/${started.runId}`)).status, 'running');
  const text = await cli.run('workflows', 'run', slow);
  assert.match(text.stdout, new RegExp(`^Started run \\S+ of workflow ${slow} \\(running\\)\\.\\n$`));
});

test('workflows runs: the list (filters, pages) and one run, as the API says; cancel a running run, and one that has ended', async () => {
  const listed = ok(await cli.run('workflows', 'runs', 'slow', '--json'));
  assert.equal(listed, await api(`/api/workflows/${slow}/runs`));
  assert.is(listed.runs.length, 2);
  assert.equal(ok(await cli.run('workflows', 'runs', quick, '--status', 'completed', '--page', '2', '--page-size', '1', '--json')), await api(`/api/workflows/${quick}/runs?status=completed&page=2&pageSize=1`));
  const r = await cli.run('workflows', 'runs', 'quick');
  const page = await api(`/api/workflows/${quick}/runs`);
  assert.equal(
    tableRows(r.stdout, ['RUN', 'STATUS', 'STARTED', 'COMPLETED', 'STARTED BY', 'ERROR']),
    page.runs.map((x: any) => ({ RUN: x.runId, STATUS: x.status, STARTED: time(x.startedAt), COMPLETED: time(x.completedAt), 'STARTED BY': x.startedBy.did, ERROR: '-' })),
  );
  assert.ok(r.stdout.endsWith('page 1 of 1: 2 runs\n'));

  const one = listed.runs[0].runId;
  assert.equal(ok(await cli.run('workflows', 'runs', 'slow', one, '--json')), await api(`/api/workflows/${slow}/runs/${one}`));

  const cancelled = await cli.run('workflows', 'cancel', 'slow', one);
  assert.is(cancelled.code, 0, cancelled.stderr);
  assert.is(cancelled.stdout, `Cancelled run ${one} (cancelled).\n`);
  await waitRun(owner, slow, one, ended);
  assert.is((await api(`/api/workflows/${slow}/runs/${one}`)).status, 'cancelled');
  const again = await http(s.url, 'POST', `/api/workflows/${slow}/runs/${one}/cancel`, { token: owner.token });
  assert.is(again.status, 409);
  fails(await cli.run('workflows', 'cancel', 'slow', one), 1, `${again.body.error.message} (409 ${again.body.error.code})`);
  const other = listed.runs[1].runId;
  assert.is(ok(await cli.run('workflows', 'cancel', slow, other, '--json')).status, 'cancelled');

  fails(await cli.run('workflows', 'runs', 'nothing-by-this-name'), 4, 'no workflow nothing-by-this-name');
  fails(await cli.run('workflows', 'runs', 'slow', 'no-such-run'), 4, 'no-such-run');
  const twins = await cli.run('workflows', 'run', 'twin');
  fails(twins, 2, "2 workflows are named 'twin'; give one's id:");
});

test('audit: --json as the API for each filter; the table for people', async () => {
  // Something in the log from each kind: runs started and cancelled above, and one more now.
  await waitRun(owner, quick, await startRun(owner, quick), ended);
  const cases: Array<[string[], string]> = [
    [[], ''],
    [['--action', 'workflow.*'], 'action=workflow.*'],
    [['--action', 'workflow.run.cancel', '--target-type', 'workflow_run'], 'action=workflow.run.cancel&targetType=workflow_run'],
    [['--actor', owner.keys.did, '--target', quick], `actor=${encodeURIComponent(owner.keys.did)}&target=${quick}`],
    [['--since', '2020-01-01', '--until', '2999-01-01T00:00:00Z', '--page', '2', '--page-size', '3'], 'since=2020-01-01&until=2999-01-01T00%3A00%3A00Z&page=2&pageSize=3'],
  ];
  const outs = await Promise.all(cases.map(([args]) => cli.run('audit', ...args, '--json')));
  for (const [i, [args, query]] of cases.entries()) assert.equal(ok(outs[i]!), await api(`/api/audit?${query}`), `audit ${args.join(' ')}`);
  assert.ok(ok(outs[1]!).entries.length >= 5);

  const r = await cli.run('audit', '--action', 'workflow.*');
  assert.is(r.code, 0, r.stderr);
  const page = await api('/api/audit?action=workflow.*');
  const rows = tableRows(r.stdout, ['TIME', 'ACTOR', 'ACTION', 'TARGET', 'DETAILS']);
  assert.equal(
    rows.map((x) => [x.TIME, x.ACTOR, x.ACTION, x.TARGET]),
    page.entries.map((e: any) => [time(e.at), e.actor, e.action, `${e.targetType} ${e.target}`]),
  );
  const run = page.entries.find((e: any) => e.action === 'workflow.run');
  assert.ok(rows.some((x) => x.DETAILS === JSON.stringify(run.details)));
  assert.ok(r.stdout.endsWith(`page 1 of 1: ${page.total} entries\n`));
  assert.is((await cli.run('audit', '--action', 'nothing.at.all')).stdout, 'No entries match.\npage 1 of 1: 0 entries\n');
  fails(await cli.run('audit', '--since', 'yesterday'), 1, 'validation_failed');
});

test.run();
