/**
 * Token usage over time (GET /api/stats/tokens/series, GET /api/stats/tokens/top), read from the
 * roll-up's aggregates (src/services/token-usage.ts, "History"): the fleet-wide document's daily
 * and monthly buckets; a workspace's day documents; an agent's month documents of history plus the
 * recent days its usage document still holds. One read per answer, bounded by the range (at most 366 days),
 * never by the fleet's size. Figures are those rolled up (up to TOKEN_ROLLUP_INTERVAL_SECONDS
 * behind); the fleet-wide ones add the ledger not yet rolled up, as GET /api/stats/tokens does.
 */
import { z } from 'zod';
import { badRequest, forbidden, notFound } from '../domain/errors.js';
import { ExactSum, fromDigits, type TokenCount } from '../domain/token-count.js';
import type { Principal } from '../domain/principal.js';
import type { StoredTokenCounts } from '../store/collections.js';
import type { ServiceCore } from './core.js';
import type { PolicyService } from './policies.js';
import type { AgentViews } from './agent-views.js';
import { GLOBAL_ID, historyDays, utcDay, utcMonth, type TokenUsage } from './token-usage.js';
import { primaryWorkspaceOf, resolveWorkspace, visibleWorkspaceIds } from './workspaces.js';

const DAY_MS = 86_400_000;
export const SERIES_MAX_DAYS = 366;
const DEFAULT_DAYS = 30;
const DEFAULT_MONTHS = 12;

/** An exact token count: a number while it is a safe integer, past 2^53 an integer with all its digits. */
const tokenCount = z.union([z.number().int(), z.bigint()]);

export const tokenSeriesView = z.object({
  scope: z.enum(['server', 'workspace', 'agent']),
  /** The workspace's id or the agent's DID; null for the server. */
  id: z.string().nullable(),
  granularity: z.enum(['day', 'month']),
  points: z.array(z.object({ bucket: z.string(), tokens: tokenCount, promptTokens: tokenCount, completionTokens: tokenCount })),
  total: tokenCount,
  budget: z.object({ maxTokensPerDay: z.number().int(), todayUsed: tokenCount, todayFraction: z.number() }).nullable(),
});
export type TokenSeriesView = z.infer<typeof tokenSeriesView>;

export const tokenTopView = z.object({
  by: z.enum(['agent', 'workspace']),
  granularity: z.enum(['day', 'month']),
  bucket: z.string(),
  items: z.array(z.object({ id: z.string(), name: z.string().nullable(), tokens: tokenCount })),
});
export type TokenTopView = z.infer<typeof tokenTopView>;

export interface SeriesQuery {
  scope: 'server' | 'workspace' | 'agent';
  id?: string;
  granularity: 'day' | 'month';
  from?: string;
  to?: string;
}

export interface TopQuery {
  by: 'agent' | 'workspace';
  granularity: 'day' | 'month';
  bucket?: string;
  limit: number;
}

/** Prompt and completion sums of one bucket. */
class Sums {
  readonly prompt = new ExactSum();
  readonly completion = new ExactSum();

  add(stored: StoredTokenCounts | undefined): void {
    if (!stored) return;
    this.prompt.addStored(stored.promptTokens, stored.promptTokensBillions);
    this.completion.addStored(stored.completionTokens, stored.completionTokensBillions);
  }

  addSums(other: Sums): void {
    this.prompt.addStored(other.prompt.n, other.prompt.billions);
    this.completion.addStored(other.completion.n, other.completion.billions);
  }

  /** Adds counts written in decimal digits (an agent's history). */
  addDigits(prompt: string, completion: string): void {
    this.prompt.addStored(...fromDigits(prompt));
    this.completion.addStored(...fromDigits(completion));
  }

  get tokens(): TokenCount {
    const all = new ExactSum();
    all.addStored(this.prompt.n, this.prompt.billions);
    all.addStored(this.completion.n, this.completion.billions);
    return all.value;
  }
}

export class TokenSeries {
  private readonly tokens: TokenUsage;
  private readonly policies: PolicyService;
  private readonly views: AgentViews;

  constructor(
    private readonly ctx: ServiceCore,
    deps: { tokens: TokenUsage; policies: PolicyService; views: AgentViews },
  ) {
    this.tokens = deps.tokens;
    this.policies = deps.policies;
    this.views = deps.views;
  }

