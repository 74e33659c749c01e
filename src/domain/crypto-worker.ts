/**
 * Ed25519 signing and verification on a worker thread, in batches. A gateway verifies one
 * signature per handshake and signs and verifies one per certificate; ten thousand agents
 * reconnecting or re-certified at once is ten to twenty thousand operations (~26 µs to sign,
 * ~70 µs to verify with libsodium), which this takes off the event loop. Jobs gathered during
 * one turn of the loop go to the worker as one message (one transferred buffer) and come back as
 * one buffer of results, in order.
 *
 * The worker runs the same implementation as the process (`ed25519()`: libsodium, else
 * OpenSSL). It is unref'd while nothing is pending, so it never keeps a process alive. Signing
 * keys are registered once (`offThreadSigner`) and kept by the worker, which lives inside this
 * process; it sends back signatures only. If the worker fails, pending and later jobs run on
 * the calling thread.
 */
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { ed25519, type SigningKey } from './ed25519.js';

/** Jobs sent to the worker in one message at most. */
const MAX_BATCH = 256;
/** Bytes of a job before its message: kind, public key or signer number, signature, length. */
const HEAD = 1 + 32 + 64 + 4;
/** Bytes of a job's result: a success byte and a signature. */
const OUT = 1 + 64;
const VERIFY = 0;
const SIGN = 1;

interface Job {
  kind: typeof VERIFY | typeof SIGN;
  /** Public key (verify). */
  publicKey: Uint8Array | null;
  /** Signer number (sign). */
  signer: number;
  data: Uint8Array;
  signature: Uint8Array | null;
  /** out[0] is 1 for a valid signature or a signing done; a signature made is out[1..65]. */
  resolve: (out: Uint8Array) => void;
}

