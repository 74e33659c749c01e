/**
 * The roles of the interface: a person's global role (§2.13), their role in a workspace (§5;
 * hierarchical, see permissions.ts) and a member's role in a channel (§2.8).
 */
export const GLOBAL_ROLES = ['owner', 'admin', 'manager', 'operator', 'member'] as const;
export type GlobalRole = (typeof GLOBAL_ROLES)[number];

export type WorkspaceRole = 'member' | 'operator' | 'manager' | 'admin' | 'owner';
export const WORKSPACE_ROLES: readonly WorkspaceRole[] = ['member', 'operator', 'manager', 'admin', 'owner'];

export type ChannelRole = 'member' | 'moderator' | 'owner';
export const CHANNEL_ROLES: readonly ChannelRole[] = ['member', 'moderator', 'owner'];
