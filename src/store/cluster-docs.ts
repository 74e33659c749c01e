/**
 * The stored documents of cluster mode: nodes (`cluster_nodes`), shard ownership and the epoch
 * counter (`cluster_shards`), and once-only claims (`cluster_claims`). Timestamps are ISO 8601
 * strings, compared as strings (they sort as they compare), as everywhere in the store.
 */

/** A node of the cluster, alive while `leaseUntil` is ahead (src/cluster/membership.ts). */
export interface ClusterNodeDoc {
  _id: string; // the node id (STEWARD_NODE_ID)
  /** Random per process start: two processes with one node id are told apart (and the second refused). */
  incarnation: string;
  startedAt: string;
  renewedAt: string;
  leaseUntil: string;
  /** The shard count the node runs with; nodes that disagree do not take shards. */
  shards: number;
  /** What operators see of the node (version, host); never read by the cluster logic. */
  meta: Record<string, string>;
  /** Cut off from the bus: the node takes no shards, and the others leave it out of their shares. */
  standby?: boolean;
}

/** One virtual shard: who owns it, under which epoch, until when (src/cluster/shards.ts). */
export interface ClusterShardDoc {
  _id: string; // `shard:<n>`
  shard: number;
  /** Node id of the owner; null when released or never taken. */
  owner: string | null;
  /** Fencing token of the current ownership: from the cluster-wide counter, higher at every takeover. */
  epoch: number;
  leaseUntil: string;
  acquiredAt: string | null;
}

/** The cluster-wide epoch counter, `_id` EPOCH_COUNTER_ID, in `cluster_shards`. */
export interface EpochCounterDoc {
  _id: string;
  /** The highest epoch handed out. */
  next: number;
}

export const EPOCH_COUNTER_ID = 'epochs';

/** A cron firing claimed by one node (src/cluster/claims.ts). */
export interface FiringClaimDoc {
  _id: string; // `fire:<scheduleId>@<fireTime>`
  kind: 'fire';
  scheduleId: string;
  fireTime: string;
  owner: string;
  claimedAt: string;
  /** When the claim may be swept (long after the firing). */
  expiresAt: string;
}

/** A named lease (e.g. the token roll-up): one holder at a time, taken over once expired. */
export interface LeaseDoc {
  _id: string; // `lease:<name>`
  kind: 'lease';
  owner: string | null;
  /** Higher at every change of holder: a fencing token for what the holder writes. */
  epoch: number;
  leaseUntil: string;
  acquiredAt: string | null;
  /** What the holder keeps of its work between holdings (NamedLease.writeNote): written only under its epoch. */
  note?: Record<string, unknown>;
}

export type ClusterClaimDoc = FiringClaimDoc | LeaseDoc;

/**
 * Where an agent is connected (cluster mode): the node holding its ready socket, with that
 * node's incarnation (`node` is `<nodeId>/<incarnation>`), so an entry left by a node that died
 * reads as offline once that node's lease has ended (src/ws/agent/cluster-link.ts).
 */
export interface AgentPresenceDoc {
  _id: string; // the agent's DID
  node: string;
  /** When the socket became ready (ms since the epoch, by the holding node's clock): the newer of two entries wins. */
  since: number;
}

/**
 * One change announced to every node (`change_log`, src/cluster/change-log.ts): the topic and
 * data of a broadcast, numbered by the cluster-wide counter, read by each node from where it
 * left off. Kept an hour.
 */
export interface ChangeEntryDoc {
  _id: string; // `change:<seq>`
  seq: number;
  topic: string;
  data: unknown;
  /** The writing node's `<id>/<incarnation>`: it skips its own. */
  from: string;
  at: string;
}

/** The change log's counter, `_id` CHANGE_COUNTER_ID, in `change_log`. */
export interface ChangeCounterDoc {
  _id: string;
  /** The highest sequence number handed out. */
  next: number;
}

export const CHANGE_COUNTER_ID = 'counter';
