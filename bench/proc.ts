/**
 * A benchmark child process driven over IPC: it announces itself with `{hello: true}`, then
 * answers each `{id, cmd, ...}` with `{id, ...result}` or `{id, error}`.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export class Proc {
  private seq = 0;
  private readonly waiting = new Map<number, (v: any) => void>();
  readonly ready: Promise<void>;
  constructor(readonly child: ChildProcess) {
    let hello: () => void;
    this.ready = new Promise((r) => (hello = r));
    child.on('message', (m: { id: number; hello?: boolean; error?: string }) => {
      if (m.hello) return hello();
      const w = this.waiting.get(m.id);
      this.waiting.delete(m.id);
      w?.(m);
    });
  }
  async call<T = any>(msg: object): Promise<T> {
    await this.ready;
    const id = ++this.seq;
    const r = await new Promise<any>((resolve) => {
      this.waiting.set(id, resolve);
      this.child.send({ id, ...msg });
    });
    if (r.error) throw new Error(r.error);
    return r as T;
  }
}

const root = fileURLToPath(new URL('..', import.meta.url));
let built = false;

/**
 * Compiles src/ and bench/ with tsc once per run (tsconfig.bench.json: the production build in
 * dist/, plus dist/bench), so the processes under test run the JavaScript a production build
 * runs, not a loader's on-the-fly transform. BENCH_FROM_SOURCE=1 runs the sources under tsx.
 */
function build(): void {
  if (built || process.env.BENCH_FROM_SOURCE === '1') return;
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.bench.json')], { cwd: root, stdio: 'inherit' });
  built = true;
}

/** Starts a bench/ script (path relative to bench/) with an IPC channel, compiled (see build); `env` adds to the environment. */
export function startProc(file: string, extraArgs: string[] = [], env: Readonly<Record<string, string>> = {}): Proc {
  build();
  const args =
    process.env.BENCH_FROM_SOURCE === '1'
      ? ['--import', 'tsx', fileURLToPath(new URL(file, import.meta.url))]
      : [join(root, 'dist/bench', file.replace(/\.ts$/, '.js'))];
  return new Proc(spawn(process.execPath, [...extraArgs, ...args], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env: { ...process.env, ...env } }));
}

/**
 * The child's side: each command's answer is what `handle` resolves to (no answer for a command
 * it does not know) or the error it throws; 'stop' runs `stop`, answers, then ends the process.
 * Announces the child once the handler is in place.
 */
export function serveCommands<M extends { cmd: string }>(handle: (msg: M) => Promise<object | undefined>, stop: () => Promise<void>): void {
  const reply = (id: number, body: object) => process.send!({ id, ...body });
  process.on('message', async (raw: { id: number } & M) => {
    const { id } = raw;
    try {
      if (raw.cmd === 'stop') {
        await stop();
        reply(id, {});
        setTimeout(() => process.exit(0), 50);
        return;
      }
      const body = await handle(raw);
      if (body !== undefined) reply(id, body);
    } catch (err) {
      reply(id, { error: (err as Error).stack ?? String(err) });
    }
  });
  process.send!({ id: 0, hello: true });
}
