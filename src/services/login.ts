/**
 * DID login for people (DESIGN §3): a challenge, then a signature over `steward-login:<nonce>`.
 *
 * A refused login says what is wrong, without telling anyone who does not hold a DID's key
 * whether the DID has an account: a challenge is issued for any well-formed DID, and "no account
 * holds this DID" is only said to a caller whose signature verifies with the DID's own key (a
 * did:key carries it). Every other failed signature is the same `invalid_signature`, for a DID
 * with an account or without one. A challenge is consumed atomically (`usedAt: null` -> now)
 * before the signature is checked, so it serves one attempt, right or wrong, even under a race.
 *
 * Failed logins are counted per address and per DID with the smart-lockout rule (lockout.ts): a
 * DID anyone can name is never locked against an address that has not failed, and a challenge
 * that is only asked for never counts.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { newId } from '../domain/ids.js';
import type { ChallengeDoc, UserDoc } from '../store/collections.js';
import type { Principal } from '../domain/principal.js';
import type { ServiceCore } from './core.js';
import { userPrincipal, type SessionOrigin } from './sessions.js';
import { resolvePublicKey, verifySignature } from '../domain/did.js';
import { loginMessage } from '../domain/claims.js';
import { AppError } from '../domain/errors.js';
import { toUserSummary, UserSummary } from './users.js';
import type { Lockout } from './lockout.js';
import { addressKey } from '../domain/net-address.js';

/** POST /api/auth/challenge. */
export const LoginChallenge = z.strictObject({ challengeId: z.string(), nonce: z.string() });
export type LoginChallenge = z.infer<typeof LoginChallenge>;

/** POST /api/auth/login: the bearer token (also set as the session cookie) and who logged in. */
export const LoginAnswer = z.strictObject({ token: z.string(), user: UserSummary });
export type LoginAnswer = z.infer<typeof LoginAnswer>;

export const CHALLENGE_TTL_MS = 5 * 60_000;
/** How often expired challenges and sessions are removed. */
const SWEEP_EVERY_MS = 10 * 60_000;

/** Why a login was refused (docs/identity.md lists the answers). */
export type LoginRefusal = 'invalid_challenge' | 'challenge_mismatch' | 'invalid_signature' | 'no_account';

const NEW_CHALLENGE = 'ask for a new challenge (POST /api/auth/challenge) and sign its nonce';

/** What a refused login answers: what is wrong, and what to do (the header says what each may reveal). */
function refusedLogin(why: LoginRefusal, did: string): AppError {
  switch (why) {
    case 'invalid_challenge':
      return new AppError(401, why, `this challenge is unknown, used or expired (a challenge lasts 5 minutes and serves one attempt); ${NEW_CHALLENGE}`);
    case 'challenge_mismatch':
      return new AppError(401, why, `this challenge was issued for another DID; ask for a challenge for ${did} and sign its nonce`);
    case 'invalid_signature':
      return new AppError(
        401,
        why,
        `the signature does not verify over steward-login:<nonce> with the key of this DID (the account's key, or the one a did:key carries); this challenge is used up: ${NEW_CHALLENGE} with that key`,
      );
    case 'no_account':
      return new AppError(
        401,
        why,
        `no account holds ${did}: the key is right, but this DID has not claimed an account here. Claim one first with the link or invitation an owner or admin sends you (steward wallet claim), then log in`,
      );
  }
}

export class LoginService {
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly ctx: ServiceCore,
    /** Failed logins: per address, and per DID (smart lockout); none counted without it. */
    private readonly failures?: Lockout,
    private readonly now: () => number = Date.now,
  ) {}

  /** Sweeps expired challenges and sessions every ten minutes until `stop`. */
  start(): void {
    this.sweeper = setInterval(() => {
      this.sweep().catch((err: unknown) => this.ctx.log.warn({ err }, 'sweeping expired challenges and sessions failed'));
    }, SWEEP_EVERY_MS);
    this.sweeper.unref();
  }

  stop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
  }

  async challenge(did: string): Promise<LoginChallenge> {
    const doc: ChallengeDoc = {
      _id: newId(),
      did,
      nonce: randomBytes(32).toString('base64url'),
      expiresAt: new Date(this.now() + CHALLENGE_TTL_MS).toISOString(),
      usedAt: null,
    };
    await this.ctx.c.challenges.insertOne(doc);
    return { challengeId: doc._id, nonce: doc.nonce };
  }

  /** A new session for a valid answer to a challenge (audited); 401 saying why otherwise. */
  async login(challengeId: string, did: string, signature: string, origin: SessionOrigin): Promise<LoginAnswer> {
    const attempt = { address: addressKey(origin.address ?? ''), principal: did };
    await this.failures?.check(attempt);
    const result = await this.check(challengeId, did, signature);
    if ('refused' in result) {
      await this.failures?.failed(attempt);
      throw refusedLogin(result.refused, did);
    }
    const { user } = result;
    const { token } = await this.ctx.sessions.create('user', user._id, origin);
    await this.ctx.audit.record(userPrincipal(user, '', 'bearer')!, { action: 'auth.login', targetType: 'user', target: user._id });
    return { token, user: toUserSummary(user) };
  }

  /** The account a valid answer to a challenge logs in, or why there is none. */
  private async check(challengeId: string, did: string, signature: string): Promise<{ user: UserDoc } | { refused: LoginRefusal }> {
    const { c } = this.ctx;
    const nowIso = new Date(this.now()).toISOString();
    const challenge = await c.challenges.findOneAndUpdate({ _id: challengeId, usedAt: null }, { $set: { usedAt: nowIso } }, { returnDocument: 'before' });
    if (!challenge || challenge.expiresAt <= nowIso) return { refused: 'invalid_challenge' };
    if (challenge.did !== did) return { refused: 'challenge_mismatch' };
    const found = await c.users.findOne({ did });
    const user = found?.did && found.claimedAt ? found : null;
    // The key a signature must verify with: the account's, else the one a did:key carries.
    const key = user ? resolvePublicKey(user.did!, user.publicKey) : resolvePublicKey(did);
    if (!key || !verifySignature(key, loginMessage(challenge.nonce), signature)) return { refused: 'invalid_signature' };
    if (!user) return { refused: 'no_account' };
    return { user };
  }

  /** Ends the session a request came with (its token, when it presented one) and audits the logout. */
  async logout(who: Principal, token: string | null): Promise<void> {
    if (token) await this.ctx.sessions.end(token);
    await this.ctx.audit.record(who, { action: 'auth.logout', targetType: who.kind, target: who.kind === 'user' ? who.userId : who.did });
  }

  /** Removes expired challenges (used or not) and expired sessions. */
  async sweep(): Promise<void> {
    await this.ctx.c.challenges.deleteMany({ expiresAt: { $lte: new Date(this.now()).toISOString() } });
    await this.ctx.sessions.purgeExpired();
  }
}
