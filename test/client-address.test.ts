/**
 * Client addresses: the spellings uWS gives (full IPv6 groups, IPv4 mapped into IPv6) reduced to
 * one, IPv6 counted per /64, and X-Forwarded-For read from the right past trusted proxies only.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ClientAddresses, addressKey, canonicalAddress } from '../src/http/client-address.js';

const test = suite('client address');

test('uWS spellings are reduced to one', () => {
  assert.is(canonicalAddress('0000:0000:0000:0000:0000:ffff:7f00:0001'), '127.0.0.1');
  assert.is(canonicalAddress('::ffff:192.0.2.1'), '192.0.2.1');
  assert.is(canonicalAddress('0000:0000:0000:0000:0000:0000:0000:0001'), '::1');
  assert.is(canonicalAddress('2001:0DB8:0000:0000:0000:0000:0000:0010'), '2001:db8::10');
  assert.is(canonicalAddress('[2001:db8::1]'), '2001:db8::1');
  assert.is(canonicalAddress('198.51.100.4'), '198.51.100.4');
  assert.is(canonicalAddress('unknown'), null);
  assert.is(canonicalAddress('198.51.100.4:8080'), null);
});

test('IPv6 addresses count per /64, IPv4 per address', () => {
  assert.is(addressKey('2001:db8:1:2::5'), '2001:db8:1:2::/64');
  assert.is(addressKey('2001:db8:1:2:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64');
  assert.is.not(addressKey('2001:db8:1:3::5'), addressKey('2001:db8:1:2::5'));
  assert.is(addressKey('::1'), '0:0:0:0::/64');
  assert.is(addressKey('192.0.2.1'), '192.0.2.1');
});

test('X-Forwarded-For is read only from trusted peers, from the right, past trusted hops', () => {
  const none = new ClientAddresses([]);
  assert.is(none.of('0000:0000:0000:0000:0000:ffff:0a00:0001', '203.0.113.9'), '10.0.0.1');

  const lb = new ClientAddresses(['10.0.0.0/8', '2001:db8:ffff::1']);
  assert.is(lb.of('10.0.0.1', '203.0.113.9'), '203.0.113.9');
  assert.is(lb.of('10.0.0.1', '198.51.100.1, 203.0.113.9, 10.2.3.4'), '203.0.113.9', 'the spoofable left part is not believed');
  assert.is(lb.of('10.0.0.1', '10.9.9.9, 10.2.3.4'), '10.9.9.9', 'all hops trusted: the left-most');
  assert.is(lb.of('10.0.0.1', '203.0.113.9, garbage, 10.2.3.4'), '10.2.3.4', 'a hop that is not an address ends the walk');
  assert.is(lb.of('10.0.0.1', undefined), '10.0.0.1');
  assert.is(lb.of('2001:db8:ffff::1', '2001:db8:5::7'), '2001:db8:5::7');
  assert.is(lb.of('192.0.2.50', '203.0.113.9'), '192.0.2.50', 'an untrusted peer cannot name its address');
});

test.run();
