/**
 * How the server's process is started (src/cli/node-flags.ts): every launcher sets the same Node
 * options and environment, the executable's `#!` line really runs Node with them, and the options
 * do cap V8's young generation.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { dirname } from 'node:path';
import { SERVER_ENV, SERVER_NODE_FLAGS } from '../src/cli/node-flags.js';

const test = suite('server process: Node options and environment');
const root = new URL('..', import.meta.url);
const text = (path: string) => readFile(new URL(path, root), 'utf8');
const envWords = Object.entries(SERVER_ENV).map(([k, v]) => `${k}=${v}`);

test('the steward executable, npm start and the Docker image all set them', async () => {
  assert.ok(SERVER_NODE_FLAGS.length > 0 && envWords.length > 0);
  const shebang = (await text('src/cli/index.ts')).split('\n')[0];
  assert.is(shebang, `#!/usr/bin/env -S ${[...envWords, 'node', ...SERVER_NODE_FLAGS].join(' ')}`);
  const pkg = JSON.parse(await text('package.json')) as { scripts: Record<string, string>; bin: Record<string, string> };
  assert.is(pkg.scripts.start, `${[...envWords, 'node', ...SERVER_NODE_FLAGS].join(' ')} dist/src/cli/index.js serve`);
  assert.is(pkg.bin.steward, 'dist/src/cli/index.js', 'the executable is the compiled src/cli/index.ts, whose #! line tsc keeps');
  const dockerfile = await text('Dockerfile');
  const cmd = dockerfile.split('\n').find((l) => l.startsWith('CMD '));
  assert.is(cmd, `CMD ${JSON.stringify(['node', ...SERVER_NODE_FLAGS, 'dist/src/cli/index.js', 'serve']).replace(/,/g, ', ')}`);
  for (const word of envWords) assert.match(dockerfile, new RegExp(`^ENV (?:.*\\\\\\n)*\\s*${word}\\b`, 'm'), `the image sets ${word}`);
});

/** What a Node process started with `args` reports: its environment's settings and its young generation after a burst of allocations (MiB). */
const report = (command: string, args: string[]) => {
  const script = `
    const v8 = require('node:v8');
    const keep = [];
    for (let i = 0; i < 3e6; i++) { const o = { a: i, b: 'x' + i }; if (i % 100 === 0) keep.push(o); }
    const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === 'new_space');
    process.stdout.write(JSON.stringify({ env: { ${Object.keys(SERVER_ENV).map((k) => `${k}: process.env.${k} ?? null`).join(', ')} }, youngMiB: s.space_size / 1048576 }));`;
  const env: Record<string, string | undefined> = { ...process.env, NODE_OPTIONS: '', PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}` };
  for (const k of Object.keys(SERVER_ENV)) delete env[k];
  return JSON.parse(execFileSync(command, [...args, '-e', script], { encoding: 'utf8', env })) as { env: Record<string, string | null>; youngMiB: number };
};

test("the #! line runs Node with them: the environment is set and the young generation stays at 8 MiB; without them it grows past that", async () => {
  const shebang = (await text('src/cli/index.ts')).split('\n')[0];
  const [interpreter, ...rest] = shebang.slice(2).split(' ');
  assert.is(interpreter, '/usr/bin/env');
  assert.is(rest[0], '-S');
  const launched = report(interpreter, ['-S', rest.slice(1).join(' ')]);
  assert.equal(launched.env, SERVER_ENV);
  assert.ok(launched.youngMiB <= 8, `with the options: ${launched.youngMiB} MiB`);
  const plain = report(process.execPath, []);
  assert.equal(Object.values(plain.env), Object.keys(SERVER_ENV).map(() => null));
  assert.ok(plain.youngMiB > 8, `without them: ${plain.youngMiB} MiB (the check above could not fail otherwise)`);
});

test.run();
