/**
 * One process per store directory, which two would corrupt: `steward.lock` names its holder (pid,
 * host, start time). A lock of this host whose process is gone is broken under a second lock, so a
 * restart after a crash just works; one from another host is never broken (docs/store.md).
 */
import { link, readFile, unlink, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { StoreUnavailableError } from '../types.js';

export const LOCK_FILE = 'steward.lock';

export interface LockHolder {
  pid: number;
  host: string;
  /** When the holding process started (ISO 8601). */
  startedAt: string;
  /** The process's start in clock ticks since boot (Linux /proc), which tells a reused pid apart. */
  procStart: string | null;
}

/** Another live process holds the directory (or one on another host may). */
export class DirectoryLockedError extends StoreUnavailableError {
  override name = 'DirectoryLockedError';
  constructor(
    readonly lockFile: string,
    readonly holder: LockHolder | null,
    message: string,
  ) {
    super(message);
  }
}

export interface DirectoryLock {
  readonly file: string;
  /** Removes the lock file (when it is still this process's). */
  release(): Promise<void>;
}

const me = (): LockHolder => ({
  pid: process.pid,
  host: hostname(),
  startedAt: new Date(Date.now() - process.uptime() * 1000).toISOString(),
  procStart: procStartOf(process.pid),
});

/** Field 22 of /proc/<pid>/stat (start time in ticks since boot); null where there is no /proc. */
function procStartOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

function parseHolder(text: string): LockHolder | null {
  try {
    const v = JSON.parse(text) as Partial<LockHolder>;
    if (typeof v.pid !== 'number' || typeof v.host !== 'string' || typeof v.startedAt !== 'string') return null;
    return { pid: v.pid, host: v.host, startedAt: v.startedAt, procStart: typeof v.procStart === 'string' ? v.procStart : null };
  } catch {
    return null;
  }
}

async function readHolder(file: string): Promise<{ text: string; holder: LockHolder | null } | null> {
  try {
    const text = await readFile(file, 'utf8');
    return { text, holder: parseHolder(text) };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** Whether the holder is a process that still runs here; 'unknown' for another host. */
function holderState(h: LockHolder, self: LockHolder): 'alive' | 'dead' | 'unknown' {
  if (h.host !== self.host) return 'unknown';
  // This process does not hold it (the store refuses a second open in one process before asking):
  // a lock naming this pid was left by an earlier process that had it (a container's pid 1).
  if (h.pid === self.pid) return 'dead';
  try {
    process.kill(h.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return 'dead';
    // EPERM: it exists, run by another user.
  }
  if (h.procStart !== null) {
    const now = procStartOf(h.pid);
    if (now !== null && now !== h.procStart) return 'dead'; // the pid was reused
  }
  return 'alive';
}

/** Creates `file` with `text`, complete or not at all; false when it exists. */
async function createAtomically(file: string, text: string): Promise<boolean> {
  const temp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}`;
  await writeFile(temp, text, { mode: 0o600, flag: 'wx' });
  try {
    await link(temp, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    await unlink(temp).catch(() => undefined);
  }
}

const describeHolder = (h: LockHolder) => `pid ${h.pid} on host ${h.host}, started ${h.startedAt}`;

/**
 * Takes the lock of `dir`; `what` names the directory in messages (e.g. `DATA_DIR /srv/steward`).
 * Throws DirectoryLockedError when another process holds it.
 */
export async function lockDirectory(dir: string, what: string): Promise<DirectoryLock> {
  const file = join(dir, LOCK_FILE);
  const self = me();
  const text = `${JSON.stringify(self)}\n`;
  // Each turn either takes the lock, meets a live holder, or removes a stale one and tries again.
  for (let attempt = 0; attempt < 10; attempt++) {
    if (await createAtomically(file, text)) {
      return {
        file,
        release: async () => {
          const now = await readHolder(file).catch(() => null);
          if (now?.text === text) await unlink(file).catch(() => undefined);
        },
      };
    }
    const found = await readHolder(file);
    if (!found) continue; // released meanwhile
    const { holder } = found;
    if (!holder) {
      throw new DirectoryLockedError(file, null, `${what} is locked by ${file}, which cannot be read as a lock; if no Steward uses ${what}, delete that file and start again`);
    }
    const state = holderState(holder, self);
    if (state === 'alive') {
      throw new DirectoryLockedError(
        file,
        holder,
        `${what} is in use by another Steward process (${describeHolder(holder)}); stop that process first, or give this one another DATA_DIR`,
      );
    }
    if (state === 'unknown') {
      throw new DirectoryLockedError(
        file,
        holder,
        `${what} is locked by a Steward process on another host (${describeHolder(holder)}); stop it there, or, if it no longer runs, delete ${file} and start again`,
      );
    }
    await breakStale(file, found.text, self);
  }
  throw new DirectoryLockedError(file, null, `${what}: could not take the lock ${file} (other processes keep taking it); try again`);
}

/** Removes the lock file if it still holds `staleText`, under the breaker lock. */
async function breakStale(file: string, staleText: string, self: LockHolder): Promise<void> {
  const breaker = `${file}.break`;
  if (!(await createAtomically(breaker, `${JSON.stringify(self)}\n`))) {
    // Another process is breaking it (for a few milliseconds), or died doing so.
    const other = await readHolder(breaker);
    if (other?.holder && holderState(other.holder, self) === 'dead') await unlink(breaker).catch(() => undefined);
    else await new Promise((r) => setTimeout(r, 20));
    return;
  }
  try {
    const again = await readHolder(file);
    if (again?.text === staleText) await unlink(file);
  } finally {
    await unlink(breaker).catch(() => undefined);
  }
}
