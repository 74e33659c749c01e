/**
 * Channels and their members (interface §2.7, §2.8, §4.6, §5.8). docs/channels.md describes every
 * route, status and decision; the rules themselves live in src/services/channels.ts.
 *
 * A channel the caller may not read answers 404, as an unknown one does (a private channel never
 * shows that it exists); one they may read but not change answers 403.
 */
import { z } from 'zod';
import { q, route, type RouteDef } from '../router.js';
import { CHANNEL_ROLES, type ChannelRole } from '../../domain/roles.js';
import { CHANNEL_SLUG_MAX } from '../../domain/slugs.js';
import {
  ChannelDetail,
  ChannelListItem,
  ChannelView,
  MemberView,
  readMarkSchema,
  toChannelView,
  toDetailMemberView,
  toMemberView,
  unreadSchema,
  type ChannelService,
} from '../../services/channels.js';
import { Success } from '../answers.js';

const name = z.string().trim().min(1, { message: 'must not be blank' }).max(100);
const description = z.string().max(1000);
const topic = z.string().max(1000);
/** Taken as given (§2.7): any characters but whitespace; without one the service derives it from the name. */
const slug = z
  .string()
  .min(1, { message: 'must not be empty' })
  .max(CHANNEL_SLUG_MAX, { message: `must be at most ${CHANNEL_SLUG_MAX} characters` })
  .regex(/^\S+$/, { message: 'must not contain whitespace (spaces, tabs, line breaks)' });
const did = z.string().max(512).regex(/^did:[a-z0-9]+:\S+$/, { message: 'expected a DID (did:<method>:<id>)' });

export const channelParams = z.object({ channelId: z.string().min(1).max(128) });
const memberParams = channelParams.extend({ memberDid: z.string().min(1).max(512).describe("The member's DID, percent-encoded") });

const channelAnswer = z.strictObject({ channel: ChannelView });

export function channelRoutes({ channels }: { channels: ChannelService }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/channels',
      auth: 'session',
      summary: "A workspace's channels the caller may see (non-archived unless includeArchived), plus global ones unless includeGlobal=false",
      tags: ['channels'],
      query: z.object({
        workspace: z.string({ message: 'required: a workspace id or slug' }).min(1).max(200),
        includeArchived: q.bool().optional(),
        includeGlobal: q.bool().optional(),
      }),
      responses: { 200: z.strictObject({ channels: z.array(ChannelListItem) }) },
      handler: async (r) => ({
        body: {
          channels: await channels.list(r.principal!, r.query.workspace, {
            includeArchived: r.query.includeArchived ?? false,
            includeGlobal: r.query.includeGlobal ?? true,
          }),
        },
      }),
    }),

    route({
      method: 'POST',
      path: '/api/channels',
      auth: 'session',
      summary:
        'Creates a channel in a workspace the caller (person or agent) belongs to, or a global one when workspaceId is omitted (global admins only); the creator becomes its owner',
      tags: ['channels'],
      body: z.strictObject({
        name,
        workspaceId: z.string().min(1).max(200).nullable().optional(),
        description: description.optional(),
        topic: topic.optional(),
        slug: slug.optional(),
        isPublic: z.boolean().optional(),
      }),
      responses: { 201: channelAnswer },
      handler: async (r) => ({ status: 201, body: { channel: toChannelView(await channels.create(r.principal!, r.body)) } }),
    }),

    route({
      method: 'GET',
      path: '/api/channels/:channelId',
      auth: 'session',
      summary: 'One channel with its members and stats (404 when it is private and the caller is not a member)',
      tags: ['channels'],
      params: channelParams,
      responses: { 200: ChannelDetail },
      handler: async (r) => {
        const { channel, members, stats } = await channels.detail(r.principal!, r.params.channelId);
        return { body: { channel: toChannelView(channel), members: members.map(toDetailMemberView), stats } };
      },
    }),

    route({
      method: 'PATCH',
      path: '/api/channels/:channelId',
      auth: 'session',
      summary: "Changes a channel's name, description, topic, visibility or archive state (channel owner or global admin)",
      tags: ['channels'],
      params: channelParams,
      body: z.strictObject({
        name: name.optional(),
        description: description.optional(),
        topic: topic.optional(),
        isPublic: z.boolean().optional().describe('false makes the channel private: readers who are not members lose it at once'),
        isArchived: z.boolean().optional(),
      }),
      responses: { 200: channelAnswer },
      handler: async (r) => ({ body: { channel: toChannelView(await channels.edit(r.principal!, r.params.channelId, r.body)) } }),
    }),

    route({
      method: 'DELETE',
      path: '/api/channels/:channelId',
      auth: 'session',
      summary: 'Archives a channel (channel owner or global admin); its history stays readable',
      tags: ['channels'],
      params: channelParams,
      responses: { 200: Success },
      handler: async (r) => {
        await channels.archive(r.principal!, r.params.channelId);
        return { body: { success: true } };
      },
    }),

    route({
      method: 'POST',
      path: '/api/channels/:channelId/members',
      auth: 'session',
      summary: 'Adds a member (owner, moderator or global admin; the owner and moderator roles only by an owner); 409 when already a member',
      tags: ['channels'],
      params: channelParams,
      body: z.strictObject({
        memberDid: did,
        memberType: z.enum(['user', 'agent']),
        role: z.enum(CHANNEL_ROLES as [ChannelRole, ...ChannelRole[]]).optional(),
      }),
      responses: { 201: z.strictObject({ member: MemberView }) },
      handler: async (r) => {
        const member = await channels.addMember(r.principal!, r.params.channelId, { memberDid: r.body.memberDid, memberType: r.body.memberType, role: r.body.role ?? 'member' });
        return { status: 201, body: { member: toMemberView(member) } };
      },
    }),

    route({
      method: 'DELETE',
      path: '/api/channels/:channelId/members/:memberDid',
      auth: 'session',
      summary: 'Removes a member (owner or global admin; a moderator members with the member role; anyone themselves)',
      tags: ['channels'],
      params: memberParams,
      responses: { 200: Success },
      handler: async (r) => {
        await channels.removeMember(r.principal!, r.params.channelId, r.params.memberDid);
        return { body: { success: true } };
      },
    }),

    route({
      method: 'POST',
      path: '/api/channels/:channelId/read',
      auth: 'session',
      summary: "Marks the channel read up to a message (members; the position only moves forward); answers the channel's unread count",
      tags: ['channels'],
      params: channelParams,
      body: z.strictObject({ messageId: z.string({ message: 'required: the id of the newest message read' }).min(1).max(128) }),
      responses: { 200: readMarkSchema },
      handler: async (r) => ({ body: await channels.markRead(r.principal!, r.params.channelId, r.body.messageId) }),
    }),

    route({
      method: 'GET',
      path: '/api/me/unread',
      auth: 'session',
      summary: 'Unread counts of every channel the caller is a member of',
      tags: ['channels'],
      responses: { 200: unreadSchema },
      handler: async (r) => ({ body: await channels.unread(r.principal!) }),
    }),
  ];
}
