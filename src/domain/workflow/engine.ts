/**
 * The rules of a run, as a pure function from (state, event) to (new state, commands): which
 * steps start, which are skipped, what a failure does under each onError, when the run ends.
 * The run actor (src/actors/workflow-run.ts) holds the state and applies this function to each
 * event; the executor (src/services/workflows.ts) carries out the commands and reports back
 * with events. Time comes in with the events, so the function has no clock of its own.
 *
 * Rules (interface §4.10, DESIGN §4c):
 * - A pending step starts when every step it depends on has finished: completed, skipped, or
 *   failed under `continue`. Steps without dependsOn start together when the run starts.
 * - A step whose dependencies were all skipped is skipped; otherwise its condition (when it has
 *   one) is evaluated and a false condition skips it.
 * - A condition that cannot be evaluated, or params that cannot be interpolated, fail the step
 *   without a retry.
 * - onError `stop` (default): the step fails and so does the run; steps still running or not yet
 *   started are cancelled. `continue`: the step fails and the run goes on. `retry`: up to
 *   `retries` further attempts (default 3) after the back-off the executor chose, then as `stop`.
 * - The run completes when every step has finished and none failed under stop.
 */
import { DEFAULT_RETRIES, type WorkflowDefinition, type WorkflowStep } from './definition.js';
import { evaluateCondition } from './conditions.js';
import { interpolate, type Scope } from './interpolation.js';

