/**
 * IP addresses in one spelling, and the key a client address is counted under (rate limits,
 * pending registrations): IPv4 as is (an IPv4-mapped IPv6 address as its IPv4), IPv6 by its /64,
 * the block one subscriber commonly holds.
 */
import { isIP } from 'node:net';

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

/** The key an address is counted under: IPv4 as is (also when written IPv4-mapped), IPv6 by its /64. */
export function addressKey(address: string): string {
  const canonical = canonicalAddress(address) ?? address;
  if (isIP(canonical) !== 6) return canonical;
  address = canonical;
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
