/**
 * The codes of device approval (DESIGN §3, RFC 8628 in spirit), shared by the server and the
 * wallet: the user code a person reads off a browser and types into a wallet, and what the
 * wallet signs to approve it.
 *
 * A user code is 8 letters from an alphabet of 20 consonants without look-alikes (no vowels, so
 * no words; no I, O, U, Y), about 34.6 bits, shown as `WDJB-MJHT`. It is read case-insensitively,
 * with or without the dash (or spaces), and always signed and stored in its shown form.
 */
import { randomInt } from 'node:crypto';
import { PURPOSE } from './did.js';

/** RFC 8628 §6.1's alphabet: consonants only, none easily taken for another. */
export const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
const LENGTH = 8;

/** A fresh user code in its shown form (`XXXX-XXXX`). */
export function newUserCode(): string {
  let code = '';
  for (let i = 0; i < LENGTH; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

/**
 * The shown form of a user code as a person may type it (`wdjbmjht`, `WDJB MJHT`); null when it
 * cannot be one (another length, a letter outside the alphabet).
 */
export function normalizeUserCode(input: string): string | null {
  const letters = input.toUpperCase().replace(/[\s-]/g, '');
  if (letters.length !== LENGTH) return null;
  for (const ch of letters) if (!USER_CODE_ALPHABET.includes(ch)) return null;
  return `${letters.slice(0, 4)}-${letters.slice(4)}`;
}

/** Why `input` is not a user code, naming the alphabet (a code of 8 letters with a vowel looks right). */
export function userCodeProblem(input: string): string {
  const letters = input.toUpperCase().replace(/[\s-]/g, '');
  const outside = [...new Set([...letters].filter((ch) => !USER_CODE_ALPHABET.includes(ch)))];
  const alphabet = `user codes are 8 letters from ${USER_CODE_ALPHABET} (consonants; no vowels and no Y), as the browser shows them, e.g. WDJB-MJHT`;
  if (outside.length > 0) return `${outside.join(', ')} ${outside.length === 1 ? 'is' : 'are'} not in the alphabet: ${alphabet}`;
  return `it has ${letters.length} letters: ${alphabet}`;
}

/** Signed (UTF-8) by a wallet to approve the browser that shows `userCode` (in its shown form). */
export const deviceMessage = (userCode: string, nonce: string) => `${PURPOSE.device}${userCode}:${nonce}`;

/** Where a wallet reads and answers an approval: `{PUBLIC_URL}/api/auth/device/{userCode}/approve`. */
export const verificationUrlOf = (publicUrl: string, userCode: string) => `${publicUrl}/api/auth/device/${userCode}/approve`;

/**
 * The server and user code a wallet was given: `<server URL> <user code>`, or the verification
 * URL alone (what the browser's QR code holds). Throws an Error saying what is wrong.
 */
export function parseApprovalTarget(args: readonly string[]): { base: string; userCode: string } {
  if (args.length === 1) {
    let url: URL;
    try {
      url = new URL(args[0]!);
    } catch {
      throw new Error('expected <server URL> <user code>, or the verification URL the browser shows');
    }
    const m = /^(.*)\/api\/auth\/device\/([^/]+)\/approve\/?$/.exec(url.pathname);
    const userCode = m ? normalizeUserCode(decodeURIComponent(m[2]!)) : null;
    if (!m || !userCode || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      throw new Error(`not a verification URL: ${url.origin}${url.pathname}`);
    }
    return { base: url.origin + m[1]!, userCode };
  }
  if (args.length !== 2) throw new Error('expected <server URL> <user code>, or the verification URL the browser shows');
  let base: string;
  try {
    const u = new URL(args[0]!);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
    base = (u.origin + u.pathname).replace(/\/+$/, '');
  } catch {
    throw new Error(`not a server URL: ${args[0]}`);
  }
  const userCode = normalizeUserCode(args[1]!);
  if (!userCode) throw new Error(`'${args[1]}' is not a user code: ${userCodeProblem(args[1]!)}`);
  return { base, userCode };
}
