import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, lastAfter, waitFor, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { enc, fleet, isError, makeWorkspace, newAgent, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { createModel, FakeLiteLlm, leaked, recordingClient, seenBodies } from './models-fake-proxy.js';
import type { StewardAgent } from '../src/agent/index.js';
import type { Ed25519KeyPair } from '../src/domain/did.js';

type Api = ReturnType<typeof recordingClient>;

const test = suite('agent LLM config');
let s: TestServer;
let owner: TestUser;
let admin: Api;
let proxy: FakeLiteLlm;
let wsA: { id: string; slug: string; name: string };
let wsB: { id: string; slug: string; name: string };
let adminA: Api;
let managerA: Api;
let outsider: Api;
let alpha: StewardAgent; // online, primary workspace A, also in B
let betaKeys: Ed25519KeyPair; // offline, workspace A
let beta: StewardAgent | undefined;
let virtualKey = '';
const configs: any[] = [];
const models: Record<string, string> = {};
const MODEL_KEY = 'sk-registry-openai-secret-1234';
const MANUAL_KEY = 'sk-manual-agent-secret-5678';

const path = (did: string, what = 'llm-config') => `/api/agents/${enc(did)}/${what}`;
const EMPTY_VIEW = { provider: null, baseUrl: null, model: null, apiKeySet: false };

test.before(async () => {
  proxy = await new FakeLiteLlm().start();
  ({ s, owner } = await startWithOwner(proxy.env()));
  admin = recordingClient(s.url, owner.token);
  wsA = await makeWorkspace(owner, 'Ops');
  wsB = await makeWorkspace(owner, 'Lab');
  adminA = recordingClient(s.url, (await makeUser(s, { workspaces: { [wsA.id]: 'admin' } })).token);
  managerA = recordingClient(s.url, (await makeUser(s, { workspaces: { [wsA.id]: 'manager' } })).token);
  outsider = recordingClient(s.url, (await makeUser(s, { workspaces: { [wsB.id]: 'owner' } })).token);
  models.gpt = await createModel(admin, { name: 'GPT 4o', provider: 'openai', modelId: 'gpt-4o', apiKey: MODEL_KEY });
  models.local = await createModel(admin, { name: 'Local', provider: 'openai-compatible', modelId: 'qwen2.5', baseUrl: 'http://gpu-box:8000/v1' });
  models.claude = await createModel(admin, { name: 'Claude', provider: 'anthropic', modelId: 'claude-sonnet-4' });
  models.retired = await createModel(admin, { name: 'Retired', provider: 'openai', modelId: 'gpt-3.5-turbo' });
  assert.is((await admin.post(`/api/workspaces/${wsA.id}/models`, { modelId: models.gpt })).status, 200);
  assert.is((await admin.post(`/api/workspaces/${wsA.id}/models`, { modelId: models.local })).status, 200);
  assert.is((await admin.post(`/api/workspaces/${wsA.id}/models`, { modelId: models.retired })).status, 200);
  assert.is((await admin.put(`/api/admin/models/${models.retired}`, { status: 'inactive' })).status, 200);
  virtualKey = proxy.keyOf(wsA.id)!.key;

  alpha = await readyAgent(s, owner, { name: 'alpha', workspace: wsA.id });
  alpha.on('llmConfig', (c: unknown) => configs.push(c));
  await waitFor(() => alpha.llmConfig !== null);
  if (configs.length === 0) configs.push(alpha.llmConfig);
  assert.is((await admin.post(`/api/workspaces/${wsB.id}/agents`, { agentDid: alpha.did })).status, 201);

  const b = await readyAgent(s, owner, { name: 'beta', workspace: wsA.id });
  betaKeys = b['opts'].keys;
  await b.stop();
  await waitFor(() => !fleet(s).gateway.isOnline(b.did));
});

test.after(async () => {
  await stopAll(alpha, beta);
  await s.stop(true);
  await proxy.close();
});

test('at connect the agent got the workspace proxy access of its workspaces', () => {
  assert.equal(configs[0], { proxy: { baseUrl: proxy.url, workspaces: [{ workspaceId: wsA.id, apiKey: virtualKey, models: ['openai-compatible/local', 'openai/gpt-4o', 'openai/retired'] }] } });
});

test('GET with nothing stored: null fields, apiKeySet false', async () => {
  const r = await adminA.get(path(alpha.did));
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { config: EMPTY_VIEW });
});

