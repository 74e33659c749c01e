/**
 * A minimal WebSocket client (RFC 6455) for the load generators: text frames, close, ping/pong,
 * over a plain `net` socket. The load generators share two cores with the server under test,
 * so every microsecond they spend is one the server does not get; the `ws` package's client
 * (an http.ClientRequest per connection, events, buffers) costs several times more per
 * connection and per frame than this.
 *
 * Client frames are masked as the RFC requires, with a zero masking key (a legal key that leaves
 * the payload bytes as they are, which spares an XOR pass per frame); this is a load generator
 * talking to a server on loopback, not a browser on a shared network.
 */
import { connect, type Socket } from 'node:net';
import { randomBytes } from 'node:crypto';

export interface WsHandlers {
  onOpen(): void;
  onMessage(text: string): void;
  onClose(): void;
  onError(err: Error): void;
}

const OP_TEXT = 0x1;
const OP_CLOSE = 0x8;
const OP_PING = 0x9;
const OP_PONG = 0xa;

export class MiniWebSocket {
  private readonly socket: Socket;
  private upgraded = false;
  private buf: Buffer = Buffer.alloc(0);
  private closed = false;

  constructor(url: string, localAddress: string | undefined, private readonly h: WsHandlers) {
    const u = new URL(url);
    const port = Number(u.port || 80);
    this.socket = connect({ host: u.hostname, port, localAddress });
    this.socket.setNoDelay(true);
    this.socket.on('connect', () => {
      const key = randomBytes(16).toString('base64');
      this.socket.write(
        `GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
    });
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('error', (err) => {
      if (!this.closed) h.onError(err);
    });
    this.socket.on('close', () => this.finish());
  }

  /** Sends a text frame of ASCII text under 126 bytes (a heartbeat): written straight into the frame. */
  sendAscii(text: string): void {
    const n = text.length;
    if (n >= 126) return this.send(text);
    if (this.closed || !this.upgraded) return;
    const frame = Buffer.allocUnsafe(6 + n);
    frame[0] = 0x80 | OP_TEXT;
    frame[1] = 0x80 | n;
    frame.writeUInt32BE(0, 2); // masking key 0
    frame.write(text, 6, 'latin1');
    this.socket.write(frame);
  }

  send(text: string): void {
    if (this.closed || !this.upgraded) return;
    const payload = Buffer.from(text, 'utf8');
    const n = payload.length;
    const headerLen = n < 126 ? 6 : n < 65536 ? 8 : 14;
    const frame = Buffer.allocUnsafe(headerLen + n);
    frame[0] = 0x80 | OP_TEXT;
    if (n < 126) {
      frame[1] = 0x80 | n;
    } else if (n < 65536) {
      frame[1] = 0x80 | 126;
      frame.writeUInt16BE(n, 2);
    } else {
      frame[1] = 0x80 | 127;
      frame.writeBigUInt64BE(BigInt(n), 2);
    }
    frame.writeUInt32BE(0, headerLen - 4); // masking key 0
    payload.copy(frame, headerLen);
    this.socket.write(frame);
  }

  /** Drops the connection without a closing handshake (as a network failure would). */
  terminate(): void {
    this.socket.destroy();
    this.finish();
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.h.onClose();
  }

  private control(op: number, payload: Buffer): void {
    const frame = Buffer.allocUnsafe(6 + payload.length);
    frame[0] = 0x80 | op;
    frame[1] = 0x80 | payload.length;
    frame.writeUInt32BE(0, 2);
    payload.copy(frame, 6);
    this.socket.write(frame);
  }

  private onData(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    if (!this.upgraded) {
      const end = this.buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = this.buf.subarray(0, end).toString('latin1');
      if (!head.startsWith('HTTP/1.1 101')) {
        this.h.onError(new Error(`upgrade refused: ${head.split('\r\n')[0]}`));
        return this.terminate();
      }
      this.upgraded = true;
      this.buf = this.buf.subarray(end + 4);
      this.h.onOpen();
    }
    while (this.buf.length >= 2 && !this.closed) {
      const b0 = this.buf[0]!;
      const b1 = this.buf[1]!;
      let len = b1 & 0x7f;
      let off = 2;
      if (len === 126) {
        if (this.buf.length < 4) return;
        len = this.buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (this.buf.length < 10) return;
        len = Number(this.buf.readBigUInt64BE(2));
        off = 10;
      }
      if (this.buf.length < off + len) return;
      const payload = this.buf.subarray(off, off + len);
      this.buf = this.buf.subarray(off + len);
      const op = b0 & 0x0f;
      if (op === OP_TEXT) this.h.onMessage(payload.toString('utf8'));
      else if (op === OP_PING) this.control(OP_PONG, payload);
      else if (op === OP_CLOSE) {
        this.socket.end();
        this.finish();
      }
      // The server sends neither fragments nor binary frames on this protocol.
    }
  }
}
