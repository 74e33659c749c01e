/**
 * Workflow definitions (interface §2.12, §4.10; docs/workflows.md): stored with their
 * WorkflowDefinition as JSON text, after `validateDefinition` (src/domain/workflow/definition.ts)
 * has refused bad ones; and who may see, change and run them. The runs are the executor's
 * (src/services/workflow-runs.ts).
 *
 * A workflow is visible to global admins and to the members (people and agents) of its workspace;
 * to anyone else it does not exist (404). Creating, changing and deleting need the workspace admin
 * role or global admin (403 otherwise); running and cancelling need operator or higher.
 */
import { z } from 'zod';
import { newId } from '../domain/ids.js';
import { timestamp } from '../domain/views.js';
import type { ServiceCore } from './core.js';
import type { Principal, UserPrincipal } from '../domain/principal.js';
import type { WorkspaceRole } from '../domain/roles.js';
import type { Collections, WorkflowDoc, WorkflowRunDoc, WorkspaceDoc } from '../store/collections.js';
import { DuplicateKeyError } from '../store/types.js';
import { DefinitionError, validateDefinition, WorkflowDefinitionView, type WorkflowDefinition } from '../domain/workflow/definition.js';
import { atLeast, can } from '../domain/permissions.js';
import { AppError, badRequest, conflict, forbidden, notFound } from '../domain/errors.js';
import { memberRole, resolveWorkspace, visibleWorkspaceIds } from './workspaces.js';
import type { BulkCancelResult, RunListPage, RunPage, RunStarted, RunView, TimelineView, WorkflowRuns } from './workflow-runs.js';

const workflowFields = {
  id: z.string(),
  name: z.string(),
  description: z.string(),
  workspaceId: z.string(),
  createdBy: z.string().meta({ description: "The creator's DID" }),
  createdAt: timestamp,
  updatedAt: timestamp,
};

/** A workflow of the list (interface §2.12). */
export const WorkflowSummaryView = z.strictObject({ ...workflowFields, stepCount: z.number().int().min(1) }).meta({ id: 'WorkflowSummary' });
export type WorkflowSummaryView = z.infer<typeof WorkflowSummaryView>;

/** A workflow with its definition (interface §2.12: id, name, definition; and the summary's other fields). */
export const WorkflowDetailView = z.strictObject({ ...workflowFields, definition: WorkflowDefinitionView }).meta({ id: 'Workflow' });
export type WorkflowDetailView = z.infer<typeof WorkflowDetailView>;

/** What deleting a workflow removed with it. */
export const WorkflowRemoved = z.strictObject({ runs: z.number().int().min(0), schedules: z.number().int().min(0) });
export type WorkflowRemoved = z.infer<typeof WorkflowRemoved>;

export const toWorkflowSummary = (w: WorkflowDoc): WorkflowSummaryView => ({
  id: w._id,
  name: w.name,
  description: w.description,
  workspaceId: w.workspaceId,
  createdBy: w.createdBy,
  createdAt: w.createdAt,
  updatedAt: w.updatedAt,
  stepCount: w.stepCount,
});

export const toWorkflowDetail = (w: WorkflowDoc): WorkflowDetailView => ({
  id: w._id,
  name: w.name,
  definition: JSON.parse(w.definition) as WorkflowDefinition,
  description: w.description,
  workspaceId: w.workspaceId,
  createdBy: w.createdBy,
  createdAt: w.createdAt,
  updatedAt: w.updatedAt,
});

export const nameKeyOf = (name: string) => name.trim().toLowerCase();

/** Removes what a deleted workflow leaves elsewhere (its schedules); answers how many it removed. */
export type WorkflowDeletedHook = (wf: WorkflowDoc) => Promise<number>;

/** Whether a principal sees the workflows of a workspace, and with which role. */
export interface WorkflowAccess {
  visible: boolean;
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

interface Access extends WorkflowAccess {
  wf: WorkflowDoc;
}

export class WorkflowService {
  private readonly c: Collections;
  private readonly deletedHooks: WorkflowDeletedHook[] = [];

  constructor(
    private readonly ctx: ServiceCore,
    private readonly runs: WorkflowRuns,
  ) {
    this.c = ctx.c;
  }

  /** Runs `fn` as a workflow is deleted, before its runs go (the schedule service removes its schedules). */
  onWorkflowDeleted(fn: WorkflowDeletedHook): void {
    this.deletedHooks.push(fn);
  }

