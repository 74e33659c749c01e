/**
 * This browser's own identity: a WebCrypto Ed25519 key pair whose private key is not extractable,
 * kept in IndexedDB (which stores CryptoKey objects as they are), so no script — ours included —
 * can ever read the private key; it can only ask the browser to sign with it. WebCrypto Ed25519
 * exists only in secure contexts (HTTPS, or localhost).
 */
import { didKeyOf } from './did';
import { toBase64Url } from './encoding';

const DB = 'steward';
const STORE = 'keys';
const ID = 'browser-identity';

export interface BrowserKey {
  did: string;
  /** base64url of the raw public key. */
  publicKey: string;
  createdAt: string;
  keys: CryptoKeyPair;
}

export const keysAvailable = (): boolean => typeof window !== 'undefined' && window.isSecureContext && !!window.crypto?.subtle;

function openDb(): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(DB, 1);
    req.onupgradeneeded = () => req.result.createObjectStore(STORE);
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error ?? new Error('IndexedDB could not be opened'));
  });
}

async function tx<T>(mode: IDBTransactionMode, run: (s: IDBObjectStore) => IDBRequest<T>): Promise<T> {
  const db = await openDb();
  try {
    return await new Promise<T>((resolve, reject) => {
      const t = db.transaction(STORE, mode);
      const req = run(t.objectStore(STORE));
      t.oncomplete = () => resolve(req.result);
      t.onerror = () => reject(t.error ?? new Error('IndexedDB transaction failed'));
      t.onabort = () => reject(t.error ?? new Error('IndexedDB transaction aborted'));
    });
  } finally {
    db.close();
  }
}

interface Stored {
  keys: CryptoKeyPair;
  did: string;
  publicKey: string;
  createdAt: string;
}

export async function loadBrowserKey(): Promise<BrowserKey | null> {
  if (!keysAvailable()) return null;
  const stored = await tx<Stored | undefined>('readonly', (s) => s.get(ID) as IDBRequest<Stored | undefined>);
  return stored ?? null;
}

/** Creates this browser's key (replacing none: call only when there is no key). */
export async function createBrowserKey(): Promise<BrowserKey> {
  if (!keysAvailable()) throw new Error('this page is not a secure context (HTTPS or localhost): the browser offers no Ed25519 keys here');
  const keys = (await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify'])) as CryptoKeyPair;
  const raw = new Uint8Array(await crypto.subtle.exportKey('raw', keys.publicKey));
  const stored: Stored = { keys, did: didKeyOf(raw), publicKey: toBase64Url(raw), createdAt: new Date().toISOString() };
  await tx('readwrite', (s) => s.put(stored, ID));
  return stored;
}

/** Forgets this browser's key for good (the account it claimed can no longer be signed into from here). */
export async function deleteBrowserKey(): Promise<void> {
  await tx('readwrite', (s) => s.delete(ID));
}

/** base64url of the Ed25519 signature over the UTF-8 bytes of `message`. */
export async function signText(key: BrowserKey, message: string): Promise<string> {
  const sig = await crypto.subtle.sign({ name: 'Ed25519' }, key.keys.privateKey, new TextEncoder().encode(message));
  return toBase64Url(new Uint8Array(sig));
}
