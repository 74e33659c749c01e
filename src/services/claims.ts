/**
 * Claim sessions (DESIGN §3, interface §4.12): how a wallet proves a key and becomes the DID of
 * a user.
 *
 * A session has a token; its connection string is the claim URL `{PUBLIC_URL}/api/user/claim/{token}`
 * and its wallet QR encodes `{WALLET_URL}/#<connectionString>&protocol=p2p&service=auth&did=<serverDid>`.
 * The wallet reads `{nonce, serverDid, expiresAt}` there and posts `{did, publicKey?, signature}`
 * with the signature over `steward-claim:<token>:<nonce>`.
 *
 * The token is given out once, when the session opens; the store keeps only its SHA-256, which is
 * the session's id (whoever reads the datafiles cannot claim with what they find there).
 *
 * Status: -1 pending, 2 success, -2 failed or expired (a pending session past expiresAt reads -2).
 * A wrong signature leaves the session pending; a DID that someone else holds fails it.
 * Completing is serialised per session by taking it atomically (`claimedDid: null` -> did), and a
 * DID is made unique by reserving it in `userDids` before `users.did` is set.
 */
import { createUser } from './users.js';
import { randomBytes, randomUUID } from 'node:crypto';
import QRCode from 'qrcode';
import { z } from 'zod';
import { timestamp } from '../domain/views.js';
import type { ClaimSessionDoc, UserDoc, WorkspaceDoc } from '../store/collections.js';
import { DuplicateKeyError } from '../store/types.js';
import { encodeBase64Url, PURPOSE, resolvePublicKey, verifySignature } from '../domain/did.js';
import { claimMessage, connectionStringOf, walletQrText } from '../domain/claims.js';
import { AppError, forbidden, notFound } from '../domain/errors.js';
import { isOwnerLike } from '../domain/permissions.js';
import type { UserPrincipal } from '../domain/principal.js';
import { Mailer, claimMail } from '../integrations/mail.js';
import { hashToken, userPrincipal } from './sessions.js';
import type { ServiceCore } from './core.js';

export type ClaimKind = ClaimSessionDoc['kind'];
export type ClaimStatus = ClaimSessionDoc['status'];

/** GET /api/user/claim/{token}: what a wallet signs. */
export const ClaimChallenge = z.strictObject({ nonce: z.string(), serverDid: z.string(), expiresAt: timestamp });
export type ClaimChallenge = z.infer<typeof ClaimChallenge>;

/** GET /api/user/listen/{token}. */
export const ClaimListen = z.strictObject({
  status: z.union([z.literal(-1), z.literal(2), z.literal(-2)]).meta({ description: '-1 pending, 2 success, -2 failed or expired' }),
  did: z.string().optional().meta({ description: 'The claimed DID, with status 2' }),
  expiresAt: timestamp,
});
export type ClaimListen = z.infer<typeof ClaimListen>;

/** An owner-bootstrap session lives at least this long (the operator may read the console later). */
export const OWNER_CLAIM_MIN_TTL_MS = 24 * 3600_000;

/** The absolute URL of a session's QR code image. */
export const qrImageUrlOf = (publicUrl: string, token: string) => `${connectionStringOf(publicUrl, token)}/qr.svg`;

export interface ClaimBody {
  did: string;
  publicKey?: string;
  signature: string;
  /** Name of the new user when an open invite link is claimed. */
  name?: string;
}


/** A claim that cannot complete: the session fails (status -2) with this reason. */
class ClaimFailure extends AppError {}

export class ClaimService {
  readonly mailer: Mailer;
  /** Where a new member of an open invite link starts. */
  private readonly defaultWorkspace: WorkspaceDoc;

  constructor(
    private readonly ctx: ServiceCore,
    deps: { defaultWorkspace: WorkspaceDoc },
    private readonly now: () => number = Date.now,
  ) {
    this.defaultWorkspace = deps.defaultWorkspace;
    this.mailer = new Mailer({ smtpUrl: ctx.config.smtpUrl, mailFrom: ctx.config.mailFrom }, ctx.log);
  }

  connectionString(token: string): string {
    return connectionStringOf(this.ctx.config.publicUrl, token);
  }

  qrUrl(token: string): string {
    return qrImageUrlOf(this.ctx.config.publicUrl, token);
  }

  qrText(token: string): string {
    return walletQrText(this.ctx.config.walletUrl, this.connectionString(token), this.ctx.identity.did);
  }

