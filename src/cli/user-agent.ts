/**
 * The User-Agent of the `steward` command's requests, so that a person's list of sessions
 * (the dashboard's Sessions page) names it "Steward CLI on linux" instead of fetch's "node".
 */
import { platform } from 'node:os';

export const CLI_USER_AGENT = `steward-cli (${platform()}; Node.js ${process.version})`;