test('PUT workspace routing: the workspace virtual key is resolved on the server and pushed at once', async () => {
  proxy.clearCalls();
  const seen = configs.length;
  const r = await adminA.put(path(alpha.did), { workspaceId: wsA.id, workspaceModelId: models.gpt });
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { ok: true, pushed: true, config: { provider: 'openai-compatible', model: 'openai/gpt-4o', apiKeySet: true } });
  const frame = await lastAfter(configs, seen);
  assert.equal(
    { ...frame, proxy: undefined },
    { provider: 'openai-compatible', model: 'openai/gpt-4o', baseUrl: proxy.url, apiKey: virtualKey, source: 'workspace', workspaceId: wsA.id, proxy: undefined },
  );
  assert.is(proxy.calls.length, 0, 'routing an agent does not change the proxy');
  const g = await managerA.get(path(alpha.did));
  assert.equal(g.body, { config: { provider: 'openai-compatible', baseUrl: proxy.url, model: 'openai/gpt-4o', apiKeySet: true } });
  const list = await admin.get(`/api/agents?q=alpha`);
  assert.is(list.body.agents[0].llmProvider, 'openai-compatible');
  assert.is(list.body.agents[0].llmModel, 'openai/gpt-4o');
  assert.ok(await s.ctx.c.audit.findOne({ action: 'agent.llm_config.set', target: alpha.did }));
});

test('PUT registry shortcut: the model stored key is resolved on the server', async () => {
  const seen = configs.length;
  const r = await adminA.put(path(alpha.did), { registryModelId: models.gpt, systemPrompt: 'You keep the lights on.' });
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { ok: true, pushed: true, config: { provider: 'openai', model: 'gpt-4o', apiKeySet: true } });
  const frame = await lastAfter(configs, seen);
  assert.is(frame.apiKey, MODEL_KEY, 'the provider key reaches the agent inside its socket');
  assert.is(frame.provider, 'openai');
  assert.is(frame.model, 'gpt-4o');
  assert.is(frame.baseUrl, '');
  assert.is(frame.source, 'registry');
  assert.is(frame.systemPrompt, 'You keep the lights on.');
  const detail = await admin.get(`/api/agents/${enc(alpha.did)}`);
  assert.is(detail.body.agent.llmSystemPrompt, 'You keep the lights on.');

  const local = await adminA.put(path(alpha.did), { registryModelId: models.local });
  assert.equal(local.body.config, { provider: 'openai-compatible', model: 'qwen2.5', apiKeySet: false });
  assert.equal((await adminA.get(path(alpha.did))).body.config, { provider: 'openai-compatible', baseUrl: 'http://gpu-box:8000/v1', model: 'qwen2.5', apiKeySet: false });
  const f2 = await lastAfter(configs, seen + 1);
  assert.is(f2.apiKey, undefined, 'no key stored, none sent');
  assert.is(f2.systemPrompt, 'You keep the lights on.', 'a PUT without systemPrompt keeps it');
});

test('PUT manual: values taken as given; the key stored sealed and only sent to the agent', async () => {
  const seen = configs.length;
  const r = await adminA.put(path(alpha.did), { provider: 'openai-compatible', model: 'llama3.1', baseUrl: 'http://10.0.0.7:11434/v1', apiKey: MANUAL_KEY });
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { ok: true, pushed: true, config: { provider: 'openai-compatible', model: 'llama3.1', apiKeySet: true } });
  const frame = await lastAfter(configs, seen);
  assert.equal({ ...frame, proxy: undefined, systemPrompt: undefined }, {
    provider: 'openai-compatible',
    model: 'llama3.1',
    baseUrl: 'http://10.0.0.7:11434/v1',
    apiKey: MANUAL_KEY,
    source: 'manual',
    proxy: undefined,
    systemPrompt: undefined,
  });
  const stored = await s.ctx.c.agents.findById(alpha.did);
  assert.not.ok(JSON.stringify(stored).includes(MANUAL_KEY));
  assert.is(s.ctx.secrets.open(stored!.llmApiKeySealed!, `agent-llm-key:${alpha.did}`), MANUAL_KEY);
  assert.equal((await adminA.get(path(alpha.did))).body.config, { provider: 'openai-compatible', baseUrl: 'http://10.0.0.7:11434/v1', model: 'llama3.1', apiKeySet: true });

  const plain = await adminA.put(path(alpha.did), { provider: 'anthropic', model: 'claude-sonnet-4' });
  assert.equal(plain.body.config, { provider: 'anthropic', model: 'claude-sonnet-4', apiKeySet: false });
  assert.is((await s.ctx.c.agents.findById(alpha.did))!.llmApiKeySealed, null, 'a PUT replaces the whole config, key included');
});

