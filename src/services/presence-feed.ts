/**
 * The live feed's `presence` topic: an agent coming online (its handshake done) or going offline
 * (its socket closed), for the people who see its workspaces (as GET /api/agents shows them) and
 * global admins. Nothing is looked up or built while nobody follows the topic.
 *
 * An agent's workspaces are looked up when it comes online and reused when it goes offline, so
 * its two frames leave in the order of the events and a burst of disconnections costs no reads.
 */
import type { Collections } from '../store/collections.js';
import type { Logger } from '../log.js';
import type { PresenceFrame } from '../domain/feed-frames.js';
import type { FeedPublisher } from './ports.js';
import { agentWorkspaceIds } from './workspaces.js';

export class PresenceFeed {
  /** The workspaces of agents that came online while someone followed the topic. */
  private readonly workspaces = new Map<string, Promise<string[]>>();

  constructor(
    private readonly c: Collections,
    private readonly feed: FeedPublisher,
    private readonly log: Logger,
  ) {}

  /** An agent came online or went offline (the agent connections' presence hook). */
  changed(did: string, online: boolean): void {
    let ids = this.workspaces.get(did);
    if (!online) this.workspaces.delete(did);
    if (!this.feed.hasSubscribers('presence')) return;
    const at = new Date().toISOString();
    if (!ids) {
      ids = agentWorkspaceIds(this.c, did);
      if (online) this.workspaces.set(did, ids);
    }
    ids.then(
      (workspaceIds) => {
        const frame: PresenceFrame = { type: 'presence', did, workspaceIds, online, at };
        this.feed.publish('presence', frame, { workspaceIds });
      },
      (err: unknown) => {
        if (this.workspaces.get(did) === ids) this.workspaces.delete(did);
        this.log.error({ err, did }, 'presence could not be published (the agent workspaces could not be read)');
      },
    );
  }

  /** The agent joined or left a workspace: its workspaces are read again at its next change. */
  membershipChanged(did: string): void {
    this.workspaces.delete(did);
  }
}
