/**
 * Token usage of the fleet (interface §4.13, §2.17; DESIGN §4 step 5).
 *
 * Heartbeats carry `sinceLastSync` deltas. The path of a delta:
 *
 * 1. Ledger (durable, before the ack). Deltas of every heartbeat that arrives while a write is
 *    in flight, or within TOKEN_LEDGER_WRITE_GAP_MS of the last one (unless 64 are waiting), are
 *    grouped into ONE ledger document (`token_ledger`, one insert: one round trip, one append in
 *    the embedded store), and only then is each heartbeat acknowledged. So the
 *    number of store writes follows the flush rate, not the heartbeat rate. A delta whose
 *    socket closed before the write is dropped: the agent sends it again after reconnecting.
 *
 *    Exactly once across connections: each ledger entry carries its heartbeat's `seq`, and the
 *    highest seq stored per agent is kept in memory. A heartbeat whose seq is not above it was
 *    stored before (its ack was lost with a connection): it is acknowledged, not counted again.
 *    `ready` tells the agent that seq (`lastHeartbeatSeq`), so it drops what was stored, sends the
 *    rest again under their own seqs, and numbers on above it. Across a restart: the roll-up at
 *    shutdown writes the seqs of what it folds (the last writes, whose acks a closing socket may
 *    have lost) as `lastSeq` in the agents' `token_usage` documents, and after a crash the ledger
 *    not yet folded still holds them; both are read at start. (The periodic roll-ups do not write
 *    them: one more value per agent every few seconds was enough garbage to keep a held fleet's
 *    heap from shrinking after its connection storm.)
 *
 * 2. Roll-up (every TOKEN_ROLLUP_INTERVAL_SECONDS and at shutdown). Ledger documents are folded
 *    into `token_usage`: one document per agent (`_id` = DID: allTime, daily buckets `days.YYYY-MM-DD`
 *    and monthly buckets `months.YYYY-MM`, UTC) and the global aggregate (`_id` `global`), each
 *    with `rolledUpTo`, the last ledger id folded in, set in the same single-document update as
 *    its increments. Then the folded ledger documents are deleted. After a failure or a restart the
 *    first roll-up reads each agent's `rolledUpTo`, so a ledger document is never folded twice.
 *    Once a UTC day, buckets that left their windows are removed: an agent keeps TOKEN_AGENT_DAYS_KEPT
 *    daily and TOKEN_AGENT_MONTHS_KEPT monthly buckets (only the current ones are read per agent),
 *    the global aggregate DAYS_KEPT days and every month.
 *
 * GET /api/stats/tokens reads the global aggregate plus the ledger documents not yet folded into
 * it (bounded by the roll-up interval), so it is exact and cheap whatever the fleet size.
 */
import { randomBytes } from 'node:crypto';
import { TimeSlice } from '../domain/time-slice.js';
import { readDigits, writeDigits } from '../domain/decimal.js';
import type { AppContext } from '../server.js';
import type { TokenLedgerDoc, TokenUsageDoc } from '../store/collections.js';
import type { BulkUpdateOp } from '../store/types.js';
import type { HeartbeatPeer, HeartbeatSink } from '../ws/agent-gateway.js';

export interface TokenCounts {
  promptTokens: number;
  completionTokens: number;
}

export interface TokenStats {
  allTime: TokenCounts;
  daily: TokenCounts;
  monthly: TokenCounts;
}

interface Entry {
  /** Its connection (which names the agent: `peer.did`). */
  peer: HeartbeatPeer;
  seq: number;
  p: number;
  c: number;
  /** performance.now() at arrival. */
  at: number;
}

