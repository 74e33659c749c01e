/**
 * Email invitations (interface §4.12, §3): the owner invites an address; Steward keeps an
 * unclaimed user for it and one active invitation (a UUID token) that lives 7 days. The invitee
 * turns the token into a claim session (POST /api/users/invite/from-email) and claims it with a
 * wallet; the claim deletes the invitation. The token is given out once (the answer to the owner
 * and the mail); the store keeps its SHA-256 as the invitation's id.
 */
import { createUser } from './users.js';
import { randomUUID } from 'node:crypto';
import type { InvitationDoc, UserDoc, WorkspaceDoc } from '../store/collections.js';
import type { GlobalRole, UserPrincipal } from '../domain/principal.js';
import { conflict, notFound } from '../domain/errors.js';
import { invitationMail } from '../integrations/mail.js';
import type { ClaimService } from './claims.js';
import { hashToken } from './sessions.js';
import type { ServiceCore } from './core.js';

export const INVITATION_TTL_MS = 7 * 24 * 3600_000;

export class InvitationService {
  private readonly claims: ClaimService;
  /** Where an invited person starts. */
  private readonly defaultWorkspace: WorkspaceDoc;

  constructor(
    private readonly ctx: ServiceCore,
    deps: { claims: ClaimService; defaultWorkspace: WorkspaceDoc },
    private readonly now: () => number = Date.now,
  ) {
    this.claims = deps.claims;
    this.defaultWorkspace = deps.defaultWorkspace;
  }

  /**
   * Invites an address: reuses the unclaimed user of that email (taking the new name and role)
   * or creates one; replaces any earlier invitation of the address; mails the new one when SMTP
   * is configured. 409 when a claimed user already has the address.
   */
  async invite(by: UserPrincipal, a: { email: string; name: string; role: GlobalRole }): Promise<{ token: string; userId: string; emailSent: boolean }> {
    const c = this.ctx.c;
    const emailLower = a.email.toLowerCase();
    const nowIso = new Date(this.now()).toISOString();
    const sameEmail = await c.users.find({ emailLower });
    if (sameEmail.some((u) => u.did !== null)) throw conflict('a user with this email address already has an account', 'already_registered');

    let user: UserDoc | undefined = sameEmail[0];
    if (user) {
      const set = user.isOwner ? { name: a.name, email: a.email } : { name: a.name, email: a.email, role: a.role };
      await c.users.updateOne({ _id: user._id }, { $set: set });
    } else {
      user = await createUser(c, {
        name: a.name,
        email: a.email,
        role: a.role,
        workspace: { id: this.defaultWorkspace._id, role: 'member' },
        at: nowIso,
      });
    }

    const old = await c.invitations.find({ emailLower });
    if (old.length > 0) {
      await c.invitations.deleteMany({ emailLower });
      await this.cancelClaims(old.map((i) => i._id), 'invitation_replaced');
    }
    const token = randomUUID();
    const invitation: InvitationDoc = {
      _id: hashToken(token),
      email: a.email,
      emailLower,
      name: a.name,
      role: a.role,
      userId: user._id,
      createdAt: nowIso,
      createdBy: by.did,
    };
    await c.invitations.insertOne(invitation);

    const emailSent = await this.claims.mailer.send(
      invitationMail({ to: a.email, name: a.name, role: a.role, publicUrl: this.ctx.config.publicUrl, token }),
    );
    await this.ctx.audit.record(by, {
      action: 'user.invite',
      targetType: 'user',
      target: user._id,
      details: { email: a.email, role: a.role, newUser: sameEmail.length === 0, replacedInvitations: old.length, emailSent },
    });
    return { token, userId: user._id, emailSent };
  }

  /** The invitation of a token while it is active (younger than 7 days); null otherwise. */
  async lookup(token: string): Promise<InvitationDoc | null> {
    if (!token || token.length > 100) return null;
    const inv = await this.ctx.c.invitations.findById(hashToken(token));
    if (!inv || Date.parse(inv.createdAt) + INVITATION_TTL_MS <= this.now()) return null;
    return inv;
  }

  /** GET /api/invitations/{token}: an active invitation (404 when unknown or 7 days old). */
  async get(token: string): Promise<InvitationDoc> {
    const inv = await this.lookup(token);
    if (!inv) throw notFound('no active invitation for this token (unknown, declined, used or 7 days old)');
    return inv;
  }

  /** Opens an 'invitation' claim session for the invited user (and its token); 404 when the invitation is not active. */
  async openClaim(token: string) {
    const inv = await this.lookup(token);
    if (!inv) throw notFound('no active invitation for this token (unknown, declined, used or 7 days old)');
    const user = await this.ctx.c.users.findById(inv.userId);
    if (!user || user.did) {
      await this.ctx.c.invitations.deleteOne({ _id: inv._id });
      throw notFound('no active invitation for this token (unknown, declined, used or 7 days old)');
    }
    // The claim ends with the invitation (7 days), if CLAIM_TTL_MINUTES has not ended it before.
    const opened = await this.claims.open('invitation', {
      userId: user._id,
      invitationId: inv._id,
      notAfter: Date.parse(inv.createdAt) + INVITATION_TTL_MS,
    });
    await this.ctx.audit.record('system', {
      action: 'claim.created',
      targetType: 'user',
      target: user._id,
      details: { kind: opened.session.kind, expiresAt: opened.session.expiresAt },
    });
    return opened;
  }

  /** Deletes an invitation (declined, or done); pending claims opened through it stop. Idempotent. */
  async remove(token: string): Promise<boolean> {
    if (!token || token.length > 100) return false;
    const inv = await this.ctx.c.invitations.findById(hashToken(token));
    if (!inv) return false;
    const removed = await this.ctx.c.invitations.deleteOne({ _id: inv._id });
    if (removed === 0) return false;
    await this.cancelClaims([inv._id], 'invitation_deleted');
    await this.ctx.audit.record('system', {
      action: 'invitation.delete',
      targetType: 'user',
      target: inv.userId,
      details: { email: inv.email },
    });
    return true;
  }

  private async cancelClaims(invitationIds: string[], failure: string): Promise<void> {
    await this.ctx.c.claimSessions.updateMany(
      { invitationToken: { $in: invitationIds }, status: -1 },
      { $set: { status: -2, failure, completedAt: new Date(this.now()).toISOString() } },
    );
  }
}
