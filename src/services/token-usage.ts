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
 *    A ledger document gets its id once. When its write fails, the write may still have landed
 *    (a lost reply, a partly applied insertMany): the same documents are written again later,
 *    after reading back which of their ids are stored, so what landed is completed and never
 *    stored twice. Until then the next batch waits (its seqs are checked against this one's), and
 *    roll-ups leave that write's documents alone (the read-back must still find them).
 *
 *    Exactly once across connections and crashes: each ledger entry carries its heartbeat's `seq`
 *    (stored in the same write as its delta), and every roll-up writes each agent's highest stored
 *    seq as `lastSeq` in the same update as the agent's increments. So at any instant the store
 *    holds the last stored seq of every agent: the highest of its `lastSeq` and of its entries not
 *    yet folded. Both are read at start (before anything is folded) into one object per agent,
 *    and each ledger write raises it. A heartbeat whose seq is not above it was stored before
 *    (its ack was lost with a connection or a crash): it is acknowledged, not counted again.
 *    `ready` tells the agent that seq (`lastHeartbeatSeq`), so it drops what was stored, sends the
 *    rest again under their own seqs, and numbers on above it. The same object is the `$set` of
 *    the agent's roll-up updates (seq, `rolledUpTo`, `updatedAt`), reused from one roll-up to the
 *    next: a fresh one per agent per roll-up was enough garbage to keep a held fleet's memory
 *    from shrinking after its connection storm (docs/performance.md).
 *
 * 2. Roll-up (every TOKEN_ROLLUP_INTERVAL_SECONDS and at shutdown). Ledger documents are folded
 *    into `token_usage`: one document per agent (`_id` = DID: allTime, daily buckets `days.YYYY-MM-DD`
 *    and monthly buckets `months.YYYY-MM`, UTC) and the global aggregate (`_id` `global`), each
 *    with `rolledUpTo`, the last ledger id folded in, set in the same single-document update as
 *    its increments. Then the folded ledger documents are deleted. After a failure or a restart the
 *    first roll-up reads each agent's `rolledUpTo`, so a ledger document is never folded twice.
 *    Counts are exact past 2^53: each is stored as `n + billions × 10^9` (src/domain/token-count.ts),
 *    the roll-up's sums carry whole billions apart, and the global document's `n` is kept below a
 *    billion (the roll-up reads that document anyway).
 *    Once a UTC day, buckets that left their windows are removed: an agent keeps TOKEN_AGENT_DAYS_KEPT
 *    daily and TOKEN_AGENT_MONTHS_KEPT monthly buckets (only the current ones are read per agent),
 *    the global aggregate TOKEN_HISTORY_DAYS_KEPT days and every month.
 *
 * 3. History, for the usage series (src/services/token-series.ts). A day bucket leaving an agent's
 *    document is first copied into `token_agent_months` (one document per agent and month, its days
 *    one text; a day's counts are set, not added, so copying again after an interruption changes
 *    nothing): only agents that used tokens get one, and nothing is written while the day is still
 *    in the agent's document, so a connected fleet's memory does not grow with it during the day. Each roll-up also folds
 *    the ledger into `token_workspace_days` (one document per workspace and day, the usage of its
 *    member agents at the time of the roll-up), with `rolledUpTo` in the same update as the
 *    increments, as the agents' documents are. Both keep TOKEN_HISTORY_DAYS_KEPT days.
 *
 * GET /api/stats/tokens reads the global aggregate plus the ledger documents not yet folded into
 * it (bounded by the roll-up interval), so it is exact and cheap whatever the fleet size.
 *
 * In a cluster every node writes the ledger for the heartbeats its sockets receive, and one node at
 * a time rolls it up: the holder of the `token-rollup` lease (a NamedLease; it stops counting
 * itself holder before its lease ends, so a holder that pauses does not fold beside the next).
 * What changes:
 * - an agent may move between nodes, so its last stored seq is read from the store at its
 *   handshake (`refreshStoredSeq`: its usage document's `lastSeq` and its unfolded ledger entries,
 *   found by the ledger documents' `dids`), and a roll-up raises `lastSeq` with `$max` of the seqs
 *   it folds (a node's own marks may be behind another's);
 * - ledger ids are times of the cluster's clock (the store's, src/cluster/store-clock.ts), so they
 *   sort together whatever the nodes' own clocks say: the holder folds only documents older than
 *   CLUSTER_LEASE_MS (a write lands well within that) and deletes exactly the documents it folded;
 * - the roll-up is fenced by its lease's epoch, in batches (nextBatch, docs/cluster.md "The token
 *   roll-up"): each batch's ledger ids are journalled in the lease's document under the epoch
 *   before anything of it is written, each update applies only to a document that has not taken
 *   the batch yet (`rollupBatch`), and a new holder finishes a pending batch first. So a holder
 *   that pauses past its lease and resumes writes nothing twice, and a document that landed late,
 *   below what was folded, is counted once (a batch names its documents: `rolledUpTo` is not
 *   used to recover);
 * - a node completing a failed ledger write (which may have landed and been folded by the holder
 *   meanwhile) writes again only the entries whose seq the store does not hold yet, under new ids.
 */
import { z } from 'zod';
import { randomBytes } from 'node:crypto';
import { TimeSlice } from '../domain/time-slice.js';
import { readDigits, writeDigits } from '../domain/decimal.js';
import { BILLION, ExactSum, billionsIn, exactCount, TokenCountView } from '../domain/token-count.js';
import type { ServiceCore } from './core.js';
import type { StoredTokenCounts, TokenLedgerDoc, TokenUsageDoc } from '../store/collections.js';
import { BulkUpdateError, DuplicateKeyError, type BulkUpdateOp, type Collection, type Doc, type Filter } from '../store/types.js';
import type { HeartbeatPeer, HeartbeatSink } from './ports.js';

/** Exact counts: a number while it is a safe integer, a bigint above (written into JSON with all its digits). */
const TokenCounts = z.strictObject({ promptTokens: TokenCountView, completionTokens: TokenCountView });
export type TokenCounts = z.infer<typeof TokenCounts>;

/** Token statistics (interface §2.17): all time, today's UTC bucket, this month's. */
export const TokenStats = z.strictObject({ allTime: TokenCounts, daily: TokenCounts, monthly: TokenCounts }).meta({ id: 'TokenStats' });
export type TokenStats = z.infer<typeof TokenStats>;

interface Entry {
  /** Its connection (which names the agent: `peer.did`). */
  peer: HeartbeatPeer;
  seq: number;
  p: number;
  c: number;
  /** performance.now() at arrival. */
  at: number;
}

/**
 * What is stored of one agent's heartbeats: the highest seq (in the ledger or folded), and, as
 * the `$set` of the agent's roll-up updates, the roll-up's `rolledUpTo` and `updatedAt` beside it.
 * One per agent for the life of the process (see the header). Any value `lastSeq` takes is a seq
 * that is stored, so writing it while a ledger write raises it is harmless.
 */
interface AgentMark {
  lastSeq: number;
  rolledUpTo: string;
  updatedAt: string;
}

/** A ledger write that failed: it may have landed, in whole or in part, and is completed later. */
interface UnsettledWrite {
  docs: TokenLedgerDoc[];
  /** The entries it stores (their seqs are noted once it is settled). */
  counted: Entry[];
  /** Every heartbeat it answers (acknowledged once it is settled). */
  entries: Entry[];
}

export const GLOBAL_ID = 'global';
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
/** Ledger ids given within one millisecond (the counter's room in the id). */
const ID_COUNTER_LIMIT = 0x1000000;

export const utcDay = (d: Date) => d.toISOString().slice(0, 10);
export const utcMonth = (d: Date) => d.toISOString().slice(0, 7);

/** An agent's workspaces (for folding its usage into theirs), as the fleet summary keeps them. */
export type WorkspacesOf = (did: string) => readonly string[];

/** The lease under which one node of a cluster rolls the ledger up (a NamedLease). */
export interface RollupLease {
  start(): Promise<void>;
  stop(): Promise<void>;
  held(): { epoch: number } | null;
  /** The roll-up's journal (a RollupJournal), kept in the lease's document. */
  readNote(): Promise<Record<string, unknown> | null>;
  /** Writes the journal under `epoch` alone: false once another holding has begun. */
  writeNote(epoch: number, note: Record<string, unknown>): Promise<boolean>;
}

/**
 * Cluster mode: the roll-up's journal. `last` is the number of the last batch begun; `pending`
 * the ledger ids of that batch while it is not finished (null once its documents are deleted).
 */
interface RollupJournal {
  last: number;
  pending: string[] | null;
}

/** The field of a folded document (agent, global, workspace day) naming the last batch applied to it. */
const BATCH_FIELD = 'rollupBatch';

export interface TokenClusterOptions {
  lease: RollupLease;
  /** Ledger documents younger than this are left to the next roll-up (CLUSTER_LEASE_MS). */
  settleMs: number;
  /**
   * The cluster's clock (the store's): ledger ids are times of it, so every node's ids sort
   * together and the settle time means the same on each, whatever the nodes' own clocks say.
   */
  idClock?: () => number;
}

/** Handshakes whose stored seq is read in one query. */
const SEQ_READ_BATCH = 500;

export class TokenUsage implements HeartbeatSink {
  /** The time that dates heartbeats (their UTC day) and the daily prune; tests replace it. */
  clock: () => number = Date.now;
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
  /** The ledger write that failed and is to be completed before the next one; null when none. */
  private unsettled: UnsettledWrite | null = null;
  /** The first ledger id of the write in flight or unsettled (roll-ups fold only ids below it); null when none. */
  private unsettledFrom: string | null = null;
  /** The time part (ms) and counter of the last ledger id given (see nextLedgerId). */
  private idTime = 0;
  private idCounter = -1;
  private readonly instance = randomBytes(3).toString('hex');
  private rollupTimer: NodeJS.Timeout | undefined;
  private rolling: Promise<void> | null = null;
  /** False until a roll-up has succeeded in this process, and after a failed one. */
  private clean = false;
  private prunedDay = '';
  /** The event loop's use at the last roll-up (see ROLLUP_PACED_ABOVE). */
  private loopUse = performance.eventLoopUtilization();
  /** Set by stop(): the roll-up is not paced, and failed writes are retried by drain() alone. */
  private stopping = false;
  /** Per agent whose heartbeats are stored: its highest stored seq (and its roll-up `$set`). */
  private readonly marks = new Map<string, AgentMark>();

  /** Cluster mode: DIDs whose stored seq is to be read, and who waits for it. */
  private seqReads: Map<string, Array<() => void>> | null = null;

  constructor(
    private readonly ctx: ServiceCore,
    /** Observes the time from a heartbeat's arrival to its ack (seconds): the heartbeat-ack metric. */
    private readonly observeAck: (seconds: number) => void = () => undefined,
    private readonly workspacesOf: WorkspacesOf = () => [],
    /** Cluster mode: the roll-up's lease, and how old a ledger document must be to be folded. */
    private readonly cluster?: TokenClusterOptions,
  ) {}

  /**
   * Cluster mode: reads the agent's last stored seq from the store (another node may have stored
   * its latest heartbeats), batched with the other handshakes of the moment; resolves once it is
   * noted. Null in one process, where this process stored every one of them.
   */
  refreshStoredSeq(did: string): Promise<void> | null {
    if (!this.cluster) return null;
    return new Promise<void>((resolve) => {
      if (!this.seqReads) {
        this.seqReads = new Map();
        setImmediate(() => {
          const reads = this.seqReads!;
          this.seqReads = null;
          this.readSeqs(reads).catch((err: unknown) => this.ctx.log.error({ err }, 'reading stored heartbeat seqs failed'));
        });
      }
      let waiting = this.seqReads.get(did);
      if (!waiting) this.seqReads.set(did, (waiting = []));
      waiting.push(resolve);
    });
  }

  private async readSeqs(reads: Map<string, Array<() => void>>): Promise<void> {
    const dids = [...reads.keys()];
    try {
      for (let i = 0; i < dids.length; i += SEQ_READ_BATCH) {
        const stored = await this.storedSeqs(dids.slice(i, i + SEQ_READ_BATCH));
        for (const [did, seq] of stored) this.noteStored(did, seq);
      }
    } catch (err) {
      // The handshake goes on with what this node knows: a heartbeat stored by another node may then be counted twice.
      this.ctx.log.warn({ err, agents: dids.length }, 'reading stored heartbeat seqs failed');
    } finally {
      for (const waiting of reads.values()) for (const resolve of waiting) resolve();
    }
  }

  /** The highest stored seq of each of `dids` (those with one): folded (`lastSeq`) or in the ledger. */
  private async storedSeqs(dids: string[]): Promise<Map<string, number>> {
    const { c } = this.ctx;
    const wanted = new Set(dids);
    const out = new Map<string, number>();
    const raise = (did: string, seq: number) => {
      if (seq >= 0 && seq > (out.get(did) ?? -1)) out.set(did, seq);
    };
    for (const doc of await c.tokenUsage.find({ _id: { $in: dids } }, { projection: { lastSeq: 1 } })) {
      if (typeof doc.lastSeq === 'number') raise(doc._id, doc.lastSeq);
    }
    for (const doc of await c.tokenLedger.find({ dids: { $in: dids } }, { projection: { entries: 1 } })) {
      forEachEntry(doc.entries, (did, _p, _c, seq) => {
        if (wanted.has(did)) raise(did, seq);
      });
    }
    return out;
  }

  /** The highest heartbeat seq of the agent whose delta is stored, or null when none is. */
  lastStoredSeq(did: string): number | null {
    return this.marks.get(did)?.lastSeq ?? null;
  }

  /**
   * Reads each agent's last stored seq (before anything is folded: folding deletes ledger
   * entries), and folds what a previous run left in the ledger.
   */
  async start(): Promise<void> {
    await this.loadStored();
    // (Whoever held the roll-up before may have stopped half-way: a new holder finishes its pending batch first.)
    if (this.cluster) await this.cluster.lease.start();
    // An empty ledger leaves nothing half-folded to recover from; otherwise fold it carefully now.
    if (this.cluster) {
      if (this.cluster.lease.held()) await this.rollup();
    } else if ((await this.ctx.c.tokenLedger.count({})) === 0) this.clean = true;
    else await this.rollup();
    this.rollupTimer = setInterval(() => this.rollup().catch((err: unknown) => this.ctx.log.error({ err }, 'token roll-up failed')), this.ctx.config.tokenRollupIntervalMs);
    this.rollupTimer.unref();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.rollupTimer) clearInterval(this.rollupTimer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    if (this.gapTimer) clearTimeout(this.gapTimer);
    this.gapTimer = undefined;
    this.scheduled = false;
    await this.drain();
    await this.rollup();
    await this.cluster?.lease.stop();
  }

  /**
   * For a deleted agent: folds what the ledger holds (so the global totals keep its usage), then
   * deletes the agent's own usage document.
   */
  async forgetAgent(did: string): Promise<void> {
    await this.drain();
    await this.rollup();
    await this.ctx.c.tokenUsage.deleteOne({ _id: did });
    await this.ctx.c.tokenAgentMonths.deleteMany({ agentDid: did });
    this.marks.delete(did);
  }

  /** For a deleted workspace: its usage history goes (its agents' own stays). */
  async forgetWorkspace(workspaceId: string): Promise<void> {
    await this.ctx.c.tokenWorkspaceDays.deleteMany({ workspaceId });
  }

  /**
   * At start: each agent's highest stored seq, from its usage document and from what the ledger
   * still holds; and the time after every ledger id stored, where this process's ids begin (so
   * they sort after everything folded even if the clock was set back).
   */
  private async loadStored(): Promise<void> {
    const { c } = this.ctx;
    for (const doc of await c.tokenUsage.find({ lastSeq: { $exists: true } }, { projection: { _id: 1, lastSeq: 1 } })) {
      if (typeof doc.lastSeq === 'number') this.noteStored(doc._id, doc.lastSeq);
    }
    let latest = (await c.tokenUsage.findById(GLOBAL_ID))?.rolledUpTo ?? '';
    for (const doc of await c.tokenLedger.find({}, { projection: { entries: 1 } })) {
      if (doc._id > latest) latest = doc._id;
      forEachEntry(doc.entries, (did, _p, _c, seq) => {
        if (seq >= 0) this.noteStored(did, seq);
      });
    }
    const time = parseInt(latest.slice(0, 10), 36);
    if (Number.isFinite(time)) this.idTime = time + 1;
  }

  private noteStored(did: string, seq: number): void {
    const mark = this.marks.get(did);
    if (mark === undefined) this.marks.set(did, { lastSeq: seq, rolledUpTo: '', updatedAt: '' });
    else if (seq > mark.lastSeq) mark.lastSeq = seq;
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
    if (this.flushing || this.retryTimer || this.stopping) return; // (at shutdown drain() writes what is left)
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
      this.flush().catch((err: unknown) => this.ctx.log.error({ err }, 'token-ledger flush failed')); // (write() handles store failures itself)
    };
    const gap = this.ctx.config.tokenLedgerWriteGapMs;
    const wait = this.lastFlushAt + (early ? Math.min(gap, FULL_BATCH_GAP_MS) : gap) - performance.now();
    if (wait <= 0) setImmediate(run);
    else this.gapTimer = setTimeout(run, wait);
  }

  /** Writes everything recorded so far (giving up after a few failed writes: unacknowledged deltas are sent again by their agents). */
  async drain(attempts = 3): Promise<void> {
    while ((this.batch.length > 0 || this.unsettled || this.flushing) && attempts > 0) {
      if (this.flushing) await this.flushing;
      else {
        const before = this.stats.ledgerWrites;
        await this.flush();
        if (this.stats.ledgerWrites === before && (this.batch.length > 0 || this.unsettled)) attempts--;
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
    // A write that failed is completed first, so the seqs it stores are noted before this batch is checked.
    if (this.unsettled && !(await this.settle(this.unsettled))) return;
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
      const stored = this.marks.get(e.peer.did!);
      if (stored === undefined || e.seq > stored.lastSeq) counted.push(e);
    }
    if (counted.length > 0) {
      const write: UnsettledWrite = { docs: this.ledgerDocs(counted), counted, entries };
      this.unsettledFrom = write.docs[0]!._id;
      try {
        await this.ctx.c.tokenLedger.insertMany(write.docs);
      } catch (err) {
        this.ctx.log.error({ err, heartbeats: entries.length }, 'writing the token ledger failed; will complete it');
        this.unsettled = write;
        this.retryLater();
        return;
      }
      this.settled(write);
    }
    this.acknowledge(entries, 0);
  }

  /** The ledger documents of a batch, each with its id (given here, once). */
  private ledgerDocs(counted: Entry[]): TokenLedgerDoc[] {
    const now = new Date(this.clock());
    const docs: TokenLedgerDoc[] = [];
    for (let i = 0; i < counted.length; i += LEDGER_DOC_MAX) {
      const doc: TokenLedgerDoc = {
        _id: this.nextLedgerId(),
        at: now.toISOString(),
        day: utcDay(now),
        month: utcMonth(now),
        promptTokens: 0,
        completionTokens: 0,
        entries: '',
      };
      const text = new LineText();
      const dids = this.cluster ? new Set<string>() : null;
      for (let j = i; j < Math.min(counted.length, i + LEDGER_DOC_MAX); j++) {
        const e = counted[j]!;
        text.entry(e.peer.did!, e.p, e.c, e.seq);
        dids?.add(e.peer.did!);
        doc.promptTokens += e.p; // at most 2,000 deltas of at most 10^12: exact
        doc.completionTokens += e.c;
      }
      doc.entries = text.done();
      if (dids) doc.dids = [...dids];
      docs.push(doc);
    }
    return docs;
  }

  /**
   * Completes a write that failed: reads back which of its documents are stored and writes the
   * others (the same documents, same ids). True once all are stored; the write's heartbeats are
   * then acknowledged. A document that lands meanwhile (a write the store was still applying)
   * makes the insert fail on its id, and the next attempt reads it back.
   */
  private async settle(write: UnsettledWrite): Promise<boolean> {
    const ledger = this.ctx.c.tokenLedger;
    try {
      const ids = write.docs.map((d) => d._id);
      const landed = new Set((await ledger.find({ _id: { $in: ids } }, { projection: { _id: 1 } })).map((d) => d._id));
      let missing = write.docs.filter((d) => !landed.has(d._id));
      if (this.cluster && missing.length > 0) {
        // What landed may have been folded (and deleted) by the roll-up's holder since, and the
        // agent may have sent it again to another node: only seqs the store does not hold go in,
        // under new ids (the old ones may sort below what the holder folded).
        missing = await this.stillMissing(missing);
        write.docs = [...write.docs.filter((d) => landed.has(d._id)), ...missing];
        if (missing.length > 0 && (this.unsettledFrom === null || missing[0]!._id < this.unsettledFrom)) this.unsettledFrom = missing[0]!._id;
      }
      if (missing.length > 0) await ledger.insertMany(missing);
      this.ctx.log.info({ documents: write.docs.length, landed: landed.size }, 'a failed token-ledger write is complete');
    } catch (err) {
      this.ctx.log.error({ err, heartbeats: write.entries.length }, 'completing a failed token-ledger write failed; will retry');
      this.retryLater();
      return false;
    }
    this.unsettled = null;
    this.settled(write);
    this.acknowledge(write.entries, 0);
    return true;
  }

  /** Cluster mode: the entries of `docs` whose seq the store does not hold yet, in new ledger documents. */
  private async stillMissing(docs: TokenLedgerDoc[]): Promise<TokenLedgerDoc[]> {
    const entries: Array<{ did: string; p: number; c: number; seq: number }> = [];
    for (const doc of docs) forEachEntry(doc.entries, (did, p, c, seq) => entries.push({ did, p, c, seq }));
    const stored = await this.storedSeqs([...new Set(entries.map((e) => e.did))]);
    const left = entries.filter((e) => e.seq < 0 || e.seq > (stored.get(e.did) ?? -1));
    if (left.length === 0) return [];
    const peers = left.map((e) => ({ peer: { did: e.did, alive: true, ackHeartbeat: () => undefined }, seq: e.seq, p: e.p, c: e.c, at: 0 }));
    return this.ledgerDocs(peers);
  }

  /** A write is stored in full: its seqs are noted, and roll-ups may fold its documents. */
  private settled(write: UnsettledWrite): void {
    const { counted } = write;
    for (let i = 0; i < counted.length; i++) this.noteStored(counted[i]!.peer.did!, counted[i]!.seq);
    this.stats.ledgerWrites++;
    this.retryMs = RETRY_MIN_MS;
    this.unsettledFrom = null;
  }

  /** The next write (which completes the failed one first) after a back-off; drain() retries by itself at shutdown. */
  private retryLater(): void {
    if (this.stopping) return;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.schedule();
    }, this.retryMs);
    this.retryTimer.unref();
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
  }

  /** Sends the acks a chunk per turn of the event loop, so a large batch does not stall the sockets. */
  private acknowledge(entries: Entry[], from: number): void {
    const end = Math.min(entries.length, from + ACK_CHUNK);
    const now = performance.now(); // one clock read per chunk
    for (let i = from; i < end; i++) {
      const e = entries[i]!;
      e.peer.ackHeartbeat(e.seq); // not sent when the socket closed meanwhile
      this.observeAck((now - e.at) / 1000);
    }
    if (end < entries.length) setImmediate(() => this.acknowledge(entries, end));
  }

  /**
   * Time-ordered, unique across restarts, and increasing within the process even when the clock
   * is set back: roll-ups fold ids in order and rely on it (`rolledUpTo`, `unsettledFrom`).
   */
  private nextLedgerId(): string {
    const now = this.cluster?.idClock?.() ?? Date.now();
    if (now > this.idTime) {
      this.idTime = now;
      this.idCounter = 0;
    } else if (++this.idCounter === ID_COUNTER_LIMIT) {
      this.idTime++;
      this.idCounter = 0;
    }
    return ledgerIdPrefix(this.idTime, this.idCounter) + this.instance;
  }

  // -------------------------------------------------------------------------------------------
  // 2. Roll-up

  /** Folds the ledger (in a cluster, only on the holder of the roll-up's lease). */
  rollup(): Promise<void> {
    if (this.cluster && !this.cluster.lease.held()) return this.rolling ?? Promise.resolve();
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
    const cluster = this.cluster;
    // Cluster mode: documents younger than the settle time may still be overtaken by older ones from other nodes.
    const filter = cluster ? { _id: { $lt: ledgerIdPrefix((cluster.idClock?.() ?? Date.now()) - cluster.settleMs, 0) } } : {};
    for (;;) {
      let batch: number | null = null;
      let ledger: TokenLedgerDoc[];
      if (cluster) {
        const taken = await this.nextBatch(cluster, filter);
        if (taken === 'lost') return;
        if (taken === null) break;
        ({ batch, ledger } = taken);
        if (ledger.length === 0) {
          // A pending batch whose documents are all deleted: it was finished, all but its journal.
          if (!(await this.finishBatch(cluster, batch))) return;
          continue;
        }
      } else {
        ledger = await this.settledLedger(filter);
        if (ledger.length === 0) break;
      }
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
      // (In a cluster each document folded takes a batch once, whatever happened before: see nextBatch.)
      const done = this.clean || batch !== null ? null : await this.agentProgress(ledger, slice);
      // (Loops that await go by index: iterating across an await allocates a result per step.)
      const sums = new Map<string, DaySums>();
      /** Cluster mode: the highest seq folded per agent (its `lastSeq` is raised to it). */
      const seqs = cluster ? new Map<string, number>() : null;
      for (let i = 0; i < ledger.length; i++) {
        await slice.yieldIfDue();
        const doc = ledger[i]!;
        let day = sums.get(doc.day);
        if (!day) sums.set(doc.day, (day = { index: new Map(), prompt: [], completion: [], billions: null }));
        const sum = day;
        const { index, prompt, completion } = day;
        forEachEntry(doc.entries, (did, p, cc, seq) => {
          if (seqs && seq > (seqs.get(did) ?? -1)) seqs.set(did, seq);
          const from = done?.get(did);
          if (from !== undefined && doc._id <= from) return;
          let at = index.get(did);
          if (at === undefined) {
            at = prompt.length;
            index.set(did, at);
            prompt.push(p);
            completion.push(cc);
          } else {
            prompt[at] += p;
            completion[at] += cc;
          }
          if (prompt[at]! >= BILLION || completion[at]! >= BILLION) carryBillions(sum, at);
        });
      }
      const now = new Date().toISOString();
      const days = [...sums].map(([day, sum]) => ({ day, sum, keys: bucketKeys(day) }));
      // Usually one day; around midnight an agent may have sums in two.
      const dids = days.length === 1 ? [...days[0]!.sum.index.keys()] : [...new Set(days.flatMap((d) => [...d.sum.index.keys()]))];
      let ops: BulkUpdateOp[] = [];
      const $set = { rolledUpTo: last, updatedAt: now }; // for agents with no seq stored (ledger entries of earlier versions)
      const batchSet = { ...$set, [BATCH_FIELD]: batch }; // (cluster mode)
      for (let i = 0; i < dids.length; i++) {
        const did = dids[i]!;
        const inc: Record<string, number> = {};
        let counted = false;
        for (const { sum, keys } of days) {
          const at = sum.index.get(did);
          if (at === undefined) continue;
          if (addBuckets(inc, keys, sum.prompt[at]!, sum.completion[at]!, sum.billions?.get(at))) counted = true;
        }
        if (!counted) continue;
        // The agent's last stored seq goes in the same update as its increments (its mark: see AgentMark).
        if (seqs) {
          // Cluster mode: another node may have stored later seqs than this node's mark knows.
          const seq = seqs.get(did);
          ops.push({ filter: batchFilter(did, batch!), update: { $inc: inc, $set: batchSet, ...(seq !== undefined && seq >= 0 ? { $max: { lastSeq: seq } } : {}) }, upsert: true });
        } else {
          const mark = this.marks.get(did);
          if (mark) {
            mark.rolledUpTo = last;
            mark.updatedAt = now;
          }
          ops.push({ filter: { _id: did }, update: { $inc: inc, $set: mark ?? $set }, upsert: true });
        }
        if (ops.length >= UPDATE_CHUNK) {
          await (batch === null ? c.tokenUsage.bulkUpdate(ops) : applyOnce(c.tokenUsage, ops));
          ops = [];
          await slice.yieldIfDue();
        }
      }
      if (ops.length > 0) await (batch === null ? c.tokenUsage.bulkUpdate(ops) : applyOnce(c.tokenUsage, ops));
      await this.foldWorkspaces(ledger, sums, done, last, batch);

      // The global buckets: each day of the documents not folded into them yet, its month, and allTime.
      const byDay = new Map<string, CountSums>();
      for (let i = 0; i < ledger.length; i++) {
        const doc = ledger[i]!;
        // Folded before a failure (recovering); in a cluster the batch applies to the global document once, whole.
        if (batch === null && doc._id <= globalDone) continue;
        let sums = byDay.get(doc.day);
        if (!sums) byDay.set(doc.day, (sums = countSums()));
        sums.prompt.add(doc.promptTokens);
        sums.completion.add(doc.completionTokens);
      }
      const gInc: Record<string, number> = {};
      if (byDay.size > 0) {
        const allTime = countSums();
        const months = new Map<string, CountSums>();
        for (const [day, sums] of byDay) {
          incGlobalBucket(gInc, `days.${day}`, sums, global?.days?.[day]);
          const month = day.slice(0, 7);
          let inMonth = months.get(month);
          if (!inMonth) months.set(month, (inMonth = countSums()));
          addSums(inMonth, sums);
          addSums(allTime, sums);
        }
        for (const [month, sums] of months) incGlobalBucket(gInc, `months.${month}`, sums, global?.months?.[month]);
        incGlobalBucket(gInc, 'allTime', allTime, global?.allTime);
      }
      const globalUpdate = { ...(Object.keys(gInc).length > 0 ? { $inc: gInc } : {}), $set: { rolledUpTo: last, updatedAt: now } };
      if (batch === null) await c.tokenUsage.updateOne({ _id: GLOBAL_ID }, globalUpdate, { upsert: true });
      else await applyOnce(c.tokenUsage, [{ filter: batchFilter(GLOBAL_ID, batch), update: { ...globalUpdate, $set: { ...globalUpdate.$set, [BATCH_FIELD]: batch } }, upsert: true }]);
      // In a cluster, exactly what was folded: another node's document may have landed below `last` meanwhile.
      await (cluster ? c.tokenLedger.deleteMany({ _id: { $in: ledger.map((d) => d._id) } }) : c.tokenLedger.deleteMany({ _id: { $lte: last } }));
      if (seqs) for (const [did, seq] of seqs) this.noteStored(did, seq);
      if (cluster && !(await this.finishBatch(cluster, batch!))) return;
      this.clean = true;
      this.stats.rollups++;
      if (ledger.length < ROLLUP_BATCH) break;
    }
    await this.pruneBuckets();
  }

  /**
   * The ledger documents of settled writes. A failed write's documents are read back when it is
   * completed, so they stay in the ledger until then (as does everything written after). A write
   * sets unsettledFrom before it starts and clears it once stored, so whatever this read found of
   * a write in flight, or failed, is at or above it now.
   */
  private async settledLedger(filter: Filter): Promise<TokenLedgerDoc[]> {
    const ledger = await this.ctx.c.tokenLedger.find(filter, { sort: { _id: 1 }, limit: ROLLUP_BATCH });
    const cut = this.unsettledFrom;
    return cut !== null && ledger.length > 0 && ledger[ledger.length - 1]!._id >= cut ? ledger.filter((doc) => doc._id < cut) : ledger;
  }

  /**
   * Cluster mode: the batch to fold next, fenced by the lease's epoch. A batch left pending (by
   * this node or a holder before it, which may still be writing it after its lease lapsed) is
   * finished first, from those of its documents still in the ledger; otherwise a new batch is
   * recorded in the journal, a compare-and-swap on the epoch, before anything of it is written.
   * Each update of a batch applies only to a document whose last batch is older and records this
   * one, so a batch's increments land once in each document, whoever writes them first, and a
   * holder's writes after another holder finished its batch change nothing. 'lost' when the lease
   * is not (or no longer) held; null when there is nothing to fold.
   */
  private async nextBatch(cluster: TokenClusterOptions, filter: Filter): Promise<{ batch: number; ledger: TokenLedgerDoc[] } | 'lost' | null> {
    const held = cluster.lease.held();
    if (!held) return 'lost';
    const journal = readJournal(await cluster.lease.readNote());
    if (journal.pending) {
      const ledger = await this.ctx.c.tokenLedger.find({ _id: { $in: journal.pending } }, { sort: { _id: 1 } });
      return { batch: journal.last, ledger };
    }
    const ledger = await this.settledLedger(filter);
    if (ledger.length === 0) return null;
    // Every batch reaches the global document: its number is a floor should the journal be lost
    // (the lease's document removed), so a new batch never reuses a number documents have taken.
    const global = await this.ctx.c.tokenUsage.findById(GLOBAL_ID);
    const batch = Math.max(journal.last, global?.rollupBatch ?? 0) + 1;
    const pending = ledger.map((d) => d._id);
    if (!(await cluster.lease.writeNote(held.epoch, { last: batch, pending } satisfies RollupJournal))) return 'lost';
    return { batch, ledger };
  }

  /** Cluster mode: marks the batch finished in the journal; false when the lease was lost (the next holder finishes it). */
  private async finishBatch(cluster: TokenClusterOptions, batch: number): Promise<boolean> {
    const held = cluster.lease.held();
    return held !== null && (await cluster.lease.writeNote(held.epoch, { last: batch, pending: null } satisfies RollupJournal));
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
   * Folds a roll-up's ledger documents into the workspaces' day documents: each agent's usage goes
   * to every workspace it belongs to now. A workspace day whose `rolledUpTo` is below the first
   * document (the usual case, after a clean roll-up) takes the roll-up's per-agent sums; otherwise
   * (after an interruption) the entries are summed again, skipping documents already folded into it.
   */
  private async foldWorkspaces(ledger: TokenLedgerDoc[], sums: Map<string, DaySums>, done: Map<string, string> | null, last: string, batch: number | null): Promise<void> {
    const { c } = this.ctx;
    const days = [...new Set(ledger.map((doc) => doc.day))];
    const progress = new Map<string, string>();
    for (const doc of await c.tokenWorkspaceDays.find({ day: { $in: days } }, { projection: { rolledUpTo: 1 } })) progress.set(doc._id, doc.rolledUpTo);
    const first = ledger[0]!._id;
    const totals = new Map<string, { workspaceId: string; day: string; counts: CountSums }>();
    const add = (workspaceId: string, day: string, p: number, pb: number, cc: number, cb: number) => {
      const id = `${workspaceId}|${day}`;
      let t = totals.get(id);
      if (!t) totals.set(id, (t = { workspaceId, day, counts: countSums() }));
      t.counts.prompt.addStored(p, pb);
      t.counts.completion.addStored(cc, cb);
    };
    let behind = false;
    // (A cluster's batch applies to each workspace day once, whole: no document of it is in one already.)
    if (batch === null) for (const to of progress.values()) if (to >= first) behind = true;
    if (done === null && !behind) {
      for (const [day, sum] of sums) {
        for (const [did, at] of sum.index) {
          const workspaces = this.workspacesOf(did);
          if (workspaces.length === 0) continue;
          const b = sum.billions?.get(at);
          for (const w of workspaces) add(w, day, sum.prompt[at]!, b?.[0] ?? 0, sum.completion[at]!, b?.[1] ?? 0);
        }
      }
    } else {
      for (const doc of ledger) {
        forEachEntry(doc.entries, (did, p, cc) => {
          for (const w of this.workspacesOf(did)) if (doc._id > (progress.get(`${w}|${doc.day}`) ?? '')) add(w, doc.day, p, 0, cc, 0);
        });
      }
    }
    const ops: BulkUpdateOp[] = [];
    for (const [id, { workspaceId, day, counts }] of totals) {
      const inc: Record<string, number> = {};
      addCount(inc, 'promptTokens', 'promptTokensBillions', counts.prompt.n, counts.prompt.billions);
      addCount(inc, 'completionTokens', 'completionTokensBillions', counts.completion.n, counts.completion.billions);
      if (batch === null) ops.push({ filter: { _id: id }, update: { $inc: inc, $set: { workspaceId, day, rolledUpTo: last } }, upsert: true });
      else ops.push({ filter: batchFilter(id, batch), update: { $inc: inc, $set: { workspaceId, day, rolledUpTo: last, [BATCH_FIELD]: batch } }, upsert: true });
    }
    for (let i = 0; i < ops.length; i += UPDATE_CHUNK) {
      const chunk = ops.slice(i, i + UPDATE_CHUNK);
      await (batch === null ? c.tokenWorkspaceDays.bulkUpdate(chunk) : applyOnce(c.tokenWorkspaceDays, chunk));
    }
  }

  /**
   * Copies the day buckets leaving agents' usage documents into their month documents of history:
   * each day's counts are set (a prune interrupted and run again copies the same figures), the
   * month's other days kept.
   */
  private async keepHistory(chunk: Array<Pick<TokenUsageDoc, '_id' | 'days'>>, leaving: Set<string>, historyFrom: string): Promise<void> {
    const { c } = this.ctx;
    const months = new Map<string, { agentDid: string; month: string; days: Map<string, string> }>();
    for (const doc of chunk) {
      for (const [day, counts] of Object.entries(doc.days ?? {})) {
        if (day < historyFrom || !leaving.has(`days.${day}`)) continue;
        const month = day.slice(0, 7);
        const id = `${doc._id}|${month}`;
        let m = months.get(id);
        if (!m) months.set(id, (m = { agentDid: doc._id, month, days: new Map() }));
        m.days.set(day.slice(8), `${exactCount(counts.promptTokens, counts.promptTokensBillions)} ${exactCount(counts.completionTokens, counts.completionTokensBillions)}`);
      }
    }
    if (months.size === 0) return;
    for (const held of await c.tokenAgentMonths.find({ _id: { $in: [...months.keys()] } })) {
      const m = months.get(held._id)!;
      for (const [dd, prompt, completion] of historyDays(held.days)) if (!m.days.has(dd)) m.days.set(dd, `${prompt} ${completion}`);
    }
    const ops: BulkUpdateOp[] = [];
    for (const [id, m] of months) {
      const days = [...m.days].sort(([a], [b]) => (a < b ? -1 : 1)).map(([dd, counts]) => `${dd} ${counts}`).join(';');
      ops.push({ filter: { _id: id }, update: { $set: { agentDid: m.agentDid, month: m.month, days } }, upsert: true });
    }
    await c.tokenAgentMonths.bulkUpdate(ops);
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
    const now = new Date(this.clock());
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
        { projection: { _id: 1, days: 1 } },
      );
      const historyFrom = utcDay(new Date(now.getTime() - (config.tokenHistoryDaysKept - 1) * 86_400_000));
      const leaving = new Set(agentFields);
      const $unset = Object.fromEntries(agentFields.map((field) => [field, ''] as const));
      const slice = new TimeSlice();
      for (let i = 0; i < holders.length; i += UPDATE_CHUNK) {
        const chunk = holders.slice(i, i + UPDATE_CHUNK);
        await this.keepHistory(chunk, leaving, historyFrom);
        await c.tokenUsage.bulkUpdate(chunk.map((doc) => ({ filter: { _id: doc._id }, update: { $unset } })));
        await slice.yieldIfDue();
      }
    }
    const historyCutoff = utcDay(new Date(now.getTime() - config.tokenHistoryDaysKept * 86_400_000));
    await c.tokenAgentMonths.deleteMany({ month: { $lt: historyCutoff.slice(0, 7) } });
    await c.tokenWorkspaceDays.deleteMany({ day: { $lte: historyCutoff } });
    const globalStale = staleDays(config.tokenHistoryDaysKept);
    if (globalStale.length > 0) await c.tokenUsage.updateOne({ _id: GLOBAL_ID }, { $unset: Object.fromEntries(globalStale.map((day) => [`days.${day}`, ''])) });
    this.prunedDay = today;
  }

  // -------------------------------------------------------------------------------------------
  // Reading

  /** Fleet-wide totals: the global aggregate plus the ledger not folded into it yet. */
  async totals(now = new Date(this.clock())): Promise<TokenStats> {
    const day = utcDay(now);
    const month = utcMonth(now);
    const global = await this.ctx.c.tokenUsage.findById(GLOBAL_ID);
    const allTime = storedSums(global?.allTime);
    const daily = storedSums(global?.days?.[day]);
    const monthly = storedSums(global?.months?.[month]);
    const tail = await this.ctx.c.tokenLedger.find(
      { _id: { $gt: global?.rolledUpTo ?? '' } },
      { projection: { day: 1, month: 1, promptTokens: 1, completionTokens: 1 } },
    );
    for (const doc of tail) {
      addDoc(allTime, doc);
      if (doc.day === day) addDoc(daily, doc);
      if (doc.month === month) addDoc(monthly, doc);
    }
    return { allTime: countsOfSums(allTime), daily: countsOfSums(daily), monthly: countsOfSums(monthly) };
  }

  /** One agent's rolled-up totals (up to TOKEN_ROLLUP_INTERVAL_SECONDS behind). */
  async ofAgent(did: string, now = new Date(this.clock())): Promise<TokenStats> {
    const doc = await this.ctx.c.tokenUsage.findById(did);
    return {
      allTime: countsOf(doc?.allTime),
      daily: countsOf(doc?.days?.[utcDay(now)]),
      monthly: countsOf(doc?.months?.[utcMonth(now)]),
    };
  }
}

