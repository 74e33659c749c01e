/**
 * A person's own sessions (docs/identity.md, "Your sessions"): the list — never a token — and
 * ending one of them server-side. Another person's session is not found, whoever asks.
 */
import { notFound } from '../domain/errors.js';
import type { UserPrincipal } from '../domain/principal.js';
import type { SessionMethod } from '../store/collections.js';
import type { ServiceCore } from './core.js';

export interface SessionView {
  id: string;
  createdAt: string;
  lastUsedAt: string;
  expiresAt: string;
  /** The User-Agent and source address of the request that made it; null for sessions made before they were recorded. */
  userAgent: string | null;
  address: string | null;
  /** How it was made: `login` (a signed challenge: a wallet, this browser's key), `device` (a browser approved by a wallet); null when not recorded. */
  method: SessionMethod | null;
  /** The session making this request. */
  current: boolean;
}

export class PersonSessions {
  constructor(private readonly ctx: ServiceCore) {}

  /** The caller's live sessions, newest first. */
  async list(person: UserPrincipal): Promise<SessionView[]> {
    const docs = await this.ctx.sessions.liveOf(person.userId);
    return docs.map((d) => ({
      id: d._id,
      createdAt: d.createdAt,
      lastUsedAt: d.lastUsedAt,
      expiresAt: d.expiresAt,
      userAgent: d.userAgent ?? null,
      address: d.address ?? null,
      method: d.method ?? null,
      current: d._id === person.sessionId,
    }));
  }

  /** Ends one of the caller's sessions (audited); 404 when `id` is not one of theirs. */
  async end(person: UserPrincipal, id: string): Promise<void> {
    if (!(await this.ctx.sessions.endOf(person.userId, id))) throw notFound('you have no session with this id (it ended, or it is not yours)');
    await this.ctx.audit.record(person, { action: 'auth.session.ended', targetType: 'session', target: id, details: { current: id === person.sessionId } });
  }
}
