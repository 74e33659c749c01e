/**
 * MongoDB's wire protocol, the part the official driver speaks: a 16-byte header, then OP_MSG
 * (flag bits and sections: one body document, then document sequences), or the legacy OP_QUERY a
 * driver may send for its first `hello`, answered by OP_REPLY. BSON through the driver's own
 * `bson` (re-exported by `mongodb`). Anything else is a protocol error: the caller closes the
 * connection.
 */
import { BSON, type Document } from 'mongodb';

export const OP_REPLY = 1;
export const OP_QUERY = 2004;
export const OP_COMPRESSED = 2012;
export const OP_MSG = 2013;

/** The largest message accepted (and announced in `hello` as maxMessageSizeBytes). */
export const MAX_MESSAGE_BYTES = 48_000_000;
const HEADER_BYTES = 16;

const CHECKSUM_PRESENT = 1 << 0;
const MORE_TO_COME = 1 << 1;
/** Flag bits a client may set; any other required bit (0-15) unknown to us is an error. */
const KNOWN_FLAGS = CHECKSUM_PRESENT | MORE_TO_COME | (1 << 16);

/** A malformed message: the connection that sent it is closed. */
export class ProtocolError extends Error {}

export interface Request {
  requestId: number;
  opCode: typeof OP_MSG | typeof OP_QUERY;
  /** The command: OP_MSG's body with its document sequences merged in as arrays, or OP_QUERY's query. */
  command: Document;
  /** OP_MSG moreToCome: the client expects no reply (an unacknowledged write). */
  noReply: boolean;
}

/**
 * Splits complete messages off the front of `buffer`. Returns the parsed requests and the bytes
 * left over (a message not yet complete). Throws ProtocolError for a message it cannot accept.
 */
export function readMessages(buffer: Buffer): { requests: Request[]; rest: Buffer } {
  const requests: Request[] = [];
  let at = 0;
  while (buffer.length - at >= 4) {
    const length = buffer.readInt32LE(at);
    if (length < HEADER_BYTES || length > MAX_MESSAGE_BYTES) {
      throw new ProtocolError(`message length ${length} is outside 16..${MAX_MESSAGE_BYTES} bytes`);
    }
    if (buffer.length - at < length) break;
    requests.push(parseMessage(buffer.subarray(at, at + length)));
    at += length;
  }
  return { requests, rest: buffer.subarray(at) };
}

function parseMessage(msg: Buffer): Request {
  if (msg.length < HEADER_BYTES) throw new ProtocolError('message shorter than its header');
  const requestId = msg.readInt32LE(4);
  const opCode = msg.readInt32LE(12);
  const body = msg.subarray(HEADER_BYTES);
  if (opCode === OP_MSG) return { requestId, opCode, ...parseOpMsg(body) };
  if (opCode === OP_QUERY) return { requestId, opCode, command: parseOpQuery(body), noReply: false };
  if (opCode === OP_COMPRESSED) throw new ProtocolError('OP_COMPRESSED refused: this server offers no compression');
  throw new ProtocolError(`unknown opcode ${opCode}`);
}

function readDocument(buf: Buffer, at: number): { doc: Document; end: number } {
  if (buf.length - at < 5) throw new ProtocolError('truncated BSON document');
  const size = buf.readInt32LE(at);
  if (size < 5 || at + size > buf.length) throw new ProtocolError(`BSON document of ${size} bytes does not fit its message`);
  try {
    return { doc: BSON.deserialize(buf.subarray(at, at + size)), end: at + size };
  } catch (err) {
    throw new ProtocolError(`malformed BSON: ${(err as Error).message}`);
  }
}

function readCString(buf: Buffer, at: number): { value: string; end: number } {
  const nul = buf.indexOf(0, at);
  if (nul < 0) throw new ProtocolError('unterminated string');
  return { value: buf.toString('utf8', at, nul), end: nul + 1 };
}

function parseOpMsg(body: Buffer): { command: Document; noReply: boolean } {
  if (body.length < 4) throw new ProtocolError('OP_MSG without flag bits');
  const flags = body.readUInt32LE(0);
  if ((flags & 0xffff & ~KNOWN_FLAGS) !== 0) throw new ProtocolError(`OP_MSG with unknown required flag bits ${flags.toString(2)}`);
  const end = flags & CHECKSUM_PRESENT ? body.length - 4 : body.length;
  let command: Document | undefined;
  const sequences: Array<[string, Document[]]> = [];
  for (let at = 4; at < end; ) {
    const kind = body[at++];
    if (kind === 0) {
      if (command) throw new ProtocolError('OP_MSG with two body sections');
      const r = readDocument(body, at);
      command = r.doc;
      at = r.end;
    } else if (kind === 1) {
      if (end - at < 4) throw new ProtocolError('truncated document sequence');
      const size = body.readInt32LE(at);
      const stop = at + size;
      if (size < 5 || stop > end) throw new ProtocolError('document sequence does not fit its message');
      const id = readCString(body, at + 4);
      const docs: Document[] = [];
      for (let p = id.end; p < stop; ) {
        const r = readDocument(body.subarray(0, stop), p);
        docs.push(r.doc);
        p = r.end;
      }
      sequences.push([id.value, docs]);
      at = stop;
    } else {
      throw new ProtocolError(`OP_MSG section of unknown kind ${kind}`);
    }
  }
  if (!command) throw new ProtocolError('OP_MSG without a body section');
  for (const [id, docs] of sequences) command[id] = docs;
  return { command, noReply: (flags & MORE_TO_COME) !== 0 };
}

/** OP_QUERY is accepted for commands only (`<db>.$cmd`), as drivers send `hello` before they know the server. */
function parseOpQuery(body: Buffer): Document {
  const ns = readCString(body, 4);
  if (!ns.value.endsWith('.$cmd')) throw new ProtocolError(`OP_QUERY on ${ns.value}: only commands are served`);
  const { doc } = readDocument(body, ns.end + 8);
  // A legacy command may come wrapped: {$query: {...}, $readPreference: ...}.
  const command = (doc.$query ?? doc.query ?? doc) as Document;
  return { ...command, $db: ns.value.slice(0, -'.$cmd'.length) };
}

let nextRequestId = 1;

function header(length: number, responseTo: number, opCode: number): Buffer {
  const h = Buffer.alloc(HEADER_BYTES);
  h.writeInt32LE(length, 0);
  h.writeInt32LE(nextRequestId++ & 0x7fffffff, 4);
  h.writeInt32LE(responseTo, 8);
  h.writeInt32LE(opCode, 12);
  return h;
}

/** The reply to `request`, in the form it was asked in. */
export function encodeReply(request: Request, reply: Document): Buffer {
  const doc = BSON.serialize(reply);
  if (request.opCode === OP_QUERY) {
    const fixed = Buffer.alloc(20); // responseFlags, cursorID (int64), startingFrom, numberReturned
    fixed.writeInt32LE(1, 16);
    return Buffer.concat([header(HEADER_BYTES + 20 + doc.length, request.requestId, OP_REPLY), fixed, doc]);
  }
  const flags = Buffer.alloc(5); // flag bits 0, then section kind 0
  return Buffer.concat([header(HEADER_BYTES + 5 + doc.length, request.requestId, OP_MSG), flags, doc]);
}
