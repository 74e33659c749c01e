/**
 * Workflow runs and the executor that carries out what the run actors decide (interface §2.12,
 * §4.10; docs/workflows.md).
 *
 * - A run is a `workflow-run` actor (src/actors/workflow-run.ts) plus a listing record in
 *   `workflow_runs` written when the run starts and when it ends. The actor's snapshot is the
 *   run: GET reads it, live or stored.
 * - The executor listens to each run actor's commands: `step.execute` performs one attempt
 *   (an intent to one agent, a broadcast to the workspace's online agents holding the capability,
 *   `channel.post` or `delay`) and answers STEP_DONE / STEP_FAILED; `step.wait` arms the retry
 *   timer and answers RETRY_DUE; `run.ended` drops what the run still had in flight.
 * - Agent steps go through the intent service's `send` — the checks and gates of
 *   POST /api/agents/{did}/intents — as the person who started the run (or created its schedule),
 *   rebuilt from the users collection at each attempt.
 * - Time (timestamps, retry timers, `delay`) comes from `clock`, which tests replace.
 * - At start, running runs are restored: attempts in flight when the server stopped fail with
 *   the error `interrupted` (their onError decides), retry timers are re-armed.
 * - Each change of a run's or a step's status is published to the live feed's `runs` topic, for
 *   the people who may read the run (its workspace's members, global admins), while anyone
 *   follows it.
 */
import { z } from 'zod';
import { newId } from '../domain/ids.js';
import { jsonObject, pageFields, timestamp } from '../domain/views.js';
import type { Actor } from 'xstate';
import type { ServiceCore } from './core.js';
import { inspectActor, removeActor } from './actor-commands.js';
import { StaleEpochError, claimDocument, fencedUpdateOne } from '../cluster/fence.js';
import type { Logger } from '../log.js';
import type { AgentLink, FeedPublisher } from './ports.js';
import type { RunFrame } from '../domain/feed-frames.js';
import type { IntentService } from './intents.js';
import { userPrincipal } from './sessions.js';
import type { UserPrincipal } from '../domain/principal.js';
import type { Collections, WorkflowDoc, WorkflowRunDoc, WorkflowRunStarter } from '../store/collections.js';
import { CAPABILITIES, isCapability, type Capability } from '../domain/capabilities.js';
import type { WorkflowDefinition } from '../domain/workflow/definition.js';
import { RUN_STATUSES, STEP_STATUSES, inFlightSteps, initialRunState, type RunCommand, type RunEvent, type StepState } from '../domain/workflow/engine.js';
import { boundBroadcast, boundOutput, jsonBytes, type BroadcastResult } from '../domain/workflow/output-limit.js';
import { WORKFLOW_RUN_KIND, workflowRunMachine, type WorkflowRunContext, type WorkflowRunInput } from '../actors/workflow-run.js';
import { AppError, conflict } from '../domain/errors.js';
import { MAX_CONTENT } from '../domain/messages.js';
import { toMessageView, type ChannelService } from './channels.js';

/** A run's listing record changed status (`workspaceId` null when the executor does not hold it at hand). */
export interface RunStatusChange {
  runId: string;
  workspaceId: string | null;
  status: WorkflowRunDoc['status'];
  /** When it ended; null while running. */
  at: string | null;
}

/** Time for the executor; tests replace it to see and fire back-off timers. */
export interface WorkflowClock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Calls `fn` after `ms`; returns a function that cancels it. */
  after(ms: number, fn: () => void): () => void;
  /** A number in [0, 1) for back-off jitter. */
  random(): number;
}

/** setTimeout's longest delay; longer waits are chained. */
const MAX_TIMER_MS = 2_147_483_647;

export const systemClock: WorkflowClock = {
  now: () => Date.now(),
  after(ms, fn) {
    let timer: NodeJS.Timeout;
    const arm = (left: number) => {
      timer = setTimeout(() => (left > MAX_TIMER_MS ? arm(left - MAX_TIMER_MS) : fn()), Math.min(left, MAX_TIMER_MS));
      timer.unref();
    };
    arm(Math.max(0, ms));
    return () => clearTimeout(timer);
  },
  random: () => Math.random(),
};

/** Posts a message to a channel as a person, with the channel's own rules (membership, archived). */
export interface WorkflowChannelPoster {
  post(author: UserPrincipal, channelId: string, content: string): Promise<unknown>;
}

/**
 * `channel.post` through the channel service, with the rules of POST /api/channels/{id}/messages:
 * the channel must be readable by the person (404 otherwise), posting needs membership, an archived
 * channel refuses; the step's output is the stored message.
 */
export function channelPosterFrom(channels: ChannelService): WorkflowChannelPoster {
  return {
    async post(author, channelId, content) {
      if (content.length > MAX_CONTENT) throw new StepFailure(`channel.post: params.content must be at most ${MAX_CONTENT} characters`, false);
      return toMessageView(await channels.postAs(author, channelId, { content }));
    },
  };
}

/** The longest `delay` step (about 24.8 days). */
export const MAX_DELAY_MS = MAX_TIMER_MS;

const SERVER_ACTIONS = ['channel.post', 'delay'] as const;

