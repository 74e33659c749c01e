/**
 * JSON nested thousands of levels deep parses, but cannot be answered or stored: it is refused at
 * the boundary (400 naming the limit; an invalid frame on /ws/agent) and nothing changes.
 */
import { createHmac } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, type TestServer } from './helpers.js';
import type { TestUser } from './fixtures.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../src/domain/json-depth.js';
import { isError, makeChannel, makeWorkspace, startWithOwner } from './channels-helpers.js';
import { readyAgent, readyRawAgent, stopAll } from './fleet-helpers.js';
import { createWorkflow } from './workflows-helpers.js';
import type { StewardAgent } from '../src/agent/index.js';

const test = suite('json depth');
let s: TestServer;
let owner: TestUser;
let ws: { id: string };
let agent: StewardAgent;
const intentsSeen: unknown[] = [];

/** JSON text of `levels` objects nested in one another. */
const deep = (levels: number) => `${'{"a":'.repeat(levels)}0${'}'.repeat(levels)}`;
const SECRET = 'whsec-0123456789abcdef0123456789abcdef';

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  ws = await makeWorkspace(owner, 'Deep');
  agent = await readyAgent(s, owner, {
    workspace: ws.id,
    capabilities: ['api_call'],
    onIntent: async ({ params }) => {
      intentsSeen.push(params);
      return { ok: true };
    },
  });
});

test.after(async () => {
  await stopAll(agent);
  await s.stop(true);
});

/** A raw JSON request as the owner. */
const send = (method: string, path: string, raw: string) =>
  http(s.url, method, path, { raw, token: owner.token, headers: { 'content-type': 'application/json' } });

function isTooDeep(r: { status: number; body: any; text: string }): void {
  isError(r, 400, 'validation_failed');
  assert.match(r.body.error.message, new RegExp(`more than ${MAX_JSON_DEPTH} levels`));
}

test('depth counts brackets outside strings only, in text and in UTF-8 bytes', () => {
  const inString = JSON.stringify({ s: '[{'.repeat(1000), t: 'a\\"[[[[', u: 'é{[' });
  assert.is(nestsDeeperThan(inString), false);
  assert.is(nestsDeeperThan(Buffer.from(inString)), false);
  assert.is(nestsDeeperThan(deep(MAX_JSON_DEPTH)), false);
  assert.is(nestsDeeperThan(deep(MAX_JSON_DEPTH + 1)), true);
  assert.is(nestsDeeperThan(Buffer.from(`{"é":"\\\\",${'['.repeat(MAX_JSON_DEPTH)}]}`)), true);
  assert.is(nestsDeeperThan('[]'.repeat(10_000)), false, 'siblings do not add up');
});

test('message metadata nested 5,000 levels deep is 400 and nothing is posted; 60 levels is fine', async () => {
  const ch = await makeChannel(owner, { name: 'deep', workspaceId: ws.id });
  const path = `/api/channels/${ch.id}/messages`;
  isTooDeep(await send('POST', path, `{"content":"hi","metadata":${deep(5000)}}`));
  isTooDeep(await send('POST', path, `{"content":"hi","metadata":${deep(MAX_JSON_DEPTH)}}`));
  assert.equal((await owner.api.get(path)).body.messages, []);
  const ok = await send('POST', path, `{"content":"hi","metadata":${deep(60)}}`);
  assert.is(ok.status, 201, ok.text);
});

test('intent params nested 5,000 levels deep are 400 and the agent gets nothing', async () => {
  const path = `/api/agents/${encodeURIComponent(agent.did)}/intents`;
  isTooDeep(await send('POST', path, `{"action":"api_call","params":${deep(5000)}}`));
  assert.equal(intentsSeen, []);
  const ok = await send('POST', path, `{"action":"api_call","params":{"q":1}}`);
  assert.is(ok.status, 200, ok.text);
  assert.equal(intentsSeen, [{ q: 1 }]);
});

test('workflow definitions and run params nested deep are 400; no workflow or run is stored', async () => {
  const step = (params: string) => `{"id":"d","name":"d","action":"delay","params":${params}}`;
  isTooDeep(await send('POST', '/api/workflows', `{"name":"deep","workspaceId":"${ws.id}","definition":{"steps":[${step(deep(5000))}]}}`));
  assert.is(await s.ctx.c.workflows.count({ name: 'deep' }), 0);

  const wf = await createWorkflow(owner, ws.id, { steps: [{ id: 'd', name: 'd', action: 'delay', params: { ms: 1 } }] });
  isTooDeep(await send('POST', `/api/workflows/${wf}/run`, `{"params":${deep(10_000)}}`));
  isTooDeep(await send('POST', `/api/workflows/${wf}/run`, `{"params":{"list":[${deep(4000)}]}}`));
  assert.is((await owner.api.get(`/api/workflows/${wf}/runs`)).body.total, 0);
});

test('a correctly signed webhook delivery nested deep is 400 and nothing is posted', async () => {
  const ch = await makeChannel(owner, { name: 'hook', workspaceId: ws.id });
  const b = await owner.api.post(`/api/channels/${ch.id}/bridges`, {
    externalService: 'webhook',
    externalChannelId: 'ext-hook',
    externalChannelName: 'hook',
    externalWorkspaceId: 'platform',
    config: { secret: SECRET },
  });
  assert.is(b.status, 201, b.text);
  const raw = `{"message":"hi","metadata":${deep(20_000)}}`;
  const r = await http(s.url, 'POST', `/api/bridges/webhook/${b.body.bridge.id}/incoming`, {
    raw,
    headers: { 'content-type': 'application/json', 'x-signature': `sha256=${createHmac('sha256', SECRET).update(raw).digest('hex')}` },
  });
  isTooDeep(r);
  assert.equal((await owner.api.get(`/api/channels/${ch.id}/messages`)).body.messages, []);
});

test('a frame nested deep is an invalid frame on /ws/agent; the agent stays connected', async () => {
  const { raw } = await readyRawAgent(s, owner);
  raw.send(`{"type":"intent_result","intentId":"x","ok":true,"output":${deep(5000)}}`);
  const error = await raw.next('error');
  assert.is(error.code, 'too_deep');
  assert.match(error.message, new RegExp(`more than ${MAX_JSON_DEPTH} levels`));
  assert.is(raw.closed, null);
  raw.close();
});

test.run();
