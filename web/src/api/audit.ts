/** The activity log (docs/people.md; global admins). */
import { get, type Page } from './http';

export interface AuditEntry {
  id: string;
  at: string;
  actor: string;
  actorType: string;
  action: string;
  targetType: string | null;
  target: string | null;
  details: Record<string, unknown> | null;
}
export interface AuditQuery {
  actor?: string;
  action?: string;
  targetType?: string;
  target?: string;
  since?: string;
  until?: string;
  page?: number;
  pageSize?: number;
}
export const listAudit = (q: AuditQuery, signal?: AbortSignal) => get<Page & { entries: AuditEntry[] }>('/api/audit', { ...q }, signal);
