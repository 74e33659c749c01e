/**
 * `npm start` runs this before the build: a bad setting (PORT=abc) is reported at once, as
 * `steward serve` would report it, instead of after a full build.
 */
import { ConfigError, loadConfig } from '../src/config.js';

try {
  loadConfig(process.env);
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  process.stderr.write(`steward: ${err.message}\n`);
  process.exit(1);
}
