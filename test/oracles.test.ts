/**
 * Records a caller may not see answer exactly as missing ones (docs/api.md): each pair below asks
 * once about a record that exists out of the caller's sight and once about one that does not,
 * and the answers are the same, apart from echoing what the caller asked for.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPair } from '../src/domain/did.js';
import { http, type HttpResult, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { enc, makeAgent, makeWorkspace, startWithOwner } from './people-helpers.js';
import { makeChannel } from './channels-helpers.js';

const test = suite('existence oracles: what a caller may not see answers as missing');
let s: TestServer;
let owner: TestUser;
let hidden: { id: string; slug: string };
let mine: { id: string; slug: string };
/** Admin (operator and more) of `mine` only. */
let admin: TestUser;
let hiddenAgent: string;
const unknownAgent = generateKeyPair().did;

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  hidden = await makeWorkspace(owner, 'Secret Lab');
  mine = await makeWorkspace(owner, 'Open Shop');
  admin = await makeUser(s, { workspaces: { [mine.id]: 'admin' } });
  hiddenAgent = (await makeAgent(s, 'lab-bot', ['api_call'], hidden.id))._id;
  await s.ctx.c.grants.insertOne({
    _id: 'g-admin',
    userId: admin.user._id,
    userDid: admin.user.did!,
    agentDid: null,
    capabilities: ['api_call'],
    expiresAt: null,
    createdAt: new Date().toISOString(),
    createdBy: owner.user.did!,
  });
});

test.after(async () => {
  await s.stop(true);
});

/** Status, code and message, with what the caller asked for put back to a placeholder. */
const shape = (r: HttpResult, asked: string) => ({
  status: r.status,
  code: r.body?.error?.code,
  message: String(r.body?.error?.message ?? '').split(asked).join('<asked>'),
});

function alike(seen: HttpResult, seenAsked: string, missing: HttpResult, missingAsked: string, expectedStatus: number): void {
  assert.is(seen.status, expectedStatus, seen.text);
  assert.equal(shape(seen, seenAsked), shape(missing, missingAsked));
  // Nothing about the hidden workspace beyond what was asked.
  for (const secret of [hidden.slug, hidden.id, 'Secret Lab'].filter((x) => x !== seenAsked)) assert.not.ok(seen.text.includes(secret), `the answer names ${secret}: ${seen.text}`);
}

test('an intent to an agent of a workspace the caller is not in answers as one to an unknown DID', async () => {
  const path = (did: string) => `/api/agents/${enc(did)}/intents`;
  const body = { action: 'api_call', params: {} };
  alike(await admin.api.post(path(hiddenAgent), body), hiddenAgent, await admin.api.post(path(unknownAgent), body), unknownAgent, 404);
});

test('adding an agent of another workspace answers as adding an unknown one, and names no workspace', async () => {
  const add = (did: string) => admin.api.post(`/api/workspaces/${mine.id}/agents`, { agentDid: did });
  alike(await add(hiddenAgent), hiddenAgent, await add(unknownAgent), unknownAgent, 404);
  assert.is(await s.ctx.c.workspaceAgents.count({ agentDid: hiddenAgent }), 1, 'nothing added');
});

test("deleting another workspace's agent answers as deleting an unknown one", async () => {
  alike(await admin.api.del(`/api/agents/${enc(hiddenAgent)}`), hiddenAgent, await admin.api.del(`/api/agents/${enc(unknownAgent)}`), unknownAgent, 404);
  assert.ok(await s.ctx.c.agents.findById(hiddenAgent), 'not deleted');
});

test('skills of a workspace the caller is not in answer as those of an unknown one (403 as §7 says), by id or by slug', async () => {
  for (const route of ['skills', 'skills/some-skill', 'skills/some-skill/overrides', `agents/${enc(hiddenAgent)}/skills`]) {
    const bySlug = await admin.api.get(`/api/workspaces/${hidden.slug}/${route}`);
    alike(bySlug, hidden.slug, await admin.api.get(`/api/workspaces/no-such-place/${route}`), 'no-such-place', 403);
    const byId = await admin.api.get(`/api/workspaces/${hidden.id}/${route}`);
    alike(byId, hidden.id, await admin.api.get(`/api/workspaces/Xq3unknownId/${route}`), 'Xq3unknownId', 403);
  }
  const edit = await admin.api.patch(`/api/workspaces/${hidden.id}/skills/x`, { description: 'y' });
  alike(edit, hidden.id, await admin.api.patch('/api/workspaces/Xq3unknownId/skills/x', { description: 'y' }), 'Xq3unknownId', 403);
});

