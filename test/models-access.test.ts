import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, lastAfter, waitFor, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { isError, makeWorkspace, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { createModel, FakeLiteLlm, leaked, recordingClient, seenBodies } from './models-fake-proxy.js';
import type { StewardAgent } from '../src/agent/index.js';

const test = suite('workspace model access, proxy configured');
let s: TestServer;
let owner: TestUser;
let admin: ReturnType<typeof recordingClient>;
let proxy: FakeLiteLlm;
let wsA: { id: string; slug: string; name: string };
let wsB: { id: string; slug: string; name: string };
let adminA: ReturnType<typeof recordingClient>;
let memberA: ReturnType<typeof recordingClient>;
let adminB: ReturnType<typeof recordingClient>;
let agent: StewardAgent;
/** Every llm_config the live agent received, in order. */
const configs: any[] = [];
const models: Record<string, string> = {};
const secrets: string[] = [];

const grant = (api: ReturnType<typeof recordingClient>, ws: string, modelId: string) => api.post(`/api/workspaces/${ws}/models`, { modelId });
const revoke = (api: ReturnType<typeof recordingClient>, ws: string, modelId: string) => api.del(`/api/workspaces/${ws}/models?modelId=${modelId}`);

test.before(async () => {
  proxy = await new FakeLiteLlm().start();
  ({ s, owner } = await startWithOwner(proxy.env()));
  secrets.push(proxy.masterKey);
  admin = recordingClient(s.url, owner.token);
  wsA = await makeWorkspace(owner, 'Research');
  wsB = await makeWorkspace(owner, 'Sales');
  adminA = recordingClient(s.url, (await makeUser(s, { workspaces: { [wsA.id]: 'admin' } })).token);
  memberA = recordingClient(s.url, (await makeUser(s, { workspaces: { [wsA.id]: 'manager' } })).token);
  adminB = recordingClient(s.url, (await makeUser(s, { workspaces: { [wsB.id]: 'admin' } })).token);
  secrets.push('sk-openai-access-secret', 'sk-anthropic-access-secret');
  models.gpt = await createModel(admin, { name: 'GPT 4o', provider: 'openai', modelId: 'gpt-4o', apiKey: 'sk-openai-access-secret' });
  models.claude = await createModel(admin, { name: 'Claude Sonnet', provider: 'anthropic', modelId: 'claude-sonnet-4', apiKey: 'sk-anthropic-access-secret' });
  models.mistral = await createModel(admin, { name: 'Mistral', provider: 'mistral', modelId: 'mistral-large' });
  models.old = await createModel(admin, { name: 'Old One', provider: 'openai', modelId: 'gpt-3.5-turbo' });
  assert.is((await admin.put(`/api/admin/models/${models.old}`, { status: 'inactive' })).status, 200);
  agent = await readyAgent(s, owner, { name: 'researcher', workspace: wsA.id });
  agent.on('llmConfig', (c: unknown) => configs.push(c));
  // The config sent when the agent became ready may still be on its way.
  await waitFor(() => agent.llmConfig !== null);
  if (configs.length === 0) configs.push(agent.llmConfig);
});

test.after(async () => {
  await stopAll(agent);
  await s.stop(true);
  await proxy.close();
});

test('the agent got an empty llm_config when it connected (nothing configured yet)', () => {
  assert.equal(configs[0], {});
});

test('first grant: /key/generate scoped to the model, the key stored sealed, llm_config pushed to the live agent', async () => {
  proxy.clearCalls();
  const seen = configs.length;
  const r = await grant(adminA, wsA.id, models.gpt!);
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { ok: true });

  assert.equal(proxy.calls.map((c) => c.path), ['/key/generate']);
  const call = proxy.calls[0]!;
  assert.is(call.headers.authorization, `Bearer ${proxy.masterKey}`);
  assert.equal(Object.keys(call.body).sort(), ['key_alias', 'metadata', 'models']);
  assert.equal(call.body.models, ['openai/gpt-4o']);
  assert.match(call.body.key_alias, new RegExp(`^steward-workspace-${wsA.id}-`));
  assert.equal(call.body.metadata, { steward_workspace_id: wsA.id, steward_workspace_slug: wsA.slug, managed_by: 'steward' });
  const issued = proxy.keyOf(wsA.id)!;
  assert.ok(issued);
  secrets.push(issued.key);

  const stored = await s.ctx.c.workspaceLlmKeys.findById(wsA.id);
  assert.ok(stored);
  assert.not.ok(JSON.stringify(stored).includes(issued.key), 'the virtual key is not stored in clear');
  assert.is(s.ctx.secrets.open(stored!.keySealed, `workspace-llm-key:${wsA.id}`), issued.key);

  const frame = await lastAfter(configs, seen);
  assert.equal(frame, { proxy: { baseUrl: proxy.url, workspaces: [{ workspaceId: wsA.id, apiKey: issued.key, models: ['openai/gpt-4o'] }] } });

  const list = await memberA.get(`/api/workspaces/${wsA.slug}/models`);
  assert.is(list.status, 200, list.text);
  assert.is(list.body.hasVirtualKey, true);
  assert.equal(list.body.models.map((m: any) => m.proxyModelName), ['openai/gpt-4o']);
  assert.ok(await s.ctx.c.audit.findOne({ action: 'workspace.model.grant', target: wsA.id }));
});

