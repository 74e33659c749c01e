/**
 * NATS subject names of one cluster: `steward.<cluster>.<kind>.<token>...`.
 *
 * A subject token may not hold `.`, `*`, `>` or white space, and DIDs, ids and topics can hold
 * anything, so every token built from outside text goes through `token()`: text of the safe set
 * (letters, digits, `-`, `_`; at most 64) is kept as it is, anything else becomes `~` and a
 * 128-bit SHA-256 prefix in base64url (`~` is outside the safe set, so the two forms never meet).
 * An agent's DID is always hashed: every agent subject has the same length, and a receiver
 * checks the DID the message carries (a 128-bit collision is not a concern, a wrong guess is).
 */
import { createHash } from 'node:crypto';

const SAFE = /^[A-Za-z0-9_-]{1,64}$/;

/** True when `s` can stand as one subject token as it is. */
export function isSafeToken(s: string): boolean {
  return SAFE.test(s);
}

/** The 22-character hash token of any text. */
export function hashToken(s: string): string {
  return '~' + createHash('sha256').update(s, 'utf8').digest('base64url').slice(0, 22);
}

/** One subject token for any text: kept when safe, hashed otherwise. */
export function token(s: string): string {
  return isSafeToken(s) ? s : hashToken(s);
}

export interface Subjects {
  /** `steward.<cluster>`: every subject of the cluster starts with it. */
  readonly prefix: string;
  /** Where the node holding an agent's socket listens for it. */
  agent(did: string): string;
  /** Where the owner of a shard listens for commands to its actors. */
  shard(n: number): string;
  /** One node, by its id (commands meant for that node whatever it holds). */
  node(nodeId: string): string;
  /** A broadcast every node hears (e.g. `policy-changed`, `rebalance`). */
  bcast(...topic: string[]): string;
  /** A feed topic, subscribed by a node only while it has local subscribers to it. */
  feed(...topic: string[]): string;
  /** Every feed subject (for monitoring), `steward.<cluster>.feed.>`. */
  readonly allFeeds: string;
}

/** The subjects of cluster `cluster` (a safe token: letters, digits, `-`, `_`). */
export function clusterSubjects(cluster: string): Subjects {
  if (!isSafeToken(cluster)) throw new Error(`cluster name "${cluster}" must be 1 to 64 letters, digits, "-" or "_"`);
  const prefix = `steward.${cluster}`;
  const topic = (kind: string, parts: string[]): string => {
    if (parts.length === 0) throw new Error(`a ${kind} subject needs a topic`);
    return `${prefix}.${kind}.${parts.map(token).join('.')}`;
  };
  return {
    prefix,
    agent: (did) => `${prefix}.agent.${hashToken(did)}`,
    shard: (n) => {
      if (!Number.isInteger(n) || n < 0) throw new Error(`shard must be a non-negative integer, got ${n}`);
      return `${prefix}.shard.${n}`;
    },
    node: (nodeId) => `${prefix}.node.${token(nodeId)}`,
    bcast: (...parts) => topic('bcast', parts),
    feed: (...parts) => topic('feed', parts),
    allFeeds: `${prefix}.feed.>`,
  };
}