export const RUN_STATUSES = ['running', 'completed', 'failed', 'cancelled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const STEP_STATUSES = ['pending', 'running', 'completed', 'failed', 'skipped', 'cancelled'] as const;
export type StepStatus = (typeof STEP_STATUSES)[number];

export interface StepState {
  status: StepStatus;
  /** Attempts started so far (0 until the step runs). */
  attempts: number;
  startedAt: string | null;
  completedAt: string | null;
  /** From the first attempt's start to the step's end, back-off included; null for a step that never ran. */
  durationMs: number | null;
  output: unknown;
  /** The last attempt's error. */
  error: string | null;
  /** Set while a `retry` step waits for its next attempt. */
  retryAt: string | null;
  /**
   * The step's latest attempts (at most MAX_ATTEMPT_HISTORY, oldest first), for the run's
   * timeline; absent on runs stored before attempts were recorded.
   */
  history?: AttemptRecord[];
}

export type AttemptOutcome = 'running' | 'succeeded' | 'failed' | 'cancelled';

/** One attempt of a step, as the run's timeline shows it. */
export interface AttemptRecord {
  attempt: number;
  startedAt: string;
  finishedAt: string | null;
  outcome: AttemptOutcome;
  /** The attempt's error, clipped to ATTEMPT_ERROR_MAX_CHARS. */
  error: string | null;
  /** When the next attempt was due, for a failed attempt that was retried. */
  retryAt: string | null;
}

/** Attempts kept per step: a step retried more often keeps its latest ones (each carries its number). */
export const MAX_ATTEMPT_HISTORY = 10;
/** The longest error an attempt record keeps (the step's own `error` keeps more of the last one). */
export const ATTEMPT_ERROR_MAX_CHARS = 200;

export interface RunState {
  status: RunStatus;
  startedAt: string;
  completedAt: string | null;
  /** Why the run failed or was cancelled. */
  error: string | null;
  definition: WorkflowDefinition;
  /** The run's params, as given. */
  params: Record<string, unknown>;
  /** The definition's variables overridden by the params. */
  variables: Record<string, unknown>;
  steps: Record<string, StepState>;
}

export type RunCommand =
  | { type: 'step.execute'; stepId: string; attempt: number; action: string; agentDid: string | null; params: Record<string, unknown> }
  /** Send RETRY_DUE for this attempt at `at`. */
  | { type: 'step.wait'; stepId: string; attempt: number; at: string }
  | { type: 'run.ended'; status: Exclude<RunStatus, 'running'>; completedAt: string; error: string | null };

export type RunEvent =
  | { type: 'START'; at: string }
  /** After a restart: running attempts were interrupted; `backoffMs` by step id for those that may retry. */
  | { type: 'RESUME'; at: string; backoffMs: Record<string, number> }
  | { type: 'STEP_DONE'; stepId: string; attempt: number; output: unknown; at: string }
  | { type: 'STEP_FAILED'; stepId: string; attempt: number; error: string; retryable: boolean; backoffMs: number; at: string }
  | { type: 'RETRY_DUE'; stepId: string; attempt: number; at: string }
  | { type: 'CANCEL'; at: string; by: string };

/** The error of an attempt that was in flight when the server stopped. */
export const INTERRUPTED = 'interrupted';

export function initialRunState(definition: WorkflowDefinition, params: Record<string, unknown>, at: string): RunState {
  const steps: Record<string, StepState> = {};
  for (const s of definition.steps) {
    steps[s.id] = { status: 'pending', attempts: 0, startedAt: null, completedAt: null, durationMs: null, output: null, error: null, retryAt: null, history: [] };
  }
  return {
    status: 'running',
    startedAt: at,
    completedAt: null,
    error: null,
    definition,
    params,
    variables: { ...(definition.variables ?? {}), ...params },
    steps,
  };
}

const FINISHED: ReadonlySet<StepStatus> = new Set(['completed', 'failed', 'skipped', 'cancelled']);
export const isFinished = (s: StepStatus) => FINISHED.has(s);

/** Steps whose attempt was in flight (running, not waiting for a retry). */
export function inFlightSteps(state: Pick<RunState, 'steps'>): string[] {
  return Object.entries(state.steps)
    .filter(([, st]) => st.status === 'running' && st.retryAt === null)
    .map(([id]) => id);
}

export function reduceRun<S extends RunState>(state: S, event: RunEvent): { state: S; commands: RunCommand[] } {
  const r = new Reducer(state);
  r.apply(event);
  return { state: r.s, commands: r.commands };
}

class Reducer<S extends RunState> {
  readonly s: S;
  readonly commands: RunCommand[] = [];
  private readonly byId: Map<string, WorkflowStep>;

  constructor(state: S) {
    this.s = { ...state, steps: structuredClone(state.steps) };
    this.byId = new Map(state.definition.steps.map((d) => [d.id, d]));
  }

  apply(ev: RunEvent): void {
    if (this.s.status !== 'running') return;
    switch (ev.type) {
      case 'START':
        this.settle(ev.at);
        break;
      case 'RESUME': {
        // Decided on the state as it was stored: steps started while handling this event are not interrupted.
        const stored = Object.entries(this.s.steps)
          .filter(([, st]) => st.status === 'running')
          .map(([id, st]) => ({ id, waitUntil: st.retryAt, attempt: st.attempts }));
        for (const { id, waitUntil, attempt } of stored) {
          if (this.s.status !== 'running') break;
          if (waitUntil !== null) this.commands.push({ type: 'step.wait', stepId: id, attempt, at: waitUntil });
          else this.fail(id, INTERRUPTED, ev.at, true, ev.backoffMs[id] ?? 0);
        }
        this.settle(ev.at);
        break;
      }
      case 'STEP_DONE': {
        const st = this.current(ev.stepId, ev.attempt);
        if (!st) return;
        st.status = 'completed';
        st.output = ev.output ?? null;
        st.error = null;
        closeAttempt(st, ev.at, 'succeeded', null, null);
        this.end(st, ev.at);
        this.settle(ev.at);
        break;
      }
      case 'STEP_FAILED':
        if (!this.current(ev.stepId, ev.attempt)) return;
        this.fail(ev.stepId, ev.error, ev.at, ev.retryable, ev.backoffMs);
        break;
      case 'RETRY_DUE': {
        const st = this.s.steps[ev.stepId];
        if (!st || st.status !== 'running' || st.retryAt === null || st.attempts !== ev.attempt) return;
        st.retryAt = null;
        this.launch(this.byId.get(ev.stepId)!, st, ev.at);
        break;
      }
      case 'CANCEL':
        this.finishRun('cancelled', `cancelled by ${ev.by}`, ev.at);
        break;
    }
  }

  /** The step's state when `attempt` is its attempt in flight; undefined for a stale report. */
  private current(stepId: string, attempt: number): StepState | undefined {
    const st = this.s.steps[stepId];
    return st && st.status === 'running' && st.retryAt === null && st.attempts === attempt ? st : undefined;
  }

  private scope(): Scope {
    const steps: Scope['steps'] = {};
    for (const [id, st] of Object.entries(this.s.steps)) steps[id] = { status: st.status, output: st.output, error: st.error };
    return { variables: this.s.variables, params: this.s.params, steps };
  }

  /** Starts every step that can start, skips those that must be skipped, and ends the run when all are finished. */
  private settle(at: string): void {
    const { definition } = this.s;
    let changed = true;
    while (changed && this.s.status === 'running') {
      changed = false;
      for (const step of definition.steps) {
        if (this.s.status !== 'running') return;
        const st = this.s.steps[step.id]!;
        if (st.status !== 'pending') continue;
        const deps = step.dependsOn ?? [];
        if (!deps.every((d) => isFinished(this.s.steps[d]!.status))) continue;
        changed = true;
        if (deps.length > 0 && deps.every((d) => this.s.steps[d]!.status === 'skipped')) {
          this.skip(st, at);
          continue;
        }
        if (step.condition !== undefined) {
          let go: boolean;
          try {
            go = evaluateCondition(step.condition, this.scope());
          } catch (err) {
            this.failBeforeRun(step.id, `condition: ${messageOf(err)}`, at);
            continue;
          }
          if (!go) {
            this.skip(st, at);
            continue;
          }
        }
        st.startedAt = at;
        this.launch(step, st, at);
      }
    }
    if (this.s.status === 'running' && definition.steps.every((d) => isFinished(this.s.steps[d.id]!.status))) {
      this.finishRun('completed', null, at);
    }
  }

  /** Starts the next attempt of a step: interpolates its params and asks for its execution. */
  private launch(step: WorkflowStep, st: StepState, at: string): void {
    let params: Record<string, unknown>;
    try {
      params = interpolate(step.params, this.scope()) as Record<string, unknown>;
    } catch (err) {
      this.failBeforeRun(step.id, messageOf(err), at);
      return;
    }
    st.status = 'running';
    st.attempts += 1;
    openAttempt(st, st.attempts, at);
    this.commands.push({ type: 'step.execute', stepId: step.id, attempt: st.attempts, action: step.action, agentDid: step.agentDid ?? null, params });
  }

  private skip(st: StepState, at: string): void {
    st.status = 'skipped';
    st.completedAt = at;
  }

  /** A failure found before any attempt ran (condition, interpolation): no retry. */
  private failBeforeRun(stepId: string, error: string, at: string): void {
    const st = this.s.steps[stepId]!;
    st.startedAt ??= at;
    this.fail(stepId, error, at, false, 0);
  }

  private fail(stepId: string, error: string, at: string, retryable: boolean, backoffMs: number): void {
    const step = this.byId.get(stepId)!;
    const st = this.s.steps[stepId]!;
    const onError = step.onError ?? 'stop';
    st.error = error;
    if (onError === 'retry' && retryable && st.attempts <= (step.retries ?? DEFAULT_RETRIES)) {
      st.status = 'running';
      st.retryAt = new Date(Date.parse(at) + Math.max(0, backoffMs)).toISOString();
      closeAttempt(st, at, 'failed', error, st.retryAt);
      this.commands.push({ type: 'step.wait', stepId, attempt: st.attempts, at: st.retryAt });
      return;
    }
    closeAttempt(st, at, 'failed', error, null);
    st.status = 'failed';
    this.end(st, at);
    if (onError === 'continue') this.settle(at);
    else this.finishRun('failed', `step '${stepId}' failed: ${error}`, at);
  }

  private end(st: StepState, at: string): void {
    st.completedAt = at;
    st.retryAt = null;
    st.durationMs = st.startedAt === null ? null : Math.max(0, Date.parse(at) - Date.parse(st.startedAt));
  }

  private finishRun(status: Exclude<RunStatus, 'running'>, error: string | null, at: string): void {
    this.s.status = status;
    this.s.completedAt = at;
    this.s.error = error;
    for (const st of Object.values(this.s.steps)) {
      if (st.status === 'running' || st.status === 'pending') {
        closeAttempt(st, at, 'cancelled', null, null);
        st.status = 'cancelled';
        this.end(st, at);
      }
    }
    this.commands.push({ type: 'run.ended', status, completedAt: at, error });
  }
}

/** Records the start of an attempt, dropping the oldest record past MAX_ATTEMPT_HISTORY. */
function openAttempt(st: StepState, attempt: number, at: string): void {
  const history = (st.history ??= []);
  history.push({ attempt, startedAt: at, finishedAt: null, outcome: 'running', error: null, retryAt: null });
  if (history.length > MAX_ATTEMPT_HISTORY) history.splice(0, history.length - MAX_ATTEMPT_HISTORY);
}

/** Ends the step's attempt in flight, if it has one (a step waiting for a retry has none). */
function closeAttempt(st: StepState, at: string, outcome: Exclude<AttemptOutcome, 'running'>, error: string | null, retryAt: string | null): void {
  const last = st.history?.at(-1);
  if (!last || last.outcome !== 'running' || last.attempt !== st.attempts) return;
  last.finishedAt = at;
  last.outcome = outcome;
  last.error = error === null ? null : error.length <= ATTEMPT_ERROR_MAX_CHARS ? error : `${error.slice(0, ATTEMPT_ERROR_MAX_CHARS)}…`;
  last.retryAt = retryAt;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
