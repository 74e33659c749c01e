/**
 * The live feed across a cluster: a frame published on one node reaches the feed subscribers of
 * every node. Each feed topic has a bus subject (`feed.<topic>`), which a node subscribes to only
 * while one of its own browsers follows the topic (InterestSubscriptions). So that a publisher does
 * not build frames nobody reads, nodes tell each other which topics they follow
 * (`bcast.feed-interest`, on every change and every third of the lease); a node's interest is
 * forgotten a lease after it was last heard.
 *
 * At most once: a frame lost on the way is not repeated (the feed is a live tail). A lost interest
 * announcement delays a node's first frames of a topic until the next announcement. After the bus
 * was down, the node closes its feed sockets (the root does), so browsers reconnect and re-read.
 */
import type { Logger } from '../log.js';
import type { Bus, Unsubscribe } from '../cluster/bus.js';
import { InterestSubscriptions } from '../cluster/interest.js';
import type { Subjects } from '../cluster/subjects.js';

interface FeedMessage {
  from: string;
  topic: string;
  text: string;
}

interface InterestNews {
  node: string;
  topics: string[];
}

const ANNOUNCE_DEBOUNCE_MS = 20;

export interface FeedRelayOptions {
  bus: Bus;
  subjects: Subjects;
  nodeKey: string;
  log: Logger;
  leaseMs: number;
  /** Delivers a frame from another node to this node's subscribers of `topic`. */
  deliver(topic: string, text: string): void;
}

export class FeedRelay {
  private readonly interest: InterestSubscriptions;
  /** Topics followed here, and the release of their bus subscription. */
  private readonly followed = new Map<string, () => void>();
  /** What other nodes follow, and when they last said so. */
  private readonly remote = new Map<string, { topics: Set<string>; at: number }>();
  private announceTimer: NodeJS.Timeout | undefined;
  private periodic: NodeJS.Timeout | undefined;
  private sub: Unsubscribe | undefined;

  constructor(private readonly o: FeedRelayOptions) {
    this.interest = new InterestSubscriptions(o.bus, o.log);
  }

  start(): void {
    const { bus, subjects } = this.o;
    this.sub = bus.subscribe(subjects.bcast('feed-interest'), (msg) => {
      const news = msg.data as InterestNews | undefined;
      if (!news || news.node === this.o.nodeKey) return;
      if (news.topics.length === 0) this.remote.delete(news.node);
      else this.remote.set(news.node, { topics: new Set(news.topics), at: Date.now() });
    });
    this.periodic = setInterval(() => this.announce(), Math.max(100, Math.floor(this.o.leaseMs / 3)));
    this.periodic.unref();
    this.announce();
  }

  stop(): void {
    if (this.periodic) clearInterval(this.periodic);
    if (this.announceTimer) clearTimeout(this.announceTimer);
    this.sub?.();
    this.interest.clear();
    this.followed.clear();
  }

  /** Whether another node has subscribers to `topic` (as last heard within a lease). */
  hasRemote(topic: string): boolean {
    if (this.remote.size === 0) return false;
    const fresh = Date.now() - this.o.leaseMs;
    for (const r of this.remote.values()) if (r.at > fresh && r.topics.has(topic)) return true;
    return false;
  }

  /** Sends a frame (its JSON text) to the other nodes' subscribers of `topic`. */
  publish(topic: string, text: string): void {
    try {
      this.o.bus.publish(this.o.subjects.feed(topic), { from: this.o.nodeKey, topic, text } satisfies FeedMessage);
    } catch (err) {
      this.o.log.error({ err, topic }, 'a feed frame could not be relayed to the other nodes');
    }
  }

  /** This node now has `count` subscribers to `topic`: follows it on the bus while it has any. */
  changed(topic: string, count: number): void {
    const following = this.followed.has(topic);
    if (count > 0 && !following) {
      this.followed.set(
        topic,
        this.interest.add(this.o.subjects.feed(topic), (msg) => {
          const m = msg.data as FeedMessage | undefined;
          if (m && m.from !== this.o.nodeKey && m.topic === topic) this.o.deliver(topic, m.text);
        }),
      );
    } else if (count === 0 && following) {
      this.followed.get(topic)!();
      this.followed.delete(topic);
    } else {
      return;
    }
    if (!this.announceTimer) {
      this.announceTimer = setTimeout(() => {
        this.announceTimer = undefined;
        this.announce();
      }, ANNOUNCE_DEBOUNCE_MS);
      this.announceTimer.unref();
    }
  }

  private announce(): void {
    try {
      this.o.bus.publish(this.o.subjects.bcast('feed-interest'), { node: this.o.nodeKey, topics: [...this.followed.keys()] } satisfies InterestNews);
    } catch (err) {
      this.o.log.error({ err }, 'announcing the feed topics followed here failed');
    }
  }
}
