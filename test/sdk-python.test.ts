/**
 * The Python agent SDK (packages/agent-python/): the table both SDKs share checked against the
 * TypeScript side, the RFC 8785 vectors against the server's canonicaliser, then the Python
 * tests under pytest: offline ones, and those of tests/test_live.py against a real Steward that
 * this file starts, with controls (stop, start, hold a ledger write, read token totals) served
 * on a local HTTP port for them.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { cp, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import canonicalize from 'canonicalize';
import { CAPABILITIES, FATAL_CLOSE_CODES, closeMeaning, gateMessages } from '../src/agent/index.js';
import { PURPOSE } from '../src/domain/did.js';
import { ownerOf } from './fixtures.js';
import { fleet, startWithOwner } from './fleet-helpers.js';
import { tempDir, type TestServer } from './helpers.js';
import { freePort } from './stand-in-server.js';
import { PY_PACKAGE, passed, pytest, runPython } from './sdk-python-helpers.js';

const test = suite('agent SDK for Python');

const json = async (path: string) => JSON.parse(await readFile(new URL(path, import.meta.url), 'utf8'));

test('schemas/agent/sdk-shared.json says what the TypeScript SDK does: close codes, refusals, capabilities, the signed prefix', async () => {
  const shared = await json('../schemas/agent/sdk-shared.json');
  for (const row of shared.closeCodes) {
    assert.equal(closeMeaning(row.code), { code: row.code, reconnect: row.reconnect, meaning: row.meaning }, `close ${row.code}`);
    assert.is(row.endStatus !== undefined, !row.reconnect, `close ${row.code}: an end status exactly when it is final`);
  }
  assert.equal([...FATAL_CLOSE_CODES].sort(), shared.closeCodes.filter((r: any) => !r.reconnect).map((r: any) => r.code).sort());
  assert.equal(shared.closeCodes.filter((r: any) => r.endStatus === 'rejected').map((r: any) => r.code), [4403]);
  const { code: _code, ...unknown } = closeMeaning(4999);
  assert.equal(unknown, shared.unknownCloseCode);
  assert.equal(
    { capability: gateMessages.capability('<action>'), expired: gateMessages.expired('<policyId>', '<action>'), budget: gateMessages.budget, rate: gateMessages.rate },
    shared.gateMessages,
  );
  assert.equal([...CAPABILITIES], shared.capabilities);
  assert.is(PURPOSE.agentAuth, shared.authPurpose);
});

test("the RFC 8785 vectors of the Python tests are what the server's canonicaliser writes", async () => {
  const { vectors } = await json('../packages/agent-python/tests/vectors/jcs.json');
  assert.ok(vectors.length >= 8);
  for (const v of vectors) assert.is(canonicalize(JSON.parse(v.input)), v.canonical, v.input);
});

test('pytest, offline: the shared table, RFC 8785, keys, gates, failed attempts, malformed frames, certificates that do not verify, secrets kept out of the log', async () => {
  passed(await pytest(['tests/test_protocol.py', 'tests/test_keys_and_gates.py', 'tests/test_bad_input.py', 'tests/test_faults.py']), 22);
});

/** Controls for the live tests: the Python side asks for a restart, a held write, token totals. */
async function controls(start: () => Promise<TestServer>): Promise<{ url: string; close: () => Promise<void>; server: () => TestServer }> {
  let s = await start();
  let stopping: Promise<void> | null = null;
  let release: (() => void) | null = null;
  let writes = 0;
  const actions: Record<string, (body: any) => Promise<unknown>> = {
    // The next token-ledger write waits until `release` (after the server began stopping).
    'hold-ledger': async () => {
      const ledger = s.ctx.c.tokenLedger as unknown as { insertMany: (docs: unknown[]) => Promise<void> };
      const insertMany = ledger.insertMany.bind(ledger);
      const held = new Promise<void>((r) => (release = r));
      writes = 0;
      ledger.insertMany = async (docs) => {
        writes++;
        await held;
        return insertMany(docs);
      };
      return {};
    },
    held: async () => ({ writes }),
    'stop-begin': async () => {
      stopping = s.stop();
      return {};
    },
    release: async () => {
      release?.();
      await stopping;
      return {};
    },
    start: async () => {
      s = await s.restart();
      return { token: (await ownerOf(s)).token };
    },
    tokens: async ({ did }) => {
      await fleet(s).tokens.rollup();
      return { allTime: (await fleet(s).tokens.ofAgent(did)).allTime };
    },
  };
  const http = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const action = actions[(req.url ?? '').slice(1)];
      const answer = (status: number, value: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(value));
      };
      if (!action) return answer(404, { error: { code: 'not_found', message: req.url } });
      action(body ? JSON.parse(body) : {}).then(
        (v) => answer(200, v),
        (err: Error) => answer(500, { error: { code: 'internal', message: err.stack ?? err.message } }),
      );
    });
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    server: () => s,
    close: async () => {
      await new Promise<void>((r) => http.close(() => r()));
      await s.stop(true);
    },
  };
}

