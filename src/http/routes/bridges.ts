/**
 * Bridges (interface §2.10, §4.8): managing a channel's bridges, and the two public incoming
 * endpoints. The rules live in src/services/bridges.ts; docs/channels.md describes them.
 *
 * The incoming endpoints read the raw body themselves (no `body` schema here), so the signature
 * is checked over the exact bytes received and before anything else is said about the body.
 */
import { z } from 'zod';
import { route, type RouteDef } from '../router.js';
import { BridgeView, toBridgeView, type BridgeService } from '../../services/bridges.js';
import { Success } from '../answers.js';
import { channelParams } from './channels.js';

const direction = z.enum(['incoming', 'outgoing', 'bidirectional']);
const bridgeParams = channelParams.extend({ bridgeId: z.string().min(1).max(128) });

const bridgeAnswer = z.strictObject({ bridge: BridgeView });
const incomingAnswer = z.strictObject({ ok: z.literal(true), messageId: z.string().nullable() });

export function bridgeRoutes({ bridges }: { bridges: BridgeService }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/channels/:channelId/bridges',
      auth: 'session',
      summary: "A channel's bridges (channel members and global admins); their configuration is never shown",
      tags: ['bridges'],
      params: channelParams,
      responses: { 200: z.strictObject({ bridges: z.array(BridgeView) }) },
      handler: async (r) => ({ body: { bridges: (await bridges.list(r.principal!, r.params.channelId)).map(toBridgeView) } }),
    }),

    route({
      method: 'POST',
      path: '/api/channels/:channelId/bridges',
      auth: 'session',
      summary: 'Creates a bridge (channel owner or global admin); its config is stored encrypted; 409 for the same service and external channel',
      tags: ['bridges'],
      params: channelParams,
      body: z.strictObject({
        externalService: z.enum(['webhook', 'teams'], { message: "externalService must be 'webhook' or 'teams'" }),
        externalChannelId: z.string({ message: 'required: the external channel id' }).min(1).max(512),
        externalChannelName: z.string({ message: 'required: the external channel name' }).max(512),
        externalWorkspaceId: z.string({ message: 'required: the external workspace id' }).min(1).max(512),
        syncDirection: direction.optional(),
        config: z.record(z.string(), z.unknown(), { message: 'required: the service configuration object' }),
      }),
      responses: { 201: bridgeAnswer },
      handler: async (r) => ({ status: 201, body: { bridge: toBridgeView(await bridges.create(r.principal!, r.params.channelId, r.body)) } }),
    }),

    route({
      method: 'PATCH',
      path: '/api/channels/:channelId/bridges/:bridgeId',
      auth: 'session',
      summary: 'Enables or disables a bridge, or changes its direction (channel owner or global admin); its configuration is kept',
      tags: ['bridges'],
      params: bridgeParams,
      body: z.strictObject({ isSyncEnabled: z.boolean().optional(), syncDirection: direction.optional() }),
      responses: { 200: bridgeAnswer },
      handler: async (r) => ({ body: { bridge: toBridgeView(await bridges.update(r.principal!, r.params.channelId, r.params.bridgeId, r.body)) } }),
    }),

    route({
      method: 'DELETE',
      path: '/api/channels/:channelId/bridges/:bridgeId',
      auth: 'session',
      summary: 'Deletes a bridge with its encrypted configuration (channel owner or global admin); its incoming address then answers 404',
      tags: ['bridges'],
      params: bridgeParams,
      responses: { 200: Success },
      handler: async (r) => {
        await bridges.remove(r.principal!, r.params.channelId, r.params.bridgeId);
        return { body: { success: true } };
      },
    }),

    route({
      method: 'POST',
      path: '/api/bridges/webhook/:bridgeId/incoming',
      auth: 'public',
      summary:
        'A message from a webhook bridge: JSON {message, author?, metadata?} signed with X-Signature: sha256=<HMAC-SHA256 hex of the raw body>; with BRIDGE_REPLAY_WINDOW_SECONDS set (off by default), a repeated delivery within that window is 409',
      tags: ['bridges'],
      params: z.object({ bridgeId: z.string().min(1).max(128) }),
      limit: { group: 'webhook', key: ({ params }) => params.bridgeId },
      responses: { 200: incomingAnswer },
      handler: async (r) => ({ body: { ok: true, messageId: await bridges.webhookIncoming(r.params.bridgeId, r.headers, r.rawBody) } }),
    }),

    route({
      method: 'POST',
      path: '/api/bridges/teams/incoming',
      auth: 'public',
      summary:
        'A bot-framework activity from the team-chat service (its bearer token is NOT verified: do not expose publicly); messageId null for activities that are not messages',
      tags: ['bridges'],
      limit: { group: 'webhook' },
      responses: { 200: incomingAnswer },
      handler: async (r) => ({ body: { ok: true, messageId: await bridges.teamsIncoming(r.headers, r.rawBody) } }),
    }),
  ];
}
