/**
 * Secrets at rest: AES-256-GCM under the key from STEWARD_SECRET_KEY (or, in embedded mode when
 * unset, a key generated once into DATA_DIR/secret.key with mode 0600).
 *
 * Sealed form: `v1.<iv base64url>.<tag base64url>.<ciphertext base64url>`. The optional
 * associated data binds a sealed value to its record (e.g. a bridge id), so a ciphertext copied
 * to another record does not open.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('the secret key must be 32 bytes');
  }

  seal(plaintext: string, associatedData = ''): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(associatedData, 'utf8'));
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const tag = cipher.getAuthTag();
    return ['v1', iv.toString('base64url'), tag.toString('base64url'), ct.toString('base64url')].join('.');
  }

  open(sealed: string, associatedData = ''): string {
    const [v, iv, tag, ct] = sealed.split('.');
    if (v !== 'v1' || !iv || !tag || ct === undefined) throw new Error('not a sealed value');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(associatedData, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
  }

  sealJson(value: unknown, associatedData = ''): string {
    return this.seal(JSON.stringify(value), associatedData);
  }

  openJson<T>(sealed: string, associatedData = ''): T {
    return JSON.parse(this.open(sealed, associatedData)) as T;
  }
}

/** The secret key cannot be had as configured; the message says what to do. */
export class SecretKeyError extends Error {
  override name = 'SecretKeyError';
}

export interface SecretKey {
  key: Buffer;
  /** Where it came from, for messages: `STEWARD_SECRET_KEY`, or the key file's path. */
  source: string;
}

/**
 * The configured key, or (embedded mode only) the one kept in DATA_DIR/secret.key, created once.
 * `mayCreate` is false when the store already holds data: a key created then could not open what
 * was sealed with the lost one, so a missing key file is refused and nothing is written.
 */
export async function loadSecretKey(opts: { configured?: Buffer; dataDir: string; embedded: boolean; mayCreate: boolean }): Promise<SecretKey> {
  if (opts.configured) return { key: opts.configured, source: 'STEWARD_SECRET_KEY' };
  if (!opts.embedded) throw new SecretKeyError('STEWARD_SECRET_KEY is required with MongoDB (the key must not sit beside the data it protects)');
  const file = join(opts.dataDir, 'secret.key');
  try {
    const text = (await readFile(file, 'utf8')).trim();
    const key = Buffer.from(text, 'base64url');
    if (key.length !== 32) throw new SecretKeyError(`${file} does not hold a 32-byte key (base64url); restore it from a backup, or set STEWARD_SECRET_KEY to the key`);
    return { key, source: file };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (!opts.mayCreate) {
    throw new SecretKeyError(
      `${file} is missing, but the store in ${join(opts.dataDir, 'store')} already holds data sealed with a secret key ` +
        '(the server identity, bridge and model secrets). Restore secret.key from a backup, or set STEWARD_SECRET_KEY to that key; ' +
        'no new key was written, since it could not open that data.',
    );
  }
  await mkdir(opts.dataDir, { recursive: true, mode: 0o700 });
  const key = randomBytes(32);
  await writeFile(file, key.toString('base64url') + '\n', { mode: 0o600, flag: 'wx' });
  await chmod(file, 0o600);
  return { key, source: file };
}
