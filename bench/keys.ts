/**
 * Deterministic Ed25519 keys for benchmarks: agent i of a run has the key whose seed is
 * SHA-256(`<runSeed>:<i>`), so the server process (which pre-registers agents) and the load
 * generators (which connect them) derive the same keys without exchanging them.
 */
import { createHash, createPrivateKey, createPublicKey } from 'node:crypto';
import { didKeyFromPublicKey } from '../src/domain/did.js';
import { ed25519, type SigningKey } from '../src/domain/ed25519.js';

const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

export interface BenchKey {
  did: string;
  /** Raw public key, base64url. */
  publicKey: string;
  /** Ready for `ed25519().sign` (the implementation Steward and its SDK use). */
  signingKey: SigningKey;
}

export function benchKey(runSeed: string, i: number): BenchKey {
  const seed = createHash('sha256').update(`${runSeed}:${i}`).digest();
  const privateKey = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  const x = createPublicKey(privateKey).export({ format: 'jwk' }).x!;
  return { did: didKeyFromPublicKey(Buffer.from(x, 'base64url')), publicKey: x, signingKey: ed25519().signingKey(seed) };
}