test('a second grant refreshes the same key with /key/update scoped to exactly both models', async () => {
  proxy.clearCalls();
  const seen = configs.length;
  assert.is((await grant(adminA, wsA.slug, models.claude!)).status, 200);
  const key = proxy.keyOf(wsA.id)!.key;
  assert.equal(proxy.calls.map((c) => [c.path, c.body]), [['/key/update', { key, models: ['anthropic/claude-sonnet', 'openai/gpt-4o'] }]]);
  assert.is(proxy.keys.size, 1, 'no second key');
  const frame = await lastAfter(configs, seen);
  assert.equal(frame.proxy.workspaces[0].models, ['anthropic/claude-sonnet', 'openai/gpt-4o']);
});

test('granting a model again answers 200 and brings the key in line (the way to retry)', async () => {
  proxy.clearCalls();
  assert.is((await grant(adminA, wsA.id, models.claude!)).status, 200);
  assert.equal(proxy.calls.map((c) => c.path), ['/key/update']);
  assert.is(await s.ctx.c.workspaceModels.count({ workspaceId: wsA.id }), 2);
});

test('who may grant: workspace admins of that workspace and global admins; others 403/404/401', async () => {
  isError(await grant(memberA, wsA.id, models.mistral!), 403, 'forbidden');
  isError(await grant(adminB, wsA.id, models.mistral!), 404, 'not_found');
  isError(await http(s.url, 'POST', `/api/workspaces/${wsA.id}/models`, { json: { modelId: models.mistral } }), 401, 'unauthorized');
  isError(await revoke(memberA, wsA.id, models.gpt!), 403, 'forbidden');
  isError(await revoke(adminB, wsA.id, models.gpt!), 404, 'not_found');
  assert.is(await s.ctx.c.workspaceModels.count({ workspaceId: wsA.id }), 2, 'nothing changed');
});

test('grant: bad input is 400, an unknown model or workspace 404, an inactive model 409', async () => {
  proxy.clearCalls();
  isError(await grant(admin, wsA.id, 'not-a-uuid'), 400, 'validation_failed');
  isError(await admin.post(`/api/workspaces/${wsA.id}/models`, {}), 400, 'validation_failed');
  isError(await grant(admin, wsA.id, '00000000-0000-4000-8000-000000000000'), 404, 'model_not_found');
  isError(await grant(admin, 'no-such-workspace', models.mistral!), 404, 'not_found');
  isError(await grant(admin, wsA.id, models.old!), 409, 'model_inactive');
  isError(await admin.del(`/api/workspaces/${wsA.id}/models`), 400, 'validation_failed');
  isError(await revoke(admin, wsA.id, models.mistral!), 404, 'model_not_granted');
  assert.is(proxy.calls.length, 0);
});

