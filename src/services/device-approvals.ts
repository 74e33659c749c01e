/**
 * Device approval (DESIGN §3, RFC 8628 in spirit): a browser that holds no key of its own is
 * signed in by a person's wallet.
 *
 * The browser opens a request and gets a device code (its secret, to poll with) and a user code
 * (short, shown to the person). The person's wallet, signed in as that person, reads the request
 * with the user code — which browser asked, from where, when — and approves it by signing
 * `steward-device:<userCode>:<nonce>` with the person's key, or denies it. The browser's next
 * poll with the device code then gets a session of that person.
 *
 * Both codes are stored only as their SHA-256 (a user code is short, so its hash only keeps it
 * from a casual reader for the few minutes it lives; the device code, which is what gets the
 * session, has 256 bits). A request serves once and lives DEVICE_CODE_TTL_SECONDS; a used,
 * expired or unknown code is answered alike. Wrong user codes are counted per address, per person
 * and over the whole server, with the smart-lockout rule (lockout.ts): past its address's or its
 * person's limit an approval is refused (429) until the window ends, and past the server's only
 * when its address or person gave a wrong code too, so one member guessing never locks the owner
 * out. The check comes before the lookup: the answer never depends on whether a guess was right. The nonce an approval signs is handed
 * out by the GET and consumed atomically by the POST, right or wrong, like a login challenge.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import QRCode from 'qrcode';
import type { DeviceRequestDoc, UserDoc } from '../store/collections.js';
import { DuplicateKeyError } from '../store/types.js';
import { AppError, badRequest } from '../domain/errors.js';
import { resolvePublicKey, verifySignature } from '../domain/did.js';
import { deviceMessage, newUserCode, verificationUrlOf } from '../domain/device-codes.js';
import { addressKey } from '../domain/net-address.js';
import type { UserPrincipal } from '../domain/principal.js';
import type { ServiceCore } from './core.js';
import type { Lockout } from './lockout.js';
import { hashToken, userPrincipal } from './sessions.js';
import { toUserSummary, UserSummary } from './users.js';

/** RFC 8628 §3.5: each slow_down adds this many seconds to the interval. */
const SLOW_DOWN_STEP_SECONDS = 5;
/** How often expired requests are removed. */
const SWEEP_EVERY_MS = 10 * 60_000;
/** The key of the server-wide count of wrong user codes. */

/** Who is asking: the User-Agent header and source address of the request. */
export interface DeviceClient {
  userAgent: string | null;
  address: string;
}

/** POST /api/auth/device: what the browser polls with and what it shows. */
export const DeviceStart = z.strictObject({
  deviceCode: z.string(),
  userCode: z.string(),
  verificationUrl: z.string(),
  /** A QR code of verificationUrl, as an SVG `data:` URL. */
  verificationQr: z.string(),
  expiresIn: z.number().int(),
  interval: z.number().int(),
});
export type DeviceStart = z.infer<typeof DeviceStart>;

/** What a wallet shows before approving, and the nonce it signs. */
export const DeviceApprovalInfo = z.strictObject({
  nonce: z.string(),
  userAgent: z.string().nullable(),
  address: z.string().nullable(),
  requestedAt: z.string(),
  expiresAt: z.string(),
});
export type DeviceApprovalInfo = z.infer<typeof DeviceApprovalInfo>;

/** The browser's poll once approved: who it is signed in as (the session is in the cookie). */
export const DeviceSignedIn = z.strictObject({ user: UserSummary });

/** A refused poll (400 with the RFC 8628 error code). */
const pollRefusal = (code: 'authorization_pending' | 'slow_down' | 'expired_token' | 'access_denied', message: string) => new AppError(400, code, message);

const expiredToken = () => pollRefusal('expired_token', 'this sign-in request is expired or was already used; start again (POST /api/auth/device)');

const noRequest = () =>
  new AppError(
    404,
    'invalid_user_code',
    'no sign-in request waits for this code: it is mistyped, expired (a code lasts 10 minutes by default), or already used. Check the code the browser shows, or start again there',
  );