  /** Whether a principal may see the workflows of a workspace, and with which role. */
  async accessTo(p: Principal, workspaceId: string): Promise<WorkflowAccess> {
    if (p.kind === 'agent') {
      const visible = (await this.c.workspaceAgents.count({ workspaceId, agentDid: p.did })) > 0;
      return { visible, isGlobalAdmin: false, role: visible ? 'member' : null };
    }
    const role = await memberRole(this.c, p.userId, workspaceId);
    return { visible: p.isAdmin || role !== null, isGlobalAdmin: p.isAdmin, role };
  }

  /** 403 unless `a` may create, change or delete the workflows (and schedules) of the workspace. */
  async needEditor(a: WorkflowAccess, workspaceId: string, what: string): Promise<void> {
    if (can({ isGlobalAdmin: a.isGlobalAdmin, workspaceRole: a.role }, 'editWorkflows')) return;
    const ws = await this.c.workspaces.findById(workspaceId);
    throw forbidden(`${what} needs the admin role in workspace ${ws?.slug ?? workspaceId} (or global admin)`);
  }

  // ---------------------------------------------------------------------------------------------
  // Definitions

  /** Workflows of the caller's workspaces (all for global admins), filtered by workspace (id or slug) and creator. */
  async list(p: Principal, q: { workspaceId?: string; createdBy?: string }): Promise<WorkflowDoc[]> {
    const filter: Record<string, unknown> = {};
    if (q.workspaceId) filter.workspaceId = (await this.visibleWorkspace(p, q.workspaceId))._id;
    else {
      const visible = await visibleWorkspaceIds(this.c, p);
      if (visible !== 'all') filter.workspaceId = { $in: visible };
    }
    if (q.createdBy) filter.createdBy = q.createdBy;
    return this.c.workflows.find(filter, { sort: { createdAt: 1, _id: 1 } });
  }

  async get(p: Principal, id: string): Promise<WorkflowDoc> {
    return (await this.access(p, id)).wf;
  }

  /** Creates a workflow (workspace admins); 400 names the step of a refused definition. */
  async createIn(p: UserPrincipal, input: { name: string; description?: string; workspaceId: string; definition: unknown }): Promise<WorkflowDoc> {
    const ws = await this.visibleWorkspace(p, input.workspaceId);
    await this.needEditor(await this.accessTo(p, ws._id), ws._id, 'creating or editing workflows');
    const definition = checkDefinition(input.definition);
    return this.create({ name: input.name, description: input.description ?? '', workspace: ws, definition }, p);
  }

  /** PUT: replaces a workflow's name, description and definition (runs already started keep theirs). */
  async replace(p: UserPrincipal, id: string, input: { name: string; description?: string; definition: unknown }): Promise<WorkflowDoc> {
    const a = await this.access(p, id);
    await this.needEditor(a, a.wf.workspaceId, 'creating or editing workflows');
    const definition = checkDefinition(input.definition);
    return this.update(a.wf, { name: input.name, description: input.description ?? '', definition }, p);
  }

  /** PATCH: changes some of a workflow's name, description and definition. */
  async change(p: UserPrincipal, id: string, input: { name?: string; description?: string; definition?: unknown }): Promise<WorkflowDoc> {
    const a = await this.access(p, id);
    await this.needEditor(a, a.wf.workspaceId, 'creating or editing workflows');
    if (input.name === undefined && input.description === undefined && input.definition === undefined) {
      throw badRequest('nothing to change: give name, description or definition', 'validation_failed');
    }
    const definition = input.definition === undefined ? undefined : checkDefinition(input.definition);
    return this.update(a.wf, { name: input.name, description: input.description, definition }, p);
  }

  /** Deletes a workflow (workspace admins) with its schedules and run history. */
  async remove(p: UserPrincipal, id: string): Promise<WorkflowRemoved> {
    const a = await this.access(p, id);
    await this.needEditor(a, a.wf.workspaceId, 'creating or editing workflows');
    return this.delete(a.wf, p);
  }

  /** For when a workspace is deleted: its workflows go, with their runs and schedules. */
  async workspaceDeleted(ws: WorkspaceDoc): Promise<void> {
    for (const wf of await this.c.workflows.find({ workspaceId: ws._id })) await this.delete(wf, 'system');
  }