export const GLOBAL_ID = 'global';
/** Daily buckets kept in the global totals (agents keep TOKEN_AGENT_DAYS_KEPT). Its monthly buckets and allTime are kept forever. */
export const DAYS_KEPT = 62;
const ROLLUP_BATCH = 5000;
/** Per-agent updates per store call (the embedded store applies a call as one synchronous batch). */
const UPDATE_CHUNK = 100;
const RETRY_MIN_MS = 100;
/** Entries per ledger document (a flush under heavy load writes several in one insertMany). */
const LEDGER_DOC_MAX = 2000;
/** Heartbeats waiting that make a ledger write start without waiting out TOKEN_LEDGER_WRITE_GAP_MS ... */
const LEDGER_EARLY_WRITE = 64;
/**
 * ... once this long has passed since the last write started. Under 20,000 heartbeats a second a
 * write then carries about a hundred of them and follows the last within a few milliseconds: the
 * shorter each heartbeat waits in the server, the fewer are caught by a stall of the event loop
 * (six interleaved runs each: a server-side p99 of 34-83 ms, median 61, with 5 ms; 30-74 ms,
 * median 40, with 2 ms; the writes, a third more of them, cost no CPU one could see).
 */
const FULL_BATCH_GAP_MS = 2;
/**
 * A roll-up runs in slices of ROLLUP_SLICE_MS. When the event loop was busy since the last roll-up
 * (more than ROLLUP_PACED_ABOVE of its time), the slices have ROLLUP_REST_MS between them: under
 * 20,000 heartbeats a second, a roll-up that took every other turn of the loop (10,000 agents'
 * 200,000 deltas in about 0.6 s) was where the slowest acknowledgements came from; paced, it takes
 * longer and leaves the heartbeats two thirds of the loop. A quiet server's roll-up is not paced:
 * it is small, and what it keeps alive while it waits would outlive the young generation.
 */
const ROLLUP_SLICE_MS = 4;
const ROLLUP_REST_MS = 8;
const ROLLUP_PACED_ABOVE = 0.3;
/** Heartbeat acks sent per turn of the event loop. */
const ACK_CHUNK = 500;
const RETRY_MAX_MS = 5000;

export const utcDay = (d: Date) => d.toISOString().slice(0, 10);
export const utcMonth = (d: Date) => d.toISOString().slice(0, 7);
const zero = (): TokenCounts => ({ promptTokens: 0, completionTokens: 0 });
const add = (a: TokenCounts, p: number, c: number) => {
  a.promptTokens += p;
  a.completionTokens += c;
};

export class TokenUsage implements HeartbeatSink {
  /** earlyWrites: ledger writes started before the gap because LEDGER_EARLY_WRITE heartbeats waited. */
  readonly stats = { heartbeats: 0, ledgerWrites: 0, earlyWrites: 0, rollups: 0 };
  private batch: Entry[] = [];
  private lastFlushAt = -Infinity;
  private scheduled = false;
  private gapTimer: NodeJS.Timeout | undefined;
  /** Whether the flush scheduled is one for a full batch (already at the short gap). */
  private scheduledEarly = false;
  private flushing: Promise<void> | null = null;
  private retryMs = RETRY_MIN_MS;
  private retryTimer: NodeJS.Timeout | undefined;
  private counter = 0;
  private readonly instance = randomBytes(3).toString('hex');
  private rollupTimer: NodeJS.Timeout | undefined;
  private rolling: Promise<void> | null = null;
  /** False until a roll-up has succeeded in this process, and after a failed one. */
  private clean = false;
  private prunedDay = '';
  /** The event loop's use at the last roll-up (see ROLLUP_PACED_ABOVE). */
  private loopUse = performance.eventLoopUtilization();
  /** Set by stop(): from then on a roll-up also writes each agent's last seq. */
  private stopping = false;
  /** The highest heartbeat seq stored per agent (ledger entries and roll-ups both). */
  private readonly storedSeq = new Map<string, number>();

  constructor(private readonly ctx: AppContext) {}

  /** The highest heartbeat seq of the agent whose delta is stored, or null when none is. */
  lastStoredSeq(did: string): number | null {
    return this.storedSeq.get(did) ?? null;
  }

