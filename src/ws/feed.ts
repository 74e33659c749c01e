/**
 * The people's live feed at /ws/feed (DESIGN §4b).
 *
 * Authentication: the session cookie sent with the upgrade request (the Origin must then be
 * PUBLIC_URL's or the Host's, as for cookie-authenticated HTTP), or — for scripts — a first frame
 * `{type: "auth", token}` within 5 seconds. Only people: agent sessions are refused.
 *
 * Frames from the client: `{type: "subscribe" | "unsubscribe", topic, ...filters}` and
 * `{type: "subscribe" | "unsubscribe", channelId}`. Frames to the client (each with `at`):
 * `{type: "welcome"}` once authenticated, `{type: "subscribed" | "unsubscribed", topic |
 * channelId}`, `{type: "error", code, message, topic?}` for a refused frame (the socket stays
 * open), and the published events. A subscription ends by itself, with `{type: "unsubscribed",
 * channelId | topic, reason: "access_lost"}`, when the person may no longer read it (see
 * `recheckChannel`, `recheckPerson`).
 *
 * Channels are uWS pub/sub topics; the named topics (presence, registrations, runs, audit,
 * actors; docs/feed.md) reach each subscriber through its filter and its batcher (feed-topics.ts,
 * feed-batch.ts). Who may subscribe to a channel is the channel service's decision
 * (`channelAccess`); to a named topic, the rules of the matching HTTP route (FeedRights).
 *
 * A socket lives as long as its session: it is closed with 4401 when the session ends (logout,
 * ended by its owner, the account deleted: `sessionsEnded`) or expires (checked when it is due),
 * and the session is checked again before every subscription.
 *
 * Close codes: 4401 no valid session (or it ended), 4403 not a person, 4408 no auth frame within
 * 5 s, 4413 the person holds FEED_SOCKETS_PER_PERSON sockets already, 4429 the client does not
 * read its frames (reconnect and re-read over HTTP), 1008 after repeated invalid frames, 1011 when
 * authentication failed on the server's side (the store unavailable): reconnect with back-off.
 */
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { TemplatedApp, WebSocket } from '../http/uws.js';
import type { UserPrincipal } from '../domain/principal.js';
import type { ActorHost } from '../actors/host.js';
import type { FeedAudience } from '../services/ports.js';
import type { Sessions } from '../services/sessions.js';
import type { FeedRights } from '../services/feed-rights.js';
import { FEED_TOPICS, isFeedTopic, type ActorTransitionFrame, type FeedTopicName } from '../domain/feed-frames.js';
import { SESSION_COOKIE, isSameOrigin } from '../http/auth.js';
import { parseCookies } from '../http/router.js';
import type { SocketRegistry } from './sockets.js';
import type { FeedTopics, TopicSubscriber } from './feed-topics.js';
import { FEED_TOO_SLOW, FeedBatcher } from './feed-batch.js';

export { FeedTopics } from './feed-topics.js';

export const FEED_PATH = '/ws/feed';
export const FEED_AUTH_TIMEOUT_MS = 5000;
/** Close code: the session is not valid, or it ended. */
export const FEED_NO_SESSION = 4401;
/** Close code: the person already holds FEED_SOCKETS_PER_PERSON feed sockets. */
export const FEED_TOO_MANY = 4413;
/** The longest a timer waits (setTimeout's limit); a session expiring later is checked then, and again. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** When the store could not say whether a session expired, how long until it is asked again. */
const EXPIRY_RETRY_MS = 60_000;
const INVALID_LIMIT = 5;

/** Topics only global admins may follow (as GET /api/registrations, /api/audit, /api/admin/actors). */
const ADMIN_TOPICS: ReadonlySet<FeedTopicName> = new Set(['registrations', 'audit', 'actors']);