/** A failed attempt; `retryable` false when another attempt cannot help (bad params, unknown action). */
class StepFailure extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}


/** Who started a run: a person, or a schedule (on behalf of the person who made it). */
const RunStarterView = z.strictObject({
  type: z.enum(['person', 'schedule']),
  userId: z.string(),
  did: z.string(),
  scheduleId: z.string().optional(),
});

/** One step of a run (interface §2.12: status, durationMs, output; and how it went). */
const RunStepView = z.strictObject({
  status: z.enum(STEP_STATUSES),
  durationMs: z.number().int().min(0).nullable(),
  output: z.unknown().meta({ description: "The step's output (null until it has one)" }),
  attempts: z.number().int().min(0),
  startedAt: timestamp.nullable(),
  completedAt: timestamp.nullable(),
  error: z.string().nullable(),
  retryAt: timestamp.nullable(),
});

/** A run's listing (GET /api/workflows/{id}/runs). */
export const RunSummaryView = z
  .strictObject({
    runId: z.string(),
    workflowId: z.string(),
    status: z.enum(RUN_STATUSES),
    startedAt: timestamp,
    completedAt: timestamp.nullable(),
    startedBy: RunStarterView,
    error: z.string().nullable(),
  })
  .meta({ id: 'WorkflowRunSummary' });
export type RunSummaryView = z.infer<typeof RunSummaryView>;

/** A run (interface §2.12), its steps keyed by step id. */
export const RunView = RunSummaryView.extend({
  steps: z.record(z.string(), RunStepView),
  params: jsonObject,
}).meta({ id: 'WorkflowRun' });
export type RunView = z.infer<typeof RunView>;

/** GET /api/workflows/{id}/runs: newest first, one page at a time. */
export const RunPage = z.strictObject({ runs: z.array(RunSummaryView), ...pageFields });
export type RunPage = z.infer<typeof RunPage>;

/** POST /api/workflows/{id}/run: 202 before any step runs. */
export const RunStarted = z.strictObject({ runId: z.string(), status: z.literal('running') });
export type RunStarted = z.infer<typeof RunStarted>;


/** A run in a list across workflows (GET /api/runs): the run summary with its workflow's name. */
export const runListItemSchema = RunSummaryView.extend({ workflowName: z.string() }).meta({ id: 'WorkflowRunListItem' });
export type RunListItem = z.infer<typeof runListItemSchema>;

/** GET /api/runs: newest first, one page at a time. */
export const runPageSchema = z.strictObject({ runs: z.array(runListItemSchema), ...pageFields });
export type RunListPage = z.infer<typeof runPageSchema>;

/** What a bulk cancel did to each run asked for. */
export const CANCEL_OUTCOMES = ['cancelled', 'already_finished', 'not_found', 'forbidden'] as const;
export const bulkCancelSchema = z.strictObject({
  results: z.array(z.strictObject({ runId: z.string(), outcome: z.enum(CANCEL_OUTCOMES) })),
});
export type BulkCancelResult = z.infer<typeof bulkCancelSchema>;

/** A run's timeline: each step's attempts with their times, outcome, error and retry wait. */
export const timelineSchema = z.strictObject({
  runId: z.string(),
  status: z.enum(RUN_STATUSES),
  startedAt: timestamp,
  finishedAt: timestamp.nullable(),
  steps: z.array(
    z.strictObject({
      stepId: z.string(),
      status: z.enum(STEP_STATUSES),
      attempts: z.array(
        z.strictObject({
          attempt: z.number().int().min(0),
          startedAt: timestamp,
          finishedAt: timestamp.nullable(),
          outcome: z.enum(['running', 'succeeded', 'failed', 'cancelled', 'skipped']),
          error: z.string().nullable(),
          retryAt: timestamp.nullable(),
        }),
      ),
    }),
  ),
});
export type TimelineView = z.infer<typeof timelineSchema>;
type TimelineAttempt = TimelineView['steps'][number]['attempts'][number];

/**
 * A step's attempts for the timeline. Steps of runs stored before attempts were recorded, and
 * steps that ended without an attempt (skipped, failed on their condition or params), get one
 * entry built from the step's own times; a step that never started has none.
 */
export function stepAttempts(st: StepState): TimelineAttempt[] {
  if (st.history && st.history.length > 0) return st.history.map((h) => ({ ...h }));
  // Never started: pending, or cancelled while pending.
  if (st.status === 'pending' || (st.status === 'cancelled' && st.attempts === 0)) return [];
  const at = st.startedAt ?? st.completedAt;
  if (at === null) return [];
  const outcome: TimelineAttempt['outcome'] =
    st.status === 'completed' ? 'succeeded' : st.status === 'running' ? 'running' : st.status === 'failed' ? 'failed' : st.status === 'skipped' ? 'skipped' : 'cancelled';
  return [{ attempt: st.attempts, startedAt: at, finishedAt: st.completedAt, outcome, error: st.error, retryAt: st.retryAt }];
}

export function toTimeline(run: WorkflowRunContext): TimelineView {
  return {
    runId: run.runId,
    status: run.status,
    startedAt: run.startedAt,
    finishedAt: run.completedAt,
    // In the definition's order.
    steps: run.definition.steps.map((d) => {
      const st = run.steps[d.id]!;
      return { stepId: d.id, status: st.status, attempts: stepAttempts(st) };
    }),
  };
}

