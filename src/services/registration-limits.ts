/**
 * Bounds on pending registrations (those awaiting an admin's decision): in all, and per source
 * address, so that registrations, which cost nothing to ask for, cannot fill the store or hold
 * sockets without end. Counted in memory — read once from the store at start, then kept as
 * registrations are created, decided and deleted — so the check is a map lookup.
 */
import { addressKey } from '../domain/net-address.js';
import type { Collections } from '../store/collections.js';
import { RegistrationError } from './registrations.js';

/** What a client refused for a limit is told to wait (Retry-After): places free up as an admin decides. */
export const REGISTRATION_RETRY_AFTER_SECONDS = 60;

/** Stands for the address of registrations stored before addresses were recorded. */
const UNKNOWN_SOURCE = '';

export class PendingRegistrations {
  /** The source of each pending registration, by agent DID (one pending registration per agent). */
  private readonly sourceOf = new Map<string, string>();
  private readonly perSource = new Map<string, number>();

  constructor(
    private readonly maxTotal: number,
    private readonly maxPerSource: number,
  ) {}

  /** Counts the pending registrations in the store (once, at start). */
  async load(c: Collections): Promise<void> {
    this.sourceOf.clear();
    this.perSource.clear();
    const pending = await c.registrations.find({ status: 'pending' }, { projection: { agentDid: 1, source: 1 } });
    for (const r of pending) this.add(r.agentDid, r.source ?? UNKNOWN_SOURCE);
  }

  get total(): number {
    return this.sourceOf.size;
  }

  /**
   * Takes a place for a new pending registration of `did` from `source` (see sourceOf): false when
   * `did` holds one already; throws RegistrationError 429 when a limit is reached. Synchronous, so
   * concurrent registrations cannot both take the last place.
   */
  reserve(did: string, source: string): boolean {
    if (this.sourceOf.has(did)) return false;
    if (this.sourceOf.size >= this.maxTotal) {
      throw new RegistrationError(
        429,
        'too_many_registrations',
        `${this.maxTotal} registrations already await a decision; try again once an admin has decided some`,
        REGISTRATION_RETRY_AFTER_SECONDS,
      );
    }
    if ((this.perSource.get(source) ?? 0) >= this.maxPerSource) {
      throw new RegistrationError(
        429,
        'too_many_registrations',
        `${this.maxPerSource} registrations from this address already await a decision; try again once an admin has decided some`,
        REGISTRATION_RETRY_AFTER_SECONDS,
      );
    }
    this.add(did, source);
    return true;
  }

  /** Gives back the place of `did` (its registration was not made, was decided, or is gone); idempotent. */
  release(did: string): void {
    const source = this.sourceOf.get(did);
    if (source === undefined) return;
    this.sourceOf.delete(did);
    const n = this.perSource.get(source)! - 1;
    if (n > 0) this.perSource.set(source, n);
    else this.perSource.delete(source);
  }

  private add(did: string, source: string): void {
    this.sourceOf.set(did, source);
    this.perSource.set(source, (this.perSource.get(source) ?? 0) + 1);
  }
}

/** The source a registration is counted against: the client address's key (IPv4, or the /64 of IPv6). */
export const sourceOf = addressKey;