/** The filters each topic takes (strings; docs/feed.md). */
const TOPIC_FILTERS: Record<FeedTopicName, readonly string[]> = {
  presence: ['workspaceId'],
  registrations: [],
  runs: ['workflowId'],
  audit: ['action', 'actor', 'targetType', 'target'],
  actors: ['kind', 'id'],
};

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
  /** Fires when the session is due to expire (it is read again then: its use elsewhere extends it). */
  expiry: NodeJS.Timeout | undefined = undefined;
  invalid = 0;
  closed = false;
  /** Channel subscriptions: channel id -> uWS topic (so access can be re-checked and revoked). */
  channels: Map<string, string> | null = null;
  /** Named-topic subscriptions, and what they are about to be sent. */
  topics: Map<FeedTopicName, TopicSub> | null = null;
  batcher: FeedBatcher | null = null;
}

/** One person's subscription to a named topic: their rights when it was checked, and their filter. */
class TopicSub implements TopicSubscriber {
  constructor(
    readonly conn: FeedConn,
    readonly topic: FeedTopicName,
    readonly filters: Readonly<Record<string, string>>,
    /** The workspaces whose agents and runs the person sees ('all': a global admin). */
    public workspaces: ReadonlySet<string> | 'all',
    public isAdmin: boolean,
  ) {}

  wants(frame: Record<string, unknown>, audience: FeedAudience | undefined): boolean {
    if (audience?.adminOnly && !this.isAdmin) return false;
    const ws = this.workspaces;
    if (audience?.workspaceIds && ws !== 'all' && !audience.workspaceIds.some((id) => ws.has(id))) return false;
    return matches(this.topic, this.filters, frame);
  }

  deliver(frame: { type: string; [field: string]: unknown }, text: string): void {
    this.conn.batcher?.add(frame, text);
  }
}

/** Whether a frame passes a subscription's filters. */
function matches(topic: FeedTopicName, f: Readonly<Record<string, string>>, frame: Record<string, unknown>): boolean {
  switch (topic) {
    case 'presence':
      return f.workspaceId === undefined || (Array.isArray(frame.workspaceIds) && frame.workspaceIds.includes(f.workspaceId));
    case 'runs':
      return f.workflowId === undefined || frame.workflowId === f.workflowId;
    case 'actors':
      return (f.kind === undefined || frame.kind === f.kind) && (f.id === undefined || frame.actorId === f.id);
    case 'audit': {
      const entry = frame.entry as Record<string, unknown> | undefined;
      if (!entry) return false;
      if (f.action !== undefined) {
        const action = String(entry.action);
        if (f.action.endsWith('*') ? !action.startsWith(f.action.slice(0, -1)) : action !== f.action) return false;
      }
      return (
        (f.actor === undefined || entry.actor === f.actor) &&
        (f.targetType === undefined || entry.targetType === f.targetType) &&
        (f.target === undefined || entry.target === f.target)
      );
    }
    case 'registrations':
      return true;
  }
}

interface FeedRef {
  conn: FeedConn;
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
  rights: FeedRights;
}

export class Feed {
  /** Who may subscribe to a channel (the channel service decides; tests replace it to inject a failure). */
  channelAccess: ChannelAccess;
  /** Sockets subscribed to each channel. */
  private readonly channelSubs = new Map<string, Set<FeedConn>>();
  /** Authenticated sockets per person (DID) and per session id. */
  private readonly byPerson = new Map<string, Set<FeedConn>>();
  private readonly bySession = new Map<string, Set<FeedConn>>();
  private unlisten: (() => void) | undefined;

  constructor(private readonly deps: FeedDeps) {
    this.channelAccess = deps.channelAccess;
    for (const topic of FEED_TOPICS) deps.topics.declare(topic);
  }

  /** What services publish to (tests publish through it too). */
  get publisher(): FeedTopics {
    return this.deps.topics;
  }

