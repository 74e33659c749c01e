/**
 * Random bytes for the hot paths (certificate serials and nonces, handshake challenges).
 * `crypto.randomBytes` costs a native call and an allocation per use, which shows when ten
 * thousand certificates are issued at once; this takes slices of a pool refilled from the same
 * CSPRNG (`randomFillSync`) 4 KiB at a time. Each byte is handed out once.
 */
import { randomFillSync } from 'node:crypto';

const POOL_SIZE = 4096;
const pool = Buffer.allocUnsafe(POOL_SIZE);
let offset = POOL_SIZE;

function take(n: number): Buffer {
  if (n > POOL_SIZE) return randomFillSync(Buffer.allocUnsafe(n));
  if (offset + n > POOL_SIZE) {
    randomFillSync(pool);
    offset = 0;
  }
  const out = pool.subarray(offset, offset + n);
  offset += n;
  return out;
}

/** n random bytes as lowercase hex. */
export function randomHex(n: number): string {
  return take(n).toString('hex');
}

/** n random bytes as base64url without padding. */
export function randomBase64Url(n: number): string {
  return take(n).toString('base64url');
}