  private async create(input: { name: string; description: string; workspace: WorkspaceDoc; definition: WorkflowDefinition }, by: UserPrincipal): Promise<WorkflowDoc> {
    const now = new Date().toISOString();
    const doc: WorkflowDoc = {
      _id: newId(),
      name: input.name,
      nameKey: nameKeyOf(input.name),
      description: input.description,
      workspaceId: input.workspace._id,
      definition: JSON.stringify(input.definition),
      stepCount: input.definition.steps.length,
      createdBy: by.did,
      createdAt: now,
      updatedAt: now,
    };
    try {
      await this.c.workflows.insertOne(doc);
    } catch (err) {
      throw this.nameTaken(err, input.name, input.workspace);
    }
    await this.ctx.audit.record(by, {
      action: 'workflow.create',
      targetType: 'workflow',
      target: doc._id,
      details: { name: doc.name, workspaceId: doc.workspaceId, stepCount: doc.stepCount },
    });
    return doc;
  }

  private async update(wf: WorkflowDoc, change: { name?: string; description?: string; definition?: WorkflowDefinition }, by: UserPrincipal): Promise<WorkflowDoc> {
    const set: Partial<WorkflowDoc> = { updatedAt: new Date().toISOString() };
    if (change.name !== undefined) {
      set.name = change.name;
      set.nameKey = nameKeyOf(change.name);
    }
    if (change.description !== undefined) set.description = change.description;
    if (change.definition !== undefined) {
      set.definition = JSON.stringify(change.definition);
      set.stepCount = change.definition.steps.length;
    }
    try {
      await this.c.workflows.updateOne({ _id: wf._id }, { $set: set });
    } catch (err) {
      const ws = await this.c.workspaces.findById(wf.workspaceId);
      throw this.nameTaken(err, change.name ?? wf.name, ws);
    }
    await this.ctx.audit.record(by, {
      action: 'workflow.update',
      targetType: 'workflow',
      target: wf._id,
      details: { fields: Object.keys(change).filter((k) => (change as Record<string, unknown>)[k] !== undefined) },
    });
    return { ...wf, ...set };
  }

  private nameTaken(err: unknown, name: string, ws: WorkspaceDoc | null): unknown {
    if (err instanceof DuplicateKeyError) return conflict(`a workflow named '${name}' already exists in workspace ${ws?.slug ?? ''}`.trim(), 'name_taken');
    return err;
  }

  /** Deletes a workflow with its schedules and runs (running ones are cancelled first). */
  private async delete(wf: WorkflowDoc, by: UserPrincipal | 'system'): Promise<{ runs: number; schedules: number }> {
    let schedules = 0;
    for (const fn of this.deletedHooks) schedules += await fn(wf);
    const runIds = await this.runs.cancelAllOf(wf, by === 'system' ? 'system' : by.did);
    await this.c.workflows.deleteOne({ _id: wf._id });
    await this.runs.forgetRuns(wf, runIds);
    await this.ctx.audit.record(by, {
      action: 'workflow.delete',
      targetType: 'workflow',
      target: wf._id,
      details: { name: wf.name, workspaceId: wf.workspaceId, runs: runIds.length, schedules },
    });
    return { runs: runIds.length, schedules };
  }

  // ---------------------------------------------------------------------------------------------
  // Runs, as the routes ask for them

  /** Starts a run (workspace operator or higher); it answers before any step runs. */
  async run(p: UserPrincipal, id: string, params: Record<string, unknown>): Promise<RunStarted> {
    const a = await this.access(p, id);
    await this.needRunner(a);
    const started = await this.runs.startRun(a.wf, params, { type: 'person', userId: p.userId, did: p.did });
    await this.ctx.audit.record(p, { action: 'workflow.run', targetType: 'workflow', target: a.wf._id, details: { runId: started.runId } });
    return started;
  }

  /** Runs of a workflow, newest first, one page at a time. */
  async runsOf(p: Principal, id: string, q: { status?: WorkflowRunDoc['status']; page: number; pageSize: number }): Promise<RunPage> {
    const a = await this.access(p, id);
    return this.runs.listRuns(a.wf._id, q);
  }

  /** One run of a workflow. */
  async runOf(p: Principal, id: string, runId: string): Promise<RunView> {
    return this.runIn(await this.access(p, id), runId);
  }

