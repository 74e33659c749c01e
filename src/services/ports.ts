/**
 * The ports: every way a service reaches a socket, and what the transports hand to services.
 * Services depend on these interfaces only; in one process the agent gateway (src/ws/agent/)
 * and the live feed (src/ws/feed.ts) implement them. A cluster of processes sharing one store
 * would implement the same interfaces over a bus, routing each call to the process that holds
 * the socket: so a call whose answer may have to come from another process returns a promise,
 * while the calls on the hot paths (heartbeats, pushes) stay synchronous and allocate nothing.
 */
import type { Capability } from '../domain/capabilities.js';
import type { CertificateTerms } from '../domain/certificate.js';
import type { PushFrame } from '../domain/agent-protocol.js';

export type { PushFrame };
import type { Fence } from '../cluster/fence.js';

// -------------------------------------------------------------------------------------------------
// Reaching connected agents

/**
 * Runs when an agent completes its handshake. The agent's `ready` waits until the promise it
 * returns settles, and frames pushed to the agent meanwhile follow `ready` in the same write: the
 * state an area sends every agent at connect costs it no write of its own. Keep the work short
 * (a few reads): every agent's `ready` waits for it.
 */
export type ReadyListener = (did: string) => Promise<unknown> | void;

/** An intent as the agent receives it (interface §5.6). */
export interface IntentRequest {
  intentId: string;
  action: Capability;
  params: Record<string, unknown>;
  /** DID of the person on whose behalf the intent is sent. */
  requestedBy: string;
}

/** The agent's `intent_result`. */
export interface IntentResult {
  intentId: string;
  ok: boolean;
  output?: unknown;
  error?: string;
}

/**
 * What became of an intent: the agent's answer, or why there is none (`unavailable`: in a
 * cluster, the node holding the agent's socket could not be reached).
 */
export type IntentOutcome = { answered: IntentResult } | { failed: 'offline' | 'timeout' | 'disconnected' | 'unavailable' };

export interface AgentLink {
  /** Whether the agent has an authenticated, ready socket now. */
  isOnline(did: string): boolean;
  /**
   * Sends one frame (llm_config, skills_config, channel_message_send, intent, ...: the protocol's
   * PushFrame union) to the agent's ready socket; false when it is not connected (nothing is
   * queued). In a cluster: true once the frame is on its way to the process holding the socket.
   */
  push(did: string, frame: PushFrame): boolean;
  /** Sends an intent and resolves with the agent's answer, or with why there is none (never rejects). */
  request(did: string, intent: IntentRequest, timeoutMs: number): Promise<IntentOutcome>;
  /** Ends the agent's socket with `code` and forgets it: nothing about that socket reaches the agent's actor afterwards. */
  drop(did: string, code: number, reason: string): void;
  /** Runs `listener` each time an agent completes its handshake (see ReadyListener); returns its removal. */
  onReady(listener: ReadyListener): () => void;
}

/** Connected agents' lastSeen (ms): DIDs and times at the same index. */
export interface LiveSeen {
  dids: string[];
  ms: number[];
}

export interface AgentPresence {
  /** For each DID, the time (ms) of the last frame on its ready socket; undefined when it is offline. */
  lastActive(dids: readonly string[]): Promise<Array<number | undefined>>;
  /**
   * This process's ready agents active since they were last collected, each marked collected:
   * what the lastSeen writer stores (every process writes its own agents').
   */
  collectActive(): LiveSeen;
  /**
   * A number that changes whenever an agent comes online or goes offline here, so that a count
   * of online agents can be kept until it does; absent where it cannot say (in a cluster, other
   * nodes' agents come and go and nodes leave).
   */
  readonly changes?: number;
}

/** Re-certifying connected agents whose certificate terms changed (a policy was created or deleted). */
export interface AgentCertification {
  /**
   * Sends each connected agent of `dids` whose terms changed update_capabilities and a new
   * certificate_offer; `termsOf` gives an agent's terms from the capabilities it was approved
   * for. Resolves to the DIDs that were sent one (`sentTo`).
   */
  reissue(dids: readonly string[], termsOf: (did: string, approved: readonly Capability[]) => CertificateTerms, policyVersion: number): Promise<string[]>;
}

// -------------------------------------------------------------------------------------------------
// What the agent gateway hands to services

/** The sender of a heartbeat, as its sink sees it (the connection itself: nothing is made per heartbeat). */
export interface HeartbeatPeer {
  readonly did: string | null;
  /** Whether the socket is still open: a delta of a closed one is dropped (the agent sends it again). */
  readonly alive: boolean;
  ackHeartbeat(seq: number): void;
}

/**
 * Receives heartbeat deltas and calls `peer.ackHeartbeat(seq)` once they are durable
 * (src/services/token-usage.ts). Nothing is allocated per heartbeat for the ack: a fleet's
 * steady heartbeats are most of what a held fleet allocates.
 */