/** The days of an agent's month of history (`TokenAgentMonthDoc.days`): [DD, prompt digits, completion digits]. */
export function historyDays(text: string): Array<[string, string, string]> {
  if (text === '') return [];
  return text.split(';').map((entry) => entry.split(' ') as [string, string, string]);
}

/** A ledger document's id up to its instance part: `<ms, base 36, 10 digits>-<counter, base 36, 5 digits>-`. */
function ledgerIdPrefix(time: number, counter: number): string {
  return `${time.toString(36).padStart(10, '0')}-${counter.toString(36).padStart(5, '0')}-`;
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

/**
 * One UTC day's token sums of a roll-up: an agent's sums are at its index in the arrays, below a
 * billion; whole billions are carried into `billions` (made only when a sum reaches one).
 */
interface DaySums {
  index: Map<string, number>;
  prompt: number[];
  completion: number[];
  /** Per index: [prompt, completion] billions. */
  billions: Map<number, [number, number]> | null;
}

function carryBillions(day: DaySums, at: number): void {
  const p = billionsIn(day.prompt[at]!);
  const c = billionsIn(day.completion[at]!);
  day.prompt[at] -= p * BILLION;
  day.completion[at] -= c * BILLION;
  const had = (day.billions ??= new Map()).get(at);
  if (had) {
    had[0] += p;
    had[1] += c;
  } else day.billions.set(at, [p, c]);
}

/** The `$inc` paths a day's tokens go to: allTime, the day's bucket and its month's; each count's and its billions'. */
interface BucketKeys {
  prompt: [string, string, string];
  completion: [string, string, string];
  promptBillions: [string, string, string];
  completionBillions: [string, string, string];
}

function bucketKeys(day: string): BucketKeys {
  const month = day.slice(0, 7);
  const keys = (field: string): [string, string, string] => [`allTime.${field}`, `days.${day}.${field}`, `months.${month}.${field}`];
  return {
    prompt: keys('promptTokens'),
    completion: keys('completionTokens'),
    promptBillions: keys('promptTokensBillions'),
    completionBillions: keys('completionTokensBillions'),
  };
}

/**
 * Adds an agent's day sums (each below a billion, with its whole billions apart) to its `$inc`;
 * false when there is nothing to add. A billions path is named only when it gets something, so an
 * agent's document has those fields only once it has used a billion tokens in one roll-up.
 */
function addBuckets(inc: Record<string, number>, keys: BucketKeys, p: number, c: number, billions: [number, number] | undefined): boolean {
  const pb = billions?.[0] ?? 0;
  const cb = billions?.[1] ?? 0;
  for (let i = 0; i < 3; i++) {
    if (p !== 0 || pb !== 0) addCount(inc, keys.prompt[i]!, keys.promptBillions[i]!, p, pb);
    if (c !== 0 || cb !== 0) addCount(inc, keys.completion[i]!, keys.completionBillions[i]!, c, cb);
  }
  return p !== 0 || c !== 0 || pb !== 0 || cb !== 0;
}

/**
 * Adds `n + billions × 10^9` (n below a billion) to a count's two `$inc` paths. Two days of one
 * roll-up may go to the same path (allTime, a month): their `n`s are carried again, so what one
 * update adds to a stored `n` stays below a billion (the bound in docs/fleet.md).
 */
function addCount(inc: Record<string, number>, key: string, billionsKey: string, n: number, billions: number): void {
  let sum = (inc[key] ?? 0) + n;
  let b = (inc[billionsKey] ?? 0) + billions;
  if (sum >= BILLION) {
    sum -= BILLION;
    b++;
  }
  if (sum !== 0 || key in inc) inc[key] = sum;
  if (b !== 0) inc[billionsKey] = b;
}

/** Exact prompt and completion sums. */
interface CountSums {
  prompt: ExactSum;
  completion: ExactSum;
}

const countSums = (): CountSums => ({ prompt: new ExactSum(), completion: new ExactSum() });

function addSums(to: CountSums, from: CountSums): void {
  to.prompt.addStored(from.prompt.n, from.prompt.billions);
  to.completion.addStored(from.completion.n, from.completion.billions);
}

function storedSums(stored: StoredTokenCounts | undefined): CountSums {
  const sums = countSums();
  sums.prompt.addStored(stored?.promptTokens, stored?.promptTokensBillions);
  sums.completion.addStored(stored?.completionTokens, stored?.completionTokensBillions);
  return sums;
}

function addDoc(to: CountSums, doc: Pick<TokenLedgerDoc, 'promptTokens' | 'completionTokens'>): void {
  to.prompt.add(doc.promptTokens);
  to.completion.add(doc.completionTokens);
}

const countsOfSums = (sums: CountSums): TokenCounts => ({ promptTokens: sums.prompt.value, completionTokens: sums.completion.value });

function countsOf(stored: StoredTokenCounts | undefined): TokenCounts {
  return {
    promptTokens: exactCount(stored?.promptTokens, stored?.promptTokensBillions),
    completionTokens: exactCount(stored?.completionTokens, stored?.completionTokensBillions),
  };
}

/**
 * The global document's `$inc` for one bucket (`path`): adds `sums`, and carries whole billions
 * of the stored `n` (as read at the start of the roll-up) into its billions, so the global `n`
 * stays below a billion however many roll-ups there are. Whatever the stored value really is, the
 * update adds exactly `sums` to the count (it moves k billions from `n` to `billions`).
 */
function incGlobalBucket(inc: Record<string, number>, path: string, sums: CountSums, stored: StoredTokenCounts | undefined): void {
  incKeepingBelowBillion(inc, `${path}.promptTokens`, sums.prompt, stored?.promptTokens ?? 0);
  incKeepingBelowBillion(inc, `${path}.completionTokens`, sums.completion, stored?.completionTokens ?? 0);
}

function incKeepingBelowBillion(inc: Record<string, number>, key: string, sum: ExactSum, storedN: number): void {
  const carry = billionsIn(storedN + sum.n);
  const n = sum.n - carry * BILLION;
  const billions = sum.billions + carry;
  if (n !== 0) inc[key] = n;
  if (billions !== 0) inc[`${key}Billions`] = billions;
}

/** The journal as stored (none yet: no batch begun). */
function readJournal(note: Record<string, unknown> | null): RollupJournal {
  const last = typeof note?.last === 'number' ? note.last : 0;
  const pending = Array.isArray(note?.pending) ? note.pending.filter((id): id is string => typeof id === 'string') : null;
  return { last, pending };
}

/** A folded document (`id`) that has not taken `batch` yet. */
const batchFilter = (id: string, batch: number): Filter => ({ _id: id, $or: [{ [BATCH_FIELD]: { $exists: false } }, { [BATCH_FIELD]: { $lt: batch } }] });

/**
 * Applies a batch's upserts: an op whose document took the batch already matches nothing, tries
 * to insert its `_id` again and fails alone with DuplicateKeyError, which means "done before".
 */
async function applyOnce(col: Collection<Doc>, ops: BulkUpdateOp[]): Promise<void> {
  try {
    await col.bulkUpdate(ops);
  } catch (err) {
    if (!(err instanceof BulkUpdateError) || err.failures.some((f) => !(f.error instanceof DuplicateKeyError))) throw err;
  }
}
