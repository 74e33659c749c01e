/**
 * The texts of the identity flows, shared by the server and the wallet (DESIGN §3, interface
 * §4.12 rule 5): what is signed to log in and to claim, the connection string of a claim
 * session, the text a wallet QR encodes, and how a wallet reads any of them back.
 */
import { PURPOSE } from './did.js';

/** Signed (UTF-8) to answer a login challenge. */
export const loginMessage = (nonce: string) => `${PURPOSE.login}${nonce}`;

/** Signed (UTF-8) to claim the session `token`. */
export const claimMessage = (token: string, nonce: string) => `${PURPOSE.claim}${token}:${nonce}`;

/** The connection string of a claim session: its claim URL. */
export const connectionStringOf = (publicUrl: string, token: string) => `${publicUrl}/api/user/claim/${token}`;

/** The text a wallet QR encodes. */
export const walletQrText = (walletUrl: string, connectionString: string, serverDid: string) =>
  `${walletUrl}/#${connectionString}&protocol=p2p&service=auth&did=${serverDid}`;

export type ClaimTarget =
  | {
      kind: 'claim';
      /** Base URL of the server (what precedes /api/...). */
      base: string;
      token: string;
      /** The claim URL to GET and POST. */
      claimUrl: string;
      /** The server DID the QR names, when the input was a wallet QR text. */
      serverDid?: string;
    }
  | { kind: 'invitation'; base: string; token: string };

/**
 * Reads what a wallet is given: a connection string (= claim URL, also with `/qr.svg`), a wallet
 * QR text `{walletUrl}/#<connectionString>&protocol=p2p&service=auth&did=<serverDid>`, or an
 * invitation link `{PUBLIC_URL}/api/invitations/{token}`. Throws an Error saying what is wrong.
 */
export function parseClaimTarget(input: string): ClaimTarget {
  let text = input.trim();
  let serverDid: string | undefined;
  const hash = text.indexOf('#');
  if (hash >= 0) {
    const fragment = text.slice(hash + 1);
    const amp = fragment.search(/&(protocol|service|did)=/);
    text = amp >= 0 ? fragment.slice(0, amp) : fragment;
    if (amp >= 0) {
      const params = new URLSearchParams(fragment.slice(amp + 1));
      const protocol = params.get('protocol');
      const service = params.get('service');
      if ((protocol !== null && protocol !== 'p2p') || (service !== null && service !== 'auth')) {
        throw new Error(`this QR text is not a Steward claim (protocol=${protocol}, service=${service})`);
      }
      serverDid = params.get('did') ?? undefined;
    }
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error('expected a connection string (http(s)://…/api/user/claim/<token>), a wallet QR text or an invitation link');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('the connection string must be an http(s) URL');
  const claim = /^(.*)\/api\/user\/claim\/([^/]+)(?:\/qr\.svg)?\/?$/.exec(url.pathname);
  if (claim) {
    const base = url.origin + claim[1]!;
    const token = decodeURIComponent(claim[2]!);
    return { kind: 'claim', base, token, claimUrl: connectionStringOf(base, encodeURIComponent(token)), ...(serverDid ? { serverDid } : {}) };
  }
  const invitation = /^(.*)\/api\/invitations\/([^/]+)\/?$/.exec(url.pathname);
  if (invitation && !serverDid) {
    return { kind: 'invitation', base: url.origin + invitation[1]!, token: decodeURIComponent(invitation[2]!) };
  }
  throw new Error(`not a claim URL or invitation link: ${url.origin}${url.pathname}`);
}
