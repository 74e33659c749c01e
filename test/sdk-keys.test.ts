/**
 * The TypeScript SDK's key files: created with mode 0600, and refused with the Python SDK's words
 * (schemas/agent/sdk-shared.json, keyFileMessages) when others may read them or they are not key
 * files; never replaced by a new key.
 */
import { chmod, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPair, loadKeys, loadOrCreateKeys } from '../src/agent/index.js';
import { tempDir } from './helpers.js';

const test = suite('agent SDK key files');

const shared = JSON.parse(await readFile(new URL('../schemas/agent/sdk-shared.json', import.meta.url), 'utf8')).keyFileMessages as Record<string, string>;

async function refusal(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('not refused');
}

test('a key file is created with mode 0600 and read back', async () => {
  const file = join(await tempDir('steward-keys-'), 'nested', 'agent.json');
  const { keys, created } = await loadOrCreateKeys(file);
  assert.ok(created);
  assert.is((await stat(file)).mode & 0o777, 0o600);
  assert.equal(await loadOrCreateKeys(file), { keys, created: false });
});

test('a key file that group or others may read is refused with the shared message, and left as it is', async () => {
  const file = join(await tempDir('steward-keys-'), 'agent.json');
  await loadOrCreateKeys(file);
  const before = await readFile(file, 'utf8');
  await chmod(file, 0o644);
  const expected = shared.mode!.replaceAll('<file>', file).replace('<mode>', '0644');
  assert.is(await refusal(() => loadKeys(file)), expected);
  assert.is(await refusal(() => loadOrCreateKeys(file)), expected);
  assert.is((await stat(file)).mode & 0o777, 0o644);
  assert.is(await readFile(file, 'utf8'), before);
  await chmod(file, 0o400);
  assert.ok((await loadKeys(file)).did.startsWith('did:key:z6Mk'), 'read-only for its owner is fine');
});

test('a file that is not a key file is refused with the shared message naming what is wrong', async () => {
  const dir = await tempDir('steward-keys-');
  const k = generateKeyPair();
  const zeros = 'A'.repeat(43);
  const cases: Array<[string, string]> = [
    ['not json at all', 'notJson'],
    ['[1, 2]', 'fields'],
    ['{}', 'fields'],
    ['null', 'fields'],
    ['{"publicKey": "abc", "privateKey": "!!"}', 'privateKey'],
    [JSON.stringify({ publicKey: zeros, privateKey: zeros }), 'publicKey'],
    [JSON.stringify({ publicKey: generateKeyPair().publicKey, privateKey: k.privateKey }), 'publicKey'],
    [JSON.stringify({ did: 'did:key:z6Mkother', publicKey: k.publicKey, privateKey: k.privateKey }), 'did'],
  ];
  for (const [i, [content, message]] of cases.entries()) {
    const file = join(dir, `agent-${i}.json`);
    await writeFile(file, content, { mode: 0o600 });
    assert.is(await refusal(() => loadOrCreateKeys(file)), shared[message]!.replace('<file>', file), content);
    assert.is(await readFile(file, 'utf8'), content, 'left as it was');
  }
  const good = join(dir, 'good.json');
  await writeFile(good, JSON.stringify({ publicKey: k.publicKey, privateKey: k.privateKey }), { mode: 0o600 });
  assert.equal(await loadKeys(good), k);
});

test.run();
