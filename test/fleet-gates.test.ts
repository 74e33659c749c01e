import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileGateState, Gates, gateMessages } from '../src/agent/gates.js';
import type { CertificateTerms } from '../src/domain/certificate.js';
import { newAgent, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { waitFor } from './helpers.js';

const test = suite('agent gates');
const HOUR = 3_600_000;

const terms = (over: Partial<CertificateTerms> = {}): CertificateTerms => ({
  capabilities: ['api_call', 'file_access'],
  resourceLimits: { maxTokensPerDay: 100, maxRequestsPerHour: 2 },
  policyId: 'pol-1',
  policyExpiresAt: '2030-01-02T00:00:00.000Z',
  ...over,
});

test('the four gates, their messages and their order', () => {
  let now = Date.parse('2030-01-01T10:00:00Z');
  const g = new Gates(() => now);
  assert.equal(g.admit('mail_send', terms()), { ok: false, gate: 1, error: "Capability 'mail_send' is not granted" });
  assert.equal(g.admit('api_call', terms({ policyExpiresAt: '2030-01-01T09:00:00Z' })), {
    ok: false,
    gate: 2,
    error: "Policy 'pol-1' has expired; action 'api_call' is blocked",
  });
  // Gate 1 comes before gate 2.
  assert.is((g.admit('mail_send', terms({ policyExpiresAt: '2030-01-01T09:00:00Z' })) as any).gate, 1);
  assert.equal(g.admit('api_call', terms()), { ok: true });
  assert.equal(g.admit('file_access', terms()), { ok: true });
  assert.equal(g.admit('api_call', terms()), { ok: false, gate: 4, error: 'Hourly request limit reached' });
  g.recordTokens(60, 40);
  // Gate 3 comes before gate 4; gate 2 before gate 3.
  assert.equal(g.admit('api_call', terms()), { ok: false, gate: 3, error: 'Daily token budget exhausted' });
  assert.is((g.admit('api_call', terms({ policyExpiresAt: '2030-01-01T09:00:00Z' })) as any).gate, 2);
  assert.is(gateMessages.budget, 'Daily token budget exhausted');
});

test('the daily budget resets at UTC midnight; the hourly window rolls', () => {
  let now = Date.parse('2030-01-01T23:30:00Z');
  const g = new Gates(() => now);
  const t = terms({ resourceLimits: { maxTokensPerDay: 10, maxRequestsPerHour: 2 }, policyExpiresAt: null });
  g.recordTokens(10, 0);
  assert.is((g.admit('api_call', t) as any).error, 'Daily token budget exhausted');
  now = Date.parse('2030-01-02T00:00:00Z');
  assert.equal(g.admit('api_call', t), { ok: true }, 'a new UTC day');
  now += 10 * 60_000;
  assert.equal(g.admit('api_call', t), { ok: true });
  now += 10 * 60_000;
  assert.is((g.admit('api_call', t) as any).error, 'Hourly request limit reached');
  now = Date.parse('2030-01-02T00:00:00Z') + HOUR; // the first execution leaves the window
  assert.equal(g.admit('api_call', t), { ok: true });
  assert.is(g.executionsThisHour(), 2);
});

test('fileGateState: the counters survive a new Gates (a restarted agent), across a UTC midnight too', () => {
  const dir = mkdtempSync(join(tmpdir(), 'steward-gates-'));
  try {
    const file = join(dir, 'gates.json');
    let now = Date.parse('2030-01-01T23:40:00Z');
    const t = terms({ resourceLimits: { maxTokensPerDay: 10, maxRequestsPerHour: 2 }, policyExpiresAt: null });
    const first = new Gates(() => now, fileGateState(file));
    assert.equal(first.admit('api_call', t), { ok: true });
    first.recordTokens(6, 4);
    assert.equal(JSON.parse(readFileSync(file, 'utf8')), { day: '2030-01-01', tokensToday: 10, executions: [now] });

    const second = new Gates(() => now, fileGateState(file)); // the agent's process restarted
    assert.is((second.admit('api_call', t) as any).error, 'Daily token budget exhausted');
    assert.is(new Gates(() => now).todaysTokens(), 0, 'without a store a restart starts from zero');
    now = Date.parse('2030-01-02T00:10:00Z');
    const third = new Gates(() => now, fileGateState(file));
    assert.is(third.todaysTokens(), 0, 'a new UTC day');
    assert.is(third.executionsThisHour(), 1, 'the execution of 23:40 is still in the hour');
    assert.equal(third.admit('api_call', t), { ok: true });
    assert.is((third.admit('api_call', t) as any).error, 'Hourly request limit reached');

    writeFileSync(file, '{"day": 3}');
    assert.throws(() => new Gates(() => now, fileGateState(file)), /does not hold gate state/);
    assert.is(fileGateState(join(dir, 'missing.json')).load(), null, 'no file: a fresh start');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('no limits, no expiry: only the capability gate applies', () => {
  const g = new Gates(() => 0);
  const t = terms({ resourceLimits: null, policyExpiresAt: null, policyId: null });
  for (let i = 0; i < 100; i++) assert.equal(g.admit('api_call', t), { ok: true });
  g.recordTokens(1e9, 0);
  assert.equal(g.admit('api_call', t), { ok: true });
});

test('end to end: intents refused by the gates of a real agent with a policy and an injected clock', async () => {
  const { s, owner } = await startWithOwner();
  let now = Date.now();
  const agent = await readyAgent(s, owner, { capabilities: ['api_call', 'mail_send'], clock: () => now, onIntent: ({ params }) => ({ echo: params }) });
  const expiresAt = new Date(now + 3 * HOUR).toISOString();
  const p = await owner.api.post('/api/policies', {
    agentDid: agent.did,
    capabilities: ['api_call'],
    resourceLimits: { maxTokensPerDay: 100, maxRequestsPerHour: 2 },
    expiresAt,
  });
  assert.is(p.status, 201, p.text);
  await waitFor(() => agent.certificate?.certificate.policyId === p.body.policy.id);
  const send = (action: string) => owner.api.post(`/api/agents/${encodeURIComponent(agent.did)}/intents`, { action, params: { n: 1 } });

  let r = await send('mail_send');
  assert.is(r.status, 200, r.text);
  assert.equal({ ok: r.body.ok, error: r.body.error }, { ok: false, error: "Capability 'mail_send' is not granted" });
  r = await send('api_call');
  assert.equal({ ok: r.body.ok, output: r.body.output }, { ok: true, output: { echo: { n: 1 } } });
  assert.is((await send('api_call')).body.ok, true);
  assert.is((await send('api_call')).body.error, 'Hourly request limit reached');
  now += HOUR + 1000;
  assert.is((await send('api_call')).body.ok, true, 'the rolling window moved on');
  agent.recordUsage(70, 30);
  assert.is((await send('api_call')).body.error, 'Daily token budget exhausted');
  now += 3 * HOUR;
  assert.is((await send('api_call')).body.error, `Policy '${p.body.policy.id}' has expired; action 'api_call' is blocked`);
  await stopAll(agent);
  await s.stop(true);
});

test('end to end: with a gate state file, a restarted agent still has its daily budget exhausted', async () => {
  const { s, owner } = await startWithOwner();
  const dir = mkdtempSync(join(tmpdir(), 'steward-gates-'));
  try {
    const gateState = fileGateState(join(dir, 'gates.json'));
    const onIntent = () => ({ done: true });
    const agent = await readyAgent(s, owner, { capabilities: ['api_call'], gateState, onIntent });
    const p = await owner.api.post('/api/policies', { agentDid: agent.did, capabilities: ['api_call'], resourceLimits: { maxTokensPerDay: 100 } });
    assert.is(p.status, 201, p.text);
    await waitFor(() => agent.certificate?.certificate.policyId === p.body.policy.id);
    const send = () => owner.api.post(`/api/agents/${encodeURIComponent(agent.did)}/intents`, { action: 'api_call', params: {} });
    assert.is((await send()).body.ok, true);
    agent.recordUsage(90, 10);
    assert.is((await send()).body.error, 'Daily token budget exhausted');
    const keys = agent['opts'].keys;
    await agent.stop();

    const again = newAgent(s, { keys, capabilities: ['api_call'], gateState: fileGateState(join(dir, 'gates.json')), onIntent });
    await again.waitFor('ready');
    assert.is((await send()).body.error, 'Daily token budget exhausted', 'the budget used before the restart still counts');
    await again.stop();
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await s.stop(true);
  }
});

test.run();
