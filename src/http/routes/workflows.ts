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
 *   GET    /api/workflows/:id/runs/:runId/timeline     session  200 {runId, status, startedAt, finishedAt, steps}
 *   GET    /api/runs                                   session  200 {runs, total, page, pageSize, totalPages}
 *   POST   /api/runs/cancel                            user     200 {results: [{runId, outcome}]}
 *
 * Who may see, change and run a workflow is the workflow service's (src/services/workflows.ts).
 */
import { z } from 'zod';
import { instant, q, route, type RouteDef } from '../router.js';
import { personOf } from '../auth.js';
import { WorkflowDetailView, WorkflowRemoved, WorkflowSummaryView, toWorkflowDetail, toWorkflowSummary, type WorkflowService } from '../../services/workflows.js';
import { bulkCancelSchema, RunPage, runPageSchema, RunStarted, RunView, timelineSchema } from '../../services/workflow-runs.js';

const changedAnswer = z.strictObject({ success: z.literal(true), workflow: WorkflowDetailView });

const name = z.string().trim().min(1, { message: 'must not be blank' }).max(200);
const description = z.string().max(2000);
const definitionBody = z.record(z.string(), z.unknown(), { message: 'expected a WorkflowDefinition object' });
const params = z.record(z.string(), z.unknown(), { message: 'expected a JSON object' });
const idParams = z.object({ id: z.string().min(1).max(200) });
const runParams = idParams.extend({ runId: z.string().min(1).max(200) });

export function workflowRoutes({ workflows }: { workflows: WorkflowService }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/workflows',
      auth: 'session',
      summary: "Workflows of the caller's workspaces (all for global admins), filtered by workspaceId (id or slug) and createdBy (DID)",
      tags: ['workflows'],
      query: z.object({ workspaceId: z.string().min(1).max(200).optional(), createdBy: z.string().min(1).max(512).optional() }),
      responses: { 200: z.strictObject({ success: z.literal(true), workflows: z.array(WorkflowSummaryView) }) },
      handler: async (r) => ({ body: { success: true, workflows: (await workflows.list(r.principal!, r.query)).map(toWorkflowSummary) } }),
    }),

    route({
      method: 'POST',
      path: '/api/workflows',
      auth: 'user',
      summary: 'Creates a workflow (workspace admin or global admin); 400 names the step of a refused definition',
      tags: ['workflows'],
      responses: { 201: z.strictObject({ success: z.literal(true), id: z.string(), name: z.string(), workspaceId: z.string() }) },
      body: z.strictObject({
        name,
        description: description.optional(),
        workspaceId: z.string({ message: 'required: the workspace id or slug' }).trim().min(1).max(200),
        definition: definitionBody,
      }),
      handler: async (r) => {
        const wf = await workflows.createIn(personOf(r), r.body);
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
      responses: { 200: z.strictObject({ workflow: WorkflowDetailView }) },
      handler: async (r) => ({ body: { workflow: toWorkflowDetail(await workflows.get(r.principal!, r.params.id)) } }),
    }),

    route({
      method: 'PUT',
      path: '/api/workflows/:id',
      auth: 'user',
      summary: 'Replaces a workflow\'s name, description and definition (runs already started keep the definition they started with)',
      tags: ['workflows'],
      params: idParams,
      body: z.strictObject({ name, description: description.optional(), definition: definitionBody }),
      responses: { 200: changedAnswer },
      handler: async (r) => ({ body: { success: true, workflow: toWorkflowDetail(await workflows.replace(personOf(r), r.params.id, r.body)) } }),
    }),

    route({
      method: 'PATCH',
      path: '/api/workflows/:id',
      auth: 'user',
      summary: 'Changes some of a workflow\'s name, description and definition',
      tags: ['workflows'],
      params: idParams,
      body: z.strictObject({ name: name.optional(), description: description.optional(), definition: definitionBody.optional() }),
      responses: { 200: changedAnswer },
      handler: async (r) => ({ body: { success: true, workflow: toWorkflowDetail(await workflows.change(personOf(r), r.params.id, r.body)) } }),
    }),

    route({
      method: 'DELETE',
      path: '/api/workflows/:id',
      auth: 'user',
      summary: 'Deletes a workflow with its schedules and run history; running runs are cancelled first',
      tags: ['workflows'],
      params: idParams,
      responses: { 200: WorkflowRemoved.extend({ success: z.literal(true) }) },
      handler: async (r) => ({ body: { success: true, ...(await workflows.remove(personOf(r), r.params.id)) } }),
    }),

    route({
      method: 'POST',
      path: '/api/workflows/:id/run',
      auth: 'user',
      summary: 'Starts a run (workspace operator or higher); answers 202 before any step runs',
      tags: ['workflows'],
      params: idParams,
      responses: { 202: RunStarted },
      body: z.strictObject({ params: params.default({}) }),
      handler: async (r) => ({ status: 202, body: await workflows.run(personOf(r), r.params.id, r.body.params) }),
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
      responses: { 200: RunPage },
      handler: async (r) => ({ body: await workflows.runsOf(r.principal!, r.params.id, r.query) }),
    }),

    route({
      method: 'GET',
      path: '/api/workflows/:id/runs/:runId',
      auth: 'session',
      summary: 'A run: its status, and each step\'s status, durationMs and output',
      tags: ['workflows'],
      params: runParams,
      responses: { 200: RunView },
      handler: async (r) => ({ body: await workflows.runOf(r.principal!, r.params.id, r.params.runId) }),
    }),

    route({
      method: 'POST',
      path: '/api/workflows/:id/runs/:runId/cancel',
      auth: 'user',
      summary: 'Cancels a running run (workspace operator or higher); 409 when it has already ended',
      tags: ['workflows'],
      params: runParams,
      responses: { 200: RunView },
      handler: async (r) => ({ body: await workflows.cancel(personOf(r), r.params.id, r.params.runId) }),
    }),

    route({
      method: 'GET',
      path: '/api/workflows/:id/runs/:runId/timeline',
      auth: 'session',
      summary: "A run's timeline: each step's attempts with their start, end, outcome, error and retry wait",
      tags: ['workflows'],
      params: runParams,
      responses: { 200: timelineSchema },
      handler: async (r) => ({ body: await workflows.timelineOf(r.principal!, r.params.id, r.params.runId) }),
    }),

    route({
      method: 'GET',
      path: '/api/runs',
      auth: 'session',
      summary: 'Runs of every workflow the caller may read, newest first, filtered by status, workspace (id or slug), workflow, who started them (DID) and start time',
      tags: ['workflows'],
      query: z.object({
        status: z.enum(['running', 'completed', 'failed', 'cancelled']).optional(),
        workspace: z.string().min(1).max(200).optional(),
        workflowId: z.string().min(1).max(200).optional(),
        startedBy: z.string().min(1).max(512).optional(),
        from: instant().optional(),
        to: instant().optional(),
        page: q.int(1).default(1),
        pageSize: q.int(1, 100).default(20),
      }),
      responses: { 200: runPageSchema },
      handler: async (r) => ({ body: await workflows.runsAcross(r.principal!, r.query) }),
    }),

    route({
      method: 'POST',
      path: '/api/runs/cancel',
      auth: 'user',
      summary: 'Cancels several runs (operator or higher in each run\'s workspace) and answers per run what happened',
      tags: ['workflows'],
      body: z.strictObject({ runIds: z.array(z.string().min(1).max(200)).min(1).max(100) }),
      responses: { 200: bulkCancelSchema },
      handler: async (r) => ({ body: await workflows.cancelMany(personOf(r), r.body.runIds) }),
    }),
  ];
}
