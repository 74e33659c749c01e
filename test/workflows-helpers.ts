/**
 * Helpers for the workflow suites: creating a workflow over HTTP, waiting for a run to reach a
 * state, and a clock whose time and timers the test drives.
 */
import * as assert from 'uvu/assert';
import { waitFor } from './helpers.js';
import type { TestUser } from './fixtures.js';
import type { WorkflowClock } from '../src/services/workflow-runs.js';

export async function createWorkflow(admin: TestUser, workspaceId: string, definition: unknown, name = `wf-${Math.random().toString(36).slice(2, 8)}`): Promise<string> {
  const r = await admin.api.post('/api/workflows', { name, workspaceId, definition });
  assert.is(r.status, 201, `create workflow: ${r.text}`);
  return r.body.id;
}

export async function startRun(who: TestUser, workflowId: string, params: Record<string, unknown> = {}): Promise<string> {
  const r = await who.api.post(`/api/workflows/${workflowId}/run`, { params });
  assert.is(r.status, 202, `run: ${r.text}`);
  return r.body.runId;
}

/** Polls GET …/runs/{runId} until `until(run)` holds; returns the run. */
export async function waitRun(who: TestUser, workflowId: string, runId: string, until: (run: any) => boolean, timeoutMs = 10_000): Promise<any> {
  let last: any;
  try {
    return await waitFor(async () => {
      const r = await who.api.get(`/api/workflows/${workflowId}/runs/${runId}`);
      assert.is(r.status, 200, r.text);
      last = r.body;
      return until(r.body) ? r.body : null;
    }, timeoutMs, 20);
  } catch (err) {
    throw new Error(`${(err as Error).message}; last run: ${JSON.stringify(last)}`);
  }
}

export const ended = (run: any) => run.status !== 'running';

/** A clock that stands still until told, and whose timers fire only when the test fires them. */
export class ManualClock implements WorkflowClock {
  time: number;
  readonly timers: Array<{ ms: number; fn: () => void; cancelled: boolean; fired: boolean }> = [];
  constructor(
    start = Date.now(),
    private readonly rnd = 0.5,
  ) {
    this.time = start;
  }
  now(): number {
    return this.time;
  }
  after(ms: number, fn: () => void): () => void {
    const t = { ms, fn, cancelled: false, fired: false };
    this.timers.push(t);
    return () => {
      t.cancelled = true;
    };
  }
  random(): number {
    return this.rnd;
  }
  /** Timers armed and neither fired nor cancelled. */
  pending() {
    return this.timers.filter((t) => !t.cancelled && !t.fired);
  }
  /** Moves time forward by the timer's delay and fires it. */
  fire(t: { ms: number; fn: () => void; fired: boolean }): void {
    this.time += t.ms;
    t.fired = true;
    t.fn();
  }
}
