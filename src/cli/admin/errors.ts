/**
 * Exit codes of the admin commands (docs/cli.md), one error type that carries one, and the
 * words for a failed call. Scripts rely on these numbers: change none of them.
 */
export const EXIT = {
  ok: 0,
  /** The server refused or failed (its message is shown), an intent or a waited-for run failed, or a local file is unusable. */
  failed: 1,
  /** Unknown command or option, missing or malformed argument. */
  usage: 2,
  /** Not logged in, or the session has expired or was ended. */
  session: 3,
  /** No such agent, registration, policy, workflow or run. */
  notFound: 4,
  /** The server cannot be reached. */
  unreachable: 5,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export class CliError extends Error {
  constructor(
    readonly exitCode: ExitCode,
    message: string,
  ) {
    super(message);
  }
}

export const usageError = (message: string) => new CliError(EXIT.usage, message);
