/**
 * Channels, their members and messages (interface §2.7–2.9, §4.6, §4.7, §5.8), @mention
 * dispatch to agents (§6) and the channel events of the live feed (DESIGN §4b).
 *
 * Who may do what:
 * - read (channel detail, messages, bridges list, feed): a channel member; a global admin; for a
 *   public channel, every member of its workspace (people and agents), and for a public global
 *   channel (workspaceId null) every authenticated principal. Anyone else gets 404, exactly as
 *   for a channel that does not exist, so a private channel never shows it exists.
 * - post, react: channel members only (explicit membership, global admins included).
 * - edit a message: its author; delete a message: its author, a channel owner or moderator, or a
 *   global admin.
 * - change or archive the channel: a channel owner or a global admin.
 * - add members: owner, moderator or global admin; the owner and moderator roles only by an
 *   owner (or a global admin). Remove: owner or global admin anyone, a moderator members with
 *   the member role, anyone themselves.
 *
 * Writes: every change of a channel or its messages is an event of the channel actor
 * (src/actors/channel.ts), which accepts them one at a time and refuses what an archived channel
 * refuses; the commands it accepts run here, one channel's commands one at a time in the actor's
 * order (`Writer`). That is where posts are numbered (`seq`), membership is checked, messages are
 * stored, and — after the caller has its answer — events go out: to the live feed (topic
 * `channel:<id>`), to each mentioned agent that is online (`channel_message_send`), and to the
 * message hooks (bridges).
 */
import { z } from 'zod';
import { newId } from '../domain/ids.js';
import { channelRole, jsonObject, timestamp } from '../domain/views.js';
import type { AnyActorRef } from 'xstate';
import { fromPromise } from 'xstate';
import type { ServiceCore } from './core.js';
import type { AgentLink, FeedPublisher, PeerNodes } from './ports.js';
import { removeActor } from './actor-commands.js';
import type { Principal } from '../domain/principal.js';
import { CHANNEL_ACTOR_KIND, channelMachine, type ChannelActorEvent, type ChannelCommand, type LoadedChannel } from '../actors/channel.js';
import type { ChannelDoc, ChannelMemberDoc, ChannelMessageDoc, Collections, UserDoc, WorkspaceDoc } from '../store/collections.js';
import type { ChannelRole } from '../domain/roles.js';
import { DuplicateKeyError, type Filter } from '../store/types.js';
import { AppError, badRequest, conflict, forbidden, notFound } from '../domain/errors.js';
import { resolveWorkspace } from './workspaces.js';
import { findMentions, type AgentRef } from '../domain/mentions.js';
import { ChannelCache, put } from './channel-cache.js';
import { channelSlug } from '../domain/slugs.js';
import { checkMetadata } from '../domain/messages.js';
import { ChannelCounters } from './channel-counters.js';

/** A channel actor's command as it travels (its reply is made where the actor lives). */
type ChannelCommandEvent = ChannelActorEvent extends infer E ? (E extends { reply: unknown } ? Omit<E, 'reply'> : never) : never;

// -------------------------------------------------------------------------------------------------
// Views (the shapes of the interface)

/** A channel (interface §2.7). */
export const ChannelView = z
  .strictObject({
    id: z.string(),
    workspaceId: z.string().nullable().meta({ description: 'null marks a global channel' }),
    name: z.string(),
    slug: z.string(),
    description: z.string(),
    topic: z.string(),
    isPublic: z.boolean(),
    isArchived: z.boolean(),
    creatorDid: z.string(),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'Channel' });
export type ChannelView = z.infer<typeof ChannelView>;

/** A channel of the list, with its counts. */
export const ChannelListItem = ChannelView.extend({ memberCount: z.number().int().min(0), messageCount: z.number().int().min(0) }).meta({
  id: 'ChannelListItem',
});
export type ChannelListItem = z.infer<typeof ChannelListItem>;

/** A channel member (interface §2.8). */
export const MemberView = z
  .strictObject({
    id: z.string(),
    channelId: z.string(),
    memberDid: z.string(),
    memberType: z.enum(['user', 'agent']),
    role: channelRole,
    joinedAt: timestamp,
    invitedBy: z.string().nullable(),
  })
  .meta({ id: 'ChannelMember' });
export type MemberView = z.infer<typeof MemberView>;

/** A member in the channel detail, where the interface leaves `channelId` out. */
export const DetailMemberView = MemberView.omit({ channelId: true }).meta({ id: 'ChannelDetailMember' });
export type DetailMemberView = z.infer<typeof DetailMemberView>;

/** A channel message (interface §2.9). */
export const MessageView = z
  .strictObject({
    id: z.string(),
    channelId: z.string(),
    threadId: z.string().nullable().meta({ description: 'The parent message' }),
    authorDid: z.string(),
    authorType: z.enum(['user', 'agent']),
    content: z.string().meta({ description: 'Markdown' }),
    metadata: jsonObject.meta({ description: 'May hold `mentions` (agent names)' }),
    reactions: z.record(z.string(), z.array(z.string())).meta({ description: 'Emoji to the DIDs who reacted' }),
    editedAt: timestamp.nullable(),
    deletedAt: timestamp.nullable(),
    createdAt: timestamp,
    replyCount: z.number().int().min(0).optional().meta({ description: 'Top-level messages: replies not deleted' }),
    lastReplyAt: timestamp.nullable().optional().meta({ description: 'Top-level messages: when the newest reply not deleted was posted' }),
  })
  .meta({ id: 'ChannelMessage' });
export type MessageView = z.infer<typeof MessageView>;

/** GET /api/channels/{channelId}. */
export const ChannelDetail = z.strictObject({
  channel: ChannelView,
  members: z.array(DetailMemberView),
  stats: z.strictObject({ messageCount: z.number().int().min(0), memberCount: z.number().int().min(0) }),
});
export type ChannelDetail = z.infer<typeof ChannelDetail>;

export const readMarkSchema = z.strictObject({ channelId: z.string(), lastReadMessageId: z.string(), unread: z.number().int().min(0) });
export type ReadMarkView = z.infer<typeof readMarkSchema>;

export const unreadSchema = z.strictObject({
  channels: z.array(z.strictObject({ channelId: z.string(), unread: z.number().int().min(0), lastReadMessageId: z.string().nullable() })),
});
export type UnreadView = z.infer<typeof unreadSchema>;

const readId = (channelId: string, did: string) => `${channelId} ${did}`;

/** Messages posted after the last one read (replies and deleted ones included: they hold a seq too). */
const unreadOf = (lastSeq: number | undefined, lastReadSeq: number | undefined) => Math.max(0, (lastSeq ?? 0) - (lastReadSeq ?? 0));

