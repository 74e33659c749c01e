/**
 * GET /api/audit: the activity log for global admins, newest first, one page at a time.
 * `action` matches exactly, or as a prefix when it ends with `*` (`workspace.member.*`);
 * `since` is inclusive and `until` exclusive.
 */
import { z } from 'zod';
import { instant, q, route, type RouteDef } from '../router.js';
import type { RouteContext } from './context.js';
import type { Filter } from '../../store/types.js';
import { escapeRegex } from '../../services/users.js';

const auditQuery = z.object({
  page: q.int(1).default(1),
  pageSize: q.int(1, 200).default(50).describe('1 to 200; more is refused with 400'),
  actor: z.string().min(1).max(512).optional().describe('DID of who did it, or `system`'),
  action: z.string().min(1).max(200).optional().describe('Exact action, or a prefix ending in * (user.*)'),
  targetType: z.string().min(1).max(100).optional(),
  target: z.string().min(1).max(512).optional(),
  since: instant().optional().describe('ISO 8601; entries at or after it'),
  until: instant().optional().describe('ISO 8601; entries before it'),
});

export function auditRoutes(ctx: RouteContext): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/audit',
      auth: 'globalAdmin',
      summary: 'The activity log, newest first, filtered by actor, action, target and time',
      tags: ['audit'],
      query: auditQuery,
      handler: async (r) => {
        const qy = r.query;
        const filter: Filter = {};
        if (qy.actor) filter.actor = qy.actor;
        if (qy.action) filter.action = qy.action.endsWith('*') ? { $regex: `^${escapeRegex(qy.action.slice(0, -1))}` } : qy.action;
        if (qy.targetType) filter.targetType = qy.targetType;
        if (qy.target) filter.target = qy.target;
        if (qy.since || qy.until) filter.at = { ...(qy.since ? { $gte: qy.since } : {}), ...(qy.until ? { $lt: qy.until } : {}) };
        const [total, docs] = await Promise.all([
          ctx.c.audit.count(filter),
          ctx.c.audit.find(filter, { sort: { at: -1, _id: -1 }, skip: (qy.page - 1) * qy.pageSize, limit: qy.pageSize }),
        ]);
        const entries = docs.map((d) => ({
          id: d._id,
          at: d.at,
          actor: d.actor,
          actorType: d.actorType,
          action: d.action,
          targetType: d.targetType,
          target: d.target,
          details: d.details,
        }));
        return { body: { entries, total, page: qy.page, pageSize: qy.pageSize, totalPages: Math.ceil(total / qy.pageSize) } };
      },
    }),
  ];
}
