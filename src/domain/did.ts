/**
 * Ed25519 keys and did:key identifiers (multicodec 0xed01, base58btc multibase `z`, so they
 * start with `did:key:z6Mk`), signatures in base64url, and the purpose prefixes that make a
 * signature made for one purpose useless for another.
 */
import { base58 } from '@scure/base';
import { ed25519, type SigningKey } from './ed25519.js';

const ED25519_MULTICODEC = Uint8Array.of(0xed, 0x01);

export const PURPOSE = {
  login: 'steward-login:',
  claim: 'steward-claim:',
  agentAuth: 'steward-agent-auth:',
  device: 'steward-device:',
} as const;

export function isDid(value: string): boolean {
  return /^did:[a-z0-9]+:[A-Za-z0-9._:%-]+$/.test(value) && value.length <= 512;
}

/** did:key of a raw 32-byte Ed25519 public key. */
export function didKeyFromPublicKey(raw: Uint8Array): string {
  if (raw.length !== 32) throw new Error('an Ed25519 public key has 32 bytes');
  const bytes = new Uint8Array(34);
  bytes.set(ED25519_MULTICODEC, 0);
  bytes.set(raw, 2);
  return `did:key:z${base58.encode(bytes)}`;
}

/** The raw public key inside an Ed25519 did:key, or null when the DID is not one. */
export function publicKeyFromDidKey(did: string): Uint8Array | null {
  if (!did.startsWith('did:key:z')) return null;
  try {
    const bytes = base58.decode(did.slice('did:key:z'.length));
    if (bytes.length !== 34 || bytes[0] !== 0xed || bytes[1] !== 0x01) return null;
    return bytes.slice(2);
  } catch {
    return null;
  }
}

/** Decodes a base64url (or base64) raw 32-byte public key; null when malformed. */
export function decodePublicKey(b64: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_\-+/]{42,44}={0,2}$/.test(b64)) return null;
  const buf = Buffer.from(b64.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  return buf.length === 32 ? new Uint8Array(buf) : null;
}

export function encodeBase64Url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64url');
}

/**
 * The public key that a DID signs with: the one inside a did:key, else the one given (base64url
 * raw bytes). For a did:key, a given key must match it. Null when none can be established.
 */
export function resolvePublicKey(did: string, publicKeyB64?: string | null): Uint8Array | null {
  const fromDid = publicKeyFromDidKey(did);
  const given = publicKeyB64 ? decodePublicKey(publicKeyB64) : null;
  if (publicKeyB64 && !given) return null;
  if (fromDid) {
    if (given && Buffer.compare(Buffer.from(given), Buffer.from(fromDid)) !== 0) return null;
    return fromDid;
  }
  if (did.startsWith('did:key:')) return null; // a did:key that is not Ed25519
  return given;
}

/** Verifies a base64url Ed25519 signature over the UTF-8 bytes of `message` (or raw bytes). */
export function verifySignature(publicKey: Uint8Array, message: string | Uint8Array, signatureB64: string): boolean {
  if (typeof signatureB64 !== 'string' || !/^[A-Za-z0-9_-]{86}(==)?$/.test(signatureB64)) return false;
  const sig = Buffer.from(signatureB64, 'base64url');
  if (sig.length !== 64) return false;
  const data = typeof message === 'string' ? Buffer.from(message, 'utf8') : message;
  return ed25519().verify(publicKey, data, sig);
}

export interface Ed25519KeyPair {
  did: string;
  /** Raw 32-byte public key, base64url. */
  publicKey: string;
  /** Raw 32-byte private seed, base64url (JWK `d`). Never leaves the holder. */
  privateKey: string;
}

export function generateKeyPair(): Ed25519KeyPair {
  const { seed, publicKey } = ed25519().generate();
  return { did: didKeyFromPublicKey(publicKey), publicKey: encodeBase64Url(publicKey), privateKey: encodeBase64Url(seed) };
}

const signingKeys = new WeakMap<Ed25519KeyPair, SigningKey>();

/** Signs the UTF-8 bytes of `message` (or raw bytes); returns base64url. */
export function signMessage(keys: Ed25519KeyPair, message: string | Uint8Array): string {
  const impl = ed25519();
  let key = signingKeys.get(keys);
  if (!key || key.kind !== impl.name) {
    key = impl.signingKey(Buffer.from(keys.privateKey, 'base64url'));
    signingKeys.set(keys, key);
  }
  const data = typeof message === 'string' ? Buffer.from(message, 'utf8') : message;
  return impl.sign(key, data).toString('base64url');
}
