/**
 * Bridges between channels and outside services (interface §2.10, §4.8): a signed generic
 * webhook, and the team-chat service (bot-framework activities in, graph API posts out).
 *
 * - Configuration (`secret`, `outgoingUrl`; `accessToken`, `tenantId`, `botId`) is sealed with the
 *   bridge id as associated data and never leaves the server: no answer, log line or error holds it.
 * - Incoming webhook: the bridge must exist and be a webhook (404), `X-Signature` must be the
 *   HMAC-SHA256 of the raw body under the secret (401), the request must be JSON (415), the bridge
 *   must take incoming messages (403), the body must carry a non-empty `message` (400). Repeated
 *   deliveries are posted like any other; only when an operator sets BRIDGE_REPLAY_WINDOW_SECONDS
 *   above 0 is a delivery whose signature — so whose body — was accepted within that window
 *   refused as a replay (409).
 * - Outgoing: each new message of a channel goes to its enabled outgoing and bidirectional bridges,
 *   except the bridge it came in through. Deliveries run after the poster has its answer, up to
 *   OUTGOING_CONCURRENCY at a time per bridge, each retried with exponential back-off
 *   (BRIDGE_RETRY_BASE_MS, doubling) up to BRIDGE_DELIVERY_ATTEMPTS attempts when the failure may
 *   pass (network errors, timeouts, 408, 429, 5xx). A delivery is written to `bridge_outbox`
 *   before its first attempt, its attempt count and next attempt time after each failure, and it
 *   is deleted once it succeeds or fails for good: the next start resumes whatever a stop or a
 *   crash left (at least once: an attempt cut short may be made again, with the same delivery id).
 *   In a cluster each record is claimed by the node working on it (recorded claimed by the node
 *   that posted the message; renewed every third of CLUSTER_LEASE_MS); a node that stops gives its
 *   claims back, and the claims of a node that died run out after a lease, when another node
 *   takes them over and resumes them.
 */
import { newId } from '../domain/ids.js';
import { z } from 'zod';
import { timestamp } from '../domain/views.js';
import type { ServiceCore } from './core.js';
import { OutageLog } from '../integrations/outage-log.js';
import type { BridgeDoc, BridgeOutboxDoc, ChannelDoc, Collections } from '../store/collections.js';
import { WorkQueue } from '../cluster/claims.js';
import { iso, systemClock, type Clock } from '../cluster/clock.js';
import { DuplicateKeyError } from '../store/types.js';
import { AppError, badRequest, conflict, forbidden, notFound, unauthorized } from '../domain/errors.js';
import { parseJsonBody } from '../domain/json-depth.js';
import { checkMetadata, MAX_CONTENT } from '../domain/messages.js';
import { SIGNATURE_HEADER, postJson, sign, verifySignature, type PostResult } from '../integrations/webhook.js';
import { activityText, postChannelMessage, teamsChannelIdOf, toHtml, type TeamsActivity } from '../integrations/teams.js';
import type { Access, ChannelService, MessageCreated } from './channels.js';
import type { Principal } from '../domain/principal.js';

export type ExternalService = BridgeDoc['externalService'];
export type SyncDirection = BridgeDoc['syncDirection'];

export interface WebhookConfig {
  secret: string;
  outgoingUrl?: string;
  webhookUrl?: string;
}
export interface TeamsConfig {
  accessToken: string;
  tenantId: string;
  botId: string;
}