  async series(principal: Principal, q: SeriesQuery): Promise<TokenSeriesView> {
    const { c } = this.ctx;
    const now = this.tokens.clock();
    const buckets = q.granularity === 'day' ? dayRange(q.from, q.to, now) : monthRange(q.from, q.to, now);
    const first = buckets[0]!;
    const lastBucket = buckets[buckets.length - 1]!;
    const fromDay = q.granularity === 'day' ? first : `${first}-01`;
    const toDay = q.granularity === 'day' ? lastBucket : `${lastBucket}-31`;
    const byBucket = new Map<string, Sums>(buckets.map((b) => [b, new Sums()]));
    const addDay = (day: string, counts: StoredTokenCounts | undefined) => byBucket.get(q.granularity === 'day' ? day : day.slice(0, 7))?.add(counts);
    let id: string | null = null;
    let budget: TokenSeriesView['budget'] = null;

    if (q.scope === 'server') {
      if (principal.kind !== 'user' || !principal.isAdmin) throw forbidden('the server-wide series is for global admins');
      const global = await c.tokenUsage.findById(GLOBAL_ID);
      if (q.granularity === 'day') for (const [day, counts] of Object.entries(global?.days ?? {})) addDay(day, counts);
      else for (const [month, counts] of Object.entries(global?.months ?? {})) byBucket.get(month)?.add(counts);
      const tail = await c.tokenLedger.find({ _id: { $gt: global?.rolledUpTo ?? '' } }, { projection: { day: 1, promptTokens: 1, completionTokens: 1 } });
      for (const doc of tail) addDay(doc.day, doc);
    } else if (q.scope === 'workspace') {
      if (!q.id) throw badRequest('scope=workspace needs id (the workspace id or slug)', 'validation_failed');
      const ws = await resolveWorkspace(c, q.id);
      const visible = ws ? await visibleWorkspaceIds(c, principal) : [];
      if (!ws || (visible !== 'all' && !visible.includes(ws._id))) throw notFound(`no workspace ${q.id}`);
      id = ws._id;
      for (const doc of await c.tokenWorkspaceDays.find({ workspaceId: ws._id, day: { $gte: fromDay, $lte: toDay } })) addDay(doc.day, doc);
    } else {
      if (!q.id) throw badRequest('scope=agent needs id (the agent DID)', 'validation_failed');
      const agent = await this.views.visibleAgent(principal, q.id);
      id = agent._id;
      const days = new Map<string, Sums>();
      for (const doc of await c.tokenAgentMonths.find({ agentDid: agent._id, month: { $gte: fromDay.slice(0, 7), $lte: toDay.slice(0, 7) } })) {
        for (const [dd, prompt, completion] of historyDays(doc.days)) {
          const sums = new Sums();
          sums.addDigits(prompt, completion);
          days.set(`${doc.month}-${dd}`, sums);
        }
      }
      const usage = await c.tokenUsage.findById(agent._id);
      // The days its usage document still holds are the latest word (copied out only when they leave it).
      for (const [day, counts] of Object.entries(usage?.days ?? {})) {
        const sums = new Sums();
        sums.add(counts);
        days.set(day, sums);
      }
      for (const [day, sums] of days) byBucket.get(q.granularity === 'day' ? day : day.slice(0, 7))?.addSums(sums);
      const primary = await primaryWorkspaceOf(c, agent._id);
      const max = this.policies.effective(agent._id, primary?._id ?? null, now)?.resourceLimits?.maxTokensPerDay;
      if (max !== undefined) {
        const today = new Sums();
        today.add(usage?.days?.[utcDay(new Date(now))]);
        const used = today.tokens;
        budget = { maxTokensPerDay: max, todayUsed: used, todayFraction: Number(used) / max };
      }
    }

    const total = new Sums();
    const points = buckets.map((bucket) => {
      const sums = byBucket.get(bucket)!;
      total.addSums(sums);
      return { bucket, tokens: sums.tokens, promptTokens: sums.prompt.value, completionTokens: sums.completion.value };
    });
    return { scope: q.scope, id, granularity: q.granularity, points, total: total.tokens, budget };
  }

