/**
 * The frames of /ws/agent that are made or read without going through objects: a certificate
 * offer or `ready` carries the exact bytes that were signed, a heartbeat_ack is written into a
 * scratch buffer, and the canonical heartbeat is read without parsing. These are the frames a
 * held fleet sends and receives most (docs/performance.md).
 */
import { readDigits, writeDigits } from '../../domain/decimal.js';

/** The start of a certificate_offer frame; the canonical certificate text follows. */
export const OFFER_HEAD = '{"type":"certificate_offer","certificate":';

/** Where frames that carry a certificate are put together (grown when one does not fit). */
let certFrameScratch = Buffer.allocUnsafeSlow(4096);

/**
 * `head`, the certificate's canonical text and `tail`, as one frame in a scratch buffer: the
 * certificate goes out as the exact bytes that were signed, and no buffer is made per frame for
 * the parts or their concatenation (two such frames per agent when ten thousand are
 * re-certified). The view returned is valid until the next call; uWS copies what it sends at once.
 */
export function certificateFrame(head: string, certificate: Buffer, tail: string): Buffer {
  const most = (head.length + tail.length) * 3 + certificate.length;
  if (most > certFrameScratch.length) certFrameScratch = Buffer.allocUnsafeSlow(Math.max(most, certFrameScratch.length * 2));
  const buf = certFrameScratch;
  let n = buf.write(head, 0, 'utf8');
  n += certificate.copy(buf, n);
  n += buf.write(tail, n, 'utf8');
  return buf.subarray(0, n);
}

const ACK_HEAD = '{"type":"heartbeat_ack","seq":';
/** Where heartbeat_ack frames are written, and a view of it for each frame length. */
const ackScratch = Buffer.alloc(ACK_HEAD.length + 17);
ackScratch.write(ACK_HEAD, 'latin1');
const ackViews: Buffer[] = [];

/**
 * The heartbeat_ack frame for `seq` (a safe non-negative integer, as the heartbeat schema
 * requires), written into a scratch buffer: a frame per heartbeat, and no string made for it.
 * The view returned is valid until the next call (uWS copies what it sends at once).
 */
export function heartbeatAckFrame(seq: number): Buffer {
  const end = writeDigits(ackScratch, ACK_HEAD.length, seq);
  ackScratch[end] = 0x7d; // }
  return (ackViews[end + 1] ??= ackScratch.subarray(0, end + 1));
}

/** Frames are decoded from uWS's ArrayBuffer directly (a Buffer view would be one more object per frame); a BOM is kept, as Buffer#toString does. */
export const utf8 = new TextDecoder('utf-8', { ignoreBOM: true });

const HB_HEAD = '{"type":"heartbeat","seq":';
const HB_PROMPT = ',"sinceLastSync":{"promptTokens":';
const HB_COMPLETION = ',"completionTokens":';
/** The values of the heartbeat readCanonicalHeartbeat read last. */
export let hbSeq = 0;
export let hbPrompt = 0;
export let hbCompletion = 0;

/**
 * A heartbeat written exactly as JSON.stringify writes the frame of the protocol (fields in their
 * order, no spaces; the SDK's and most agents' form), read without parsing it into objects: the
 * frame a held fleet sends most, and what it would otherwise allocate most. Its numbers must be
 * JSON integers of at most 15 digits (seq) and 12 digits (token counts, whose maximum is 10^12),
 * so whatever this accepts the schema accepts too. True with hbSeq, hbPrompt and hbCompletion
 * set; false for anything else, which is then parsed and validated in full.
 */
export function readCanonicalHeartbeat(text: string): boolean {
  if (!text.startsWith(HB_HEAD)) return false;
  let at = HB_HEAD.length;
  let end = digitsEnd(text, at, 15);
  if (end < 0 || !text.startsWith(HB_PROMPT, end)) return false;
  hbSeq = readDigits(text, at, end);
  at = end + HB_PROMPT.length;
  end = digitsEnd(text, at, 12);
  if (end < 0 || !text.startsWith(HB_COMPLETION, end)) return false;
  hbPrompt = readDigits(text, at, end);
  at = end + HB_COMPLETION.length;
  end = digitsEnd(text, at, 12);
  if (end < 0 || end + 2 !== text.length || text.charCodeAt(end) !== 0x7d || text.charCodeAt(end + 1) !== 0x7d) return false;
  hbCompletion = readDigits(text, at, end);
  return true;
}

/** Where the JSON integer (digits, no leading zero) starting at `from` ends; -1 when there is none or it has more than `max` digits. */
function digitsEnd(text: string, from: number, max: number): number {
  let i = from;
  for (; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (ch < 0x30 || ch > 0x39) break;
  }
  const n = i - from;
  return n === 0 || n > max || (n > 1 && text.charCodeAt(from) === 0x30) ? -1 : i;
}