  /**
   * Opens a pending session for an unclaimed user (or, with userId null, for a new user). It lives
   * `ttlMs` (default CLAIM_TTL_MINUTES), and ends at `notAfter` (epoch ms) at the latest. The
   * token is returned here only: the store keeps its hash.
   */
  async open(
    kind: ClaimKind,
    opts: { userId: string | null; invitationId?: string | null; ttlMs?: number; notAfter?: number },
  ): Promise<{ session: ClaimSessionDoc; token: string }> {
    const t = this.now();
    const ends = Math.min(t + (opts.ttlMs ?? this.ctx.config.claimTtlMs), opts.notAfter ?? Infinity);
    const token = randomBytes(24).toString('base64url');
    const doc: ClaimSessionDoc = {
      _id: hashToken(token),
      userId: opts.userId,
      nonce: randomBytes(32).toString('base64url'),
      status: -1,
      kind,
      invitationToken: opts.invitationId ?? null,
      createdAt: new Date(t).toISOString(),
      expiresAt: new Date(ends).toISOString(),
      completedAt: null,
      claimedDid: null,
      failure: null,
    };
    await this.ctx.c.claimSessions.insertOne(doc);
    return { session: doc, token };
  }

  /** The status a session reads as now: a pending session past its expiry is -2. */
  statusOf(s: ClaimSessionDoc): ClaimStatus {
    return s.status === -1 && Date.parse(s.expiresAt) <= this.now() ? -2 : s.status;
  }

  async find(token: string): Promise<ClaimSessionDoc | null> {
    if (!token || token.length > 100) return null;
    return this.ctx.c.claimSessions.findById(hashToken(token));
  }

  /** The session when it can still be claimed; null when unknown, expired or finished. */
  async pending(token: string): Promise<ClaimSessionDoc | null> {
    const s = await this.find(token);
    return s && this.statusOf(s) === -1 ? s : null;
  }

  /** The 404 of a token that cannot be claimed (now): why, and what to do instead. */
  private async notPending(token: string): Promise<AppError> {
    const s = await this.find(token);
    if (!s) return notFound('no claim session for this token: check that the link was copied whole');
    if (s.status === 2) {
      const login = `${this.ctx.config.stewardCommand} login ${this.ctx.config.publicUrl}`;
      return notFound(`this claim link was already used: the account is claimed. Sign in with the key that claimed it instead (the dashboard's sign-in page, or '${login}')`);
    }
    if (s.status === -1) return notFound('this claim link has expired: ask an admin for a new one (for the owner: restart Steward, which prints a fresh one)');
    return notFound('this claim link no longer works (a newer one replaced it, or the claim failed): ask an admin for a new one');
  }

  /** GET /api/user/claim/{token}: what a wallet signs to claim (404 unless pending). */
  async challengeOf(token: string): Promise<ClaimChallenge> {
    const s = await this.pending(token);
    if (!s) throw await this.notPending(token);
    return { nonce: s.nonce, serverDid: this.ctx.identity.did, expiresAt: s.expiresAt };
  }

  /** The wallet QR code of a pending session, as SVG (404 unless pending). */
  async qrSvg(token: string): Promise<string> {
    if (!(await this.pending(token))) throw await this.notPending(token);
    return QRCode.toString(this.qrText(token), { type: 'svg', margin: 2 });
  }

  /** GET /api/user/listen/{token}: -1 pending, 2 success (with the DID), -2 failed or expired. */
  async listen(token: string): Promise<ClaimListen> {
    const s = await this.find(token);
    if (!s) throw notFound('no claim session for this token');
    const status = this.statusOf(s);
    return { status, ...(status === 2 && s.claimedDid ? { did: s.claimedDid } : {}), expiresAt: s.expiresAt };
  }

