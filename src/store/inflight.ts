/**
 * The operations a store has in flight, so that closing it waits for them and refuses new ones;
 * both backends close this way.
 */
import { StoreUnavailableError } from './types.js';

export class InflightOps {
  private readonly ops = new Set<Promise<unknown>>();
  private shut = false;

  get closed(): boolean {
    return this.shut;
  }

  /** Registers an operation; refuses new ones once closing. */
  track<R>(fn: () => Promise<R>): Promise<R> {
    if (this.shut) return Promise.reject(new StoreUnavailableError('store is closed'));
    const p = fn();
    this.ops.add(p);
    const done = () => this.ops.delete(p);
    p.then(done, done);
    return p;
  }

  /** Refuses new operations from now on; resolves once those in flight have settled. */
  close(): Promise<unknown> {
    this.shut = true;
    return Promise.allSettled([...this.ops]);
  }
}
