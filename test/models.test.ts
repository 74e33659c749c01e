import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, logLines, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { loadConfig } from '../src/config.js';
import { isError } from './people-helpers.js';
import { startWithOwner } from './fleet-helpers.js';
import { FakeLiteLlm, leaked, recordingClient } from './models-fake-proxy.js';
import { deadUrl } from './stand-in-server.js';

const ENTRY_KEYS = ['apiKeySet', 'createdAt', 'id', 'modelId', 'name', 'provider', 'proxyModelName', 'status'];

// --- with the proxy -------------------------------------------------------------------------------

const test = suite('models registry, proxy configured');
let s: TestServer;
let owner: TestUser;
let admin: ReturnType<typeof recordingClient>;
let proxy: FakeLiteLlm;
const secrets: string[] = [];

test.before(async () => {
  proxy = await new FakeLiteLlm().start();
  ({ s, owner } = await startWithOwner(proxy.env()));
  admin = recordingClient(s.url, owner.token);
  secrets.push(proxy.masterKey);
});

test.after(async () => {
  await s.stop(true);
  await proxy.close();
});

const create = (body: Record<string, unknown>) => admin.post('/api/admin/models', body);

test('create: 201 {model: {id, name}}; registered with the proxy as {provider}/{slug}; the key stored sealed', async () => {
  const apiKey = 'sk-openai-test-0123456789abcdef';
  secrets.push(apiKey);
  proxy.clearCalls();
  const r = await create({ name: 'GPT-4o  Mini!!', provider: 'openai', modelId: 'gpt-4o-mini', description: 'small and fast', apiKey });
  assert.is(r.status, 201, r.text);
  assert.equal(Object.keys(r.body), ['model']);
  assert.equal(Object.keys(r.body.model).sort(), ['id', 'name']);
  assert.match(r.body.model.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.is(r.body.model.name, 'GPT-4o  Mini!!');
  const id = r.body.model.id;

  assert.is(proxy.calls.length, 1);
  const call = proxy.calls[0]!;
  assert.is(call.method, 'POST');
  assert.is(call.path, '/model/new');
  assert.is(call.headers.authorization, `Bearer ${proxy.masterKey}`);
  assert.match(String(call.headers['content-type']), /application\/json/);
  assert.equal(call.body, {
    model_name: 'openai/gpt-4o-mini',
    litellm_params: { model: 'openai/gpt-4o-mini', api_key: apiKey },
    model_info: { id },
  });

  const g = await admin.get(`/api/admin/models/${id}`);
  assert.is(g.status, 200, g.text);
  assert.equal(Object.keys(g.body).sort(), [...ENTRY_KEYS, 'description'].sort());
  assert.equal(
    { ...g.body, createdAt: undefined },
    { id, name: 'GPT-4o  Mini!!', description: 'small and fast', provider: 'openai', modelId: 'gpt-4o-mini', status: 'active', proxyModelName: 'openai/gpt-4o-mini', apiKeySet: true, createdAt: undefined },
  );
  assert.ok(!Number.isNaN(Date.parse(g.body.createdAt)));

  const stored = await s.ctx.c.models.findById(id);
  assert.ok(stored?.apiKeySealed);
  assert.not.ok(JSON.stringify(stored).includes(apiKey), 'the key is not stored in clear');
  assert.is(s.ctx.secrets.open(stored!.apiKeySealed!, `model-api-key:${id}`), apiKey);
  const audit = await s.ctx.c.audit.findOne({ action: 'model.create', target: id });
  assert.ok(audit);
  assert.not.ok(JSON.stringify(audit).includes(apiKey), 'the audit entry does not carry the key');
});

test('create: openai-compatible goes through the openai prefix with api_base; without baseUrl it is 400 naming baseUrl', async () => {
  proxy.clearCalls();
  const bad = await create({ name: 'Local Llama', provider: 'openai-compatible', modelId: 'llama3' });
  isError(bad, 400, 'validation_failed');
  assert.match(bad.body.error.message, /baseUrl/);
  assert.is(proxy.calls.length, 0, 'the proxy is not called');
  assert.is(await s.ctx.c.models.count({ name: 'Local Llama' }), 0);

  const r = await create({ name: 'Local Llama 3.1', provider: 'openai-compatible', modelId: 'meta/llama-3.1-8b', baseUrl: 'http://gpu-box:8000/v1' });
  assert.is(r.status, 201, r.text);
  assert.equal(proxy.calls[0]!.body, {
    model_name: 'openai-compatible/local-llama-3-1',
    litellm_params: { model: 'openai/meta/llama-3.1-8b', api_base: 'http://gpu-box:8000/v1' },
    model_info: { id: r.body.model.id },
  });
  const g = await admin.get(`/api/admin/models/${r.body.model.id}`);
  assert.is(g.body.baseUrl, 'http://gpu-box:8000/v1');
  assert.is(g.body.apiKeySet, false);
  assert.is(g.body.description, undefined, 'no description: the field is left out');
});

test('create: bad input is 400 naming the field, and nothing is stored or sent', async () => {
  proxy.clearCalls();
  const before = await s.ctx.c.models.count({});
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ provider: 'openai', modelId: 'x' }, /'name'/],
    [{ name: 'A', modelId: 'x' }, /'provider'/],
    [{ name: 'A', provider: 'openai' }, /'modelId'/],
    [{ name: '   ', provider: 'openai', modelId: 'x' }, /'name'/],
    [{ name: 'A', provider: 'open ai', modelId: 'x' }, /'provider'/],
    [{ name: 'A', provider: 'openai', modelId: 'x', baseUrl: 'not a url' }, /'baseUrl'/],
    [{ name: 'A', provider: 'openai', modelId: 'x', baseUrl: 'ftp://files' }, /'baseUrl'/],
    [{ name: 'A', provider: 'openai', modelId: 'x', colour: 'red' }, /colour/],
    [{ name: '!!!', provider: 'openai', modelId: 'x' }, /'name'.*slug/],
  ];
  for (const [body, re] of cases) {
    const r = await create(body);
    isError(r, 400, 'validation_failed');
    assert.match(r.body.error.message, re, JSON.stringify(body));
  }
  isError(await http(s.url, 'POST', '/api/admin/models', { token: owner.token, raw: '{"name":', headers: { 'content-type': 'application/json' } }), 400, 'invalid_json');
  assert.is(await s.ctx.c.models.count({}), before);
  assert.is(proxy.calls.length, 0);
});

