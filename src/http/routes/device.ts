/**
 * Device approval (DESIGN §3, RFC 8628 in spirit): a browser asks to be signed in, a person's
 * wallet approves or denies it, the browser polls for its session cookie. See docs/identity.md.
 */
import { z } from 'zod';
import { route, type RouteDef } from '../router.js';
import { personOf, refuseCrossOrigin, sessionCookie } from '../auth.js';
import { normalizeUserCode } from '../../domain/device-codes.js';
import type { Config } from '../../config.js';
import { DeviceApprovalInfo, DeviceSignedIn, DeviceStart, type DeviceApprovals } from '../../services/device-approvals.js';
import { Ok } from '../answers.js';

/** The user code in the path, as typed (any case, with or without the dash), read into its shown form. */
const userCodeParam = z.object({
  userCode: z
    .string()
    .max(20)
    .transform((text, ctx) => {
      const code = normalizeUserCode(text);
      if (code === null) {
        ctx.addIssue({ code: 'custom', message: 'expected a user code: 8 letters as the browser shows them (e.g. WDJB-MJHT)' });
        return z.NEVER;
      }
      return code;
    }),
});

const byAddress = { group: 'device' } as const;

export function deviceRoutes({ devices, config }: { devices: DeviceApprovals; config: Config }): RouteDef[] {
  return [
    route({
      method: 'POST',
      path: '/api/auth/device',
      auth: 'public',
      summary: 'A browser asks to be signed in by a wallet: a device code to poll with, a user code to show (valid DEVICE_CODE_TTL_SECONDS, single use)',
      tags: ['auth'],
      limit: byAddress,
      responses: { 200: DeviceStart },
      handler: async ({ headers, remoteAddress }) => ({ body: await devices.open({ userAgent: headers['user-agent'] ?? null, address: remoteAddress }) }),
    }),
    route({
      method: 'POST',
      path: '/api/auth/device/token',
      auth: 'public',
      summary:
        'The browser polls at `interval`: 400 authorization_pending, slow_down, expired_token or access_denied until a wallet approves; then the session cookie and {user}',
      tags: ['auth'],
      limit: byAddress,
      body: z.object({ deviceCode: z.string().min(1).max(100) }),
      responses: { 200: DeviceSignedIn },
      handler: async ({ body, headers, remoteAddress }) => {
        // The answer sets a cookie: a page on another origin must not sign a browser in.
        refuseCrossOrigin(headers, config.publicUrl);
        const { token, user } = await devices.poll(body.deviceCode, { userAgent: headers['user-agent'] ?? null, address: remoteAddress });
        return { body: { user }, cookies: [sessionCookie(config.publicUrl, token, Math.floor(config.sessionTtlMs / 1000))] };
      },
    }),
    route({
      method: 'GET',
      path: '/api/auth/device/:userCode/approve',
      auth: 'user',
      summary: 'What a wallet approves (the browser, its address, when it asked) and a nonce to sign as `steward-device:<userCode>:<nonce>`',
      tags: ['auth'],
      params: userCodeParam,
      responses: { 200: DeviceApprovalInfo },
      handler: async (r) => ({ body: await devices.approvalInfo(personOf(r), r.params.userCode, r.remoteAddress) }),
    }),
    route({
      method: 'POST',
      path: '/api/auth/device/:userCode/approve',
      auth: 'user',
      summary: 'Approve a browser: the signature with your key over `steward-device:<userCode>:<nonce>` (the nonce of the GET, single use)',
      tags: ['auth'],
      params: userCodeParam,
      body: z.object({ signature: z.string().min(1).max(200) }),
      responses: { 200: Ok },
      handler: async (r) => {
        await devices.approve(personOf(r), r.params.userCode, r.body.signature, r.remoteAddress);
        return { body: { ok: true } };
      },
    }),
    route({
      method: 'POST',
      path: '/api/auth/device/:userCode/deny',
      auth: 'user',
      summary: 'Refuse a browser sign-in: its next poll gets access_denied',
      tags: ['auth'],
      params: userCodeParam,
      responses: { 200: Ok },
      handler: async (r) => {
        await devices.deny(personOf(r), r.params.userCode, r.remoteAddress);
        return { body: { ok: true } };
      },
    }),
  ];
}
