/**
 * A running Steward as tests, benchmarks and tools hold it: the parts they reach into, built by
 * the composition root (build.ts). Nothing inside the server reads this handle.
 */
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { Store } from '../store/types.js';
import type { Collections, WorkspaceDoc } from '../store/collections.js';
import type { ActorHost } from '../actors/host.js';
import type { SecretBox } from '../domain/secrets.js';
import type { Metrics } from '../http/metrics.js';
import type { Router } from '../http/router.js';
import type { ServerIdentity } from '../services/server-identity.js';
import type { Sessions } from '../services/sessions.js';
import type { AuditLog } from '../services/audit.js';
import type { UserService } from '../services/users.js';
import type { WorkspaceService } from '../services/workspaces.js';
import type { ClaimService } from '../services/claims.js';
import type { FleetService } from '../services/fleet.js';
import type { PolicyService } from '../services/policies.js';
import type { TokenUsage } from '../services/token-usage.js';
import type { FleetSummary } from '../services/fleet-summary.js';
import type { IntentService } from '../services/intents.js';
import type { AgentViews } from '../services/agent-views.js';
import type { AgentRoster } from '../services/agent-roster.js';
import type { SkillService } from '../services/skills.js';
import type { WorkflowRuns } from '../services/workflow-runs.js';
import type { ScheduleService } from '../services/schedules.js';
import type { AgentConnections } from '../ws/agent/connections.js';
import type { ActorPlacement, AgentLink } from '../services/ports.js';
import type { ClusterNode } from '../cluster/node.js';
import type { Feed } from '../ws/feed.js';
import type { SocketRegistry } from '../ws/sockets.js';

/** The fleet's parts. */
export interface Fleet {
  service: FleetService;
  policies: PolicyService;
  /** The agent gateway's connection map: who is online, pushes, ready listeners, the online count. */
  gateway: AgentConnections;
  tokens: TokenUsage;
  intents: IntentService;
  views: AgentViews;
  feed: Feed;
  /** The counters of GET /api/fleet/summary. */
  summary: FleetSummary;
  /** The rows of GET /api/agents, kept in memory (changes written to the store directly: `changed`). */
  roster: AgentRoster;
}

export interface StewardHandle {
  config: Config;
  log: Logger;
  store: Store;
  c: Collections;
  actors: ActorHost;
  /** Where each actor lives (in a cluster, on the owner of its shard) and how a command reaches it. */
  placement: ActorPlacement;
  metrics: Metrics;
  router: Router;
  secrets: SecretBox;
  identity: ServerIdentity;
  sessions: Sessions;
  audit: AuditLog;
  sockets: SocketRegistry;
  /** The default workspace as it was at start (its id never changes). */
  defaultWorkspace: WorkspaceDoc;
  version: string;
  userService: UserService;
  workspaceService: WorkspaceService;
  claims: ClaimService;
  /** Reaches the agents connected to this process (its connection map). */
  agentPush: AgentConnections;
  /** Reaches connected agents wherever they are (the AgentLink port: in a cluster, across nodes). */
  agents: AgentLink;
  /** Cluster mode: this node (its bus, membership, shards); undefined in one process. */
  cluster?: ClusterNode;
  /** Sends intents with every check of POST /api/agents/{did}/intents. */
  agentIntents: IntentService;
  skills: SkillService;
  /** The workflow runs' executor; its `clock` and `channelPoster` are replaceable in tests. */
  workflows: WorkflowRuns;
  schedules: ScheduleService;
  fleet: Fleet;
}

export interface Steward {
  ctx: StewardHandle;
  port: number;
  /** Base URL of this server on loopback, e.g. http://127.0.0.1:41234 */
  url: string;
  close(): Promise<void>;
}

/** The fleet of a running server. */
export function fleetOf(ctx: Pick<StewardHandle, 'fleet'>): Fleet {
  return ctx.fleet;
}
