/**
 * Cron schedules of workflows (interface §4.10 rule 4). Each schedule is a node-cron task that
 * starts a run of its workflow with its params at the times of its expression in its time zone
 * (5 fields, or 6 with seconds first). A scheduled run acts as the person who created the
 * schedule and records the schedule as its starter; when that person no longer has an account,
 * or no longer has the operator role (or higher) in the workflow's workspace and is not a global
 * admin, the firing is skipped and logged.
 *
 * Schedules are stored and re-armed at every start. Firings that fell while the server was down
 * are not made up: the next firing is the next time the expression names after the start.
 *
 * Creating and deleting need the workspace admin role (or global admin) in the workflow's
 * workspace, as editing the workflow does; a schedule is visible to whoever sees its workflow.
 */
import cron, { type ScheduledTask } from 'node-cron';
import { z } from 'zod';
import { newId } from '../domain/ids.js';
import { jsonObject, timestamp } from '../domain/views.js';
import type { ServiceCore } from './core.js';
import type { Logger } from '../log.js';
import type { Principal, UserPrincipal } from '../domain/principal.js';
import { notFound } from '../domain/errors.js';
import type { Collections, UserDoc, WorkflowDoc, WorkflowScheduleDoc } from '../store/collections.js';
import { atLeast } from '../domain/permissions.js';
import { memberRole, resolveWorkspace, visibleWorkspaceIds } from './workspaces.js';
import type { WorkflowService } from './workflows.js';
import type { WorkflowRuns } from './workflow-runs.js';

/** A cron schedule of a workflow. */
export const ScheduleView = z
  .strictObject({
    id: z.string(),
    workflowId: z.string(),
    workspaceId: z.string(),
    cron: z.string(),
    timezone: z.string().meta({ description: 'IANA time zone name' }),
    params: jsonObject,
    createdBy: z.string(),
    createdAt: timestamp,
    nextRunAt: timestamp.nullable().meta({ description: 'The next firing, as the live task computes it; null when none is armed' }),
    lastRunAt: timestamp.nullable(),
    lastRunId: z.string().nullable(),
  })
  .meta({ id: 'Schedule' });
export type ScheduleView = z.infer<typeof ScheduleView>;

/** Why a cron expression is refused; null when node-cron accepts it. */
export function cronProblem(expression: string): string | null {
  const v = cron.validateDetailed(expression);
  if (v.valid) return null;
  const e = v.errors[0];
  return e ? e.message : 'not a cron expression';
}

/** Whether `zone` is an IANA time zone name this runtime knows (offsets such as +01:00 are refused). */
export function isTimeZone(zone: string): boolean {
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(zone)) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

export class ScheduleService {
  private readonly c: Collections;
  private readonly log: Logger;
  private readonly tasks = new Map<string, ScheduledTask>();
  private readonly firing = new Set<Promise<unknown>>();
  private stopped = false;

  private readonly workflows: WorkflowService;
  private readonly runs: WorkflowRuns;

  /** A deleted workflow takes its schedules along. */
  constructor(
    private readonly ctx: ServiceCore,
    deps: { workflows: WorkflowService; runs: WorkflowRuns },
  ) {
    this.c = ctx.c;
    this.log = ctx.log;
    this.workflows = deps.workflows;
    this.runs = deps.runs;
    this.workflows.onWorkflowDeleted((wf) => this.removeAllOf(wf));
  }

  // --- the routes' operations --------------------------------------------------------------------

  /** POST /api/schedules: schedules runs of a workflow the caller may edit (the expression and zone are checked by the route's schema). */
  async add(p: UserPrincipal, input: { workflowId: string; cron: string; timezone: string; params: Record<string, unknown> }): Promise<WorkflowScheduleDoc> {
    const wf = await this.c.workflows.findById(input.workflowId);
    const a = wf ? await this.workflows.accessTo(p, wf.workspaceId) : null;
    if (!wf || !a?.visible) throw notFound(`no workflow ${input.workflowId}`);
    await this.workflows.needEditor(a, wf.workspaceId, 'scheduling workflows');
    return this.create(wf, { cron: input.cron, timezone: input.timezone, params: input.params }, p);
  }

  /** Schedules of the workflows the caller sees, filtered by workflow or workspace (id or slug). */
  async list(p: Principal, q: { workflowId?: string; workspaceId?: string }): Promise<WorkflowScheduleDoc[]> {
    const filter: Record<string, unknown> = {};
    const visible = await visibleWorkspaceIds(this.c, p);
    if (visible !== 'all') filter.workspaceId = { $in: visible };
    if (q.workspaceId) {
      const ws = await resolveWorkspace(this.c, q.workspaceId);
      if (!ws || (visible !== 'all' && !visible.includes(ws._id))) throw notFound(`workspace ${q.workspaceId} not found`);
      filter.workspaceId = ws._id;
    }
    if (q.workflowId) filter.workflowId = q.workflowId;
    return this.c.workflowSchedules.find(filter, { sort: { createdAt: 1, _id: 1 } });
  }

  /** A schedule whose workflow the caller sees. */
  async get(p: Principal, id: string): Promise<WorkflowScheduleDoc> {
    return (await this.visible(p, id)).doc;
  }

  /** Deletes a schedule (workspace admins); runs it already started go on. */
  async delete(p: UserPrincipal, id: string): Promise<void> {
    const { doc, a } = await this.visible(p, id);
    await this.workflows.needEditor(a, doc.workspaceId, 'scheduling workflows');
    await this.remove(doc, p);
  }

  private async visible(p: Principal, id: string) {
    const doc = await this.c.workflowSchedules.findById(id);
    if (!doc) throw notFound(`no schedule ${id}`);
    const a = await this.workflows.accessTo(p, doc.workspaceId);
    if (!a.visible) throw notFound(`no schedule ${id}`);
    return { doc, a };
  }

