/**
 * Running the Python agent SDK's tests (packages/agent-python/) from the TypeScript runner: pytest
 * under Debian's /usr/bin/python3 (which python3-websockets, python3-cryptography and
 * python3-pytest install for; another python3 may come first on the PATH), its JUnit report read
 * so that no test, a skipped test or a failure fails the file; and child processes of the SDK.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as assert from 'uvu/assert';
import { tempDir } from './helpers.js';

export const PYTHON = '/usr/bin/python3';
export const PY_PACKAGE = fileURLToPath(new URL('../packages/agent-python/', import.meta.url));

/** The environment of a Python child: the package importable from the checkout, no bytecode written into it. */
export function pythonEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...process.env, PYTHONPATH: PY_PACKAGE, PYTHONDONTWRITEBYTECODE: '1', PYTHONUNBUFFERED: '1', ...extra };
}

export interface PytestRun {
  code: number | null;
  output: string;
  tests: number;
  failures: number;
  errors: number;
  skipped: number;
}

/** Runs pytest on `files` (paths under packages/agent-python/) and reads its JUnit report. */
export async function pytest(files: string[], env: Record<string, string> = {}): Promise<PytestRun> {
  const xml = join(await tempDir('steward-pytest-'), 'report.xml');
  const child = spawn(PYTHON, ['-m', 'pytest', '-q', '--color=no', '-p', 'no:cacheprovider', '-rfEs', `--junitxml=${xml}`, ...files], { cwd: PY_PACKAGE, env: pythonEnv(env) });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
  const report = await readFile(xml, 'utf8').catch(() => '');
  const count = (name: string) => Number(new RegExp(`<testsuite [^>]*\\b${name}="(\\d+)"`).exec(report)?.[1] ?? 0);
  return { code, output, tests: count('tests'), failures: count('failures'), errors: count('errors'), skipped: count('skipped') };
}

/** Runs Debian's python3 with `args` to the end; its exit code and its output (stdout and stderr). */
export async function runPython(args: string[], cwd: string, env: Record<string, string> = {}): Promise<{ code: number | null; output: string }> {
  const child = spawn(PYTHON, args, { cwd, env: pythonEnv(env) });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
  return { code, output };
}

/** Asserts a pytest run passed every test it collected, and collected at least `atLeast` (exit code 5, no tests, is a failure). */
export function passed(run: PytestRun, atLeast: number): void {
  const summary = `pytest exited ${run.code}: ${run.tests} tests, ${run.failures} failed, ${run.errors} errors, ${run.skipped} skipped\n${run.output}`;
  assert.is(run.code, 0, summary);
  assert.ok(run.tests >= atLeast, summary);
  assert.is(run.failures + run.errors + run.skipped, 0, summary);
}

/** A Python child process whose output lines are kept and can be waited for. */
export class PythonProcess {
  readonly lines: string[] = [];
  readonly errLines: string[] = [];
  readonly exited: Promise<number | null>;
  private readonly child: ChildProcessWithoutNullStreams;

  constructor(args: string[], env: Record<string, string> = {}, cwd = PY_PACKAGE) {
    this.child = spawn(PYTHON, args, { cwd, env: pythonEnv(env) });
    const split = (into: string[]) => {
      let rest = '';
      return (d: Buffer) => {
        rest += d.toString();
        const parts = rest.split('\n');
        rest = parts.pop()!;
        into.push(...parts);
      };
    };
    this.child.stdout.on('data', split(this.lines));
    this.child.stderr.on('data', split(this.errLines));
    this.exited = new Promise((resolve) => this.child.on('close', (c) => resolve(c)));
  }

  /** The first line of its output (stdout, then stderr) matching `re`, waiting for it; or a failure saying what was printed. */
  async line(re: RegExp, timeoutMs = 60_000): Promise<RegExpExecArray> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      for (const l of [...this.lines, ...this.errLines]) {
        const m = re.exec(l);
        if (m) return m;
      }
      if (Date.now() > end || this.child.exitCode !== null) {
        assert.unreachable(`no line matching ${re}; ${this.output()}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** What it printed so far, for a failure's message. */
  output(): string {
    return `stdout:\n${this.lines.join('\n')}\nstderr:\n${this.errLines.join('\n')}`;
  }

  signal(sig: NodeJS.Signals): void {
    this.child.kill(sig);
  }
}