export const toRunSummary = (r: WorkflowRunDoc): RunSummaryView => ({
  runId: r._id,
  workflowId: r.workflowId,
  status: r.status,
  startedAt: r.startedAt,
  completedAt: r.completedAt,
  startedBy: r.startedBy,
  error: r.error,
});

function toRunView(run: WorkflowRunContext): RunView {
  const steps: RunView['steps'] = {};
  for (const [id, st] of Object.entries(run.steps)) {
    steps[id] = {
      status: st.status,
      durationMs: st.durationMs,
      output: st.output,
      attempts: st.attempts,
      startedAt: st.startedAt,
      completedAt: st.completedAt,
      error: st.error,
      retryAt: st.retryAt,
    };
  }
  return {
    runId: run.runId,
    workflowId: run.workflowId,
    status: run.status,
    startedAt: run.startedAt,
    completedAt: run.completedAt,
    steps,
    params: run.params,
    startedBy: run.startedBy,
    error: run.error,
  };
}


type RunActor = Actor<typeof workflowRunMachine>;

/** What the executor holds for one run in this process. */
interface Execution {
  /** Attempts in flight by step id. */
  inflight: Map<string, { attempt: number; abort: AbortController }>;
  /** Cancels of armed retry timers by step id. */
  timers: Map<string, () => void>;
  /** Bytes of step outputs the run keeps (counted from its state when first needed). */
  outputBytes?: number;
}

/** A broadcast's answers, bounded agent by agent when the step's output is kept (see output-limit.ts). */
class BroadcastOutput {
  constructor(readonly results: Record<string, BroadcastResult>) {}
}


export class WorkflowRuns {
  /** Time for the executor; tests replace it to see and fire back-off timers. */
  clock: WorkflowClock = systemClock;
  /** How `channel.post` steps post; tests replace it to watch the posts. */
  channelPoster: WorkflowChannelPoster;

  private readonly c: Collections;
  private readonly log: Logger;
  private readonly intents: IntentService;
  private readonly agents: AgentLink;
  private readonly feed: FeedPublisher | undefined;
  private readonly inputs = new Map<string, WorkflowRunInput>();
  private readonly listening = new WeakSet<object>();
  private readonly executions = new Map<string, Execution>();
  private readonly statusHooks: Array<(change: RunStatusChange) => void> = [];
  /** Writes of run ends in progress; awaited at shutdown (attempts in flight are not: they are abandoned). */
  private readonly writes = new Set<Promise<unknown>>();
  private stopped = false;

  /** Defines the workflow-run actor kind. */
  constructor(
    private readonly ctx: ServiceCore,
    deps: { intents: IntentService; agents: AgentLink; channelPoster: WorkflowChannelPoster; feed?: FeedPublisher },
  ) {
    this.feed = deps.feed;
    this.c = ctx.c;
    this.log = ctx.log;
    this.intents = deps.intents;
    this.agents = deps.agents;
    this.channelPoster = deps.channelPoster;
    ctx.actors.define(WORKFLOW_RUN_KIND, {
      machine: workflowRunMachine,
      // A run waiting on an agent has no XState timers or children, so the host would see it as idle.
      idleMs: 0,
      input: (id) => {
        const input = this.inputs.get(id);
        if (!input) throw new Error(`workflow run ${id} has no snapshot and is not being created`);
        return input;
      },
    });
    // Cluster mode: a run lives (and its steps execute) on the node that owns its shard.
    const p = ctx.placement;
    p.handle('run.start', async (data) => {
      const { input } = data as { input: WorkflowRunInput };
      await this.startHere(input);
      return null;
    });
    p.handle('run.cancel', (data) => {
      const { runId, by } = data as { runId: string; by: string };
      return this.cancelHere(runId, by);
    });
    p.handle('run.cancelQuietly', async (data) => {
      const { runId, by } = data as { runId: string; by: string };
      await this.cancelQuietlyHere(runId, by);
      return null;
    });
    if (p.clustered) {
      p.onAcquired((shard) => this.resume(shard));
      p.onReleased((shard) => this.leave(shard));
    }
  }

  private keyOf(runId: string): string {
    return `${WORKFLOW_RUN_KIND}:${runId}`;
  }


  /**
   * Restores running runs. Stop the executor before the agents' sockets close: an intent they
   * abandon must count as `interrupted` at the next start, not as a failure recorded during the
   * shutdown.
   */
  async start(): Promise<void> {
    // In a cluster, each shard's runs resume on the node that takes it (resume(shard)).
    if (!this.ctx.placement.clustered) await this.resume();
  }

