/**
 * The role table of interface §5, row by row and role by role: against `can()`, and through the
 * real endpoint wherever one exists for the row (viewing agents, managing workspace users and
 * agents, deleting a workspace, global settings = creating workspaces).
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { enc, makeAgent, makeWorkspace, startWithOwner } from './people-helpers.js';
import { can, type WorkspaceAction } from '../src/domain/permissions.js';
import type { WorkspaceRole } from '../src/store/collections.js';

type Who = WorkspaceRole | 'global admin';
const WHO: Who[] = ['member', 'operator', 'manager', 'admin', 'owner', 'global admin'];

/** §5, copied from the interface document (yes = true), columns in the order of WHO. */
const TABLE: Array<[string, WorkspaceAction, boolean[]]> = [
  ['View agents in workspace', 'viewAgents', [true, true, true, true, true, true]],
  ['Send intents', 'sendIntents', [false, true, true, true, true, true]],
  ['Approve tool requests', 'approveToolRequests', [false, false, true, true, true, true]],
  ['Create or edit workflows', 'editWorkflows', [false, false, false, true, true, true]],
  ['Manage workspace users', 'manageWorkspaceUsers', [false, false, false, true, true, true]],
  ['Manage workspace agents', 'manageWorkspaceAgents', [false, false, false, true, true, true]],
  ['Create or manage policies', 'managePolicies', [false, false, false, false, false, true]],
  ['Delete workspace', 'deleteWorkspace', [false, false, false, false, true, true]],
  ['Manage global settings', 'manageGlobalSettings', [false, false, false, false, false, true]],
];

const test = suite('permissions: the §5 role table');
let s: TestServer;
let owner: TestUser;
let n = 0;

test.before(async () => {
  ({ s, owner } = await startWithOwner());
});

test.after(async () => {
  await s.stop(true);
});

/** A fresh workspace and a caller with `who` there (a global admin is no member at all). */
async function arena(who: Who): Promise<{ ws: { id: string; slug: string }; caller: TestUser }> {
  const ws = await makeWorkspace(owner, `Arena ${++n}`);
  const caller = who === 'global admin' ? await makeUser(s, { isAdmin: true }) : await makeUser(s, { workspaces: { [ws.id]: who } });
  return { ws, caller };
}

/**
 * Real requests for a row, each answering whether it was allowed (2xx) or refused (403); any
 * other status fails the test.
 */
const ENDPOINTS: Partial<Record<WorkspaceAction, Array<[string, (who: Who) => Promise<number>]>>> = {
  viewAgents: [
    [
      'GET /api/workspaces/{workspace}/agents',
      async (who) => {
        const { ws, caller } = await arena(who);
        return (await caller.api.get(`/api/workspaces/${ws.id}/agents`)).status;
      },
    ],
  ],
  manageWorkspaceUsers: [
    [
      'POST /api/workspaces/{workspace}/members',
      async (who) => {
        const { ws, caller } = await arena(who);
        const target = await makeUser(s);
        return (await caller.api.post(`/api/workspaces/${ws.id}/members`, { userDid: target.user.did, role: 'member' })).status;
      },
    ],
    [
      'PATCH /api/workspaces/{workspace}/members/{member}',
      async (who) => {
        const { ws, caller } = await arena(who);
        const target = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
        return (await caller.api.patch(`/api/workspaces/${ws.id}/members/${enc(target.user.did!)}`, { role: 'operator' })).status;
      },
    ],
    [
      'DELETE /api/workspaces/{workspace}/members/{member}',
      async (who) => {
        const { ws, caller } = await arena(who);
        const target = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
        return (await caller.api.del(`/api/workspaces/${ws.id}/members/${enc(target.user.did!)}`)).status;
      },
    ],
  ],
  manageWorkspaceAgents: [
    [
      'POST /api/workspaces/{workspace}/agents',
      async (who) => {
        const { ws, caller } = await arena(who);
        // The agent comes from another workspace, where the caller has the same role: an agent of
        // no workspace of theirs would be 404 (docs/api.md), one managed elsewhere 403.
        const home = await makeWorkspace(owner, `Home ${++n}`);
        const agent = await makeAgent(s, `agent-${n}`, undefined, home.id);
        if (who !== 'global admin') {
          await s.ctx.c.workspaceMembers.insertOne({ _id: `home-${n}`, workspaceId: home.id, userId: caller.user._id, role: who, isPrimary: false, joinedAt: new Date().toISOString() });
        }
        return (await caller.api.post(`/api/workspaces/${ws.id}/agents`, { agentDid: agent._id })).status;
      },
    ],
    [
      'DELETE /api/workspaces/{workspace}/agents/{agentDid}',
      async (who) => {
        const { ws, caller } = await arena(who);
        const agent = await makeAgent(s, `agent-${n}`);
        await owner.api.post(`/api/workspaces/${s.ctx.defaultWorkspace._id}/agents`, { agentDid: agent._id });
        await owner.api.post(`/api/workspaces/${ws.id}/agents`, { agentDid: agent._id });
        return (await caller.api.del(`/api/workspaces/${ws.id}/agents/${enc(agent._id)}`)).status;
      },
    ],
  ],
  deleteWorkspace: [
    [
      'DELETE /api/workspaces/{workspace}',
      async (who) => {
        const { ws, caller } = await arena(who);
        return (await caller.api.del(`/api/workspaces/${ws.id}`)).status;
      },
    ],
  ],
  manageGlobalSettings: [
    [
      'POST /api/workspaces',
      async (who) => {
        const { caller } = await arena(who);
        return (await caller.api.post('/api/workspaces', { name: `Created ${++n}` })).status;
      },
    ],
  ],
};

for (const [label, action, row] of TABLE) {
  for (const [i, who] of WHO.entries()) {
    const expected = row[i]!;
    test(`${label} — ${who}: ${expected ? 'yes' : 'no'}`, async () => {
      const subject = who === 'global admin' ? { isGlobalAdmin: true, workspaceRole: null } : { isGlobalAdmin: false, workspaceRole: who };
      assert.is(can(subject, action), expected, 'can()');
      for (const [endpoint, call] of ENDPOINTS[action] ?? []) {
        const status = await call(who);
        if (expected) assert.ok(status >= 200 && status < 300, `${endpoint}: expected success, got ${status}`);
        else assert.is(status, 403, `${endpoint}: expected 403`);
      }
    });
  }
}

test('someone with no role in the workspace may do nothing there', () => {
  for (const [, action] of TABLE) assert.is(can({ isGlobalAdmin: false, workspaceRole: null }, action), false, action);
});

test.run();
