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
 */
import { newId } from '../domain/ids.js';
import type { Actor } from 'xstate';
import type { ServiceCore } from './core.js';
import { inspectActor, removeActor } from './actor-commands.js';
import { StaleEpochError, claimDocument, fencedUpdateOne } from '../cluster/fence.js';
import type { Logger } from '../log.js';
import type { AgentLink } from './ports.js';
import type { IntentService } from './intents.js';
import { userPrincipal } from './sessions.js';
import type { UserPrincipal } from '../domain/principal.js';
import type { Collections, WorkflowDoc, WorkflowRunDoc, WorkflowRunStarter } from '../store/collections.js';
import { CAPABILITIES, isCapability, type Capability } from '../domain/capabilities.js';
import type { WorkflowDefinition } from '../domain/workflow/definition.js';
import { inFlightSteps, initialRunState, type RunCommand, type RunEvent } from '../domain/workflow/engine.js';
import { boundBroadcast, boundOutput, jsonBytes, type BroadcastResult } from '../domain/workflow/output-limit.js';
import { WORKFLOW_RUN_KIND, workflowRunMachine, type WorkflowRunContext, type WorkflowRunInput } from '../actors/workflow-run.js';
import { AppError, conflict } from '../domain/errors.js';
import { MAX_CONTENT } from '../domain/messages.js';
import { toMessageView, type ChannelService } from './channels.js';

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


export interface RunStepView {
  status: string;
  durationMs: number | null;
  output: unknown;
  attempts: number;
  startedAt: string | null;
  completedAt: string | null;
  error: string | null;
  retryAt: string | null;
}

export interface RunView {
  runId: string;
  workflowId: string;
  status: WorkflowRunDoc['status'];
  startedAt: string;
  completedAt: string | null;
  steps: Record<string, RunStepView>;
  params: Record<string, unknown>;
  startedBy: WorkflowRunStarter;
  error: string | null;
}

export interface RunSummaryView {
  runId: string;
  workflowId: string;
  status: WorkflowRunDoc['status'];
  startedAt: string;
  completedAt: string | null;
  startedBy: WorkflowRunStarter;
  error: string | null;
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
  const steps: Record<string, RunStepView> = {};
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
  private readonly inputs = new Map<string, WorkflowRunInput>();
  private readonly listening = new WeakSet<object>();
  private readonly executions = new Map<string, Execution>();
  /** Writes of run ends in progress; awaited at shutdown (attempts in flight are not: they are abandoned). */
  private readonly writes = new Set<Promise<unknown>>();
  private stopped = false;

  /** Defines the workflow-run actor kind. */
  constructor(
    private readonly ctx: ServiceCore,
    deps: { intents: IntentService; agents: AgentLink; channelPoster: WorkflowChannelPoster },
  ) {
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
        await this.c.workflowRuns.updateOne({ _id: doc._id }, { $set: { status: run.status, completedAt: run.completedAt, error: run.error } });
      } else if (!inspected) {
        await this.c.workflowRuns.updateOne(
          { _id: doc._id },
          { $set: { status: 'failed', completedAt: at, error: 'the server stopped before the run started' } },
        );
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
  async startRun(wf: WorkflowDoc, params: Record<string, unknown>, startedBy: WorkflowRunStarter): Promise<{ runId: string; status: 'running' }> {
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
    try {
      if (!this.ctx.placement.clustered) await this.startHere(input);
      else await this.ctx.placement.run(this.keyOf(runId), 'run.start', { input });
    } catch (err) {
      // A request that timed out may have started it on its node: that node's record stands then.
      await this.c.workflowRuns.updateOne(
        { _id: runId, status: 'running' },
        { $set: { status: 'failed', completedAt: this.nowIso(), error: 'the run could not start' } },
      );
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

  async listRuns(workflowId: string, opts: { status?: WorkflowRunDoc['status']; page: number; pageSize: number }) {
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
    }
    return actor;
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
