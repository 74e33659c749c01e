/**
 * @mentions in a channel message (interface §6): which of the channel's agents a message names,
 * by name or by DID. Pure: the channel service gives the agents and dispatches to them.
 */
export interface AgentRef {
  did: string;
  name: string;
}

const NAME_CHAR = /[\p{L}\p{N}_-]/u;

/**
 * The agents a message mentions: `@<name>` (case-insensitive; the name may hold spaces) or
 * `@<did>`, not preceded or followed by a letter, digit, `_` or `-`. Where two names match at one
 * place (`@ops` and `@ops bot`), the longer one wins. Each agent counts once, in order of appearance.
 */
export function findMentions(content: string, agents: readonly AgentRef[]): AgentRef[] {
  if (!content.includes('@') || agents.length === 0) return [];
  const lower = content.toLowerCase();
  const hits: Array<{ at: number; len: number; agent: AgentRef }> = [];
  for (const agent of agents) {
    for (const handle of [agent.name, agent.did]) {
      const needle = `@${handle.toLowerCase()}`;
      if (needle.length < 2) continue;
      for (let i = lower.indexOf(needle); i >= 0; i = lower.indexOf(needle, i + 1)) {
        const before = i > 0 ? lower[i - 1]! : '';
        const after = lower[i + needle.length] ?? '';
        if ((before === '' || !NAME_CHAR.test(before)) && (after === '' || !NAME_CHAR.test(after))) {
          hits.push({ at: i, len: needle.length, agent });
        }
      }
    }
  }
  // Longest match first at each position; a shorter match inside a longer one does not count.
  hits.sort((a, b) => a.at - b.at || b.len - a.len);
  const out: AgentRef[] = [];
  let coveredTo = -1;
  for (const h of hits) {
    if (h.at < coveredTo) continue;
    coveredTo = h.at + h.len;
    if (!out.some((a) => a.did === h.agent.did)) out.push(h.agent);
  }
  return out;
}