test('create: a second model with the same proxy name is 409 and the proxy is not called', async () => {
  proxy.clearCalls();
  const r = await create({ name: 'gpt 4o mini', provider: 'OpenAI', modelId: 'gpt-4o-mini-2024' });
  isError(r, 409, 'model_exists');
  assert.match(r.body.error.message, /openai\/gpt-4o-mini/);
  assert.is(proxy.calls.length, 0);
  const other = await create({ name: 'gpt 4o mini', provider: 'azure', modelId: 'gpt-4o-mini' });
  assert.is(other.status, 201, 'another provider is another proxy name');
  assert.is(proxy.calls[0]!.body.litellm_params.model, 'azure/gpt-4o-mini');
});

test('list: {models} oldest first, every entry in the registry shape, no key anywhere', async () => {
  const r = await admin.get('/api/admin/models');
  assert.is(r.status, 200);
  assert.equal(Object.keys(r.body), ['models']);
  assert.equal(
    r.body.models.map((m: any) => m.proxyModelName),
    ['openai/gpt-4o-mini', 'openai-compatible/local-llama-3-1', 'azure/gpt-4o-mini'],
  );
  for (const m of r.body.models) {
    for (const k of ENTRY_KEYS) assert.ok(k in m, `${k} in entry`);
    assert.not.ok('apiKey' in m);
    assert.not.ok('apiKeySealed' in m);
  }
});

test('update: name, description, status; provider/modelId/baseUrl stored but not synced; proxyModelName stays', async () => {
  const id = (await admin.get('/api/admin/models')).body.models[0].id;
  proxy.clearCalls();
  const r = await admin.put(`/api/admin/models/${id}`, { name: 'Mini', description: 'renamed', status: 'inactive' });
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { ok: true });
  let g = (await admin.get(`/api/admin/models/${id}`)).body;
  assert.is(g.name, 'Mini');
  assert.is(g.description, 'renamed');
  assert.is(g.status, 'inactive');
  assert.is(g.proxyModelName, 'openai/gpt-4o-mini', 'the name the proxy knows does not change');

  assert.is((await admin.put(`/api/admin/models/${id}`, { modelId: 'gpt-4o-mini-2025', baseUrl: 'https://api.example.test/v1', status: 'active', description: null })).status, 200);
  g = (await admin.get(`/api/admin/models/${id}`)).body;
  assert.is(g.modelId, 'gpt-4o-mini-2025');
  assert.is(g.baseUrl, 'https://api.example.test/v1');
  assert.is(g.status, 'active');
  assert.is(g.description, undefined);
  assert.is(proxy.calls.length, 0, 'PUT never calls the proxy');
  assert.ok(await s.ctx.c.audit.findOne({ action: 'model.update', target: id }));

  isError(await admin.put(`/api/admin/models/${id}`, { status: 'retired' }), 400, 'validation_failed');
  isError(await admin.put(`/api/admin/models/${id}`, { apiKey: 'sk-new' }), 400, 'validation_failed');
  isError(await admin.put(`/api/admin/models/${id}`, { name: '' }), 400, 'validation_failed');
  const compat = await admin.put(`/api/admin/models/${id}`, { provider: 'openai-compatible', baseUrl: null });
  isError(compat, 400, 'validation_failed');
  assert.match(compat.body.error.message, /baseUrl/);
  assert.is((await admin.get(`/api/admin/models/${id}`)).body.provider, 'openai', 'a refused update changes nothing');
  isError(await admin.put('/api/admin/models/00000000-0000-4000-8000-000000000000', { name: 'x' }), 404, 'model_not_found');
});