  attach(): void {
    const { app, config, sockets, topics, actors } = this.deps;
    app.ws<FeedRef>(FEED_PATH, {
      maxPayloadLength: 64 * 1024,
      // The batcher closes a subscriber past the limit with 4429 (feed-batch.ts), having sent it at
      // most one batch of at most the limit (or one larger frame) since; uWS's own close (no code)
      // is for what goes further, so that the 4429 close frame still fits.
      maxBackpressure: 3 * config.agentSendBufferLimitBytes,
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
        if (conn.channels) this.deps.topics.left([...conn.channels.values()]);
        for (const channelId of conn.channels?.keys() ?? []) this.forgetChannel(conn, channelId);
        for (const topic of conn.topics?.keys() ?? []) this.forgetTopic(conn, topic);
        conn.batcher?.stop();
        if (conn.timer) clearTimeout(conn.timer);
        if (conn.expiry) clearTimeout(conn.expiry);
        if (conn.user) {
          removeFrom(this.byPerson, conn.user.did, conn);
          removeFrom(this.bySession, conn.user.sessionId, conn);
        }
        sockets.delete('feed', ws as WebSocket<unknown>);
      },
    });
    this.unlisten = actors.onTransition((t) => {
      if (!topics.hasSubscribers('actors')) return;
      const frame: ActorTransitionFrame = { type: 'actor.transition', actorId: t.actorId, kind: t.kind, state: t.state, event: t.event, at: t.at };
      if (t.from !== undefined) frame.from = t.from;
      topics.publish('actors', frame, { adminOnly: true });
    });
  }

  stop(): void {
    this.unlisten?.();
  }

  private async authenticate(conn: FeedConn, token: string, viaCookie: boolean): Promise<void> {
    const { sessions } = this.deps;
    const session = await sessions.resolve(token);
    if (conn.closed) return;
    if (!session) return this.end(conn, FEED_NO_SESSION, viaCookie ? 'the session cookie is not valid' : 'the token is not valid');
    if (session.kind !== 'user') return this.end(conn, 4403, 'the feed is for people');
    const user = await sessions.principalOf(session, viaCookie ? 'cookie' : 'bearer');
    if (conn.closed) return;
    if (!user || user.kind !== 'user') return this.end(conn, FEED_NO_SESSION, 'the session has no claimed user');
    if (conn.timer) clearTimeout(conn.timer);
    conn.timer = undefined;
    const mine = this.byPerson.get(user.did);
    if (mine && mine.size >= this.deps.config.feedSocketsPerPerson) {
      this.deps.log.warn({ did: user.did, limit: this.deps.config.feedSocketsPerPerson }, 'feed socket refused: FEED_SOCKETS_PER_PERSON reached');
      return this.end(conn, FEED_TOO_MANY, `at most ${this.deps.config.feedSocketsPerPerson} feed sockets per person; close another one`);
    }
    conn.user = user;
    conn.cookieToken = null;
    addTo(this.byPerson, user.did, conn);
    addTo(this.bySession, user.sessionId, conn);
    this.watchExpiry(conn, session.expiresAt);
    this.send(conn, { type: 'welcome', did: user.did, isAdmin: user.isAdmin });
  }

  /** Arms the check of the session at its expiry; a session extended meanwhile (used elsewhere) is watched again. */
  private watchExpiry(conn: FeedConn, expiresAt: string): void {
    if (conn.expiry) clearTimeout(conn.expiry);
    const wait = Math.min(MAX_TIMER_MS, Math.max(0, Date.parse(expiresAt) - Date.now()));
    conn.expiry = setTimeout(() => {
      this.checkSession(conn, 'the session expired').catch((err: unknown) => {
        // The store did not answer: look again in a minute (the socket stays meanwhile).
        this.deps.log.warn({ err, did: conn.user?.did }, 'checking a feed socket\'s session failed');
        if (!conn.closed) this.watchExpiry(conn, new Date(Date.now() + EXPIRY_RETRY_MS).toISOString());
      });
    }, wait);
    conn.expiry.unref();
  }

  /** Whether the socket's session is still live; a socket whose session is over is closed (4401). */
  private async checkSession(conn: FeedConn, reason: string): Promise<boolean> {
    const id = conn.user?.sessionId;
    if (!id || conn.closed) return false;
    const session = await this.deps.sessions.live(id);
    if (conn.closed) return false;
    if (!session) {
      this.end(conn, FEED_NO_SESSION, reason);
      return false;
    }
    this.watchExpiry(conn, session.expiresAt);
    return true;
  }

  /** Sessions ended (here or on another node): their sockets close with 4401 and the reason. */
  sessionsEnded(ids: readonly string[], reason: string): void {
    for (const id of ids) {
      for (const conn of [...(this.bySession.get(id) ?? [])]) this.end(conn, FEED_NO_SESSION, `session ended: ${reason}`);
    }
  }

  private async onMessage(conn: FeedConn, data: ArrayBuffer, isBinary: boolean): Promise<void> {
    if (conn.closed) return;
    let frame: { type?: unknown; token?: unknown; topic?: unknown; channelId?: unknown; [field: string]: unknown };
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
    // A subscription is made only on a live session (one that ended on another node, or expired, closes here).
    if (subscribe && !(await this.checkSession(conn, 'the session ended or expired'))) return;
    if (typeof frame.topic === 'string') {
      const name = frame.topic;
      if (!isFeedTopic(name)) return this.refuse(conn, 'unknown_topic', `no topic '${name}'`, name);
      if (!subscribe) {
        this.forgetTopic(conn, name);
        return this.send(conn, { type: 'unsubscribed', topic: name });
      }
      return this.subscribeTopic(conn, user, name, frame);
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
   * Subscribes to a named topic with the rights of its HTTP route: an admin topic refused to
   * others (`forbidden`, as the route's 403), a workspace or workflow the person may not see
   * reported as one that does not exist (`not_found`, as the route's 404). Subscribing again
   * replaces the filters.
   */
  private async subscribeTopic(conn: FeedConn, user: UserPrincipal, name: FeedTopicName, frame: Record<string, unknown>): Promise<void> {
    const filters: Record<string, string> = {};
    for (const field of TOPIC_FILTERS[name]) {
      const value = frame[field];
      if (value === undefined) continue;
      if (typeof value !== 'string' || value.length === 0 || value.length > 512) {
        return this.refuse(conn, 'invalid_filter', `${field} is a non-empty string of at most 512 characters`, name);
      }
      filters[field] = value;
    }
    if (ADMIN_TOPICS.has(name) && !user.isAdmin) return this.refuse(conn, 'forbidden', `topic '${name}' is for global admins`, name);
    const { rights } = this.deps;
    if (filters.workspaceId !== undefined) {
      const id = await rights.workspace(user, filters.workspaceId);
      if (conn.closed) return;
      if (!id) return this.refuse(conn, 'not_found', `workspace ${filters.workspaceId} not found`, name);
      filters.workspaceId = id;
    }
    if (filters.workflowId !== undefined && !(await rights.workflowWorkspace(user, filters.workflowId))) {
      if (conn.closed) return;
      return this.refuse(conn, 'not_found', `no workflow ${filters.workflowId}`, name);
    }
    const workspaces = await rights.workspacesOf(user);
    if (conn.closed) return;
    this.forgetTopic(conn, name);
    const sub = new TopicSub(conn, name, filters, workspaces === 'all' ? 'all' : new Set(workspaces), user.isAdmin);
    (conn.topics ??= new Map()).set(name, sub);
    conn.batcher ??= this.batcherFor(conn);
    this.deps.topics.add(name, sub);
    this.send(conn, { type: 'subscribed', topic: name });
  }

  private batcherFor(conn: FeedConn): FeedBatcher {
    const { config } = this.deps;
    return new FeedBatcher(
      {
        buffered: () => (conn.ws && !conn.closed ? conn.ws.getBufferedAmount() : 0),
        send: (text) => {
          if (!conn.closed && conn.ws) conn.ws.send(text);
        },
        tooSlow: () => this.end(conn, FEED_TOO_SLOW, 'too slow: reconnect and re-read over HTTP'),
      },
      { windowMs: config.feedBatchWindowMs, maxFrames: config.feedBatchMaxFrames, bufferLimitBytes: config.agentSendBufferLimitBytes },
    );
  }

  private forgetTopic(conn: FeedConn, name: FeedTopicName): void {
    const sub = conn.topics?.get(name);
    if (!sub) return;
    conn.topics!.delete(name);
    this.deps.topics.remove(name, sub);
  }

  /**
   * Re-checks one socket's named-topic subscriptions as its person is now (`user`; null: the
   * account is gone): each is narrowed to what they may see now, or ends with
   * `{type: "unsubscribed", topic, reason: "access_lost"}`.
   */
  private async recheckTopics(conn: FeedConn, user: UserPrincipal | null): Promise<void> {
    const { rights } = this.deps;
    const workspaces = user ? await rights.workspacesOf(user) : [];
    if (conn.closed) return;
    for (const sub of [...(conn.topics?.values() ?? [])]) {
      let kept = user !== null && (user.isAdmin || !ADMIN_TOPICS.has(sub.topic));
      if (kept && sub.filters.workspaceId !== undefined) kept = (await rights.workspace(user!, sub.filters.workspaceId)) !== null;
      if (kept && sub.filters.workflowId !== undefined) kept = (await rights.workflowWorkspace(user!, sub.filters.workflowId)) !== null;
      if (conn.closed) break;
      if (kept) {
        sub.isAdmin = user!.isAdmin;
        sub.workspaces = workspaces === 'all' ? 'all' : new Set(workspaces);
        continue;
      }
      this.forgetTopic(conn, sub.topic);
      this.send(conn, { type: 'unsubscribed', topic: sub.topic, reason: 'access_lost' });
    }
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
      const still = await access(conn.user, channelId).catch(() => null);
      // Read after the check: a re-check running beside this one may have ended it already (one `unsubscribed`).
      const topic = conn.channels?.get(channelId);
      if (still || conn.closed || !topic) continue;
      this.unsubscribe(conn, topic);
      this.forgetChannel(conn, channelId);
      this.send(conn, { type: 'unsubscribed', channelId, reason: 'access_lost' });
    }
  }

  /** Re-checks every subscription of one person (they left a workspace, lost a role, or are gone). */
  async recheckPerson(did: string): Promise<void> {
    const channels = new Set<string>();
    for (const conn of [...(this.byPerson.get(did) ?? [])]) {
      if (conn.closed || !conn.user) continue;
      // The socket acts as the person is now (a global admin flag taken away), channels included.
      const user = await this.deps.rights.current(conn.user);
      if (conn.closed) continue;
      if (user) conn.user = user;
      if (conn.topics?.size) await this.recheckTopics(conn, user);
      for (const channelId of conn.channels?.keys() ?? []) channels.add(channelId);
    }
    for (const channelId of channels) await this.recheckChannel(channelId, did);
  }

  /** A channel's uWS topic (FeedTopics tells a cluster's relay how many follow it here). */
  private subscribe(conn: FeedConn, topic: string): void {
    if (conn.ws) this.deps.topics.subscribe(conn.ws, topic);
  }

  private unsubscribe(conn: FeedConn, topic: string): void {
    if (conn.ws) this.deps.topics.unsubscribe(conn.ws, topic);
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
  private refuse(conn: FeedConn, code: string, message: string, topic?: string): void {
    this.send(conn, topic === undefined ? { type: 'error', code, message } : { type: 'error', code, message, topic });
    if (code === 'invalid_frame' || code === 'unknown_frame') {
      conn.invalid++;
      if (conn.invalid >= INVALID_LIMIT) this.end(conn, 1008, 'too many invalid frames');
    }
  }

  private send(conn: FeedConn, frame: object): void {
    if (!conn.closed && conn.ws) conn.ws.send(JSON.stringify({ ...frame, at: new Date().toISOString() }));
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

function addTo(map: Map<string, Set<FeedConn>>, key: string, conn: FeedConn): void {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  set.add(conn);
}

function removeFrom(map: Map<string, Set<FeedConn>>, key: string, conn: FeedConn): void {
  const set = map.get(key);
  set?.delete(conn);
  if (set?.size === 0) map.delete(key);
}