  /** Resumes the running runs (of one shard, in a cluster) and fixes the records of runs that ended unrecorded. */
  private async resume(shard?: number): Promise<void> {
    const ids = await this.ctx.actors.restoreAll(WORKFLOW_RUN_KIND, undefined, shard);
    const at = this.nowIso();
    for (const id of ids) {
      // Cluster mode: the run's record is stamped with this owner's fence before it acts, so an
      // earlier owner's late write of the run's end is refused.
      const fence = this.ctx.placement.fenceFor(this.keyOf(id));
      if (fence) await claimDocument(this.c.workflowRuns, id, fence);
      const actor = await this.actorOf(id);
      const snap = actor.getSnapshot();
      if (snap.status !== 'active') continue;
      const backoffMs: Record<string, number> = {};
      const interrupted = inFlightSteps(snap.context);
      for (const stepId of interrupted) backoffMs[stepId] = this.backoffMs(snap.context.steps[stepId]!.attempts);
      this.log.info({ runId: id, workflowId: snap.context.workflowId, interrupted }, 'workflow run resumed after a restart');
      actor.send({ type: 'RESUME', at, backoffMs });
    }
    // Listing records whose run ended while its record was not yet written, or that never got a snapshot.
    const restored = new Set(ids);
    for (const doc of await this.c.workflowRuns.find({ status: 'running' })) {
      if (restored.has(doc._id)) continue;
      if (shard !== undefined && this.ctx.placement.shardOf(this.keyOf(doc._id)) !== shard) continue;
      const inspected = await this.ctx.actors.inspect(WORKFLOW_RUN_KIND, doc._id);
      const run = inspected?.context as WorkflowRunContext | undefined;
      if (run && run.status !== 'running') {
        if (!(await this.repairRecord(doc._id, { status: run.status, completedAt: run.completedAt, error: run.error }))) return;
        this.statusChanged({ runId: doc._id, workspaceId: doc.workspaceId, status: run.status, at: run.completedAt });
      } else if (!inspected) {
        if (!(await this.repairRecord(doc._id, { status: 'failed', completedAt: at, error: 'the server stopped before the run started' }))) return;
        this.statusChanged({ runId: doc._id, workspaceId: doc.workspaceId, status: 'failed', at });
      }
    }
  }

  /**
   * Sets a run's record as its run ended. Cluster mode: under the shard's fence, so an owner that
   * lost the shard without noticing cannot overwrite the record a newer owner claimed; false then
   * (the shard is given up, and the newer owner repairs what is left).
   */
  private async repairRecord(runId: string, fields: Pick<WorkflowRunDoc, 'status' | 'completedAt' | 'error'>): Promise<boolean> {
    const update = { $set: fields };
    if (!this.ctx.placement.clustered) {
      await this.c.workflowRuns.updateOne({ _id: runId }, update);
      return true;
    }
    const fence = this.ctx.placement.fenceFor(this.keyOf(runId));
    if (!fence) return false;
    try {
      await fencedUpdateOne(this.c.workflowRuns, runId, update, fence);
      return true;
    } catch (err) {
      if (!(err instanceof StaleEpochError)) throw err;
      this.log.warn({ runId, err: err.message }, "a repair of a workflow run's record was refused: another node owns the run now");
      this.ctx.placement.stale(err.fence.shard);
      return false;
    }
  }

  /** Runs `fn` whenever a run's listing record changes status (the fleet summary counts runs with it). */
  onRunStatus(fn: (change: RunStatusChange) => void): void {
    this.statusHooks.push(fn);
  }

  private statusChanged(change: RunStatusChange): void {
    for (const fn of this.statusHooks) {
      try {
        fn(change);
      } catch (err) {
        this.log.error({ err, runId: change.runId }, 'run status listener failed');
      }
    }
  }

  /** The shard is no longer this node's: its runs' attempts and timers stop here (the next owner resumes them). */
  private leave(shard: number): void {
    for (const [runId, e] of [...this.executions]) {
      if (this.ctx.placement.shardOf(this.keyOf(runId)) !== shard) continue;
      for (const f of e.inflight.values()) f.abort.abort();
      for (const cancel of e.timers.values()) cancel();
      this.executions.delete(runId);
    }
  }

  async stop(): Promise<void> {
    // Synchronous up to the first await: no attempt reports after this.
    this.stopped = true;
    for (const e of this.executions.values()) {
      for (const f of e.inflight.values()) f.abort.abort();
      for (const cancel of e.timers.values()) cancel();
    }
    this.executions.clear();
    await Promise.allSettled([...this.writes]);
  }


  // ---------------------------------------------------------------------------------------------
  // Runs

  /** Starts a run; it is running (and persisted) when this returns, and its first steps start just after. */
  async startRun(wf: WorkflowDoc, params: Record<string, unknown>, startedBy: WorkflowRunStarter): Promise<RunStarted> {
    if (this.stopped) throw new AppError(503, 'shutting_down', 'the server is shutting down');
    const definition = JSON.parse(wf.definition) as WorkflowDefinition;
    const runId = newId();
    const at = this.nowIso();
    const input: WorkflowRunInput = {
      ...initialRunState(definition, params, at),
      runId,
      workflowId: wf._id,
      workflowName: wf.name,
      workspaceId: wf.workspaceId,
      startedBy,
    };
    await this.c.workflowRuns.insertOne({
      _id: runId,
      workflowId: wf._id,
      workspaceId: wf.workspaceId,
      status: 'running',
      startedAt: at,
      completedAt: null,
      error: null,
      startedBy,
    });
    this.statusChanged({ runId, workspaceId: wf.workspaceId, status: 'running', at: null });
    try {
      if (!this.ctx.placement.clustered) await this.startHere(input);
      else await this.ctx.placement.run(this.keyOf(runId), 'run.start', { input });
    } catch (err) {
      // A request that timed out may have started it on its node: that node's record stands then.
      const failedAt = this.nowIso();
      await this.c.workflowRuns.updateOne({ _id: runId, status: 'running' }, { $set: { status: 'failed', completedAt: failedAt, error: 'the run could not start' } });
      this.statusChanged({ runId, workspaceId: wf.workspaceId, status: 'failed', at: failedAt });
      throw err;
    }
    return { runId, status: 'running' };
  }

