/**
 * Email invitations (interface §4.12, §3): the owner invites an address; Steward keeps an
 * unclaimed user for it and one active invitation (a UUID token) that lives 7 days. The invitee
 * turns the token into a claim session (POST /api/users/invite/from-email) and claims it with a
 * wallet; the claim deletes the invitation. The token is given out once (the answer to the owner
 * and the mail); the store keeps its SHA-256 as the invitation's id.
 */
import { createUser } from './users.js';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { pageFields } from '../domain/views.js';
import type { InvitationDoc, UserDoc, WorkspaceDoc } from '../store/collections.js';
import type { GlobalRole, UserPrincipal } from '../domain/principal.js';
import { conflict, forbidden, notFound } from '../domain/errors.js';
import { atLeast, isAdminLike } from '../domain/permissions.js';
import { memberRole } from './workspaces.js';
import { invitationMail } from '../integrations/mail.js';
import type { ClaimService } from './claims.js';
import { hashToken } from './sessions.js';
import type { ServiceCore } from './core.js';

export const INVITATION_TTL_MS = 7 * 24 * 3600_000;

/**
 * A pending invitation as the admins' list shows it: never its token. `id` is the stored id (the
 * token's SHA-256, from which the token cannot be found); `workspaceId` is the workspace the
 * invited person starts in.
 */
export const invitationSchema = z.object({
  id: z.string(),
  email: z.string(),
  name: z.string(),
  workspaceId: z.string(),
  role: z.string(),
  invitedBy: z.string().nullable(),
  createdAt: z.string(),
  expiresAt: z.string(),
});
export type InvitationView = z.infer<typeof invitationSchema>;

export const invitationPageSchema = z.strictObject({ invitations: z.array(invitationSchema), ...pageFields });
export type InvitationPage = z.infer<typeof invitationPageSchema>;

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

  /**
   * Pending invitations (younger than 7 days), newest first: every one for global admins and
   * owners; for an admin of the workspace invited people start in, the invitations to it; 403
   * for anyone else.
   */
  async list(p: UserPrincipal, q: { page: number; pageSize: number }): Promise<InvitationPage> {
    await this.needAdmin(p);
    const filter = { createdAt: { $gt: new Date(this.now() - INVITATION_TTL_MS).toISOString() } };
    const total = await this.ctx.c.invitations.count(filter);
    const docs = await this.ctx.c.invitations.find(filter, { sort: { createdAt: -1, _id: 1 }, skip: (q.page - 1) * q.pageSize, limit: q.pageSize });
    return { invitations: docs.map((d) => this.view(d)), total, page: q.page, pageSize: q.pageSize, totalPages: Math.ceil(total / q.pageSize) };
  }

  /**
   * Revokes a pending invitation by its id (as the list shows it), for who may list it; pending
   * claims opened through it stop. 404 when there is no such pending invitation.
   */
  async revoke(p: UserPrincipal, id: string): Promise<void> {
    await this.needAdmin(p);
    const inv = await this.ctx.c.invitations.findById(id);
    if (!inv || Date.parse(inv.createdAt) + INVITATION_TTL_MS <= this.now()) throw notFound(`no pending invitation ${id}`);
    if ((await this.ctx.c.invitations.deleteOne({ _id: inv._id })) === 0) throw notFound(`no pending invitation ${id}`);
    await this.cancelClaims([inv._id], 'invitation_revoked');
    await this.ctx.audit.record(p, { action: 'invitation.revoke', targetType: 'user', target: inv.userId, details: { email: inv.email } });
  }

  /** 403 unless the person may see invitations (global admin, owner, or admin of the workspace invited people join). */
  private async needAdmin(p: UserPrincipal): Promise<void> {
    if (isAdminLike(p)) return;
    if (atLeast(await memberRole(this.ctx.c, p.userId, this.defaultWorkspace._id), 'admin')) return;
    throw forbidden(`invitations are for admins (global, or of workspace ${this.defaultWorkspace.slug})`);
  }

  private view(d: InvitationDoc): InvitationView {
    return {
      id: d._id,
      email: d.email,
      name: d.name,
      workspaceId: this.defaultWorkspace._id,
      role: d.role,
      invitedBy: d.createdBy,
      createdAt: d.createdAt,
      expiresAt: new Date(Date.parse(d.createdAt) + INVITATION_TTL_MS).toISOString(),
    };
  }

  private async cancelClaims(invitationIds: string[], failure: string): Promise<void> {
    await this.ctx.c.claimSessions.updateMany(
      { invitationToken: { $in: invitationIds }, status: -1 },
      { $set: { status: -2, failure, completedAt: new Date(this.now()).toISOString() } },
    );
  }
}
