/** The top-level commands that src/cli/admin/ runs, for the dispatcher (src/cli/index.ts) to route without loading them. */
export const ADMIN_COMMANDS: ReadonlySet<string> = new Set(['login', 'logout', 'whoami', 'agents', 'registrations', 'policies', 'intents', 'workflows', 'audit']);
