/**
 * The nesting limit of JSON documents from outside (HTTP bodies, webhook deliveries, agent
 * frames). JSON.parse takes any depth, but JSON.stringify and the stores recurse and fail a few
 * thousand levels down, so a document that deep would be accepted and then could not be
 * answered or stored. No schema of Steward comes near the limit; free-form fields (metadata,
 * params, outputs) get what is left of it. Bodies read by the router and by the routes that
 * read their raw body themselves (webhook deliveries) go through `parseJsonBody`.
 */
import { badRequest } from './errors.js';

export const MAX_JSON_DEPTH = 64;

/**
 * Whether JSON text nests arrays and objects more than `max` levels deep, read without parsing
 * (string contents are skipped; the text need not be valid JSON: parsing decides that). Bytes
 * are UTF-8, whose multi-byte sequences never contain the ASCII brackets and quotes looked for.
 */
export function nestsDeeperThan(text: string | Uint8Array, max = MAX_JSON_DEPTH): boolean {
  const bytes = typeof text !== 'string';
  const n = text.length;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < n; i++) {
    const c = bytes ? (text as Uint8Array)[i]! : (text as string).charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return false;
}

export const tooDeepMessage = (what: string) => `${what} nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`;

/** A body as JSON: 400 `validation_failed` when it nests too deeply (it could be neither answered nor stored), 400 `invalid_json` when it does not parse. */
export function parseJsonBody(body: Buffer): unknown {
  if (nestsDeeperThan(body)) throw badRequest(tooDeepMessage('the request body'), 'validation_failed');
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw badRequest('the request body is not valid JSON', 'invalid_json');
  }
}
