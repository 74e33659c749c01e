/**
 * The limits of a channel message (interface §2.9), wherever it comes from: the HTTP routes, a
 * workflow's `channel.post` step, a bridge's incoming delivery.
 */
import { badRequest } from './errors.js';

/** Largest message content (characters). */
export const MAX_CONTENT = 40_000;
/** Largest metadata object (characters of its JSON). */
export const MAX_METADATA = 16 * 1024;
/** Largest page of GET messages; larger `limit` values are capped to it (§8). */
export const MAX_PAGE = 100;

/** The metadata to store; 400 when it is too large once serialised. */
export function checkMetadata(m: Record<string, unknown> | null | undefined): Record<string, unknown> {
  if (!m) return {};
  if (JSON.stringify(m).length > MAX_METADATA) throw badRequest(`metadata is larger than ${MAX_METADATA} characters of JSON`, 'metadata_too_large');
  return m;
}
