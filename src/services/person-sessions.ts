/**
 * A person's own sessions (docs/identity.md, "Your sessions"): the list — never a token — and
 * ending one of them server-side. Another person's session is not found, whoever asks.
 */
import { z } from 'zod';
import { notFound } from '../domain/errors.js';
import type { UserPrincipal } from '../domain/principal.js';
import type { SessionMethod } from '../store/collections.js';
import type { ServiceCore } from './core.js';

/** One of a person's sessions, as GET /api/me/sessions lists it (never its token). */
export const SessionView = z.strictObject({
  id: z.string(),
  createdAt: z.string(),
  lastUsedAt: z.string(),
  expiresAt: z.string(),
  /** The User-Agent and source address of the request that made it; null for sessions made before they were recorded. */
  userAgent: z.string().nullable(),
  address: z.string().nullable(),
  /** How it was made: `login` (a signed challenge: a wallet, this browser's key), `device` (a browser approved by a wallet); null when not recorded. */
  method: z.enum(['login', 'device'] satisfies SessionMethod[]).nullable(),
  /** The session making this request. */
  current: z.boolean(),
});
export type SessionView = z.infer<typeof SessionView>;

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