  /** Opens the ledger (so the first heartbeat does not pay for it) and folds what a previous run left. */
  async start(): Promise<void> {
    // An empty ledger leaves nothing half-folded to recover from; otherwise fold it carefully now.
    if ((await this.ctx.c.tokenLedger.count({})) === 0) this.clean = true;
    else await this.rollup();
    await this.loadStoredSeqs();
    this.rollupTimer = setInterval(() => this.rollup().catch((err: unknown) => this.ctx.log.error({ err }, 'token roll-up failed')), this.ctx.config.tokenRollupIntervalMs);
    this.rollupTimer.unref();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.rollupTimer) clearInterval(this.rollupTimer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.gapTimer) clearTimeout(this.gapTimer);
    this.gapTimer = undefined;
    this.scheduled = false;
    await this.drain();
    await this.rollup();
  }

  /**
   * For a deleted agent: folds what the ledger holds (so the global totals keep its usage), then
   * deletes the agent's own usage document.
   */
  async forgetAgent(did: string): Promise<void> {
    await this.drain();
    await this.rollup();
    await this.ctx.c.tokenUsage.deleteOne({ _id: did });
    this.storedSeq.delete(did);
  }

  /** Each agent's highest stored seq: from its usage document, then from what the ledger still holds (when a roll-up failed). */
  private async loadStoredSeqs(): Promise<void> {
    const { c } = this.ctx;
    for (const doc of await c.tokenUsage.find({ lastSeq: { $exists: true } }, { projection: { _id: 1, lastSeq: 1 } })) {
      if (typeof doc.lastSeq === 'number') this.noteStored(doc._id, doc.lastSeq);
    }
    for (const doc of await c.tokenLedger.find({}, { projection: { entries: 1 } })) {
      forEachEntry(doc.entries, (did, _p, _c, seq) => {
        if (seq >= 0) this.noteStored(did, seq);
      });
    }
  }

  private noteStored(did: string, seq: number): void {
    const had = this.storedSeq.get(did);
    if (had === undefined || seq > had) this.storedSeq.set(did, seq);
  }

  // -------------------------------------------------------------------------------------------
  // 1. Ledger

  record(peer: HeartbeatPeer, seq: number, promptTokens: number, completionTokens: number): void {
    this.stats.heartbeats++;
    this.batch.push({ peer, seq, p: promptTokens, c: completionTokens, at: performance.now() });
    this.schedule();
  }

  /**
   * A flush starts on the next turn of the event loop, but at most one every TOKEN_LEDGER_WRITE_GAP_MS:
   * a ledger write then carries every heartbeat of those milliseconds, and a fleet that heartbeats
   * steadily makes a few writes a second instead of hundreds (each write's garbage, and each ledger
   * document kept until the roll-up, is what a held fleet's memory is made of). Once
   * LEDGER_EARLY_WRITE heartbeats wait, they are written without waiting out the gap (but at most
   * one write every FULL_BATCH_GAP_MS), so under heavy load writes follow each other as they did
   * before the gap was raised.
   */
  private schedule(): void {
    if (this.flushing || this.retryTimer) return;
    const early = this.batch.length >= LEDGER_EARLY_WRITE;
    if (this.scheduled) {
      if (!early || !this.gapTimer || this.scheduledEarly) return;
      clearTimeout(this.gapTimer); // a full batch does not wait out the gap
      this.gapTimer = undefined;
    }
    this.scheduled = true;
    this.scheduledEarly = early;
    const run = () => {
      this.scheduled = false;
      this.gapTimer = undefined;
      if (early) this.stats.earlyWrites++;
      this.flush().catch((err: unknown) => this.ctx.log.error({ err }, 'writing the token ledger failed'));
    };
    const gap = this.ctx.config.tokenLedgerWriteGapMs;
    const wait = this.lastFlushAt + (early ? Math.min(gap, FULL_BATCH_GAP_MS) : gap) - performance.now();
    if (wait <= 0) setImmediate(run);
    else this.gapTimer = setTimeout(run, wait);
  }

  /** Writes everything recorded so far (giving up after a few failed writes: unacknowledged deltas are sent again by their agents). */
  async drain(attempts = 3): Promise<void> {
    while ((this.batch.length > 0 || this.flushing) && attempts > 0) {
      if (this.flushing) await this.flushing;
      else {
        const before = this.stats.ledgerWrites;
        await this.flush();
        if (this.stats.ledgerWrites === before && this.batch.length > 0) attempts--;
      }
    }
  }

  private flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    this.lastFlushAt = performance.now();
    this.flushing = this.write().finally(() => {
      this.flushing = null;
      if (this.batch.length > 0) this.schedule();
    });
    return this.flushing;
  }

  private async write(): Promise<void> {
    const entries = this.batch.filter((e) => e.peer.alive);
    this.batch = [];
    if (entries.length === 0) return;
    // Deltas stored before (resent after their ack was lost) are acknowledged, not counted again.
    // Writes follow one another, so the previous one's seqs are already noted here; within one
    // connection seqs only increase (the gateway passes a repeated one on with no tokens).
    const counted: Entry[] = [];
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      if (e.p === 0 && e.c === 0) continue;
      const stored = this.storedSeq.get(e.peer.did!);
      if (stored === undefined || e.seq > stored) counted.push(e);
    }
    if (counted.length > 0) {
      const now = new Date();
      const docs: TokenLedgerDoc[] = [];
      for (let i = 0; i < counted.length; i += LEDGER_DOC_MAX) {
        const doc: TokenLedgerDoc = {
          _id: this.nextLedgerId(now),
          at: now.toISOString(),
          day: utcDay(now),
          month: utcMonth(now),
          promptTokens: 0,
          completionTokens: 0,
          entries: '',
        };
        const text = new LineText();
        for (let j = i; j < Math.min(counted.length, i + LEDGER_DOC_MAX); j++) {
          const e = counted[j]!;
          text.entry(e.peer.did!, e.p, e.c, e.seq);
          doc.promptTokens += e.p;
          doc.completionTokens += e.c;
        }
        doc.entries = text.done();
        docs.push(doc);
      }
      try {
        await this.ctx.c.tokenLedger.insertMany(docs);
        for (let i = 0; i < counted.length; i++) this.noteStored(counted[i]!.peer.did!, counted[i]!.seq);
        this.stats.ledgerWrites++;
        this.retryMs = RETRY_MIN_MS;
      } catch (err) {
        this.ctx.log.error({ err, heartbeats: entries.length }, 'writing the token ledger failed; will retry');
        this.batch = entries.concat(this.batch);
        this.retryTimer = setTimeout(() => {
          this.retryTimer = undefined;
          this.schedule();
        }, this.retryMs);
        this.retryTimer.unref();
        this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
        return;
      }
    }
    this.acknowledge(entries, 0);
  }

  /** Sends the acks a chunk per turn of the event loop, so a large batch does not stall the sockets. */
  private acknowledge(entries: Entry[], from: number): void {
    const end = Math.min(entries.length, from + ACK_CHUNK);
    const now = performance.now(); // one clock read per chunk
    for (let i = from; i < end; i++) {
      const e = entries[i]!;
      e.peer.ackHeartbeat(e.seq); // not sent when the socket closed meanwhile
      this.ctx.metrics.observeHeartbeatAck((now - e.at) / 1000);
    }
    if (end < entries.length) setImmediate(() => this.acknowledge(entries, end));
  }

  /** Time-ordered, unique across restarts. */
  private nextLedgerId(now: Date): string {
    this.counter = (this.counter + 1) % 0x1000000;
    return `${now.getTime().toString(36).padStart(10, '0')}-${this.counter.toString(36).padStart(5, '0')}-${this.instance}`;
  }

  // -------------------------------------------------------------------------------------------
  // 2. Roll-up

  rollup(): Promise<void> {
    this.rolling ??= this.doRollup()
      .catch((err: unknown) => {
        this.clean = false;
        this.ctx.log.error({ err }, 'token roll-up failed; will retry');
      })
      .finally(() => {
        this.rolling = null;
      });
    return this.rolling;
  }

  private async doRollup(): Promise<void> {
    const { c } = this.ctx;
    const use = performance.eventLoopUtilization();
    const paced = !this.stopping && performance.eventLoopUtilization(use, this.loopUse).utilization > ROLLUP_PACED_ABOVE;
    this.loopUse = use;
    for (;;) {
      const ledger = await c.tokenLedger.find({}, { sort: { _id: 1 }, limit: ROLLUP_BATCH });
      if (ledger.length === 0) break;
      const last = ledger[ledger.length - 1]!._id;
      const global = await c.tokenUsage.findById(GLOBAL_ID);
      const globalDone = global?.rolledUpTo ?? '';

      // Per UTC day and agent: the sums of the ledger documents not folded into the agent yet (all
      // of them, unless recovering from a failure). One pass over the entries, in time slices so a
      // large roll-up does not hold back heartbeat acknowledgements. The sums are numbers in maps
      // (no object per agent), and each chunk's update ops are built just before they are written:
      // what a roll-up keeps alive while it yields stays small, so little of it outlives the young
      // generation and the held fleet's old generation does not fill with roll-up leftovers.
      // Background work: at most a third of a busy loop's time (see ROLLUP_PACED_ABOVE).
      const slice = new TimeSlice(ROLLUP_SLICE_MS, paced ? ROLLUP_REST_MS : 0);
      const done = this.clean ? null : await this.agentProgress(ledger, slice);
      // (Loops that await go by index: iterating across an await allocates a result per step.)
      const sums = new Map<string, DaySums>();
      for (let i = 0; i < ledger.length; i++) {
        await slice.yieldIfDue();
        const doc = ledger[i]!;
        let day = sums.get(doc.day);
        if (!day) sums.set(doc.day, (day = { index: new Map(), prompt: [], completion: [], seq: [] }));
        const { index, prompt, completion, seq: seqs } = day;
        forEachEntry(doc.entries, (did, p, cc, seq) => {
          const from = done?.get(did);
          if (from !== undefined && doc._id <= from) return;
          const at = index.get(did);
          if (at === undefined) {
            index.set(did, prompt.length);
            prompt.push(p);
            completion.push(cc);
            seqs.push(seq);
          } else {
            prompt[at] += p;
            completion[at] += cc;
            if (seq > seqs[at]!) seqs[at] = seq;
          }
        });
      }
      const now = new Date().toISOString();
      const days = [...sums].map(([day, sum]) => ({ day, sum, keys: bucketKeys(day) }));
      // Usually one day; around midnight an agent may have sums in two.
      const dids = days.length === 1 ? [...days[0]!.sum.index.keys()] : [...new Set(days.flatMap((d) => [...d.sum.index.keys()]))];
      let ops: BulkUpdateOp[] = [];
      const $set = { rolledUpTo: last, updatedAt: now }; // the same for every agent (the store copies what it keeps)
      for (let i = 0; i < dids.length; i++) {
        const did = dids[i]!;
        const inc: Record<string, number> = {};
        let counted = false;
        let seq = -1;
        for (const { sum, keys } of days) {
          const at = sum.index.get(did);
          if (at === undefined) continue;
          if (addBuckets(inc, keys, sum.prompt[at]!, sum.completion[at]!)) counted = true;
          if (sum.seq[at]! > seq) seq = sum.seq[at]!;
        }
        // At shutdown the agent's last seq goes in the same update (entries of earlier versions have none).
        const withSeq = this.stopping && seq >= 0;
        if (counted) ops.push({ filter: { _id: did }, update: { $inc: inc, $set: withSeq ? { rolledUpTo: last, updatedAt: now, lastSeq: seq } : $set }, upsert: true });
        if (ops.length >= UPDATE_CHUNK) {
          await c.tokenUsage.bulkUpdate(ops);
          ops = [];
          await slice.yieldIfDue();
        }
      }
      if (ops.length > 0) await c.tokenUsage.bulkUpdate(ops);

      const gInc: Record<string, number> = {};
      // Every ledger document's day has its keys in `days` (a day enters `sums` before its entries are read).
      const keysOf = new Map(days.map((d) => [d.day, d.keys]));
      let globalCounted = false;
      for (const doc of ledger) {
        if (doc._id > globalDone && addBuckets(gInc, keysOf.get(doc.day)!, doc.promptTokens, doc.completionTokens)) globalCounted = true;
      }
      await c.tokenUsage.updateOne(
        { _id: GLOBAL_ID },
        { ...(globalCounted ? { $inc: gInc } : {}), $set: { rolledUpTo: last, updatedAt: now } },
        { upsert: true },
      );
      await c.tokenLedger.deleteMany({ _id: { $lte: last } });
      this.clean = true;
      this.stats.rollups++;
      if (ledger.length < ROLLUP_BATCH) break;
    }
    await this.pruneBuckets();
  }

  /** Each agent's `rolledUpTo` (after a failure or a restart: which ledger documents it already has). */
  private async agentProgress(ledger: TokenLedgerDoc[], slice: TimeSlice): Promise<Map<string, string>> {
    const dids = new Set<string>();
    for (const doc of ledger) forEachEntry(doc.entries, (did) => dids.add(did));
    const out = new Map<string, string>();
    for (const did of dids) {
      const doc = await this.ctx.c.tokenUsage.findById(did);
      if (doc?.rolledUpTo) out.set(did, doc.rolledUpTo);
      await slice.yieldIfDue();
    }
    return out;
  }

  /**
   * Removes the buckets that fell out of their kept windows, once per UTC day: all of them, also
   * those of days the server did not run on. Agents keep TOKEN_AGENT_DAYS_KEPT days and
   * TOKEN_AGENT_MONTHS_KEPT months (only today's and this month's are read per agent); the global
   * document keeps DAYS_KEPT days and every month. The global document has a bucket for every day
   * and month any agent has (both come from the same ledger documents) and keeps them at least as
   * long, so its keys say which buckets to remove. The agents' go first, a chunk at a time, and the
   * global ones last, so an interrupted prune is finished by the next one.
   */
  private async pruneBuckets(): Promise<void> {
    const { c, config } = this.ctx;
    const now = new Date();
    const today = utcDay(now);
    if (this.prunedDay === today) return;
    const global = await c.tokenUsage.findById(GLOBAL_ID);
    const dayKeys = Object.keys(global?.days ?? {});
    const staleDays = (kept: number) => {
      const cutoff = utcDay(new Date(now.getTime() - kept * 86_400_000));
      return dayKeys.filter((day) => day <= cutoff);
    };
    const agentFields = staleDays(config.tokenAgentDaysKept).map((day) => `days.${day}`);
    if (config.tokenAgentMonthsKept > 0) {
      const cutoff = utcMonth(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - config.tokenAgentMonthsKept, 1)));
      for (const month of Object.keys(global?.months ?? {})) if (month <= cutoff) agentFields.push(`months.${month}`);
    }
    if (agentFields.length > 0) {
      const holders = await c.tokenUsage.find(
        { _id: { $ne: GLOBAL_ID }, $or: agentFields.map((field) => ({ [field]: { $exists: true } })) },
        { projection: { _id: 1 } },
      );
      const $unset = Object.fromEntries(agentFields.map((field) => [field, ''] as const));
      const slice = new TimeSlice();
      for (let i = 0; i < holders.length; i += UPDATE_CHUNK) {
        await c.tokenUsage.bulkUpdate(holders.slice(i, i + UPDATE_CHUNK).map((doc) => ({ filter: { _id: doc._id }, update: { $unset } })));
        await slice.yieldIfDue();
      }
    }
    const globalStale = staleDays(DAYS_KEPT);
    if (globalStale.length > 0) await c.tokenUsage.updateOne({ _id: GLOBAL_ID }, { $unset: Object.fromEntries(globalStale.map((day) => [`days.${day}`, ''])) });
    this.prunedDay = today;
  }

  // -------------------------------------------------------------------------------------------
  // Reading

  /** Fleet-wide totals: the global aggregate plus the ledger not folded into it yet. */
  async totals(now = new Date()): Promise<TokenStats> {
    const day = utcDay(now);
    const month = utcMonth(now);
    const global = await this.ctx.c.tokenUsage.findById(GLOBAL_ID);
    const out = countsOf(global, day, month);
    const tail = await this.ctx.c.tokenLedger.find(
      { _id: { $gt: global?.rolledUpTo ?? '' } },
      { projection: { day: 1, month: 1, promptTokens: 1, completionTokens: 1 } },
    );
    for (const doc of tail) {
      add(out.allTime, doc.promptTokens, doc.completionTokens);
      if (doc.day === day) add(out.daily, doc.promptTokens, doc.completionTokens);
      if (doc.month === month) add(out.monthly, doc.promptTokens, doc.completionTokens);
    }
    return out;
  }

  /** One agent's rolled-up totals (up to TOKEN_ROLLUP_INTERVAL_SECONDS behind). */
  async ofAgent(did: string, now = new Date()): Promise<TokenStats> {
    return countsOf(await this.ctx.c.tokenUsage.findById(did), utcDay(now), utcMonth(now));
  }
}