export interface HeartbeatSink {
  record(peer: HeartbeatPeer, seq: number, promptTokens: number, completionTokens: number): void;
  /** The highest seq of the agent whose delta is stored (a heartbeat at or below it is not counted again); null when none. */
  lastStoredSeq(did: string): number | null;
  /**
   * In a cluster, reads the agent's last stored seq from the store before `lastStoredSeq` is asked
   * (another node may have stored its latest heartbeats); null when there is nothing to read.
   */
  refreshStoredSeq?(did: string): Promise<void> | null;
}

// -------------------------------------------------------------------------------------------------
// The people's live feed

/**
 * Who may receive a frame of a topic whose subscribers see different parts (presence, runs): plain
 * data, so that a bus can carry it with the frame. Each subscriber's own filter (a workflow, an
 * actor kind) applies on top. No audience: every subscriber of the topic.
 */
export interface FeedAudience {
  /** Only people who may see one of these workspaces (a global admin sees all). */
  workspaceIds?: readonly string[];
  /** Only global admins. */
  adminOnly?: boolean;
}

/**
 * Publishing to the subscribers of a live-feed topic (`channel:<id>`, `actors`, `presence`,
 * `registrations`, `runs`, `audit`). Frames are JSON objects with a `type` and an `at` (ISO 8601;
 * added when missing).
 */
export interface FeedPublisher {
  /** Whether anyone is subscribed (so a frame nobody would read is not built). */
  hasSubscribers(topic: string): boolean;
  /** Sends `frame` to every subscriber of `topic` within `audience`; nothing when there is none. */
  publish(topic: string, frame: object, audience?: FeedAudience): void;
}

// -------------------------------------------------------------------------------------------------
// The other nodes of a cluster (none in one process: docs/cluster.md)

/**
 * Broadcasts and scatter/gather among the nodes (src/cluster/peers.ts). In one process there are
 * no peers (`clustered` false): broadcasts reach nobody and gathers answer at once with nothing,
 * so a service checks `clustered` before building what only other nodes would read. Delivery is
 * at most once: what must survive is in the store before a broadcast, and each caller says what
 * a lost message means for its path.
 */
export interface PeerNodes {
  readonly clustered: boolean;
  /** Sends `data` to every other node's `onBroadcast(topic)` handlers; false when the bus is down. */
  broadcast(topic: string, data: unknown): boolean;
  /** `via`: heard on the bus, or read from the change log (an announcement whose broadcast this node missed). */
  onBroadcast(topic: string, handler: (data: unknown, via: 'bus' | 'log') => unknown): void;
  /**
   * Broadcasts `data` and appends it to the store's change log (once `stored`, the write of what
   * it names, settles, when given), which every other node reads
   * every period: it reaches their `onBroadcast(topic)` handlers once, from the log when the bus
   * lost it (then possibly after later news: a handler of the log reads the store's current state).
   */
  announce(topic: string, data: unknown, stored?: Promise<unknown>): void;
  /** Runs when this node missed announcements for good (a writer died mid-append, or the log was trimmed past it): read everything again. */
  onChangesLost(fn: () => unknown): void;
  /** Asks every other live node at once; the answers that came by the deadline, and the nodes that gave none. */
  gather<T>(topic: string, data: unknown, deadlineMs?: number): Promise<{ answers: T[]; missing: string[] }>;
  onGather(topic: string, handler: (data: unknown) => unknown): void;
  /** Runs after the bus is back from an outage: re-read what broadcasts keep fresh. */
  onResync(fn: () => unknown): void;
}

/**
 * Where actors live (src/cluster/placement.ts): in a cluster each actor lives on the node that
 * owns its shard, and a command for it runs there (`run`: here at once when it is this node's,
 * else a request on the shard's subject, retried while the shard changes hands). In one process
 * every actor is here and `run` calls the handler directly.
 */
export interface ActorPlacement {
  readonly clustered: boolean;
  /** Whether the actor `key` (`<kind>:<id>`) lives on this node now. */
  isLocal(key: string): boolean;
  /** Runs command `op` for the actor `key` where it lives; its answer, or the AppError it failed with. */
  run<T>(key: string, op: string, data: unknown, timeoutMs?: number): Promise<T>;
  /** Answers `op` for the actors that live here. */
  handle(op: string, fn: (data: unknown) => unknown): void;
  /** The shard of an actor key. */
  shardOf(key: string): number;
  /** Runs once a shard is this node's (restore its actors, resume their work); awaited before the shard's commands are served. */
  onAcquired(fn: (shard: number) => Promise<void> | void): void;
  /** Runs once a shard is no longer this node's, before its actors are dropped: stop the work done for them here. */
  onReleased(fn: (shard: number) => Promise<void> | void): void;
  /** The fence to write an owned document of the actor `key` under (null in one process, or when not owned). */
  fenceFor(key: string): Fence | null;
  /** A fenced write was refused (StaleEpochError): this node stops acting for `shard`. */
  stale(shard: number): void;
}
