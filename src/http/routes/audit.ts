/**
 * GET /api/audit: the activity log for global admins, newest first, one page at a time.
 * `action` matches exactly, or as a prefix when it ends with `*` (`workspace.member.*`);
 * `since` is inclusive and `until` exclusive.
 */
import { z } from 'zod';
import { instant, q, route, type RouteDef } from '../router.js';
import { AuditPage, type AuditLog } from '../../services/audit.js';

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

export function auditRoutes({ audit }: { audit: AuditLog }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/audit',
      auth: 'globalAdmin',
      summary: 'The activity log, newest first, filtered by actor, action, target and time',
      tags: ['audit'],
      query: auditQuery,
      responses: { 200: AuditPage },
      handler: async (r) => ({ body: await audit.list(r.query) }),
    }),
  ];
}
