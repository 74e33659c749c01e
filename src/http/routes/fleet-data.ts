/**
 * The dashboard's figures, read from aggregates (docs/fleet.md):
 *
 *   GET /api/fleet/summary           session      counts of what the caller may see
 *   GET /api/stats/tokens/series     session      token usage per day or month: server (global admin),
 *                                                 a workspace (its members), an agent (who may see it)
 *   GET /api/stats/tokens/top        globalAdmin  the agents or workspaces that used the most in a day or month
 */
import { z } from 'zod';
import { q, route, type RouteDef } from '../router.js';
import { fleetSummaryView, type FleetSummary } from '../../services/fleet-summary.js';
import { tokenSeriesView, tokenTopView, type TokenSeries } from '../../services/token-series.js';

export function fleetDataRoutes({ summary, series }: { summary: FleetSummary; series: TokenSeries }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/fleet/summary',
      auth: 'session',
      summary: 'The fleet at a glance: agents (total, online, pending, rejected, per workspace), registrations pending, certificates awaiting re-issue, policies expiring within 24 h, runs running and failed in the last 24 h; scoped to what the caller may see',
      tags: ['fleet'],
      responses: { 200: fleetSummaryView },
      handler: async (r) => ({ body: await summary.summary(r.principal!) }),
    }),
    route({
      method: 'GET',
      path: '/api/stats/tokens/series',
      auth: 'session',
      summary: 'Token usage per UTC day or month, every bucket of the range (zeros included), oldest first; with the daily budget of an agent whose policy sets one',
      tags: ['stats'],
      query: z.object({
        scope: z.enum(['server', 'workspace', 'agent']),
        id: z.string().min(1).max(512).optional(),
        granularity: z.enum(['day', 'month']).default('day'),
        from: z.string().max(10).optional(),
        to: z.string().max(10).optional(),
      }),
      responses: { 200: tokenSeriesView },
      handler: async (r) => ({ body: await series.series(r.principal!, r.query) }),
    }),
    route({
      method: 'GET',
      path: '/api/stats/tokens/top',
      auth: 'globalAdmin',
      summary: 'The agents or workspaces that used the most tokens in one UTC day or month (default: today, this month)',
      tags: ['stats'],
      query: z.object({
        by: z.enum(['agent', 'workspace']).default('agent'),
        granularity: z.enum(['day', 'month']).default('day'),
        bucket: z.string().max(10).optional(),
        limit: q.int(1, 100).default(10),
      }),
      responses: { 200: tokenTopView },
      handler: async (r) => ({ body: await series.top(r.query) }),
    }),
  ];
}
