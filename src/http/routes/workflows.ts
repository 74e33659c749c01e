/**
 * Workflows and their runs (interface §2.12, §4.10, §5). docs/workflows.md describes every route.
 *
 *   GET    /api/workflows                              session  200 {success, workflows}
 *   POST   /api/workflows                              user     201 {success, id, name, workspaceId}
 *   GET    /api/workflows/:id                          session  200 {workflow}
 *   PUT    /api/workflows/:id                          user     200 {success, workflow}
 *   PATCH  /api/workflows/:id                          user     200 {success, workflow}
 *   DELETE /api/workflows/:id                          user     200 {success, runs, schedules}
 *   POST   /api/workflows/:id/run                      user     202 {runId, status: "running"}
 *   GET    /api/workflows/:id/runs                     session  200 {runs, total, page, pageSize, totalPages}
 *   GET    /api/workflows/:id/runs/:runId              session  200 Run
 *   POST   /api/workflows/:id/runs/:runId/cancel       user     200 Run (cancelled); 409 when it has ended
 *
 * A workflow is visible to global admins and to the members (people and agents) of its
 * workspace; to anyone else it does not exist (404). Creating, changing and deleting need the
 * workspace admin role or global admin (403 otherwise); running and cancelling need operator or
 * higher.
 */
import { z } from 'zod';
import { q, route, type RouteDef } from '../router.js';
import { badRequest, forbidden, notFound } from '../../domain/errors.js';
import type { RouteContext } from './context.js';
import type { Principal } from '../../domain/principal.js';
import { atLeast, can } from '../../domain/permissions.js';
import type { WorkflowDoc, WorkspaceDoc } from '../../store/collections.js';
import type { WorkspaceRole } from '../../domain/roles.js';
import { memberRole, resolveWorkspace, visibleWorkspaceIds } from '../../services/workspaces.js';
import { DefinitionError, validateDefinition, type WorkflowDefinition } from '../../domain/workflow/definition.js';
import { toWorkflowDetail, toWorkflowSummary, type WorkflowService } from '../../services/workflows.js';
import { personOf } from '../auth.js';

const name = z.string().trim().min(1, { message: 'must not be blank' }).max(200);
const description = z.string().max(2000);
const definitionBody = z.record(z.string(), z.unknown(), { message: 'expected a WorkflowDefinition object' });
const params = z.record(z.string(), z.unknown(), { message: 'expected a JSON object' });
const idParams = z.object({ id: z.string().min(1).max(200) });
const runParams = idParams.extend({ runId: z.string().min(1).max(200) });

interface Access {
  wf: WorkflowDoc;
  isGlobalAdmin: boolean;
  role: WorkspaceRole | null;
}

/** A definition checked by the schema and the rules beyond it; 400 `invalid_definition` naming the step. */
export function checkDefinition(input: unknown): WorkflowDefinition {
  try {
    return validateDefinition(input);
  } catch (err) {
    if (err instanceof DefinitionError) throw badRequest(`invalid definition: ${err.message}`, 'invalid_definition');
    throw err;
  }
}

/** Whether a principal may see the workflows of a workspace, and with which role. */
export async function workflowAccess(ctx: RouteContext, p: Principal, workspaceId: string): Promise<{ visible: boolean; isGlobalAdmin: boolean; role: WorkspaceRole | null }> {
  if (p.kind === 'agent') {
    const visible = (await ctx.c.workspaceAgents.count({ workspaceId, agentDid: p.did })) > 0;
    return { visible, isGlobalAdmin: false, role: visible ? 'member' : null };
  }
  const role = await memberRole(ctx.c, p.userId, workspaceId);
  return { visible: p.isAdmin || role !== null, isGlobalAdmin: p.isAdmin, role };
}

