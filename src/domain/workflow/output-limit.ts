/**
 * Bounds on what a run keeps of its steps' outputs. A run is one actor whose snapshot holds every
 * step's output, and the store holds a document of at most 16 MiB: a broadcast to many agents,
 * each answering with up to a frame's worth, would otherwise make the snapshot too large to
 * store. An output larger than the step's limit, or than what is left of the run's budget, is
 * kept as a marker saying so, with the beginning of its JSON text:
 *
 *   {"truncated": true, "bytes": 3145728, "limit": 1048576, "preview": "{\"items\":[..."}
 *
 * A broadcast's output (each agent's DID to `{ok, output}` or `{ok: false, error}`) is bounded
 * agent by agent, largest output first, so every agent's ok and error stay visible.
 */

export interface TruncatedOutput {
  truncated: true;
  /** Size of the output's JSON text, in bytes (UTF-8). */
  bytes: number;
  /** The limit it was over. */
  limit: number;
  /** The beginning of its JSON text. */
  preview: string;
}

/** Characters of an output's JSON text a marker keeps. */
export const PREVIEW_CHARS = 1024;

/** Whether a value is the marker of an output that was too large to keep. */
export function isTruncatedOutput(v: unknown): v is TruncatedOutput {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const o = v as Record<string, unknown>;
  return (
    o.truncated === true &&
    typeof o.bytes === 'number' &&
    typeof o.limit === 'number' &&
    typeof o.preview === 'string' &&
    Object.keys(o).length === 4
  );
}

/** Bytes of a value's JSON text (UTF-8); 4 for undefined (it is kept as null). */
export function jsonBytes(value: unknown): number {
  return value === undefined ? 4 : Buffer.byteLength(JSON.stringify(value));
}

function marker(text: string, bytes: number, limit: number): TruncatedOutput {
  // A preview never ends in half a surrogate pair.
  let preview = text.slice(0, PREVIEW_CHARS);
  const last = preview.charCodeAt(preview.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) preview = preview.slice(0, -1);
  return { truncated: true, bytes, limit, preview };
}

/** The output as a step keeps it: itself when its JSON text fits in `limit` bytes, else a marker. */
export function boundOutput(output: unknown, limit: number): { output: unknown; bytes: number } {
  if (output === undefined || output === null) return { output: null, bytes: 4 };
  const text = JSON.stringify(output);
  const bytes = Buffer.byteLength(text);
  if (bytes <= limit) return { output, bytes };
  const m = marker(text, bytes, limit);
  return { output: m, bytes: jsonBytes(m) };
}

export interface BroadcastResult {
  ok: boolean;
  output?: unknown;
  error?: string;
}

/**
 * A broadcast's output within `limit` bytes: the agents' outputs are replaced by markers, largest
 * first, until the whole fits. Every agent keeps its entry (ok, error); when even that does not
 * fit (thousands of agents), the whole output becomes one marker.
 */
export function boundBroadcast(results: Record<string, BroadcastResult>, limit: number): { output: unknown; bytes: number } {
  const whole = JSON.stringify(results);
  let bytes = Buffer.byteLength(whole);
  if (bytes <= limit) return { output: results, bytes };
  const sized = Object.entries(results)
    .filter(([, r]) => r.ok && r.output !== undefined && r.output !== null)
    .map(([did, r]) => {
      const text = JSON.stringify(r.output);
      return { did, text, bytes: Buffer.byteLength(text) };
    })
    .sort((a, b) => b.bytes - a.bytes);
  const out: Record<string, BroadcastResult> = { ...results };
  for (const s of sized) {
    if (bytes <= limit) break;
    const m = marker(s.text, s.bytes, limit);
    out[s.did] = { ...results[s.did]!, output: m };
    bytes += jsonBytes(m) - s.bytes;
  }
  if (bytes <= limit) return { output: out, bytes };
  const m = marker(whole, Buffer.byteLength(whole), limit);
  return { output: m, bytes: jsonBytes(m) };
}