  /** Makes the run's actor here (this node owns its shard); its first steps start just after. */
  private async startHere(input: WorkflowRunInput): Promise<void> {
    const { runId } = input;
    this.inputs.set(runId, input);
    try {
      await this.actorOf(runId);
    } finally {
      this.inputs.delete(runId);
    }
    this.publishRun(input, input, true);
    // The answer goes out before any step runs.
    setImmediate(() => this.deliver(runId, { type: 'START', at: this.nowIso() }));
  }

  /** The run as its actor holds it (live or from its snapshot); null when there is none. */
  async getRun(runId: string): Promise<RunView | null> {
    const inspected = await inspectActor(this.ctx, WORKFLOW_RUN_KIND, runId);
    if (inspected?.context) return toRunView(inspected.context as WorkflowRunContext);
    const doc = await this.c.workflowRuns.findById(runId);
    if (!doc) return null;
    return { ...toRunSummary(doc), steps: {}, params: {} };
  }

  async listRuns(workflowId: string, opts: { status?: WorkflowRunDoc['status']; page: number; pageSize: number }): Promise<RunPage> {
    const filter: Record<string, unknown> = { workflowId };
    if (opts.status) filter.status = opts.status;
    const total = await this.c.workflowRuns.count(filter);
    const docs = await this.c.workflowRuns.find(filter, {
      sort: { startedAt: -1, _id: 1 },
      skip: (opts.page - 1) * opts.pageSize,
      limit: opts.pageSize,
    });
    return { runs: docs.map(toRunSummary), total, page: opts.page, pageSize: opts.pageSize, totalPages: Math.ceil(total / opts.pageSize) };
  }

  /** A run's timeline from its actor (live or stored); null when the run has no snapshot. */
  async timeline(runId: string): Promise<TimelineView | null> {
    const inspected = await inspectActor(this.ctx, WORKFLOW_RUN_KIND, runId);
    return inspected?.context ? toTimeline(inspected.context as WorkflowRunContext) : null;
  }

  /**
   * Runs across workflows, newest first. `workspaceIds` is what the caller may read ('all' for a
   * global admin); the query is answered from the workspace (or start time) index.
   */
  async listAcross(
    workspaceIds: string[] | 'all',
    q: { status?: WorkflowRunDoc['status']; workflowId?: string; startedBy?: string; from?: string; to?: string; page: number; pageSize: number },
  ): Promise<RunListPage> {
    const filter: Record<string, unknown> = {};
    if (workspaceIds !== 'all') filter.workspaceId = workspaceIds.length === 1 ? workspaceIds[0] : { $in: workspaceIds };
    if (q.workflowId) filter.workflowId = q.workflowId;
    if (q.status) filter.status = q.status;
    if (q.startedBy) filter['startedBy.did'] = q.startedBy;
    if (q.from || q.to) filter.startedAt = { ...(q.from ? { $gte: q.from } : {}), ...(q.to ? { $lt: q.to } : {}) };
    const empty = { runs: [], total: 0, page: q.page, pageSize: q.pageSize, totalPages: 0 };
    if (workspaceIds !== 'all' && workspaceIds.length === 0) return empty;
    const total = await this.c.workflowRuns.count(filter);
    if (total === 0) return empty;
    const docs = await this.c.workflowRuns.find(filter, { sort: { startedAt: -1, _id: 1 }, skip: (q.page - 1) * q.pageSize, limit: q.pageSize });
    const ids = [...new Set(docs.map((d) => d.workflowId))];
    const names = new Map((await this.c.workflows.find({ _id: { $in: ids } }, { projection: { name: 1 } })).map((w) => [w._id, w.name]));
    return {
      runs: docs.map((d) => ({ ...toRunSummary(d), workflowName: names.get(d.workflowId) ?? '' })),
      total,
      page: q.page,
      pageSize: q.pageSize,
      totalPages: Math.ceil(total / q.pageSize),
    };
  }

  /** Cancels a running run; 409 when it has already ended. */
  async cancelRun(runId: string, by: UserPrincipal): Promise<RunView> {
    const view = !this.ctx.placement.clustered ? await this.cancelHere(runId, by.did) : await this.ctx.placement.run<RunView>(this.keyOf(runId), 'run.cancel', { runId, by: by.did });
    await this.ctx.audit.record(by, { action: 'workflow.run.cancel', targetType: 'workflow_run', target: runId, details: { workflowId: view.workflowId } });
    return view;
  }