test('PUT: bad bodies are 400 naming the field or the modes, and change nothing', async () => {
  const before = (await adminA.get(path(alpha.did))).body;
  const cases: Array<[Record<string, unknown>, string, RegExp]> = [
    [{}, 'validation_failed', /workspaceId and workspaceModelId.*registryModelId.*provider and model/],
    [{ registryModelId: models.gpt, provider: 'openai', model: 'x' }, 'validation_failed', /one mode at a time/],
    [{ workspaceId: wsA.id }, 'validation_failed', /'workspaceModelId'/],
    [{ workspaceModelId: models.gpt }, 'validation_failed', /'workspaceId'/],
    [{ provider: 'openai' }, 'validation_failed', /'model'/],
    [{ model: 'gpt-4o' }, 'validation_failed', /'provider'/],
    [{ provider: 'openai-compatible', model: 'x' }, 'validation_failed', /'baseUrl'/],
    [{ provider: 'openai', model: 'x', baseUrl: 'nope' }, 'validation_failed', /'baseUrl'/],
    [{ provider: 'openai', model: 'x', temperature: 2 }, 'validation_failed', /temperature/],
    [{ workspaceId: wsB.id, workspaceModelId: models.gpt }, 'model_not_granted', /not granted to workspace/],
    [{ workspaceId: wsA.id, workspaceModelId: models.claude }, 'model_not_granted', /workspaceModelId/],
  ];
  for (const [body, code, re] of cases) {
    const r = await adminA.put(path(alpha.did), body);
    isError(r, 400, code);
    assert.match(r.body.error.message, re, JSON.stringify(body));
  }
  isError(await adminA.put(path(betaKeys.did), { workspaceId: wsB.id, workspaceModelId: models.gpt }), 400, 'agent_not_in_workspace');
  isError(await adminA.put(path(alpha.did), { registryModelId: '00000000-0000-4000-8000-000000000000' }), 404, 'model_not_found');
  isError(await adminA.put(path(alpha.did), { workspaceId: 'nowhere', workspaceModelId: models.gpt }), 400, 'agent_not_in_workspace'); // as for a workspace it is not in
  isError(await adminA.put(path(alpha.did), { registryModelId: models.retired }), 409, 'model_inactive');
  isError(await adminA.put(path(alpha.did), { workspaceId: wsA.id, workspaceModelId: models.retired }), 409, 'model_inactive');
  assert.equal((await adminA.get(path(alpha.did))).body, before);
});

test('who may: members of its workspaces read, admins of its primary workspace change; others 403, 404, 401', async () => {
  assert.is((await managerA.get(path(alpha.did))).status, 200);
  isError(await managerA.put(path(alpha.did), { provider: 'openai', model: 'gpt-4o' }), 403, 'forbidden');
  isError(await managerA.del(path(alpha.did)), 403, 'forbidden');
  // outsider owns workspace B, where alpha is a secondary member: may look, not change.
  assert.is((await outsider.get(path(alpha.did))).status, 200);
  isError(await outsider.put(path(alpha.did), { provider: 'openai', model: 'gpt-4o' }), 403, 'forbidden');
  isError(await outsider.get(path(betaKeys.did)), 404, 'not_found');
  isError(await outsider.get(path(betaKeys.did, 'workspace-llm')), 404, 'not_found');
  isError(await http(s.url, 'GET', path(alpha.did)), 401, 'unauthorized');
  isError(await adminA.get(path('did:key:z6MkNoSuchAgent')), 404, 'not_found');
  // A workspace admin may pick a registry model only when one of the agent's workspaces has it.
  isError(await adminA.put(path(alpha.did), { registryModelId: models.claude }), 403, 'forbidden');
  assert.is((await admin.put(path(alpha.did), { registryModelId: models.claude })).status, 200, 'an admin may assign any model');
});

