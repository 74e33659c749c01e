/**
 * The audit log: an append-only record of who did what to what, and when. Entries are only ever
 * inserted; GET /api/audit reads them.
 */
import { nanoid } from 'nanoid';
import type { AuditDoc, Collections } from '../store/collections.js';
import type { Principal } from '../domain/principal.js';
import type { Logger } from '../log.js';

export interface AuditEntry {
  action: string;
  targetType: string;
  target?: string | null;
  details?: Record<string, unknown>;
}

export class AuditLog {
  constructor(
    private readonly c: Collections,
    private readonly log: Logger,
  ) {}

  /** Records an entry. Never throws: a failed audit write is logged as an error. */
  async record(actor: Principal | 'system', entry: AuditEntry): Promise<void> {
    const doc: AuditDoc = {
      _id: nanoid(),
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
    }
  }
}
