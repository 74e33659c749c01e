/**
 * Claim sessions and invitations were once stored under their tokens in clear (the token was the
 * record's id), so whoever could read the data files could claim the accounts they were for. They
 * are now stored under the SHA-256 of the token. At start, records left in the old form are moved
 * to their hashed id (the tokens already handed out keep working, since a lookup hashes what it is
 * given), and the two collections are then compacted so the old lines leave the datafiles too.
 *
 * Crash-safe: the hashed copy is inserted before the clear record is deleted, and a copy found
 * already there (an earlier run cut short) is taken as done.
 */
import type { Collections } from '../store/collections.js';
import { DuplicateKeyError, type Store } from '../store/types.js';
import type { Logger } from '../log.js';
import { hashToken } from './sessions.js';

const HASHED = /^[0-9a-f]{64}$/;
const isClear = (id: string | null): id is string => id !== null && !HASHED.test(id);

export async function hashClearTokens(c: Collections, store: Pick<Store, 'compact'>, log: Logger): Promise<{ invitations: number; claimSessions: number }> {
  let invitations = 0;
  for (const inv of await c.invitations.find({})) {
    if (!isClear(inv._id)) continue;
    await insertOnce(() => c.invitations.insertOne({ ...inv, _id: hashToken(inv._id) }));
    await c.invitations.deleteOne({ _id: inv._id });
    invitations++;
  }
  let claimSessions = 0;
  for (const s of await c.claimSessions.find({})) {
    if (!isClear(s._id) && !isClear(s.invitationToken)) continue;
    const invitationToken = isClear(s.invitationToken) ? hashToken(s.invitationToken) : s.invitationToken;
    if (isClear(s._id)) {
      await insertOnce(() => c.claimSessions.insertOne({ ...s, _id: hashToken(s._id), invitationToken }));
      await c.claimSessions.deleteOne({ _id: s._id });
    } else {
      await c.claimSessions.updateOne({ _id: s._id }, { $set: { invitationToken } });
    }
    claimSessions++;
  }
  if (invitations + claimSessions === 0) return { invitations, claimSessions };
  try {
    await store.compact?.(c.invitations.name);
    await store.compact?.(c.claimSessions.name);
  } catch (err) {
    log.warn({ err }, 'compacting after hashing stored tokens failed; the old lines leave the datafiles at the next compaction');
  }
  log.info({ invitations, claimSessions }, 'stored claim and invitation tokens replaced by their hashes');
  return { invitations, claimSessions };
}

async function insertOnce(insert: () => Promise<unknown>): Promise<void> {
  try {
    await insert();
  } catch (err) {
    if (!(err instanceof DuplicateKeyError)) throw err;
  }
}
