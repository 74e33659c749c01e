/**
 * The log of a real `steward serve` as a person reads it: standard output is JSON, one object per
 * line, and the claim banner goes to standard error; the lines that say what to do next (an owner
 * to claim, the owner claimed, an agent awaiting approval) and the outside services failing — once
 * per streak of failures, with the reason, and once when they work again.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { join } from 'node:path';
import { http, tempDir } from './helpers.js';
import { generateKeyPair } from '../src/domain/did.js';
import { runCli, StewardProcess } from './cli-process.js';
import { FakeLiteLlm } from './models-fake-proxy.js';
import { StandIn } from './stand-in-server.js';

const test = suite('the log of steward serve');

interface Line {
  level: number;
  msg: string;
  [k: string]: unknown;
}

/** Every line of standard output, each parsed as JSON (a line that is not JSON fails the test). */
function lines(out: string): Line[] {
  return out
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      try {
        return JSON.parse(l) as Line;
      } catch {
        throw new Error(`a line of standard output is not JSON: ${l}`);
      }
    });
}

const WARN = 40;
const INFO = 30;

test('stdout is JSON lines; the claim banner is on stderr; claims, registrations and failing services are said once, with what to do', async () => {
  const dataDir = await tempDir();
  const proxy = await new FakeLiteLlm().start();
  const library = await StandIn.start({ respond: () => ({ status: 503, body: 'down for maintenance' }) });
  const srv = await StewardProcess.serve({ DATA_DIR: dataDir, ...proxy.env(), SKILLS_LIBRARY_URL: `${library.url}/catalogue.json` });
  try {
    // The banner: on standard error, the log says where it is without the link (a secret).
    assert.match(srv.err, /Connection string \(claim URL\): http:\/\/\S+\/api\/user\/claim\//);
    assert.not.match(srv.out, /api\/user\/claim\//, 'no claim link in the log');
    const link = /Connection string \(claim URL\): (\S+)/.exec(srv.err)![1]!;
    assert.ok(lines(srv.out).some((l) => l.level === INFO && /owner account is not claimed yet.*standard error/.test(l.msg)));

    // The owner claims with the wallet and logs in.
    const env = { STEWARD_WALLET_FILE: join(dataDir, 'wallet.json') };
    assert.is((await runCli(['wallet', 'create'], env)).code, 0);
    const claimed = await runCli(['wallet', 'claim', link], env);
    assert.is(claimed.code, 0, claimed.stderr);
    const did = /claimed (\S+)/.exec(claimed.stdout)![1]!;
    await srv.seen(/owner account was claimed/);
    const claimLine = lines(srv.out).find((l) => /owner account was claimed/.test(l.msg))!;
    assert.is(claimLine.level, INFO);
    assert.ok(claimLine.msg.includes(did), claimLine.msg);
    const token = (await runCli(['login', srv.url, '--print-token'], env)).stdout.trim();

    // An agent registers: the log names it and says how to approve it.
    const keys = generateKeyPair();
    const reg = await http(srv.url, 'POST', '/api/agents/register', { json: { name: 'log-reader-agent', version: '1.0.0', capabilities: ['api_call'], publicKey: keys.publicKey } });
    assert.is(reg.status, 201, reg.text);
    await srv.seen(/log-reader-agent/);
    const regLine = lines(srv.out).find((l) => /log-reader-agent/.test(l.msg))!;
    assert.is(regLine.level, INFO);
    const pending = await http(srv.url, 'GET', '/api/registrations', { token });
    const regId = pending.body.registrations[0].id as string;
    assert.match(regLine.msg, new RegExp(`awaits approval.*steward registrations approve ${regId}`));
    assert.is(regLine.agentDid, keys.did);

    // The model proxy is down (every call answers 500: each failed create, and the delete that
    // undoes it), then back: one warn line with the reason, one when it works again.
    proxy.fail('/model/new', { status: 500, times: 3 });
    proxy.fail('/model/delete', { status: 500, times: 3 });
    for (let i = 0; i < 3; i++) {
      const r = await http(srv.url, 'POST', '/api/admin/models', { token, json: { name: `Model ${i}`, provider: 'openai', modelId: `gpt-${i}` } });
      assert.is(r.status, 502, r.text);
    }
    const ok = await http(srv.url, 'POST', '/api/admin/models', { token, json: { name: 'Model ok', provider: 'openai', modelId: 'gpt-ok' } });
    assert.is(ok.status, 201, ok.text);
    await srv.seen(/the model proxy works again/);
    const proxyLines = lines(srv.out).filter((l) => l.outsideService === 'the model proxy');
    assert.equal(
      proxyLines.map((l) => [l.level, l.msg]),
      [
        [WARN, 'the model proxy is failing: the model proxy answered 500 to POST /model/new'],
        [INFO, 'the model proxy works again after 6 failed call(s)'],
      ],
    );
    assert.is(proxyLines[0]!.reason, 'the model proxy answered 500 to POST /model/new');

    // The skills catalogue is down: every request fails, the log says so once.
    for (let i = 0; i < 3; i++) assert.is((await http(srv.url, 'GET', '/api/skills/library', { token })).status, 502);
    await srv.seen(/the skills catalogue is failing/);
    const libLines = lines(srv.out).filter((l) => l.outsideService === 'the skills catalogue');
    assert.is(libLines.length, 1);
    assert.is(libLines[0]!.level, WARN);
    assert.match(String(libLines[0]!.reason), /HTTP 503/);
    assert.ok(library.received.length >= 3, 'each request went to the catalogue');
  } finally {
    assert.is(await srv.stop(), 0);
    await proxy.close();
    await library.close();
  }
  // Start to shutdown: every line of standard output is one JSON object.
  const all = lines(srv.out);
  assert.ok(all.length > 10, `${all.length} lines`);
  assert.ok(all.some((l) => l.msg === 'shutdown complete'));
  for (const l of all) assert.not.ok(String(l.msg).includes(proxy.masterKey), 'no master key in the log');
});

test.run();
