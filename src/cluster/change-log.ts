/**
 * The cluster's change log (`change_log`): what a node announces to the others (an agent's record
 * changed, a run changed...) is appended here as well as broadcast, numbered by one cluster-wide
 * counter, and every node reads the log from where it left off, a small indexed read every
 * `pollMs` whatever the fleet size. A broadcast lost by the bus (down, cut off, a dropped message)
 * is thus caught up within one period, without reading the fleet again (docs/cluster.md,
 * "What each node reads").
 *
 * A number is handed out before its entry is written, so a reader may see a later entry before
 * an earlier one: it stops at the hole and waits. A hole still there after `gapWaitMs` means the
 * writer died between the two, or the entries were trimmed past this node (it was cut off from
 * the store longer than they are kept): the node is told to read everything again (`onLost`).
 */
import type { Collection } from '../store/types.js';
import { CHANGE_COUNTER_ID, type ChangeCounterDoc, type ChangeEntryDoc } from '../store/cluster-docs.js';
import type { BusLog } from './bus.js';

/** Entries read per store call; a longer backlog is read in several calls at once. */
const READ_LIMIT = 500;
/** Entries older than this are deleted (a node behind them reads everything again). */
const KEEP_MS = 3_600_000;
/** Old entries deleted this often by every node (the same delete: whoever runs first does it). */
const TRIM_EVERY_MS = 600_000;
/** An append the store refused is tried again after this long. */
const RETRY_MS = 1000;

export interface ChangeLogOptions {
  log: Collection<ChangeEntryDoc | ChangeCounterDoc>;
  /** This process's `<nodeId>/<incarnation>`: its own entries are skipped. */
  from: string;
  /** How often the log is read. */
  pollMs: number;
  /** How long a hole in the numbers is waited for before the node reads everything again. */
  gapWaitMs: number;
  /** Another node's entry, in order. */
  deliver(topic: string, data: unknown): void;
  /** Entries this node will never see: read everything again. */
  onLost(): void;
  logger: BusLog;
  /** This process's clock (ms), for the entries' `at` and the trim. */
  now?: () => number;
}

export class ChangeLog {
  /** The highest number read (or skipped); null before start. */
  private position: number | null = null;
  /** A hole at `position + 1`, first seen at `since`. */
  private gap: { seq: number; since: number } | null = null;
  private pending: Array<{ topic: string; data: unknown }> = [];
  private writing: Promise<void> | null = null;
  private reading: Promise<void> | null = null;
  private pollTimer: NodeJS.Timeout | null = null;
  private trimTimer: NodeJS.Timeout | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private stopped = false;
  private readonly now: () => number;

  constructor(private readonly o: ChangeLogOptions) {
    this.now = o.now ?? Date.now;
  }

  /** Where the log ends now: what this node reads from once it follows. Before the node's full reads, so nothing falls between. */
  async start(): Promise<void> {
    const counter = (await this.o.log.findById(CHANGE_COUNTER_ID)) as ChangeCounterDoc | null;
    this.position = counter?.next ?? 0;
  }

