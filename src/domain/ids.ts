/**
 * Record ids: nanoid's 21 URL-safe characters, never starting with `-`, so an id typed as a
 * command-line argument (`steward policies revoke <id>`) is never taken for an option.
 */
import { nanoid } from 'nanoid';

const DASH = 45;

export function newId(): string {
  let id = nanoid();
  while (id.charCodeAt(0) === DASH) id = nanoid(); // drawn again: the others stay uniform
  return id;
}
