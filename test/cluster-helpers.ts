/**
 * Helpers of the cluster suites: a logger that records, a clock advanced by hand (several nodes
 * share its time; one node's timers can be halted, as when its process dies), and a wait that
 * fails instead of hanging.
 */
import type { Clock, Timer } from '../src/cluster/clock.js';

export interface LogEntry {
  level: 'error' | 'warn' | 'info';
  obj: Record<string, unknown>;
  msg: string;
}

export interface RecordingLog {
  entries: LogEntry[];
  error(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  errors(): LogEntry[];
}

export function recordingLog(): RecordingLog {
  const entries: LogEntry[] = [];
  const add = (level: LogEntry['level']) => (obj: object, msg: string) => {
    entries.push({ level, obj: obj as Record<string, unknown>, msg });
    if (process.env.TEST_CLUSTER_LOG) console.log(level, msg, obj);
  };
  return { entries, error: add('error'), warn: add('warn'), info: add('info'), errors: () => entries.filter((e) => e.level === 'error') };
}

/**
 * Waits until `fn` is truthy; the bound only keeps a broken test from hanging (it is no timing
 * assertion: the condition is expected long before it).
 */
export async function eventually<T>(fn: () => T | Promise<T>, what: string, boundMs = 20_000): Promise<Exclude<T, null | undefined | false | 0 | ''>> {
  const end = Date.now() + boundMs;
  for (;;) {
    const v = await fn();
    if (v) return v as Exclude<T, null | undefined | false | 0 | ''>;
    if (Date.now() > end) throw new Error(`never happened: ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

interface Scheduled {
  at: number;
  seq: number;
  fn: () => unknown;
  owner: ClockView;
  cancelled: boolean;
}

/**
 * A clock whose time moves only when `advance` is called. Timers fire in time order, each one's
 * returned promise awaited before the next fires, so a timer's store work is done when
 * `advance` returns.
 */
export class ManualClock {
  private time: number;
  private seq = 0;
  private readonly timers: Scheduled[] = [];

  constructor(start = Date.UTC(2030, 0, 1)) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  /** A node's clock: the shared time (`offsetMs` ahead of it: a node whose clock is wrong), with timers that `halt()` drops. */
  view(offsetMs = 0): ClockView {
    return new ClockView(this, offsetMs);
  }

  schedule(owner: ClockView, ms: number, fn: () => unknown): Timer {
    const entry: Scheduled = { at: this.time + Math.max(0, ms), seq: ++this.seq, fn, owner, cancelled: false };
    this.timers.push(entry);
    return { cancel: () => void (entry.cancelled = true) };
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way. */
  async advance(ms: number): Promise<void> {
    const target = this.time + ms;
    for (;;) {
      const due = this.timers
        .filter((t) => !t.cancelled && !t.owner.halted && t.at <= target)
        .sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      due.cancelled = true;
      this.time = Math.max(this.time, due.at);
      await due.fn();
    }
    this.time = target;
    for (let i = this.timers.length - 1; i >= 0; i--) if (this.timers[i]!.cancelled || this.timers[i]!.owner.halted) this.timers.splice(i, 1);
  }
}

export class ClockView implements Clock {
  halted = false;
  constructor(
    private readonly clock: ManualClock,
    private readonly offsetMs = 0,
  ) {}

  now(): number {
    return this.clock.now() + this.offsetMs;
  }

  after(ms: number, fn: () => unknown): Timer {
    if (this.halted) return { cancel: () => undefined };
    return this.clock.schedule(this, ms, fn);
  }

  /** This node's timers never fire again (its process is gone). */
  halt(): void {
    this.halted = true;
  }
}