const httpUrl = z
  .string()
  .url({ message: 'expected an absolute URL' })
  .refine((u) => /^https?:\/\//i.test(u), { message: 'expected an http:// or https:// URL' });

export const configSchemas = {
  webhook: z.object({
    secret: z.string({ message: 'required: the shared secret' }).min(1, { message: 'must not be empty' }).max(1024),
    outgoingUrl: z.union([httpUrl, z.literal('')]).optional(),
    webhookUrl: z.string().max(2048).optional(),
  }),
  teams: z.object({
    accessToken: z.string({ message: 'required: the graph API access token' }).min(1).max(16 * 1024),
    tenantId: z.string({ message: 'required: the tenant id' }).min(1).max(256),
    botId: z.string({ message: 'required: the bot application id' }).min(1).max(256),
  }),
} as const;

/** A bridge (interface §2.10); its configuration is never shown. */
export const BridgeView = z
  .strictObject({
    id: z.string(),
    channelId: z.string(),
    externalService: z.enum(['webhook', 'teams']),
    externalChannelId: z.string(),
    externalChannelName: z.string(),
    externalWorkspaceId: z.string(),
    syncDirection: z.enum(['incoming', 'outgoing', 'bidirectional']),
    isSyncEnabled: z.boolean(),
    createdAt: timestamp,
  })
  .meta({ id: 'Bridge' });
export type BridgeView = z.infer<typeof BridgeView>;

export function toBridgeView(b: BridgeDoc): BridgeView {
  return {
    id: b._id,
    channelId: b.channelId,
    externalService: b.externalService,
    externalChannelId: b.externalChannelId,
    externalChannelName: b.externalChannelName,
    externalWorkspaceId: b.externalWorkspaceId,
    syncDirection: b.syncDirection,
    isSyncEnabled: b.isSyncEnabled,
    createdAt: b.createdAt,
  };
}

export interface CreateBridge {
  externalService: ExternalService;
  externalChannelId: string;
  externalChannelName: string;
  externalWorkspaceId: string;
  syncDirection?: SyncDirection;
  config: Record<string, unknown>;
}

/** Deliveries of one bridge in flight at once. */
export const OUTGOING_CONCURRENCY = 4;
/** Deliveries a bridge may have waiting; beyond it the oldest waiting one is dropped (and logged). */
export const OUTGOING_QUEUE_LIMIT = 10_000;
export const TEAMS_WARNING =
  'POST /api/bridges/teams/incoming does not verify the bot framework bearer token; do not expose it to the public internet';

interface Delivery {
  id: string;
  /** Cluster mode: the claim this node holds on the delivery's record. */
  claimToken?: string;
  bridgeId: string;
  service: ExternalService;
  /** The webhook body, fixed at the first attempt so every retry carries the same bytes and signature. */
  body: string;
  /** For the graph API. */
  html: string;
  /** Attempts made so far. */
  attempt: number;
  createdAt: string;
  /** When the next attempt may start (ms since the epoch; 0: at once). */
  notBefore: number;
}

interface Outbox {
  waiting: Delivery[];
  inflight: number;
}

const incoming = (b: BridgeDoc) => b.isSyncEnabled && b.syncDirection !== 'outgoing';
const outgoing = (b: BridgeDoc) => b.isSyncEnabled && b.syncDirection !== 'incoming';

export class BridgeService {
  private readonly c: Collections;
  private readonly outboxes = new Map<string, Outbox>();
  /** How each bridge's endpoint fares: the log hears of a failing one once per streak of failures. */
  private readonly outages = new Map<string, OutageLog>();
  /** Bridges of each channel that sends messages out, read through (every bridge write goes through here and drops its entry). */
  private readonly outgoingByChannel = new Map<string, BridgeDoc[]>();
  private bridgeGen = 0;
  /** Back-off waits in progress; stop() ends them. */
  private readonly waits = new Set<{ timer: NodeJS.Timeout; resolve: () => void }>();
  private readonly abort = new AbortController();
  private sweeper: NodeJS.Timeout | undefined;
  private stopped = false;

  private readonly channels: ChannelService;
  /** Steward's version, for the User-Agent of outgoing deliveries. */
  private readonly version: string;
  /** Cluster mode: outgoing deliveries are claimed, so each is worked on by one node. */
  private readonly claims: { queue: WorkQueue<BridgeOutboxDoc>; owner: string; claimMs: number; clock: Clock } | undefined;
  private claimTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ctx: ServiceCore,
    deps: { channels: ChannelService; version: string; claims?: { owner: string; claimMs: number; clock?: Clock } },
  ) {
    this.c = ctx.c;
    this.channels = deps.channels;
    this.version = deps.version;
    if (deps.claims) {
      const clock = deps.claims.clock ?? systemClock;
      this.claims = { ...deps.claims, clock, queue: new WorkQueue({ items: ctx.c.bridgeOutbox, owner: deps.claims.owner, claimMs: deps.claims.claimMs, clock }) };
    }
    this.channels.onMessageCreated((e) => this.onMessage(e));
  }

  /**
   * Warns about an unverified teams endpoint, sweeps replay records (periodically, only while a
   * replay window is set), and resumes the outgoing deliveries a previous run left unfinished
   * (each at its next attempt time).
   */
  async start(): Promise<void> {
    const teams = await this.c.bridges.count({ externalService: 'teams' });
    if (teams > 0) this.ctx.log.warn({ teamsBridges: teams }, TEAMS_WARNING);
    const window = this.ctx.config.bridgeReplayWindowMs;
    if (window > 0) {
      const every = Math.max(1000, Math.min(window, 3_600_000));
      this.sweeper = setInterval(() => this.sweep().catch((err: unknown) => this.ctx.log.warn({ err }, 'sweeping replay records failed')), every);
      this.sweeper.unref();
    } else {
      // No window: records a run with one left behind are of no use any more.
      await this.sweep(true);
    }
    if (this.claims) {
      await this.claimLeft();
      // Keeps this node's claims and takes over those of nodes that stopped keeping theirs.
      const every = Math.max(100, Math.floor(this.claims.claimMs / 3));
      this.claimTimer = setInterval(() => this.keepClaims().catch((err: unknown) => this.ctx.log.warn({ err }, 'keeping the claims of outgoing bridge deliveries failed')), every);
      this.claimTimer.unref();
      return;
    }
    const left = await this.c.bridgeOutbox.find({}, { sort: { createdAt: 1, _id: 1 } });
    if (left.length > 0) this.ctx.log.info({ deliveries: left.length }, 'resuming outgoing bridge deliveries');
    for (const doc of left) this.enqueue(deliveryOf(doc));
  }

  /**
   * Cluster mode: claims the deliveries nobody works on (left by a stopped node, or by one whose
   * claim ran out: it died, or lost the store) and resumes them here. At least once: a node too
   * slow to keep its claim may see a delivery made again, with the same id and body.
   */
  private async claimLeft(): Promise<void> {
    const claims = this.claims!;
    let resumed = 0;
    for (;;) {
      if (this.stopped) return;
      const got = await claims.queue.claim({}, { createdAt: 1, _id: 1 });
      if (!got) break;
      resumed++;
      this.enqueue({ ...deliveryOf(got.item), claimToken: got.claim.token });
    }
    if (resumed > 0) this.ctx.log.info({ deliveries: resumed }, 'resuming outgoing bridge deliveries');
  }

  /** Pushes this node's claims on (one update for all), then takes over what others left. */
  private async keepClaims(): Promise<void> {
    const claims = this.claims!;
    if (this.stopped) return;
    await this.c.bridgeOutbox.updateMany({ claimedBy: claims.owner }, { $set: { claimedUntil: iso(claims.clock.now() + claims.claimMs) } });
    await this.claimLeft();
  }

  /** Stops retries and aborts deliveries in flight; what is unfinished stays in `bridge_outbox` for the next start. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.sweeper) clearInterval(this.sweeper);
    if (this.claimTimer) clearInterval(this.claimTimer);
    for (const w of this.waits) {
      clearTimeout(w.timer);
      w.resolve();
    }
    this.waits.clear();
    this.abort.abort();
    let waiting = 0;
    for (const box of this.outboxes.values()) waiting += box.waiting.length + box.inflight;
    if (waiting > 0) this.ctx.log.info({ deliveries: waiting }, 'outgoing bridge deliveries unfinished at shutdown: the next start resumes them');
    this.outboxes.clear();
    if (this.claims) {
      // Given back, so another node resumes them at once.
      await this.c.bridgeOutbox
        .updateMany({ claimedBy: this.claims.owner }, { $set: { claimedBy: null, claimedUntil: null, claimToken: null } })
        .catch((err: unknown) => this.ctx.log.warn({ err }, 'giving back outgoing bridge deliveries failed; their claims run out instead'));
    }
  }

  private async sweep(all = false): Promise<void> {
    try {
      await this.c.bridgeDeliveries.deleteMany(all ? {} : { expiresAt: { $lt: new Date().toISOString() } });
    } catch (err) {
      this.ctx.log.warn({ err }, 'sweeping replay records failed');
    }
  }

  // -----------------------------------------------------------------------------------------------
  // Managing bridges (a channel the caller may read; listing needs membership, changing ownership)

  /** A channel's bridges (channel members and global admins); their configuration is never shown. */
  async list(p: Principal, channelId: string): Promise<BridgeDoc[]> {
    const a = await this.channels.access(p, channelId);
    if (!a.member && !a.caller.isGlobalAdmin) throw forbidden("listing a channel's bridges needs membership of the channel", 'not_a_member');
    return this.c.bridges.find({ channelId: a.channel._id }, { sort: { createdAt: 1, _id: 1 } });
  }

  /** Creates a bridge (channel owner or global admin); its config is stored sealed. */
  async create(p: Principal, channelId: string, input: CreateBridge): Promise<BridgeDoc> {
    const a = await this.channels.access(p, channelId);
    this.channels.requireOwner(a, 'creating a bridge');
    const bridge = await this.insert(a, input);
    await this.ctx.audit.record(p, {
      action: 'bridge.create',
      targetType: 'bridge',
      target: bridge._id,
      details: { channelId: bridge.channelId, externalService: bridge.externalService, externalChannelId: bridge.externalChannelId, syncDirection: bridge.syncDirection },
    });
    return bridge;
  }

  /** Enables or disables a bridge, or changes its direction (channel owner or global admin). */
  async update(p: Principal, channelId: string, bridgeId: string, patch: { isSyncEnabled?: boolean; syncDirection?: SyncDirection }): Promise<BridgeDoc> {
    const a = await this.channels.access(p, channelId);
    this.channels.requireOwner(a, 'changing a bridge');
    const bridge = await this.patch(a.channel._id, bridgeId, patch);
    await this.ctx.audit.record(p, { action: 'bridge.update', targetType: 'bridge', target: bridge._id, details: { changes: patch } });
    return bridge;
  }

  /** Deletes a bridge with its sealed configuration (channel owner or global admin). */
  async remove(p: Principal, channelId: string, bridgeId: string): Promise<void> {
    const a = await this.channels.access(p, channelId);
    this.channels.requireOwner(a, 'deleting a bridge');
    const bridge = await this.delete(a.channel._id, bridgeId);
    await this.ctx.audit.record(p, {
      action: 'bridge.delete',
      targetType: 'bridge',
      target: bridge._id,
      details: { channelId: bridge.channelId, externalService: bridge.externalService },
    });
  }

  private async insert(a: Access, input: CreateBridge): Promise<BridgeDoc> {
    const parsed = configSchemas[input.externalService].safeParse(input.config);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new AppError(400, 'validation_failed', `body field 'config${issue.path.map((p) => `.${String(p)}`).join('')}': ${issue.message}`);
    }
    const now = new Date().toISOString();
    const id = newId();
    const doc: BridgeDoc = {
      _id: id,
      channelId: a.channel._id,
      externalService: input.externalService,
      externalChannelId: input.externalChannelId,
      externalChannelName: input.externalChannelName,
      externalWorkspaceId: input.externalWorkspaceId,
      syncDirection: input.syncDirection ?? 'bidirectional',
      isSyncEnabled: true,
      configSealed: this.ctx.secrets.sealJson(parsed.data, id),
      createdAt: now,
      updatedAt: now,
      createdBy: a.caller.did,
    };
    try {
      await this.c.bridges.insertOne(doc);
    } catch (err) {
      if (err instanceof DuplicateKeyError) {
        throw conflict(`this channel already has a ${input.externalService} bridge to ${input.externalChannelId}`, 'bridge_exists');
      }
      throw err;
    }
    this.changed(doc.channelId);
    if (doc.externalService === 'teams') this.ctx.log.warn({ bridgeId: id }, TEAMS_WARNING);
    return doc;
  }

  private async patch(channelId: string, bridgeId: string, patch: { isSyncEnabled?: boolean; syncDirection?: SyncDirection }): Promise<BridgeDoc> {
    const updated = await this.c.bridges.findOneAndUpdate(
      { _id: bridgeId, channelId },
      { $set: { ...patch, updatedAt: new Date().toISOString() } },
    );
    this.changed(channelId);
    if (!updated) throw notFound(`bridge ${bridgeId} not found in this channel`);
    return updated;
  }

  private async delete(channelId: string, bridgeId: string): Promise<BridgeDoc> {
    const bridge = await this.c.bridges.findOne({ _id: bridgeId, channelId });
    if (!bridge) throw notFound(`bridge ${bridgeId} not found in this channel`);
    await this.c.bridges.deleteOne({ _id: bridgeId });
    this.changed(channelId);
    await this.c.bridgeDeliveries.deleteMany({ bridgeId });
    await this.c.bridgeOutbox.deleteMany({ bridgeId });
    this.outboxes.delete(bridgeId);
    return bridge;
  }

  // -----------------------------------------------------------------------------------------------
  // Incoming

  /** POST /api/bridges/webhook/{bridgeId}/incoming. */
  async webhookIncoming(bridgeId: string, headers: Record<string, string>, raw: Buffer): Promise<string> {
    const bridge = await this.c.bridges.findById(bridgeId);
    if (!bridge || bridge.externalService !== 'webhook') throw notFound(`no webhook bridge ${bridgeId}`);
    // The signature before anything else about the request (§7: missing or invalid is 401).
    const config = this.config<WebhookConfig>(bridge);
    const signature = headers[SIGNATURE_HEADER];
    if (!signature) throw unauthorized('the X-Signature header is missing', 'signature_missing');
    const digest = verifySignature(signature, raw, config.secret);
    if (!digest) throw unauthorized('the X-Signature header does not match the body', 'invalid_signature');
    requireJson(headers);
    refuseUnlessIncoming(bridge);

    const body = parseJsonBody(raw);
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('the body must be a JSON object', 'invalid_body');
    const { message, author, metadata } = body as { message?: unknown; author?: unknown; metadata?: unknown };
    if (typeof message !== 'string' || message.trim().length === 0) throw badRequest("body field 'message' is required and must be a non-empty string", 'message_required');
    if (message.length > MAX_CONTENT) throw badRequest(`body field 'message' is longer than ${MAX_CONTENT} characters`, 'validation_failed');
    if (author !== undefined && author !== null && (typeof author !== 'string' || author.trim().length === 0 || author.length > 512)) {
      throw badRequest("body field 'author' must be a non-empty string of at most 512 characters", 'validation_failed');
    }
    if (metadata !== undefined && metadata !== null && (typeof metadata !== 'object' || Array.isArray(metadata))) {
      throw badRequest("body field 'metadata' must be an object", 'validation_failed');
    }
    const meta = checkMetadata(metadata as Record<string, unknown> | null | undefined);

    // Only with an opt-in replay window is a repeated delivery refused; by default it is posted again.
    const replayKey = this.ctx.config.bridgeReplayWindowMs > 0 ? `${bridge._id}:${digest}` : null;
    if (replayKey) await this.recordDelivery(bridge._id, replayKey);
    try {
      const doc = await this.channels.post(bridge.channelId, {
        authorDid: typeof author === 'string' ? author.trim() : 'webhook:external',
        authorType: 'user',
        content: message,
        threadId: null,
        metadata: meta,
        via: { bridgeId: bridge._id, externalService: 'webhook' },
      });
      return doc._id;
    } catch (err) {
      // Not accepted: the same delivery may be sent again.
      if (replayKey) await this.c.bridgeDeliveries.deleteOne({ _id: replayKey }).catch(() => undefined);
      throw err;
    }
  }

  /** Records an accepted signature; 409 when it was accepted within the replay window (set: above 0). */
  private async recordDelivery(bridgeId: string, key: string): Promise<void> {
    const now = Date.now();
    const expiresAt = new Date(now + this.ctx.config.bridgeReplayWindowMs).toISOString();
    try {
      await this.c.bridgeDeliveries.insertOne({ _id: key, bridgeId, expiresAt });
      return;
    } catch (err) {
      if (!(err instanceof DuplicateKeyError)) throw err;
    }
    // Seen before: a replay unless that record has expired (then it is taken over atomically).
    const taken = await this.c.bridgeDeliveries.findOneAndUpdate(
      { _id: key, expiresAt: { $lte: new Date(now).toISOString() } },
      { $set: { expiresAt } },
    );
    if (!taken) throw conflict('this delivery (same signature, so same body) was already accepted; a replay is refused', 'replayed_delivery');
  }

  /** POST /api/bridges/teams/incoming: one bot-framework activity. Answers the new message id (null when the activity is not a message). */
  async teamsIncoming(headers: Record<string, string>, raw: Buffer): Promise<string | null> {
    requireJson(headers);
    const activity = parseJsonBody(raw) as TeamsActivity;
    if (!activity || typeof activity !== 'object' || Array.isArray(activity)) throw badRequest('the body must be a bot-framework activity object', 'invalid_body');
    if (activity.type !== undefined && activity.type !== 'message') return null; // typing, conversationUpdate, ...
    const channelRef = teamsChannelIdOf(activity);
    if (!channelRef) throw badRequest('the activity has no channelData.teamsChannelId', 'missing_channel');
    const bridges = (await this.c.bridges.find({ externalChannelId: channelRef }, { sort: { createdAt: 1, _id: 1 } })).filter(
      (b) => b.externalService === 'teams',
    );
    if (bridges.length === 0) throw notFound(`no teams bridge for channel ${channelRef}`);
    const open = bridges.filter(incoming);
    if (open.length === 0) refuseUnlessIncoming(bridges[0]!);
    const text = typeof activity.text === 'string' ? activityText(activity.text) : '';
    if (!text) throw badRequest('the activity has no text', 'message_required');
    const from = activity.from ?? {};
    const fromId = typeof from.aadObjectId === 'string' ? from.aadObjectId : typeof from.id === 'string' ? from.id : 'unknown';
    const metadata = {
      teams: {
        activityId: typeof activity.id === 'string' ? activity.id : null,
        from: { id: typeof from.id === 'string' ? from.id : null, name: typeof from.name === 'string' ? from.name : null },
      },
    };
    let first: string | null = null;
    for (const bridge of open) {
      const doc = await this.channels.post(bridge.channelId, {
        authorDid: `teams:${fromId}`.slice(0, 512),
        authorType: 'user',
        content: text.slice(0, MAX_CONTENT),
        threadId: null,
        metadata,
        via: { bridgeId: bridge._id, externalService: 'teams' },
      });
      first ??= doc._id;
    }
    return first;
  }

  private config<T>(bridge: BridgeDoc): T {
    try {
      return this.ctx.secrets.openJson<T>(bridge.configSealed, bridge._id);
    } catch {
      this.ctx.log.error({ bridgeId: bridge._id }, 'a bridge configuration does not open (wrong key, or copied from another bridge)');
      throw new AppError(500, 'bridge_config_unreadable', 'the bridge configuration cannot be read');
    }
  }

  // -----------------------------------------------------------------------------------------------
  // Outgoing

  private onMessage(e: MessageCreated): void {
    if (this.stopped) return;
    void this.fanOut(e).catch((err: unknown) => this.ctx.log.error({ err, channelId: e.channel._id }, 'outgoing bridge fan-out failed'));
  }

  private changed(channelId: string): void {
    this.bridgeGen++;
    this.outgoingByChannel.delete(channelId);
  }

  private async outgoingOf(channelId: string): Promise<BridgeDoc[]> {
    const hit = this.outgoingByChannel.get(channelId);
    if (hit) return hit;
    const gen = this.bridgeGen;
    const list = (await this.c.bridges.find({ channelId })).filter(outgoing);
    if (gen === this.bridgeGen) {
      this.outgoingByChannel.set(channelId, list);
      if (this.outgoingByChannel.size > 10_000) this.outgoingByChannel.delete(this.outgoingByChannel.keys().next().value!);
    }
    return list;
  }

  private async fanOut(e: MessageCreated): Promise<void> {
    const bridges = (await this.outgoingOf(e.channel._id)).filter((b) => b._id !== e.via?.bridgeId);
    if (bridges.length === 0) return;
    const authorName = await this.authorName(e.message.authorDid, e.message.authorType);
    const html = `<b>${toHtml(authorName ?? e.message.authorDid)}</b>: ${toHtml(e.message.content)}`;
    const createdAt = new Date().toISOString();
    const deliveries = bridges.map((bridge): Delivery => {
      const id = newId();
      const body = JSON.stringify(webhookPayload(id, bridge, e.channel, e, authorName));
      // Cluster mode: recorded as claimed by this node, which works on it at once.
      const claimToken = this.claims ? newId() : undefined;
      return { id, bridgeId: bridge._id, service: bridge.externalService, body, html, attempt: 0, createdAt, notBefore: 0, ...(claimToken ? { claimToken } : {}) };
    });
    try {
      const claimedUntil = this.claims ? iso(this.claims.clock.now() + this.claims.claimMs) : null;
      await this.c.bridgeOutbox.insertMany(deliveries.map((d) => (this.claims ? { ...outboxDoc(d), claimedBy: this.claims.owner, claimedUntil, claimToken: d.claimToken! } : outboxDoc(d))));
    } catch (err) {
      // Still attempted; only a restart before they finish would lose them.
      this.ctx.log.error({ err, channelId: e.channel._id }, 'recording outgoing bridge deliveries failed');
    }
    for (const d of deliveries) this.enqueue(d);
  }

  private async authorName(did: string, type: 'user' | 'agent'): Promise<string | null> {
    if (type === 'agent') return (await this.c.agents.findById(did))?.name ?? null;
    const ref = await this.c.userDids.findById(did);
    return ref ? ((await this.c.users.findById(ref.userId))?.name ?? null) : null;
  }

  private enqueue(d: Delivery): void {
    if (this.stopped) return; // recorded: the next start resumes it
    let box = this.outboxes.get(d.bridgeId);
    if (!box) this.outboxes.set(d.bridgeId, (box = { waiting: [], inflight: 0 }));
    box.waiting.push(d);
    if (box.waiting.length > OUTGOING_QUEUE_LIMIT) {
      const dropped = box.waiting.shift()!;
      this.ctx.log.warn({ bridgeId: d.bridgeId, deliveryId: dropped.id }, 'outgoing bridge queue full: oldest delivery dropped');
      this.finished(dropped).catch((err: unknown) => this.ctx.log.error({ err, deliveryId: dropped.id }, 'forgetting a dropped outgoing bridge delivery failed'));
    }
    this.pump(d.bridgeId, box);
  }

  private pump(bridgeId: string, box: Outbox): void {
    while (box.inflight < OUTGOING_CONCURRENCY && box.waiting.length > 0) {
      const d = box.waiting.shift()!;
      box.inflight++;
      const done = (): void => {
        // A delivery keeps its slot through its back-off, so a failing endpoint is not flooded.
        box.inflight--;
        if (this.outboxes.get(bridgeId) !== box) return;
        if (box.inflight === 0 && box.waiting.length === 0) this.outboxes.delete(bridgeId);
        else this.pump(bridgeId, box);
      };
      this.attempt(d).then(done, (err: unknown) => {
        this.ctx.log.error({ err, bridgeId, deliveryId: d.id }, 'an outgoing bridge delivery failed unexpectedly (retried at the next start)');
        done();
      });
    }
  }

  /**
   * Attempts a delivery until it succeeds, fails for good, or runs out of attempts; then deletes
   * its record. A stop leaves the record as it is (the attempt in flight is made again at the next
   * start, with the same number).
   */
  private async attempt(d: Delivery): Promise<void> {
    const { config } = this.ctx;
    for (;;) {
      if (this.stopped) return;
      const due = d.notBefore - Date.now();
      if (due > 0) {
        await this.wait(due);
        if (this.stopped) return;
      }
      const bridge = await this.c.bridges.findById(d.bridgeId).catch(() => null);
      if (this.stopped) return;
      if (!bridge || !outgoing(bridge)) return this.finished(d); // deleted, disabled or turned incoming-only since
      d.attempt++;
      const result = await this.send(bridge, d);
      if (this.stopped) return;
      if (result !== 'skip') this.recordOutcome(bridge, result);
      if (result === 'skip' || result.ok) return this.finished(d);
      const last = !result.retryable || d.attempt >= config.bridgeDeliveryAttempts;
      const info = { bridgeId: d.bridgeId, deliveryId: d.id, attempt: d.attempt, status: result.status, error: result.error };
      if (last) {
        // The endpoint's failing was said once, at the start of its streak of failures (a warn line).
        this.ctx.log.info(info, 'outgoing bridge delivery failed for good');
        return this.finished(d);
      }
      const waitMs = config.bridgeRetryBaseMs * 2 ** (d.attempt - 1);
      d.notBefore = Date.now() + waitMs;
      this.ctx.log.debug({ ...info, retryInMs: waitMs }, 'outgoing bridge delivery failed; will retry');
      const recorded = await this.c.bridgeOutbox
        .updateOne(this.recordOf(d), { $set: { attempt: d.attempt, nextAttemptAt: new Date(d.notBefore).toISOString() } })
        .catch((err: unknown) => {
          this.ctx.log.error({ err, deliveryId: d.id }, 'recording an outgoing bridge delivery attempt failed');
          return null;
        });
      // Cluster mode: another node took it over (this one was too slow to keep its claim).
      if (recorded?.matched === 0 && d.claimToken) return;
    }
  }

  /** The filter of a delivery's record: in a cluster, while this node's claim on it holds. */
  private recordOf(d: Delivery): { _id: string; claimToken?: string } {
    return d.claimToken ? { _id: d.id, claimToken: d.claimToken } : { _id: d.id };
  }

  /** Tells the bridge's outage log how a delivery went (an answer that is not a failure of the endpoint counts as working). */
  private recordOutcome(bridge: BridgeDoc, result: PostResult): void {
    let outage = this.outages.get(bridge._id);
    if (!outage) {
      const what = bridge.externalService === 'teams' ? 'the team-chat service' : 'a webhook endpoint';
      this.outages.set(bridge._id, (outage = new OutageLog(this.ctx.log, `${what} of bridge ${bridge._id}`, { bridgeId: bridge._id })));
    }
    if (result.ok) outage.worked();
    else outage.failed(result.status !== undefined ? `HTTP ${result.status}${result.error ? ` (${result.error})` : ''}` : (result.error ?? 'failed'));
  }

  /** A back-off wait; stop() ends it early. */
  private wait(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wait = {
        timer: setTimeout(() => {
          this.waits.delete(wait);
          resolve();
        }, ms),
        resolve,
      };
      wait.timer.unref();
      this.waits.add(wait);
    });
  }

  /** Deletes the record of a delivery that is over (sent, failed for good, dropped, or its bridge gone). */
  private async finished(d: Delivery): Promise<void> {
    try {
      await this.c.bridgeOutbox.deleteOne(this.recordOf(d));
    } catch (err) {
      this.ctx.log.error({ err, deliveryId: d.id }, 'deleting a finished outgoing bridge delivery failed');
    }
  }

  private async send(bridge: BridgeDoc, d: Delivery): Promise<PostResult | 'skip'> {
    const opts = { timeoutMs: this.ctx.config.bridgeDeliveryTimeoutMs, signal: this.abort.signal };
    let cfg: WebhookConfig | TeamsConfig;
    try {
      cfg = this.config<WebhookConfig | TeamsConfig>(bridge);
    } catch {
      return { ok: false, error: 'configuration unreadable', retryable: false };
    }
    if (bridge.externalService === 'webhook') {
      const wh = cfg as WebhookConfig;
      if (!wh.outgoingUrl) return 'skip'; // a webhook without an outgoing address only receives
      return postJson(
        wh.outgoingUrl,
        d.body,
        {
          [SIGNATURE_HEADER]: sign(d.body, wh.secret),
          'x-steward-delivery': d.id,
          'x-steward-attempt': String(d.attempt),
          'user-agent': `Steward/${this.version}`,
        },
        opts,
      );
    }
    const teams = cfg as TeamsConfig;
    return postChannelMessage(
      this.ctx.config.graphBaseUrl,
      { teamId: bridge.externalWorkspaceId, channelId: bridge.externalChannelId, accessToken: teams.accessToken },
      { content: d.html, contentType: 'html' },
      opts,
    );
  }
}

