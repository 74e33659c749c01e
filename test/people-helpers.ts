/**
 * Helpers for the people suites (users, workspaces, permissions, grants, audit): a server whose
 * owner is claimed, agents stored the way the fleet stores them, workspaces created over HTTP,
 * and the error-shape check.
 */
import * as assert from 'uvu/assert';
import { generateKeyPair } from '../src/domain/did.js';
import type { AgentDoc, Capability } from '../src/store/collections.js';
import { startServer, type TestServer, type TestStartOptions } from './helpers.js';
import { ownerOf, type TestUser } from './fixtures.js';

/**
 * A fresh server (extra environment and start options allowed) whose owner (isOwner, isAdmin, role owner) is claimed
 * and has a session.
 */
export async function startWithOwner(env: Record<string, string> = {}, options: TestStartOptions = {}): Promise<{ s: TestServer; owner: TestUser }> {
  const keys = generateKeyPair();
  const s = await startServer({ STEWARD_OWNER_DID: keys.did, ...env }, undefined, options);
  const owner = await ownerOf(s);
  owner.keys = keys;
  return { s, owner };
}

/** An active agent record, as the fleet leaves it after approval; with `workspaceId`, a member (primary) of that workspace. */
export async function makeAgent(s: TestServer, name: string, capabilities: Capability[] = ['file_access'], workspaceId?: string): Promise<AgentDoc> {
  const keys = generateKeyPair();
  const now = new Date().toISOString();
  const agent: AgentDoc = {
    _id: keys.did,
    name,
    publicKey: keys.publicKey,
    version: '1.0.0',
    status: 'active',
    capabilities,
    requestedCapabilities: capabilities,
    registeredAt: now,
    lastSeen: null,
    isOnline: false,
  };
  await s.ctx.c.agents.insertOne(agent);
  if (workspaceId) await s.ctx.c.workspaceAgents.insertOne({ _id: `${workspaceId}:${agent._id}`, workspaceId, agentDid: agent._id, isPrimary: true, joinedAt: now });
  // Written behind the services' back: the agents list reads it again as a decision would have it.
  await s.ctx.fleet.roster.changed([agent._id]);
  return agent;
}

/** Creates a workspace over HTTP as `admin` (a global admin) and returns it. */
export async function makeWorkspace(admin: TestUser, name: string, extra: Record<string, unknown> = {}): Promise<{ id: string; slug: string; name: string }> {
  const r = await admin.api.post('/api/workspaces', { name, ...extra });
  assert.is(r.status, 201, `create workspace ${name}: ${r.text}`);
  return r.body.workspace;
}

/** Asserts the one error shape and, when given, its code. */
export function isError(r: { status: number; body: any; text: string }, status: number, code?: string): void {
  assert.is(r.status, status, r.text);
  assert.type(r.body?.error?.message, 'string', 'error.message present');
  if (code) assert.is(r.body.error.code, code, r.text);
}

export const enc = encodeURIComponent;
