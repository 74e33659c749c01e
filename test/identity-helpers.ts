/**
 * Helpers for the identity suites (auth, claims, invitations, wallet, owner bootstrap): DID login
 * over real HTTP, a local SMTP server that records what it receives, and a test route that tells
 * who a request authenticated as (the `steward` CLI as a child process is in cli-process.ts).
 */
import { SMTPServer } from 'smtp-server';
import type { AddressInfo } from 'node:net';
import { signMessage, type Ed25519KeyPair } from '../src/domain/did.js';
import { claimMessage, loginMessage } from '../src/domain/claims.js';
import { z } from 'zod';
import { route } from '../src/http/router.js';
import { http, type HttpResult, type TestServer } from './helpers.js';

/** Challenge + login with a key; the raw login answer. */
export async function login(url: string, keys: Ed25519KeyPair, headers: Record<string, string> = {}): Promise<HttpResult> {
  const ch = await http(url, 'POST', '/api/auth/challenge', { json: { did: keys.did } });
  if (ch.status !== 200) throw new Error(`challenge failed: ${ch.status} ${ch.text}`);
  const signature = signMessage(keys, loginMessage(ch.body.nonce));
  return http(url, 'POST', '/api/auth/login', { json: { challengeId: ch.body.challengeId, did: keys.did, signature }, headers });
}

/** GET then POST of a claim URL (path relative to the server) with a key. */
export async function claimWith(url: string, token: string, keys: Ed25519KeyPair, extra: Record<string, unknown> = {}): Promise<HttpResult> {
  const info = await http(url, 'GET', `/api/user/claim/${token}`);
  if (info.status !== 200) return info;
  const signature = signMessage(keys, claimMessage(token, info.body.nonce));
  return http(url, 'POST', `/api/user/claim/${token}`, { json: { did: keys.did, signature, ...extra } });
}

/** Adds `GET /test/whoami` (auth user) and `POST /test/touch` (auth session) to a server. */
export function addWhoami(s: TestServer): void {
  s.ctx.router.add(
    route({
      method: 'GET',
      path: '/test/whoami',
      auth: 'user',
      summary: 'who is this (tests)',
      responses: { 200: z.strictObject({ did: z.string(), via: z.enum(['cookie', 'bearer']) }) },
      handler: ({ principal }) => ({ body: { did: principal!.did, via: principal!.via } }),
    }),
    route({
      method: 'POST',
      path: '/test/touch',
      auth: 'session',
      summary: 'a state-changing request (tests)',
      responses: { 200: z.strictObject({ did: z.string() }) },
      handler: ({ principal }) => ({ body: { did: principal!.did } }),
    }),
  );
}

export interface ReceivedMail {
  from: string;
  to: string[];
  raw: string;
  /** The raw message with quoted-printable soft breaks and escapes undone (good enough to search). */
  text: string;
  user?: string;
}

/** A local SMTP server that records every message it accepts. */
export async function startSmtp(opts: { user?: string; pass?: string } = {}) {
  const mails: ReceivedMail[] = [];
  const server = new SMTPServer({
    disabledCommands: opts.user ? ['STARTTLS'] : ['STARTTLS', 'AUTH'],
    authOptional: !opts.user,
    allowInsecureAuth: true,
    logger: false,
    onAuth(auth, _session, cb) {
      if (auth.username === opts.user && auth.password === opts.pass) cb(null, { user: auth.username });
      else cb(new Error('invalid credentials'));
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        mails.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw,
          text: decodeQuotedPrintable(raw),
          user: session.user as string | undefined,
        });
        cb();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    port,
    mails,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function decodeQuotedPrintable(s: string): string {
  return s.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
}

/** Audit entries as one JSON text, to search for things that must never be there. */
export async function auditText(s: TestServer): Promise<string> {
  return JSON.stringify(await s.ctx.c.audit.find({}));
}
