/**
 * Agent key files: one Ed25519 key per file (JSON, mode 0600), the same shape as the wallet's.
 * The private key never leaves the file except into the process that signs with it.
 */
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { decodePublicKey, didKeyFromPublicKey, generateKeyPair, signMessage, verifySignature, type Ed25519KeyPair } from '../domain/did.js';

export { generateKeyPair, type Ed25519KeyPair };

interface KeyFile {
  version: 1;
  did: string;
  publicKey: string;
  privateKey: string;
  createdAt: string;
}

/**
 * Why a key file cannot be used; the same words as the Python SDK's KeyFileError
 * (schemas/agent/sdk-shared.json, keyFileMessages).
 */
export const keyFileMessages = {
  mode: (file: string, mode: string) => `${file} has mode ${mode}: it holds the agent's private key, so only its owner may read it (chmod 600 ${file})`,
  notJson: (file: string) => `${file} is not a key file: not JSON`,
  fields: (file: string) => `${file} is not a key file: it needs the string fields publicKey and privateKey`,
  privateKey: (file: string) => `${file} is not a key file: privateKey is not a base64url Ed25519 key`,
  publicKey: (file: string) => `${file} is not a key file: publicKey is not the public half of privateKey`,
  did: (file: string) => `${file} is not a key file: did is not the did:key of publicKey`,
} as const;

const SEED = /^[A-Za-z0-9_-]{43}=?$/;

/**
 * Reads a key file. Refuses (with one of keyFileMessages) a file that group or others may read,
 * since it holds a private key (not checked on Windows, whose files have no such mode bits), and
 * one that is not a key file or whose halves do not match.
 */
export async function loadKeys(file: string): Promise<Ed25519KeyPair> {
  const mode = (await stat(file)).mode & 0o777;
  if (process.platform !== 'win32' && mode & 0o077) throw new Error(keyFileMessages.mode(file, mode.toString(8).padStart(4, '0')));
  let data: Partial<KeyFile> | null;
  try {
    data = JSON.parse(await readFile(file, 'utf8')) as Partial<KeyFile> | null;
  } catch (err) {
    if (err instanceof SyntaxError) throw new Error(keyFileMessages.notJson(file));
    throw err;
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data) || typeof data.publicKey !== 'string' || typeof data.privateKey !== 'string') {
    throw new Error(keyFileMessages.fields(file));
  }
  if (!SEED.test(data.privateKey)) throw new Error(keyFileMessages.privateKey(file));
  const publicKey = decodePublicKey(data.publicKey);
  const keys = { did: '', publicKey: data.publicKey.replace(/=+$/, ''), privateKey: data.privateKey };
  if (!publicKey || !verifySignature(publicKey, 'key file', signMessage(keys, 'key file'))) throw new Error(keyFileMessages.publicKey(file));
  keys.did = didKeyFromPublicKey(publicKey);
  if (data.did !== undefined && data.did !== keys.did) throw new Error(keyFileMessages.did(file));
  return keys;
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
