/**
 * The audit log: an append-only record of who did what to what, and when. Entries are only ever
 * inserted, by the service method that makes the change; GET /api/audit reads them (global
 * admins), newest first: `action` matches exactly, or as a prefix when it ends with `*`
 * (`workspace.member.*`); `since` is inclusive and `until` exclusive. Each stored entry is also
 * published to the live feed's `audit` topic (global admins), while anyone follows it.
 */
import { z } from 'zod';
import { newId } from '../domain/ids.js';
import { jsonObject, pageFields, timestamp } from '../domain/views.js';
import type { AuditDoc, Collections } from '../store/collections.js';
import type { Filter } from '../store/types.js';
import type { Principal } from '../domain/principal.js';
import { escapeRegex } from '../domain/regex.js';
import type { Logger } from '../log.js';
import type { AuditFrame } from '../domain/feed-frames.js';
import type { FeedPublisher } from './ports.js';

export interface AuditEntry {
  action: string;
  targetType: string;
  target?: string | null;
  details?: Record<string, unknown>;
}

export interface AuditQuery {
  page: number;
  pageSize: number;
  actor?: string;
  action?: string;
  targetType?: string;
  target?: string;
  since?: string;
  until?: string;
}

export const AuditEntryView = z
  .strictObject({
    id: z.string(),
    at: timestamp,
    actor: z.string().meta({ description: 'DID of who did it, or `system`' }),
    actorType: z.enum(['user', 'agent', 'system']),
    action: z.string(),
    targetType: z.string(),
    target: z.string().nullable(),
    details: jsonObject,
  })
  .meta({ id: 'AuditEntry' });
export type AuditEntryView = z.infer<typeof AuditEntryView>;

/** GET /api/audit: one page of the log. */
export const AuditPage = z.strictObject({ entries: z.array(AuditEntryView), ...pageFields });
export type AuditPage = z.infer<typeof AuditPage>;

export const toAuditEntryView = (d: AuditDoc): AuditEntryView => ({
  id: d._id,
  at: d.at,
  actor: d.actor,
  actorType: d.actorType,
  action: d.action,
  targetType: d.targetType,
  target: d.target,
  details: d.details,
});

export class AuditLog {
  constructor(
    private readonly c: Collections,
    private readonly log: Logger,
    private readonly feed?: FeedPublisher,
  ) {}

  /** Records an entry. Never throws: a failed audit write is logged as an error. */
  async record(actor: Principal | 'system', entry: AuditEntry): Promise<void> {
    const doc: AuditDoc = {
      _id: newId(),
      at: new Date().toISOString(),
      actor: actor === 'system' ? 'system' : actor.did,
      actorType: actor === 'system' ? 'system' : actor.kind,
      action: entry.action,
      targetType: entry.targetType,
      target: entry.target ?? null,
      details: entry.details ?? {},
    };
    try {
      await this.c.audit.insertOne(doc);
    } catch (err) {
      this.log.error({ err, action: doc.action }, 'audit write failed');
      return;
    }
    if (this.feed?.hasSubscribers('audit')) {
      const frame: AuditFrame = { type: 'audit', entry: toAuditEntryView(doc), at: doc.at };
      this.feed.publish('audit', frame, { adminOnly: true });
    }
  }

  /** One page of the log, newest first, filtered. */
  async list(q: AuditQuery): Promise<AuditPage> {
    const filter: Filter = {};
    if (q.actor) filter.actor = q.actor;
    if (q.action) filter.action = q.action.endsWith('*') ? { $regex: `^${escapeRegex(q.action.slice(0, -1))}` } : q.action;
    if (q.targetType) filter.targetType = q.targetType;
    if (q.target) filter.target = q.target;
    if (q.since || q.until) filter.at = { ...(q.since ? { $gte: q.since } : {}), ...(q.until ? { $lt: q.until } : {}) };
    const [total, docs] = await Promise.all([
      this.c.audit.count(filter),
      this.c.audit.find(filter, { sort: { at: -1, _id: -1 }, skip: (q.page - 1) * q.pageSize, limit: q.pageSize }),
    ]);
    return { entries: docs.map(toAuditEntryView), total, page: q.page, pageSize: q.pageSize, totalPages: Math.ceil(total / q.pageSize) };
  }
}
