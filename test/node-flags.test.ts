/**
 * The Node options the server runs with (src/cli/node-flags.ts): every way of starting it carries
 * them, and they do cap V8's young generation.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { SERVER_NODE_FLAGS } from '../src/cli/node-flags.js';

const test = suite('server Node options');
const root = new URL('..', import.meta.url);
const text = (path: string) => readFile(new URL(path, root), 'utf8');

test('the steward executable, npm start and the Docker image all start Node with them', async () => {
  const flags = SERVER_NODE_FLAGS.join(' ');
  assert.ok(flags.length > 0);
  const shebang = (await text('src/cli/index.ts')).split('\n')[0];
  assert.is(shebang, `#!/usr/bin/env -S node ${flags}`);
  const pkg = JSON.parse(await text('package.json')) as { scripts: Record<string, string>; bin: Record<string, string> };
  assert.is(pkg.scripts.start, `node ${flags} dist/src/cli/index.js serve`);
  assert.is(pkg.bin.steward, 'dist/src/cli/index.js', 'the executable is the compiled src/cli/index.ts, whose #! line tsc keeps');
  const cmd = (await text('Dockerfile')).split('\n').find((l) => l.startsWith('CMD '));
  assert.is(cmd, `CMD ${JSON.stringify(['node', ...SERVER_NODE_FLAGS, 'dist/src/cli/index.js', 'serve']).replace(/,/g, ', ')}`);
});

/** The young generation's size after a burst of short-lived and some kept allocations, in MiB. */
const youngGenerationMiB = (flags: readonly string[]) => {
  const script = `
    const v8 = require('node:v8');
    const keep = [];
    for (let i = 0; i < 3e6; i++) { const o = { a: i, b: 'x' + i }; if (i % 100 === 0) keep.push(o); }
    const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === 'new_space');
    process.stdout.write(String(s.space_size / 1048576));`;
  return Number(execFileSync(process.execPath, [...flags, '-e', script], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } }));
};

test('with them, a burst of allocations leaves the young generation at 8 MiB at most; without, it grows past that', () => {
  const capped = youngGenerationMiB(SERVER_NODE_FLAGS);
  const uncapped = youngGenerationMiB([]);
  assert.ok(capped <= 8, `capped: ${capped} MiB`);
  assert.ok(uncapped > 8, `uncapped: ${uncapped} MiB (the check above could not fail otherwise)`);
});

test.run();
