/**
 * The address a request comes from: the peer's, or — when the peer is one of the trusted proxies
 * (TRUSTED_PROXIES, a load balancer in front) — the one the proxies recorded in X-Forwarded-For.
 * Rate limits count per address; an IPv6 client counts per /64, the block one subscriber holds.
 */
import { BlockList, isIP } from 'node:net';

export class ClientAddresses {
  private readonly trusted: BlockList | null;

  /** `trusted`: addresses and CIDR subnets (`10.0.0.0/8`, `fd00::/8`); empty: X-Forwarded-For is ignored. */
  constructor(trusted: readonly string[]) {
    if (trusted.length === 0) {
      this.trusted = null;
      return;
    }
    const list = new BlockList();
    for (const entry of trusted) {
      const [address, bits] = entry.split('/') as [string, string | undefined];
      const type = isIP(address) === 6 ? 'ipv6' : 'ipv4';
      if (bits === undefined) list.addAddress(address, type);
      else list.addSubnet(address, Number(bits), type);
    }
    this.trusted = list;
  }

  /**
   * The client's address: the peer's (as uWS writes it), unless the peer is trusted; then the
   * X-Forwarded-For hops are read from the right, and the first that is not a trusted proxy is the
   * client (the left-most when all are). A hop that is not an address ends the walk there.
   */
  of(peer: string, forwardedFor: string | undefined): string {
    const address = canonicalAddress(peer) ?? peer;
    if (!this.trusted || !forwardedFor || !this.isTrusted(address)) return address;
    let client = address;
    const hops = forwardedFor.split(',');
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = canonicalAddress(hops[i]!.trim());
      if (!hop) break;
      client = hop;
      if (!this.isTrusted(hop)) break;
    }
    return client;
  }

  private isTrusted(address: string): boolean {
    return this.trusted!.check(address, isIP(address) === 6 ? 'ipv6' : 'ipv4');
  }
}

/**
 * An IP address in one spelling: IPv4 dotted (also for an IPv4-mapped IPv6 address, which is how
 * uWS writes an IPv4 peer on a dual-stack socket), IPv6 compressed; null when it is not one.
 */
export function canonicalAddress(text: string): string | null {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  const kind = isIP(bare);
  if (kind === 4) return bare;
  if (kind !== 6) return null;
  const groups = expandIPv6(bare);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join('.');
  }
  return new URL(`http://[${bare}]`).hostname.slice(1, -1);
}

/** The key an address is counted under by the rate limits: IPv4 as is, IPv6 by its /64. */
export function addressKey(address: string): string {
  if (isIP(address) !== 6) return address;
  return `${expandIPv6(address).slice(0, 4).map((g) => g.toString(16)).join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address (an embedded IPv4 tail included). */
function expandIPv6(address: string): number[] {
  let text = address.split('%')[0]!;
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? (text.split('::') as [string, string]) : [text, null];
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const left = parse(head);
  if (tail === null) return left;
  const right = parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}
