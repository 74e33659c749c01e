/**
 * The WorkflowDefinition (interface §2.12): its JSON Schema (`schemas/workflow-definition.schema.json`,
 * compiled once with ajv) and the rules the schema cannot say. A definition is refused with a
 * message naming the step when
 *
 * - it breaks the schema (unknown field, missing id/name/action/params, onError not
 *   stop/continue/retry, ...);
 * - two steps share an id;
 * - dependsOn names a step that does not exist, or the dependencies form a cycle;
 * - an interpolation expression is malformed, or names a step the step does not depend on
 *   (directly or through other steps), whose output could not exist yet;
 * - a condition does not parse as CEL.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Ajv2020Import from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { findReferences, InterpolationError } from './interpolation.js';
import { ConditionError, parseCondition } from './conditions.js';
import { ancestorsOf, findCycle } from './graph.js';
import { inlineRefs, jsonSchemaView } from '../json-schema-view.js';

export type OnError = 'stop' | 'continue' | 'retry';

export interface WorkflowStep {
  id: string;
  name: string;
  agentDid?: string;
  action: string;
  params: Record<string, unknown>;
  dependsOn?: string[];
  condition?: string;
  onError?: OnError;
  retries?: number;
}

export interface WorkflowDefinition {
  steps: WorkflowStep[];
  triggers?: Record<string, unknown>[];
  variables?: Record<string, unknown>;
}

/** Default of `retries` (interface §2.12). */
export const DEFAULT_RETRIES = 3;

export class DefinitionError extends Error {
  override name = 'DefinitionError';
}

type AjvClass = typeof Ajv2020Import.default;
const Ajv2020 = ((Ajv2020Import as unknown as { default?: AjvClass }).default ?? Ajv2020Import) as AjvClass;

function schemaPath(): string {
  for (const rel of ['../../../schemas/', '../../../../schemas/']) {
    const p = fileURLToPath(new URL(`${rel}workflow-definition.schema.json`, import.meta.url));
    if (existsSync(p)) return p;
  }
  throw new Error('schemas/workflow-definition.schema.json not found');
}

const definitionSchema = JSON.parse(readFileSync(schemaPath(), 'utf8')) as Record<string, unknown>;
const validateShape: ValidateFunction = new Ajv2020({ strict: true, allErrors: false }).compile(definitionSchema);

/** A definition in a view (the workflow detail): checked and described by schemas/workflow-definition.schema.json. */
export const WorkflowDefinitionView = jsonSchemaView<WorkflowDefinition>('WorkflowDefinition', inlineRefs(definitionSchema), (value) =>
  validateShape(value) ? null : describeShapeError(value, validateShape.errors),
);

/** Checks a definition; throws DefinitionError whose message names the step at fault. */
export function validateDefinition(input: unknown): WorkflowDefinition {
  if (!validateShape(input)) throw new DefinitionError(describeShapeError(input, validateShape.errors));
  const def = input as WorkflowDefinition;
  const ids = new Set<string>();
  for (const step of def.steps) {
    if (ids.has(step.id)) throw new DefinitionError(`step '${step.id}': the id is used by more than one step`);
    ids.add(step.id);
  }
  for (const step of def.steps) {
    for (const dep of step.dependsOn ?? []) {
      if (!ids.has(dep)) throw new DefinitionError(`step '${step.id}': dependsOn names '${dep}', which is not a step of this workflow`);
    }
  }
  const cycle = findCycle(def.steps);
  if (cycle) {
    throw new DefinitionError(`step '${cycle[0]}': the dependencies form a cycle (${cycle.join(' -> ')} -> ${cycle[0]})`);
  }
  const ancestors = ancestorsOf(def.steps);
  for (const step of def.steps) {
    let refs: ReturnType<typeof findReferences>;
    try {
      refs = findReferences(step.params);
    } catch (err) {
      if (err instanceof InterpolationError) throw new DefinitionError(`step '${step.id}': ${err.message}`);
      throw err;
    }
    for (const { where, ref } of refs) {
      if (ref.root !== 'steps') continue;
      const target = ref.path[0] as string;
      if (!ids.has(target)) {
        throw new DefinitionError(`step '${step.id}': ${where}: {{${ref.source}}} names '${target}', which is not a step of this workflow`);
      }
      if (!ancestors.get(step.id)!.has(target)) {
        throw new DefinitionError(
          `step '${step.id}': ${where}: {{${ref.source}}} reads step '${target}', which '${step.id}' does not depend on (add it to dependsOn)`,
        );
      }
    }
    if (step.condition !== undefined) {
      try {
        parseCondition(step.condition);
      } catch (err) {
        if (err instanceof ConditionError) throw new DefinitionError(`step '${step.id}': the condition does not parse: ${err.message}`);
        throw err;
      }
    }
  }
  return def;
}

/** Names the step of an ajv error by its id when it has one: `step 'b' (steps[1]): onError must be ...`. */
function describeShapeError(input: unknown, errors: ErrorObject[] | null | undefined): string {
  const e = errors?.[0];
  if (!e) return 'the definition is invalid';
  let where = e.instancePath || '';
  let subject = 'definition';
  const m = /^\/steps\/(\d+)(.*)$/.exec(where);
  if (m) {
    const index = Number(m[1]);
    const id = (input as { steps?: Array<{ id?: unknown }> }).steps?.[index]?.id;
    subject = typeof id === 'string' && id ? `step '${id}' (steps[${index}])` : `steps[${index}]`;
    where = m[2]!;
  }
  const field = where.replace(/^\//, '').replace(/\//g, '.');
  const prefix = field ? `${subject}: ${field}` : subject;
  switch (e.keyword) {
    case 'required':
      return `${subject}: '${(e.params as { missingProperty: string }).missingProperty}' is required`;
    case 'additionalProperties':
      return `${prefix}: unknown field '${(e.params as { additionalProperty: string }).additionalProperty}'`;
    case 'pattern':
      if (field === 'agentDid') return `${prefix} must be a DID (did:<method>:<id>, e.g. did:key:z6Mk...)`;
      if (field === 'id') return `${prefix} may hold only letters, digits, '_' and '-' (1 to 64 of them)`;
      return `${prefix} ${e.message ?? 'is invalid'}`;
    case 'enum':
      return `${prefix} must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.join(', ')}`;
    default:
      return `${prefix} ${e.message ?? 'is invalid'}`;
  }
}
