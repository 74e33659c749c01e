/**
 * Cron schedules of workflows (interface §4.10 rule 4). docs/workflows.md describes them.
 *
 *   POST   /api/schedules       user     201 {success, schedule}
 *   GET    /api/schedules       session  200 {success, schedules}
 *   GET    /api/schedules/:id   session  200 {schedule}
 *   DELETE /api/schedules/:id   user     200 {success}
 *
 * Creating and deleting need the workspace admin role (or global admin) in the workflow's
 * workspace, as editing the workflow does; a schedule is visible to whoever sees its workflow.
 */
import { z } from 'zod';
import { route, type RouteDef } from '../router.js';
import { forbidden, notFound } from '../../domain/errors.js';
import type { RouteContext } from './context.js';
import type { Principal } from '../../domain/principal.js';
import { can } from '../../domain/permissions.js';
import type { WorkflowScheduleDoc } from '../../store/collections.js';
import { resolveWorkspace, visibleWorkspaceIds } from '../../services/workspaces.js';
import { cronProblem, isTimeZone, type ScheduleService } from '../../services/schedules.js';
import { workflowAccess } from './workflows.js';
import { personOf } from '../auth.js';

const cronField = z
  .string({ message: 'required: a cron expression' })
  .trim()
  .min(1, { message: 'required: a cron expression' })
  .max(200)
  .superRefine((v, zctx) => {
    const problem = cronProblem(v);
    if (problem) zctx.addIssue({ code: 'custom', message: `not a valid cron expression (${problem})` });
  });
const timezoneField = z
  .string()
  .trim()
  .max(100)
  .refine(isTimeZone, { message: 'not an IANA time zone name (e.g. Europe/Paris, America/New_York, UTC)' });

export function scheduleRoutes(ctx: RouteContext, schedules: ScheduleService): RouteDef[] {
  const { c } = ctx;

  const visibleSchedule = async (p: Principal, id: string) => {
    const doc = await c.workflowSchedules.findById(id);
    if (!doc) throw notFound(`no schedule ${id}`);
    const a = await workflowAccess(ctx, p, doc.workspaceId);
    if (!a.visible) throw notFound(`no schedule ${id}`);
    return { doc, a };
  };

  const needAdmin = async (a: Awaited<ReturnType<typeof workflowAccess>>, workspaceId: string) => {
    if (can({ isGlobalAdmin: a.isGlobalAdmin, workspaceRole: a.role }, 'editWorkflows')) return;
    const ws = await c.workspaces.findById(workspaceId);
    throw forbidden(`scheduling workflows needs the admin role in workspace ${ws?.slug ?? workspaceId} (or global admin)`);
  };

  return [
    route({
      method: 'POST',
      path: '/api/schedules',
      auth: 'user',
      summary: 'Schedules runs of a workflow with a cron expression (5 fields, or 6 with seconds) in an IANA time zone (default UTC)',
      tags: ['workflows'],
      successStatus: 201,
      body: z.strictObject({
        workflowId: z.string({ message: 'required: the workflow id' }).min(1).max(200),
        cron: cronField,
        params: z.record(z.string(), z.unknown(), { message: 'expected a JSON object' }).default({}),
        timezone: timezoneField.default('UTC'),
      }),
      handler: async (r) => {
        const p = personOf(r);
        const wf = await c.workflows.findById(r.body.workflowId);
        const a = wf ? await workflowAccess(ctx, p, wf.workspaceId) : null;
        if (!wf || !a?.visible) throw notFound(`no workflow ${r.body.workflowId}`);
        await needAdmin(a, wf.workspaceId);
        const doc = await schedules.create(wf, { cron: r.body.cron, timezone: r.body.timezone, params: r.body.params }, p);
        return { status: 201, body: { success: true, schedule: schedules.view(doc) } };
      },
    }),

    route({
      method: 'GET',
      path: '/api/schedules',
      auth: 'session',
      summary: "Schedules of the workflows the caller sees, filtered by workflowId or workspaceId (id or slug)",
      tags: ['workflows'],
      query: z.object({ workflowId: z.string().min(1).max(200).optional(), workspaceId: z.string().min(1).max(200).optional() }),
      handler: async (r) => {
        const p = r.principal!;
        const filter: Record<string, unknown> = {};
        const visible = await visibleWorkspaceIds(c, p);
        if (visible !== 'all') filter.workspaceId = { $in: visible };
        if (r.query.workspaceId) {
          const ws = await resolveWorkspace(c, r.query.workspaceId);
          if (!ws || (visible !== 'all' && !visible.includes(ws._id))) throw notFound(`workspace ${r.query.workspaceId} not found`);
          filter.workspaceId = ws._id;
        }
        if (r.query.workflowId) filter.workflowId = r.query.workflowId;
        const docs: WorkflowScheduleDoc[] = await c.workflowSchedules.find(filter, { sort: { createdAt: 1, _id: 1 } });
        return { body: { success: true, schedules: docs.map((d) => schedules.view(d)) } };
      },
    }),

    route({
      method: 'GET',
      path: '/api/schedules/:id',
      auth: 'session',
      summary: 'A schedule, with its next firing',
      tags: ['workflows'],
      params: z.object({ id: z.string().min(1).max(200) }),
      handler: async (r) => {
        const { doc } = await visibleSchedule(r.principal!, r.params.id);
        return { body: { schedule: schedules.view(doc) } };
      },
    }),

    route({
      method: 'DELETE',
      path: '/api/schedules/:id',
      auth: 'user',
      summary: 'Deletes a schedule (workspace admin or global admin); runs it already started go on',
      tags: ['workflows'],
      params: z.object({ id: z.string().min(1).max(200) }),
      handler: async (r) => {
        const p = personOf(r);
        const { doc, a } = await visibleSchedule(p, r.params.id);
        await needAdmin(a, doc.workspaceId);
        await schedules.remove(doc, p);
        return { body: { success: true } };
      },
    }),
  ];
}