  /**
   * Completes a claim. Throws 404 (not pending), 400 (no usable public key), 401 (wrong
   * signature; the session stays pending), 409 (the DID is taken or the user already claimed; the
   * session fails).
   */
  async complete(token: string, body: ClaimBody): Promise<{ did: string; userId: string }> {
    const session = await this.pending(token);
    if (!session) throw await this.notPending(token);
    const key = resolvePublicKey(body.did, body.publicKey);
    if (!key) {
      throw new AppError(
        400,
        'invalid_public_key',
        'publicKey (base64url of the raw 32-byte Ed25519 key) is required unless the DID is an Ed25519 did:key, and must match it when given',
      );
    }
    if (!verifySignature(key, claimMessage(token, session.nonce), body.signature)) {
      throw new AppError(401, 'invalid_signature', `the signature does not verify over ${PURPOSE.claim}<token>:<nonce> with this key`);
    }

    const nowIso = new Date(this.now()).toISOString();
    const taken = await this.ctx.c.claimSessions.findOneAndUpdate(
      { _id: session._id, status: -1, claimedDid: null, expiresAt: { $gt: nowIso } },
      { $set: { claimedDid: body.did } },
    );
    if (!taken) {
      const again = await this.pending(token);
      if (!again) throw await this.notPending(token);
      throw new AppError(409, 'claim_in_progress', 'another claim of this session is in progress');
    }

    let user: UserDoc;
    try {
      user = await this.bind(taken, body.did, encodeBase64Url(key), body.name);
    } catch (err) {
      if (err instanceof ClaimFailure) {
        await this.ctx.c.claimSessions.updateOne(
          { _id: taken._id },
          { $set: { status: -2, failure: err.code, completedAt: new Date(this.now()).toISOString() } },
        );
        await this.ctx.audit.record('system', {
          action: 'claim.failed',
          targetType: 'user',
          target: taken.userId,
          details: { kind: taken.kind, did: body.did, reason: err.code },
        });
      } else {
        // Not the claimant's fault (the store): give the session back.
        await this.ctx.c.claimSessions.updateOne({ _id: taken._id }, { $set: { claimedDid: null } }).catch(() => undefined);
      }
      throw err;
    }

    const doneAt = new Date(this.now()).toISOString();
    await this.ctx.c.claimSessions.updateOne({ _id: taken._id }, { $set: { status: 2, completedAt: doneAt } });
    // Other ways to claim the same account are moot now.
    await this.ctx.c.claimSessions.updateMany(
      { userId: user._id, status: -1 },
      { $set: { status: -2, failure: 'user_claimed', completedAt: doneAt } },
    );
    await this.ctx.c.invitations.deleteMany({ userId: user._id });
    if (user.isOwner) {
      this.ctx.log.info({ userId: user._id, did: body.did, kind: taken.kind }, `the owner account was claimed by ${body.did}: sign in with that key (steward login, or the dashboard)`);
    }
    await this.ctx.audit.record(userPrincipal(user, '', 'bearer')!, {
      action: 'claim.completed',
      targetType: 'user',
      target: user._id,
      details: { kind: taken.kind, did: body.did, newUser: taken.userId === null },
    });
    return { did: body.did, userId: user._id };
  }

  /** Makes `did` the DID of the session's user (a new member for an open invite link). */
  private async bind(session: ClaimSessionDoc, did: string, publicKey: string, name: string | undefined): Promise<UserDoc> {
    const c = this.ctx.c;
    const nowIso = new Date(this.now()).toISOString();
    const claimed = { did, publicKey, claimedAt: nowIso };
    if (await c.agents.findById(did)) throw new ClaimFailure(409, 'did_taken', 'this DID belongs to an agent');

    if (session.userId === null) {
      const userId = randomUUID();
      await this.reserve(did, userId, nowIso);
      const user = await createUser(c, {
        id: userId,
        name: name?.trim() || 'New user',
        role: 'member',
        did,
        publicKey,
        workspace: { id: this.defaultWorkspace._id, role: 'member' },
        at: nowIso,
      });
      return user;
    }

    const user = await c.users.findById(session.userId);
    if (!user) throw new ClaimFailure(404, 'user_not_found', 'the account this session was for no longer exists');
    if (user.did) throw new ClaimFailure(409, 'already_claimed', 'this account has already been claimed');
    await this.reserve(did, user._id, nowIso);
    const r = await c.users.updateOne({ _id: user._id, did: null }, { $set: claimed });
    if (r.matched === 0) {
      await c.userDids.deleteOne({ _id: did, userId: user._id });
      throw new ClaimFailure(409, 'already_claimed', 'this account has already been claimed');
    }
    return { ...user, ...claimed };
  }

  /** Reserves a DID for a user before `users.did` is set (the reservation is what makes it unique). */
  private async reserve(did: string, userId: string, nowIso: string): Promise<void> {
    try {
      await this.ctx.c.userDids.insertOne({ _id: did, userId, createdAt: nowIso });
    } catch (err) {
      if (!(err instanceof DuplicateKeyError)) throw err;
      // A reservation of this very user left behind by an interrupted claim is no conflict.
      const holder = await this.ctx.c.userDids.findById(did);
      if (holder?.userId !== userId) throw new ClaimFailure(409, 'did_taken', 'this DID already belongs to another user');
    }
  }

