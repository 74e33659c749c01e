/**
 * A benchmark child process driven over IPC: it announces itself with `{hello: true}`, then
 * answers each `{id, cmd, ...}` with `{id, ...result}` or `{id, error}`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
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

/** Starts a bench/ script (path relative to bench/) under tsx with an IPC channel. */
export function startProc(file: string, extraArgs: string[] = []): Proc {
  const path = fileURLToPath(new URL(file, import.meta.url));
  return new Proc(spawn(process.execPath, [...extraArgs, '--import', 'tsx', path], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }));
}
