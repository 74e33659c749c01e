/** Sign-in, sign-out and claims (docs/identity.md). */
import { call, post, seg } from './http';
import type { PersonCore } from './people';

export interface LoginUser extends PersonCore {
  role: string;
}

export const challenge = (did: string) => call<{ challengeId: string; nonce: string }>('POST', '/api/auth/challenge', { body: { did }, quiet401: true });
export const login = (challengeId: string, did: string, signature: string) =>
  call<{ token: string; user: LoginUser }>('POST', '/api/auth/login', { body: { challengeId, did, signature }, quiet401: true });
export const logout = () => call<{ ok: true }>('POST', '/api/auth/logout', { quiet401: true });

export interface ClaimInfo {
  nonce: string;
  serverDid: string;
  expiresAt: string;
}
export const claimInfo = (token: string) => call<ClaimInfo>('GET', `/api/user/claim/${seg(token)}`, { quiet401: true });
export const claim = (token: string, body: { did: string; signature: string; name?: string }) =>
  call<{ ok: true; did: string }>('POST', `/api/user/claim/${seg(token)}`, { body, quiet401: true });
export const claimStatus = (token: string) => call<{ status: number; did?: string; expiresAt: string }>('GET', `/api/user/listen/${seg(token)}`, { quiet401: true });

export const invitation = (token: string) => call<{ email: string; name: string; role: string }>('GET', `/api/invitations/${seg(token)}`, { quiet401: true });
export const openInvitation = (token: string) =>
  post<{ qrUrl: string; connectionString: string; inviteToken: string; serverDid: string }>('/api/users/invite/from-email', { token });

/** Messages signed for each purpose (DESIGN §3). */
export const loginMessage = (nonce: string) => `steward-login:${nonce}`;
export const claimMessage = (token: string, nonce: string) => `steward-claim:${token}:${nonce}`;

/**
 * What a pasted link names: a claim (connection string or its QR image, or a wallet QR text
 * whose fragment holds the connection string) or an invitation link.
 */
export function parseClaimText(text: string): { kind: 'claim' | 'invitation'; token: string } | null {
  const t = text.trim();
  const claimM = /\/api\/user\/claim\/([A-Za-z0-9_-]+)(?:\/qr\.svg)?(?:[&?#]|$)/.exec(t);
  if (claimM) return { kind: 'claim', token: claimM[1]! };
  const invM = /\/api\/invitations\/([A-Za-z0-9-]+)(?:[/?#&]|$)/.exec(t);
  if (invM) return { kind: 'invitation', token: invM[1]! };
  return null;
}

/** Device approval (docs/identity.md): this browser asks, a wallet approves, the browser polls for its cookie. */
export interface DeviceStart {
  deviceCode: string;
  userCode: string;
  verificationUrl: string;
  /** A QR code of verificationUrl, as an SVG data: URL. */
  verificationQr: string;
  expiresIn: number;
  interval: number;
}
export const startDevice = () => call<DeviceStart>('POST', '/api/auth/device', { body: {}, quiet401: true });
/** Resolves once approved (the session cookie is set); otherwise an ApiError whose code is authorization_pending, slow_down, expired_token or access_denied. */
export const pollDevice = (deviceCode: string) => call<{ user: LoginUser }>('POST', '/api/auth/device/token', { body: { deviceCode }, quiet401: true });

/** One of the person's own sessions (GET /api/me/sessions). */
export interface MySession {
  id: string;
  createdAt: string;
  lastUsedAt: string;
  expiresAt: string;
  userAgent: string | null;
  address: string | null;
  method: 'login' | 'device' | null;
  current: boolean;
}
export const mySessions = () => call<{ sessions: MySession[] }>('GET', '/api/me/sessions');
export const endSession = (id: string) => call<{ ok: true }>('DELETE', `/api/me/sessions/${seg(id)}`);