export function toChannelView(ch: ChannelDoc): ChannelView {
  return {
    id: ch._id,
    workspaceId: ch.workspaceId,
    name: ch.name,
    slug: ch.slug,
    description: ch.description,
    topic: ch.topic,
    isPublic: ch.isPublic,
    isArchived: ch.isArchived,
    creatorDid: ch.creatorDid,
    createdAt: ch.createdAt,
    updatedAt: ch.updatedAt,
  };
}

export function toMemberView(m: ChannelMemberDoc): MemberView {
  return {
    id: m._id,
    channelId: m.channelId,
    memberDid: m.memberDid,
    memberType: m.memberType,
    role: m.role,
    joinedAt: m.joinedAt,
    invitedBy: m.invitedBy,
  };
}

export function toDetailMemberView(m: ChannelMemberDoc): DetailMemberView {
  return { id: m._id, memberDid: m.memberDid, memberType: m.memberType, role: m.role, joinedAt: m.joinedAt, invitedBy: m.invitedBy };
}

export function toMessageView(m: ChannelMessageDoc): MessageView {
  return {
    id: m._id,
    channelId: m.channelId,
    threadId: m.threadId,
    authorDid: m.authorDid,
    authorType: m.authorType,
    content: m.content,
    metadata: parseMetadata(m.metadata),
    reactions: m.reactions ?? {},
    editedAt: m.editedAt,
    deletedAt: m.deletedAt,
    createdAt: m.createdAt,
    ...(m.threadId === null ? { replyCount: m.replyCount ?? 0, lastReplyAt: m.lastReplyAt ?? null } : {}),
  };
}

