/**
 * One place that answers "may this principal do this here" for the workspace rules of the
 * interface (§5). Workspace roles are hierarchical, member < operator < manager < admin <
 * owner, and a global admin sits above them all.
 *
 * | Action                   | lowest workspace role |
 * |--------------------------|-----------------------|
 * | viewAgents               | member                |
 * | sendIntents              | operator              |
 * | approveToolRequests      | manager               |
 * | editWorkflows            | admin                 |
 * | manageWorkspaceUsers     | admin                 |
 * | manageWorkspaceAgents    | admin                 |
 * | managePolicies           | global admin only     |
 * | deleteWorkspace          | owner                 |
 * | manageGlobalSettings     | global admin only     |
 *
 * Sending an intent also needs an unexpired capability grant (see services/grants), except
 * for global admins; that check is not part of this table.
 */
import type { WorkspaceRole } from './roles.js';
import type { UserPrincipal } from './principal.js';

export type WorkspaceAction =
  | 'viewAgents'
  | 'sendIntents'
  | 'approveToolRequests'
  | 'editWorkflows'
  | 'manageWorkspaceUsers'
  | 'manageWorkspaceAgents'
  | 'managePolicies'
  | 'deleteWorkspace'
  | 'manageGlobalSettings';

const RANK: Record<WorkspaceRole, number> = { member: 1, operator: 2, manager: 3, admin: 4, owner: 5 };

/** The lowest workspace role allowed each action; null: global admins only. */
export const MIN_ROLE: Record<WorkspaceAction, WorkspaceRole | null> = {
  viewAgents: 'member',
  sendIntents: 'operator',
  approveToolRequests: 'manager',
  editWorkflows: 'admin',
  manageWorkspaceUsers: 'admin',
  manageWorkspaceAgents: 'admin',
  managePolicies: null,
  deleteWorkspace: 'owner',
  manageGlobalSettings: null,
};

export function roleRank(role: WorkspaceRole | null | undefined): number {
  return role ? RANK[role] : 0;
}

export function atLeast(role: WorkspaceRole | null | undefined, min: WorkspaceRole): boolean {
  return roleRank(role) >= RANK[min];
}

/**
 * Whether someone with `workspaceRole` in a workspace (null: not a member) may do `action`
 * there. `isGlobalAdmin` is the isAdmin flag of a person.
 */
export function can(who: { isGlobalAdmin: boolean; workspaceRole: WorkspaceRole | null }, action: WorkspaceAction): boolean {
  if (who.isGlobalAdmin) return true;
  const min = MIN_ROLE[action];
  return min !== null && atLeast(who.workspaceRole, min);
}

/** "Admin" in the interface: the isAdmin flag, the installation owner, or the global owner or admin role. */
export const isAdminLike = (p: UserPrincipal) => p.isAdmin || p.isOwner || p.role === 'owner' || p.role === 'admin';
/** The installation owner, or the global owner role. */
export const isOwnerLike = (p: UserPrincipal) => p.isOwner || p.role === 'owner';
