/**
 * Outgoing mail over SMTP (SMTP_URL, MAIL_FROM) with nodemailer: the invitation mail and the
 * claim (send-qr) mail. `send` answers whether the SMTP server accepted the message; it never
 * throws, and a failure is logged without the SMTP URL (which may carry a password) or the
 * message (which carries claim tokens).
 */
import { createTransport } from 'nodemailer';
import QRCode from 'qrcode';
import type { Logger } from '../log.js';

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  html?: string;
  attachments?: Array<{ filename: string; content: Buffer; contentType: string; cid?: string }>;
}

type Transport = ReturnType<typeof createTransport>;

export class Mailer {
  private transport: Transport | null = null;

  constructor(
    private readonly opts: { smtpUrl?: string; mailFrom: string },
    private readonly log: Logger,
  ) {}

  get configured(): boolean {
    return Boolean(this.opts.smtpUrl);
  }

  /** True when the SMTP server accepted the message for its recipient. */
  async send(msg: MailMessage): Promise<boolean> {
    if (!this.opts.smtpUrl || !msg.to) return false;
    this.transport ??= createTransport({
      url: this.opts.smtpUrl,
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 20_000,
    });
    try {
      const info = await this.transport.sendMail({ from: this.opts.mailFrom, ...msg });
      const ok = (info.accepted?.length ?? 0) > 0 && (info.rejected?.length ?? 0) === 0;
      if (!ok) this.log.warn({ subject: msg.subject, rejected: info.rejected?.length ?? 0 }, 'the SMTP server did not accept a mail');
      return ok;
    } catch (err) {
      const e = err as { message?: string; code?: string; responseCode?: number };
      this.log.warn({ mailError: { message: e.message, code: e.code, responseCode: e.responseCode }, subject: msg.subject }, 'sending a mail failed');
      return false;
    }
  }
}

export function invitationMail(a: { to: string; name: string; role: string; publicUrl: string; token: string }): MailMessage {
  const link = `${a.publicUrl}/api/invitations/${a.token}`;
  const text = `Hello ${a.name},

you have been invited to Steward (${a.publicUrl}) with the role ${a.role}.

Your invitation: ${link}
It is valid for 7 days.

To accept it, claim your account with a wallet. With the Steward wallet command:

  steward wallet create
  steward wallet claim ${link}
  steward login ${a.publicUrl}

(From a checkout of Steward's sources, run each as npm run steward -- wallet create, and so on.)

(The wallet asks Steward for a claim session with POST ${a.publicUrl}/api/users/invite/from-email
and this invitation's token, then proves its key.)

To decline the invitation: POST ${link}/delete
`;
  return { to: a.to, subject: 'Your invitation to Steward', text };
}

export async function claimMail(a: {
  to: string;
  name: string;
  publicUrl: string;
  connectionString: string;
  qrText: string;
  walletUrl: string;
  expiresAt: string;
}): Promise<MailMessage> {
  const png = await QRCode.toBuffer(a.qrText, { type: 'png', margin: 2, width: 320 });
  const cid = 'claim-qr@steward';
  const text = `Hello ${a.name},

claim your Steward account (${a.publicUrl}) with a wallet before ${a.expiresAt}.

Scan the attached QR code with your wallet (${a.walletUrl}), or open:
${a.qrText}

Connection string:
${a.connectionString}

With the Steward wallet command:

  steward wallet create
  steward wallet claim ${a.connectionString}
  steward login ${a.publicUrl}

(From a checkout of Steward's sources, run each as npm run steward -- wallet create, and so on.)
`;
  const html = `<p>Hello ${escapeHtml(a.name)},</p>
<p>claim your Steward account (${escapeHtml(a.publicUrl)}) with a wallet before ${escapeHtml(a.expiresAt)}.</p>
<p><img src="cid:${cid}" alt="Claim QR code" width="320" height="320"></p>
<p>Scan the QR code with your wallet (<a href="${escapeHtml(a.walletUrl)}">${escapeHtml(a.walletUrl)}</a>), or open
<a href="${escapeHtml(a.qrText)}">this wallet link</a>.</p>
<p>Connection string: <code>${escapeHtml(a.connectionString)}</code></p>
<p>With the Steward wallet command: <code>steward wallet claim ${escapeHtml(a.connectionString)}</code></p>`;
  return {
    to: a.to,
    subject: 'Claim your Steward account',
    text,
    html,
    attachments: [{ filename: 'steward-claim-qr.png', content: png, contentType: 'image/png', cid }],
  };
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}
