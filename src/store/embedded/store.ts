/**
 * The embedded store: a directory of collections, one process's (the directory lock), opened and
 * closed whole.
 */
import { constants as fsConstants } from 'node:fs';
import { access, mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { InvalidQueryError, StoreUnavailableError, type Collection, type Doc, type Store } from '../types.js';
import { PRIVATE_DIR_MODE } from '../data-dir.js';
import { EmbeddedCollection } from './collection.js';
import { lockDirectory, type DirectoryLock } from './dir-lock.js';
import { InflightOps } from '../inflight.js';

const COLLECTION_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,119}$/;

/** Store directories open in this process: two nedb instances on one file would corrupt it. */
const openDirectories = new Set<string>();

/** The embedded store, with what only it has. */
export interface EmbeddedStoreHandle extends Store {
  /** Resolves once no collection has a compaction under way (tests wait on it between writes). */
  compactionsIdle(): Promise<void>;
}

class EmbeddedStore implements EmbeddedStoreHandle {
  readonly kind = 'embedded' as const;
  private readonly collections = new Map<string, EmbeddedCollection<Doc>>();
  private readonly inflight = new InflightOps();
  private closing: Promise<void> | undefined;

  constructor(
    private readonly dir: string,
    readonly compactMinBytes: number,
    private readonly lock: DirectoryLock,
  ) {}

  collection<T extends Doc>(name: string): Collection<T> {
    if (this.closed) throw new StoreUnavailableError('store is closed');
    if (typeof name !== 'string' || !COLLECTION_NAME.test(name)) {
      throw new InvalidQueryError(`invalid collection name "${name}"`);
    }
    let coll = this.collections.get(name);
    if (!coll) {
      coll = new EmbeddedCollection<Doc>(name, join(this.dir, `${name}.db`), this);
      this.collections.set(name, coll);
    }
    return coll as unknown as Collection<T>;
  }

  compact(name: string): Promise<void> {
    return (this.collection(name) as unknown as EmbeddedCollection<Doc>).compactNow();
  }

  async compactionsIdle(): Promise<void> {
    await Promise.all([...this.collections.values()].map((c) => c.compactionIdle()));
  }

  async ping(): Promise<void> {
    if (this.closed) throw new StoreUnavailableError('store is closed');
    try {
      await access(this.dir, fsConstants.R_OK | fsConstants.W_OK);
    } catch (err) {
      throw new StoreUnavailableError(`store directory ${this.dir} is not accessible`, { cause: err });
    }
  }

  /** Waits for every started operation (and so every pending write) to finish, then detaches. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.inflight.close();
      await Promise.allSettled([...this.collections.values()].map((c) => c.settle()));
      this.collections.clear();
      await this.lock.release();
      openDirectories.delete(this.dir);
    })();
    return this.closing;
  }

  /** Registers an operation so close() can wait for it; refuses new ones once closing. */
  track<R>(fn: () => Promise<R>): Promise<R> {
    return this.inflight.track(fn);
  }

  private get closed(): boolean {
    return this.inflight.closed;
  }
}

/** The default of STORE_COMPACT_MIN_MB: a datafile is compacted once it has doubled and reached this. */
const COMPACT_MIN_BYTES = 16 * 1024 * 1024;

export async function openEmbeddedStore(opts: { dataDir: string; compactMinBytes?: number }): Promise<EmbeddedStoreHandle> {
  const root = resolve(opts.dataDir);
  const dir = join(root, 'store');
  if (openDirectories.has(dir)) throw new StoreUnavailableError(`embedded store at ${dir} is already open in this process`);
  await ensurePrivateDirectory(root, `DATA_DIR ${root}`);
  await ensurePrivateDirectory(dir, `store directory ${dir}`);
  if (openDirectories.has(dir)) throw new StoreUnavailableError(`embedded store at ${dir} is already open in this process`);
  openDirectories.add(dir);
  let lock: DirectoryLock;
  try {
    lock = await lockDirectory(dir, `DATA_DIR ${root}`);
  } catch (err) {
    openDirectories.delete(dir);
    throw err;
  }
  return new EmbeddedStore(dir, opts.compactMinBytes ?? COMPACT_MIN_BYTES, lock);
}

/** A directory only its owner may enter (created so when missing); a clear error when the path is a file. */
async function ensurePrivateDirectory(path: string, what: string): Promise<void> {
  try {
    await mkdir(path, { recursive: true, mode: PRIVATE_DIR_MODE });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ENOTDIR') {
      throw new StoreUnavailableError(`${what} is not a directory (a file is in the way); point DATA_DIR at a directory, which is created when missing`, { cause: err });
    }
    throw new StoreUnavailableError(`cannot create ${what}: ${(err as Error).message}`, { cause: err });
  }
}
