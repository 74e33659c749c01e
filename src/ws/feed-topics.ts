/**
 * What services publish to (the FeedPublisher port), in one process.
 *
 * Channels (`channel:<id>`) are uWS topics: one publish reaches every subscriber at once, in the
 * channel's order. The named topics (presence, registrations, runs, audit, actors) reach each
 * subscriber through its own filter (its rights and what it asked for) and its batcher
 * (feed-batch.ts); a frame is serialised once, whoever receives it.
 */
import type { TemplatedApp } from '../http/uws.js';
import type { FeedAudience, FeedPublisher } from '../services/ports.js';

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

  constructor(private readonly app: TemplatedApp) {}

  hasSubscribers(topic: string): boolean {
    const subs = this.named.get(topic);
    return subs ? subs.size > 0 : this.app.numSubscribers(topic) > 0;
  }

  publish(topic: string, frame: object, audience?: FeedAudience): void {
    const subs = this.named.get(topic);
    if (subs) {
      if (subs.size === 0) return;
      const f = withAt(frame as Frame);
      let text: string | undefined;
      for (const sub of subs) if (sub.wants(f, audience)) sub.deliver(f, (text ??= JSON.stringify(f)));
      return;
    }
    if (this.app.numSubscribers(topic) > 0) this.app.publish(topic, JSON.stringify(withAt(frame as Frame)));
  }

  /** Declares a named topic (its subscribers are added and removed by the feed). */
  declare(topic: string): void {
    if (!this.named.has(topic)) this.named.set(topic, new Set());
  }

  add(topic: string, sub: TopicSubscriber): void {
    this.named.get(topic)?.add(sub);
  }

  remove(topic: string, sub: TopicSubscriber): void {
    this.named.get(topic)?.delete(sub);
  }
}

const withAt = (frame: Frame): Frame => (typeof frame.at === 'string' ? frame : { ...frame, at: new Date().toISOString() });
