/**
 * DID login for people (DESIGN §3): a challenge, then a signature over `steward-login:<nonce>`.
 *
 * Nothing here tells a caller why a login failed. A challenge is issued for any well-formed DID,
 * known or not, and every refusal — unknown DID, unclaimed user, wrong signature, a challenge
 * that was used, expired or issued for another DID — is the same `null`, which the route turns
 * into one 401 body. A challenge is consumed atomically (`usedAt: null` -> now) before the
 * signature is checked, so it serves one attempt, right or wrong, even under a race.
 */
import { randomBytes } from 'node:crypto';
import { nanoid } from 'nanoid';
import type { ChallengeDoc, Collections, UserDoc } from '../store/collections.js';
import type { UserPrincipal } from '../domain/principal.js';
import type { Sessions } from './sessions.js';
import { resolvePublicKey, verifySignature } from '../domain/did.js';
import { loginMessage } from '../domain/claims.js';

export const CHALLENGE_TTL_MS = 5 * 60_000;

export interface LoginUser {
  id: string;
  did: string | null;
  name: string;
  email: string;
  isOwner: boolean;
  isAdmin: boolean;
  role: UserDoc['role'];
  registeredAt: string;
}

export const loginUserView = (u: UserDoc): LoginUser => ({
  id: u._id,
  did: u.did,
  name: u.name,
  email: u.email,
  isOwner: u.isOwner,
  isAdmin: u.isAdmin,
  role: u.role,
  registeredAt: u.registeredAt,
});

/** A person as the actor of an audit entry written before they hold a session (login, claim). */
export const actingAs = (u: UserDoc): UserPrincipal => ({
  kind: 'user',
  userId: u._id,
  did: u.did!,
  name: u.name,
  isOwner: u.isOwner,
  isAdmin: u.isAdmin,
  role: u.role,
  sessionId: '',
  via: 'bearer',
});

export class LoginService {
  constructor(
    private readonly c: Collections,
    private readonly sessions: Sessions,
    private readonly now: () => number = Date.now,
  ) {}

  async challenge(did: string): Promise<{ challengeId: string; nonce: string }> {
    const doc: ChallengeDoc = {
      _id: nanoid(),
      did,
      nonce: randomBytes(32).toString('base64url'),
      expiresAt: new Date(this.now() + CHALLENGE_TTL_MS).toISOString(),
      usedAt: null,
    };
    await this.c.challenges.insertOne(doc);
    return { challengeId: doc._id, nonce: doc.nonce };
  }

  /** A new session for a valid answer to a challenge; null for every kind of refusal. */
  async login(challengeId: string, did: string, signature: string): Promise<{ token: string; user: UserDoc } | null> {
    const nowIso = new Date(this.now()).toISOString();
    const challenge = await this.c.challenges.findOneAndUpdate(
      { _id: challengeId, usedAt: null },
      { $set: { usedAt: nowIso } },
      { returnDocument: 'before' },
    );
    if (!challenge || challenge.did !== did || challenge.expiresAt <= nowIso) return null;
    const user = await this.c.users.findOne({ did });
    if (!user || !user.did || !user.claimedAt) return null;
    const key = resolvePublicKey(user.did, user.publicKey);
    if (!key || !verifySignature(key, loginMessage(challenge.nonce), signature)) return null;
    const { token } = await this.sessions.create('user', user._id);
    return { token, user };
  }

  /** Removes expired challenges (used or not) and expired sessions. */
  async sweep(): Promise<void> {
    await this.c.challenges.deleteMany({ expiresAt: { $lte: new Date(this.now()).toISOString() } });
    await this.sessions.purgeExpired();
  }
}
