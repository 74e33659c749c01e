/**
 * The people's live feed at /ws/feed (DESIGN §4b).
 *
 * Authentication: the session cookie sent with the upgrade request (the Origin must then be
 * PUBLIC_URL's or the Host's, as for cookie-authenticated HTTP), or — for scripts — a first frame
 * `{type: "auth", token}` within 5 seconds. Only people: agent sessions are refused.
 *
 * Frames from the client: `{type: "subscribe" | "unsubscribe", topic}` and, in a later issue,
 * `{type: "subscribe" | "unsubscribe", channelId}`. Frames to the client: `{type: "welcome"}` once
 * authenticated, `{type: "subscribed" | "unsubscribed", topic | channelId}`, `{type: "error", code,
 * message}` for a refused frame (the socket stays open), and the published events. A channel
 * subscription ends by itself, with `{type: "unsubscribed", channelId, reason: "access_lost"}`,
 * when the person may no longer read the channel (see `recheckChannel`).
 *
 * Topics are uWS pub/sub topics, published to through `FeedTopics` (the FeedPublisher port).
 * `actors` (global admins only) carries `{type: "actor.transition", actorId, kind, state, event}`
 * from the actor host; the frame is built only while someone is subscribed. Who may subscribe to a
 * channel is the channel service's decision (`channelAccess`).
 *
 * Close codes: 4401 no valid session, 4403 not a person, 4408 no auth frame within 5 s, 1008 after
 * repeated invalid frames, 1011 when authentication failed on the server's side (the store
 * unavailable): reconnect with back-off.
 */
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { TemplatedApp, WebSocket } from '../http/uws.js';
import type { UserPrincipal } from '../domain/principal.js';
import type { ActorHost } from '../actors/host.js';
import type { FeedPublisher } from '../services/ports.js';
import type { Sessions } from '../services/sessions.js';
import { SESSION_COOKIE, isSameOrigin } from '../http/auth.js';
import { parseCookies } from '../http/router.js';
import type { SocketRegistry } from './sockets.js';
import type { FeedRelay } from './feed-relay.js';

export const FEED_PATH = '/ws/feed';
export const FEED_AUTH_TIMEOUT_MS = 5000;
const INVALID_LIMIT = 5;

interface FeedTopic {
  /** Whether this person may subscribe. */
  allowed(user: UserPrincipal): boolean;
}

/**
 * Decides a channel subscription. Resolves to the topic to subscribe to, or null when the channel
 * does not exist or the person may not read it (both are reported alike, so a private channel
 * stays hidden).
 */
export type ChannelAccess = (user: UserPrincipal, channelId: string) => Promise<string | null>;

class FeedConn {
  ws: WebSocket<FeedRef> | null = null;
  user: UserPrincipal | null = null;
  cookieToken: string | null = null;
  timer: NodeJS.Timeout | undefined = undefined;
  invalid = 0;
  closed = false;
  /** Channel subscriptions: channel id -> uWS topic (so access can be re-checked and revoked). */
  channels: Map<string, string> | null = null;
  /** Every topic subscribed (so a cluster's relay hears when the last subscriber of one left). */
  topics: Set<string> | null = null;
}

interface FeedRef {
  conn: FeedConn;
}

/**
 * The live feed's topics on the uWS app: what services publish to (the FeedPublisher port). In a
 * cluster, frames also go to (and come from) the other nodes' subscribers through the relay.
 */
export class FeedTopics implements FeedPublisher {
  private relay: FeedRelay | undefined;

  constructor(private readonly app: TemplatedApp) {}

  /** Cluster mode: frames reach the other nodes' subscribers too. */
  useRelay(relay: FeedRelay): void {
    this.relay = relay;
  }

  hasSubscribers(topic: string): boolean {
    return this.app.numSubscribers(topic) > 0 || (this.relay?.hasRemote(topic) ?? false);
  }

  publish(topic: string, frame: object): void {
    const here = this.app.numSubscribers(topic) > 0;
    const elsewhere = this.relay?.hasRemote(topic) ?? false;
    if (!here && !elsewhere) return;
    const text = JSON.stringify(frame);
    if (here) this.app.publish(topic, text);
    if (elsewhere) this.relay!.publish(topic, text);
  }

  /** A frame from another node, for this node's subscribers. */
  deliver(topic: string, text: string): void {
    this.app.publish(topic, text);
  }

  subscribe(ws: WebSocket<FeedRef>, topic: string): void {
    ws.subscribe(topic);
    this.relay?.changed(topic, this.app.numSubscribers(topic));
  }

  unsubscribe(ws: WebSocket<FeedRef>, topic: string): void {
    ws.unsubscribe(topic);
    this.relay?.changed(topic, this.app.numSubscribers(topic));
  }

  /** A subscriber's socket closed (uWS drops its subscriptions itself). */
  left(topics: Iterable<string>): void {
    const relay = this.relay;
    if (!relay) return;
    const list = [...topics];
    setImmediate(() => {
      for (const topic of list) relay.changed(topic, this.app.numSubscribers(topic));
    });
  }
}

