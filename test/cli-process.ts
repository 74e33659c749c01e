/**
 * The `steward` command as a real child process (through tsx), its output collected as it comes:
 * `steward serve` for a server that can be killed at any instant, `steward agent` for an agent
 * that must survive the server, and `runCli` for a command run to completion.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { waitFor } from './helpers.js';

export const cliPath = fileURLToPath(new URL('../src/cli/index.ts', import.meta.url));

/** Generous: a child process on a loaded machine; never a measure of the behaviour. */
export const LONG = 60_000;

/** The log line `steward serve` writes once it listens, with its port. */
const LISTENING = /"msg":"Steward listening[^\n]*"port":(\d+)|"port":(\d+)[^\n]*"msg":"Steward listening/;

export class StewardProcess {
  readonly child: ChildProcess;
  /** Standard output. */
  out = '';
  /** Standard error. */
  err = '';
  /** Both, in the order they came. */
  all = '';
  /** How it ended, once it has (and its output is all in). */
  exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  readonly exited: Promise<number | null>;
  /** The server's address (`serve` only). */
  url = '';

  /**
   * Runs `steward <args>` with `env` over this process's environment, or — `isolated` — over only
   * PATH, NODE_OPTIONS, TMPDIR and LANG (a person's own shell: no HOME or config of ours leaks in).
   */
  constructor(args: string[], env: Record<string, string> = {}, opts: { isolated?: boolean; input?: string } = {}) {
    const base = opts.isolated ? isolatedBase() : process.env;
    const stdin = opts.input === undefined ? 'ignore' : 'pipe';
    this.child = spawn(process.execPath, ['--import', 'tsx', cliPath, ...args], { env: { ...base, ...env }, stdio: [stdin, 'pipe', 'pipe'] });
    if (opts.input !== undefined) this.child.stdin!.end(opts.input);
    this.child.stdout!.on('data', (d) => ((this.out += d), (this.all += d)));
    this.child.stderr!.on('data', (d) => ((this.err += d), (this.all += d)));
    this.exited = new Promise((resolve, reject) => {
      this.child.on('error', reject);
      this.child.on('close', (code, signal) => {
        this.exit = { code, signal };
        resolve(code);
      });
    });
  }

  /** `steward serve` on an ephemeral port of 127.0.0.1 at LOG_LEVEL info; resolves once it listens. */
  static async serve(env: Record<string, string>): Promise<StewardProcess> {
    const p = new StewardProcess(['serve'], { PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env });
    const m = await waitFor(() => {
      if (p.exit) throw new Error(`steward serve exited (${JSON.stringify(p.exit)}) before it listened:\n${p.all}`);
      return LISTENING.exec(p.all);
    }, LONG);
    p.url = `http://127.0.0.1:${m[1] ?? m[2]}`;
    return p;
  }

  /** How many times `re` has appeared on standard output. */
  count(re: RegExp): number {
    return (this.out.match(new RegExp(re.source, 'g')) ?? []).length;
  }

  /** Waits until `re` has appeared `times` times on standard output (fails at once if the process ended). */
  async seen(re: RegExp, times = 1): Promise<void> {
    await waitFor(() => {
      if (this.exit) throw new Error(`the process exited (${JSON.stringify(this.exit)}) before ${re} was seen ${times}x:\n${this.out}\n${this.err}`);
      return this.count(re) >= times;
    }, LONG);
  }

  kill(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Ends it with SIGTERM (unless it has ended) and resolves with its exit code. */
  async stop(): Promise<number | null> {
    if (!this.exit) this.kill('SIGTERM');
    return this.exited;
  }
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function isolatedBase(): Record<string, string> {
  const base: Record<string, string> = {};
  for (const k of ['PATH', 'NODE_OPTIONS', 'TMPDIR', 'LANG']) if (process.env[k] !== undefined) base[k] = process.env[k]!;
  return base;
}

/** Runs `steward <args>` to completion (killed, with code null, if it hangs past `timeoutMs`); `input` is its standard input. */
export async function runCli(args: string[], env: Record<string, string> = {}, timeoutMs = LONG, opts: { isolated?: boolean; input?: string } = {}): Promise<CliResult> {
  const p = new StewardProcess(args, env, opts);
  const hang = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
  try {
    const code = await p.exited;
    return { code, stdout: p.out, stderr: p.err };
  } finally {
    clearTimeout(hang);
  }
}

/** The repository's root: where a person runs `npm run steward -- …` in a checkout. */
export const checkoutDir = fileURLToPath(new URL('..', import.meta.url));

/**
 * Runs a command line as a person would paste it into bash in the checkout (or `opts.cwd`), with
 * `env` alone (no npm_* variables of the test run): how every printed `npm run steward -- …` is
 * checked. `opts.input` is what the person types.
 */
export function inShell(line: string, env: Record<string, string>, opts: { cwd?: string; input?: string; timeoutMs?: number } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', line], { cwd: opts.cwd ?? checkoutDir, env, stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    if (opts.input !== undefined) child.stdin!.end(opts.input);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const hang = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? LONG);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(hang);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * A command line that keeps running (`npm start`, `npm run steward -- agent …`) in bash, in its
 * own process group, so that npm and the node process beneath it end together.
 */
export class ShellProcess {
  readonly child: ChildProcess;
  /** Standard output and standard error, in the order they came. */
  all = '';
  exited = false;

  constructor(line: string, env: Record<string, string>, cwd = checkoutDir) {
    this.child = spawn('bash', ['-c', line], { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout!.on('data', (d) => (this.all += d));
    this.child.stderr!.on('data', (d) => (this.all += d));
    this.child.on('close', () => (this.exited = true));
  }

  /** The first match of `re` in what it printed, once it has printed it (fails at once if it ended). */
  seen(re: RegExp, timeoutMs = LONG): Promise<RegExpExecArray> {
    return waitFor(() => {
      const m = re.exec(this.all);
      if (!m && this.exited) throw new Error(`the process ended before ${re} was seen:\n${this.all}`);
      return m;
    }, timeoutMs);
  }

  /** SIGTERM to the whole group; resolves once bash has ended. */
  async stop(): Promise<void> {
    if (this.exited) return;
    const closed = new Promise((r) => this.child.once('close', r));
    try {
      process.kill(-this.child.pid!, 'SIGTERM');
    } catch {
      return; // already gone
    }
    await closed;
  }
}
