/**
 * JSON logs with pino. Secrets never reach a log line: known secret-bearing keys are redacted
 * wherever they appear (two levels deep), and code never logs request bodies.
 */
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

const SECRET_KEYS = [
  'token',
  'sessionToken',
  'apiKey',
  'api_key',
  'privateKey',
  'secret',
  'password',
  'accessToken',
  'authorization',
  'cookie',
  'configJson',
  'masterKey',
  'virtualKey',
];

export function createLogger(level: LevelWithSilent, destination?: pino.DestinationStream): Logger {
  const paths = SECRET_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`]);
  return pino(
    {
      level,
      base: { service: 'steward' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths, censor: '[redacted]' },
    },
    destination,
  );
}
