/**
 * The HTTP sessions agents receive in `ready` (DESIGN §4 step 4). An agent has one session row,
 * `_id` `agent:<did>`, in the same `sessions` collection people use, so the ordinary auth policy
 * resolves its bearer token. The token is derived — HMAC-SHA256 under a key that only the
 * server's private key can produce, over the DID and the row's creation time — so a reconnecting
 * agent gets the same token back without a store write, while the store still holds only the
 * token's hash. A row that is missing or expired is (re)created with a new creation time, which
 * also changes the token. Sliding expiry is the session service's (each use extends it).
 *
 * The token of each agent's row is remembered beside the row's creation time it was derived
 * from, so a reconnection or re-certification reads the row (is it there, unexpired, made at that
 * time?) but computes neither the HMAC nor the hash again: ten thousand agents reconnecting at
 * once spent about a tenth of the event loop's time on them.
 */
import { createHmac, createHash } from 'node:crypto';
import type { Collections, SessionDoc } from '../store/collections.js';
import { hashToken } from './sessions.js';
import { DuplicateKeyError } from '../store/types.js';

export interface AgentSession {
  token: string;
  expiresAt: string;
}

export class AgentSessions {
  private readonly key: Buffer;
  /** New rows waiting for the next batched insert. */
  private inserts: Array<{ doc: SessionDoc; resolve(): void; reject(err: unknown): void }> = [];
  private scheduled = false;

  constructor(
    private readonly c: Collections,
    private readonly ttlMs: number,
    /** Signs with the server's private key (deterministic Ed25519). */
    sign: (message: string) => string,
  ) {
    this.key = createHash('sha256').update(sign('steward-agent-session-key:v1')).digest();
  }

  static idOf(did: string): string {
    return `agent:${did}`;
  }

  private tokenFor(did: string, createdAt: string): string {
    return createHmac('sha256', this.key).update(`${did}\n${createdAt}`).digest('base64url');
  }

  /**
   * By agent DID, `<createdAt>\n<token>`: the token derived for the row made at createdAt. One
   * string per agent (about 100 bytes with its map entry), dropped with the agent's session.
   */
  private readonly tokens = new Map<string, string>();

  /** The remembered token of the row made at `createdAt`, else undefined. */
  private rememberedToken(did: string, createdAt: string): string | undefined {
    const entry = this.tokens.get(did);
    if (entry === undefined || entry.length <= createdAt.length || entry.charCodeAt(createdAt.length) !== 10 || !entry.startsWith(createdAt)) return undefined;
    return entry.slice(createdAt.length + 1);
  }

  /** Look-ups in progress, so concurrent connections of one agent share one row. */
  private readonly inflight = new Map<string, Promise<AgentSession>>();

  /** The agent's live session, created when it has none. */
  sessionOf(did: string): Promise<AgentSession> {
    let p = this.inflight.get(did);
    if (!p) {
      p = this.resolveOrCreate(did).finally(() => this.inflight.delete(did));
      this.inflight.set(did, p);
    }
    return p;
  }

  private async resolveOrCreate(did: string): Promise<AgentSession> {
    const id = AgentSessions.idOf(did);
    const row = await this.c.sessions.findById(id);
    const now = Date.now();
    if (row && Date.parse(row.expiresAt) > now) {
      // A token is a function of the DID and the row's creation time: remembered for that time, it is that row's.
      const remembered = this.rememberedToken(did, row.createdAt);
      if (remembered !== undefined) return { token: remembered, expiresAt: row.expiresAt };
      const token = this.tokenFor(did, row.createdAt);
      if (hashToken(token) === row.tokenHash) {
        this.tokens.set(did, `${row.createdAt}\n${token}`);
        return { token, expiresAt: row.expiresAt };
      }
    }
    const createdAt = new Date(now).toISOString();
    const token = this.tokenFor(did, createdAt);
    const doc: SessionDoc = {
      _id: id,
      tokenHash: hashToken(token),
      kind: 'agent',
      subject: did,
      createdAt,
      lastUsedAt: createdAt,
      expiresAt: new Date(now + this.ttlMs).toISOString(),
    };
    if (row) await this.c.sessions.replaceOne({ _id: id }, doc, { upsert: true });
    else await this.insert(doc);
    this.tokens.set(did, `${createdAt}\n${token}`);
    return { token, expiresAt: doc.expiresAt };
  }

  /** Ends the agent's session (its token stops working). */
  async end(did: string): Promise<void> {
    this.forget(did);
    await this.c.sessions.deleteOne({ _id: AgentSessions.idOf(did) });
  }

  /** Drops what is remembered of the agent's token (an agent deleted; its row is deleted by the caller). */
  forget(did: string): void {
    this.tokens.delete(did);
  }

  /** First sessions of many agents connecting at once go into one insertMany. */
  private insert(doc: SessionDoc): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.inserts.push({ doc, resolve, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        const batch = this.inserts;
        this.inserts = [];
        // writeInserts answers each waiting insert; anything it throws goes to them too.
        this.writeInserts(batch).catch((err: unknown) => {
          for (const p of batch) p.reject(err);
        });
      });
    });
  }

  private async writeInserts(batch: AgentSessions['inserts']): Promise<void> {
    const docs = batch.map((p) => p.doc);
    try {
      await this.c.sessions.insertMany(docs);
    } catch (err) {
      if (!(err instanceof DuplicateKeyError)) {
        for (const p of batch) p.reject(err);
        return;
      }
      // A row appeared meanwhile (another connection of the same agent): write each one as a replacement.
      try {
        for (const doc of docs) await this.c.sessions.replaceOne({ _id: doc._id }, doc, { upsert: true });
      } catch (inner) {
        for (const p of batch) p.reject(inner);
        return;
      }
    }
    for (const p of batch) p.resolve();
  }
}