  private async cancelHere(runId: string, by: string): Promise<RunView> {
    if (!(await this.ctx.actors.exists(WORKFLOW_RUN_KIND, runId))) {
      const doc = await this.c.workflowRuns.findById(runId);
      throw conflict(`the run has already ended (${doc?.status ?? 'unknown'})`, 'run_ended');
    }
    const actor = await this.actorOf(runId);
    const snap = actor.getSnapshot();
    if (snap.status !== 'active' || snap.context.status !== 'running') {
      throw conflict(`the run has already ended (${snap.context.status})`, 'run_ended');
    }
    actor.send({ type: 'CANCEL', at: this.nowIso(), by });
    return toRunView(actor.getSnapshot().context);
  }

  private async cancelQuietly(runId: string, by: string): Promise<void> {
    try {
      if (!this.ctx.placement.clustered) await this.cancelQuietlyHere(runId, by);
      else await this.ctx.placement.run(this.keyOf(runId), 'run.cancelQuietly', { runId, by });
    } catch (err) {
      this.log.warn({ err, runId }, 'could not cancel a workflow run');
    }
  }

  private async cancelQuietlyHere(runId: string, by: string): Promise<void> {
    try {
      if (!(await this.ctx.actors.exists(WORKFLOW_RUN_KIND, runId))) return;
      const actor = await this.actorOf(runId);
      if (actor.getSnapshot().status === 'active') actor.send({ type: 'CANCEL', at: this.nowIso(), by });
    } catch (err) {
      this.log.warn({ err, runId }, 'could not cancel a workflow run');
    }
  }


  /**
   * For a workflow being deleted: its running runs are cancelled, then (`forgetRuns`) its runs'
   * actors and records go. Answers the runs it had.
   */
  async cancelAllOf(wf: WorkflowDoc, by: string): Promise<string[]> {
    const runs = await this.c.workflowRuns.find({ workflowId: wf._id }, { projection: { status: 1 } });
    for (const r of runs) if (r.status === 'running') await this.cancelQuietly(r._id, by);
    return runs.map((r) => r._id);
  }

  async forgetRuns(wf: WorkflowDoc, runIds: readonly string[]): Promise<void> {
    for (const id of runIds) await removeActor(this.ctx, WORKFLOW_RUN_KIND, id);
    await this.c.workflowRuns.deleteMany({ workflowId: wf._id });
  }

  // ---------------------------------------------------------------------------------------------
  // Executor

  /** Back-off before the attempt after failed attempt `attempt` (1-based): exponential, capped, half of it jitter. */
  backoffMs(attempt: number): number {
    const { workflowRetryBaseMs: base, workflowRetryMaxMs: max } = this.ctx.config;
    const full = Math.min(max, base * 2 ** Math.min(Math.max(attempt - 1, 0), 40));
    return Math.round(full / 2 + this.clock.random() * (full / 2));
  }

  private nowIso(): string {
    return new Date(this.clock.now()).toISOString();
  }

  private async actorOf(runId: string): Promise<RunActor> {
    const actor = (await this.ctx.actors.get(WORKFLOW_RUN_KIND, runId)) as unknown as RunActor;
    if (!this.listening.has(actor)) {
      this.listening.add(actor);
      actor.on('*', (cmd) => this.onCommand(runId, cmd as RunCommand));
      let last = actor.getSnapshot().context;
      actor.subscribe({
        next: (snap) => {
          const now = snap.context;
          if (now === last) return;
          const before = last;
          last = now;
          this.publishRun(before, now, false);
        },
        error: () => {}, // the actor host logs and handles a failed actor
      });
    }
    return actor;
  }

  /** Publishes what changed between two states of a run: each step whose status or attempt changed, then the run's status. */
  private publishRun(before: WorkflowRunContext, now: WorkflowRunContext, started: boolean): void {
    const feed = this.feed;
    if (!feed?.hasSubscribers('runs')) return;
    const at = this.nowIso();
    const audience = { workspaceIds: [now.workspaceId] };
    const base = { type: 'run', workflowId: now.workflowId, runId: now.runId, status: now.status } as const;
    for (const [stepId, st] of Object.entries(now.steps)) {
      const was = before.steps[stepId];
      if (was ? was.status === st.status && was.attempts === st.attempts : st.status === 'pending') continue;
      const frame: RunFrame = { ...base, stepId, stepStatus: st.status, at };
      if (st.attempts > 0) frame.attempt = st.attempts;
      feed.publish('runs', frame, audience);
    }
    if (started || now.status !== before.status) feed.publish('runs', { ...base, at } satisfies RunFrame, audience);
  }

  private async send(runId: string, event: RunEvent): Promise<void> {
    if (this.stopped) return;
    try {
      const actor = await this.actorOf(runId);
      if (actor.getSnapshot().status === 'active') actor.send(event);
    } catch (err) {
      if (!this.stopped) this.log.error({ err, runId, event: event.type }, 'could not deliver an event to a workflow run');
    }
  }

  private execution(runId: string): Execution {
    let e = this.executions.get(runId);
    if (!e) this.executions.set(runId, (e = { inflight: new Map(), timers: new Map() }));
    return e;
  }

