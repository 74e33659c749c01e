/**
 * The test runner's report (test/run.ts), on a directory of small suites: one that passes, one
 * that fails, one that crashes before uvu reports.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { execFile } from 'node:child_process';
import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from './helpers.js';

const test = suite('test runner');
const runner = new URL('./run.ts', import.meta.url).pathname;
const modules = new URL('../node_modules', import.meta.url).pathname;

const suiteFile = (body: string) => `import { test } from 'uvu';\nimport * as assert from 'uvu/assert';\n${body}\ntest.run();\n`;

function run(dir: string, args: string[] = []): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', runner, ...args],
      { env: { ...process.env, TEST_RUN_DIR: join(dir, 'test'), TEST_TYPECHECK: '0', TEST_PARALLEL: '2' }, cwd: dir },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

test('a run ends with the files that failed, then the one count line', async () => {
  const dir = await tempDir('steward-runner-');
  try {
    await mkdir(join(dir, 'test', 'deeper'), { recursive: true });
    await symlink(modules, join(dir, 'node_modules'));
    await writeFile(join(dir, 'test', 'good.test.ts'), suiteFile("test('ok', () => assert.is(1, 1));\ntest('also ok', () => assert.ok(true));"));
    await writeFile(join(dir, 'test', 'deeper', 'bad.test.ts'), suiteFile("test('ok', () => assert.ok(true));\ntest('wrong', () => assert.is(1, 2));"));
    await writeFile(join(dir, 'test', 'crash.test.ts'), "throw new Error('boom before any test');\n");
    const all = await run(dir);
    assert.is(all.code, 1);
    const tail = all.out.trimEnd().split('\n').slice(-5);
    assert.equal(tail, ['failed (2 files):', '  crash.test.ts', '  deeper/bad.test.ts', '', '3 passed, 2 failed']);

    // Nothing failed: no list, just the count. Patterns match the path from the checkout.
    const good = await run(dir, ['test/good']);
    assert.is(good.code, 0);
    assert.equal(good.out.trimEnd().split('\n').slice(-2), ['', '2 passed, 0 failed']);
    assert.not.match(good.out, 'failed (');
    // The checkout's own directory name is not part of what a pattern matches.
    const byDirName = await run(dir, ['steward-runner-']);
    assert.match(byDirName.out, 'no test files matched');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test.run();
