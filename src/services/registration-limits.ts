/**
 * Bounds on pending registrations (those awaiting an admin's decision): in all, and per source
 * address, so that registrations, which cost nothing to ask for, cannot fill the store or hold
 * sockets without end. Counted in memory — read once from the store at start, then kept as
 * registrations are created, decided and deleted — so the check is a map lookup.
 */
import { isIPv4, isIPv6 } from 'node:net';
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

/**
 * The source a registration is counted against, from a peer address as uWS gives it: an IPv4
 * address (IPv4-mapped IPv6 included), or the /64 of an IPv6 address (one host commonly holds a
 * whole /64, so counting single IPv6 addresses would bound nothing).
 */
export function sourceOf(address: string): string {
  if (isIPv4(address)) return address;
  if (!isIPv6(address)) return address;
  const groups = expandIPv6(address);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join('.');
  }
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address (compressed, or ending in dotted IPv4). */
function expandIPv6(address: string): number[] {
  let text = address.replace(/%.*$/, '');
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1]!.split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parse = (part: string) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const left = parse(head);
  if (tail === undefined) return left;
  const right = parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}
