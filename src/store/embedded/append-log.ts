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

/**
 * Buffers datafile appends are encoded into, shared by all collections: an append takes one (or
 * makes one, when others are in use) and puts it back when written, so a steady stream of writes
 * allocates no buffers. A buffer grown beyond APPEND_BUFFER_KEPT is left to the collector.
 */
const appendBuffers: Buffer[] = [];
const APPEND_BUFFER_MIN = 64 * 1024;
const APPEND_BUFFER_KEPT = 256 * 1024;
const APPEND_BUFFERS_KEPT = 2;

/**
 * The append side of a collection's datafile, kept open. nedb appends every write with
 * `fs.appendFile(path)`: open, write and close, three trips through the thread pool, each of
 * which waits for a turn of the event loop, which under a fleet's load is what a write's latency
 * is made of. This appends the same lines through one handle opened in append mode. A compaction
 * replaces the file (write a copy, rename it over), so the handle is closed before it and the
 * next append opens the new file. nedb runs appends and compactions one at a time on its
 * executor, so they never overlap.
 *
 * The datafile is append-only: every update adds the document's new line and every removal a
 * tombstone, so a collection a fleet rewrites all day (token totals, lastSeen, the token ledger)
 * grows by gigabytes a day while its live documents stay the same. So the log counts what it
 * appends and asks for a compaction (`onOversize`) once the file has reached both twice its size
 * after the last compaction and `compactMinBytes`: the file stays within about twice its live
 * size, and the work of rewriting it is paid for by as many bytes of appends.
 *
 * A compaction while the store runs (`compact`) does not hold the collection's writes while it
 * copies: it takes the live documents at one point between two writes, and from then on every
 * append goes to the datafile as before and is also kept (`tail`), to be written to the copy
 * after the documents. Only the last step holds the writes: the appends the copy has not got
 * yet, its flush to disk (little is left to flush by then), and the rename.
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

  /**
   * Appends documents, a line each, encoded straight into a buffer kept from the last append (see
   * `appendBuffers` and `JsonLineWriter`): no line is a string first, apart from those of
   * documents holding a Date, which nedb's `serialize` writes (as `{"$$date": ms}`).
   */
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
   * Replaces the datafile with these documents and lines, crash-safe as nedb's own compaction:
   * written beside it (`<file>~`), flushed to disk, renamed over it, and the directory flushed. A
   * crash before the rename leaves the old file, which nedb's load prefers to the copy. This is
   * the rewrite at load, on the collection's executor (nothing else runs on the collection yet);
   * see `compact` for one while the store runs.
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
   * A compaction while the collection is in use. `exclusive` runs a task on the collection's
   * executor (no write runs beside it). The documents and index lines are taken in one such task,
   * which also starts keeping the appends that follow; the copy is written and flushed to disk
   * while writes go on; a second exclusive task writes the appends kept meanwhile, flushes them
   * and renames the copy over the datafile. The documents are not copied when taken: a document
   * changed in place afterwards may be written in its newer state, and the line its change
   * appended, which follows in the copy, says the same.
   */
  async compact(take: () => { docs: readonly StoredDoc[]; lines: readonly string[] }, exclusive: <R>(task: () => Promise<R>) => Promise<R>): Promise<void> {
    const temp = `${this.filename}~`;
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

  /**
   * Compacts now, whatever the file's size: after a migration replaced documents whose old lines
   * must not stay on disk. Waits for a compaction already under way; never runs two at once.
   */
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
 * Writes the documents' lines and then `lines` to a new file; returns the bytes written. The lines
 * are encoded a chunk at a time, each written before the next is made, so a large collection does
 * not hold the event loop for the whole text.
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

/** Flushes a directory's entries (a rename in it) to disk; a platform that cannot open a directory skips it, as nedb does. */
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
