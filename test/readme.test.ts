/**
 * The README followed as a newcomer would, in a fresh copy of the repository (its tracked files:
 * no dist/, no data/): `npm start`, the First start commands with the link the console printed,
 * the dashboard's sign-in command (for a code a browser asked for), and the first agent — each
 * command taken from the README's own code blocks and run in bash as printed. Only two things
 * differ from a person's first run: node_modules is a link to this checkout's (no registry here),
 * and the port is a free one instead of 8080 (PORT, as the README says).
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, realpathSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { http, tempDir } from './helpers.js';
import { checkoutDir, inShell, ShellProcess } from './cli-process.js';
import { freePort } from './stand-in-server.js';

const test = suite('the README, followed word for word');

const README = readFileSync(join(checkoutDir, 'README.md'), 'utf8');

/** The lines of the ```sh blocks of one README section, without their comments. */
function commandsOf(heading: string): string[] {
  const start = README.indexOf(`\n## ${heading}`);
  assert.ok(start >= 0, `the README has a section "${heading}"`);
  const end = README.indexOf('\n## ', start + 4);
  const section = README.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
    .flatMap((m) => m[1]!.split('\n'))
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => l.replace(/\s+#(?!.*['"]).*$/, '').trim());
}

test('Quick start, First start, the dashboard and the first agent run as printed in a fresh copy', async () => {
  const copy = join(await tempDir('steward-readme-'), 'steward');
  mkdirSync(copy);
  // The tracked files as they stand (what a clone of this commit holds, with the changes not yet committed).
  execFileSync('bash', ['-c', `git ls-files -z | tar --null -T - -cf - | tar -xf - -C '${copy}'`], { cwd: checkoutDir });
  symlinkSync(realpathSync(join(checkoutDir, 'node_modules')), join(copy, 'node_modules'));
  const port = await freePort();
  const home = await tempDir('steward-readme-home-');
  const env = { HOME: home, PATH: process.env.PATH! };
  const local = (line: string) => line.replaceAll('localhost:8080', `localhost:${port}`);

  const quick = commandsOf('Quick start');
  assert.equal(quick, ['npm ci', 'npm start']);
  const server = new ShellProcess(`PORT=${port} npm start`, env, copy);
  let agent: ShellProcess | null = null;
  let pyAgent: ShellProcess | null = null;
  try {
    await server.seen(/Steward listening/, 15 * 60_000);

    // First start: the README's commands, with the link the console printed in place of its example.
    const link = (await server.seen(/Connection string \(claim URL\): (\S+)/))[1]!;
    const first = commandsOf('First start').map(local);
    assert.equal(first.length, 4, first.join('\n'));
    for (const line of first) {
      const printed = line.replace(/'http:\/\/localhost:\d+\/api\/user\/claim\/<token>'/, `'${link}'`);
      if (line.includes('wallet') || line.includes(' login ')) assert.ok(server.all.includes(printed), `the console printed it as the README shows it: ${printed}`);
      const r = await inShell(printed, env, { cwd: copy });
      assert.is(r.code, 0, `${printed}\n${r.stdout}${r.stderr}`);
    }

    // The dashboard: the command the page shows, for a code a browser asked for, answered "y".
    const device = await http(`http://127.0.0.1:${port}`, 'POST', '/api/auth/device', { json: {} });
    assert.is(device.status, 200, device.text);
    const [approve] = commandsOf('The dashboard').map(local);
    const r = await inShell(approve!.replace('WDJB-MJHT', device.body.userCode), env, { cwd: copy, input: 'y\n' });
    assert.is(r.code, 0, r.stdout + r.stderr);
    const signedIn = await http(`http://127.0.0.1:${port}`, 'POST', '/api/auth/device/token', { json: { deviceCode: device.body.deviceCode } });
    assert.is(signedIn.status, 200, signedIn.text);

    // The first agent: started as printed; approved, asked and shown as printed.
    const [start, approveAgent, send, get] = commandsOf('Your first agent').map(local);
    agent = new ShellProcess(start!, env, copy);
    const id = (await agent.seen(/registration (\S+) awaits approval/))[1]!;
    const approved = await inShell(approveAgent!.replace('<id>', id), env, { cwd: copy });
    assert.is(approved.code, 0, approved.stdout + approved.stderr);
    await agent.seen(/Z status ready$/m);
    const sent = await inShell(send!, env, { cwd: copy });
    assert.is(sent.code, 0, sent.stdout + sent.stderr);
    assert.match(sent.stdout, /"hello": "world"/);
    const shown = await inShell(get!, env, { cwd: copy });
    assert.is(shown.code, 0, shown.stdout + shown.stderr);
    assert.match(shown.stdout, /Capabilities in force +api_call/);

    // The Python demo agent, as printed, approved with the checkout form of the command it printed.
    const py = commandsOf('Your first agent').map(local).find((l) => l.includes('steward_agent'));
    assert.ok(py, 'the README starts the Python demo agent');
    pyAgent = new ShellProcess(py, env, copy);
    const pyApprove = (await pyAgent.seen(/^ +(npm run steward -- registrations approve \S+ --capabilities \S+)/m))[1]!;
    const pyApproved = await inShell(pyApprove, env, { cwd: copy });
    assert.is(pyApproved.code, 0, pyApproved.stdout + pyApproved.stderr);
    await pyAgent.seen(/Z status ready$/m);
    const pyGet = await inShell(get!.replace(' demo', ' py-demo'), env, { cwd: copy });
    assert.is(pyGet.code, 0, pyGet.stdout + pyGet.stderr);
    assert.match(pyGet.stdout, /py-demo/);
  } finally {
    await pyAgent?.stop();
    await agent?.stop();
    await server.stop();
  }
});

test.run();
