import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { agentCommand } from '../src/cli/agent.js';
import { tempDir, waitFor } from './helpers.js';
import { approveRegistration, startWithOwner } from './fleet-helpers.js';

const test = suite('steward agent (demo CLI)');

test('registers, waits for approval, prints its status and answers intents by echoing', async () => {
  const { s, owner } = await startWithOwner();
  const keyFile = join(await tempDir(), 'agent.json');
  let out = '';
  const io = { out: (t: string) => (out += t), err: (t: string) => (out += t) };
  const abort = new AbortController();
  const running = agentCommand(['--url', s.url, '--key', keyFile, '--name', 'demo', '--capabilities', 'api_call'], {}, io, abort.signal);
  const did = await waitFor(() => /DID (did:key:\S+)/.exec(out)?.[1]);
  assert.is((await stat(keyFile)).mode & 0o777, 0o600, 'the key file is private');
  const regId = await waitFor(() => /registration (\S+) awaits approval/.exec(out)?.[1]);
  await approveRegistration(owner, regId, ['api_call']);
  await waitFor(() => out.includes('status ready'));
  assert.match(out, /certificate [0-9a-f]{32}: capabilities api_call; policy none/);
  const r = await owner.api.post(`/api/agents/${encodeURIComponent(did)}/intents`, { action: 'api_call', params: { hello: 'world' } });
  assert.is(r.status, 200, r.text);
  assert.equal(r.body.output.echo, { hello: 'world' });
  assert.match(out, /intent api_call from did:key:/);
  // The gates' counters are kept beside the key (private too): one execution this hour.
  const gates = JSON.parse(await readFile(keyFile.replace(/\.json$/, '.gates.json'), 'utf8'));
  assert.is(gates.executions.length, 1);
  assert.is((await stat(keyFile.replace(/\.json$/, '.gates.json'))).mode & 0o777, 0o600);
  abort.abort();
  assert.is(await running, 0);

  // The same key file again: same DID, straight to ready.
  out = '';
  const again = new AbortController();
  const second = agentCommand(['--url', s.url, '--key', keyFile], {}, io, again.signal);
  await waitFor(() => out.includes('status ready'));
  assert.match(out, new RegExp(`using key .*\\n\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\dZ DID ${did}`));
  again.abort();
  assert.is(await second, 0);
  await s.stop(true);
});

test('bad options exit 1 with the usage', async () => {
  let out = '';
  const io = { out: (t: string) => (out += t), err: (t: string) => (out += t) };
  assert.is(await agentCommand(['--capabilities', 'teleport'], {}, io), 1);
  assert.match(out, /unknown capabilities teleport/);
  assert.is(await agentCommand(['--help'], {}, io), 0);
  assert.match(out, /usage: steward agent/);
});

test.run();