test('an unauthenticated registration naming a workspace answers alike whether it exists or not', async () => {
  const register = (workspace: string) =>
    http(s.url, 'POST', '/api/agents/register', {
      json: { name: `probe-${workspace}`, version: '1', capabilities: ['api_call'], publicKey: generateKeyPair().publicKey, workspace },
    });
  const existing = await register(hidden.slug);
  const missing = await register('no-such-workspace');
  assert.is(existing.status, 201, existing.text);
  assert.is(missing.status, 201, missing.text);
  assert.equal(Object.keys(existing.body).sort(), Object.keys(missing.body).sort());
  assert.is(existing.body.message, missing.body.message);
  // The admin who approves sees what was asked, and where the agent waits.
  const regs = (await owner.api.get('/api/registrations')).body.registrations as any[];
  const toMissing = regs.find((r) => r.agentDid === missing.body.agentId);
  assert.equal([toMissing.workspaceId, toMissing.requestedWorkspace], [s.ctx.defaultWorkspace._id, 'no-such-workspace']);
  const toHidden = regs.find((r) => r.agentDid === existing.body.agentId);
  assert.equal([toHidden.workspaceId, toHidden.requestedWorkspace], [hidden.id, null]);
});

test("the token usage series of a workspace or agent the caller may not see answers as an unknown one's", async () => {
  const series = (scope: string, id: string) => admin.api.get(`/api/stats/tokens/series?scope=${scope}&id=${enc(id)}`);
  assert.is((await series('workspace', mine.slug)).status, 200, 'a workspace of theirs has a series');
  alike(await series('workspace', hidden.slug), hidden.slug, await series('workspace', 'no-such-place'), 'no-such-place', 404);
  alike(await series('workspace', hidden.id), hidden.id, await series('workspace', 'Xq3unknownId'), 'Xq3unknownId', 404);
  alike(await series('agent', hiddenAgent), hiddenAgent, await series('agent', unknownAgent), unknownAgent, 404);
});

test('a channel owner adding an agent of a workspace they are not in answers as adding an unknown one', async () => {
  const ch = await makeChannel(admin, { name: 'Shop Floor', workspaceId: mine.id });
  const add = (did: string) => admin.api.post(`/api/channels/${ch.id}/members`, { memberDid: did, memberType: 'agent' });
  alike(await add(hiddenAgent), hiddenAgent, await add(unknownAgent), unknownAgent, 400);
  assert.is(await s.ctx.c.channelMembers.count({ channelId: ch.id, memberDid: hiddenAgent }), 0);
});

test('moving the primary workspace to one the caller cannot see answers as to one the agent is not in', async () => {
  const shared = (await makeAgent(s, 'shared-bot', ['api_call'], mine.id))._id;
  await s.ctx.c.workspaceAgents.insertOne({ _id: 'wa-shared', workspaceId: hidden.id, agentDid: shared, isPrimary: false, joinedAt: new Date().toISOString() });
  const drop = (primary: string) => admin.api.del(`/api/workspaces/${mine.id}/agents/${enc(shared)}?primary=${primary}`);
  alike(await drop(hidden.slug), hidden.slug, await drop('no-such-place'), 'no-such-place', 400);
  assert.is((await s.ctx.c.workspaceAgents.findOne({ agentDid: shared, isPrimary: true }))!.workspaceId, mine.id, 'unchanged');

  // Its detail lists the workspaces the caller may see (the primary one always).
  const detail = await admin.api.get(`/api/agents/${enc(shared)}`);
  assert.is(detail.status, 200, detail.text);
  assert.equal(detail.body.agent.workspaces.map((w: any) => w.id), [mine.id]);
  assert.not.ok(detail.text.includes(hidden.slug));
  const full = await owner.api.get(`/api/agents/${enc(shared)}`);
  assert.equal(full.body.agent.workspaces.map((w: any) => w.id).sort(), [mine.id, hidden.id].sort());
});

test.run();