test('the agent itself reads its own config and workspace models with its session, and nothing of others', async () => {
  const own = recordingClient(s.url, alpha.session!.token);
  const r = await own.get(path(alpha.did));
  assert.is(r.status, 200, r.text);
  assert.equal(r.body.config, { provider: 'anthropic', baseUrl: '', model: 'claude-sonnet-4', apiKeySet: false });
  assert.is((await own.get(path(alpha.did, 'workspace-llm'))).status, 200);
  isError(await own.get(path(betaKeys.did)), 404, 'not_found');
  isError(await own.put(path(alpha.did), { provider: 'openai', model: 'x' }), 403, 'forbidden');
});

test('GET workspace-llm: proxy settings and each workspace, primary first, with its models and key', async () => {
  const r = await managerA.get(path(alpha.did, 'workspace-llm'));
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, {
    proxyConfigured: true,
    proxyBaseUrl: proxy.url,
    workspaces: [
      {
        workspaceId: wsA.id,
        workspaceName: 'Ops',
        isPrimary: true,
        hasVirtualKey: true,
        models: [
          { id: models.gpt, name: 'GPT 4o', provider: 'openai', modelId: 'gpt-4o', proxyModelName: 'openai/gpt-4o' },
          { id: models.local, name: 'Local', provider: 'openai-compatible', modelId: 'qwen2.5', proxyModelName: 'openai-compatible/local' },
          { id: models.retired, name: 'Retired', provider: 'openai', modelId: 'gpt-3.5-turbo', proxyModelName: 'openai/retired' },
        ],
      },
      { workspaceId: wsB.id, workspaceName: 'Lab', isPrimary: false, hasVirtualKey: false, models: [] },
    ],
  });
});

test('an offline agent: pushed false, the config stored, and sent when it connects', async () => {
  const r = await adminA.put(path(betaKeys.did), { workspaceId: wsA.slug, workspaceModelId: models.local });
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { ok: true, pushed: false, config: { provider: 'openai-compatible', model: 'openai-compatible/local', apiKeySet: true } });
  beta = newAgent(s, { keys: betaKeys, name: 'beta' });
  await beta.waitFor('ready');
  await waitFor(() => (beta!.llmConfig as any)?.model === 'openai-compatible/local');
  assert.is((beta.llmConfig as any).apiKey, virtualKey);
  assert.is((beta.llmConfig as any).baseUrl, proxy.url);
});

test('agents connecting together each get their own config, with the proxy access of their own workspaces', async () => {
  const homes = [wsA, wsB, wsA];
  const first = await Promise.all(homes.map((ws, i) => readyAgent(s, owner, { name: `group-${i}`, workspace: ws.id })));
  const keys = first.map((a) => a['opts'].keys as Ed25519KeyPair);
  await stopAll(...first);
  await waitFor(() => keys.every((k) => !fleet(s).gateway.isOnline(k.did)));
  for (const [i, k] of keys.entries()) {
    const r = await admin.put(path(k.did), { provider: 'anthropic', model: `group-model-${i}` });
    assert.equal(r.body, { ok: true, pushed: false, config: { provider: 'anthropic', model: `group-model-${i}`, apiKeySet: false } }, r.text);
  }
  const again = keys.map((k, i) => newAgent(s, { keys: k, name: `group-${i}` }));
  try {
    await Promise.all(again.map((a) => a.waitFor('ready')));
    await waitFor(() => again.every((a) => (a.llmConfig as any)?.model !== undefined));
    for (const [i, a] of again.entries()) {
      const config = a.llmConfig as any;
      assert.is(config.model, `group-model-${i}`);
      assert.is(config.source, 'manual');
      // Workspace B has no key in the proxy (no model granted there): nothing to route through.
      const routed = homes[i] === wsA ? [{ workspaceId: wsA.id, apiKey: virtualKey, models: ['openai-compatible/local', 'openai/gpt-4o', 'openai/retired'] }] : undefined;
      assert.equal(config.proxy?.workspaces, routed, `group-${i}`);
    }
  } finally {
    await stopAll(...again);
  }
});

test('revoking the routed model clears the agents routed to it, and they are told', async () => {
  const seen = beta!.llmConfig;
  const r = await adminA.del(`/api/workspaces/${wsA.id}/models?modelId=${models.local}`);
  assert.is(r.status, 200, r.text);
  await waitFor(() => beta!.llmConfig !== seen);
  assert.is((beta!.llmConfig as any).model, undefined);
  assert.equal((await adminA.get(path(betaKeys.did))).body.config, EMPTY_VIEW);
});

