/**
 * The saved session of `steward login`: the server's URL and the session token, in
 * $XDG_CONFIG_HOME/steward/session.json (else ~/.config/steward/session.json), mode 0600 in a
 * 0700 directory. The token is a secret: it is read from here and sent as a bearer token, never
 * printed.
 */
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { CliError, EXIT } from './errors.js';

export interface SavedSession {
  server: string;
  token: string;
  did: string;
  name: string;
  loggedInAt: string;
}

/** The directory of Steward's client settings (the XDG base directory rule: a relative XDG_CONFIG_HOME is ignored). */
export function configDir(env: NodeJS.ProcessEnv): string {
  const xdg = env.XDG_CONFIG_HOME;
  return join(xdg && isAbsolute(xdg) ? xdg : join(env.HOME || homedir(), '.config'), 'steward');
}

export const sessionFile = (env: NodeJS.ProcessEnv) => join(configDir(env), 'session.json');

export async function readSession(env: NodeJS.ProcessEnv): Promise<SavedSession | null> {
  const file = sessionFile(env);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new CliError(EXIT.failed, `cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    const doc = JSON.parse(text) as Partial<SavedSession>;
    if (typeof doc.server === 'string' && typeof doc.token === 'string') {
      return { server: doc.server, token: doc.token, did: doc.did ?? '', name: doc.name ?? '', loggedInAt: doc.loggedInAt ?? '' };
    }
  } catch {
    // fall through
  }
  throw new CliError(EXIT.failed, `${file} is not a Steward session file; remove it and log in again`);
}

/** Writes the session atomically (a new 0600 file renamed over the old one). */
export async function writeSession(env: NodeJS.ProcessEnv, session: SavedSession): Promise<string> {
  const dir = configDir(env);
  const file = sessionFile(env);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(session, null, 2)}\n`, { mode: 0o600 });
  await chmod(tmp, 0o600); // whatever the umask
  await rename(tmp, file);
  return file;
}

export async function removeSession(env: NodeJS.ProcessEnv): Promise<void> {
  await rm(sessionFile(env), { force: true });
}
