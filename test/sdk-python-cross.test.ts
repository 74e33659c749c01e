/**
 * The Python agent SDK beside the TypeScript one: one key file used by both (each way), and the
 * complete agent of docs/sdk-python.md run exactly as printed against a real Steward.
 */
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { StewardAgent, loadKeys, loadOrCreateKeys } from '../src/agent/index.js';
import { tempDir } from './helpers.js';
import { approveRegistration, startWithOwner, stopAll } from './fleet-helpers.js';
import { PythonProcess } from './sdk-python-helpers.js';

const test = suite('agent SDK for Python, beside the TypeScript SDK');

const LONG = 60_000;

test('one key file: created and used by a Python agent, then used by the TypeScript SDK, and the other way round', async () => {
  const { s, owner } = await startWithOwner();
  const dir = await tempDir('steward-keys-');
  const agents: StewardAgent[] = [];
  try {
    // Python first: the demo agent creates the key file, is approved, comes online; SIGINT stops it.
    const pyFile = join(dir, 'py-made.json');
    const py = new PythonProcess(['-m', 'steward_agent', '--url', s.url, '--name', 'cross-py', '--capabilities', 'api_call', '--key', pyFile]);
    const did = (await py.line(/Z DID (\S+)$/))[1]!;
    const registration = (await py.line(/Z status pending: registration (\S+) awaits approval/))[1]!;
    await approveRegistration(owner, registration, ['api_call']);
    const serial = (await py.line(/Z certificate (\w+): capabilities api_call; policy none$/))[1]!;
    py.signal('SIGINT');
    assert.is(await py.exited, 0, py.output());
    assert.ok(py.lines.some((l) => l.endsWith('Z status stopped')), py.output());
    assert.is((await stat(pyFile)).mode & 0o777, 0o600);
    const tsKeys = await loadKeys(pyFile);
    assert.is(tsKeys.did, did);
    const ts = new StewardAgent({ url: s.url, keys: tsKeys, name: 'cross-py', version: '1', capabilities: ['api_call'] });
    agents.push(ts);
    const statuses: string[] = [];
    ts.on('status', (x) => statuses.push(x));
    ts.start();
    await ts.waitFor('ready', LONG);
    assert.not.ok(statuses.includes('pending'), `the same agent: approved already (${statuses.join(', ')})`);
    assert.is(ts.certificate!.certificate.serial, serial, `the stored certificate, co-signed again with the same key\n${py.output()}`);
    await ts.stop();

    // TypeScript first: the SDK creates the key file, is approved, comes online; then the Python agent uses it.
    const tsFile = join(dir, 'ts-made.json');
    const { keys } = await loadOrCreateKeys(tsFile);
    const first = new StewardAgent({ url: s.url, keys, name: 'cross-ts', version: '1', capabilities: ['api_call'] });
    agents.push(first);
    first.start();
    await first.waitFor('pending', LONG);
    await approveRegistration(owner, first.registrationId!, ['api_call']);
    await first.waitFor('ready', LONG);
    const tsSerial = first.certificate!.certificate.serial;
    await first.stop();
    const again = new PythonProcess(['-m', 'steward_agent', '--url', s.url, '--name', 'cross-ts', '--capabilities', 'api_call', '--key', tsFile]);
    assert.is((await again.line(/Z DID (\S+)$/))[1], keys.did);
    assert.is((await again.line(/Z certificate (\w+):/))[1], tsSerial, again.output());
    assert.ok(again.lines.some((l) => l.endsWith(`Z using key ${tsFile}`)), again.output());
    assert.not.ok(again.lines.some((l) => l.startsWith('status pending')), again.output());
    again.signal('SIGTERM');
    assert.is(await again.exited, 0, again.output());
  } finally {
    await stopAll(...agents);
    await s.stop(true);
  }
});

test('the complete agent of docs/sdk-python.md, run as printed: registers, is approved, answers an intent, stops on Ctrl-C', async () => {
  const doc = await readFile(new URL('../docs/sdk-python.md', import.meta.url), 'utf8');
  const example = /```python\n(# echo_agent\.py\n[\s\S]*?)```/.exec(doc)?.[1];
  assert.ok(example, 'the example is in the doc');
  assert.ok(example.split('\n').length <= 45, 'about 30 lines of code');
  const { s, owner } = await startWithOwner();
  const dir = await tempDir('steward-pyexample-');
  await writeFile(join(dir, 'echo_agent.py'), example);
  const agent = new PythonProcess(['echo_agent.py'], { STEWARD_URL: s.url }, dir);
  try {
    const did = (await agent.line(/ created echo-agent\.json: (did:key:\S+)$/))[1]!;
    const registration = (await agent.line(/ registration (\S+) awaits an admin's decision$/))[1]!;
    await approveRegistration(owner, registration, ['api_call']);
    await agent.line(/ status ready$/);
    await agent.line(/ certificate \w+: api_call; policy none$/);
    assert.is((await stat(join(dir, 'echo-agent.json'))).mode & 0o777, 0o600);
    const r = await owner.api.post(`/api/agents/${encodeURIComponent(did)}/intents`, { action: 'api_call', params: { q: 1 } });
    assert.is(r.status, 200, r.text);
    assert.equal(r.body.output, { echo: { q: 1 }, requestedBy: owner.user.did });
    // The tokens it recorded count for gate 3, in the gates' file beside the key.
    const gates = JSON.parse(await readFile(join(dir, 'echo-agent.gates.json'), 'utf8'));
    assert.is(gates.tokensToday, 150);
    agent.signal('SIGINT');
    assert.is(await agent.exited, 0, agent.output());
    await agent.line(/ status stopped$/);
  } finally {
    agent.signal('SIGKILL');
    await s.stop(true);
  }
});

test.run();
