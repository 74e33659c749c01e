/**
 * A fault-injecting store wrapper for tests: chosen collection operations fail before they run
 * (`fail`: nothing is written), or run and then report failure (`land-then-fail`: the write is
 * stored, the caller sees an error, as after a lost acknowledgement or a timed-out retry).
 * Start a server with `startServer(env, dir, { wrapStore: faults.wrap })`.
 */
import { StoreUnavailableError, type Collection, type Doc, type Store } from '../src/store/types.js';

export type FaultMode = 'fail' | 'land-then-fail';

export interface FaultRule {
  /** The collection's name, or `*` for every collection. */
  collection: string;
  /** The operation, or `*` for every operation (a node cut off its store). */
  op: keyof Collection<Doc> | '*';
  mode: FaultMode;
  /** How many matching calls fault before the rule is used up (default 1; Infinity for all). */
  times?: number;
  /** Only calls whose arguments pass fault. */
  when?: (args: unknown[]) => boolean;
  /** The error to throw (default a StoreUnavailableError). */
  error?: () => Error;
}

export class FaultInjector {
  private rules: Array<FaultRule & { left: number }> = [];
  /** Every fault injected, in order: `collection.op mode`. */
  readonly injected: string[] = [];
  /** While true, every call that runs is recorded in `calls`. */
  metering = false;
  /** The calls that ran while `metering` (what a node reads and writes): collection, operation, arguments and, for a read, the documents it returned. */
  readonly calls: Array<{ collection: string; op: string; args: unknown[]; docs?: number }> = [];

  /** Adds a rule; returns a function that removes it. */
  add(rule: FaultRule): () => void {
    const entry = { ...rule, left: rule.times ?? 1 };
    this.rules.push(entry);
    return () => {
      this.rules = this.rules.filter((r) => r !== entry);
    };
  }

  clear(): void {
    this.rules = [];
  }

  /** The rule that applies to this call, used up by one. */
  private take(collection: string, op: string, args: unknown[]): (FaultRule & { left: number }) | undefined {
    const rule = this.rules.find((r) => (r.collection === collection || r.collection === '*') && (r.op === op || r.op === '*') && r.left > 0 && (!r.when || r.when(args)));
    if (rule) {
      rule.left--;
      this.injected.push(`${collection}.${op} ${rule.mode}`);
    }
    return rule;
  }

  readonly wrap = (store: Store): Store => {
    const cache = new Map<string, Collection<Doc>>();
    return {
      get kind() {
        return store.kind;
      },
      collection: <T extends Doc>(name: string): Collection<T> => {
        let wrapped = cache.get(name);
        if (!wrapped) cache.set(name, (wrapped = this.wrapCollection(store.collection<Doc>(name))));
        return wrapped as unknown as Collection<T>;
      },
      ping: () => store.ping(),
      close: () => store.close(),
    };
  };

  private wrapCollection(inner: Collection<Doc>): Collection<Doc> {
    return new Proxy(inner, {
      get: (target, prop, receiver) => {
        const value = Reflect.get(target, prop, receiver);
        if (typeof value !== 'function') return value;
        return async (...args: unknown[]) => {
          const rule = this.take(target.name, String(prop), args);
          const error = () => rule?.error?.() ?? new StoreUnavailableError(`injected fault: ${target.name}.${String(prop)}`);
          if (rule?.mode === 'fail') throw error();
          const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          if (this.metering) this.calls.push({ collection: target.name, op: String(prop), args, ...(Array.isArray(result) ? { docs: result.length } : {}) });
          if (rule?.mode === 'land-then-fail') throw error();
          return result;
        };
      },
    });
  }
}

/**
 * Patches a live collection's `insertMany` (restore with `restore()`): the first call waits for
 * `release()`, so that what comes meanwhile is handed over as one batch; the second stores its
 * first `stored` documents and then fails, as an ambiguous partial write; later calls run as usual.
 * `calls` holds each call's number of documents.
 */
export function heldThenPartlyStored(collection: unknown, stored: number, message: string): { calls: number[]; release: () => void; restore: () => void } {
  const target = collection as { insertMany: (docs: unknown[]) => Promise<void> };
  const insertMany = target.insertMany;
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const calls: number[] = [];
  target.insertMany = async (docs) => {
    calls.push(docs.length);
    if (calls.length === 1) await held;
    if (calls.length === 2) {
      await insertMany(docs.slice(0, stored));
      throw new StoreUnavailableError(message);
    }
    return insertMany(docs);
  };
  return {
    calls,
    release,
    restore: () => {
      target.insertMany = insertMany;
    },
  };
}
