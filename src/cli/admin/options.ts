/**
 * Parsers of option values shared by the command groups. A bad value is commander's
 * InvalidArgumentError: a usage error (exit 2) that names the option.
 */
import { InvalidArgumentError, Option } from 'commander';
import { CAPABILITIES } from '../../domain/capabilities.js';

export function int(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (v: string): number => {
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min}${max === Number.MAX_SAFE_INTEGER ? '' : ` to ${max}`}`);
    }
    return Number(v);
  };
}

/** A comma-separated list (`a,b`); empty items dropped. */
export const csv = (v: string): string[] =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** A comma-separated list of capability values. */
export function capabilities(v: string): string[] {
  const xs = csv(v);
  const unknown = xs.filter((x) => !(CAPABILITIES as readonly string[]).includes(x));
  if (unknown.length > 0) throw new InvalidArgumentError(`unknown capabilit${unknown.length > 1 ? 'ies' : 'y'} ${unknown.join(', ')} (known: ${CAPABILITIES.join(', ')})`);
  return xs;
}

/** A JSON object given as text. */
export function jsonObject(v: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(v);
  } catch (err) {
    throw new InvalidArgumentError(`not JSON: ${(err as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new InvalidArgumentError('expected a JSON object, such as {"key": "value"}');
  return parsed as Record<string, unknown>;
}

export const jsonOption = () => new Option('--json', "print the API's JSON answer instead of a table");