// Plain JavaScript (CommonJS, run with `eval`), so it needs no loader and no build step: a
// worker does not inherit the TypeScript loader of a process run with tsx, so it cannot import
// ed25519.ts, and this repeats its few calls to libsodium and node:crypto.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const crypto = require('node:crypto');
const sodium = workerData.sodiumPath ? require(workerData.sodiumPath) : null;
const SPKI = Buffer.from('302a300506032b6570032100', 'hex');
const PKCS8 = Buffer.from('302e020100300506032b657004220420', 'hex');
const signers = [];
function signingKey(seed) {
  if (!sodium) return crypto.createPrivateKey({ key: Buffer.concat([PKCS8, seed]), format: 'der', type: 'pkcs8' });
  const sk = Buffer.alloc(64);
  sodium.crypto_sign_seed_keypair(Buffer.alloc(32), sk, seed);
  return sk;
}
function verify(pk, m, sig) {
  if (sodium) return sodium.crypto_sign_verify_detached(sig, m, pk);
  return crypto.verify(null, m, crypto.createPublicKey({ key: Buffer.concat([SPKI, pk]), format: 'der', type: 'spki' }), sig);
}
function sign(key, m, into) {
  if (sodium) sodium.crypto_sign_detached(into, m, key);
  else into.set(crypto.sign(null, m, key));
}
parentPort.on('message', (msg) => {
  if (msg.signer) {
    signers[msg.signer.id] = signingKey(Buffer.from(msg.signer.seed));
    return;
  }
  const b = Buffer.from(msg.buf);
  const out = Buffer.alloc(msg.count * ${OUT});
  let o = 0;
  for (let i = 0; i < msg.count; i++) {
    const len = b.readUInt32LE(o + 97);
    const m = b.subarray(o + ${HEAD}, o + ${HEAD} + len);
    const r = i * ${OUT};
    try {
      if (b[o] === ${SIGN}) {
        sign(signers[b.readUInt32LE(o + 1)], m, out.subarray(r + 1, r + ${OUT}));
        out[r] = 1;
      } else {
        out[r] = verify(b.subarray(o + 1, o + 33), m, b.subarray(o + 33, o + 97)) ? 1 : 0;
      }
    } catch {
      out[r] = 0;
    }
    o += ${HEAD} + len;
  }
  parentPort.postMessage({ id: msg.id, out: out.buffer }, [out.buffer]);
});
`;

export class CryptoWorker {
  private worker: Worker | null = null;
  private failed = false;
  private gathering: Job[] = [];
  private flushScheduled = false;
  private nextId = 1;
  private readonly sent = new Map<number, Job[]>();
  /** Signing keys by number, for the worker and for running here if it fails. */
  private readonly signers: Array<{ seed: Uint8Array; key: SigningKey }> = [];
  /** Jobs done on the worker thread and on the calling thread. */
  readonly stats = { onThread: 0, here: 0 };

  verify(publicKey: Uint8Array, data: Uint8Array, signature: Uint8Array): Promise<boolean> {
    if (publicKey.length !== 32 || signature.length !== 64) return Promise.resolve(false);
    return new Promise<boolean>((resolve) =>
      this.enqueue({ kind: VERIFY, publicKey, signer: 0, data, signature, resolve: (out) => resolve(out[0] === 1) }),
    );
  }

  addSigner(seed: Uint8Array): number {
    const key = ed25519().signingKey(seed); // checks the seed
    const id = this.signers.length;
    this.signers.push({ seed: Uint8Array.from(seed), key });
    this.worker?.postMessage({ signer: { id, seed: this.signers[id]!.seed } });
    return id;
  }

  sign(signer: number, data: Uint8Array): Promise<Buffer> {
    return new Promise<Buffer>((resolve, reject) =>
      this.enqueue({
        kind: SIGN,
        publicKey: null,
        signer,
        data,
        signature: null,
        resolve: (out) => (out[0] === 1 ? resolve(Buffer.from(out.subarray(1, OUT))) : reject(new Error('signing failed'))),
      }),
    );
  }

  private enqueue(job: Job): void {
    if (this.failed) return this.runHere([job]);
    this.gathering.push(job);
    if (this.gathering.length >= MAX_BATCH) this.flush();
    else if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  private start(): Worker {
    const sodiumPath = ed25519().name === 'libsodium' ? createRequire(import.meta.url).resolve('sodium-native') : null;
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { sodiumPath } });
    this.signers.forEach((s, id) => worker.postMessage({ signer: { id, seed: s.seed } }));
    worker.on('message', (m: { id: number; out: ArrayBuffer }) => this.done(m.id, new Uint8Array(m.out)));
    const fail = () => this.fail();
    worker.on('error', fail);
    worker.on('exit', fail);
    return worker;
  }

  private flush(): void {
    this.flushScheduled = false;
    const jobs = this.gathering;
    if (jobs.length === 0) return;
    this.gathering = [];
    if (this.failed) return this.runHere(jobs);
    let size = 0;
    for (const j of jobs) size += HEAD + j.data.length;
    const buf = Buffer.allocUnsafeSlow(size);
    let o = 0;
    for (const j of jobs) {
      buf[o] = j.kind;
      if (j.kind === SIGN) buf.fill(0, o + 1, o + 97).writeUInt32LE(j.signer, o + 1);
      else {
        buf.set(j.publicKey!, o + 1);
        buf.set(j.signature!, o + 33);
      }
      buf.writeUInt32LE(j.data.length, o + 97);
      buf.set(j.data, o + HEAD);
      o += HEAD + j.data.length;
    }
    const id = this.nextId++;
    this.sent.set(id, jobs);
    try {
      this.worker ??= this.start();
      this.worker.ref();
      this.worker.postMessage({ id, buf: buf.buffer, count: jobs.length }, [buf.buffer]);
    } catch {
      this.fail();
    }
  }

  private done(id: number, out: Uint8Array): void {
    const jobs = this.sent.get(id);
    if (!jobs) return;
    this.sent.delete(id);
    this.stats.onThread += jobs.length;
    for (let i = 0; i < jobs.length; i++) jobs[i]!.resolve(out.subarray(i * OUT, (i + 1) * OUT));
    if (this.sent.size === 0) this.worker?.unref();
  }

  /** Starts the worker thread now rather than at the first job (it stays unref'd while idle). */
  warm(): void {
    if (this.failed || this.worker) return;
    try {
      this.worker = this.start();
      this.worker.unref();
    } catch {
      this.fail();
    }
  }

  /** Stops the worker thread; what it held and anything later runs on the calling thread. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.fail();
    await worker?.terminate();
  }

  /** The worker is gone: what it held and what comes later runs on this thread. */
  private fail(): void {
    if (this.failed) return;
    this.failed = true;
    this.worker = null;
    for (const jobs of this.sent.values()) this.runHere(jobs);
    this.sent.clear();
  }

  private runHere(jobs: Job[]): void {
    const impl = ed25519();
    this.stats.here += jobs.length;
    for (const j of jobs) {
      const out = new Uint8Array(OUT);
      if (j.kind === VERIFY) out[0] = impl.verify(j.publicKey!, j.data, j.signature!) ? 1 : 0;
      else {
        const s = this.signers[j.signer]!;
        if (s.key.kind !== impl.name) s.key = impl.signingKey(s.seed);
        out.set(impl.sign(s.key, j.data), 1);
        out[0] = 1;
      }
      j.resolve(out);
    }
  }
}

let shared: CryptoWorker | null = null;
const cryptoWorker = () => (shared ??= new CryptoWorker());

/** Verifies on the shared worker thread; resolves false (never rejects) for a bad signature. */
export function verifyOffThread(publicKey: Uint8Array, data: Uint8Array, signature: Uint8Array): Promise<boolean> {
  return cryptoWorker().verify(publicKey, data, signature);
}

/** Starts the shared worker thread ahead of the first job, so a server pays for it at startup. */
export function startCryptoWorker(): void {
  cryptoWorker().warm();
}

/** A signer for one private key (32-byte seed) that signs on the shared worker thread. */
export function offThreadSigner(seed: Uint8Array): (data: Uint8Array) => Promise<Buffer> {
  const w = cryptoWorker();
  const id = w.addSigner(seed);
  return (data) => w.sign(id, data);
}
