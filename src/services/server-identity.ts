/**
 * The server's own Ed25519 identity. Created on first start; the private key is sealed with the
 * secret key (AES-256-GCM) in the `settings` collection, so the same DID comes back after every
 * restart. `serverDid` in every response that names one is this DID.
 */
import type { Collections } from '../store/collections.js';
import { SecretKeyError, type SecretBox } from '../domain/secrets.js';
import { generateKeyPair, signMessage, type Ed25519KeyPair } from '../domain/did.js';
import { offThreadSigner } from '../domain/crypto-worker.js';
import { DuplicateKeyError } from '../store/types.js';

const SETTING_ID = 'server_identity';
const AAD = 'server_identity';

interface StoredIdentity {
  did: string;
  publicKey: string;
  privateKeySealed: string;
  createdAt: string;
}

export class ServerIdentity {
  private constructor(private readonly keys: Ed25519KeyPair) {}

  get did(): string {
    return this.keys.did;
  }

  get publicKey(): string {
    return this.keys.publicKey;
  }

  /** base64url Ed25519 signature over the UTF-8 bytes of message (or raw bytes). */
  sign(message: string | Uint8Array): string {
    return signMessage(this.keys, message);
  }

  private signer: ((data: Uint8Array) => Promise<Buffer>) | null = null;

  /** The same signature, made on the crypto worker thread: for signing in bulk (certificates). */
  async signOffThread(data: Uint8Array): Promise<string> {
    this.signer ??= offThreadSigner(Buffer.from(this.keys.privateKey, 'base64url'));
    return (await this.signer(data)).toString('base64url');
  }

  /** `keySource` names where the secret key came from, for the message when it does not fit. */
  static async load(c: Collections, secrets: SecretBox, keySource = 'the secret key'): Promise<ServerIdentity> {
    const existing = await c.settings.findById(SETTING_ID);
    if (existing) return ServerIdentity.fromStored(existing.value as StoredIdentity, secrets, keySource);
    const keys = generateKeyPair();
    const value: StoredIdentity = {
      did: keys.did,
      publicKey: keys.publicKey,
      privateKeySealed: secrets.seal(keys.privateKey, AAD),
      createdAt: new Date().toISOString(),
    };
    try {
      await c.settings.insertOne({ _id: SETTING_ID, value, updatedAt: value.createdAt });
      return new ServerIdentity(keys);
    } catch (err) {
      // Another process created it first: use theirs.
      if (!(err instanceof DuplicateKeyError)) throw err;
      const doc = await c.settings.findById(SETTING_ID);
      return ServerIdentity.fromStored(doc!.value as StoredIdentity, secrets, keySource);
    }
  }

  private static fromStored(v: StoredIdentity, secrets: SecretBox, keySource: string): ServerIdentity {
    let privateKey: string;
    try {
      privateKey = secrets.open(v.privateKeySealed, AAD);
    } catch {
      throw new SecretKeyError(
        `${keySource} is not the key the store's data was sealed with (the server identity ${v.did}, created ${v.createdAt}, does not open with it); ` +
          'start with the key that sealed it: the secret.key from a backup of this data directory, or the STEWARD_SECRET_KEY used before',
      );
    }
    return new ServerIdentity({ did: v.did, publicKey: v.publicKey, privateKey });
  }
}
