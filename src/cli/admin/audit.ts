/**
 * `steward audit`: the activity log (GET /api/audit, global admins), newest first, with the
 * API's filters.
 */
import type { Command } from 'commander';
import { int, jsonOption } from './options.js';
import { compact, table, time, type Column } from './output.js';
import type { Context } from './context.js';

interface Entry {
  id: string;
  at: string;
  actor: string;
  actorType: string;
  action: string;
  targetType: string | null;
  target: string | null;
  details: Record<string, unknown> | null;
}

const COLUMNS: Column<Entry>[] = [
  { header: 'TIME', value: (e) => time(e.at) },
  { header: 'ACTOR', value: (e) => e.actor },
  { header: 'ACTION', value: (e) => e.action },
  { header: 'TARGET', value: (e) => (e.target ? `${e.targetType ?? ''} ${e.target}`.trim() : '') },
  { header: 'DETAILS', value: (e) => (e.details && Object.keys(e.details).length > 0 ? compact(e.details) : ''), max: 60 },
];

export function registerAudit(program: Command, ctx: Context): void {
  program
    .command('audit')
    .summary('the activity log')
    .description('Shows the activity log, newest first, one page at a time (GET /api/audit; global admins).')
    .option('--actor <did>', "who did it: a DID, or 'system'")
    .option('--action <action>', 'this action, or a prefix ending in * (policy.*)')
    .option('--target-type <type>', 'the kind of target (agent, policy, user, ...)')
    .option('--target <id>', 'the target id or DID')
    .option('--since <time>', 'entries at or after this time (ISO 8601 with a zone, or a date)')
    .option('--until <time>', 'entries before this time')
    .option('--page <n>', 'page number (default 1)', int(1))
    .option('--page-size <n>', 'entries per page (default 50, at most 200)', int(1, 200))
    .addOption(jsonOption())
    .action(
      async (o: { actor?: string; action?: string; targetType?: string; target?: string; since?: string; until?: string; page?: number; pageSize?: number; json?: boolean }) => {
        const api = await ctx.api();
        const r = await api.get<{ entries: Entry[]; total: number; page: number; totalPages: number }>('/api/audit', {
          actor: o.actor,
          action: o.action,
          targetType: o.targetType,
          target: o.target,
          since: o.since,
          until: o.until,
          page: o.page,
          pageSize: o.pageSize,
        });
        ctx.print(o.json, r, () => {
          const footer = `page ${r.page} of ${Math.max(r.totalPages, 1)}: ${r.total} entr${r.total === 1 ? 'y' : 'ies'}\n`;
          return r.entries.length === 0 ? `No entries match.\n${footer}` : `${table(COLUMNS, r.entries)}${footer}`;
        });
      },
    );
}