export interface FeedDeps {
  app: TemplatedApp;
  topics: FeedTopics;
  sockets: SocketRegistry;
  config: Config;
  log: Logger;
  sessions: Sessions;
  actors: ActorHost;
  channelAccess: ChannelAccess;
}

export class Feed {
  private readonly topics = new Map<string, FeedTopic>();
  /** Who may subscribe to a channel (the channel service decides; tests replace it to inject a failure). */
  channelAccess: ChannelAccess;
  /** Sockets subscribed to each channel. */
  private readonly channelSubs = new Map<string, Set<FeedConn>>();
  private unlisten: (() => void) | undefined;

  constructor(private readonly deps: FeedDeps) {
    this.channelAccess = deps.channelAccess;
    this.topics.set('actors', { allowed: (u) => u.isAdmin });
  }

  attach(): void {
    const { app, config, sockets, topics, actors } = this.deps;
    app.ws<FeedRef>(FEED_PATH, {
      maxPayloadLength: 64 * 1024,
      maxBackpressure: config.agentSendBufferLimitBytes,
      closeOnBackpressureLimit: 1,
      idleTimeout: 120,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => {
        const conn = new FeedConn();
        const token = parseCookies(req.getHeader('cookie'))[SESSION_COOKIE];
        const origin = req.getHeader('origin');
        // A cookie is only taken from a page of this site (cross-site WebSocket hijacking).
        if (token && (!origin || isSameOrigin(origin, config.publicUrl, req.getHeader('host')))) conn.cookieToken = token;
        res.upgrade<FeedRef>({ conn }, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context);
      },
      open: (ws) => {
        const conn = ws.getUserData().conn;
        conn.ws = ws;
        sockets.add('feed', ws as WebSocket<unknown>);
        conn.timer = setTimeout(() => this.end(conn, 4408, 'authentication timeout'), FEED_AUTH_TIMEOUT_MS);
        conn.timer.unref();
        if (conn.cookieToken) this.guard(conn, this.authenticate(conn, conn.cookieToken, true));
      },
      message: (ws, data, isBinary) => {
        const conn = ws.getUserData().conn;
        this.guard(conn, this.onMessage(conn, data, isBinary));
      },
      close: (ws) => {
        const conn = ws.getUserData().conn;
        conn.closed = true;
        conn.ws = null;
        for (const channelId of conn.channels?.keys() ?? []) this.forgetChannel(conn, channelId);
        if (conn.topics) topics.left(conn.topics);
        if (conn.timer) clearTimeout(conn.timer);
        sockets.delete('feed', ws as WebSocket<unknown>);
      },
    });
    this.unlisten = actors.onTransition((t) => {
      if (!topics.hasSubscribers('actors')) return;
      topics.publish('actors', { type: 'actor.transition', actorId: t.actorId, kind: t.kind, state: t.state, event: t.event });
    });
  }

  stop(): void {
    this.unlisten?.();
  }

  private async authenticate(conn: FeedConn, token: string, viaCookie: boolean): Promise<void> {
    const { sessions } = this.deps;
    const session = await sessions.resolve(token);
    if (conn.closed) return;
    if (!session) return this.end(conn, 4401, viaCookie ? 'the session cookie is not valid' : 'the token is not valid');
    if (session.kind !== 'user') return this.end(conn, 4403, 'the feed is for people');
    const user = await sessions.principalOf(session, viaCookie ? 'cookie' : 'bearer');
    if (conn.closed) return;
    if (!user || user.kind !== 'user') return this.end(conn, 4401, 'the session has no claimed user');
    conn.user = user;
    conn.cookieToken = null;
    if (conn.timer) clearTimeout(conn.timer);
    conn.timer = undefined;
    this.send(conn, { type: 'welcome', did: user.did, isAdmin: user.isAdmin });
  }

