/**
 * did:key for Ed25519 (DESIGN §3): `did:key:z` + base58btc(0xed 0x01 ‖ raw 32-byte public key).
 */
import { fromBase58, toBase58 } from './encoding';

const ED25519_PREFIX = [0xed, 0x01];

export function didKeyOf(publicKey: Uint8Array): string {
  const bytes = new Uint8Array(2 + publicKey.length);
  bytes.set(ED25519_PREFIX, 0);
  bytes.set(publicKey, 2);
  return `did:key:z${toBase58(bytes)}`;
}

/** The raw public key of an Ed25519 did:key; null for any other DID. */
export function publicKeyOfDidKey(did: string): Uint8Array | null {
  if (!did.startsWith('did:key:z')) return null;
  let bytes: Uint8Array;
  try {
    bytes = fromBase58(did.slice('did:key:z'.length));
  } catch {
    return null;
  }
  if (bytes.length !== 34 || bytes[0] !== 0xed || bytes[1] !== 0x01) return null;
  return bytes.slice(2);
}

/** A DID shortened for display: did:key:z6Mk…last6. */
export function shortDid(did: string | null | undefined): string {
  if (!did) return '—';
  if (did.length <= 28) return did;
  return `${did.slice(0, 16)}…${did.slice(-6)}`;
}