function parseMetadata(text: string): Record<string, unknown> {
  try {
    const v = JSON.parse(text) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

// -------------------------------------------------------------------------------------------------
// Commands

export interface Caller {
  did: string;
  kind: 'user' | 'agent';
  /** The person's user id; null for agents. */
  userId: string | null;
  isGlobalAdmin: boolean;
}

export function callerOf(p: Principal): Caller {
  return p.kind === 'user'
    ? { did: p.did, kind: 'user', userId: p.userId, isGlobalAdmin: p.isAdmin }
    : { did: p.did, kind: 'agent', userId: null, isGlobalAdmin: false };
}

export interface MessageDraft {
  authorDid: string;
  authorType: 'user' | 'agent';
  content: string;
  threadId: string | null;
  metadata: Record<string, unknown>;
  /** The bridge a message comes in through: no membership check, and it is not sent back out there. */
  via: { bridgeId: string; externalService: 'webhook' | 'teams' } | null;
  /** agent-response: the author must be a member whose type is agent. */
  asAgent?: boolean;
}

export type MessageChange =
  | { op: 'edit'; messageId: string; caller: Caller; content: string }
  | { op: 'delete'; messageId: string; caller: Caller }
  | { op: 'react'; messageId: string; caller: Caller; emoji: string; add: boolean };

export interface ChannelFields {
  name?: string;
  description?: string;
  topic?: string;
  /** false makes the channel private: readers who are not members lose it at once. */
  isPublic?: boolean;
}

/** What the message hooks (bridges) learn about a new message. */
export interface MessageCreated {
  channel: ChannelDoc;
  message: ChannelMessageDoc;
  view: MessageView;
  mentions: AgentRef[];
  via: MessageDraft['via'];
}

export type FeedEventType = 'message.created' | 'message.updated' | 'message.deleted' | 'reaction.updated';

/** The answer of `access`: a channel the caller may read, and the caller's membership. */
export interface Access {
  channel: ChannelDoc;
  member: ChannelMemberDoc | null;
  caller: Caller;
}

export const channelTopic = (channelId: string) => `channel:${channelId}`;

export const archivedError = () => new AppError(403, 'channel_archived', 'the channel is archived: its history is readable, but nothing can be posted or changed');

type PostCommand = Extract<ChannelCommand, { kind: 'post' }>;

/** The command queue of one channel; exists only while it has work. */
interface Writer {
  queue: ChannelCommand[];
  running: boolean;
}

type AfterWrite = () => void;

/** In a cluster, how often the channel caches are cleared (to drop an entry whose change message was lost). */
const CLUSTER_CACHE_CLEAR_MS = 60_000;

/** Reads of a failed batch's ids before giving up on knowing which messages were stored, and the pause after the first (growing). */
const READ_BACK_ATTEMPTS = 3;
const READ_BACK_PAUSE_MS = 100;

export class ChannelService {
  private readonly c: Collections;
  private readonly writers = new Map<string, Writer>();
  /** Last sequence number given per channel (see nextSeq). */
  private readonly seqs = new Map<string, number>();
  private readonly cache: ChannelCache;
  private readonly counters: ChannelCounters;
  private readonly createdHooks: Array<(e: MessageCreated) => void> = [];
  private readonly accessLostHooks: Array<(channelId: string, did: string | null) => void> = [];

  private readonly agents: AgentLink;
  private readonly feed: FeedPublisher;

  constructor(
    private readonly ctx: ServiceCore,
    deps: { agents: AgentLink; feed: FeedPublisher; peers?: PeerNodes },
  ) {
    this.c = ctx.c;
    this.agents = deps.agents;
    this.feed = deps.feed;
    const peers = deps.peers;
    if (peers?.clustered) {
      // Other nodes' caches drop what changed here. A lost message: their entry stays stale until
      // their next clearing (every minute, and when their bus is back after an outage).
      this.cache = new ChannelCache(ctx.c, (what, channelId) => peers.broadcast('channel-cache', { what, channelId }));
      peers.onBroadcast('channel-cache', (data) => {
        const { what, channelId } = data as { what: 'channel' | 'members'; channelId: string };
        this.cache.forget(what, channelId);
      });
      peers.onResync(() => this.cache.clear());
      setInterval(() => this.cache.clear(), CLUSTER_CACHE_CLEAR_MS).unref();
    } else {
      this.cache = new ChannelCache(ctx.c);
    }
    this.counters = new ChannelCounters(ctx.c, ctx.log);
    ctx.actors.define(CHANNEL_ACTOR_KIND, {
      machine: channelMachine.provide({
        actors: {
          loadChannel: fromPromise<LoadedChannel, { channelId: string }>(async ({ input }) => this.load(input.channelId)),
        },
        actions: {
          write: ({ context }, command) => this.enqueue(context.channelId, command),
          refuseArchived: (_args, reply) => reply.reject(archivedError()),
        },
      }),
      input: (id) => ({ channelId: id }),
      deleteWhenDone: true,
    });
    // Cluster mode: commands from other nodes for the channels of this node's shards.
    ctx.placement.handle('channel.command', (data) => {
      const { channelId, event } = data as { channelId: string; event: ChannelCommandEvent };
      return this.commandHere(channelId, event);
    });
    // A channel's message numbers are the owner's: a node that gives a shard up reads them again if it takes it back.
    ctx.placement.onReleased((shard) => {
      for (const channelId of [...this.seqs.keys()]) if (ctx.placement.shardOf(`${CHANNEL_ACTOR_KIND}:${channelId}`) === shard) this.seqs.delete(channelId);
    });
  }

  /** For when a workspace is deleted: its channels go, with their members, messages and bridges. */
  async workspaceDeleted(ws: WorkspaceDoc): Promise<void> {
    for (const ch of await this.c.channels.find({ workspaceId: ws._id }, { projection: { _id: 1 } })) await this.destroy(ch._id);
  }

  /** For when a person is deleted: they leave every channel. */
  async userDeleted(user: UserDoc): Promise<void> {
    if (user.did) await this.forgetMember(user.did);
  }

  /** Removes a DID from every channel it is a member of (a deleted user or agent). */
  async forgetMember(did: string): Promise<void> {
    await this.removeMemberships(did, {});
  }

  /**
   * For when a person or an agent leaves a workspace (or is removed from it): they leave every
   * channel of it, private ones included, so rejoining gives back only what any member reads.
   */
  async leftWorkspace(workspaceId: string, did: string): Promise<void> {
    const ids = (await this.c.channels.find({ workspaceId }, { projection: { _id: 1 } })).map((ch) => ch._id);
    if (ids.length > 0) await this.removeMemberships(did, { channelId: { $in: ids } });
  }

  /** Deletes `did`'s memberships (and read positions) of the channels `scope` selects; each channel's readers are told. */
  private async removeMemberships(did: string, scope: Filter): Promise<void> {
    const gone = await this.c.channelMembers.find({ memberDid: did, ...scope }, { projection: { channelId: 1 } });
    if (gone.length === 0) return;
    await this.c.channelMembers.deleteMany({ memberDid: did, ...scope });
    await this.c.channelReads.deleteMany({ memberDid: did, ...scope });
    for (const m of gone) {
      this.cache.dropMembers(m.channelId);
      this.accessLost(m.channelId, did);
    }
  }

  /** Runs `fn` after each new message is stored and its author has the answer (bridges use it). */
  onMessageCreated(fn: (e: MessageCreated) => void): void {
    this.createdHooks.push(fn);
  }

  /**
   * Runs `fn` when someone may have lost read access to a channel (a member removed; `did` null:
   * the channel is gone or was made private), so that the live feed can re-check its subscriptions.
   */
  onAccessLost(fn: (channelId: string, did: string | null) => void): void {
    this.accessLostHooks.push(fn);
  }

  // -----------------------------------------------------------------------------------------------
  // Access

  /** The channel as the caller may read it; 404 when it does not exist or they may not read it. */
  async access(p: Principal, channelId: string): Promise<Access> {
    const caller = callerOf(p);
    const channel = await this.cache.channel(channelId);
    const member = channel ? await this.cache.member(channelId, caller.did) : null;
    if (!channel || !(await this.mayRead(caller, channel, member))) throw notFound(`channel ${channelId} not found`);
    return { channel, member, caller };
  }

  /** Whether a principal may read a channel (the live feed asks this before subscribing). */
  async canRead(p: Principal, channelId: string): Promise<boolean> {
    try {
      await this.access(p, channelId);
      return true;
    } catch (err) {
      if (err instanceof AppError && err.status === 404) return false;
      throw err;
    }
  }

  private async mayRead(caller: Caller, channel: ChannelDoc, member: ChannelMemberDoc | null): Promise<boolean> {
    if (member || caller.isGlobalAdmin) return true;
    if (!channel.isPublic) return false;
    if (channel.workspaceId === null) return true;
    return this.inWorkspace(caller, channel.workspaceId);
  }

  private async inWorkspace(caller: Caller, workspaceId: string): Promise<boolean> {
    if (caller.kind === 'agent') return (await this.c.workspaceAgents.count({ workspaceId, agentDid: caller.did })) > 0;
    return (await this.c.workspaceMembers.count({ workspaceId, userId: caller.userId })) > 0;
  }

  /** Whether the caller may see the agent: a global admin, or one of the agent's workspaces is the caller's. */
  private async seesAgent(caller: Caller, agentDid: string): Promise<boolean> {
    if (caller.isGlobalAdmin) return true;
    const workspaceIds = (await this.c.workspaceAgents.find({ agentDid }, { projection: { workspaceId: 1 } })).map((m) => m.workspaceId);
    for (const id of workspaceIds) if (await this.inWorkspace(caller, id)) return true;
    return false;
  }

  /** 403 unless the caller owns the channel or is a global admin. */
  requireOwner(a: Access, what: string): void {
    if (!a.caller.isGlobalAdmin && a.member?.role !== 'owner') throw forbidden(`${what} needs the owner role in this channel (or global admin)`);
  }

  // -----------------------------------------------------------------------------------------------
  // Channels

  /** Creates a channel; the creator becomes its owner. */
  async create(
    p: Principal,
    input: { name: string; workspaceId?: string | null; description?: string; topic?: string; slug?: string; isPublic?: boolean },
  ): Promise<ChannelDoc> {
    const caller = callerOf(p);
    let ws: WorkspaceDoc | null = null;
    if (input.workspaceId) {
      ws = await resolveWorkspace(this.c, input.workspaceId);
      if (!ws || (!caller.isGlobalAdmin && !(await this.inWorkspace(caller, ws._id)))) throw notFound(`workspace ${input.workspaceId} not found`);
    } else if (!caller.isGlobalAdmin) {
      throw forbidden('a global channel (no workspaceId) can only be created by a global admin');
    }
    // The route has checked both: the name is trimmed and not blank, a given slug 1–100 characters without whitespace.
    const slug = input.slug ?? channelSlug(input.name);
    const now = new Date().toISOString();
    const channel: ChannelDoc = {
      _id: newId(),
      workspaceId: ws?._id ?? null,
      name: input.name,
      slug,
      slugKey: `${ws?._id ?? 'global'}/${slug}`,
      description: input.description ?? '',
      topic: input.topic ?? '',
      isPublic: input.isPublic ?? true,
      isArchived: false,
      creatorDid: caller.did,
      createdAt: now,
      updatedAt: now,
    };
    try {
      await this.c.channels.insertOne(channel);
    } catch (err) {
      if (err instanceof DuplicateKeyError) throw conflict(`the slug '${slug}' is already taken ${ws ? `in workspace ${ws.slug}` : 'among global channels'}`, 'slug_taken');
      throw err;
    }
    await this.c.channelMembers.insertOne({
      _id: newId(),
      channelId: channel._id,
      memberDid: caller.did,
      memberType: caller.kind,
      role: 'owner',
      joinedAt: now,
      invitedBy: null,
    });
    this.cache.dropMembers(channel._id);
    await this.ctx.audit.record(p, {
      action: 'channel.create',
      targetType: 'channel',
      target: channel._id,
      details: { name: channel.name, slug: channel.slug, workspaceId: channel.workspaceId, isPublic: channel.isPublic },
    });
    return channel;
  }

  /** A channel the caller may read, with its members and stats. */
  async detail(p: Principal, channelId: string): Promise<{ channel: ChannelDoc; members: ChannelMemberDoc[]; stats: { messageCount: number; memberCount: number } }> {
    const a = await this.access(p, channelId);
    const [members, stats] = await Promise.all([this.members(a.channel._id), this.stats(a.channel._id)]);
    return { channel: a.channel, members, stats: { messageCount: stats.messageCount, memberCount: stats.memberCount } };
  }

  /** Changes a channel's fields and/or its archive state (channel owner or global admin). */
  async edit(p: Principal, channelId: string, patch: ChannelFields & { isArchived?: boolean }): Promise<ChannelDoc> {
    const a = await this.access(p, channelId);
    this.requireOwner(a, 'changing the channel');
    const { isArchived, ...fields } = patch;
    const channel = await this.update(a.channel._id, fields, isArchived);
    // Made private: readers who were not members lose it.
    if (a.channel.isPublic && !channel.isPublic) this.accessLost(channel._id, null);
    await this.ctx.audit.record(p, {
      action: isArchived === true && !a.channel.isArchived ? 'channel.archive' : isArchived === false && a.channel.isArchived ? 'channel.unarchive' : 'channel.update',
      targetType: 'channel',
      target: channel._id,
      details: { changes: patch },
    });
    return channel;
  }

  /** Archives a channel (channel owner or global admin); its history stays readable. */
  async archive(p: Principal, channelId: string): Promise<void> {
    const a = await this.access(p, channelId);
    this.requireOwner(a, 'archiving the channel');
    await this.update(a.channel._id, {}, true);
    await this.ctx.audit.record(p, { action: 'channel.archive', targetType: 'channel', target: a.channel._id });
  }

  /**
   * Channels of a workspace the caller may see, plus (includeGlobal) global ones, each with
   * memberCount and messageCount. 404 when the caller may not see the workspace.
   */
  async list(
    p: Principal,
    workspaceRef: string,
    opts: { includeArchived: boolean; includeGlobal: boolean },
  ): Promise<ChannelListItem[]> {
    const caller = callerOf(p);
    const ws = await resolveWorkspace(this.c, workspaceRef);
    if (!ws || (!caller.isGlobalAdmin && !(await this.inWorkspace(caller, ws._id)))) throw notFound(`workspace ${workspaceRef} not found`);
    const scope: Filter = opts.includeGlobal ? { workspaceId: { $in: [ws._id, null] } } : { workspaceId: ws._id };
    const filter: Filter = opts.includeArchived ? scope : { ...scope, isArchived: false };
    let channels = await this.c.channels.find(filter);
    if (!caller.isGlobalAdmin) {
      const mine = new Set(
        (await this.c.channelMembers.find({ memberDid: caller.did }, { projection: { channelId: 1 } })).map((m) => m.channelId),
      );
      channels = channels.filter((ch) => ch.isPublic || mine.has(ch._id));
    }
    channels.sort((a, b) => a.name.toLowerCase().localeCompare(b.name.toLowerCase()) || (a._id < b._id ? -1 : 1));
    return Promise.all(channels.map(async (ch) => ({ ...toChannelView(ch), ...(await this.stats(ch._id)) })));
  }

  async stats(channelId: string): Promise<{ memberCount: number; messageCount: number }> {
    const [memberCount, messageCount] = await Promise.all([
      this.c.channelMembers.count({ channelId }),
      this.c.channelMessages.count({ channelId, deletedAt: null }),
    ]);
    return { memberCount, messageCount };
  }

  async members(channelId: string): Promise<ChannelMemberDoc[]> {
    return this.c.channelMembers.find({ channelId }, { sort: { joinedAt: 1, _id: 1 } });
  }

  /** Changes fields and/or the archive state, through the channel actor. */
  private async update(channelId: string, fields: ChannelFields, isArchived?: boolean): Promise<ChannelDoc> {
    return this.command(channelId, { type: 'UPDATE', fields, isArchived }) as Promise<ChannelDoc>;
  }

  // -----------------------------------------------------------------------------------------------
  // Members

  /** Adds a member (owner, moderator or global admin; the owner and moderator roles only by an owner); 409 when already a member. */
  async addMember(p: Principal, channelId: string, input: { memberDid: string; memberType: 'user' | 'agent'; role: ChannelRole }): Promise<ChannelMemberDoc> {
    const a = await this.access(p, channelId);
    const member = await this.insertMember(a, input);
    await this.ctx.audit.record(p, {
      action: 'channel.member.add',
      targetType: 'channel',
      target: a.channel._id,
      details: { memberDid: member.memberDid, memberType: member.memberType, role: member.role },
    });
    return member;
  }

  /** Removes a member (owner or global admin; a moderator members with the member role; anyone themselves). */
  async removeMember(p: Principal, channelId: string, memberDid: string): Promise<void> {
    const a = await this.access(p, channelId);
    const removed = await this.deleteMember(a, memberDid);
    await this.ctx.audit.record(p, {
      action: 'channel.member.remove',
      targetType: 'channel',
      target: a.channel._id,
      details: { memberDid: removed.memberDid, role: removed.role },
    });
  }

  private async insertMember(a: Access, input: { memberDid: string; memberType: 'user' | 'agent'; role: ChannelRole }): Promise<ChannelMemberDoc> {
    const role = a.member?.role;
    const ga = a.caller.isGlobalAdmin;
    if (!ga && role !== 'owner' && role !== 'moderator') throw forbidden('adding members needs the owner or moderator role in this channel (or global admin)');
    if (input.role !== 'member' && !ga && role !== 'owner') throw forbidden(`only a channel owner (or a global admin) can give the ${input.role} role`);
    if (input.memberType === 'user') {
      if (!(await this.c.userDids.findById(input.memberDid))) throw badRequest(`no user has the DID ${input.memberDid}`, 'unknown_member');
    } else {
      const agent = await this.c.agents.findById(input.memberDid);
      // An agent of no workspace the caller is in answers as an unknown one (docs/api.md).
      if (!agent || agent.status !== 'active' || !(await this.seesAgent(a.caller, agent._id))) {
        throw badRequest(`no active agent has the DID ${input.memberDid}`, 'unknown_member');
      }
    }
    const doc: ChannelMemberDoc = {
      _id: newId(),
      channelId: a.channel._id,
      memberDid: input.memberDid,
      memberType: input.memberType,
      role: input.role,
      joinedAt: new Date().toISOString(),
      invitedBy: a.caller.did,
    };
    try {
      await this.c.channelMembers.insertOne(doc);
    } catch (err) {
      if (err instanceof DuplicateKeyError) throw conflict(`${input.memberDid} is already a member of this channel`, 'already_member');
      throw err;
    } finally {
      this.cache.dropMembers(a.channel._id);
    }
    return doc;
  }

  private async deleteMember(a: Access, memberDid: string): Promise<ChannelMemberDoc> {
    const target = await this.cache.member(a.channel._id, memberDid);
    if (!target) throw notFound(`${memberDid} is not a member of this channel`);
    const self = memberDid === a.caller.did;
    const role = a.member?.role;
    const allowed = self || a.caller.isGlobalAdmin || role === 'owner' || (role === 'moderator' && target.role === 'member');
    if (!allowed) {
      throw forbidden(
        role === 'moderator'
          ? `a moderator can remove members with the member role, not a ${target.role}`
          : 'removing members needs the owner or moderator role in this channel (or global admin)',
      );
    }
    await this.c.channelMembers.deleteOne({ _id: target._id });
    this.cache.dropMembers(a.channel._id);
    this.accessLost(a.channel._id, memberDid);
    return target;
  }

  // -----------------------------------------------------------------------------------------------
  // Messages

  /** A page of a channel's messages (see listMessages), for a caller who may read it. */
  async messages(p: Principal, channelId: string, q: { limit: number; offset: number; threadId?: string }): Promise<ChannelMessageDoc[]> {
    const a = await this.access(p, channelId);
    return this.listMessages(a.channel._id, q);
  }

  /**
   * Posts a message as the caller (a member of the channel). `asAgent`: the agents' reply
   * endpoint, for a member whose type is agent; the message's author type is then agent.
   */
  async postAs(
    p: Principal,
    channelId: string,
    m: { content: string; threadId?: string | null; metadata?: Record<string, unknown> },
    asAgent = false,
  ): Promise<ChannelMessageDoc> {
    const a = await this.access(p, channelId);
    return this.post(a.channel._id, {
      authorDid: a.caller.did,
      authorType: asAgent ? 'agent' : a.caller.kind,
      content: m.content,
      threadId: m.threadId ?? null,
      metadata: checkMetadata(m.metadata),
      via: null,
      ...(asAgent ? { asAgent: true } : {}),
    });
  }

  /** Edits one's own message. */
  async editMessage(p: Principal, channelId: string, messageId: string, content: string): Promise<ChannelMessageDoc> {
    const a = await this.access(p, channelId);
    return this.change(a.channel._id, { op: 'edit', messageId, caller: a.caller, content });
  }

  /** Deletes a message (its author, a channel owner or moderator, or a global admin); it stays as a tombstone. */
  async deleteMessage(p: Principal, channelId: string, messageId: string): Promise<void> {
    const a = await this.access(p, channelId);
    await this.change(a.channel._id, { op: 'delete', messageId, caller: a.caller });
  }

  /** Adds or removes the caller's reaction; answers the message. */
  async react(p: Principal, channelId: string, messageId: string, emoji: string, add: boolean): Promise<ChannelMessageDoc> {
    const a = await this.access(p, channelId);
    return this.change(a.channel._id, { op: 'react', messageId, caller: a.caller, emoji, add });
  }

  /** Posts a message through the channel actor; resolves once it is stored. */
  async post(channelId: string, draft: MessageDraft): Promise<ChannelMessageDoc> {
    return this.command(channelId, { type: 'POST', draft }) as Promise<ChannelMessageDoc>;
  }

  /** Edits, deletes or reacts to a message through the channel actor. */
  private async change(channelId: string, change: MessageChange): Promise<ChannelMessageDoc> {
    return this.command(channelId, { type: 'CHANGE', change }) as Promise<ChannelMessageDoc>;
  }

  /**
   * A page of messages, newest first: top-level messages, or with `threadId` the replies to that
   * message. Deleted messages stay in place as tombstones.
   */
  private async listMessages(channelId: string, q: { limit: number; offset: number; threadId?: string }): Promise<ChannelMessageDoc[]> {
    if (q.threadId !== undefined && !(await this.c.channelMessages.findOne({ _id: q.threadId, channelId }))) {
      throw badRequest(`threadId ${q.threadId} names no message of this channel`, 'unknown_thread');
    }
    return this.c.channelMessages.find({ channelId, threadId: q.threadId ?? null }, { sort: { seq: -1 }, skip: q.offset, limit: q.limit });
  }

  // -----------------------------------------------------------------------------------------------
  // Read positions and unread counts

  /**
   * Marks a channel read up to a message, for a member (403 for a reader who is not one; 404
   * when the channel or the message is not there for them). The position only moves forward.
   */
  async markRead(p: Principal, channelId: string, messageId: string): Promise<ReadMarkView> {
    const a = await this.access(p, channelId);
    if (!a.member) throw forbidden('read positions are kept for members of the channel', 'not_a_member');
    const msg = await this.c.channelMessages.findOne({ _id: messageId, channelId: a.channel._id }, { projection: { seq: 1 } });
    if (!msg) throw notFound(`message ${messageId} not found in this channel`);
    const id = readId(a.channel._id, a.caller.did);
    const now = new Date().toISOString();
    // Forward only: a mark older than the stored one changes nothing (two tabs may mark out of order).
    await this.c.channelReads
      .updateOne(
        { _id: id, lastReadSeq: { $lt: msg.seq } },
        { $set: { lastReadSeq: msg.seq, lastReadMessageId: msg._id, updatedAt: now }, $setOnInsert: { channelId: a.channel._id, memberDid: a.caller.did } },
        { upsert: true },
      )
      .catch((err: unknown) => {
        // The upsert met the existing record whose position is ahead: nothing to change.
        if (!(err instanceof DuplicateKeyError)) throw err;
      });
    const [read, channel] = await Promise.all([this.c.channelReads.findById(id), this.c.channels.findById(a.channel._id)]);
    return { channelId: a.channel._id, lastReadMessageId: read?.lastReadMessageId ?? msg._id, unread: unreadOf(channel?.lastSeq, read?.lastReadSeq) };
  }

  /** Unread counts of every channel the caller is a member of, from three indexed reads (no message is counted). */
  async unread(p: Principal): Promise<UnreadView> {
    const did = callerOf(p).did;
    const memberships = await this.c.channelMembers.find({ memberDid: did }, { projection: { channelId: 1 } });
    if (memberships.length === 0) return { channels: [] };
    const ids = memberships.map((m) => m.channelId);
    const [channels, reads] = await Promise.all([
      this.c.channels.find({ _id: { $in: ids } }, { projection: { lastSeq: 1 } }),
      this.c.channelReads.find({ memberDid: did }, { projection: { channelId: 1, lastReadSeq: 1, lastReadMessageId: 1 } }),
    ]);
    const readOf = new Map(reads.map((r) => [r.channelId, r]));
    return {
      channels: channels
        .map((ch) => {
          const r = readOf.get(ch._id);
          return { channelId: ch._id, unread: unreadOf(ch.lastSeq, r?.lastReadSeq), lastReadMessageId: r?.lastReadMessageId ?? null };
        })
        .sort((x, y) => (x.channelId < y.channelId ? -1 : 1)),
    };
  }

  // -----------------------------------------------------------------------------------------------
  // The actor and its writer

  private async load(channelId: string): Promise<LoadedChannel> {
    const ch = await this.cache.channel(channelId);
    if (!ch) throw new Error(`channel ${channelId} does not exist`);
    return { isArchived: ch.isArchived };
  }

  /** The channel's actor, booted (its archive state loaded). */
  private async actor(channelId: string): Promise<AnyActorRef> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const actor = (await this.ctx.actors.get(CHANNEL_ACTOR_KIND, channelId)) as unknown as AnyActorRef;
      const snap = await settled(actor);
      if (snap.status === 'active') return actor;
    }
    if (!(await this.c.channels.findById(channelId))) throw notFound(`channel ${channelId} not found`);
    throw new AppError(503, 'channel_unavailable', 'the channel could not be loaded; try again');
  }

  /**
   * Hands a command to the channel's actor, where it lives: here, or (cluster mode) on the owner
   * of its shard, whose answer comes back over the bus (lost: 504, and the message may be stored;
   * docs/cluster.md).
   */
  private async command(channelId: string, event: ChannelCommandEvent): Promise<unknown> {
    if (!this.ctx.placement.clustered) return this.commandHere(channelId, event);
    return this.ctx.placement.run(`${CHANNEL_ACTOR_KIND}:${channelId}`, 'channel.command', { channelId, event });
  }

  private async commandHere(channelId: string, event: ChannelCommandEvent): Promise<unknown> {
    const actor = await this.actor(channelId);
    return new Promise((resolve, reject) => actor.send({ ...event, reply: { resolve, reject } } as ChannelActorEvent));
  }

  private enqueue(channelId: string, command: ChannelCommand): void {
    let w = this.writers.get(channelId);
    if (!w) this.writers.set(channelId, (w = { queue: [], running: false }));
    w.queue.push(command);
    if (!w.running) {
      w.running = true;
      this.drain(channelId, w).catch((err: unknown) => {
        // drain() answers every command itself; this is a last resort that keeps the channel writable.
        this.ctx.log.error({ err, channelId }, 'the channel writer failed');
        w.running = false;
        if (this.writers.get(channelId) === w) this.writers.delete(channelId);
      });
    }
  }

  /**
   * Runs a channel's commands in the actor's order. A run of consecutive posts is stored with one
   * insertMany (one disk append on the embedded store), then each poster gets its answer. A run
   * that fails (the store failing again while numbering or checking after a collision) answers
   * its posters with the error; the commands after it still run.
   */
  private async drain(channelId: string, w: Writer): Promise<void> {
    while (w.queue.length > 0) {
      const batch = w.queue;
      w.queue = [];
      for (let i = 0; i < batch.length; ) {
        let j = i;
        while (j < batch.length && batch[j]!.kind === 'post') j++;
        if (j > i) {
          const posts = batch.slice(i, j) as PostCommand[];
          try {
            await this.storePosts(channelId, posts);
          } catch (err) {
            this.ctx.log.error({ err, channelId, posts: posts.length }, 'storing channel posts failed');
            this.seqs.delete(channelId); // numbered again from the store
            for (const p of posts) p.reply.reject(err); // no effect on those already answered
          }
          i = j;
          continue;
        }
        const command = batch[i++] as Exclude<ChannelCommand, PostCommand>;
        try {
          const out = command.kind === 'change' ? await this.applyChange(channelId, command.change as MessageChange) : await this.storeUpdate(channelId, command);
          command.reply.resolve(out.value);
          if (out.after) setImmediate(this.runAfter, out.after, channelId);
        } catch (err) {
          command.reply.reject(err);
        }
      }
    }
    w.running = false;
    this.writers.delete(channelId);
  }

  private readonly runAfter = (after: AfterWrite, channelId: string): void => {
    try {
      after();
    } catch (err) {
      this.ctx.log.error({ err, channelId }, 'dispatching a channel event failed');
    }
  };

  private async storePosts(channelId: string, commands: PostCommand[]): Promise<void> {
    const c = this.c;
    const ready: Array<{ command: PostCommand; doc: ChannelMessageDoc; after: AfterWrite }> = [];
    for (const command of commands) {
      try {
        const prepared = await this.preparePost(channelId, command.draft as MessageDraft);
        prepared.doc.seq = await this.nextSeq(channelId);
        ready.push({ command, ...prepared });
      } catch (err) {
        command.reply.reject(err);
      }
    }
    if (ready.length === 0) return;
    let stored = ready;
    try {
      await c.channelMessages.insertMany(ready.map((r) => r.doc));
    } catch (err) {
      stored = err instanceof DuplicateKeyError ? await this.storeOneByOne(channelId, ready) : await this.landedOf(channelId, ready, err);
    }
    if (stored.length > 0) await this.counters.posted(channelId, stored.map((r) => r.doc));
    for (const r of stored) {
      r.command.reply.resolve(r.doc);
      setImmediate(this.runAfter, r.after, channelId);
    }
  }

  /**
   * The next sequence number of a channel: one more than the last one given in this process, or
   * than the highest stored (read once per channel, so numbering survives restarts and crashes).
   */
  private async nextSeq(channelId: string): Promise<number> {
    let last = this.seqs.get(channelId);
    if (last === undefined) last = await this.highestSeq(channelId);
    put(this.seqs, channelId, last + 1);
    return last + 1;
  }

  private async highestSeq(channelId: string): Promise<number> {
    const [top] = await this.c.channelMessages.find({ channelId }, { sort: { seq: -1 }, limit: 1, projection: { seq: 1 } });
    return top?.seq ?? 0;
  }

  /**
   * After a batch insert failed otherwise: it may still have stored some of the messages, or all
   * (a reply lost, a partly applied insertMany). Reads back which of the batch's ids are stored:
   * those are answered and published like any other, the others get the error. So each message is
   * published once or reported failed, never both. When the store cannot say (the read fails
   * READ_BACK_ATTEMPTS times), every poster gets the error, nothing is published, and the batch's
   * messages are deleted (as far as the store lets them be).
   */
  private async landedOf<T extends { command: PostCommand; doc: ChannelMessageDoc }>(channelId: string, ready: T[], err: unknown): Promise<T[]> {
    const ids = ready.map((r) => r.doc._id);
    let landed: Set<string> | null = null;
    for (let attempt = 1; landed === null; attempt++) {
      try {
        landed = new Set((await this.c.channelMessages.find({ _id: { $in: ids } }, { projection: { _id: 1 } })).map((d) => d._id));
      } catch (readErr) {
        if (attempt >= READ_BACK_ATTEMPTS) {
          // All are reported failed; what may have been stored is taken back, so none stays behind unannounced.
          const removed = await this.c.channelMessages.deleteMany({ _id: { $in: ids } }).then(
            () => true,
            () => false,
          );
          this.ctx.log.error(
            { err: readErr, channelId, messages: ids.length, removed },
            removed ? 'a failed batch of messages could not be read back; all reported failed and removed' : 'a failed batch of messages could not be read back or removed; all reported failed, some may be stored',
          );
          for (const r of ready) r.command.reply.reject(err);
          return [];
        }
        await new Promise((resolve) => setTimeout(resolve, READ_BACK_PAUSE_MS * attempt));
      }
    }
    const stored: T[] = [];
    for (const r of ready) {
      if (landed.has(r.doc._id)) stored.push(r);
      else r.command.reply.reject(err);
    }
    this.ctx.log.warn({ err, channelId, messages: ids.length, stored: stored.length }, 'storing a batch of messages failed; the ones stored are answered');
    return stored;
  }

  /**
   * After a batch hit a duplicate key, stores what it can one by one. A post whose number turns
   * out to be taken (another writer of the same store) is numbered again after the highest stored.
   */
  private async storeOneByOne<T extends { command: PostCommand; doc: ChannelMessageDoc }>(channelId: string, ready: T[]): Promise<T[]> {
    const c = this.c;
    const stored: T[] = [];
    for (const r of ready) {
      for (let attempt = 0; ; attempt++) {
        try {
          await c.channelMessages.insertOne(r.doc);
          stored.push(r);
        } catch (err) {
          if (err instanceof DuplicateKeyError && (await c.channelMessages.findById(r.doc._id))) {
            stored.push(r); // the failed batch had stored this one
          } else if (err instanceof DuplicateKeyError && attempt < 5) {
            this.seqs.delete(channelId);
            r.doc.seq = await this.nextSeq(channelId);
            continue;
          } else {
            r.command.reply.reject(err);
          }
        }
        break;
      }
    }
    return stored;
  }

  /** Checks a post (membership, thread) and builds its document with the mentions found. */
  private async preparePost(channelId: string, draft: MessageDraft): Promise<{ doc: ChannelMessageDoc; after: AfterWrite }> {
    const channel = await this.cache.channel(channelId);
    if (!channel) throw notFound(`channel ${channelId} not found`);
    if (!draft.via) {
      const member = await this.cache.member(channelId, draft.authorDid);
      if (!member) throw forbidden('posting needs membership of the channel', 'not_a_member');
      if (draft.asAgent && member.memberType !== 'agent') {
        throw forbidden('agent-response is for members whose type is agent', 'not_an_agent');
      }
    }
    if (draft.threadId !== null && !(await this.c.channelMessages.findOne({ _id: draft.threadId, channelId }))) {
      throw badRequest(`threadId ${draft.threadId} names no message of this channel`, 'unknown_thread');
    }
    const mentions = findMentions(draft.content, await this.cache.agents(channelId));
    const metadata = { ...draft.metadata };
    delete metadata.mentions;
    if (mentions.length > 0) metadata.mentions = mentions.map((a) => a.name);
    const doc: ChannelMessageDoc = {
      _id: newId(),
      channelId,
      seq: 0, // numbered by the writer once every check passed
      threadId: draft.threadId,
      authorDid: draft.authorDid,
      authorType: draft.authorType,
      content: draft.content,
      metadata: JSON.stringify(metadata),
      reactions: {},
      editedAt: null,
      deletedAt: null,
      createdAt: new Date().toISOString(),
      viaBridgeId: draft.via?.bridgeId ?? null,
    };
    return { doc, after: () => this.dispatchCreated({ channel, message: doc, view: toMessageView(doc), mentions, via: draft.via }) };
  }

  private async applyChange(channelId: string, change: MessageChange): Promise<{ value: unknown; after?: AfterWrite }> {
    const c = this.c;
    const msg = await c.channelMessages.findOne({ _id: change.messageId, channelId });
    if (!msg || msg.deletedAt) throw notFound(`message ${change.messageId} not found in this channel`);
    const member = await this.cache.member(channelId, change.caller.did);
    const now = new Date().toISOString();
    let set: Partial<ChannelMessageDoc>;
    let event: FeedEventType;
    let newMentions: AgentRef[] = [];
    let channel: ChannelDoc | null = null;
    switch (change.op) {
      case 'edit': {
        if (msg.authorDid !== change.caller.did) throw forbidden('only its author can edit a message', 'not_author');
        const mentions = findMentions(change.content, await this.cache.agents(channelId));
        const metadata = parseMetadata(msg.metadata);
        const before = new Set(Array.isArray(metadata.mentions) ? (metadata.mentions as string[]) : []);
        delete metadata.mentions;
        if (mentions.length > 0) metadata.mentions = mentions.map((a) => a.name);
        newMentions = mentions.filter((a) => !before.has(a.name));
        if (newMentions.length > 0) channel = await this.cache.channel(channelId);
        set = { content: change.content, metadata: JSON.stringify(metadata), editedAt: now };
        event = 'message.updated';
        break;
      }
      case 'delete': {
        const mayModerate = change.caller.isGlobalAdmin || member?.role === 'owner' || member?.role === 'moderator';
        if (msg.authorDid !== change.caller.did && !mayModerate) {
          throw forbidden('only its author, a channel owner or moderator, or a global admin can delete a message', 'not_author');
        }
        set = { content: '', metadata: '{}', reactions: {}, deletedAt: now };
        event = 'message.deleted';
        break;
      }
      case 'react': {
        if (!member) throw forbidden('reacting needs membership of the channel', 'not_a_member');
        const reactions: Record<string, string[]> = { ...msg.reactions };
        const dids = reactions[change.emoji] ?? [];
        if (change.add) {
          if (!dids.includes(change.caller.did)) reactions[change.emoji] = [...dids, change.caller.did];
        } else {
          const rest = dids.filter((d) => d !== change.caller.did);
          if (rest.length > 0) reactions[change.emoji] = rest;
          else delete reactions[change.emoji];
        }
        set = { reactions };
        event = 'reaction.updated';
        break;
      }
    }
    const updated = await c.channelMessages.findOneAndUpdate({ _id: msg._id, deletedAt: null }, { $set: set });
    if (!updated) throw notFound(`message ${change.messageId} not found in this channel`);
    if (change.op === 'delete' && msg.threadId !== null) await this.counters.replyDeleted(channelId, msg);
    const view = toMessageView(updated);
    return {
      value: updated,
      after: () => {
        this.publish(channelId, event, view);
        if (channel) this.pushMentions(channel, updated, view, newMentions, null);
      },
    };
  }

  private async storeUpdate(channelId: string, command: Extract<ChannelCommand, { kind: 'update' }>): Promise<{ value: ChannelDoc; after?: AfterWrite }> {
    const set: Partial<ChannelDoc> = { ...(command.fields as ChannelFields), updatedAt: new Date().toISOString() };
    if (command.isArchived !== undefined) set.isArchived = command.isArchived;
    const updated = await this.c.channels.findOneAndUpdate({ _id: channelId }, { $set: set });
    if (!updated) throw notFound(`channel ${channelId} not found`);
    this.cache.setChannel(updated);
    return { value: updated };
  }

  // -----------------------------------------------------------------------------------------------
  // Dispatch

  private dispatchCreated(e: MessageCreated): void {
    this.publish(e.channel._id, 'message.created', e.view);
    this.pushMentions(e.channel, e.message, e.view, e.mentions, e.via);
    for (const fn of this.createdHooks) {
      try {
        fn(e);
      } catch (err) {
        this.ctx.log.error({ err, channelId: e.channel._id }, 'message hook failed');
      }
    }
  }

  /** Sends channel_message_send to each mentioned agent that is online (never to the author). */
  private pushMentions(channel: ChannelDoc, msg: ChannelMessageDoc, view: MessageView, mentions: AgentRef[], via: MessageDraft['via']): void {
    for (const agent of mentions) {
      if (agent.did === msg.authorDid || !this.agents.isOnline(agent.did)) continue;
      this.agents.push(agent.did, {
        type: 'channel_message_send',
        channelId: channel._id,
        channel: { id: channel._id, name: channel.name, slug: channel.slug, workspaceId: channel.workspaceId },
        message: {
          id: view.id,
          channelId: view.channelId,
          threadId: view.threadId,
          authorDid: view.authorDid,
          authorType: view.authorType,
          content: view.content,
          metadata: view.metadata,
          createdAt: view.createdAt,
        },
        mention: agent.name,
        source: via?.externalService ?? 'channel',
      });
    }
  }

  /** Publishes a feed event to the channel's live-feed topic. */
  publish(channelId: string, type: FeedEventType, message: MessageView): void {
    const topic = channelTopic(channelId);
    if (this.feed.hasSubscribers(topic)) this.feed.publish(topic, { type, channelId, message });
  }

  /**
   * For the live feed: the topic of a channel the principal may read; null otherwise (unknown
   * and hidden alike, and when the store fails — logged — since the feed has no error to answer).
   */
  readonly feedTopic = async (p: Principal, channelId: string): Promise<string | null> => {
    try {
      return (await this.canRead(p, channelId)) ? channelTopic(channelId) : null;
    } catch (err) {
      this.ctx.log.error({ err, channelId }, 'checking a feed subscription failed');
      return null;
    }
  };

  private accessLost(channelId: string, did: string | null): void {
    for (const fn of this.accessLostHooks) {
      try {
        fn(channelId, did);
      } catch (err) {
        this.ctx.log.error({ err, channelId }, 'access-lost hook failed');
      }
    }
  }

  /** Removes a channel with its members, messages, bridges and actor (its workspace was deleted). */
  private async destroy(channelId: string): Promise<void> {
    const c = this.c;
    await c.channels.deleteOne({ _id: channelId });
    this.cache.dropChannel(channelId);
    this.seqs.delete(channelId);
    await removeActor(this.ctx, CHANNEL_ACTOR_KIND, channelId);
    const bridgeIds = (await c.bridges.find({ channelId }, { projection: { _id: 1 } })).map((b) => b._id);
    await Promise.all([
      c.channelMembers.deleteMany({ channelId }),
      c.channelMessages.deleteMany({ channelId }),
      c.channelReads.deleteMany({ channelId }),
      c.bridges.deleteMany({ channelId }),
      // Replay records, and the bridges' unfinished outgoing deliveries (docs/channels.md).
      bridgeIds.length > 0 ? c.bridgeDeliveries.deleteMany({ bridgeId: { $in: bridgeIds } }) : Promise.resolve(0),
      bridgeIds.length > 0 ? c.bridgeOutbox.deleteMany({ bridgeId: { $in: bridgeIds } }) : Promise.resolve(0),
    ]);
    this.accessLost(channelId, null);
  }
}

/** Resolves with the actor's snapshot once it has left `boot` (or stopped). */
function settled(actor: AnyActorRef): Promise<{ status: string; value: unknown }> {
  const done = (s: { status: string; value: unknown }) => s.status !== 'active' || s.value !== 'boot';
  const now = actor.getSnapshot() as { status: string; value: unknown };
  if (done(now)) return Promise.resolve(now);
  return new Promise((resolve) => {
    const sub = actor.subscribe({
      next: (s: { status: string; value: unknown }) => {
        if (done(s)) {
          sub.unsubscribe();
          resolve(s);
        }
      },
      error: () => {
        sub.unsubscribe();
        resolve(actor.getSnapshot() as { status: string; value: unknown });
      },
      complete: () => {
        sub.unsubscribe();
        resolve(actor.getSnapshot() as { status: string; value: unknown });
      },
    });
  });
}
