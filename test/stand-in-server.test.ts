/**
 * The recording stand-in server the suites put in place of outside services: what it records, and
 * that the answers and failures it is told to give are the ones a client gets.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http } from './helpers.js';
import { deadUrl, routes, StandIn } from './stand-in-server.js';

const test = suite('stand-in server');

test('records method, target, path, headers, raw and parsed body; answers JSON, text or {} by default', async () => {
  const s = await StandIn.start({ respond: routes({ 'POST /json': { status: 201, body: { ok: true } }, '/text': { status: 200, body: 'plain' } }) });
  try {
    const json = await http(s.url, 'POST', '/json?x=1', { json: { a: 1 }, headers: { 'x-test': 'yes' } });
    assert.is(json.status, 201);
    assert.is(json.headers['content-type'], 'application/json');
    assert.equal(json.body, { ok: true });
    const text = await http(s.url, 'GET', '/text', { raw: 'not json' });
    assert.is(text.headers['content-type'], 'text/plain; charset=utf-8');
    assert.is(text.text, 'plain');
    assert.is((await http(s.url, 'GET', '/json')).status, 404, 'a route for POST only');
    const [first, second] = s.received;
    assert.equal([first!.method, first!.url, first!.path, first!.headers['x-test'], first!.raw.toString(), first!.body], ['POST', '/json?x=1', '/json', 'yes', '{"a":1}', { a: 1 }]);
    assert.equal([second!.raw.toString(), second!.body], ['not json', undefined]);
    assert.equal(s.to('/json?x=1'), [first]);
    assert.equal(s.to('/json'), [s.received[2]], 'to() matches the whole target');
  } finally {
    await s.close();
  }
  const plain = await StandIn.start();
  try {
    const r = await http(plain.url, 'PUT', '/anything');
    assert.equal([r.status, r.text], [200, '{}']);
  } finally {
    await plain.close();
  }
});

test('nonJson: text keeps a body that is not JSON as its text, and no body as null', async () => {
  const s = await StandIn.start({ nonJson: 'text' });
  try {
    await http(s.url, 'POST', '/a', { raw: 'hello' });
    await http(s.url, 'POST', '/b');
    assert.equal(s.received.map((r) => r.body), ['hello', null]);
  } finally {
    await s.close();
  }
});

test('scripted failures pre-empt respond for their path, as many times as asked; apply lets respond act first', async () => {
  let acted = 0;
  const s = await StandIn.start({ respond: () => ((acted += 1), { status: 200, body: { acted } }) });
  try {
    s.fail('/x', { status: 503, times: 2 });
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await http(s.url, 'POST', '/x')).status);
    assert.equal(statuses, [503, 503, 200]);
    assert.is(acted, 1);
    s.fail('/y', { status: 500, body: { error: 'lost' }, apply: true });
    const r = await http(s.url, 'POST', '/y');
    assert.equal([r.status, r.body], [500, { error: 'lost' }]);
    assert.is(acted, 2, 'respond acted on the request whose answer failed');
  } finally {
    await s.close();
  }
});

test('a delayed answer comes after the delay; a hang-up closes the connection unanswered; close() drops held answers', async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const s = await StandIn.start({
    respond: routes({
      '/slow': { status: 200, body: 'late', delayMs: 300 },
      '/drop': { status: 200, hangUp: true },
      '/held': async () => (await held, { status: 200 }),
    }),
  });
  try {
    const sent = performance.now();
    assert.is((await http(s.url, 'GET', '/slow')).text, 'late');
    // A lower bound the delay guarantees (timers may round down by a millisecond), not a speed.
    assert.ok(performance.now() - sent >= 299, 'answered no sooner than the delay');
    const dropped = await http(s.url, 'GET', '/drop').then(
      () => 'answered',
      (e: NodeJS.ErrnoException) => e.code,
    );
    assert.is(dropped, 'ECONNRESET');
    const pending = http(s.url, 'GET', '/held').then(
      () => 'answered',
      (e: NodeJS.ErrnoException) => e.code,
    );
    await s.waitFor(3);
    await s.close();
    assert.is(await pending, 'ECONNRESET');
  } finally {
    release();
    await s.close();
  }
});

test('a fault in respond is answered 500 and raised again by close()', async () => {
  const s = await StandIn.start({
    respond: () => {
      throw new Error('the test handler broke');
    },
  });
  let status = 0;
  try {
    status = (await http(s.url, 'GET', '/')).status;
  } finally {
    const raised = await s.close().then(
      () => null,
      (err: Error) => err.message,
    );
    assert.is(raised, 'the test handler broke', 'close() raises the fault');
  }
  assert.is(status, 500);
});

test('deadUrl is a loopback address where nothing listens', async () => {
  const url = await deadUrl();
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
  const code = await http(url, 'GET', '/').then(
    () => 'answered',
    (e: NodeJS.ErrnoException) => e.code,
  );
  assert.is(code, 'ECONNREFUSED');
});

test.run();
