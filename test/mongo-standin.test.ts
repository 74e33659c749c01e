/**
 * The MongoDB stand-in (tools/mongo-standin) under the official driver and MongoStore: the replica
 * set handshake, cursors across batches, duplicate keys, update pipelines, and the injected
 * faults the driver's retries ride through without a write applied twice; then bad input on a
 * raw socket (each closes its own connection, the server goes on), and the stand-in as its own
 * process (`npm run mongo:standin`), with faults set over its control commands and data kept in
 * `--data` across a restart.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { BSON, MongoClient, MongoServerError, type Document } from 'mongodb';
import { openMongoStore } from '../src/store/mongo.js';
import { StoreUnavailableError, type Doc, type Store } from '../src/store/types.js';
import { startMongoStandin, type MongoStandin } from '../tools/mongo-standin/server.js';
import { OP_COMPRESSED, OP_MSG, OP_QUERY } from '../tools/mongo-standin/wire.js';
import { rejects } from './store-contract.js';
import { tempDir, waitFor } from './helpers.js';

type Counter = Doc & { n: number };

const test = suite('mongodb stand-in');
let standin: MongoStandin;
const logs: string[] = [];
let store: Store;
let client: MongoClient;
let db = 0;

test.before(async () => {
  standin = await startMongoStandin({ log: (line) => logs.push(line) });
  store = await openMongoStore({ uri: standin.uri('faults') });
  client = new MongoClient(standin.uri('raw'), { compressors: ['zlib'] });
  await client.connect();
});

test.after.each(() => {
  standin.faults.clear();
});

test.after(async () => {
  await store?.close();
  await client?.close();
  await standin?.stop();
});

test('the driver finds a one-member replica set primary, with sessions and no compression', async () => {
  const hello = await client.db('admin').command({ hello: 1 });
  assert.is(hello.setName, 'rs0');
  assert.is(hello.isWritablePrimary, true);
  assert.equal(hello.hosts, [`127.0.0.1:${standin.port}`]);
  assert.is(hello.logicalSessionTimeoutMinutes, 30);
  assert.is(hello.compression, undefined, 'no compressor agreed, though the client offered zlib');
  assert.ok(hello.maxWireVersion >= 9);
  const fields = standin.commands.get('ismaster') ?? standin.commands.get('hello');
  assert.ok(fields?.has('compression'), 'the client did offer compression');
});

test('find walks real cursors across batches; a cursor closed early is killed', async () => {
  const c = client.db('raw').collection<Document>('cursors');
  await c.insertMany(Array.from({ length: 7 }, (_, i) => ({ _id: `d${i}` as never, n: i })));
  const all = await c.find({ n: { $gte: 1 } }, { batchSize: 2, sort: { n: -1 }, projection: { n: 1 } }).toArray();
  assert.equal(all.map((d) => d.n), [6, 5, 4, 3, 2, 1]);
  assert.ok(standin.commands.has('getMore'), 'the rest came by getMore');
  const cursor = c.find({}, { batchSize: 2 });
  await cursor.next();
  await cursor.close();
  assert.ok(standin.commands.has('killCursors'));
  const err = await client.db('raw').command({ getMore: BSON.Long.fromNumber(999_999), collection: 'cursors' }).catch((e: unknown) => e);
  assert.instance(err, MongoServerError);
  assert.is((err as MongoServerError).code, 43);
});

test('a duplicate key answers 11000 with its keyPattern and keyValue', async () => {
  const c = client.db('raw').collection<Document>('people');
  await c.createIndex({ email: 1 }, { unique: true, name: 'by_email' });
  await c.insertOne({ _id: 'p1' as never, email: 'a@x' });
  const err = (await c.insertOne({ _id: 'p2' as never, email: 'a@x' }).catch((e: unknown) => e)) as MongoServerError;
  assert.is(err.code, 11000);
  assert.equal(err.keyPattern, { email: 1 });
  assert.equal(err.keyValue, { email: 'a@x' });
  assert.match(err.message, /index: by_email dup key/);
  const indexes = await c.listIndexes().toArray();
  assert.equal(indexes.map((i) => i.name), ['_id_', 'by_email']);
});

test('update pipelines with $$NOW and $currentDate take the server clock', async () => {
  const c = client.db('raw').collection<Document>('clock');
  await c.insertOne({ _id: 'l' as never, owner: 'x' });
  const before = Date.now();
  await c.updateOne({ _id: 'l' as never }, [{ $set: { owner: 'n1', at: '$$NOW' } }]);
  await c.updateOne({ _id: 'l' as never }, { $currentDate: { seen: true } });
  const doc = (await c.findOne({ _id: 'l' as never }))!;
  assert.is(doc.owner, 'n1');
  assert.instance(doc.at, Date);
  assert.instance(doc.seen, Date);
  assert.ok((doc.at as Date).getTime() >= before && (doc.seen as Date).getTime() >= (doc.at as Date).getTime());
});

test('an unknown command answers CommandNotFound (59) and is logged', async () => {
  const err = (await client.db('raw').command({ frobnicate: 1 }).catch((e: unknown) => e)) as MongoServerError;
  assert.instance(err, MongoServerError);
  assert.is(err.code, 59);
  assert.is(err.codeName, 'CommandNotFound');
  assert.ok(logs.some((l) => l.includes('unknown command "frobnicate"')));
});

/** A counter incremented once through MongoStore while `fault` fires: it must end at exactly 1. */
async function incrementOnceUnder(kind: Parameters<MongoStandin['faults']['inject']>[0]['kind']): Promise<void> {
  const c = store.collection<Counter>(`ledger_${++db}`);
  await c.insertOne({ _id: 'k', n: 0 });
  const fired = standin.faults.fired[kind];
  standin.faults.inject({ kind, commands: ['update'] });
  await c.updateOne({ _id: 'k' }, { $inc: { n: 1 } });
  assert.is(standin.faults.fired[kind], fired + 1, 'the fault fired');
  assert.is((await c.findById('k'))?.n, 1, `${kind}: applied exactly once`);

  // An insert under the same fault: one document, and no duplicate-key error from a retry.
  standin.faults.inject({ kind, commands: ['insert'] });
  await c.insertOne({ _id: 'm1', n: 1 });
  assert.is(await c.count({}), 2);
}