test('auth: the registry is for admins (403 for others, 401 without a session)', async () => {
  const member = await makeUser(s, { workspaces: { [s.ctx.defaultWorkspace._id]: 'owner' } });
  const roleAdmin = await makeUser(s, { role: 'admin' });
  isError(await member.api.get('/api/admin/models'), 403, 'forbidden');
  isError(await member.api.post('/api/admin/models', { name: 'x', provider: 'openai', modelId: 'x' }), 403, 'forbidden');
  isError(await http(s.url, 'GET', '/api/admin/models'), 401, 'unauthorized');
  const r = await recordingClient(s.url, roleAdmin.token).get('/api/admin/models');
  assert.is(r.status, 200, 'the admin role is the Admin level');
});

test('delete: POST /model/delete {id} to the proxy, then gone (404)', async () => {
  const r = await create({ name: 'Doomed', provider: 'anthropic', modelId: 'claude-3-haiku' });
  const id = r.body.model.id;
  assert.ok(proxy.models.has(id));
  proxy.clearCalls();
  const d = await admin.del(`/api/admin/models/${id}`);
  assert.is(d.status, 200, d.text);
  assert.equal(d.body, { ok: true });
  assert.equal(proxy.calls.map((c) => [c.path, c.body]), [['/model/delete', { id }]]);
  assert.is(proxy.calls[0]!.headers.authorization, `Bearer ${proxy.masterKey}`);
  assert.not.ok(proxy.models.has(id));
  isError(await admin.get(`/api/admin/models/${id}`), 404, 'model_not_found');
  isError(await admin.del(`/api/admin/models/${id}`), 404, 'model_not_found');
  assert.ok(await s.ctx.c.audit.findOne({ action: 'model.delete', target: id }));
});

test('the proxy answering 500 to /model/new: 502, nothing in the registry', async () => {
  const before = await s.ctx.c.models.count({});
  proxy.clearCalls();
  proxy.fail('/model/new', { status: 500 });
  const r = await create({ name: 'Flaky', provider: 'openai', modelId: 'gpt-4.1', apiKey: 'sk-flaky-secret-value' });
  secrets.push('sk-flaky-secret-value');
  isError(r, 502, 'proxy_error');
  assert.match(r.body.error.message, /500/);
  assert.is(await s.ctx.c.models.count({}), before, 'no registry row is left');
  assert.is((await admin.get('/api/admin/models')).body.models.some((m: any) => m.name === 'Flaky'), false);
  assert.equal(proxy.calls.map((c) => c.path), ['/model/new', '/model/delete'], 'the proxy copy, should it exist, is removed');
  assert.is(proxy.calls[1]!.body.id, proxy.calls[0]!.body.model_info.id);
});

test('the proxy storing the model but answering 500: 502, and the model is removed from the proxy too', async () => {
  proxy.fail('/model/new', { status: 500, apply: true });
  const before = proxy.models.size;
  const r = await create({ name: 'Half Made', provider: 'openai', modelId: 'o3' });
  isError(r, 502, 'proxy_error');
  assert.is(proxy.models.size, before, 'nothing half-made is left in the proxy');
  assert.is(await s.ctx.c.models.count({ name: 'Half Made' }), 0);
  const again = await create({ name: 'Half Made', provider: 'openai', modelId: 'o3' });
  assert.is(again.status, 201, 'the same name can be created once the proxy works');
});

