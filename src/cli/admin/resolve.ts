/**
 * Names for what the API knows by id: an agent may be given by its DID or by its name, a
 * workflow by its id or its name; a workspace is shown by its slug. A name that fits none is "not found" (exit 4); one that fits
 * several is a usage error (exit 2) that lists them, so the caller can pick the id.
 */
import type { Api } from './client.js';
import { CliError, EXIT } from './errors.js';

interface AgentPage {
  agents: Array<{ id: string; name: string }>;
  totalPages: number;
}

/** The DID of the agent `ref` names: a DID as given, else the one visible agent of that exact name. */
export async function agentDid(api: Api, ref: string): Promise<string> {
  if (ref.startsWith('did:')) return ref;
  const named: string[] = [];
  for (let page = 1, pages = 1; page <= pages; page++) {
    const r = await api.get<AgentPage>('/api/agents', { q: ref, page, pageSize: 100 });
    pages = r.totalPages;
    for (const a of r.agents) if (a.name === ref) named.push(a.id);
  }
  if (named.length === 1) return named[0]!;
  if (named.length === 0) throw new CliError(EXIT.notFound, `no agent named '${ref}' (give its DID, or look with '${api.cmd} agents list -q ${ref}')`);
  throw new CliError(EXIT.usage, `${named.length} agents are named '${ref}'; give one's DID:\n  ${named.join('\n  ')}`);
}

/** The id of the workflow `ref` names: its id, else the one visible workflow of that exact name. */
export async function workflowId(api: Api, ref: string): Promise<string> {
  const { workflows } = await api.get<{ workflows: Array<{ id: string; name: string }> }>('/api/workflows');
  if (workflows.some((w) => w.id === ref)) return ref;
  const named = workflows.filter((w) => w.name === ref);
  if (named.length === 1) return named[0]!.id;
  if (named.length === 0) throw new CliError(EXIT.notFound, `no workflow ${ref} (give its id or name; see '${api.cmd} workflows list')`);
  throw new CliError(EXIT.usage, `${named.length} workflows are named '${ref}'; give one's id:\n  ${named.map((w) => w.id).join('\n  ')}`);
}

/**
 * The slug of each workspace the caller may see, by id: tables name a workspace by its slug, as
 * `agents list` does, whatever id the API answered with (an id it cannot see stays an id).
 */
export async function workspaceSlugs(api: Api): Promise<(id: string) => string> {
  const { workspaces } = await api.get<{ workspaces: Array<{ id: string; slug: string }> }>('/api/workspaces');
  const slugs = new Map(workspaces.map((w) => [w.id, w.slug]));
  return (id) => slugs.get(id) ?? id;
}