  private trackWrite(p: Promise<unknown>): void {
    const tracked: Promise<unknown> = p.then(
      () => this.writes.delete(tracked),
      (err: unknown) => {
        this.writes.delete(tracked);
        this.log.error({ err }, 'a workflow run write failed');
      },
    );
    this.writes.add(tracked);
  }

  /** Sends an event from a timer or callback: send() logs its own failures; anything else is logged here. */
  private deliver(runId: string, event: RunEvent): void {
    this.send(runId, event).catch((err: unknown) => this.log.error({ err, runId, event: event.type }, 'could not deliver an event to a workflow run'));
  }

  private onCommand(runId: string, cmd: RunCommand): void {
    if (this.stopped) return;
    switch (cmd.type) {
      case 'step.execute':
        this.execute(runId, cmd).catch((err: unknown) => this.log.error({ err, runId, stepId: cmd.stepId }, 'a workflow step attempt failed unexpectedly'));
        break;
      case 'step.wait':
        this.arm(runId, cmd);
        break;
      case 'run.ended':
        this.trackWrite(this.ended(runId, cmd));
        break;
    }
  }

  private arm(runId: string, cmd: Extract<RunCommand, { type: 'step.wait' }>): void {
    const e = this.execution(runId);
    e.timers.get(cmd.stepId)?.();
    const cancel = this.clock.after(Math.max(0, Date.parse(cmd.at) - this.clock.now()), () => {
      if (e.timers.get(cmd.stepId) !== cancel) return;
      e.timers.delete(cmd.stepId);
      this.deliver(runId, { type: 'RETRY_DUE', stepId: cmd.stepId, attempt: cmd.attempt, at: this.nowIso() });
    });
    e.timers.set(cmd.stepId, cancel);
  }

  private async ended(runId: string, cmd: Extract<RunCommand, { type: 'run.ended' }>): Promise<void> {
    const e = this.executions.get(runId);
    if (e) {
      for (const f of e.inflight.values()) f.abort.abort();
      for (const cancel of e.timers.values()) cancel();
      this.executions.delete(runId);
    }
    const update = { $set: { status: cmd.status, completedAt: cmd.completedAt, error: cmd.error } };
    try {
      // Cluster mode: the record is the run's owned document, written under its shard's fence.
      const fence = this.ctx.placement.fenceFor(this.keyOf(runId));
      if (fence) await fencedUpdateOne(this.c.workflowRuns, runId, update, fence);
      else if (!this.ctx.placement.clustered) await this.c.workflowRuns.updateOne({ _id: runId }, update);
      else this.log.warn({ runId }, "a workflow run ended on a node that no longer owns it; its new owner's record stands");
      this.statusChanged({ runId, workspaceId: null, status: cmd.status, at: cmd.completedAt });
    } catch (err) {
      if (err instanceof StaleEpochError) {
        this.log.warn({ runId, err: err.message }, "a workflow run's end was refused: another node owns the run now");
        this.ctx.placement.stale(err.fence.shard);
        return;
      }
      this.log.error({ err, runId }, 'could not record the end of a workflow run (fixed at the next start)');
    }
  }

  private async execute(runId: string, cmd: Extract<RunCommand, { type: 'step.execute' }>): Promise<void> {
    const e = this.execution(runId);
    const token = { attempt: cmd.attempt, abort: new AbortController() };
    e.inflight.get(cmd.stepId)?.abort.abort();
    e.inflight.set(cmd.stepId, token);
    await Promise.resolve(); // never answer inside the transition that asked
    let event: RunEvent;
    try {
      const output = await this.keep(runId, e, await this.perform(runId, cmd, token.abort.signal));
      event = { type: 'STEP_DONE', stepId: cmd.stepId, attempt: cmd.attempt, output, at: this.nowIso() };
    } catch (err) {
      const retryable = err instanceof StepFailure ? err.retryable : true;
      event = {
        type: 'STEP_FAILED',
        stepId: cmd.stepId,
        attempt: cmd.attempt,
        error: clip(describeError(err)),
        retryable,
        backoffMs: this.backoffMs(cmd.attempt),
        at: this.nowIso(),
      };
    }
    if (e.inflight.get(cmd.stepId) !== token || token.abort.signal.aborted) return; // the run ended or moved on
    e.inflight.delete(cmd.stepId);
    await this.send(runId, event);
  }

  /**
   * What the run keeps of a step's output: bounded by the step's limit and what is left of the
   * run's budget (docs/workflows.md). The bytes are counted at once, before the next await, so
   * steps that finish together share the budget.
   */
  private async keep(runId: string, e: Execution, output: unknown): Promise<unknown> {
    const { workflowStepOutputMaxBytes: stepMax, workflowRunOutputMaxBytes: runMax } = this.ctx.config;
    const run = e.outputBytes === undefined ? await this.runContext(runId) : undefined;
    if (run && e.outputBytes === undefined) {
      e.outputBytes = 0;
      for (const st of Object.values(run.steps)) if (st.output !== null) e.outputBytes += jsonBytes(st.output);
    }
    const limit = Math.max(0, Math.min(stepMax, runMax - e.outputBytes!));
    const kept = output instanceof BroadcastOutput ? boundBroadcast(output.results, limit) : boundOutput(output, limit);
    e.outputBytes! += kept.bytes;
    return kept.output;
  }

