/**
 * What services publish to (the FeedPublisher port), in one process.
 *
 * Channels (`channel:<id>`) are uWS topics: one publish reaches every subscriber at once, in the
 * channel's order. The named topics (presence, registrations, runs, audit, actors) reach each
 * subscriber through its own filter (its rights and what it asked for) and its batcher
 * (feed-batch.ts); a frame is serialised once, whoever receives it. In a cluster, a frame also
 * goes to the nodes whose browsers follow its topic, through the relay (feed-relay.ts), with its
 * audience, so each node applies its own subscribers' rights.
 */
import type { TemplatedApp, WebSocket } from '../http/uws.js';
import type { FeedAudience, FeedPublisher } from '../services/ports.js';
import type { FeedRelay } from './feed-relay.js';

/** A subscriber of a named topic. */
export interface TopicSubscriber {
  /** Whether the frame is for this subscriber (the audience's rights, its own filter). */
  wants(frame: Record<string, unknown>, audience: FeedAudience | undefined): boolean;
  /** Takes the frame (its JSON text made once for all subscribers). */
  deliver(frame: { type: string; [field: string]: unknown }, text: string): void;
}

type Frame = { type: string; at?: unknown; [field: string]: unknown };

export class FeedTopics implements FeedPublisher {
  private readonly named = new Map<string, Set<TopicSubscriber>>();
  private relay: FeedRelay | undefined;

  constructor(private readonly app: TemplatedApp) {}

  /** Cluster mode: frames reach the other nodes' subscribers too. */
  useRelay(relay: FeedRelay): void {
    this.relay = relay;
  }

  hasSubscribers(topic: string): boolean {
    return this.localCount(topic) > 0 || (this.relay?.hasRemote(topic) ?? false);
  }

  publish(topic: string, frame: object, audience?: FeedAudience): void {
    const here = this.localCount(topic) > 0;
    const elsewhere = this.relay?.hasRemote(topic) ?? false;
    if (!here && !elsewhere) return;
    const f = withAt(frame as Frame);
    if (elsewhere) this.relay!.publish(topic, JSON.stringify(audience ? { frame: f, audience } : { frame: f }));
    if (here) this.deliverHere(topic, f, audience);
  }

  /** A frame from another node (as `publish` relays it), for this node's subscribers. */
  deliver(topic: string, text: string): void {
    const { frame, audience } = JSON.parse(text) as { frame: Frame; audience?: FeedAudience };
    this.deliverHere(topic, frame, audience);
  }

  /** Declares a named topic (its subscribers are added and removed by the feed). */
  declare(topic: string): void {
    if (!this.named.has(topic)) this.named.set(topic, new Set());
  }

  add(topic: string, sub: TopicSubscriber): void {
    this.named.get(topic)?.add(sub);
    this.relay?.changed(topic, this.localCount(topic));
  }

  remove(topic: string, sub: TopicSubscriber): void {
    this.named.get(topic)?.delete(sub);
    this.relay?.changed(topic, this.localCount(topic));
  }

  /** A socket follows a channel's uWS topic. */
  subscribe(ws: WebSocket<unknown>, topic: string): void {
    ws.subscribe(topic);
    this.relay?.changed(topic, this.localCount(topic));
  }

  unsubscribe(ws: WebSocket<unknown>, topic: string): void {
    ws.unsubscribe(topic);
    this.relay?.changed(topic, this.localCount(topic));
  }

  /** A subscriber's socket closed (uWS drops its channel subscriptions itself, after this). */
  left(topics: Iterable<string>): void {
    const relay = this.relay;
    if (!relay) return;
    const list = [...topics];
    setImmediate(() => {
      for (const topic of list) relay.changed(topic, this.localCount(topic));
    });
  }

  private localCount(topic: string): number {
    const subs = this.named.get(topic);
    return subs ? subs.size : this.app.numSubscribers(topic);
  }

  private deliverHere(topic: string, f: Frame, audience: FeedAudience | undefined): void {
    const subs = this.named.get(topic);
    if (subs) {
      let text: string | undefined;
      for (const sub of subs) if (sub.wants(f, audience)) sub.deliver(f, (text ??= JSON.stringify(f)));
      return;
    }
    this.app.publish(topic, JSON.stringify(f));
  }
}

const withAt = (frame: Frame): Frame => (typeof frame.at === 'string' ? frame : { ...frame, at: new Date().toISOString() });