  /** The agents or workspaces that used the most tokens in one day or month (global admins). */
  async top(q: TopQuery): Promise<TokenTopView> {
    const { c } = this.ctx;
    const now = new Date(this.tokens.clock());
    const bucket = q.bucket ?? (q.granularity === 'day' ? utcDay(now) : utcMonth(now));
    if (q.granularity === 'day' ? !isDay(bucket) : !isMonth(bucket)) {
      throw badRequest(`bucket must be a ${q.granularity === 'day' ? 'date YYYY-MM-DD' : 'month YYYY-MM'}`, 'validation_failed');
    }
    const inBucket = (day: string) => day === bucket || day.slice(0, 7) === bucket;
    const sums = new Map<string, Sums>();
    const sumsOf = (key: string) => {
      let s = sums.get(key);
      if (!s) sums.set(key, (s = new Sums()));
      return s;
    };
    if (q.by === 'workspace') {
      const range = q.granularity === 'day' ? { day: bucket } : { day: { $gte: `${bucket}-01`, $lte: `${bucket}-31` } };
      for (const doc of await c.tokenWorkspaceDays.find(range)) sumsOf(doc.workspaceId).add(doc);
    } else {
      // Past days from the history; the days agents' usage documents still hold (they win).
      const held = new Map<string, Map<string, Sums>>();
      const dayOf = (did: string, day: string) => {
        let m = held.get(did);
        if (!m) held.set(did, (m = new Map()));
        const s = new Sums();
        m.set(day, s);
        return s;
      };
      for (const doc of await c.tokenAgentMonths.find({ month: bucket.slice(0, 7) })) {
        for (const [dd, prompt, completion] of historyDays(doc.days)) {
          const day = `${doc.month}-${dd}`;
          if (inBucket(day)) dayOf(doc.agentDid, day).addDigits(prompt, completion);
        }
      }
      const since = q.granularity === 'day' ? bucket : `${bucket}-01`;
      for (const doc of await c.tokenUsage.find({ _id: { $ne: GLOBAL_ID }, updatedAt: { $gte: since } }, { projection: { days: 1 } })) {
        for (const [day, counts] of Object.entries(doc.days ?? {})) if (inBucket(day)) dayOf(doc._id, day).add(counts);
      }
      for (const [did, days] of held) for (const s of days.values()) sumsOf(did).addSums(s);
    }
    const ranked = [...sums].map(([key, s]) => ({ key, tokens: s.tokens })).filter((r) => r.tokens > 0);
    ranked.sort((a, b) => (a.tokens === b.tokens ? (a.key < b.key ? -1 : 1) : a.tokens > b.tokens ? -1 : 1));
    const items = ranked.slice(0, q.limit);
    const names = new Map<string, string>();
    const ids = items.map((i) => i.key);
    if (ids.length > 0) {
      const docs = q.by === 'agent' ? await c.agents.find({ _id: { $in: ids } }, { projection: { name: 1 } }) : await c.workspaces.find({ _id: { $in: ids } }, { projection: { name: 1 } });
      for (const d of docs) names.set(d._id, d.name);
    }
    return { by: q.by, granularity: q.granularity, bucket, items: items.map((i) => ({ id: i.key, name: names.get(i.key) ?? null, tokens: i.tokens })) };
  }
}

/** A date YYYY-MM-DD that exists (not February 30th). */
function isDay(s: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(s)) return false;
  const at = Date.parse(`${s}T00:00:00Z`);
  return !Number.isNaN(at) && utcDay(new Date(at)) === s;
}
const isMonth = (s: string) => /^\d{4}-\d{2}$/.test(s) && !Number.isNaN(Date.parse(`${s}-01T00:00:00Z`));

/** Every day from `from` to `to` (defaults: the last 30 days, today included). */
function dayRange(from: string | undefined, to: string | undefined, now: number): string[] {
  for (const [name, v] of [['from', from], ['to', to]] as const) if (v !== undefined && !isDay(v)) throw badRequest(`${name} must be a date YYYY-MM-DD`, 'validation_failed');
  const end = Date.parse(`${to ?? utcDay(new Date(now))}T00:00:00Z`);
  const start = from !== undefined ? Date.parse(`${from}T00:00:00Z`) : end - (DEFAULT_DAYS - 1) * DAY_MS;
  if (start > end) throw badRequest('from is after to', 'validation_failed');
  const n = Math.round((end - start) / DAY_MS) + 1;
  if (n > SERIES_MAX_DAYS) throw badRequest(`the range is ${n} days; at most ${SERIES_MAX_DAYS}`, 'validation_failed');
  return Array.from({ length: n }, (_, i) => utcDay(new Date(start + i * DAY_MS)));
}

/** Every month from `from` to `to` (defaults: the last 12 months, this one included); at most 366 days. */
function monthRange(from: string | undefined, to: string | undefined, now: number): string[] {
  for (const [name, v] of [['from', from], ['to', to]] as const) if (v !== undefined && !isMonth(v)) throw badRequest(`${name} must be a month YYYY-MM`, 'validation_failed');
  const [ty, tm] = (to ?? utcMonth(new Date(now))).split('-').map(Number) as [number, number];
  const endIndex = ty * 12 + tm - 1;
  let startIndex = endIndex - (DEFAULT_MONTHS - 1);
  if (from !== undefined) {
    const [fy, fm] = from.split('-').map(Number) as [number, number];
    startIndex = fy * 12 + fm - 1;
  }
  if (startIndex > endIndex) throw badRequest('from is after to', 'validation_failed');
  const firstDay = Date.UTC(Math.floor(startIndex / 12), startIndex % 12, 1);
  const afterLast = Date.UTC(Math.floor((endIndex + 1) / 12), (endIndex + 1) % 12, 1);
  if ((afterLast - firstDay) / DAY_MS > SERIES_MAX_DAYS) throw badRequest(`the range is ${endIndex - startIndex + 1} months; at most ${SERIES_MAX_DAYS} days`, 'validation_failed');
  return Array.from({ length: endIndex - startIndex + 1 }, (_, i) => {
    const m = startIndex + i;
    return `${Math.floor(m / 12)}-${String((m % 12) + 1).padStart(2, '0')}`;
  });
}
