/**
 * The live feed's topic frames (/ws/feed, docs/feed.md): one source for their shapes, for the
 * services that publish them and the feed that folds them. Every frame carries `at` (ISO 8601).
 */

/** The topics a person may subscribe to by name (channels are subscribed to by channelId). */
export const FEED_TOPICS = ['presence', 'registrations', 'runs', 'audit', 'actors'] as const;
export type FeedTopicName = (typeof FEED_TOPICS)[number];

export const isFeedTopic = (name: string): name is FeedTopicName => (FEED_TOPICS as readonly string[]).includes(name);

export interface PresenceFrame {
  type: 'presence';
  did: string;
  workspaceIds: string[];
  online: boolean;
  at: string;
}

export interface RegistrationFrame {
  type: 'registration';
  id: string;
  did: string;
  name: string;
  status: 'pending' | 'approved' | 'rejected';
  at: string;
}

export interface RunFrame {
  type: 'run';
  workflowId: string;
  runId: string;
  /** The run's status. */
  status: string;
  /** With a step's transition: the step, its attempt (1 for the first) and its status. */
  stepId?: string;
  attempt?: number;
  stepStatus?: string;
  at: string;
}

export interface AuditFrame {
  type: 'audit';
  /** The entry as GET /api/audit lists it. */
  entry: { id: string; at: string; actor: string; action: string; targetType: string; target: string | null; details: Record<string, unknown> };
  at: string;
}

export interface ActorTransitionFrame {
  type: 'actor.transition';
  actorId: string;
  kind: string;
  state: unknown;
  event: string;
  from?: unknown;
  at: string;
}

/**
 * The entity a frame is about: of several frames with the same key waiting for one subscriber,
 * only the latest is sent. Null for frames that are never folded (audit entries, messages).
 */
export function foldKey(frame: { type: string; [field: string]: unknown }): string | null {
  switch (frame.type) {
    case 'presence':
      return `presence ${String(frame.did)}`;
    case 'actor.transition':
      return `actor ${String(frame.kind)} ${String(frame.actorId)}`;
    case 'registration':
      return `registration ${String(frame.id)}`;
    case 'run':
      return `run ${String(frame.runId)} ${typeof frame.stepId === 'string' ? frame.stepId : ''}`;
    default:
      return null;
  }
}