test('delete with the proxy failing: 502 and the model stays, in the registry and in the proxy', async () => {
  const r = await create({ name: 'Sticky', provider: 'openai', modelId: 'gpt-4.1-nano' });
  const id = r.body.model.id;
  proxy.fail('/model/delete', { status: 503 });
  const d = await admin.del(`/api/admin/models/${id}`);
  isError(d, 502, 'proxy_error');
  assert.is((await admin.get(`/api/admin/models/${id}`)).status, 200);
  assert.ok(proxy.models.has(id));
  assert.is((await admin.del(`/api/admin/models/${id}`)).status, 200, 'a retry succeeds');
  assert.not.ok(proxy.models.has(id));
});

test('no response body ever held a provider key or the master key', () => {
  assert.equal(leaked(secrets), []);
});

test.run();

// --- the proxy down -----------------------------------------------------------------------------

const down = suite('models registry, proxy down');
let sd: TestServer;
let ownerD: TestUser;
const log = logLines();

down.before(async () => {
  // Every log line kept (at debug level), to check that no secret is in one.
  ({ s: sd, owner: ownerD } = await startWithOwner({ LOG_LEVEL: 'debug', PROXY_BASE_URL: await deadUrl(), PROXY_MASTER_KEY: 'sk-master-down' }, { logTo: log.sink }));
});
down.after(async () => {
  await sd.stop(true);
});

down('create with the proxy unreachable: 502 naming the proxy, nothing stored', async () => {
  const api = recordingClient(sd.url, ownerD.token);
  const r = await api.post('/api/admin/models', { name: 'Nowhere', provider: 'openai', modelId: 'gpt-4o', apiKey: 'sk-down-secret' });
  isError(r, 502, 'proxy_error');
  assert.match(r.body.error.message, /could not be reached/);
  assert.not.ok(r.text.includes('sk-down-secret'));
  assert.not.ok(r.text.includes('sk-master-down'));
  assert.equal((await api.get('/api/admin/models')).body.models, []);
  assert.is(await sd.ctx.c.models.count({}), 0);
  assert.ok(log.lines.length > 0);
  assert.not.ok(log.lines.some((l) => l.includes('sk-master-down') || l.includes('sk-down-secret')), 'no log line holds a key');
});

down('configuration: the proxy needs both variables; PROXY_BASE_URL must be an http(s) URL', () => {
  const both = loadConfig({ PROXY_BASE_URL: 'http://litellm:4000/', PROXY_MASTER_KEY: 'sk-m' });
  assert.is(both.proxyBaseUrl, 'http://litellm:4000');
  assert.is(both.proxyMasterKey, 'sk-m');
  assert.is(both.proxyTimeoutMs, 10_000);
  const half = loadConfig({ PROXY_BASE_URL: 'http://litellm:4000' });
  assert.is(half.proxyBaseUrl, undefined);
  assert.is(half.proxyIncomplete, 'PROXY_MASTER_KEY');
  assert.is(loadConfig({ PROXY_MASTER_KEY: 'sk-m' }).proxyIncomplete, 'PROXY_BASE_URL');
  assert.throws(() => loadConfig({ PROXY_BASE_URL: 'ftp://litellm' }), /PROXY_BASE_URL="ftp:\/\/litellm": expected an http/);
  assert.throws(() => loadConfig({ PROXY_TIMEOUT_MS: '5' }), /PROXY_TIMEOUT_MS="5": must be at least 100/);
});

down.run();

// --- no proxy -----------------------------------------------------------------------------------

const off = suite('models registry, proxy not configured');
let so: TestServer;
let ownerO: TestUser;
let watcher: FakeLiteLlm;

off.before(async () => {
  watcher = await new FakeLiteLlm().start();
  // Only one of the two variables: the proxy stays off.
  ({ s: so, owner: ownerO } = await startWithOwner({ PROXY_BASE_URL: watcher.url }));
});
off.after(async () => {
  await so.stop(true);
  await watcher.close();
});

off('create and delete work on the registry alone; nothing reaches a proxy', async () => {
  const api = recordingClient(so.url, ownerO.token);
  const r = await api.post('/api/admin/models', { name: 'Solo', provider: 'openai', modelId: 'gpt-4o' });
  assert.is(r.status, 201, r.text);
  assert.is((await api.get(`/api/admin/models/${r.body.model.id}`)).body.proxyModelName, 'openai/solo');
  assert.is((await api.del(`/api/admin/models/${r.body.model.id}`)).status, 200);
  assert.is(watcher.calls.length, 0);
});

off.run();