export class DeviceApprovals {
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly ctx: ServiceCore,
    /** Wrong user codes: per source address, per person, and for the whole server. */
    private readonly wrongCodes: Lockout,
    private readonly now: () => number = Date.now,
  ) {}

  /** Removes expired requests every ten minutes until `stop`. */
  start(): void {
    this.sweeper = setInterval(() => {
      this.sweep().catch((err: unknown) => this.ctx.log.warn({ err }, 'sweeping expired device sign-in requests failed'));
    }, SWEEP_EVERY_MS);
    this.sweeper.unref();
  }

  stop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
  }

  async sweep(): Promise<number> {
    return this.ctx.c.deviceRequests.deleteMany({ expiresAt: { $lte: this.iso() } });
  }

  /** POST /api/auth/device: a browser asks to be signed in; the codes are returned here only. */
  async open(client: DeviceClient): Promise<DeviceStart> {
    const { config } = this.ctx;
    const deviceCode = randomBytes(32).toString('base64url');
    const t = this.now();
    for (let attempt = 0; ; attempt++) {
      const userCode = newUserCode();
      const doc: DeviceRequestDoc = {
        _id: hashToken(deviceCode),
        userCodeHash: hashToken(userCode),
        status: 'pending',
        createdAt: new Date(t).toISOString(),
        expiresAt: new Date(t + config.deviceCodeTtlMs).toISOString(),
        interval: config.devicePollIntervalSeconds,
        lastPolledAt: null,
        userAgent: client.userAgent ? client.userAgent.slice(0, 300) : null,
        address: client.address || null,
        nonce: null,
        nonceUserId: null,
        decidedBy: null,
        decidedAt: null,
      };
      try {
        await this.ctx.c.deviceRequests.insertOne(doc);
      } catch (err) {
        // A user code still held by another request (live, or expired and not yet swept): draw again.
        if (err instanceof DuplicateKeyError && attempt < 4) continue;
        throw err;
      }
      const verificationUrl = verificationUrlOf(config.publicUrl, userCode);
      const svg = await QRCode.toString(verificationUrl, { type: 'svg', margin: 2 });
      return {
        deviceCode,
        userCode,
        verificationUrl,
        verificationQr: `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}`,
        expiresIn: Math.round(config.deviceCodeTtlMs / 1000),
        interval: doc.interval,
      };
    }
  }

  /** GET /api/auth/device/{userCode}/approve: what is being approved, and a fresh nonce to sign (for this person). */
  async approvalInfo(person: UserPrincipal, userCode: string, from: string): Promise<DeviceApprovalInfo> {
    const req = await this.pendingByCode(person, userCode, from);
    const nonce = randomBytes(32).toString('base64url');
    const updated = await this.ctx.c.deviceRequests.findOneAndUpdate(
      { _id: req._id, status: 'pending', expiresAt: { $gt: this.iso() } },
      { $set: { nonce, nonceUserId: person.userId } },
    );
    if (!updated) throw noRequest();
    return { nonce, userAgent: req.userAgent, address: req.address, requestedAt: req.createdAt, expiresAt: req.expiresAt };
  }

  /**
   * POST /api/auth/device/{userCode}/approve: the person's signature over
   * `steward-device:<userCode>:<nonce>` with their key approves the request (audited). The nonce
   * is used up by the attempt, right or wrong.
   */
  async approve(person: UserPrincipal, userCode: string, signature: string, from: string): Promise<void> {
    const req = await this.pendingByCode(person, userCode, from);
    const noNonce = () =>
      new AppError(409, 'no_nonce', 'no approval nonce waits for you on this request (none was asked for, or it was used): read the request again (GET …/approve) and sign its new nonce');
    if (!req.nonce || req.nonceUserId !== person.userId) throw noNonce();
    const taken = await this.ctx.c.deviceRequests.findOneAndUpdate(
      { _id: req._id, status: 'pending', nonce: req.nonce, nonceUserId: person.userId },
      { $set: { nonce: null, nonceUserId: null } },
      { returnDocument: 'before' },
    );
    if (!taken) throw noNonce();
    const user = await this.ctx.c.users.findById(person.userId);
    const key = user?.did ? resolvePublicKey(user.did, user.publicKey) : null;
    if (!key || !verifySignature(key, deviceMessage(userCode, req.nonce), signature)) {
      throw badRequest(
        `the signature does not verify over steward-device:<userCode>:<nonce> with the key of ${person.did}; the nonce is used up: read the request again and sign its new nonce with that key`,
        'invalid_signature',
      );
    }
    await this.decide(req, person, 'approved');
  }

  /** POST /api/auth/device/{userCode}/deny: the browser's next poll gets access_denied (audited). */
  async deny(person: UserPrincipal, userCode: string, from: string): Promise<void> {
    const req = await this.pendingByCode(person, userCode, from);
    await this.decide(req, person, 'denied');
  }

  /**
   * POST /api/auth/device/token: the browser's poll. Throws 400 with the RFC 8628 code until the
   * request is approved; then, once, a new session of the person who approved (audited as a login).
   */
  async poll(deviceCode: string, client: DeviceClient): Promise<{ token: string; user: UserSummary }> {
    const { c } = this.ctx;
    const t = this.now();
    const nowIso = new Date(t).toISOString();
    const req = deviceCode.length <= 100 ? await c.deviceRequests.findById(hashToken(deviceCode)) : null;
    if (!req || req.status === 'used' || req.expiresAt <= nowIso) throw expiredToken();

    // One poll per interval: whoever comes sooner (or loses a race with another poll) is slowed down.
    const early = req.lastPolledAt !== null && t - Date.parse(req.lastPolledAt) < req.interval * 1000;
    const polled = early
      ? null
      : await c.deviceRequests.findOneAndUpdate({ _id: req._id, lastPolledAt: req.lastPolledAt }, { $set: { lastPolledAt: nowIso } });
    if (!polled) {
      const slowed = await c.deviceRequests.findOneAndUpdate({ _id: req._id }, { $set: { lastPolledAt: nowIso }, $inc: { interval: SLOW_DOWN_STEP_SECONDS } });
      const interval = slowed?.interval ?? req.interval + SLOW_DOWN_STEP_SECONDS;
      throw pollRefusal('slow_down', `polling too fast: wait ${interval} s between polls from now on`);
    }
    switch (polled.status) {
      case 'pending':
        throw pollRefusal('authorization_pending', `not approved yet: poll again in ${polled.interval} s`);
      case 'denied':
        throw pollRefusal('access_denied', 'the sign-in was refused from the wallet; start again to ask once more');
      case 'used':
        throw expiredToken();
      case 'approved':
        return this.exchange(polled, client);
    }
  }

  /** The approved request's session, made once: the request is taken (approved -> used) first, and given back when the session cannot be made. */
  private async exchange(req: DeviceRequestDoc, client: DeviceClient): Promise<{ token: string; user: UserSummary }> {
    const { c } = this.ctx;
    const taken = await c.deviceRequests.findOneAndUpdate({ _id: req._id, status: 'approved' }, { $set: { status: 'used' } });
    if (!taken) throw expiredToken();
    let user: UserDoc | null;
    let token: string;
    try {
      user = await c.users.findById(req.decidedBy ?? '');
      if (!user?.did) throw pollRefusal('access_denied', 'the account that approved this sign-in no longer exists; start again');
      ({ token } = await this.ctx.sessions.create('user', user._id, { method: 'device', userAgent: client.userAgent, address: client.address }));
    } catch (err) {
      // Not the browser's doing (the store): the next poll may try again.
      if (!(err instanceof AppError)) await c.deviceRequests.updateOne({ _id: req._id, status: 'used' }, { $set: { status: 'approved' } }).catch(() => undefined);
      throw err;
    }
    await this.ctx.audit.record(userPrincipal(user, '', 'cookie')!, { action: 'auth.login', targetType: 'user', target: user._id, details: { method: 'device' } });
    return { token, user: toUserSummary(user) };
  }

  /** Marks a pending request approved or denied by `person` and audits the decision (auth.device.approved or .denied). */
  private async decide(req: DeviceRequestDoc, person: UserPrincipal, status: 'approved' | 'denied'): Promise<void> {
    const nowIso = this.iso();
    const decided = await this.ctx.c.deviceRequests.findOneAndUpdate(
      { _id: req._id, status: 'pending', expiresAt: { $gt: nowIso } },
      { $set: { status, decidedBy: person.userId, decidedAt: nowIso, nonce: null, nonceUserId: null } },
    );
    if (!decided) throw noRequest();
    await this.ctx.audit.record(person, {
      action: `auth.device.${status}`,
      targetType: 'user',
      target: person.userId,
      details: { userAgent: decided.userAgent, address: decided.address, requestedAt: decided.createdAt },
    });
  }

  /**
   * The pending request of a user code (in its shown form). A wrong code (unknown, expired, used)
   * counts against the caller's address, the caller, and the server; the limits are checked before
   * the lookup, so a right guess is refused like a wrong one.
   */
  private async pendingByCode(person: UserPrincipal, userCode: string, from: string): Promise<DeviceRequestDoc> {
    const attempt = { address: addressKey(from), principal: person.userId };
    await this.wrongCodes.check(attempt);
    const req = await this.ctx.c.deviceRequests.findOne({ userCodeHash: hashToken(userCode) });
    if (req && req.status === 'pending' && req.expiresAt > this.iso()) return req;
    await this.wrongCodes.failed(attempt);
    throw noRequest();
  }

  private iso(): string {
    return new Date(this.now()).toISOString();
  }
}