export function workflowRoutes(ctx: RouteContext, workflows: WorkflowService): RouteDef[] {
  const { c } = ctx;

  const access = async (p: Principal, id: string): Promise<Access> => {
    const wf = await c.workflows.findById(id);
    if (!wf) throw notFound(`no workflow ${id}`);
    const a = await workflowAccess(ctx, p, wf.workspaceId);
    if (!a.visible) throw notFound(`no workflow ${id}`);
    return { wf, isGlobalAdmin: a.isGlobalAdmin, role: a.role };
  };

  const mayEdit = async (a: { isGlobalAdmin: boolean; role: WorkspaceRole | null }, workspaceId: string) => {
    if (can({ isGlobalAdmin: a.isGlobalAdmin, workspaceRole: a.role }, 'editWorkflows')) return;
    const ws = await c.workspaces.findById(workspaceId);
    throw forbidden(`creating or editing workflows needs the admin role in workspace ${ws?.slug ?? workspaceId} (or global admin)`);
  };

  const mayRun = async (a: Access) => {
    if (a.isGlobalAdmin || atLeast(a.role, 'operator')) return;
    const ws = await c.workspaces.findById(a.wf.workspaceId);
    throw forbidden(`running workflows needs the operator role (or higher) in workspace ${ws?.slug ?? a.wf.workspaceId} (or global admin)`);
  };

  const visibleWorkspace = async (p: Principal, ref: string): Promise<WorkspaceDoc> => {
    const ws = await resolveWorkspace(c, ref);
    if (!ws || !(await workflowAccess(ctx, p, ws._id)).visible) throw notFound(`workspace ${ref} not found`);
    return ws;
  };

  const runOf = async (a: Access, runId: string) => {
    const run = await workflows.getRun(runId);
    if (!run || run.workflowId !== a.wf._id) throw notFound(`no run ${runId} of workflow ${a.wf._id}`);
    return run;
  };

  return [
    route({
      method: 'GET',
      path: '/api/workflows',
      auth: 'session',
      summary: "Workflows of the caller's workspaces (all for global admins), filtered by workspaceId (id or slug) and createdBy (DID)",
      tags: ['workflows'],
      query: z.object({ workspaceId: z.string().min(1).max(200).optional(), createdBy: z.string().min(1).max(512).optional() }),
      handler: async (r) => {
        const p = r.principal!;
        const filter: Record<string, unknown> = {};
        if (r.query.workspaceId) filter.workspaceId = (await visibleWorkspace(p, r.query.workspaceId))._id;
        else {
          const visible = await visibleWorkspaceIds(c, p);
          if (visible !== 'all') filter.workspaceId = { $in: visible };
        }
        if (r.query.createdBy) filter.createdBy = r.query.createdBy;
        const docs = await c.workflows.find(filter, { sort: { createdAt: 1, _id: 1 } });
        return { body: { success: true, workflows: docs.map(toWorkflowSummary) } };
      },
    }),

    route({
      method: 'POST',
      path: '/api/workflows',
      auth: 'user',
      summary: 'Creates a workflow (workspace admin or global admin); 400 names the step of a refused definition',
      tags: ['workflows'],
      successStatus: 201,
      body: z.strictObject({
        name,
        description: description.optional(),
        workspaceId: z.string({ message: 'required: the workspace id or slug' }).trim().min(1).max(200),
        definition: definitionBody,
      }),
      handler: async (r) => {
        const p = personOf(r);
        const ws = await visibleWorkspace(p, r.body.workspaceId);
        await mayEdit(await workflowAccess(ctx, p, ws._id), ws._id);
        const definition = checkDefinition(r.body.definition);
        const wf = await workflows.create({ name: r.body.name, description: r.body.description ?? '', workspace: ws, definition }, p);
        return { status: 201, body: { success: true, id: wf._id, name: wf.name, workspaceId: wf.workspaceId } };
      },
    }),

    route({
      method: 'GET',
      path: '/api/workflows/:id',
      auth: 'session',
      summary: 'A workflow with its definition',
      tags: ['workflows'],
      params: idParams,
      handler: async (r) => {
        const { wf } = await access(r.principal!, r.params.id);
        return { body: { workflow: toWorkflowDetail(wf) } };
      },
    }),

    route({
      method: 'PUT',
      path: '/api/workflows/:id',
      auth: 'user',
      summary: 'Replaces a workflow\'s name, description and definition (runs already started keep the definition they started with)',
      tags: ['workflows'],
      params: idParams,
      body: z.strictObject({ name, description: description.optional(), definition: definitionBody }),
      handler: async (r) => {
        const p = personOf(r);
        const a = await access(p, r.params.id);
        await mayEdit(a, a.wf.workspaceId);
        const definition = checkDefinition(r.body.definition);
        const wf = await workflows.update(a.wf, { name: r.body.name, description: r.body.description ?? '', definition }, p);
        return { body: { success: true, workflow: toWorkflowDetail(wf) } };
      },
    }),

    route({
      method: 'PATCH',
      path: '/api/workflows/:id',
      auth: 'user',
      summary: 'Changes some of a workflow\'s name, description and definition',
      tags: ['workflows'],
      params: idParams,
      body: z.strictObject({ name: name.optional(), description: description.optional(), definition: definitionBody.optional() }),
      handler: async (r) => {
        const p = personOf(r);
        const a = await access(p, r.params.id);
        await mayEdit(a, a.wf.workspaceId);
        if (r.body.name === undefined && r.body.description === undefined && r.body.definition === undefined) {
          throw badRequest('nothing to change: give name, description or definition', 'validation_failed');
        }
        const definition = r.body.definition === undefined ? undefined : checkDefinition(r.body.definition);
        const wf = await workflows.update(a.wf, { name: r.body.name, description: r.body.description, definition }, p);
        return { body: { success: true, workflow: toWorkflowDetail(wf) } };
      },
    }),

    route({
      method: 'DELETE',
      path: '/api/workflows/:id',
      auth: 'user',
      summary: 'Deletes a workflow with its schedules and run history; running runs are cancelled first',
      tags: ['workflows'],
      params: idParams,
      handler: async (r) => {
        const p = personOf(r);
        const a = await access(p, r.params.id);
        await mayEdit(a, a.wf.workspaceId);
        const removed = await workflows.delete(a.wf, p);
        return { body: { success: true, ...removed } };
      },
    }),

    route({
      method: 'POST',
      path: '/api/workflows/:id/run',
      auth: 'user',
      summary: 'Starts a run (workspace operator or higher); answers 202 before any step runs',
      tags: ['workflows'],
      successStatus: 202,
      params: idParams,
      body: z.strictObject({ params: params.default({}) }),
      handler: async (r) => {
        const p = personOf(r);
        const a = await access(p, r.params.id);
        await mayRun(a);
        const started = await workflows.startRun(a.wf, r.body.params, { type: 'person', userId: p.userId, did: p.did });
        await ctx.audit.record(p, { action: 'workflow.run', targetType: 'workflow', target: a.wf._id, details: { runId: started.runId } });
        return { status: 202, body: started };
      },
    }),

    route({
      method: 'GET',
      path: '/api/workflows/:id/runs',
      auth: 'session',
      summary: 'Runs of a workflow, newest first, one page at a time',
      tags: ['workflows'],
      params: idParams,
      query: z.object({
        status: z.enum(['running', 'completed', 'failed', 'cancelled']).optional(),
        page: q.int(1).default(1),
        pageSize: q.int(1, 100).default(20),
      }),
      handler: async (r) => {
        const a = await access(r.principal!, r.params.id);
        return { body: await workflows.listRuns(a.wf._id, r.query) };
      },
    }),

    route({
      method: 'GET',
      path: '/api/workflows/:id/runs/:runId',
      auth: 'session',
      summary: 'A run: its status, and each step\'s status, durationMs and output',
      tags: ['workflows'],
      params: runParams,
      handler: async (r) => {
        const a = await access(r.principal!, r.params.id);
        return { body: await runOf(a, r.params.runId) };
      },
    }),

    route({
      method: 'POST',
      path: '/api/workflows/:id/runs/:runId/cancel',
      auth: 'user',
      summary: 'Cancels a running run (workspace operator or higher); 409 when it has already ended',
      tags: ['workflows'],
      params: runParams,
      handler: async (r) => {
        const p = personOf(r);
        const a = await access(p, r.params.id);
        await runOf(a, r.params.runId);
        await mayRun(a);
        return { body: await workflows.cancelRun(r.params.runId, p) };
      },
    }),
  ];
}
