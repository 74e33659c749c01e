/**
 * The dashboard's one WebSocket, /ws/feed (DESIGN §4b, docs/feed.md), shared by every view: views
 * subscribe to a channel or a topic and get its frames; the socket opens with the first
 * subscription, resubscribes everything after a reconnect, and reconnects with exponential back-off
 * (with jitter) whenever it drops, except when the session is gone (4401/4403), which ends the
 * session in the page, and when the person holds too many feed sockets (4413), which the top bar
 * says until the person asks to try again: another attempt would only be refused the same way.
 *
 * Batches are unwrapped and their frames handed on in order. A topic's views get
 * `{type: "resync", topic}` when they may have missed frames — after a reconnect (a slow client is
 * closed with 4429), or a batch that dropped some (`truncated`) — and re-read over HTTP.
 */
import { signal } from '@preact/signals';
import { useEffect, useRef } from 'preact/hooks';
import { session } from './session';

export type FeedKey = { channelId: string } | { topic: string };
export interface FeedFrame {
  type: string;
  channelId?: string;
  topic?: string;
  /** When the server sent it (ISO 8601): every frame has one. */
  at?: string;
  [k: string]: unknown;
}
type Handler = (frame: FeedFrame) => void;

export const feedStatus = signal<'idle' | 'connecting' | 'open' | 'waiting' | 'refused'>('idle');

/** Close code of a feed socket refused because its person holds FEED_SOCKETS_PER_PERSON already (docs/feed.md). */
const TOO_MANY_SOCKETS = 4413;

/** The topic whose subscribers a frame type goes to. */
const TOPIC_OF: Record<string, string> = {
  presence: 'presence',
  registration: 'registrations',
  run: 'runs',
  audit: 'audit',
  'actor.transition': 'actors',
};

const keyOf = (k: FeedKey) => ('channelId' in k ? `channel:${k.channelId}` : `topic:${k.topic}`);

class FeedClient {
  private ws: WebSocket | null = null;
  private readonly subs = new Map<string, { key: FeedKey; handlers: Set<Handler> }>();
  private attempt = 0;
  /** Whether the socket was open before: a new welcome then means frames may have been missed. */
  private wasOpen = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Refused for too many sockets (4413): no attempt until tryAgain(). */
  private refused = false;

  subscribe(key: FeedKey, handler: Handler): () => void {
    const id = keyOf(key);
    let entry = this.subs.get(id);
    if (!entry) {
      this.subs.set(id, (entry = { key, handlers: new Set() }));
      if (this.ws?.readyState === WebSocket.OPEN && feedStatus.value === 'open') this.send({ type: 'subscribe', ...key });
    }
    entry.handlers.add(handler);
    this.ensure();
    return () => {
      const e = this.subs.get(id);
      if (!e) return;
      e.handlers.delete(handler);
      if (e.handlers.size === 0) {
        this.subs.delete(id);
        if (this.ws?.readyState === WebSocket.OPEN) this.send({ type: 'unsubscribe', ...key });
      }
    };
  }

  /** Closes the socket (sign-out); subscriptions stay registered until their views unmount. */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.refused = false;
    const ws = this.ws;
    this.ws = null;
    ws?.close(1000, 'signed out');
    feedStatus.value = 'idle';
  }

  /** After a refusal (4413): one new attempt, asked for by the person. */
  tryAgain(): void {
    this.refused = false;
    this.attempt = 0;
    feedStatus.value = 'idle';
    this.ensure();
  }

  private ensure(): void {
    if (this.ws || this.timer || this.refused || session.value.status !== 'signed-in') return;
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws/feed`;
    feedStatus.value = 'connecting';
    const ws = new WebSocket(url);
    this.ws = ws;
    ws.onmessage = (ev) => {
      let frame: FeedFrame;
      try {
        frame = JSON.parse(String(ev.data)) as FeedFrame;
      } catch {
        return;
      }
      this.dispatch(frame);
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (ev.code === 4401 || ev.code === 4403) {
        feedStatus.value = 'idle';
        if (session.value.status === 'signed-in') session.value = { status: 'signed-out', reason: 'Your session has ended. Sign in again.' };
        return;
      }
      if (ev.code === TOO_MANY_SOCKETS) {
        this.refused = true;
        feedStatus.value = 'refused';
        return;
      }
      this.retry();
    };
  }

  private retry(): void {
    if (this.subs.size === 0) {
      feedStatus.value = 'idle';
      return;
    }
    feedStatus.value = 'waiting';
    const base = Math.min(30_000, 500 * 2 ** this.attempt++);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.ensure();
    }, base / 2 + Math.random() * (base / 2));
  }

  private dispatch(frame: FeedFrame): void {
    if (frame.type === 'welcome') {
      this.attempt = 0;
      feedStatus.value = 'open';
      for (const { key } of this.subs.values()) this.send({ type: 'subscribe', ...key });
      if (this.wasOpen) for (const { key } of [...this.subs.values()]) if ('topic' in key) this.dispatch({ type: 'resync', topic: key.topic });
      this.wasOpen = true;
      return;
    }
    if (frame.type === 'batch' && Array.isArray(frame.frames)) {
      for (const f of frame.frames as FeedFrame[]) this.dispatch(f);
      if (frame.truncated === true) {
        const topics = new Set(Object.keys((frame.foldedByType as Record<string, number> | undefined) ?? {}).map((t) => TOPIC_OF[t]));
        for (const topic of topics) if (topic) this.dispatch({ type: 'resync', topic });
      }
      return;
    }
    const topic = frame.topic ?? TOPIC_OF[frame.type];
    const id = frame.channelId ? `channel:${frame.channelId}` : topic ? `topic:${topic}` : null;
    if (!id) return;
    for (const h of this.subs.get(id)?.handlers ?? []) h(frame);
  }

  private send(frame: object): void {
    this.ws?.send(JSON.stringify(frame));
  }
}

export const feed = new FeedClient();

/** Hands a view the frames of a feed topic (and `resync`) while it is mounted and `enabled`. */
export function useFeedTopic(topic: string, handler: Handler, enabled = true): void {
  const saved = useRef(handler);
  saved.current = handler;
  useEffect(() => (enabled ? feed.subscribe({ topic }, (f) => saved.current(f)) : undefined), [topic, enabled]);
}