test('grant with the proxy failing: 502, no access row, and no key left behind in the proxy', async () => {
  const keysBefore = proxy.keys.size;
  proxy.fail('/key/generate', { status: 500, apply: true });
  const r = await grant(adminB, wsB.id, models.mistral!);
  isError(r, 502, 'proxy_error');
  assert.is(await s.ctx.c.workspaceModels.count({ workspaceId: wsB.id }), 0);
  assert.is(await s.ctx.c.workspaceLlmKeys.count({ _id: wsB.id }), 0);
  assert.is(proxy.keys.size, keysBefore, 'the key the proxy made is deleted by its alias');
  assert.equal(proxy.calls.slice(-2).map((c) => c.path), ['/key/generate', '/key/delete']);

  proxy.fail('/key/update', { status: 500 });
  isError(await grant(adminA, wsA.id, models.mistral!), 502, 'proxy_error');
  assert.is(await s.ctx.c.workspaceModels.count({ workspaceId: wsA.id, modelId: models.mistral }), 0, 'the grant is undone');
  assert.equal(proxy.keyOf(wsA.id)!.models, ['anthropic/claude-sonnet', 'openai/gpt-4o'], "the key's scope is unchanged");
});

test('two grants at once to a workspace without a key make exactly one key', async () => {
  proxy.clearCalls();
  const [a, b] = await Promise.all([grant(adminB, wsB.id, models.mistral!), grant(adminB, wsB.id, models.gpt!)]);
  assert.is(a.status, 200, a.text);
  assert.is(b.status, 200, b.text);
  assert.equal(proxy.calls.map((c) => c.path), ['/key/generate', '/key/update']);
  const key = proxy.keyOf(wsB.id)!;
  secrets.push(key.key);
  assert.equal(key.models, ['mistral/mistral', 'openai/gpt-4o']);
});

test('revoke: /key/update without the model; the agent gets the narrower list', async () => {
  proxy.clearCalls();
  const seen = configs.length;
  const r = await revoke(adminA, wsA.id, models.gpt!);
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { ok: true });
  const key = proxy.keyOf(wsA.id)!.key;
  assert.equal(proxy.calls.map((c) => [c.path, c.body]), [['/key/update', { key, models: ['anthropic/claude-sonnet'] }]]);
  assert.is(await s.ctx.c.workspaceModels.count({ workspaceId: wsA.id, modelId: models.gpt }), 0);
  const frame = await lastAfter(configs, seen);
  assert.equal(frame.proxy.workspaces, [{ workspaceId: wsA.id, apiKey: key, models: ['anthropic/claude-sonnet'] }]);
  assert.ok(await s.ctx.c.audit.findOne({ action: 'workspace.model.revoke', target: wsA.id }));
});

test('revoke with the proxy failing: 502 and the access stays', async () => {
  proxy.fail('/key/delete', { status: 500 }); // claude is the last model: its revocation deletes the key
  isError(await revoke(adminA, wsA.id, models.claude!), 502, 'proxy_error');
  assert.is(await s.ctx.c.workspaceModels.count({ workspaceId: wsA.id, modelId: models.claude }), 1);
});

test('revoking the last model deletes the key (an empty list would mean every model to LiteLLM)', async () => {
  proxy.clearCalls();
  const seen = configs.length;
  const key = proxy.keyOf(wsA.id)!.key;
  assert.is((await revoke(adminA, wsA.id, models.claude!)).status, 200);
  assert.equal(proxy.calls.map((c) => [c.path, c.body]), [['/key/delete', { keys: [key] }]]);
  assert.is(proxy.keyOf(wsA.id), null);
  assert.is(await s.ctx.c.workspaceLlmKeys.count({ _id: wsA.id }), 0);
  assert.is((await memberA.get(`/api/workspaces/${wsA.id}/models`)).body.hasVirtualKey, false);
  assert.equal(await lastAfter(configs, seen), {}, 'the agent has no proxy access left');
});

