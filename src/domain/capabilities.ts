/**
 * The capabilities of the interface (§2.1): what an agent may be approved for, what a policy or
 * a grant names, and what an intent asks for.
 */
export const CAPABILITIES = [
  'file_access',
  'internet_access',
  'browser_control',
  'api_call',
  'mail_send',
  'code_execution',
  'system_command',
  'agent_communication',
  'knowledge_search',
] as const;
export type Capability = (typeof CAPABILITIES)[number];

const KNOWN = new Set<string>(CAPABILITIES);

export const isCapability = (value: string): value is Capability => KNOWN.has(value);

/** The first value that is not a capability, or null when all are. */
export function unknownCapability(values: readonly string[]): string | null {
  return values.find((v) => !KNOWN.has(v)) ?? null;
}