/** Where ledger texts are put together (grown when a text does not fit; one write at a time uses it). */
let lineScratch = Buffer.allocUnsafeSlow(16 * 1024);

/**
 * A ledger document's text, `<did> <prompt> <completion> <seq>` per heartbeat, joined by `;`, written
 * into a scratch buffer and made a string once: joining a template string per heartbeat made
 * several intermediate strings for every heartbeat. Token counts are non-negative integers (the
 * heartbeat schema says so), and DIDs hold no spaces or semicolons (their pattern says so).
 */
class LineText {
  private length = 0;

  entry(did: string, p: number, c: number, seq: number): void {
    const need = this.length + Buffer.byteLength(did, 'utf8') + 3 * 17 + 4;
    if (need > lineScratch.length) {
      const bigger = Buffer.allocUnsafeSlow(Math.max(need, lineScratch.length * 2));
      lineScratch.copy(bigger, 0, 0, this.length);
      lineScratch = bigger;
    }
    const buf = lineScratch;
    if (this.length > 0) buf[this.length++] = 0x3b; // ;
    this.length += buf.write(did, this.length, 'utf8');
    buf[this.length++] = 0x20;
    this.length = writeDigits(buf, this.length, p);
    buf[this.length++] = 0x20;
    this.length = writeDigits(buf, this.length, c);
    buf[this.length++] = 0x20;
    this.length = writeDigits(buf, this.length, seq);
  }

