/**
 * DID login for people (DESIGN §3): a challenge, then a signature over `steward-login:<nonce>`.
 *
 * A refused login says what is wrong, without telling anyone who does not hold a DID's key
 * whether the DID has an account: a challenge is issued for any well-formed DID, and "no account
 * holds this DID" is only said to a caller whose signature verifies with the DID's own key (a
 * did:key carries it). Every other failed signature is the same `invalid_signature`, for a DID
 * with an account or without one. A challenge is consumed atomically (`usedAt: null` -> now)
 * before the signature is checked, so it serves one attempt, right or wrong, even under a race.
 */
import { randomBytes } from 'node:crypto';
import { nanoid } from 'nanoid';
import type { ChallengeDoc, Collections, UserDoc } from '../store/collections.js';
import type { UserPrincipal } from '../domain/principal.js';
import type { Sessions } from './sessions.js';
import { resolvePublicKey, verifySignature } from '../domain/did.js';
import { loginMessage } from '../domain/claims.js';

export const CHALLENGE_TTL_MS = 5 * 60_000;

/** Why a login was refused (docs/identity.md lists the answers). */
export type LoginRefusal = 'invalid_challenge' | 'challenge_mismatch' | 'invalid_signature' | 'no_account';

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

  /** A new session for a valid answer to a challenge, or why there is none. */
  async login(challengeId: string, did: string, signature: string): Promise<{ token: string; user: UserDoc } | { refused: LoginRefusal }> {
    const nowIso = new Date(this.now()).toISOString();
    const challenge = await this.c.challenges.findOneAndUpdate(
      { _id: challengeId, usedAt: null },
      { $set: { usedAt: nowIso } },
      { returnDocument: 'before' },
    );
    if (!challenge || challenge.expiresAt <= nowIso) return { refused: 'invalid_challenge' };
    if (challenge.did !== did) return { refused: 'challenge_mismatch' };
    const found = await this.c.users.findOne({ did });
    const user = found?.did && found.claimedAt ? found : null;
    // The key a signature must verify with: the account's, else the one a did:key carries.
    const key = user ? resolvePublicKey(user.did!, user.publicKey) : resolvePublicKey(did);
    if (!key || !verifySignature(key, loginMessage(challenge.nonce), signature)) return { refused: 'invalid_signature' };
    if (!user) return { refused: 'no_account' };
    const { token } = await this.sessions.create('user', user._id);
    return { token, user };
  }

  /** Removes expired challenges (used or not) and expired sessions. */
  async sweep(): Promise<void> {
    await this.c.challenges.deleteMany({ expiresAt: { $lte: new Date(this.now()).toISOString() } });
    await this.sessions.purgeExpired();
  }
}
