/**
 * The address a request comes from: the peer's, or — when the peer is one of the trusted proxies
 * (TRUSTED_PROXIES, a load balancer in front) — the one the proxies recorded in X-Forwarded-For.
 * Rate limits count per address; an IPv6 client counts per /64, the block one subscriber holds.
 */
import { BlockList, isIP } from 'node:net';
import { canonicalAddress } from '../domain/net-address.js';

export { addressKey, canonicalAddress } from '../domain/net-address.js';

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
