/**
 * A collection's datafile: appends through one open handle, and the crash-safe rewrite that
 * compacts it, at load and while the store runs.
 */
import { serialize } from '@seald-io/nedb/lib/model.js';
import { open, rename, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { PRIVATE_FILE_MODE } from '../data-dir.js';
import { JsonLineWriter } from './json-lines.js';
import type { Obj, StoredDoc } from './values.js';

/** Buffers appends are encoded into, shared by all collections and reused: steady writes allocate none. */
const appendBuffers: Buffer[] = [];
const APPEND_BUFFER_MIN = 64 * 1024;
const APPEND_BUFFER_KEPT = 256 * 1024;
const APPEND_BUFFERS_KEPT = 2;

/**
 * A datafile's appends, through one handle kept open (nedb opens and closes the file for each), and
 * its compactions: asked for once it has doubled since the last and reached `compactMinBytes`.
 */
export class AppendLog {
  private handle: Promise<FileHandle> | null = null;
  /** Bytes in the datafile: the text of the last compaction and the appends since. */
  private size = 0;
  /** The datafile's size right after the last compaction. */
  private compactedSize = 0;
  private compactionAsked = false;
  /** Starts a compaction on the collection's executor (set once the datastore is loaded). */
  onOversize: (() => Promise<void>) | null = null;
  /** The compaction asked for and not finished (a store closing waits for it). */
  private compaction: Promise<void> | null = null;
  /** While a compaction copies the file: what was appended since it took the documents, in order. */
  private tail: Buffer[] | null = null;

  constructor(
    private readonly filename: string,
    private readonly compactMinBytes: number,
  ) {}

  /** Appends documents, a line each, encoded straight into a reused buffer (no line is a string first). */
  async append(docs: readonly StoredDoc[]): Promise<void> {
    if (docs.length === 0) return;
    const out = new JsonLineWriter(appendBuffers.pop() ?? Buffer.allocUnsafeSlow(APPEND_BUFFER_MIN));
    try {
      for (const doc of docs) writeDocLine(out, doc);
      this.handle ??= open(this.filename, 'a', PRIVATE_FILE_MODE);
      let fh: FileHandle;
      try {
        fh = await this.handle;
      } catch (err) {
        this.handle = null; // try to open again next time
        throw err;
      }
      await writeAll(fh, out.buf, out.length);
      this.size += out.length;
      // A copy of the bytes: the buffer goes back to the pool for the next append.
      this.tail?.push(Buffer.from(out.buf.subarray(0, out.length)));
    } finally {
      if (out.buf.length <= APPEND_BUFFER_KEPT && appendBuffers.length < APPEND_BUFFERS_KEPT) appendBuffers.push(out.buf);
    }
    if (!this.compactionAsked && this.onOversize && this.size >= this.compactMinBytes && this.size >= 2 * this.compactedSize) {
      this.compactionAsked = true;
      // Queued behind the writes already waiting; a failure leaves the old file, tried again later.
      this.compaction = this.onOversize()
        .catch(() => undefined)
        .finally(() => {
          this.compaction = null;
        });
    }
  }

  /**
   * The rewrite at load, crash-safe as nedb's: a copy beside the file (`<file>~`), flushed, renamed
   * over it, the directory flushed; a crash before the rename leaves the old file, which a load prefers.
   */
  async rewrite(docs: readonly StoredDoc[], lines: readonly string[]): Promise<void> {
    await this.close();
    const temp = `${this.filename}~`;
    let written: number;
    try {
      const fh = await open(temp, 'w', PRIVATE_FILE_MODE);
      try {
        written = await writeCopy(fh, docs, lines);
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(temp, this.filename);
      await syncDirectory(dirname(this.filename));
    } catch (err) {
      this.compactionFailed();
      throw err;
    }
    this.size = this.compactedSize = written;
    this.compactionAsked = false;
  }

  /**
   * A compaction while the store runs, the same rewrite with the writes going on during the copy:
   * only `take` and the last step (the appends kept meanwhile, flush, rename) are `exclusive`.
   */
  async compact(take: () => { docs: readonly StoredDoc[]; lines: readonly string[] }, exclusive: <R>(task: () => Promise<R>) => Promise<R>): Promise<void> {
    const temp = `${this.filename}~`;
    // The documents are not copied: one changed later has its new line in the tail, which follows.
    const { docs, lines } = await exclusive(async () => {
      this.tail = [];
      return take();
    });
    try {
      const fh = await open(temp, 'w', PRIVATE_FILE_MODE);
      let copyOpen = true;
      try {
        let written = await writeCopy(fh, docs, lines);
        await fh.sync();
        written += await this.writeTail(fh); // what came meanwhile, still without holding the writes
        await exclusive(async () => {
          written += await this.writeTail(fh);
          await fh.sync();
          copyOpen = false;
          await fh.close();
          await this.close(); // the next append opens the new file
          await rename(temp, this.filename);
          this.tail = null;
          this.size = this.compactedSize = written;
        });
      } finally {
        if (copyOpen) await fh.close().catch(() => undefined);
      }
      // After the rename: appends are never forced to disk, so this is for the rename alone.
      await syncDirectory(dirname(this.filename));
    } catch (err) {
      this.tail = null;
      this.compactionFailed();
      throw err;
    }
    this.compactionAsked = false;
  }

  /** Writes the appends kept so far to the copy; returns their bytes. */
  private async writeTail(fh: FileHandle): Promise<number> {
    const chunks = this.tail!.splice(0);
    let written = 0;
    for (const chunk of chunks) written += await writeAll(fh, chunk, chunk.length);
    return written;
  }

  /** The old file is still in place: try again once it has grown as much once more. */
  private compactionFailed(): void {
    this.compactedSize = this.size;
    this.compactionAsked = false;
  }

  /** Compacts now, whatever the file's size (old lines that must leave the disk); never two at once. */
  async compactNow(): Promise<void> {
    while (this.compaction) await this.compaction;
    if (!this.onOversize) return;
    // No await between the check above and these two lines: an append cannot start another one.
    this.compactionAsked = true;
    const run = this.onOversize();
    this.compaction = run
      .catch(() => undefined)
      .finally(() => {
        this.compaction = null;
      });
    await run;
  }

  /** Resolves once no compaction this log asked for is pending. */
  async idle(): Promise<void> {
    while (this.compaction) await this.compaction;
  }

  async close(): Promise<void> {
    const handle = this.handle;
    this.handle = null;
    if (handle) await handle.then((fh) => fh.close()).catch(() => undefined);
  }
}

/** Bytes of a compaction's text encoded before they are written (and the event loop runs again). */
const REWRITE_CHUNK = 256 * 1024;

/** A document's datafile line: nedb's text for one holding a Date (`{"$$date": ms}`), else plain JSON. */
function writeDocLine(out: JsonLineWriter, doc: StoredDoc): void {
  if (holdsDate(doc)) out.raw(serialize(doc) + '\n');
  else out.line(doc);
}

/**
 * Writes the documents' lines, then `lines`, to a new file; returns the bytes. A chunk is written
 * before the next is encoded, so a large collection does not hold the event loop for its whole text.
 */
async function writeCopy(fh: FileHandle, docs: readonly StoredDoc[], lines: readonly string[]): Promise<number> {
  let written = 0;
  const out = new JsonLineWriter(Buffer.allocUnsafeSlow(REWRITE_CHUNK + APPEND_BUFFER_MIN));
  for (let i = 0; i < docs.length; i++) {
    writeDocLine(out, docs[i]!);
    if (out.length >= REWRITE_CHUNK) {
      written += await writeAll(fh, out.buf, out.length);
      out.length = 0;
    }
  }
  for (const line of lines) out.raw(`${line}\n`);
  written += await writeAll(fh, out.buf, out.length);
  return written;
}

/** Writes `length` bytes of `buf` (a write may take fewer than it is given); returns `length`. */
async function writeAll(fh: FileHandle, buf: Buffer, length: number): Promise<number> {
  for (let off = 0; off < length; ) off += (await fh.write(buf, off, length - off)).bytesWritten;
  return length;
}

/** Flushes a directory's entries (a rename) to disk; skipped where a directory cannot be opened, as nedb does. */
async function syncDirectory(dir: string): Promise<void> {
  let fh: FileHandle;
  try {
    fh = await open(dir, 'r');
  } catch {
    return;
  }
  try {
    await fh.sync();
  } catch {
    // some file systems refuse to flush a directory; nedb ignores that too
  } finally {
    await fh.close();
  }
}

/** Whether a value holds a Date anywhere (nedb writes those as `{"$$date": ms}`). */
function holdsDate(v: unknown): boolean {
  if (typeof v !== 'object' || v === null) return false;
  if (v instanceof Date) return true;
  if (Array.isArray(v)) {
    for (const x of v) if (holdsDate(x)) return true;
    return false;
  }
  for (const k in v) if (holdsDate((v as Obj)[k])) return true;
  return false;
}
