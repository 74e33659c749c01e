/**
 * The data directory's permissions. It holds the secret key, sealed secrets and the hashes of
 * every token, so it is its owner's alone: the directories 0700, the files 0600. New ones are
 * created so (src/store/embedded/, src/domain/secrets.ts); `tightenDataDir` brings those of an
 * older installation (0755 and 0644 by default) to the same modes at start.
 */
import { chmod, lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/** The modes of what Steward creates in DATA_DIR: its owner's alone. */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/** Removes group and other permissions from DATA_DIR, its files, its store directory and the store's files; returns what changed. */
export async function tightenDataDir(dataDir: string): Promise<Array<{ path: string; from: string; to: string }>> {
  const changed: Array<{ path: string; from: string; to: string }> = [];
  const tighten = async (path: string): Promise<'dir' | 'file' | 'other'> => {
    let st;
    try {
      st = await lstat(path);
    } catch {
      return 'other';
    }
    // Symbolic links are left alone: chmod would change what they point to, which may be anywhere.
    const kind = st.isDirectory() ? 'dir' : st.isFile() ? 'file' : 'other';
    if (kind === 'other') return kind;
    const mode = st.mode & 0o777;
    if ((mode & 0o077) !== 0) {
      const next = mode & 0o700;
      await chmod(path, next);
      changed.push({ path, from: octal(mode), to: octal(next) });
    }
    return kind;
  };
  /** The directory and the files in it; of its subdirectories, only `store` (others are not Steward's). */
  const tightenDir = async (dir: string, top: boolean): Promise<void> => {
    if ((await tighten(dir)) !== 'dir') return;
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isFile()) await tighten(path);
      else if (top && entry.isDirectory() && entry.name === 'store') await tightenDir(path, false);
    }
  };
  await tightenDir(dataDir, true);
  return changed;
}

const octal = (mode: number) => `0${mode.toString(8).padStart(3, '0')}`;

/** Whether the embedded store under DATA_DIR holds any data (a datafile that is not empty), read without opening it. */
export async function embeddedStoreHoldsData(dataDir: string): Promise<boolean> {
  const dir = join(dataDir, 'store');
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return false;
  }
  for (const name of names) {
    if (!name.endsWith('.db')) continue;
    const st = await lstat(join(dir, name)).catch(() => null);
    if (st?.isFile() && st.size > 0) return true;
  }
  return false;
}
