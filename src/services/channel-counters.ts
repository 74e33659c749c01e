/**
 * Counters kept on channel documents as messages are stored, so that lists read them instead of
 * counting messages per request (docs/channels.md, "Reply counts and unread messages"):
 *
 * - a top-level message's `replyCount` (replies not deleted) and `lastReplyAt`;
 * - a channel's `lastSeq` (the highest message `seq`), from which unread counts are taken.
 *
 * The channel's writer (src/services/channels.ts) calls these after the messages are stored, one
 * channel's writes one at a time. When a counter write fails, the messages stay stored (their
 * authors get their answer) and the counters of the threads touched are recounted from the
 * store in the background, a few times with a growing pause.
 *
 * Messages stored before the counters existed get them once, at start (`migrateChannelCounters`).
 */
import type { ChannelMessageDoc, Collections } from '../store/collections.js';
import { DuplicateKeyError, type BulkUpdateOp } from '../store/types.js';
import type { Logger } from '../log.js';

/** Recounts after a failed counter write, and the pause before the first (doubling). */
const REPAIR_ATTEMPTS = 5;
const REPAIR_PAUSE_MS = 500;

export class ChannelCounters {
  constructor(
    private readonly c: Collections,
    private readonly log: Logger,
  ) {}

  /** After messages of one channel were stored: their threads' counts and the channel's last seq. */
  async posted(channelId: string, docs: readonly ChannelMessageDoc[]): Promise<void> {
    const threads = new Map<string, { n: number; last: string }>();
    let top = 0;
    for (const d of docs) {
      top = Math.max(top, d.seq);
      if (d.threadId === null) continue;
      const t = threads.get(d.threadId);
      if (!t) threads.set(d.threadId, { n: 1, last: d.createdAt });
      else {
        t.n += 1;
        if (d.createdAt > t.last) t.last = d.createdAt;
      }
    }
    try {
      if (threads.size > 0) {
        const ops: BulkUpdateOp[] = [...threads].map(([id, t]) => ({
          filter: { _id: id, channelId },
          update: { $inc: { replyCount: t.n }, $set: { lastReplyAt: t.last } },
        }));
        await this.c.channelMessages.bulkUpdate(ops);
      }
      await this.c.channels.updateOne({ _id: channelId }, { $set: { lastSeq: top } });
    } catch (err) {
      this.log.warn({ err, channelId }, 'updating the reply and unread counters failed; recounting them from the store');
      this.repairLater(channelId, [...threads.keys()]);
    }
  }

  /** After a reply was deleted: its thread has one reply less, and maybe an older newest one. */
  async replyDeleted(channelId: string, reply: ChannelMessageDoc): Promise<void> {
    const threadId = reply.threadId!;
    try {
      const parent = await this.c.channelMessages.findOneAndUpdate({ _id: threadId, channelId }, { $inc: { replyCount: -1 } });
      if (!parent) return;
      if ((parent.replyCount ?? 0) < 0 || parent.lastReplyAt === reply.createdAt) await this.recount(channelId, threadId);
    } catch (err) {
      this.log.warn({ err, channelId, threadId }, 'updating a reply count failed; recounting it from the store');
      this.repairLater(channelId, [threadId]);
    }
  }

  /** A thread's counters read again from its replies (one thread: a rare path, never per request). */
  private async recount(channelId: string, threadId: string): Promise<void> {
    const filter = { channelId, threadId, deletedAt: null };
    const [count, [newest]] = await Promise.all([
      this.c.channelMessages.count(filter),
      this.c.channelMessages.find(filter, { sort: { seq: -1 }, limit: 1, projection: { createdAt: 1 } }),
    ]);
    await this.c.channelMessages.updateOne({ _id: threadId, channelId }, { $set: { replyCount: count, lastReplyAt: newest?.createdAt ?? null } });
  }

  private repairLater(channelId: string, threadIds: string[], attempt = 1): void {
    const timer = setTimeout(() => {
      this.repair(channelId, threadIds).catch((err: unknown) => {
        if (attempt < REPAIR_ATTEMPTS) return this.repairLater(channelId, threadIds, attempt + 1);
        this.log.error({ err, channelId, threadIds }, 'recounting reply and unread counters failed; they stay off until the next change');
      });
    }, REPAIR_PAUSE_MS * 2 ** (attempt - 1));
    timer.unref();
  }

  private async repair(channelId: string, threadIds: string[]): Promise<void> {
    for (const id of threadIds) await this.recount(channelId, id);
    const [newest] = await this.c.channelMessages.find({ channelId }, { sort: { seq: -1 }, limit: 1, projection: { seq: 1 } });
    await this.c.channels.updateOne({ _id: channelId }, { $set: { lastSeq: newest?.seq ?? 0 } });
  }
}

const MIGRATION_ID = 'migration.channelCounters';

/**
 * Once per store: gives messages stored before reply counts were kept their `replyCount` and
 * `lastReplyAt`, and channels their `lastSeq`. Every write sets a value computed from the
 * messages, so a run cut short is simply done again at the next start.
 */
export async function migrateChannelCounters(c: Collections, log: Logger): Promise<void> {
  if (await c.settings.findById(MIGRATION_ID)) return;
  const threads = new Map<string, { channelId: string; n: number; last: string }>();
  for (const r of await c.channelMessages.find({ threadId: { $ne: null }, deletedAt: null }, { projection: { channelId: 1, threadId: 1, createdAt: 1 } })) {
    const t = threads.get(r.threadId!);
    if (!t) threads.set(r.threadId!, { channelId: r.channelId, n: 1, last: r.createdAt });
    else {
      t.n += 1;
      if (r.createdAt > t.last) t.last = r.createdAt;
    }
  }
  const ops: BulkUpdateOp[] = [...threads].map(([id, t]) => ({ filter: { _id: id, channelId: t.channelId }, update: { $set: { replyCount: t.n, lastReplyAt: t.last } } }));
  for (let i = 0; i < ops.length; i += 1000) await c.channelMessages.bulkUpdate(ops.slice(i, i + 1000));
  const channels = await c.channels.find({}, { projection: { _id: 1 } });
  for (const ch of channels) {
    const [newest] = await c.channelMessages.find({ channelId: ch._id }, { sort: { seq: -1 }, limit: 1, projection: { seq: 1 } });
    await c.channels.updateOne({ _id: ch._id }, { $set: { lastSeq: newest?.seq ?? 0 } });
  }
  await c.settings.insertOne({ _id: MIGRATION_ID, value: { threads: threads.size, channels: channels.length }, updatedAt: new Date().toISOString() }).catch((err: unknown) => {
    // Another node finished it first.
    if (!(err instanceof DuplicateKeyError)) throw err;
  });
  if (threads.size + channels.length > 0) log.info({ threads: threads.size, channels: channels.length }, 'reply and unread counters computed for stored messages');
}
