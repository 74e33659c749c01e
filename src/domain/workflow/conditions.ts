/**
 * Step conditions: CEL expressions (https://cel.dev, evaluated by @bufbuild/cel) over three
 * variables, `variables`, `params` and `steps` (each step as `{status, output, error}`), with the
 * standard functions and the strings extension (`lowerAscii`, `indexOf`, `split`, ...).
 *
 * JSON numbers without a fraction are bound as CEL `int`, others as `double`, so
 * `params.count + 1 > 3` and `steps.a.output.score >= 0.5` both work. A condition must evaluate
 * to a boolean. docs/workflows.md has the language with examples.
 */
import { celEnv, isCelError, parse, plan, type CelInput } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import type { Scope } from './interpolation.js';

export class ConditionError extends Error {
  override name = 'ConditionError';
}

const env = celEnv({ funcs: strings });
type Parsed = ReturnType<typeof parse>;
const parsedCache = new Map<string, Parsed>();
const CACHE_MAX = 2000;

/** Parses a condition; ConditionError with the parser's message when it does not parse. */
export function parseCondition(source: string): Parsed {
  const hit = parsedCache.get(source);
  if (hit) return hit;
  let parsed: Parsed;
  try {
    parsed = parse(source);
  } catch (err) {
    throw new ConditionError(describeParseError(err));
  }
  if (parsedCache.size >= CACHE_MAX) parsedCache.clear();
  parsedCache.set(source, parsed);
  return parsed;
}

function describeParseError(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  // "<input>:1:3: found = but expecting end of input" -> "at 1:3: found = but expecting end of input"
  return msg.replace(/^<input>:(\d+):(\d+):\s*/, 'at $1:$2: ').slice(0, 300);
}

/** Evaluates a condition; ConditionError when evaluation fails or the result is not a boolean. */
export function evaluateCondition(source: string, scope: Scope): boolean {
  const run = plan(env, parseCondition(source));
  let result: unknown;
  try {
    result = run({
      variables: toCel(scope.variables),
      params: toCel(scope.params),
      steps: toCel(scope.steps),
    } as Record<string, CelInput>);
  } catch (err) {
    throw new ConditionError(err instanceof Error ? err.message : String(err));
  }
  if (isCelError(result)) throw new ConditionError(result.message);
  if (typeof result !== 'boolean') throw new ConditionError('the condition must evaluate to true or false');
  return result;
}

/** JSON to CEL input: whole numbers become int (bigint); the rest maps as it is. */
function toCel(value: unknown): CelInput {
  if (typeof value === 'number') return (Number.isSafeInteger(value) ? BigInt(value) : value) as CelInput;
  if (Array.isArray(value)) return value.map(toCel) as CelInput;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toCel(v)])) as CelInput;
  }
  return (value ?? null) as CelInput;
}
