/**
 * Claim sessions over HTTP (DESIGN §3, interface §4.12): the two wallet calls, the QR image,
 * listen, send-qr and the open invite link. See docs/identity.md.
 */
import { z } from 'zod';
import { rawResponse, route, type RouteDef } from '../router.js';
import { isDid } from '../../domain/did.js';
import { personOf } from '../auth.js';
import { ClaimChallenge, ClaimListen, type ClaimService } from '../../services/claims.js';
import type { ServerIdentity } from '../../services/server-identity.js';

const tokenParam = z.object({ token: z.string().min(1).max(100) });
const byToken = { group: 'claim', key: ({ params }: { params: { token: string } }) => params.token } as const;

export function claimRoutes({ claims, identity }: { claims: ClaimService; identity: ServerIdentity }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/user/claim/:token',
      auth: 'public',
      summary: 'What a wallet signs to claim: the nonce and the server DID (404 unless pending)',
      tags: ['claims'],
      params: tokenParam,
      limit: byToken,
      responses: { 200: ClaimChallenge },
      handler: async ({ params }) => ({ body: await claims.challengeOf(params.token) }),
    }),
    route({
      method: 'POST',
      path: '/api/user/claim/:token',
      auth: 'public',
      summary: 'Claim with a signature over `steward-claim:<token>:<nonce>` (401 wrong signature, 409 DID taken)',
      tags: ['claims'],
      params: tokenParam,
      limit: byToken,
      body: z.object({
        did: z.string().refine(isDid, { message: 'expected a DID (did:<method>:<identifier>)' }),
        publicKey: z.string().max(100).optional(),
        signature: z.string().min(1).max(200),
        name: z.string().trim().min(1).max(200).optional(),
      }),
      responses: { 200: z.strictObject({ ok: z.literal(true), did: z.string() }) },
      handler: async ({ params, body }) => {
        const { did } = await claims.complete(params.token, body);
        return { body: { ok: true, did } };
      },
    }),
    route({
      method: 'GET',
      path: '/api/user/claim/:token/qr.svg',
      auth: 'public',
      summary: 'The wallet QR code of a pending claim session, as an SVG image',
      tags: ['claims'],
      params: tokenParam,
      limit: byToken,
      responses: { 200: rawResponse('image/svg+xml; charset=utf-8', 'The QR code, an SVG image') },
      handler: async ({ params }) => ({ raw: { contentType: 'image/svg+xml; charset=utf-8', data: await claims.qrSvg(params.token) } }),
    }),
    route({
      method: 'GET',
      path: '/api/user/listen/:token',
      auth: 'public',
      summary: 'Status of a claim session: -1 pending, 2 success (with did), -2 failed or expired',
      tags: ['claims'],
      params: tokenParam,
      limit: byToken,
      responses: { 200: ClaimListen },
      handler: async ({ params }) => ({ body: await claims.listen(params.token) }),
    }),
    route({
      method: 'POST',
      path: '/api/server/directory/send-qr',
      auth: 'admin',
      summary: 'Open a claim session for an unclaimed user and optionally mail it (404 unknown or claimed user)',
      tags: ['claims'],
      body: z.object({ userId: z.string().min(1).max(100), sendByEmail: z.boolean().default(false) }),
      responses: { 200: z.strictObject({ qrUrl: z.string(), token: z.string(), serverDid: z.string(), emailSent: z.boolean() }) },
      handler: async (r) => {
        const { token, emailSent } = await claims.openForUser(personOf(r), r.body.userId, r.body.sendByEmail);
        return { body: { qrUrl: claims.qrUrl(token), token, serverDid: identity.did, emailSent } };
      },
    }),
    route({
      method: 'GET',
      path: '/api/users/invite',
      auth: 'owner',
      summary: 'Open an invite link: whoever claims it becomes a new member (key = the nonce to sign)',
      tags: ['claims'],
      responses: { 200: z.strictObject({ connectionString: z.string(), token: z.string(), key: z.string(), serverDid: z.string() }) },
      handler: async (r) => {
        const { token, nonce } = await claims.openInviteLink(personOf(r));
        return { body: { connectionString: claims.connectionString(token), token, key: nonce, serverDid: identity.did } };
      },
    }),
  ];
}
