/**
 * `steward policies list|create|revoke` (global admins): GET and POST /api/policies,
 * DELETE /api/policies/{id}. Connected agents whose effective policy changes are re-certified
 * at once; the output names them.
 */
import type { Command } from 'commander';
import { agentDid, workspaceSlugs } from './resolve.js';
import { capabilities, csv, int, jsonOption } from './options.js';
import { list, table, time, type Column } from './output.js';
import { usageError } from './errors.js';
import type { Context } from './context.js';

interface Policy {
  id: string;
  agentDid: string | null;
  workspaceId: string | null;
  capabilities: string[];
  resourceLimits: { maxTokensPerDay?: number; maxRequestsPerHour?: number; allowedDomains?: string[] } | null;
  expiresAt: string | null;
  createdBy: string;
  createdAt: string;
}

const columns = (slug: (id: string) => string): Column<Policy>[] => [
  { header: 'ID', value: (p) => p.id },
  { header: 'SCOPE', value: (p) => (p.agentDid ? `agent ${p.agentDid}` : `workspace ${slug(p.workspaceId!)}`) },
  { header: 'CAPABILITIES', value: (p) => list(p.capabilities), max: 60 },
  { header: 'LIMITS', value: (p) => limitsText(p.resourceLimits), max: 48 },
  { header: 'EXPIRES', value: (p) => time(p.expiresAt) },
  { header: 'CREATED', value: (p) => time(p.createdAt) },
];

function limitsText(l: Policy['resourceLimits']): string {
  if (!l) return '';
  const parts: string[] = [];
  if (l.maxTokensPerDay !== undefined) parts.push(`${l.maxTokensPerDay} tokens/day`);
  if (l.maxRequestsPerHour !== undefined) parts.push(`${l.maxRequestsPerHour} intents/h`);
  if (l.allowedDomains) parts.push(`domains ${l.allowedDomains.join(',')}`);
  return parts.join('; ');
}

const sentToText = (sentTo: string[]) =>
  sentTo.length === 0 ? 'No connected agent was affected (agents get it when they next connect).' : `Re-certified ${sentTo.length} connected agent${sentTo.length === 1 ? '' : 's'}: ${sentTo.join(', ')}.`;

export function registerPolicies(program: Command, ctx: Context): void {
  const policies = program
    .command('policies')
    .summary('capability policies: list, create, revoke')
    .description('Policies (global admins): capabilities and limits for an agent or a workspace, carried in co-signed certificates.');

  policies
    .command('list')
    .summary('list policies')
    .description('Lists policies, newest first (GET /api/policies); expired ones only with --include-expired.')
    .option('-a, --agent <agent>', "only this agent's (DID or name)")
    .option('-w, --workspace <workspace>', "only this workspace's (id or slug)")
    .option('--include-expired', 'expired policies too')
    .addOption(jsonOption())
    .action(async (o: { agent?: string; workspace?: string; includeExpired?: boolean; json?: boolean }) => {
      const api = await ctx.api();
      const r = await api.get<{ policies: Policy[] }>('/api/policies', {
        agentDid: o.agent === undefined ? undefined : await agentDid(api, o.agent),
        workspaceId: o.workspace,
        includeExpired: o.includeExpired ? true : undefined,
      });
      const slug = o.json || !r.policies.some((p) => p.workspaceId) ? (id: string) => id : await workspaceSlugs(api);
      ctx.print(o.json, r, () => (r.policies.length === 0 ? 'No policies.\n' : table(columns(slug), r.policies)));
    });

  policies
    .command('create')
    .summary('create a policy for an agent or a workspace')
    .description(
      'Creates a policy for an agent or a workspace (POST /api/policies). Connected agents whose effective policy\n' +
        'changes get a new certificate at once; the output lists them.',
    )
    .option('-a, --agent <agent>', 'for this agent (DID or name)')
    .option('-w, --workspace <workspace>', 'for this workspace (id or slug)')
    .requiredOption('-c, --capabilities <list>', 'capabilities granted, comma-separated', capabilities)
    .option('--max-tokens-per-day <n>', 'LLM tokens a day (prompt + completion; resets at UTC midnight)', int(1))
    .option('--max-requests-per-hour <n>', 'intents executed in any 60 minutes', int(1))
    .option('--allowed-domains <list>', 'hostnames the agent may reach, comma-separated (advisory)', csv)
    .option('--expires-at <time>', 'ISO 8601 time with a zone, or a date (UTC midnight)')
    .addOption(jsonOption())
    .action(
      async (o: {
        agent?: string;
        workspace?: string;
        capabilities: string[];
        maxTokensPerDay?: number;
        maxRequestsPerHour?: number;
        allowedDomains?: string[];
        expiresAt?: string;
        json?: boolean;
      }) => {
        if (o.agent === undefined && o.workspace === undefined) throw usageError('give --agent or --workspace: whom the policy is for');
        if (o.capabilities.length === 0) throw usageError('--capabilities: a policy grants at least one capability');
        const api = await ctx.api();
        const limits = {
          ...(o.maxTokensPerDay !== undefined ? { maxTokensPerDay: o.maxTokensPerDay } : {}),
          ...(o.maxRequestsPerHour !== undefined ? { maxRequestsPerHour: o.maxRequestsPerHour } : {}),
          ...(o.allowedDomains !== undefined ? { allowedDomains: o.allowedDomains } : {}),
        };
        const r = await api.post<{ policy: Policy; sentTo: string[] }>('/api/policies', {
          ...(o.agent !== undefined ? { agentDid: await agentDid(api, o.agent) } : {}),
          ...(o.workspace !== undefined ? { workspaceId: o.workspace } : {}),
          capabilities: o.capabilities,
          ...(Object.keys(limits).length > 0 ? { resourceLimits: limits } : {}),
          ...(o.expiresAt !== undefined ? { expiresAt: o.expiresAt } : {}),
        });
        ctx.print(o.json, r, () => `Created policy ${r.policy.id}.\n${sentToText(r.sentTo)}\n`);
      },
    );

  policies
    .command('revoke')
    .summary('revoke (delete) a policy')
    .description('Deletes a policy (DELETE /api/policies/{id}); connected agents it applied to are re-certified without it.')
    .argument('<id>', 'the policy id (see policies list)')
    .addOption(jsonOption())
    .action(async (id: string, o: { json?: boolean }) => {
      const api = await ctx.api();
      const r = await api.delete<{ ok: boolean; sentTo: string[] }>(`/api/policies/${encodeURIComponent(id)}`);
      ctx.print(o.json, r, () => `Revoked policy ${id}.\n${sentToText(r.sentTo)}\n`);
    });
}
