/**
 * Token counts that stay exact past 2^53. A JavaScript number (and a MongoDB double, which is what
 * `$inc` makes of a number past 2^31) holds integers exactly only up to 2^53; one agent at the
 * heartbeat schema's largest delta passes that within ten thousand heartbeats, and a fleet's totals
 * sooner. So a stored total is two numbers, `n + billions × 10^9`, each added to with `$inc` on
 * either store backend: the additions stay exact as long as each part stays below 2^53 (see
 * docs/fleet.md, "Token statistics", for the bounds). Counts are answered as a number while they
 * are safe integers and as a bigint above (written into JSON with all their digits).
 */
import { z } from 'zod';

export const BILLION = 1_000_000_000;
const BILLION_N = 1_000_000_000n;
const MAX_SAFE_N = BigInt(Number.MAX_SAFE_INTEGER);

/** A non-negative integer count: a number while it is a safe integer, a bigint above. */
export type TokenCount = number | bigint;

/** A TokenCount in a view: a JSON integer written with all its digits. */
export const TokenCountView = z
  .custom<TokenCount>((v) => (typeof v === 'number' && Number.isInteger(v) && v >= 0) || (typeof v === 'bigint' && v >= 0n), {
    message: 'expected a non-negative integer',
  })
  .meta({ type: 'integer', minimum: 0, description: 'Exact: written with all its digits, past 2^53 too' });

/** The count `n + billions × 10^9` (both integers, as stored). */
export function exactCount(n = 0, billions = 0): TokenCount {
  if (billions === 0 && Number.isSafeInteger(n)) return n;
  const sum = BigInt(n) + BigInt(billions) * BILLION_N;
  return sum <= MAX_SAFE_N && sum >= -MAX_SAFE_N ? Number(sum) : sum;
}

/** A non-negative count written in decimal digits (exact at any size), split as stored: [n below 10^9, billions]. */
export function fromDigits(text: string): [number, number] {
  if (text.length <= 15) {
    const x = Number(text);
    const b = billionsIn(x);
    return [x - b * BILLION, b];
  }
  const big = BigInt(text);
  return [Number(big % BILLION_N), Number(big / BILLION_N)];
}

/** The whole billions in a non-negative safe integer (the floor of the division, corrected where it rounds). */
export function billionsIn(x: number): number {
  let b = Math.floor(x / BILLION);
  const rest = x - b * BILLION;
  if (rest < 0) b--;
  else if (rest >= BILLION) b++;
  return b;
}

/** An exact sum of non-negative safe integers, kept as `n` (below 10^9) and `billions`. */
export class ExactSum {
  n = 0;
  billions = 0;

  add(x: number): void {
    if (x >= BILLION) {
      const b = billionsIn(x);
      this.billions += b;
      x -= b * BILLION;
    }
    this.n += x;
    if (this.n >= BILLION) {
      this.n -= BILLION;
      this.billions++;
    }
  }

  /** Adds a stored count (`n + billions × 10^9`). */
  addStored(n = 0, billions = 0): void {
    this.billions += billions;
    this.add(n);
  }

  get value(): TokenCount {
    return exactCount(this.n, this.billions);
  }
}
