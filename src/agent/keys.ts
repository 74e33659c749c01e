/**
 * Agent key files: one Ed25519 key per file (JSON, mode 0600), the same shape as the wallet's.
 * The private key never leaves the file except into the process that signs with it.
 */
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { didKeyFromPublicKey, generateKeyPair, type Ed25519KeyPair } from '../domain/did.js';

export { generateKeyPair, type Ed25519KeyPair };

interface KeyFile {
  version: 1;
  did: string;
  publicKey: string;
  privateKey: string;
  createdAt: string;
}

/** Reads a key file. */
export async function loadKeys(file: string): Promise<Ed25519KeyPair> {
  const data = JSON.parse(await readFile(file, 'utf8')) as Partial<KeyFile>;
  if (typeof data.publicKey !== 'string' || typeof data.privateKey !== 'string') throw new Error(`${file} is not a key file`);
  const did = didKeyFromPublicKey(Buffer.from(data.publicKey, 'base64url'));
  return { did, publicKey: data.publicKey, privateKey: data.privateKey };
}

/** Reads a key file, creating it (with a new key) when it does not exist. */
export async function loadOrCreateKeys(file: string): Promise<{ keys: Ed25519KeyPair; created: boolean }> {
  try {
    return { keys: await loadKeys(file), created: false };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const keys = generateKeyPair();
  const data: KeyFile = { version: 1, ...keys, createdAt: new Date().toISOString() };
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, `${JSON.stringify(data, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  await chmod(file, 0o600);
  return { keys, created: true };
}
