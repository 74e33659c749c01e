/**
 * The server's own Ed25519 identity. Created on first start; the private key is sealed with the
 * secret key (AES-256-GCM) in the `settings` collection, so the same DID comes back after every
 * restart. `serverDid` in every response that names one is this DID.
 */
import type { Collections } from '../store/collections.js';
import type { SecretBox } from '../domain/secrets.js';
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

  static async load(c: Collections, secrets: SecretBox): Promise<ServerIdentity> {
    const existing = await c.settings.findById(SETTING_ID);
    if (existing) return ServerIdentity.fromStored(existing.value as StoredIdentity, secrets);
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
      return ServerIdentity.fromStored(doc!.value as StoredIdentity, secrets);
    }
  }

  private static fromStored(v: StoredIdentity, secrets: SecretBox): ServerIdentity {
    let privateKey: string;
    try {
      privateKey = secrets.open(v.privateKeySealed, AAD);
    } catch {
      throw new Error('the server private key cannot be decrypted: STEWARD_SECRET_KEY is not the key it was stored with');
    }
    return new ServerIdentity({ did: v.did, publicKey: v.publicKey, privateKey });
  }
}
