/**
 * The Python SDK's own README (packages/agent-python/README.md), followed as printed in a copy of
 * the package: a virtual environment on Debian's libraries, the package installed with pip, and
 * the demo agent started the way the README starts it, registering with a real Steward.
 */
import { cp, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { tempDir } from './helpers.js';
import { startWithOwner } from './fleet-helpers.js';
import { ShellProcess, inShell } from './cli-process.js';
import { PY_PACKAGE } from './sdk-python-helpers.js';

const test = suite('agent SDK for Python, installed as its README says');

test("the README's install, then its demo agent command: installed, it registers and waits for approval", async () => {
  const readme = await readFile(join(PY_PACKAGE, 'README.md'), 'utf8');
  const blocks = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!.trim());
  const install = blocks.find((b) => b.includes('venv --system-site-packages'));
  const demo = blocks.find((b) => b.includes('-m steward_agent'));
  assert.ok(install && demo, 'the README shows the install and the demo agent');
  const dir = await tempDir('steward-pypackage-');
  await cp(PY_PACKAGE, join(dir, 'packages', 'agent-python'), { recursive: true, filter: (src) => !/(__pycache__|\.pytest_cache|build|egg-info)$/.test(src) });
  const home = await tempDir('steward-pyhome-');
  // A person's shell in that folder: their PATH, no PYTHONPATH pointing at the checkout.
  const env = { HOME: home, PATH: process.env.PATH! };
  const help = await inShell(`set -e\n${install}\nsteward-agent --help\npython3 -m steward_agent --help`, env, { cwd: dir });
  assert.is(help.code, 0, help.stdout + help.stderr);
  assert.match(help.stdout, /^usage: steward-agent \[-h\]/m);
  assert.match(help.stdout, /^usage: python3 -m steward_agent \[-h\]/m);
  const { s } = await startWithOwner();
  const agent = new ShellProcess(`. .venv/bin/activate\n${demo.replaceAll('http://localhost:8080', s.url)}`, env, dir);
  try {
    await agent.seen(/Z status pending: registration \S+ awaits approval\./);
    assert.is((await stat(join(dir, 'my-agent.json'))).mode & 0o777, 0o600);
  } finally {
    await agent.stop();
    await s.stop(true);
  }
});

test.run();