  /** Arms every stored schedule. */
  async start(): Promise<void> {
    for (const doc of await this.c.workflowSchedules.find({})) this.arm(doc);
    if (this.tasks.size > 0) this.log.info({ schedules: this.tasks.size }, 'workflow schedules armed');
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const task of this.tasks.values()) await task.destroy();
    this.tasks.clear();
    await Promise.allSettled([...this.firing]);
  }

  view(doc: WorkflowScheduleDoc): ScheduleView {
    const next = this.tasks.get(doc._id)?.getNextRun();
    return {
      id: doc._id,
      workflowId: doc.workflowId,
      workspaceId: doc.workspaceId,
      cron: doc.cron,
      timezone: doc.timezone,
      params: JSON.parse(doc.params) as Record<string, unknown>,
      createdBy: doc.createdBy,
      createdAt: doc.createdAt,
      nextRunAt: next ? next.toISOString() : null,
      lastRunAt: doc.lastRunAt,
      lastRunId: doc.lastRunId,
    };
  }

  /** Stores and arms a schedule; the caller has checked the expression, the zone and the rights (see `add`). */
  async create(wf: WorkflowDoc, input: { cron: string; timezone: string; params: Record<string, unknown> }, by: UserPrincipal): Promise<WorkflowScheduleDoc> {
    const doc: WorkflowScheduleDoc = {
      _id: newId(),
      workflowId: wf._id,
      workspaceId: wf.workspaceId,
      cron: input.cron,
      timezone: input.timezone,
      params: JSON.stringify(input.params),
      createdBy: by.did,
      createdByUserId: by.userId,
      createdAt: new Date().toISOString(),
      lastRunAt: null,
      lastRunId: null,
    };
    await this.c.workflowSchedules.insertOne(doc);
    this.arm(doc);
    await this.ctx.audit.record(by, {
      action: 'schedule.create',
      targetType: 'schedule',
      target: doc._id,
      details: { workflowId: wf._id, cron: doc.cron, timezone: doc.timezone },
    });
    return doc;
  }

  private async remove(doc: WorkflowScheduleDoc, by: UserPrincipal | 'system'): Promise<void> {
    await this.disarm(doc._id);
    await this.c.workflowSchedules.deleteOne({ _id: doc._id });
    await this.ctx.audit.record(by, { action: 'schedule.delete', targetType: 'schedule', target: doc._id, details: { workflowId: doc.workflowId } });
  }

  private async removeAllOf(wf: WorkflowDoc): Promise<number> {
    const docs = await this.c.workflowSchedules.find({ workflowId: wf._id });
    for (const d of docs) await this.disarm(d._id);
    await this.c.workflowSchedules.deleteMany({ workflowId: wf._id });
    return docs.length;
  }

  /** For when a person is deleted: a schedule acts as its creator, so it goes with them. */
  async userDeleted(user: UserDoc): Promise<void> {
    for (const doc of await this.c.workflowSchedules.find({ createdByUserId: user._id })) await this.remove(doc, 'system');
  }

  private arm(doc: WorkflowScheduleDoc): void {
    if (this.stopped || this.tasks.has(doc._id)) return;
    const log = this.log;
    const task = cron.schedule(
      doc.cron,
      () => {
        const p: Promise<void> = this.fire(doc._id).then(
          () => {
            this.firing.delete(p);
          },
          (err: unknown) => {
            this.firing.delete(p);
            log.error({ err, scheduleId: doc._id }, 'a scheduled workflow run failed unexpectedly');
          },
        );
        this.firing.add(p);
      },
      {
        timezone: doc.timezone,
        name: `workflow-schedule-${doc._id}`,
        logger: {
          info: (m) => log.debug({ scheduleId: doc._id }, m),
          warn: (m) => log.warn({ scheduleId: doc._id }, m),
          error: (m, err) => log.error({ scheduleId: doc._id, err: err ?? m }, 'schedule task error'),
          debug: (m) => log.debug({ scheduleId: doc._id }, String(m)),
        },
      },
    );
    this.tasks.set(doc._id, task);
  }

  private async disarm(id: string): Promise<void> {
    const task = this.tasks.get(id);
    this.tasks.delete(id);
    await task?.destroy();
  }

  /** One firing: a run of the workflow with the schedule's params, as the schedule's creator. */
  private async fire(id: string): Promise<void> {
    if (this.stopped) return;
    try {
      const doc = await this.c.workflowSchedules.findById(id);
      if (!doc) return;
      const wf = await this.c.workflows.findById(doc.workflowId);
      if (!wf) return;
      const user = await this.c.users.findById(doc.createdByUserId);
      const allowed =
        !!user?.did && (user.isAdmin || atLeast(await memberRole(this.c, user._id, wf.workspaceId), 'operator'));
      if (!user?.did || !allowed) {
        this.log.warn({ scheduleId: id, workflowId: wf._id, actingAs: doc.createdBy }, 'schedule skipped: its creator may no longer run this workflow');
        return;
      }
      const { runId } = await this.runs.startRun(wf, JSON.parse(doc.params) as Record<string, unknown>, {
        type: 'schedule',
        scheduleId: doc._id,
        userId: user._id,
        did: user.did,
      });
      await this.c.workflowSchedules.updateOne({ _id: id }, { $set: { lastRunAt: new Date().toISOString(), lastRunId: runId } });
      await this.ctx.audit.record('system', {
        action: 'workflow.run',
        targetType: 'workflow',
        target: wf._id,
        details: { runId, scheduleId: id, actingAs: user.did },
      });
    } catch (err) {
      if (!this.stopped) this.log.error({ err, scheduleId: id }, 'a scheduled workflow run could not start');
    }
  }
}
