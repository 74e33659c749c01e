/**
 * `steward workflows list|run|runs|cancel`: GET /api/workflows, POST /api/workflows/{id}/run,
 * GET /api/workflows/{id}/runs[/{runId}], POST /api/workflows/{id}/runs/{runId}/cancel. A
 * workflow is named by its id or its name.
 */
import { Option, type Command } from 'commander';
import { workflowId, workspaceSlugs } from './resolve.js';
import { int, jsonObject, jsonOption } from './options.js';
import { compact, details, table, time, type Column } from './output.js';
import { CliError, EXIT } from './errors.js';
import type { Api } from './client.js';
import type { Context } from './context.js';

interface Workflow {
  id: string;
  name: string;
  description: string;
  workspaceId: string;
  createdBy: string;
  createdAt: string;
  updatedAt: string;
  stepCount: number;
}

interface RunSummary {
  runId: string;
  workflowId: string;
  status: string;
  startedAt: string;
  completedAt: string | null;
  startedBy: { type: string; did: string; scheduleId?: string };
  error: string | null;
}

interface Step {
  status: string;
  durationMs: number | null;
  output: unknown;
  attempts?: number;
  error?: string | null;
}

interface Run extends RunSummary {
  steps: Record<string, Step>;
  params: Record<string, unknown>;
}

const workflowColumns = (slug: (id: string) => string): Column<Workflow>[] => [
  { header: 'ID', value: (w) => w.id },
  { header: 'NAME', value: (w) => w.name, max: 40 },
  { header: 'WORKSPACE', value: (w) => slug(w.workspaceId) },
  { header: 'STEPS', value: (w) => String(w.stepCount) },
  { header: 'UPDATED', value: (w) => time(w.updatedAt) },
  { header: 'DESCRIPTION', value: (w) => w.description, max: 48 },
];

const RUNS: Column<RunSummary>[] = [
  { header: 'RUN', value: (r) => r.runId },
  { header: 'STATUS', value: (r) => r.status },
  { header: 'STARTED', value: (r) => time(r.startedAt) },
  { header: 'COMPLETED', value: (r) => time(r.completedAt) },
  { header: 'STARTED BY', value: (r) => (r.startedBy.type === 'schedule' ? `schedule ${r.startedBy.scheduleId ?? ''}` : r.startedBy.did) },
  { header: 'ERROR', value: (r) => r.error ?? '', max: 60 },
];

const STEPS: Column<[string, Step]>[] = [
  { header: 'STEP', value: ([id]) => id },
  { header: 'STATUS', value: ([, s]) => s.status },
  { header: 'ATTEMPTS', value: ([, s]) => (s.attempts === undefined ? '' : String(s.attempts)) },
  { header: 'DURATION', value: ([, s]) => (s.durationMs === null ? '' : `${s.durationMs} ms`) },
  { header: 'OUTPUT / ERROR', value: ([, s]) => (s.error ? `error: ${s.error}` : s.output === undefined ? '' : compact(s.output)), max: 72 },
];

const runPath = (id: string, runId: string) => `/api/workflows/${encodeURIComponent(id)}/runs/${encodeURIComponent(runId)}`;

function runText(run: Run): string {
  return (
    details([
      ['Run', run.runId],
      ['Workflow', run.workflowId],
      ['Status', run.status],
      ['Started', `${time(run.startedAt)} by ${run.startedBy.type === 'schedule' ? `schedule ${run.startedBy.scheduleId ?? ''}` : run.startedBy.did}`],
      ['Completed', time(run.completedAt)],
      ['Params', compact(run.params)],
      ...(run.error ? ([['Error', run.error]] as Array<[string, string]>) : []),
    ]) + (Object.keys(run.steps).length > 0 ? `\n${table(STEPS, Object.entries(run.steps))}` : '')
  );
}

