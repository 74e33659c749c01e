/** Workflows, runs and schedules (docs/workflows.md). */
import { del, get, patch, post, put, seg, type Page } from './http';

export interface WorkflowStep {
  id: string;
  name: string;
  agentDid?: string;
  action: string;
  params: Record<string, unknown>;
  dependsOn?: string[];
  condition?: string;
  onError?: 'stop' | 'continue' | 'retry';
  retries?: number;
}
export interface WorkflowDefinition {
  steps: WorkflowStep[];
  triggers?: unknown[];
  variables?: Record<string, unknown>;
}
export interface WorkflowSummary {
  id: string;
  name: string;
  description: string | null;
  workspaceId: string;
  createdBy: string;
  createdAt: string;
  updatedAt: string;
  stepCount: number;
}
export interface Workflow extends Omit<WorkflowSummary, 'stepCount'> {
  definition: WorkflowDefinition;
}
export type RunStatus = 'running' | 'completed' | 'failed' | 'cancelled';
export type StepStatus = 'pending' | 'running' | 'completed' | 'failed' | 'skipped' | 'cancelled';
export interface RunSummary {
  runId: string;
  workflowId: string;
  status: RunStatus;
  startedAt: string;
  completedAt: string | null;
  startedBy: { type: string; did?: string; scheduleId?: string };
  error: string | null;
}
export interface Run extends RunSummary {
  steps: Record<string, { status: StepStatus; durationMs: number | null; output: unknown; attempts: number; startedAt: string | null; completedAt: string | null; error: string | null; retryAt: string | null }>;
  params: Record<string, unknown>;
}
export interface Schedule {
  id: string;
  workflowId: string;
  workspaceId: string;
  cron: string;
  timezone: string;
  params: Record<string, unknown>;
  createdBy: string;
  createdAt: string;
  nextRunAt: string | null;
  lastRunAt: string | null;
  lastRunId: string | null;
}

export const listWorkflows = (q: { workspaceId?: string; createdBy?: string }) => get<{ workflows: WorkflowSummary[] }>('/api/workflows', q);
export const getWorkflow = (id: string) => get<{ workflow: Workflow }>(`/api/workflows/${seg(id)}`);
export const createWorkflow = (body: { name: string; description?: string; workspaceId: string; definition: WorkflowDefinition }) =>
  post<{ success: true; id: string; name: string; workspaceId: string }>('/api/workflows', body);
export const replaceWorkflow = (id: string, body: { name: string; description?: string; definition: WorkflowDefinition }) => put<{ workflow: Workflow }>(`/api/workflows/${seg(id)}`, body);
export const patchWorkflow = (id: string, body: { name?: string; description?: string; definition?: WorkflowDefinition }) => patch<{ workflow: Workflow }>(`/api/workflows/${seg(id)}`, body);
export const deleteWorkflow = (id: string) => del<{ success: true; runs: number; schedules: number }>(`/api/workflows/${seg(id)}`);
export const startRun = (id: string, params: Record<string, unknown>) => post<{ runId: string; status: 'running' }>(`/api/workflows/${seg(id)}/run`, { params });
export const listRuns = (id: string, q: { status?: RunStatus; page?: number; pageSize?: number }) => get<Page & { runs: RunSummary[] }>(`/api/workflows/${seg(id)}/runs`, q);
export const getRun = (id: string, runId: string) => get<Run>(`/api/workflows/${seg(id)}/runs/${seg(runId)}`);
export const cancelRun = (id: string, runId: string) => post<Run>(`/api/workflows/${seg(id)}/runs/${seg(runId)}/cancel`);

export const listSchedules = (q: { workflowId?: string; workspaceId?: string }) => get<{ schedules: Schedule[] }>('/api/schedules', q);
export const createSchedule = (body: { workflowId: string; cron: string; params?: Record<string, unknown>; timezone?: string }) => post<{ schedule: Schedule }>('/api/schedules', body);
export const deleteSchedule = (id: string) => del<{ success: true }>(`/api/schedules/${seg(id)}`);

/** A run in the list across workflows: the Run object plus its workflow's name. */
export interface RunListItem extends RunSummary {
  workflowName: string;
}
export interface RunsQuery {
  status?: RunStatus;
  workspace?: string;
  workflowId?: string;
  startedBy?: string;
  from?: string;
  to?: string;
  page?: number;
  pageSize?: number;
}
export const listAllRuns = (q: RunsQuery) => get<Page & { runs: RunListItem[] }>('/api/runs', { ...q });
export type CancelOutcome = 'cancelled' | 'already_finished' | 'not_found' | 'forbidden';
export const cancelRuns = (runIds: string[]) => post<{ results: Array<{ runId: string; outcome: CancelOutcome }> }>('/api/runs/cancel', { runIds });

export type AttemptOutcome = 'running' | 'succeeded' | 'failed' | 'cancelled' | 'skipped';
export interface Attempt {
  attempt: number;
  startedAt: string;
  finishedAt: string | null;
  outcome: AttemptOutcome;
  error: string | null;
  retryAt: string | null;
}
export interface Timeline {
  runId: string;
  status: RunStatus;
  startedAt: string;
  finishedAt: string | null;
  steps: Array<{ stepId: string; attempts: Attempt[] }>;
}
export const getTimeline = (id: string, runId: string) => get<Timeline>(`/api/workflows/${seg(id)}/runs/${seg(runId)}/timeline`);