test('deleting a model removes every workspace access to it and refreshes the keys', async () => {
  assert.is((await grant(adminA, wsA.id, models.gpt!)).status, 200);
  const keyA = proxy.keyOf(wsA.id)!.key;
  secrets.push(keyA);
  const keyB = proxy.keyOf(wsB.id)!.key;
  proxy.clearCalls();
  const seen = configs.length;
  const r = await admin.del(`/api/admin/models/${models.gpt}`);
  assert.is(r.status, 200, r.text);
  const calls = proxy.calls.map((c) => [c.path, c.body]);
  assert.equal(calls[0], ['/model/delete', { id: models.gpt }], 'the proxy model goes first');
  assert.equal(
    calls.slice(1).sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    [
      ['/key/delete', { keys: [keyA] }],
      ['/key/update', { key: keyB, models: ['mistral/mistral'] }],
    ],
  );
  assert.is(await s.ctx.c.workspaceModels.count({ modelId: models.gpt }), 0);
  assert.equal((await adminB.get(`/api/workspaces/${wsB.id}/models`)).body.models.map((m: any) => m.name), ['Mistral']);
  assert.equal(await lastAfter(configs, seen), {});
});

test('deleting a workspace deletes its key in the proxy and its access rows', async () => {
  const keyB = proxy.keyOf(wsB.id)!.key;
  proxy.clearCalls();
  const r = await admin.del(`/api/workspaces/${wsB.id}`);
  assert.is(r.status, 200, r.text);
  assert.equal(proxy.calls.map((c) => [c.path, c.body]), [['/key/delete', { keys: [keyB] }]]);
  assert.is(proxy.keyOf(wsB.id), null);
  assert.is(await s.ctx.c.workspaceLlmKeys.count({ _id: wsB.id }), 0);
  assert.is(await s.ctx.c.workspaceModels.count({ workspaceId: wsB.id }), 0);
});

test('no response body ever held a provider key, a virtual key or the master key', () => {
  assert.ok(seenBodies.length > 20);
  assert.equal(leaked([...secrets, ...proxy.issued]), []);
});

test.run();

// --- without the proxy --------------------------------------------------------------------------

const off = suite('workspace model access, proxy not configured');
let so: TestServer;
let ownerO: TestUser;
let watcher: FakeLiteLlm;

off.before(async () => {
  watcher = await new FakeLiteLlm().start();
  ({ s: so, owner: ownerO } = await startWithOwner({ PROXY_MASTER_KEY: watcher.masterKey }));
});
off.after(async () => {
  await so.stop(true);
  await watcher.close();
});

off('grant and revoke keep the access list only: no key, no proxy call', async () => {
  const api = recordingClient(so.url, ownerO.token);
  const m = (await api.post('/api/admin/models', { name: 'Plain', provider: 'openai', modelId: 'gpt-4o' })).body.model.id;
  const ws = so.ctx.defaultWorkspace._id;
  assert.is((await api.post(`/api/workspaces/${ws}/models`, { modelId: m })).status, 200);
  let list = await api.get(`/api/workspaces/${ws}/models`);
  assert.equal(list.body.models.map((x: any) => x.id), [m]);
  assert.is(list.body.hasVirtualKey, false);
  assert.is((await api.del(`/api/workspaces/${ws}/models?modelId=${m}`)).status, 200);
  list = await api.get(`/api/workspaces/${ws}/models`);
  assert.equal(list.body.models, []);
  assert.is(watcher.calls.length, 0);
});

off.run();