  /** One attempt of a step; its value is the step's output, a throw its failure. */
  private async perform(runId: string, cmd: Extract<RunCommand, { type: 'step.execute' }>, signal: AbortSignal): Promise<unknown> {
    const { action, params, agentDid } = cmd;
    if (agentDid) {
      if (!isCapability(action)) throw new StepFailure(unknownAction(action, true), false);
      const run = await this.runContext(runId);
      const who = await this.actingAs(run);
      const answer = await this.intents.send(who, agentDid, { action, params });
      if (!answer.ok) throw new StepFailure(answer.error ?? 'the agent refused the intent', true);
      return answer.output ?? null;
    }
    switch (action) {
      case 'delay':
        return this.delay(params, signal);
      case 'channel.post':
        return this.channelPost(runId, params);
      default:
        if (isCapability(action)) return this.broadcast(runId, action, params);
        throw new StepFailure(unknownAction(action, false), false);
    }
  }

  private async delay(params: Record<string, unknown>, signal: AbortSignal): Promise<unknown> {
    const ms = params.ms;
    if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0 || ms > MAX_DELAY_MS) {
      throw new StepFailure(`delay: params.ms must be a whole number of milliseconds from 0 to ${MAX_DELAY_MS}`, false);
    }
    await new Promise<void>((resolve, reject) => {
      const cancel = this.clock.after(ms, resolve);
      signal.addEventListener(
        'abort',
        () => {
          cancel();
          reject(new StepFailure('aborted', false));
        },
        { once: true },
      );
    });
    return { ms };
  }

  private async channelPost(runId: string, params: Record<string, unknown>): Promise<unknown> {
    const { channelId, content } = params;
    if (typeof channelId !== 'string' || channelId === '') throw new StepFailure('channel.post: params.channelId must be a channel id', false);
    if (typeof content !== 'string' || content.trim() === '') throw new StepFailure('channel.post: params.content must be text that is not blank', false);
    const who = await this.actingAs(await this.runContext(runId));
    return (await this.channelPoster.post(who, channelId, content)) ?? null;
  }

  /** Sends the action to every online agent of the run's workspace that holds it; the output maps DIDs to results. */
  private async broadcast(runId: string, action: Capability, params: Record<string, unknown>): Promise<unknown> {
    const run = await this.runContext(runId);
    const who = await this.actingAs(run);
    const members = await this.c.workspaceAgents.find({ workspaceId: run.workspaceId }, { projection: { agentDid: 1 } });
    const agents = members.length
      ? await this.c.agents.find({ _id: { $in: members.map((m) => m.agentDid) }, status: 'active' }, { projection: { capabilities: 1 } })
      : [];
    const targets = agents
      .filter((a) => a.capabilities.includes(action) && this.agents.isOnline(a._id))
      .map((a) => a._id)
      .sort();
    if (targets.length === 0) throw new StepFailure(`no online agent of the workspace holds '${action}'`, true);
    const results = await Promise.all(
      targets.map(async (did): Promise<[string, { ok: boolean; output?: unknown; error?: string }]> => {
        try {
          const answer = await this.intents.send(who, did, { action, params });
          return [did, answer.ok ? { ok: true, output: answer.output ?? null } : { ok: false, error: answer.error ?? 'the agent refused the intent' }];
        } catch (err) {
          return [did, { ok: false, error: describeError(err) }];
        }
      }),
    );
    if (results.every(([, r]) => !r.ok)) {
      throw new StepFailure(`every agent failed: ${results.map(([did, r]) => `${did}: ${r.error}`).join('; ')}`.slice(0, 2000), true);
    }
    return new BroadcastOutput(Object.fromEntries(results));
  }

  private async runContext(runId: string): Promise<WorkflowRunContext> {
    return (await this.actorOf(runId)).getSnapshot().context;
  }

  /** The person a run acts as, rebuilt from the users collection. */
  private async actingAs(run: WorkflowRunContext): Promise<UserPrincipal> {
    const user = await this.c.users.findById(run.startedBy.userId);
    const who = user && userPrincipal(user, `workflow:${run.runId}`, 'bearer');
    if (!who) throw new StepFailure(`the person this run acts as (${run.startedBy.did}) no longer has an account`, false);
    return who;
  }
}

function unknownAction(action: string, forAgent: boolean): string {
  return forAgent
    ? `unknown action '${action}': an agent step's action is a capability (${CAPABILITIES.join(', ')})`
    : `unknown action '${action}': use a capability (${CAPABILITIES.join(', ')}) to ask agents, or a server action (${SERVER_ACTIONS.join(', ')})`;
}

/** The longest error text a step keeps (an agent's error may be as long as a frame). */
const ERROR_MAX_CHARS = 4000;

function clip(text: string): string {
  return text.length <= ERROR_MAX_CHARS ? text : `${text.slice(0, ERROR_MAX_CHARS)}… (${text.length} characters)`;
}

function describeError(err: unknown): string {
  if (err instanceof AppError) return `${err.message} (${err.code})`;
  if (err instanceof Error) return err.message;
  return String(err);
}
