/**
 * Capability grants of people (interface §2.14, §4.12 rule 1, §5.6).
 *
 * A grant lets one user ask agents for some capabilities: on one agent, or on every agent when
 * `agentDid` is null, until `expiresAt` (null: no end). Sending an intent needs, besides a
 * workspace role of operator or higher, an unexpired grant covering the capability on that agent;
 * global admins skip this check (that is the caller's decision, not `hasGrant`'s). Grants are
 * read at every check, so a revoked grant stops working at once.
 *
 * Issuing needs a claimed user (§4.12 rule 1), known capabilities, an existing agent (pending is
 * fine, rejected is not) or null (all agents), and an expiry in the future or null (no end).
 */
import { z } from 'zod';
import { capabilityList, timestamp } from '../domain/views.js';
import { newId } from '../domain/ids.js';
import type { Collections, GrantDoc, UserDoc } from '../store/collections.js';
import { CAPABILITIES, unknownCapability, type Capability } from '../domain/capabilities.js';
import type { UserPrincipal } from '../domain/principal.js';
import { badRequest, notFound } from '../domain/errors.js';
import type { ServiceCore } from './core.js';
import { userByRef } from './lookups.js';

/** A capability grant (interface §2.14). */
export const GrantView = z
  .strictObject({
    id: z.string(),
    agentDid: z.string().nullable().meta({ description: 'null: all agents' }),
    capabilities: capabilityList,
    expiresAt: timestamp.nullable(),
    createdAt: timestamp,
  })
  .meta({ id: 'Grant' });
export type GrantView = z.infer<typeof GrantView>;

export function toGrantView(g: GrantDoc): GrantView {
  return { id: g._id, agentDid: g.agentDid, capabilities: g.capabilities, expiresAt: g.expiresAt, createdAt: g.createdAt };
}

export interface NewGrant {
  agentDid: string | null;
  capabilities: Capability[];
  expiresAt: string | null;
}

/** Stores a grant for a claimed user (the caller checks the rules). */
export async function createGrant(c: Collections, user: UserDoc & { did: string }, input: NewGrant, createdBy: string): Promise<GrantDoc> {
  const doc: GrantDoc = {
    _id: newId(),
    userId: user._id,
    userDid: user.did,
    agentDid: input.agentDid,
    capabilities: [...new Set(input.capabilities)],
    expiresAt: input.expiresAt,
    createdAt: new Date().toISOString(),
    createdBy,
  };
  await c.grants.insertOne(doc);
  return doc;
}

/** A user's grants, newest first, expired ones included (their `expiresAt` says so). */
export async function grantsOf(c: Collections, userId: string): Promise<GrantDoc[]> {
  return c.grants.find({ userId }, { sort: { createdAt: -1, _id: 1 } });
}

/** Whether the user holds an unexpired grant covering `capability` on `agentDid` (or on all agents). */
export async function hasGrant(c: Collections, userId: string, agentDid: string, capability: string, now: Date = new Date()): Promise<boolean> {
  const found = await c.grants.findOne({
    userId,
    agentDid: { $in: [agentDid, null] },
    capabilities: capability,
    $or: [{ expiresAt: null }, { expiresAt: { $gt: now.toISOString() } }],
  });
  return found !== null;
}

/** What a grant asks for, as a request gives it. */
export interface GrantInput {
  agentDid: string | null;
  capabilities: string[];
  expiresAt?: string | null;
}

export class GrantService {
  constructor(private readonly ctx: ServiceCore) {}

  /** Grants a claimed user (by DID or id) capabilities on one agent or on all agents. */
  async issue(p: UserPrincipal, userRef: string, input: GrantInput): Promise<GrantDoc> {
    const { c } = this.ctx;
    const user = await userByRef(this.ctx.c, userRef);
    if (!user.did) throw badRequest(`user ${userRef} has not claimed their account yet; grants need a user with a DID`, 'unclaimed_user');
    const bad = unknownCapability(input.capabilities);
    if (bad !== null) throw badRequest(`unknown capability '${bad}'; expected one of ${CAPABILITIES.join(', ')}`, 'unknown_capability');
    let expiresAt: string | null = null;
    if (input.expiresAt) {
      const t = Date.parse(input.expiresAt);
      if (t <= Date.now()) throw badRequest(`expiresAt ${input.expiresAt} is not in the future`, 'expired');
      expiresAt = new Date(t).toISOString();
    }
    if (input.agentDid !== null) {
      // A grant may be made for an agent still awaiting approval, not for a rejected one.
      const agent = await c.agents.findById(input.agentDid);
      if (!agent || agent.status === 'rejected') throw notFound(`no agent ${input.agentDid}`);
    }
    const grant = await createGrant(c, { ...user, did: user.did }, { agentDid: input.agentDid, capabilities: input.capabilities as Capability[], expiresAt }, p.did);
    await this.ctx.audit.record(p, {
      action: 'grant.create',
      targetType: 'grant',
      target: grant._id,
      details: { userId: user._id, userDid: user.did, agentDid: grant.agentDid, capabilities: grant.capabilities, expiresAt },
    });
    return grant;
  }

  /** A user's grants, newest first (expired ones included). */
  async list(userRef: string): Promise<GrantDoc[]> {
    return grantsOf(this.ctx.c, (await userByRef(this.ctx.c, userRef))._id);
  }

  /** Revokes a grant of a user; it stops working at once. */
  async revoke(p: UserPrincipal, userRef: string, grantId: string): Promise<void> {
    const { c } = this.ctx;
    const user = await userByRef(this.ctx.c, userRef);
    const grant = await c.grants.findOne({ _id: grantId, userId: user._id });
    if (!grant) throw notFound(`user ${userRef} has no grant ${grantId}`);
    await c.grants.deleteOne({ _id: grant._id });
    await this.ctx.audit.record(p, {
      action: 'grant.revoke',
      targetType: 'grant',
      target: grant._id,
      details: { userId: user._id, userDid: grant.userDid, agentDid: grant.agentDid, capabilities: grant.capabilities },
    });
  }
}
