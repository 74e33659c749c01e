/**
 * Loaded into every test process by the runner (`node --import`): a promise rejection that
 * nothing handles fails the file. Each one is reported with its stack when it happens (the line
 * starts with UNHANDLED_REJECTION_MARK, which the runner counts as a failure), the suite goes on,
 * and the process exits with code 1. This holds even where the code under test installs a net of
 * its own (as `steward serve` does), which would otherwise hide the rejection from the run.
 */
export const UNHANDLED_REJECTION_MARK = '[unhandled rejection]';

let seen = 0;
process.on('unhandledRejection', (reason: unknown) => {
  seen++;
  const text = reason instanceof Error ? (reason.stack ?? String(reason)) : String(reason);
  process.stderr.write(`\n${UNHANDLED_REJECTION_MARK} ${text}\n`);
});
// uvu sets the exit code when its suites end, so it is set here, last.
process.on('exit', () => {
  if (seen > 0) process.exitCode = 1;
});