  /**
   * POST /api/server/directory/send-qr: a claim session for an unclaimed user, mailed to them
   * when asked. Whoever holds the token claims the account, so an admin must not open one for a
   * user with the owner role (only an owner gives that role, docs/people.md).
   */
  async openForUser(by: UserPrincipal, userId: string, sendByEmail: boolean): Promise<{ token: string; emailSent: boolean }> {
    const user = await this.ctx.c.users.findById(userId);
    if (!user || user.did) throw notFound('no unclaimed user with this id');
    if (user.role === 'owner' && !isOwnerLike(by)) throw forbidden('a claim for a user with the owner role can only be opened by an owner', 'owner_only');
    const { session, token } = await this.open('send-qr', { userId: user._id });
    const emailSent = sendByEmail ? await this.mailClaim(token, session, user) : false;
    await this.ctx.audit.record(by, {
      action: 'claim.created',
      targetType: 'user',
      target: user._id,
      details: { kind: session.kind, expiresAt: session.expiresAt, sendByEmail, emailSent },
    });
    return { token, emailSent };
  }

  /** GET /api/users/invite: an open invite link; whoever claims it becomes a new member. */
  async openInviteLink(by: UserPrincipal): Promise<{ token: string; nonce: string }> {
    const { session, token } = await this.open('invite-link', { userId: null });
    await this.ctx.audit.record(by, {
      action: 'claim.created',
      targetType: 'claim_session',
      target: null,
      details: { kind: session.kind, expiresAt: session.expiresAt },
    });
    return { token, nonce: session.nonce };
  }

  /** Sends the claim mail of a session (opened with `token`) to the user's address; true when the SMTP server accepted it. */
  async mailClaim(token: string, session: ClaimSessionDoc, user: UserDoc): Promise<boolean> {
    if (!this.mailer.configured || !user.email) return false;
    const msg = await claimMail({
      to: user.email,
      name: user.name,
      publicUrl: this.ctx.config.publicUrl,
      connectionString: this.connectionString(token),
      qrText: this.qrText(token),
      walletUrl: this.ctx.config.walletUrl,
      expiresAt: session.expiresAt,
    });
    return this.mailer.send(msg);
  }

  /**
   * Owner bootstrap: while the owner is unclaimed, opens a fresh 'owner-bootstrap' claim session
   * (earlier ones stop working) and prints how to claim it — the connection string (the claim URL),
   * the wallet link and a QR code for the terminal — on standard error, so that standard output
   * stays the JSON log, one object per line. Called by `steward serve` after every start; returns
   * the session and its token, or null when the owner is already claimed. The log says that a
   * claim waits, without the link (a claim token is a secret).
   */
  async announceOwnerClaim(
    write: (text: string) => void = (t) => process.stderr.write(t),
    // The QR code's escapes only make sense on a terminal; a log file or a pipe gets the links alone.
    terminal: boolean = Boolean(process.stderr.isTTY),
  ): Promise<{ session: ClaimSessionDoc; token: string } | null> {
    const { ctx } = this;
    const owner = await ctx.c.users.findOne({ isOwner: true, did: null });
    if (!owner) return null;
    await ctx.c.claimSessions.updateMany(
      { userId: owner._id, kind: 'owner-bootstrap', status: -1 },
      { $set: { status: -2, failure: 'superseded', completedAt: new Date().toISOString() } },
    );
    const { session, token } = await this.open('owner-bootstrap', {
      userId: owner._id,
      ttlMs: Math.max(ctx.config.claimTtlMs, OWNER_CLAIM_MIN_TTL_MS),
    });
    await ctx.audit.record('system', {
      action: 'claim.created',
      targetType: 'user',
      target: owner._id,
      details: { kind: session.kind, expiresAt: session.expiresAt },
    });
    const cs = this.connectionString(token);
    const qrText = this.qrText(token);
    const st = ctx.config.stewardCommand;
    const qr = terminal ? ['  Or scan this QR code with a wallet app:', '', await QRCode.toString(qrText, { type: 'terminal', small: true }), ''] : [];
    ctx.log.info({ expiresAt: session.expiresAt }, 'the owner account is not claimed yet: the claim link is on standard error (steward wallet claim <link>, or the dashboard\'s sign-in page)');
    write(
      [
        '',
        'Steward has no claimed owner yet. Claim the owner account with a wallet before',
        `${session.expiresAt} (a restart prints a new claim and cancels this one).`,
        '',
        `  Connection string (claim URL): ${cs}`,
        `  Wallet link:                   ${qrText}`,
        '',
        '  With the bundled wallet:',
        `    ${st} wallet create`,
        `    ${st} wallet claim '${cs}'`,
        `    ${st} login ${ctx.config.publicUrl}`,
        '',
        ...qr,
      ].join('\n'),
    );
    return { session, token };
  }
}

/** The owner's claim, printed (ClaimService.announceOwnerClaim) by whatever holds the server's claim service. */
export function announceOwnerClaim(
  deps: { claims: ClaimService },
  write?: (text: string) => void,
  terminal?: boolean,
): Promise<{ session: ClaimSessionDoc; token: string } | null> {
  return deps.claims.announceOwnerClaim(write, terminal);
}
