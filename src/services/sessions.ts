/**
 * Sessions of people and agents. A token is 32 random bytes (base64url); only its SHA-256 is
 * stored. Sessions slide: each use pushes expiresAt to now + SESSION_TTL (written at most once a
 * minute per session). An expired session stays until the periodic sweep removes it, so that a
 * request with it is told it expired rather than that it is unknown. Whoever holds a session open
 * (a feed socket) hears of its end through `onEnded`, and asks `live` before acting on it again.
 */
import { createHash, randomBytes } from 'node:crypto';
import { newId } from '../domain/ids.js';
import type { Collections, SessionDoc, SessionMethod, UserDoc } from '../store/collections.js';
import type { Principal, UserPrincipal } from '../domain/principal.js';

const TOUCH_EVERY_MS = 60_000;
/** The longest User-Agent kept with a session (browsers send a few hundred characters). */
const USER_AGENT_MAX = 300;

/** Who made a session: how, and the User-Agent and source address of the request that did. */
export interface SessionOrigin {
  method: SessionMethod;
  userAgent?: string | null;
  address?: string | null;
}

export const hashToken = (token: string) => createHash('sha256').update(token, 'utf8').digest('hex');

/**
 * A person as a principal: the one way every entry point builds it (an HTTP session, the live
 * feed, a workflow run acting for its starter, an audit entry made before a session exists).
 * Null for an unclaimed user (no DID: nobody can act as them).
 */
export function userPrincipal(user: UserDoc, sessionId: string, via: UserPrincipal['via']): UserPrincipal | null {
  if (!user.did) return null;
  return {
    kind: 'user',
    userId: user._id,
    did: user.did,
    name: user.name,
    isOwner: user.isOwner,
    isAdmin: user.isAdmin,
    role: user.role,
    sessionId,
    via,
  };
}

/** Why sessions ended, for the sockets that held them (a close reason: no secret). */
export type SessionEndReason = 'logged out' | 'ended by its owner' | 'the account was deleted' | 'the agent was removed';

export class Sessions {
  private readonly endedHooks: Array<(ids: string[], reason: SessionEndReason) => void> = [];

  constructor(
    private readonly c: Collections,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  async create(kind: SessionDoc['kind'], subject: string, origin?: SessionOrigin): Promise<{ token: string; session: SessionDoc }> {
    const token = randomBytes(32).toString('base64url');
    const t = this.now();
    const session: SessionDoc = {
      _id: newId(),
      tokenHash: hashToken(token),
      kind,
      subject,
      createdAt: new Date(t).toISOString(),
      lastUsedAt: new Date(t).toISOString(),
      expiresAt: new Date(t + this.ttlMs).toISOString(),
      method: origin?.method ?? null,
      userAgent: origin?.userAgent ? origin.userAgent.slice(0, USER_AGENT_MAX) : null,
      address: origin?.address || null,
    };
    await this.c.sessions.insertOne(session);
    return { token, session };
  }

  /** The live session of a token, extended; null when unknown or expired. */
  async resolve(token: string): Promise<SessionDoc | null> {
    const r = await this.check(token);
    return 'session' in r ? r.session : null;
  }

  /**
   * The live session of a token, extended, or why there is none: `unknown` (never issued, ended,
   * or swept), `expired` (past expiresAt, kept until the sweep so the answer can say so).
   */
  async check(token: string): Promise<{ session: SessionDoc } | { refused: 'unknown' } | { refused: 'expired'; expiredAt: string }> {
    if (!token || token.length > 200) return { refused: 'unknown' };
    const session = await this.c.sessions.findOne({ tokenHash: hashToken(token) });
    if (!session) return { refused: 'unknown' };
    const t = this.now();
    if (Date.parse(session.expiresAt) <= t) return { refused: 'expired', expiredAt: session.expiresAt };
    if (t - Date.parse(session.lastUsedAt) >= TOUCH_EVERY_MS) {
      const lastUsedAt = new Date(t).toISOString();
      const expiresAt = new Date(t + this.ttlMs).toISOString();
      await this.c.sessions.updateOne({ _id: session._id }, { $set: { lastUsedAt, expiresAt } });
      session.lastUsedAt = lastUsedAt;
      session.expiresAt = expiresAt;
    }
    return { session };
  }

  /**
   * Who a live session stands for: its person (null when gone or unclaimed) or its agent (null
   * unless it is an active agent). A session whose subject is gone is no session.
   */
  async principalOf(session: SessionDoc, via: Principal['via']): Promise<Principal | null> {
    if (session.kind === 'user') {
      const user = await this.c.users.findById(session.subject);
      return user ? userPrincipal(user, session._id, via) : null;
    }
    const agent = await this.c.agents.findById(session.subject);
    return agent && agent.status === 'active' ? { kind: 'agent', did: session.subject, name: agent.name, sessionId: session._id, via } : null;
  }

  /** Runs `fn` after sessions end (logout, ended by their owner, their subject removed); expiry is each holder's to watch. */
  onEnded(fn: (ids: string[], reason: SessionEndReason) => void): void {
    this.endedHooks.push(fn);
  }

  /** The session `id` if it is live now (not ended, not expired); not extended. */
  async live(id: string): Promise<SessionDoc | null> {
    const session = await this.c.sessions.findById(id);
    return session && Date.parse(session.expiresAt) > this.now() ? session : null;
  }

  async end(token: string): Promise<void> {
    const session = await this.c.sessions.findOne({ tokenHash: hashToken(token) }, { projection: { _id: 1 } });
    if (session && (await this.c.sessions.deleteOne({ _id: session._id })) > 0) this.ended([session._id], 'logged out');
  }

  /** The live sessions of a subject, newest first. */
  async liveOf(subject: string): Promise<SessionDoc[]> {
    return this.c.sessions.find({ subject, expiresAt: { $gt: new Date(this.now()).toISOString() } }, { sort: { createdAt: -1 } });
  }

  /** Ends the session `id` when it is one of `subject`'s; false when it is not (unknown, or someone else's). */
  async endOf(subject: string, id: string): Promise<boolean> {
    if ((await this.c.sessions.deleteOne({ _id: id, subject })) === 0) return false;
    this.ended([id], 'ended by its owner');
    return true;
  }

  /** Ends every session of a subject (a deleted user, a removed agent). */
  async endAllOf(subject: string, reason: SessionEndReason): Promise<number> {
    const ids = (await this.c.sessions.find({ subject }, { projection: { _id: 1 } })).map((d) => d._id);
    const n = await this.c.sessions.deleteMany({ subject });
    if (ids.length > 0) this.ended(ids, reason);
    return n;
  }

  private ended(ids: string[], reason: SessionEndReason): void {
    for (const fn of this.endedHooks) fn(ids, reason);
  }

  async purgeExpired(): Promise<number> {
    return this.c.sessions.deleteMany({ expiresAt: { $lte: new Date(this.now()).toISOString() } });
  }
}
