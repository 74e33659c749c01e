/**
 * Request bodies as JSON, refused at the boundary when they do not parse or nest too deeply
 * (MAX_JSON_DEPTH): the router's bodies and the routes that read their raw body themselves.
 */
import { badRequest } from './errors.js';
import { nestsDeeperThan, tooDeepMessage } from '../domain/json-depth.js';

/** 400 `validation_failed` when the text nests too deeply (it could be neither answered nor stored), 400 `invalid_json` when it does not parse. */
export function parseJsonBody(body: Buffer): unknown {
  if (nestsDeeperThan(body)) throw badRequest(tooDeepMessage('the request body'), 'validation_failed');
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw badRequest('the request body is not valid JSON', 'invalid_json');
  }
}
