/**
 * The workflow run actor: one per run (actor id = run id), the single writer of the run's status
 * and of every step's status, attempts, timing and output.
 *
 *   created ──START / RESUME──▶ running ──(every step finished)──────────▶ completed (final)
 *      │                          ├──(a step failed under stop / retries out)─▶ failed (final)
 *      └─────────CANCEL───────────┴──CANCEL───────────────────────────────▶ cancelled (final)
 *
 * Each event is applied by the pure run reducer (src/domain/workflow/engine.ts), whose commands
 * are emitted (`actor.on('*')`): `step.execute` (carry out an attempt), `step.wait` (send
 * RETRY_DUE at a time) and `run.ended`. The executor in src/services/workflows.ts carries them
 * out and answers with STEP_DONE / STEP_FAILED / RETRY_DUE. The actor host persists the snapshot
 * after every transition, so every step transition is on disk; emitted commands and timers are
 * not part of the snapshot: after a restart the executor sends RESUME, which turns attempts that
 * were in flight into failed attempts with the error `interrupted` and re-arms retry timers.
 */
import { enqueueActions, setup } from 'xstate';
import type { WorkflowRunStarter } from '../store/collections.js';
import { reduceRun, type RunCommand, type RunEvent, type RunState } from '../domain/workflow/engine.js';

export const WORKFLOW_RUN_KIND = 'workflow-run';


export interface WorkflowRunContext extends RunState {
  runId: string;
  workflowId: string;
  workflowName: string;
  workspaceId: string;
  /** A person (POST …/run), or a schedule acting as the person who created it. */
  startedBy: WorkflowRunStarter;
}

export type WorkflowRunInput = WorkflowRunContext;

export const workflowRunMachine = setup({
  types: {} as {
    context: WorkflowRunContext;
    events: RunEvent;
    input: WorkflowRunInput;
    emitted: RunCommand;
  },
  actions: {
    /** Applies the event with the run rules and emits the resulting commands. */
    apply: enqueueActions(({ context, event, enqueue }) => {
      const { state, commands } = reduceRun(context, event);
      enqueue.assign(() => state);
      for (const c of commands) enqueue.emit(c);
    }),
  },
  guards: {
    isCompleted: ({ context }) => context.status === 'completed',
    isFailed: ({ context }) => context.status === 'failed',
    isCancelled: ({ context }) => context.status === 'cancelled',
  },
}).createMachine({
  id: 'workflowRun',
  context: ({ input }) => input,
  initial: 'created',
  states: {
    created: {
      on: {
        START: { target: 'running', actions: 'apply' },
        RESUME: { target: 'running', actions: 'apply' },
        CANCEL: { target: 'running', actions: 'apply' },
      },
    },
    running: {
      always: [
        { guard: 'isCompleted', target: 'completed' },
        { guard: 'isFailed', target: 'failed' },
        { guard: 'isCancelled', target: 'cancelled' },
      ],
      on: {
        RESUME: { actions: 'apply' },
        STEP_DONE: { actions: 'apply' },
        STEP_FAILED: { actions: 'apply' },
        RETRY_DUE: { actions: 'apply' },
        CANCEL: { actions: 'apply' },
      },
    },
    completed: { type: 'final' },
    failed: { type: 'final' },
    cancelled: { type: 'final' },
  },
});
