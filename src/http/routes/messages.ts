/**
 * Channel messages (interface §2.9, §4.7): history, posting, the agents' reply endpoint,
 * reactions, and editing and deleting one's own messages. Every change goes through the channel
 * actor (src/services/channels.ts); docs/channels.md describes the routes and decisions.
 */
import { z } from 'zod';
import { q, route, type RouteDef } from '../router.js';
import { MAX_CONTENT, MAX_PAGE } from '../../domain/messages.js';
import { MessageView, toMessageView, type ChannelService } from '../../services/channels.js';
import { Success } from '../answers.js';
import { channelParams } from './channels.js';

export const content = z
  .string({ message: 'required: the message content' })
  .max(MAX_CONTENT, { message: `at most ${MAX_CONTENT} characters` })
  .refine((s) => s.trim().length > 0, { message: 'must not be blank' });
const threadId = z.string().min(1).max(128).nullable().optional();
export const metadata = z.record(z.string(), z.unknown(), { message: 'expected a JSON object' }).optional();
/** An emoji (or a short name like `:+1:`); it becomes a field name, so no dots, `$` first or `__proto__`. */
const emoji = z
  .string({ message: 'required: the emoji' })
  .min(1)
  .max(64)
  .regex(/^[^\s.$][^\s.]*$/u, { message: 'an emoji or a short name without spaces or dots, not starting with $' })
  .refine((e) => e !== '__proto__', { message: 'not a valid emoji' });

const messageParams = channelParams.extend({ messageId: z.string().min(1).max(128) });

const messageAnswer = z.strictObject({ message: MessageView });

export function messageRoutes({ channels }: { channels: ChannelService }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/channels/:channelId/messages',
      auth: 'session',
      summary: 'A page of messages, newest first: top-level ones, or the replies to threadId (limit default 50, capped at 100)',
      tags: ['messages'],
      params: channelParams,
      query: z.object({ limit: q.int(1).optional(), offset: q.int(0).optional(), threadId: z.string().min(1).max(128).optional() }),
      responses: { 200: z.strictObject({ messages: z.array(MessageView) }) },
      handler: async (r) => {
        const list = await channels.messages(r.principal!, r.params.channelId, {
          limit: Math.min(r.query.limit ?? 50, MAX_PAGE),
          offset: r.query.offset ?? 0,
          threadId: r.query.threadId,
        });
        return { body: { messages: list.map(toMessageView) } };
      },
    }),

    route({
      method: 'POST',
      path: '/api/channels/:channelId/messages',
      auth: 'session',
      summary: 'Posts a message (channel members); @mentioned agent members that are online get channel_message_send',
      tags: ['messages'],
      params: channelParams,
      body: z.strictObject({ content, threadId, metadata }),
      responses: { 201: messageAnswer },
      handler: async (r) => ({ status: 201, body: { message: toMessageView(await channels.postAs(r.principal!, r.params.channelId, r.body)) } }),
    }),

    route({
      method: 'POST',
      path: '/api/channels/:channelId/messages/agent-response',
      auth: 'session',
      summary: "An agent's reply (a channel member whose type is agent, with its session); authorType is agent",
      tags: ['messages'],
      params: channelParams,
      body: z.strictObject({ content, threadId, metadata }),
      responses: { 201: messageAnswer },
      handler: async (r) => ({ status: 201, body: { message: toMessageView(await channels.postAs(r.principal!, r.params.channelId, r.body, true)) } }),
    }),

    route({
      method: 'PATCH',
      path: '/api/channels/:channelId/messages/:messageId',
      auth: 'session',
      summary: "Edits one's own message (sets editedAt)",
      tags: ['messages'],
      params: messageParams,
      body: z.strictObject({ content }),
      responses: { 200: messageAnswer },
      handler: async (r) => ({ body: { message: toMessageView(await channels.editMessage(r.principal!, r.params.channelId, r.params.messageId, r.body.content)) } }),
    }),

    route({
      method: 'DELETE',
      path: '/api/channels/:channelId/messages/:messageId',
      auth: 'session',
      summary: "Deletes a message (its author, a channel owner or moderator, or a global admin); it stays as a tombstone",
      tags: ['messages'],
      params: messageParams,
      responses: { 200: Success },
      handler: async (r) => {
        await channels.deleteMessage(r.principal!, r.params.channelId, r.params.messageId);
        return { body: { success: true } };
      },
    }),

    route({
      method: 'POST',
      path: '/api/channels/:channelId/messages/:messageId/reactions',
      auth: 'session',
      summary: "Adds (add true, the default) or removes (add false) the caller's reaction; answers the message",
      tags: ['messages'],
      params: messageParams,
      body: z.strictObject({ emoji, add: z.boolean().optional() }),
      responses: { 200: messageAnswer },
      handler: async (r) => ({ body: { message: toMessageView(await channels.react(r.principal!, r.params.channelId, r.params.messageId, r.body.emoji, r.body.add ?? true)) } }),
    }),
  ];
}