/** The record of a delivery in `bridge_outbox`. */
const outboxDoc = (d: Delivery): BridgeOutboxDoc => ({
  _id: d.id,
  bridgeId: d.bridgeId,
  service: d.service,
  body: d.body,
  html: d.html,
  attempt: d.attempt,
  createdAt: d.createdAt,
  nextAttemptAt: new Date(d.notBefore).toISOString(),
});

/** A delivery resumed from its record (the inverse of outboxDoc). */
const deliveryOf = (doc: BridgeOutboxDoc): Delivery => ({
  id: doc._id,
  bridgeId: doc.bridgeId,
  service: doc.service,
  body: doc.body,
  html: doc.html,
  attempt: doc.attempt,
  createdAt: doc.createdAt,
  notBefore: Date.parse(doc.nextAttemptAt) || 0,
});

/** The JSON an outgoing webhook receives (docs/channels.md). */
export function webhookPayload(deliveryId: string, bridge: BridgeDoc, channel: ChannelDoc, e: MessageCreated, authorName: string | null) {
  const m = e.view;
  return {
    type: 'message.created',
    deliveryId,
    bridge: { id: bridge._id, externalChannelId: bridge.externalChannelId, externalWorkspaceId: bridge.externalWorkspaceId },
    channel: { id: channel._id, name: channel.name, slug: channel.slug, workspaceId: channel.workspaceId },
    message: {
      id: m.id,
      channelId: m.channelId,
      threadId: m.threadId,
      authorDid: m.authorDid,
      authorType: m.authorType,
      authorName,
      content: m.content,
      metadata: m.metadata,
      createdAt: m.createdAt,
    },
  };
}

function requireJson(headers: Record<string, string>): void {
  const type = (headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') throw new AppError(415, 'unsupported_media_type', 'Content-Type must be application/json');
}

function refuseUnlessIncoming(bridge: BridgeDoc): void {
  if (!bridge.isSyncEnabled) throw forbidden('the bridge is disabled (isSyncEnabled false)', 'bridge_disabled');
  if (bridge.syncDirection === 'outgoing') throw forbidden('the bridge only sends (syncDirection outgoing)', 'bridge_outgoing_only');
}