test('a connection closed before a write is applied: the driver retries, the write is applied once', async () => {
  await incrementOnceUnder('close-before');
});

test('a connection closed after a write is applied, before its reply: the retry finds the first outcome, nothing doubles', async () => {
  await incrementOnceUnder('close-after');
  assert.ok(logs.some((l) => l.includes('closed after update was applied')));
});

test('NotWritablePrimary (an election) and a retryable write-concern error: retried, applied once', async () => {
  await incrementOnceUnder('not-writable-primary');
  await incrementOnceUnder('write-concern-error');
});

test('a write that is not retryable (updateMany) and meets a dropped connection fails as the store unavailable', async () => {
  const c = store.collection<Counter>(`many_${++db}`);
  await c.insertMany([{ _id: 'a', n: 0 }]);
  standin.faults.inject({ kind: 'close-before', commands: ['update'] });
  await rejects(c.updateMany({}, { $inc: { n: 1 } }), StoreUnavailableError, 'updateMany on a dropped connection');
  assert.is((await c.findById('a'))?.n, 0);
});

test('delayed replies still come, in order', async () => {
  const c = store.collection<Counter>(`slow_${++db}`);
  standin.faults.delayMs = 50;
  await Promise.all([c.insertOne({ _id: 'a', n: 1 }), c.insertOne({ _id: 'b', n: 2 })]);
  assert.equal((await c.find({}, { sort: { n: 1 } })).map((d) => d._id), ['a', 'b']);
});

test('down: ping fails as unavailable; a write sent while down lands once it is up again', async () => {
  const c = store.collection<Counter>(`outage_${++db}`);
  await c.insertOne({ _id: 'before', n: 0 });
  await standin.down();
  await rejects(store.ping(), StoreUnavailableError, 'ping while down');
  const write = c.insertOne({ _id: 'during', n: 1 });
  await standin.up();
  await write;
  assert.equal((await c.find({}, { sort: { _id: 1 } })).map((d) => d._id), ['before', 'during']);
});

// -- bad input on a raw socket ----------------------------------------------------------------

function rawSocket(): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(standin.port, '127.0.0.1', () => resolve(s));
    s.on('error', reject);
  });
}

/** Sends `bytes` and waits for the server to close the connection; returns what it sent back. */
async function closedAfter(bytes: Buffer): Promise<Buffer> {
  const s = await rawSocket();
  const got: Buffer[] = [];
  s.on('data', (d) => got.push(d));
  const closed = new Promise<void>((resolve) => s.on('close', () => resolve()));
  s.write(bytes);
  await closed;
  return Buffer.concat(got);
}

function message(opCode: number, body: Buffer, length = 16 + body.length): Buffer {
  const h = Buffer.alloc(16);
  h.writeInt32LE(length, 0);
  h.writeInt32LE(7, 4);
  h.writeInt32LE(0, 8);
  h.writeInt32LE(opCode, 12);
  return Buffer.concat([h, body]);
}

test('bad input closes that connection with a log line, and the server goes on', async () => {
  const cases: Array<[string, Buffer, RegExp]> = [
    ['a length shorter than a header', message(OP_MSG, Buffer.alloc(0), 5), /message length 5/],
    ['an oversized message', message(OP_MSG, Buffer.alloc(0), 64 * 1024 * 1024), /message length 67108864/],
    ['an unknown opcode', message(4242, Buffer.alloc(8)), /unknown opcode 4242/],
    ['OP_COMPRESSED', message(OP_COMPRESSED, Buffer.alloc(9)), /OP_COMPRESSED refused/],
    ['malformed BSON', message(OP_MSG, Buffer.concat([Buffer.alloc(4), Buffer.from([0]), Buffer.from([12, 0, 0, 0, 0x7e, 0x61, 0, 1, 0, 0, 0, 0])])), /malformed BSON|does not fit/],
    ['a section of unknown kind', message(OP_MSG, Buffer.concat([Buffer.alloc(4), Buffer.from([9, 5, 0, 0, 0, 0])])), /unknown kind 9/],
  ];
  for (const [what, bytes, expected] of cases) {
    const before = logs.length;
    const reply = await closedAfter(bytes);
    assert.is(reply.length, 0, `${what}: no reply`);
    assert.ok(logs.slice(before).some((l) => expected.test(l) && l.includes('closing connection')), `${what}: logged (${logs.slice(before).join(' | ')})`);
    assert.is((await client.db('admin').command({ ping: 1 })).ok, 1, `${what}: the server still answers`);
  }
});