  done(): string {
    return lineScratch.toString('utf8', 0, this.length);
  }
}

/**
 * Calls `fn` for each heartbeat entry (`<did> <prompt> <completion> <seq>`) of a ledger document's
 * text: entries joined by `;`, or by newlines in documents an earlier version wrote. Entries an
 * earlier version wrote have no seq: -1 then.
 */
export function forEachEntry(text: string, fn: (did: string, promptTokens: number, completionTokens: number, seq: number) => void): void {
  const separator = text.includes('\n') ? '\n' : ';';
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf(separator, start);
    if (end < 0) end = text.length;
    const a = text.indexOf(' ', start);
    const b = text.indexOf(' ', a + 1);
    const d = text.indexOf(' ', b + 1);
    if (d < 0 || d > end) fn(text.slice(start, a), readDigits(text, a + 1, b), readDigits(text, b + 1, end), -1);
    else fn(text.slice(start, a), readDigits(text, a + 1, b), readDigits(text, b + 1, d), readDigits(text, d + 1, end));
    start = end + 1;
  }
}

/** One UTC day's token sums of a roll-up: an agent's sums (and its highest seq, -1 for none) are at its index in the arrays. */
interface DaySums {
  index: Map<string, number>;
  prompt: number[];
  completion: number[];
  seq: number[];
}

