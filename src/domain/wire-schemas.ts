/**
 * The JSON Schemas of the agent protocol (`schemas/agent/*.schema.json`) and of the certificate
 * (`schemas/certificate.schema.json`), compiled once with ajv when this module is first imported.
 * They are the one source of those wire contracts: the gateway validates every inbound frame with
 * them, tests validate every outbound frame, and agents in other languages read the same files.
 */
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Ajv2020Import from 'ajv/dist/2020.js';
import addFormatsImport from 'ajv-formats';
import type { ErrorObject, ValidateFunction } from 'ajv';

// ajv and ajv-formats are CommonJS; under NodeNext their default export is `module.exports`,
// whose `.default` is the same function. Take whichever is callable.
type AjvClass = typeof Ajv2020Import.default;
const Ajv2020 = ((Ajv2020Import as unknown as { default?: AjvClass }).default ?? Ajv2020Import) as AjvClass;
type AddFormats = typeof addFormatsImport.default;
const addFormats = ((addFormatsImport as unknown as { default?: AddFormats }).default ?? addFormatsImport) as AddFormats;

/** Frames an agent sends. */
export const INBOUND_FRAME_TYPES = ['hello', 'auth', 'certificate_accept', 'heartbeat', 'intent_result'] as const;
/** Frames the server sends. */
export const OUTBOUND_FRAME_TYPES = [
  'challenge',
  'registration',
  'certificate_offer',
  'ready',
  'heartbeat_ack',
  'update_capabilities',
  'llm_config',
  'skills_config',
  'channel_message_send',
  'intent',
  'error',
] as const;
export type InboundFrameType = (typeof INBOUND_FRAME_TYPES)[number];
export type OutboundFrameType = (typeof OUTBOUND_FRAME_TYPES)[number];
export type FrameType = InboundFrameType | OutboundFrameType;

/** The `schemas/` directory: two levels above this file in src/ (tsx) and in the SDK's package (dist/domain/, beside its copy of the schemas), three in dist/src/. */
function schemasDir(): string {
  const dir = fileURLToPath(new URL('../../schemas/', import.meta.url));
  if (existsSync(`${dir}agent`)) return dir;
  const up = fileURLToPath(new URL('../../../schemas/', import.meta.url));
  if (existsSync(`${up}agent`)) return up;
  throw new Error(`schemas/agent not found near ${dir}`);
}

interface Compiled {
  frames: Record<FrameType, ValidateFunction>;
  certificate: ValidateFunction;
  /** The files as read, by `$id`. */
  documents: Map<string, Record<string, unknown>>;
}

function compileAll(): Compiled {
  const ajv = new Ajv2020({ strict: true, strictRequired: false, allowUnionTypes: true, allErrors: false });
  addFormats(ajv);
  const dir = schemasDir();
  const documents = new Map<string, Record<string, unknown>>();
  const load = (path: string) => {
    const doc = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown> & { $id: string };
    documents.set(doc.$id, doc);
    return doc;
  };
  for (const name of readdirSync(`${dir}agent`).filter((n) => n.endsWith('.schema.json'))) ajv.addSchema(load(`${dir}agent/${name}`));
  ajv.addSchema(load(`${dir}certificate.schema.json`));
  const get = (id: string): ValidateFunction => {
    const v = ajv.getSchema(id);
    if (!v) throw new Error(`schema ${id} is missing`);
    return v;
  };
  const frames = {} as Record<FrameType, ValidateFunction>;
  for (const t of [...INBOUND_FRAME_TYPES, ...OUTBOUND_FRAME_TYPES]) frames[t] = get(`${AGENT_SCHEMA_BASE}${t}.schema.json`);
  return { frames, certificate: get(CERTIFICATE_SCHEMA_ID), documents };
}

const AGENT_SCHEMA_BASE = 'https://steward.dev/schemas/agent/';
const CERTIFICATE_SCHEMA_ID = 'https://steward.dev/schemas/certificate.schema.json';

const compiled = compileAll();

/** The certificate's JSON Schema and the agent protocol's shared definitions it refers to, as read. */
export const certificateSchemaDocuments = (): { certificate: Record<string, unknown>; defs: Record<string, unknown> } => ({
  certificate: compiled.documents.get(CERTIFICATE_SCHEMA_ID)!,
  defs: compiled.documents.get(`${AGENT_SCHEMA_BASE}defs.schema.json`)!,
});

/** One validator per frame type. */
export const frameValidators: Readonly<Record<FrameType, ValidateFunction>> = compiled.frames;
export const validateCertificateShape: ValidateFunction = compiled.certificate;

const INBOUND = new Set<string>(INBOUND_FRAME_TYPES);
const OUTBOUND = new Set<string>(OUTBOUND_FRAME_TYPES);
export const isInboundType = (t: unknown): t is InboundFrameType => typeof t === 'string' && INBOUND.has(t);
export const isOutboundType = (t: unknown): t is OutboundFrameType => typeof t === 'string' && OUTBOUND.has(t);

/** A short message naming the first schema violation, e.g. `/sinceLastSync/promptTokens must be integer`. */
export function describeSchemaErrors(errors: ErrorObject[] | null | undefined): string {
  const e = errors?.[0];
  if (!e) return 'invalid';
  const where = e.instancePath || '/';
  if (e.keyword === 'required') return `${where} is missing '${(e.params as { missingProperty: string }).missingProperty}'`;
  if (e.keyword === 'enum') return `${where} must be one of ${JSON.stringify((e.params as { allowedValues: unknown[] }).allowedValues)}`;
  return `${where} ${e.message ?? 'is invalid'}`;
}