test('a legacy OP_QUERY hello gets an OP_REPLY', async () => {
  const query = Buffer.concat([Buffer.alloc(4), Buffer.from('admin.$cmd\0'), Buffer.alloc(4), Buffer.from([0xff, 0xff, 0xff, 0xff]), BSON.serialize({ isMaster: 1 })]);
  const s = await rawSocket();
  const reply = await new Promise<Buffer>((resolve) => {
    let got = Buffer.alloc(0);
    s.on('data', (d) => {
      got = Buffer.concat([got, d]);
      if (got.length >= 4 && got.length >= got.readInt32LE(0)) resolve(got);
    });
    s.write(message(OP_QUERY, query));
  });
  s.destroy();
  assert.is(reply.readInt32LE(12), 1, 'OP_REPLY');
  assert.is(reply.readInt32LE(8), 7, 'responds to the request id');
  const doc = BSON.deserialize(reply.subarray(36));
  assert.is(doc.ismaster, true);
  assert.is(doc.setName, 'rs0');
});

test.run();

// -- the stand-in as its own process ------------------------------------------------------------

const proc = suite('mongodb stand-in as a process (npm run mongo:standin)');
const main = fileURLToPath(new URL('../tools/mongo-standin/main.ts', import.meta.url));

async function startProcess(args: string[]): Promise<{ child: ChildProcess; uri: string; output: () => string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', main, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const line = await waitFor(() => /^MONGODB_URI=(\S+)$/m.exec(out), 60_000);
  return { child, uri: line[1]!, output: () => out };
}

const exited = (child: ChildProcess) => new Promise<number | null>((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.on('exit', (code) => resolve(code))));

proc('prints MONGODB_URI, takes faults over its control commands, keeps --data across a restart, stops on SIGTERM', async () => {
  const dir = await tempDir('mongo-standin-');
  const children: ChildProcess[] = [];
  try {
    const first = await startProcess(['--port', '0', '--data', dir, '--db', 'fleet']);
    children.push(first.child);
    assert.match(first.uri, /^mongodb:\/\/127\.0\.0\.1:\d+\/fleet\?replicaSet=rs0$/);
    const s1 = await openMongoStore({ uri: first.uri });
    const c = s1.collection<Counter>('ledger');
    await c.insertOne({ _id: 'k', n: 0 });
    const control = new MongoClient(first.uri);
    await control.db('admin').command({ standinFault: { kind: 'close-after', commands: ['update'] } });
    await c.updateOne({ _id: 'k' }, { $inc: { n: 1 } });
    assert.is((await c.findById('k'))?.n, 1, 'retried after the connection closed, applied once');
    assert.match(first.output(), /closed after update was applied/);
    // An outage set from outside: connections refused for a while, then back, and the same client
    // writes again once it is over. (Whether a write sent during the outage lands depends on how
    // long the driver's one retry waits, a matter of timing: the in-process cases of down/up cover
    // the driver's retry.)
    await control.db('admin').command({ standinOutage: 300 });
    await waitFor(() => first.output().includes('refusing connections'), 10_000);
    await waitFor(() => first.output().includes('outage over'), 60_000);
    await c.updateOne({ _id: 'k' }, { $inc: { n: 1 } });
    assert.is((await c.findById('k'))?.n, 2);
    await control.db('admin').command({ standinDelay: 20 });
    assert.is(await c.count({}), 1, 'answered, later');
    await control.db('admin').command({ standinFault: 'clear' });
    const refused = (await control.db('admin').command({ standinFault: { kind: 'explode' } }).catch((e: unknown) => e)) as MongoServerError;
    assert.is(refused.code, 2, 'an unknown fault is refused as BadValue');
    await control.close();
    await s1.close();
    first.child.kill('SIGTERM');
    assert.is(await exited(first.child), 0);

    const second = await startProcess(['--port', '0', '--data', dir, '--db', 'fleet']);
    children.push(second.child);
    const s2 = await openMongoStore({ uri: second.uri });
    assert.is((await s2.collection<Counter>('ledger').findById('k'))?.n, 2, 'the data outlived the process');
    await s2.close();
    second.child.kill('SIGINT');
    assert.is(await exited(second.child), 0);
  } finally {
    // A failed assertion must not leave a stand-in running (the test process would never end).
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  }
});

proc.run();
