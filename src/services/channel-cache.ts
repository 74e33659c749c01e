/**
 * The channel service's read-through caches (channels, member lists, agent names), kept within
 * a bound so a server with many channels does not keep them all.
 */
import type { ChannelDoc, ChannelMemberDoc, Collections } from '../store/collections.js';
import type { AgentRef } from '../domain/mentions.js';

/** Most channels (and member lists) kept in memory; beyond it the least recently loaded are dropped. */
const CACHE_LIMIT = 10_000;
const AGENT_NAME_TTL_MS = 60_000;

/**
 * Read-through caches of channels, member lists and agent names. They stay true because every
 * write of a channel or its members goes through the channel service (channel documents through the
 * channel actor): each write updates or drops the entry, and bumps a generation so that a load
 * that started before the write does not store what it read. In a cluster, other nodes write too:
 * each change is also reported to `changed` (which tells the other nodes), and what they report is
 * dropped here with `forget`.
 */
export class ChannelCache {
  private readonly channels = new Map<string, ChannelDoc>();
  private readonly members = new Map<string, Map<string, ChannelMemberDoc>>();
  private readonly agentNames = new Map<string, { name: string | null; at: number }>();
  private channelGen = 0;
  private memberGen = 0;

  constructor(
    private readonly c: Collections,
    /** Called after each change made here: `channel` (the channel and its members) or `members`. */
    private readonly changed?: (what: 'channel' | 'members', channelId: string) => void,
  ) {}

  /** Drops what another node changed. */
  forget(what: 'channel' | 'members', channelId: string): void {
    if (what === 'channel') {
      this.channelGen++;
      this.channels.delete(channelId);
    }
    this.memberGen++;
    this.members.delete(channelId);
  }

  /** Drops everything (after the bus was down: changes reported meanwhile were lost). */
  clear(): void {
    this.channelGen++;
    this.memberGen++;
    this.channels.clear();
    this.members.clear();
  }

  async channel(id: string): Promise<ChannelDoc | null> {
    const hit = this.channels.get(id);
    if (hit) return hit;
    const gen = this.channelGen;
    const doc = await this.c.channels.findById(id);
    if (doc && gen === this.channelGen) put(this.channels, id, doc);
    return doc;
  }

  setChannel(doc: ChannelDoc): void {
    this.channelGen++;
    put(this.channels, doc._id, doc);
    this.changed?.('channel', doc._id);
  }

  dropChannel(id: string): void {
    this.channelGen++;
    this.channels.delete(id);
    this.memberGen++;
    this.members.delete(id);
    this.changed?.('channel', id);
  }

  /** The channel's members by DID. */
  async memberMap(channelId: string): Promise<Map<string, ChannelMemberDoc>> {
    const hit = this.members.get(channelId);
    if (hit) return hit;
    const gen = this.memberGen;
    const list = await this.c.channelMembers.find({ channelId });
    const map = new Map(list.map((m) => [m.memberDid, m]));
    if (gen === this.memberGen) put(this.members, channelId, map);
    return map;
  }

  async member(channelId: string, did: string): Promise<ChannelMemberDoc | null> {
    return (await this.memberMap(channelId)).get(did) ?? null;
  }

  dropMembers(channelId: string): void {
    this.memberGen++;
    this.members.delete(channelId);
    this.changed?.('members', channelId);
  }

  /** Agent members with their names. */
  async agents(channelId: string): Promise<AgentRef[]> {
    const out: AgentRef[] = [];
    const now = Date.now();
    let missing: string[] | undefined;
    for (const m of (await this.memberMap(channelId)).values()) {
      if (m.memberType !== 'agent') continue;
      const known = this.agentNames.get(m.memberDid);
      if (known && now - known.at < AGENT_NAME_TTL_MS) {
        if (known.name !== null) out.push({ did: m.memberDid, name: known.name });
      } else {
        (missing ??= []).push(m.memberDid);
      }
    }
    if (missing) {
      const found = new Map((await this.c.agents.find({ _id: { $in: missing } }, { projection: { name: 1 } })).map((a) => [a._id, a.name]));
      for (const did of missing) {
        const name = found.get(did) ?? null;
        put(this.agentNames, did, { name, at: now });
        if (name !== null) out.push({ did, name });
      }
    }
    return out;
  }
}

export function put<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > CACHE_LIMIT) map.delete(map.keys().next().value!);
}
