/**
 * `steward registrations list|approve|reject`: the agents that await a global admin's decision
 * (GET /api/registrations, POST /api/registrations/{id}/approve and /reject).
 */
import type { Command } from 'commander';
import { capabilities, jsonOption } from './options.js';
import { list, table, time, type Column } from './output.js';
import type { Context } from './context.js';

interface Registration {
  id: string;
  name: string;
  agentDid: string;
  version: string;
  requestedCapabilities: string[];
  requestedAt: string;
}

const COLUMNS: Column<Registration>[] = [
  { header: 'ID', value: (r) => r.id },
  { header: 'NAME', value: (r) => r.name, max: 32 },
  { header: 'DID', value: (r) => r.agentDid },
  { header: 'REQUESTED CAPABILITIES', value: (r) => list(r.requestedCapabilities), max: 60 },
  { header: 'REQUESTED AT', value: (r) => time(r.requestedAt) },
];

export function registerRegistrations(program: Command, ctx: Context): void {
  const regs = program
    .command('registrations')
    .summary('agents awaiting approval: list, approve, reject')
    .description('Pending agent registrations (global admins): list them, approve one with a set of capabilities, reject one.');

  regs
    .command('list')
    .summary('list pending registrations')
    .description('Lists pending registrations, oldest first (GET /api/registrations).')
    .addOption(jsonOption())
    .action(async (o: { json?: boolean }) => {
      const api = await ctx.api();
      const r = await api.get<{ registrations: Registration[]; availableCapabilities: string[] }>('/api/registrations');
      ctx.print(o.json, r, () =>
        r.registrations.length === 0
          ? 'No pending registrations.\n'
          : `${table(COLUMNS, r.registrations)}${r.registrations.length} pending; approve with: ${ctx.cmd} registrations approve <id> --capabilities a,b\n`,
      );
    });

  regs
    .command('approve')
    .summary('approve one with a set of capabilities')
    .description('Approves a pending registration with these capabilities, a subset of those it requested (POST /api/registrations/{id}/approve).')
    .argument('<id>', 'the registration id (see registrations list)')
    .requiredOption('-c, --capabilities <list>', 'capabilities to approve, comma-separated ("" for none)', capabilities)
    .addOption(jsonOption())
    .action(async (id: string, o: { capabilities: string[]; json?: boolean }) => {
      const api = await ctx.api();
      const r = await api.post<{ success: boolean; agentId: string }>(`/api/registrations/${encodeURIComponent(id)}/approve`, { capabilities: o.capabilities });
      ctx.print(o.json, r, () => `Approved registration ${id}: agent ${r.agentId} with ${o.capabilities.length ? o.capabilities.join(', ') : 'no capabilities'}.\n`);
    });

  regs
    .command('reject')
    .summary('reject one, with a reason')
    .description('Rejects a pending registration; the reason is stored and sent to the waiting agent (POST /api/registrations/{id}/reject).')
    .argument('<id>', 'the registration id (see registrations list)')
    .requiredOption('-r, --reason <text>', 'why')
    .addOption(jsonOption())
    .action(async (id: string, o: { reason: string; json?: boolean }) => {
      const api = await ctx.api();
      const r = await api.post<{ success: boolean }>(`/api/registrations/${encodeURIComponent(id)}/reject`, { reason: o.reason });
      ctx.print(o.json, r, () => `Rejected registration ${id}.\n`);
    });
}
