/**
 * What a run keeps of its steps' outputs: a run is stored as one document, so an output over the
 * step's limit, or over what is left of the run's budget, is kept as a marker with its size and
 * the beginning of its JSON text (docs/workflows.md). A broadcast is cut agent by agent, largest
 * first. A later step that refers to a truncated output fails saying so, and the run reads the
 * same after a restart. Runs on MongoDB too when MONGODB_URI is set.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { StewardAgent } from '../src/agent/index.js';
import type { TestServer } from './helpers.js';
import { ownerOf, type TestUser } from './fixtures.js';
import { makeWorkspace, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { createWorkflow, ended, startRun, waitRun } from './workflows-helpers.js';
import { backend, type Backend } from './store-backend.js';
import { PREVIEW_CHARS } from '../src/domain/workflow/output-limit.js';

const test = suite('workflows: bounded step outputs');
const STEP_MAX = 64 * 1024;
const RUN_MAX = 100 * 1024;
let store: Backend;
let s: TestServer;
let owner: TestUser;
const agents: StewardAgent[] = [];

/** An output of about `kib` KiB of JSON text. */
const output = (kib: number) => ({ blob: 'y'.repeat(kib * 1024) });

test.before(async () => {
  store = await backend();
  ({ s, owner } = await startWithOwner({
    WORKFLOW_STEP_OUTPUT_MAX_BYTES: String(STEP_MAX),
    WORKFLOW_RUN_OUTPUT_MAX_BYTES: String(RUN_MAX),
    ...store.env,
  }));
});

test.after(async () => {
  await stopAll(...agents);
  await s?.stop(true);
  await store?.drop();
});

test('a broadcast is cut agent by agent, a step over what is left of the run keeps a marker, and a step referring to it fails saying so', async () => {
  const ws = await makeWorkspace(owner, 'Outputs');
  const sized = async (kib: number) => {
    const agent = await readyAgent(s, owner, { workspace: ws.id, capabilities: ['api_call'], onIntent: (i) => output(Number(i.params.kib ?? kib)) });
    agents.push(agent);
    return agent;
  };
  const small = await sized(10);
  const medium = await sized(40);
  const large = await sized(50);
  const wf = await createWorkflow(owner, ws.id, {
    steps: [
      { id: 'all', name: 'ask all', action: 'api_call', params: {} },
      { id: 'kept', name: 'use a kept part', action: 'delay', params: { ms: 1, size: `{{steps.all.output["${small.did}"].output.blob}}` }, dependsOn: ['all'] },
      { id: 'one', name: 'ask one', agentDid: small.did, action: 'api_call', params: { kib: 60 }, dependsOn: ['all', 'kept'] },
      { id: 'use', name: 'pass it on', action: 'delay', params: { ms: 1, from: '{{steps.one.output.blob}}' }, dependsOn: ['one'], onError: 'continue' },
    ],
  });
  const runId = await startRun(owner, wf);
  const run = await waitRun(owner, wf, runId, ended);
  assert.is(run.status, 'completed', JSON.stringify(run.steps, (_k, v) => (typeof v === 'string' && v.length > 200 ? `${v.slice(0, 200)}…` : v)));

  // The broadcast: every agent's entry is there; the largest output alone was cut to fit 64 KiB.
  const all = run.steps.all.output;
  assert.equal(Object.keys(all).sort(), [small.did, medium.did, large.did].sort());
  assert.equal(all[small.did], { ok: true, output: output(10) });
  assert.equal(all[medium.did], { ok: true, output: output(40) });
  const cut = all[large.did];
  assert.is(cut.ok, true);
  assert.equal(Object.keys(cut.output).sort(), ['bytes', 'limit', 'preview', 'truncated']);
  assert.is(cut.output.truncated, true);
  assert.is(cut.output.bytes, Buffer.byteLength(JSON.stringify(output(50))));
  assert.is(cut.output.limit, STEP_MAX);
  assert.is(cut.output.preview, JSON.stringify(output(50)).slice(0, PREVIEW_CHARS));
  assert.ok(Buffer.byteLength(JSON.stringify(all)) <= STEP_MAX);
  assert.is(run.steps.kept.status, 'completed', 'a kept part is passed on');

  // The single step: 60 KiB fits its own limit but not what the run has left.
  const marker = run.steps.one.output;
  assert.is(run.steps.one.status, 'completed');
  assert.is(marker.truncated, true);
  assert.is(marker.bytes, Buffer.byteLength(JSON.stringify(output(60))));
  assert.ok(marker.limit < marker.bytes && marker.limit === RUN_MAX - Buffer.byteLength(JSON.stringify(all)) - Buffer.byteLength(JSON.stringify({ ms: 1 })), `limit ${marker.limit}`);
  assert.is(run.steps.use.status, 'failed');
  assert.match(run.steps.use.error, `the output of step 'one' was too large to keep (${marker.bytes} bytes, over the limit of ${marker.limit}) and is truncated`);

  // The run is stored as it was answered.
  const fresh = await s.restart();
  s = fresh;
  owner = await ownerOf(s);
  const again = await owner.api.get(`/api/workflows/${wf}/runs/${runId}`);
  assert.is(again.status, 200, again.text);
  assert.equal(again.body, run);
});

test.run();