  /** Cancels a running run (workspace operator or higher); 409 when it has already ended. */
  async cancel(p: UserPrincipal, id: string, runId: string): Promise<RunView> {
    const a = await this.access(p, id);
    await this.runIn(a, runId);
    await this.needRunner(a);
    return this.runs.cancelRun(runId, p);
  }

  /** A run's timeline: each step's attempts with their start, end, outcome, error and retry wait. */
  async timelineOf(p: Principal, id: string, runId: string): Promise<TimelineView> {
    const a = await this.access(p, id);
    await this.runIn(a, runId);
    const timeline = await this.runs.timeline(runId);
    if (!timeline) throw notFound(`no run ${runId} of workflow ${a.wf._id}`);
    return timeline;
  }

  /**
   * Runs of every workflow the caller may read, newest first. A workspace or workflow filter the
   * caller may not see answers 404, as for a record that does not exist.
   */
  async runsAcross(
    p: Principal,
    q: { status?: WorkflowRunDoc['status']; workspace?: string; workflowId?: string; startedBy?: string; from?: string; to?: string; page: number; pageSize: number },
  ): Promise<RunListPage> {
    let workspaceIds = await visibleWorkspaceIds(this.c, p);
    if (q.workspace) workspaceIds = [(await this.visibleWorkspace(p, q.workspace))._id];
    if (q.workflowId) {
      const wf = (await this.access(p, q.workflowId)).wf;
      if (workspaceIds !== 'all' && !workspaceIds.includes(wf.workspaceId)) workspaceIds = [];
    }
    return this.runs.listAcross(workspaceIds, q);
  }

  /**
   * Cancels several runs, each with the rules of POST …/runs/{runId}/cancel, and says per run what
   * happened: a run the caller may not see is `not_found`, as is one that does not exist.
   */
  async cancelMany(p: UserPrincipal, runIds: string[]): Promise<BulkCancelResult> {
    const results: BulkCancelResult['results'] = [];
    const roles = new Map<string, WorkflowAccess>();
    for (const runId of new Set(runIds)) {
      const doc = await this.c.workflowRuns.findById(runId);
      let a = doc ? roles.get(doc.workspaceId) : undefined;
      if (doc && !a) roles.set(doc.workspaceId, (a = await this.accessTo(p, doc.workspaceId)));
      if (!doc || !a!.visible) {
        results.push({ runId, outcome: 'not_found' });
      } else if (!a!.isGlobalAdmin && !atLeast(a!.role, 'operator')) {
        results.push({ runId, outcome: 'forbidden' });
      } else if (doc.status !== 'running') {
        results.push({ runId, outcome: 'already_finished' });
      } else {
        try {
          await this.runs.cancelRun(runId, p);
          results.push({ runId, outcome: 'cancelled' });
        } catch (err) {
          if (!(err instanceof AppError && err.status === 409)) throw err;
          results.push({ runId, outcome: 'already_finished' });
        }
      }
    }
    return { results };
  }

  // ---------------------------------------------------------------------------------------------
  // Access

  private async access(p: Principal, id: string): Promise<Access> {
    const wf = await this.c.workflows.findById(id);
    if (!wf) throw notFound(`no workflow ${id}`);
    const a = await this.accessTo(p, wf.workspaceId);
    if (!a.visible) throw notFound(`no workflow ${id}`);
    return { ...a, wf };
  }

  private async needRunner(a: Access): Promise<void> {
    if (a.isGlobalAdmin || atLeast(a.role, 'operator')) return;
    const ws = await this.c.workspaces.findById(a.wf.workspaceId);
    throw forbidden(`running workflows needs the operator role (or higher) in workspace ${ws?.slug ?? a.wf.workspaceId} (or global admin)`);
  }

  private async visibleWorkspace(p: Principal, ref: string): Promise<WorkspaceDoc> {
    const ws = await resolveWorkspace(this.c, ref);
    if (!ws || !(await this.accessTo(p, ws._id)).visible) throw notFound(`workspace ${ref} not found`);
    return ws;
  }

  private async runIn(a: Access, runId: string): Promise<RunView> {
    const run = await this.runs.getRun(runId);
    if (!run || run.workflowId !== a.wf._id) throw notFound(`no run ${runId} of workflow ${a.wf._id}`);
    return run;
  }
}