/** The `$inc` paths a day's tokens go to: allTime, the day's bucket and its month's. */
interface BucketKeys {
  prompt: [string, string, string];
  completion: [string, string, string];
}

function bucketKeys(day: string): BucketKeys {
  const month = day.slice(0, 7);
  const keys = (field: string): [string, string, string] => [`allTime.${field}`, `days.${day}.${field}`, `months.${month}.${field}`];
  return { prompt: keys('promptTokens'), completion: keys('completionTokens') };
}

/** Adds a day's tokens to an `$inc`; false when both are 0 (nothing to add). */
function addBuckets(inc: Record<string, number>, keys: BucketKeys, p: number, c: number): boolean {
  if (p !== 0) for (const k of keys.prompt) inc[k] = (inc[k] ?? 0) + p;
  if (c !== 0) for (const k of keys.completion) inc[k] = (inc[k] ?? 0) + c;
  return p !== 0 || c !== 0;
}

function countsOf(doc: TokenUsageDoc | null, day: string, month: string): TokenStats {
  const copy = (x: TokenCounts | undefined): TokenCounts => ({ promptTokens: x?.promptTokens ?? 0, completionTokens: x?.completionTokens ?? 0 });
  if (!doc) return { allTime: zero(), daily: zero(), monthly: zero() };
  return { allTime: copy(doc.allTime), daily: copy(doc.days?.[day]), monthly: copy(doc.months?.[month]) };
}