/** Polls a run until it has ended (every half second at first, then every 2 s). */
async function waitForEnd(api: Api, id: string, runId: string): Promise<Run> {
  for (let delay = 500; ; delay = Math.min(delay * 2, 2000)) {
    const run = await api.get<Run>(runPath(id, runId));
    if (run.status !== 'running') return run;
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

export function registerWorkflows(program: Command, ctx: Context): void {
  const workflows = program.command('workflows').summary('workflows: list, run, runs, cancel').description('Workflows: list them, start a run, follow runs, cancel one.');

  workflows
    .command('list')
    .summary('list workflows')
    .description("Lists the workflows of your workspaces (all for global admins) (GET /api/workflows).")
    .option('-w, --workspace <workspace>', "only this workspace's (id or slug)")
    .option('--created-by <did>', 'only those created by this DID')
    .addOption(jsonOption())
    .action(async (o: { workspace?: string; createdBy?: string; json?: boolean }) => {
      const api = await ctx.api();
      const r = await api.get<{ success: boolean; workflows: Workflow[] }>('/api/workflows', { workspaceId: o.workspace, createdBy: o.createdBy });
      const slug = o.json || r.workflows.length === 0 ? (id: string) => id : await workspaceSlugs(api);
      ctx.print(o.json, r, () => (r.workflows.length === 0 ? 'No workflows.\n' : table(workflowColumns(slug), r.workflows)));
    });

  workflows
    .command('run')
    .summary('start a run (--wait: until it ends)')
    .description(
      'Starts a run (POST /api/workflows/{id}/run) and prints its id. With --wait, follows it until it ends and\n' +
        'prints it; exit 1 when it failed or was cancelled.',
    )
    .argument('<workflow>', 'the workflow id, or its name')
    .option('-p, --params <json>', 'run-time parameters, a JSON object (default {})', jsonObject)
    .option('--wait', 'wait until the run ends')
    .addOption(jsonOption())
    .action(async (ref: string, o: { params?: Record<string, unknown>; wait?: boolean; json?: boolean }) => {
      const api = await ctx.api();
      const id = await workflowId(api, ref);
      const started = await api.post<{ runId: string; status: string }>(`/api/workflows/${encodeURIComponent(id)}/run`, { params: o.params ?? {} });
      if (!o.wait) {
        ctx.print(o.json, started, () => `Started run ${started.runId} of workflow ${id} (${started.status}).\n`);
        return;
      }
      const run = await waitForEnd(api, id, started.runId);
      ctx.print(o.json, run, () => runText(run));
      if (run.status !== 'completed') throw new CliError(EXIT.failed, `run ${run.runId} ${run.status}${run.error ? `: ${run.error}` : ''}`);
    });

  workflows
    .command('runs')
    .summary("list a workflow's runs, or show one")
    .description('Lists the runs of a workflow, newest first (GET /api/workflows/{id}/runs); with a run id, shows that run and its steps.')
    .argument('<workflow>', 'the workflow id, or its name')
    .argument('[run]', 'a run id: show this run')
    .addOption(new Option('--status <status>', 'only runs in this state').choices(['running', 'completed', 'failed', 'cancelled']))
    .option('--page <n>', 'page number (default 1)', int(1))
    .option('--page-size <n>', 'runs per page (default 20, at most 100)', int(1, 100))
    .addOption(jsonOption())
    .action(async (ref: string, runId: string | undefined, o: { status?: string; page?: number; pageSize?: number; json?: boolean }) => {
      const api = await ctx.api();
      const id = await workflowId(api, ref);
      if (runId !== undefined) {
        const run = await api.get<Run>(runPath(id, runId));
        ctx.print(o.json, run, () => runText(run));
        return;
      }
      const r = await api.get<{ runs: RunSummary[]; total: number; page: number; totalPages: number }>(`/api/workflows/${encodeURIComponent(id)}/runs`, {
        status: o.status,
        page: o.page,
        pageSize: o.pageSize,
      });
      ctx.print(o.json, r, () => {
        const footer = `page ${r.page} of ${Math.max(r.totalPages, 1)}: ${r.total} run${r.total === 1 ? '' : 's'}\n`;
        return r.runs.length === 0 ? `No runs.\n${footer}` : `${table(RUNS, r.runs)}${footer}`;
      });
    });

  workflows
    .command('cancel')
    .summary('cancel a running run')
    .description('Cancels a running run (POST /api/workflows/{id}/runs/{runId}/cancel); exit 1 when it has already ended.')
    .argument('<workflow>', 'the workflow id, or its name')
    .argument('<run>', 'the run id')
    .addOption(jsonOption())
    .action(async (ref: string, runId: string, o: { json?: boolean }) => {
      const api = await ctx.api();
      const id = await workflowId(api, ref);
      const run = await api.post<Run>(`${runPath(id, runId)}/cancel`);
      ctx.print(o.json, run, () => `Cancelled run ${run.runId} (${run.status}).\n`);
    });
}
