/**
 * Capability grants of people (interface §2.14, §4.12 rule 1, §5.6).
 *
 * A grant lets one user ask agents for some capabilities: on one agent, or on every agent when
 * `agentDid` is null, until `expiresAt` (null: no end). Sending an intent needs, besides a
 * workspace role of operator or higher, an unexpired grant covering the capability on that agent;
 * global admins skip this check (that is the caller's decision, not `hasGrant`'s). Grants are
 * read at every check, so a revoked grant stops working at once.
 */
import { nanoid } from 'nanoid';
import type { Collections, GrantDoc, UserDoc } from '../store/collections.js';
import type { Capability } from '../domain/capabilities.js';

export interface GrantView {
  id: string;
  agentDid: string | null;
  capabilities: Capability[];
  expiresAt: string | null;
  createdAt: string;
}

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
    _id: nanoid(),
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
