/**
 * How to name the `steward` command in a text a person will run: the form that works where they
 * read it. A process started through npm in a checkout (`npm start`, `npm run steward -- …`) has
 * no `steward` on the PATH, so its hints say `npm run steward -- …`; anything else (the installed
 * command, the Docker image) says `steward …`.
 */
export type StewardCommand = 'steward' | 'npm run steward --';

/** The npm scripts of package.json that run Steward from a checkout. */
const CHECKOUT_SCRIPTS = new Set(['start', 'steward']);

export function stewardCommand(env: NodeJS.ProcessEnv): StewardCommand {
  return CHECKOUT_SCRIPTS.has(env.npm_lifecycle_event ?? '') ? 'npm run steward --' : 'steward';
}