test('pytest, against a real Steward: registration, intents, a gate refusal, a policy change, a mention, a restart, the closes that end an agent', async () => {
  const port = await freePort();
  let token = '';
  const ctl = await controls(async () => {
    const { s, owner } = await startWithOwner({ PORT: String(port), AGENT_PENDING_SOCKET_TIMEOUT_SECONDS: '1', TOKEN_ROLLUP_INTERVAL_SECONDS: '3600' });
    token = owner.token;
    return s;
  });
  try {
    const run = await pytest(['tests/test_live.py'], { STEWARD_URL: ctl.server().url, STEWARD_ADMIN_TOKEN: token, STEWARD_CONTROL_URL: ctl.url });
    passed(run, 8);
  } finally {
    await ctl.close();
  }
});

test('the package and its tests pass mypy --strict for Python 3.10', async () => {
  const cache = await tempDir('steward-mypy-');
  const r = await runPython(['-m', 'mypy', '--strict', '--python-version', '3.10', `--cache-dir=${cache}`, 'steward_agent', 'tests'], PY_PACKAGE);
  assert.is(r.code, 0, r.output);
  assert.match(r.output, /^Success: no issues found in \d+ source files/m);
});

test('the package builds with its PEP 517 backend into a wheel that holds every module and py.typed, and runs from where it is installed', async () => {
  const dir = await tempDir('steward-pywheel-');
  await cp(PY_PACKAGE, join(dir, 'src'), { recursive: true, filter: (p) => !p.includes('__pycache__') });
  const built = await runPython(['-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '--no-index', '-w', join(dir, 'wheel'), join(dir, 'src')], dir);
  assert.is(built.code, 0, built.output);
  const [wheel] = (await readdir(join(dir, 'wheel'))).filter((f) => f.endsWith('.whl'));
  assert.is(wheel, 'steward_agent-0.1.0-py3-none-any.whl');
  // A pure-Python wheel is installed by unpacking it: then the package runs from there alone.
  const site = join(dir, 'site');
  assert.is((await runPython(['-m', 'zipfile', '-e', join(dir, 'wheel', wheel!), site], dir)).code, 0);
  const modules = (await readdir(join(PY_PACKAGE, 'steward_agent'))).filter((f) => f.endsWith('.py') || f === 'py.typed').sort();
  assert.equal((await readdir(join(site, 'steward_agent'))).filter((f) => f.endsWith('.py') || f === 'py.typed').sort(), modules);
  assert.ok(modules.includes('py.typed'));
  const metadata = await readFile(join(site, 'steward_agent-0.1.0.dist-info', 'METADATA'), 'utf8');
  assert.match(metadata, /Requires-Python: >=3.10/);
  assert.match(metadata, /Requires-Dist: websockets \(>=10\.4\)/);
  assert.match(metadata, /Requires-Dist: cryptography \(>=38\)/);
  const help = await runPython(['-m', 'steward_agent', '--help'], dir, { PYTHONPATH: site });
  assert.is(help.code, 0, help.output);
  assert.match(help.output, /usage: python3 -m steward_agent .*--url URL/s);
});

test.run();