test('DELETE: the stored config goes, the online agent gets a config without a model, {ok, pushed}', async () => {
  const seen = configs.length;
  await adminA.put(path(alpha.did), { provider: 'openai', model: 'gpt-4o', apiKey: MANUAL_KEY, systemPrompt: 'x' });
  await lastAfter(configs, seen);
  const after = configs.length;
  const r = await adminA.del(path(alpha.did));
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { ok: true, pushed: true });
  const frame = await lastAfter(configs, after);
  assert.equal(Object.keys(frame), ['proxy'], 'only the workspace proxy access is left');
  assert.equal((await adminA.get(path(alpha.did))).body, { config: EMPTY_VIEW });
  const stored = await s.ctx.c.agents.findById(alpha.did);
  assert.is(stored!.llmApiKeySealed, null);
  assert.is(stored!.llmSystemPrompt, null);
  assert.ok(await s.ctx.c.audit.findOne({ action: 'agent.llm_config.clear', target: alpha.did }));
  await beta!.stop();
  await waitFor(() => !fleet(s).gateway.isOnline(betaKeys.did));
  assert.equal((await adminA.del(path(betaKeys.did))).body, { ok: true, pushed: false });
});

test('an agent that leaves the workspace it routes through loses that config and is told at once', async () => {
  assert.is((await admin.post(`/api/workspaces/${wsB.id}/models`, { modelId: models.claude })).status, 200);
  const routed = await admin.put(path(alpha.did), { workspaceId: wsB.id, workspaceModelId: models.claude });
  assert.is(routed.status, 200, routed.text);
  assert.is(routed.body.config.model, 'anthropic/claude');
  await waitFor(() => (alpha.llmConfig as any)?.workspaceId === wsB.id);
  const seen = configs.length;
  const r = await admin.del(`/api/workspaces/${wsB.id}/agents/${enc(alpha.did)}`);
  assert.is(r.status, 200, r.text);
  const frame = await lastAfter(configs, seen);
  assert.is(frame.model, undefined, 'the routed model is gone from the frame');
  assert.ok(!JSON.stringify(frame).includes(wsB.id), 'no access to the workspace it left');
  assert.equal((await admin.get(path(alpha.did))).body, { config: EMPTY_VIEW });
});

test('no response body ever held a provider key, a virtual key, a manual key or the master key', () => {
  assert.ok(seenBodies.length > 30);
  assert.equal(leaked([MODEL_KEY, MANUAL_KEY, proxy.masterKey, ...proxy.issued]), []);
});

test.run();

// --- without the proxy --------------------------------------------------------------------------

const off = suite('agent LLM config, proxy not configured');
let so: TestServer;
let ownerO: TestUser;

off.before(async () => {
  ({ s: so, owner: ownerO } = await startWithOwner());
});
off.after(async () => {
  await so.stop(true);
});

off('workspace routing is 409 proxy_not_configured; workspace-llm says so; manual still works', async () => {
  const api = recordingClient(so.url, ownerO.token);
  const agent = await readyAgent(so, ownerO, { name: 'solo' });
  try {
    const m = (await api.post('/api/admin/models', { name: 'Plain', provider: 'openai', modelId: 'gpt-4o' })).body.model.id;
    const ws = so.ctx.defaultWorkspace._id;
    assert.is((await api.post(`/api/workspaces/${ws}/models`, { modelId: m })).status, 200);
    isError(await api.put(path(agent.did), { workspaceId: ws, workspaceModelId: m }), 409, 'proxy_not_configured');
    const w = await api.get(path(agent.did, 'workspace-llm'));
    assert.is(w.body.proxyConfigured, false);
    assert.is(w.body.proxyBaseUrl, '');
    assert.equal(w.body.workspaces[0].models.map((x: any) => x.id), [m]);
    assert.is(w.body.workspaces[0].hasVirtualKey, false);
    const r = await api.put(path(agent.did), { registryModelId: m });
    assert.equal(r.body, { ok: true, pushed: true, config: { provider: 'openai', model: 'gpt-4o', apiKeySet: false } });
    await waitFor(() => (agent.llmConfig as any)?.model === 'gpt-4o');
    assert.equal(agent.llmConfig, { provider: 'openai', model: 'gpt-4o', baseUrl: '', source: 'registry' });
  } finally {
    await agent.stop();
  }
});

off.run();