  /** Reads the log every period from now on (once the handlers are in place). */
  follow(): void {
    if (this.stopped || this.pollTimer) return;
    this.pollTimer = setInterval(() => void this.poll(), this.o.pollMs);
    this.pollTimer.unref();
    this.trimTimer = setInterval(() => void this.trim(), TRIM_EVERY_MS);
    this.trimTimer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    if (this.trimTimer) clearInterval(this.trimTimer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await Promise.all([this.writing, this.reading]);
  }

  /** Appends a change for the other nodes (with the others pending, in one numbering and one write). */
  append(topic: string, data: unknown): void {
    if (this.stopped) return;
    this.pending.push({ topic, data });
    this.kick();
  }

  /** Starts writing what is pending, unless a write runs or waits for its retry. */
  private kick(): void {
    if (this.writing || this.retryTimer || this.stopped) return;
    this.writing = this.write().finally(() => {
      this.writing = null;
      // Appended after the write's last look at `pending`.
      if (this.pending.length > 0) this.kick();
    });
  }

  /** Reads the entries after this node's position (one at a time); now, e.g. when the bus is back. */
  poll(): Promise<void> {
    if (this.stopped || this.position === null) return Promise.resolve();
    this.reading ??= this.read()
      .catch((err: unknown) => this.o.logger.error({ err }, 'reading the change log failed; will read it again'))
      .finally(() => {
        this.reading = null;
      });
    return this.reading;
  }

  private async write(): Promise<void> {
    while (this.pending.length > 0 && !this.stopped) {
      const batch = this.pending;
      this.pending = [];
      try {
        // The numbers are taken first: a writer that dies before the entries land leaves a hole, which the readers wait out.
        const counter = (await this.o.log.findOneAndUpdate({ _id: CHANGE_COUNTER_ID }, { $inc: { next: batch.length } }, { upsert: true })) as ChangeCounterDoc;
        const first = counter.next - batch.length + 1;
        const at = new Date(this.now()).toISOString();
        const entries = batch.map((c, i): ChangeEntryDoc => ({ _id: `change:${first + i}`, seq: first + i, topic: c.topic, data: c.data, from: this.o.from, at }));
        await this.insert(entries);
      } catch (err) {
        // Not numbered (or numbered without an answer: the readers wait that hole out, then read everything); tried again.
        this.o.logger.error({ err, changes: batch.length }, 'appending to the change log failed; will retry');
        this.pending = [...batch, ...this.pending];
        this.retryLater();
        return;
      }
    }
  }

  /** Writes numbered entries, again and again while the store refuses (a retry lands each entry once). */
  private async insert(entries: ChangeEntryDoc[]): Promise<void> {
    for (let delay = RETRY_MS; ; delay = Math.min(delay * 2, 30_000)) {
      try {
        await this.o.log.bulkUpdate(entries.map(({ _id, ...rest }) => ({ filter: { _id }, update: { $set: rest }, upsert: true })));
        return;
      } catch (err) {
        if (this.stopped) throw err;
        this.o.logger.error({ err, changes: entries.length }, 'writing numbered changes failed; will retry');
        await new Promise((resolve) => setTimeout(resolve, delay).unref());
      }
    }
  }

  private retryLater(): void {
    if (this.retryTimer || this.stopped) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.kick();
    }, RETRY_MS);
    this.retryTimer.unref();
  }

  private async read(): Promise<void> {
    for (;;) {
      const found = (await this.o.log.find({ seq: { $gt: this.position! } }, { sort: { seq: 1 }, limit: READ_LIMIT })) as ChangeEntryDoc[];
      for (const entry of found) {
        if (this.stopped) return;
        if (entry.seq !== this.position! + 1 && !this.holeGivenUp()) return;
        this.gap = null;
        this.position = entry.seq;
        if (entry.from !== this.o.from) this.o.deliver(entry.topic, entry.data);
      }
      if (found.length < READ_LIMIT) return;
    }
  }

  /** A hole at the position: true (and the node told to read everything) once it has lasted gapWaitMs. */
  private holeGivenUp(): boolean {
    const seq = this.position! + 1;
    if (this.gap?.seq !== seq) {
      this.gap = { seq, since: this.now() };
      return false;
    }
    if (this.now() - this.gap.since < this.o.gapWaitMs) return false;
    this.o.logger.warn({ missing: seq }, 'the change log has a hole (a writer died, or entries were trimmed past this node); reading everything again');
    this.o.onLost();
    return true;
  }

  private async trim(): Promise<void> {
    try {
      await this.o.log.deleteMany({ at: { $lt: new Date(this.now() - KEEP_MS).toISOString() } });
    } catch (err) {
      this.o.logger.warn({ err }, 'trimming the change log failed; the next trim deletes the same');
    }
  }
}