  private async onMessage(conn: FeedConn, data: ArrayBuffer, isBinary: boolean): Promise<void> {
    if (conn.closed) return;
    let frame: { type?: unknown; token?: unknown; topic?: unknown; channelId?: unknown };
    try {
      if (isBinary) throw new Error('binary');
      frame = JSON.parse(Buffer.from(data).toString('utf8')) as typeof frame;
      if (typeof frame !== 'object' || frame === null) throw new Error('not an object');
    } catch {
      return this.refuse(conn, 'invalid_frame', 'frames are JSON objects with a type');
    }
    if (frame.type === 'auth') {
      if (conn.user) return this.refuse(conn, 'already_authenticated', 'this socket is already authenticated');
      if (typeof frame.token !== 'string') return this.refuse(conn, 'invalid_frame', 'auth needs a token');
      return this.authenticate(conn, frame.token, false);
    }
    const user = conn.user;
    if (!user) return this.refuse(conn, 'unauthenticated', 'send {type: "auth", token} first');
    if (frame.type !== 'subscribe' && frame.type !== 'unsubscribe') return this.refuse(conn, 'unknown_frame', `unknown frame type ${JSON.stringify(frame.type ?? null)}`);
    const subscribe = frame.type === 'subscribe';
    if (typeof frame.topic === 'string') {
      const topic = this.topics.get(frame.topic);
      if (!topic) return this.refuse(conn, 'unknown_topic', `no topic '${frame.topic}'`);
      if (!topic.allowed(user)) return this.refuse(conn, 'forbidden', `topic '${frame.topic}' is for global admins`);
      if (subscribe) this.subscribe(conn, frame.topic);
      else this.unsubscribe(conn, frame.topic);
      return this.send(conn, { type: subscribe ? 'subscribed' : 'unsubscribed', topic: frame.topic });
    }
    if (typeof frame.channelId === 'string') {
      const uwsTopic = await this.channelAccess(user, frame.channelId);
      if (conn.closed) return;
      if (!uwsTopic) return this.refuse(conn, 'not_found', `no channel ${frame.channelId}`);
      if (subscribe) {
        this.subscribe(conn, uwsTopic);
        (conn.channels ??= new Map()).set(frame.channelId, uwsTopic);
        let subs = this.channelSubs.get(frame.channelId);
        if (!subs) this.channelSubs.set(frame.channelId, (subs = new Set()));
        subs.add(conn);
      } else {
        this.unsubscribe(conn, uwsTopic);
        this.forgetChannel(conn, frame.channelId);
      }
      return this.send(conn, { type: subscribe ? 'subscribed' : 'unsubscribed', channelId: frame.channelId });
    }
    return this.refuse(conn, 'invalid_frame', `${frame.type} needs a topic or a channelId`);
  }

  /**
   * Re-checks the channel subscriptions of `did` (every subscriber when null) after someone may
   * have lost read access; a socket that lost it is unsubscribed and told
   * `{type: "unsubscribed", channelId, reason: "access_lost"}`.
   */
  async recheckChannel(channelId: string, did: string | null): Promise<void> {
    const subs = this.channelSubs.get(channelId);
    const access = this.channelAccess;
    if (!subs) return;
    for (const conn of [...subs]) {
      if (conn.closed || !conn.user || (did !== null && conn.user.did !== did)) continue;
      const topic = conn.channels?.get(channelId);
      const still = await access(conn.user, channelId).catch(() => null);
      if (still || conn.closed || !topic) continue;
      this.unsubscribe(conn, topic);
      this.forgetChannel(conn, channelId);
      this.send(conn, { type: 'unsubscribed', channelId, reason: 'access_lost' });
    }
  }

  /** Re-checks every channel subscription of one person (they left a workspace, or are gone). */
  async recheckPerson(did: string): Promise<void> {
    const channels = [...this.channelSubs].filter(([, subs]) => [...subs].some((conn) => conn.user?.did === did)).map(([id]) => id);
    for (const channelId of channels) await this.recheckChannel(channelId, did);
  }

  private subscribe(conn: FeedConn, topic: string): void {
    if (!conn.ws) return;
    this.deps.topics.subscribe(conn.ws, topic);
    (conn.topics ??= new Set()).add(topic);
  }

  private unsubscribe(conn: FeedConn, topic: string): void {
    if (!conn.ws) return;
    this.deps.topics.unsubscribe(conn.ws, topic);
    conn.topics?.delete(topic);
  }

  private forgetChannel(conn: FeedConn, channelId: string): void {
    conn.channels?.delete(channelId);
    const subs = this.channelSubs.get(channelId);
    subs?.delete(conn);
    if (subs?.size === 0) this.channelSubs.delete(channelId);
  }

  /**
   * Runs a frame's (or the cookie's) handling; a failure there (the store unavailable, a bug) is
   * logged and answered `{type: "error", code: "unavailable"}`. A socket not yet authenticated
   * is closed with 1011 (reconnect with back-off); an authenticated one stays open, and the
   * frame may be sent again.
   */
  private guard(conn: FeedConn, p: Promise<void>): void {
    p.catch((err: unknown) => {
      const authenticating = !conn.user;
      this.deps.log.error({ err, did: conn.user?.did }, authenticating ? 'feed authentication failed' : 'feed frame handling failed');
      this.send(conn, { type: 'error', code: 'unavailable', message: 'the server could not answer; try again' });
      if (authenticating) this.end(conn, 1011, 'server error; reconnect');
    });
  }

  /** Answers an error frame; malformed frames count towards the 1008 close, refusals do not. */
  private refuse(conn: FeedConn, code: string, message: string): void {
    this.send(conn, { type: 'error', code, message });
    if (code === 'invalid_frame' || code === 'unknown_frame') {
      conn.invalid++;
      if (conn.invalid >= INVALID_LIMIT) this.end(conn, 1008, 'too many invalid frames');
    }
  }

  private send(conn: FeedConn, frame: object): void {
    if (!conn.closed && conn.ws) conn.ws.send(JSON.stringify(frame));
  }

  private end(conn: FeedConn, code: number, reason: string): void {
    if (conn.closed || !conn.ws) return;
    try {
      conn.ws.end(code, reason);
    } catch {
      // already closed
    }
  }
}
