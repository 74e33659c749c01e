/**
 * What the live feed asks before it lets a person follow a topic, and again when their rights may
 * have changed: the same rules as the matching HTTP routes (agents and runs: the workspaces the
 * person belongs to, every one for a global admin; a workflow: as GET /api/workflows/{id}).
 */
import type { Collections } from '../store/collections.js';
import type { UserPrincipal } from '../domain/principal.js';
import { userPrincipal } from './sessions.js';
import { resolveWorkspace, visibleWorkspaceIds } from './workspaces.js';

export class FeedRights {
  constructor(private readonly c: Collections) {}

  /** The person as they are now (their role may have changed); null when the account is gone. */
  async current(user: UserPrincipal): Promise<UserPrincipal | null> {
    const doc = await this.c.users.findById(user.userId);
    return doc ? userPrincipal(doc, user.sessionId, user.via) : null;
  }

  /** The workspaces whose agents and runs the person sees; 'all' for a global admin. */
  async workspacesOf(user: UserPrincipal): Promise<readonly string[] | 'all'> {
    return visibleWorkspaceIds(this.c, user);
  }

  /** The id of a workspace (id or slug) the person sees; null for one they do not, or none. */
  async workspace(user: UserPrincipal, ref: string): Promise<string | null> {
    const ws = await resolveWorkspace(this.c, ref);
    return ws && (await this.sees(user, ws._id)) ? ws._id : null;
  }

  /** The workspace of a workflow the person may read; null for one they may not, or none. */
  async workflowWorkspace(user: UserPrincipal, workflowId: string): Promise<string | null> {
    const wf = await this.c.workflows.findById(workflowId);
    return wf && (await this.sees(user, wf.workspaceId)) ? wf.workspaceId : null;
  }

  private async sees(user: UserPrincipal, workspaceId: string): Promise<boolean> {
    const visible = await visibleWorkspaceIds(this.c, user);
    return visible === 'all' || visible.includes(workspaceId);
  }
}
