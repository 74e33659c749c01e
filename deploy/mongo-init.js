// Initiates the replica set of deploy/compose.yaml, then waits until it has a primary. Run by the
// mongo-init service (mongosh --file) with RS_NAME (the name every member was started with,
// --replSet) and RS_MEMBERS (host:port of each member, separated by commas). Run again against a
// set already initiated, it changes nothing and only waits for the primary.
const name = process.env.RS_NAME;
const hosts = (process.env.RS_MEMBERS || '').split(',').map((h) => h.trim()).filter((h) => h !== '');
if (!name || hosts.length === 0) throw new Error('RS_NAME and RS_MEMBERS must be set');

let initiated = true;
try {
  rs.status();
} catch (err) {
  if (err.codeName !== 'NotYetInitialized') throw err;
  initiated = false;
}
if (initiated) {
  print(`replica set ${name} already initiated`);
} else {
  rs.initiate({ _id: name, members: hosts.map((host, i) => ({ _id: i, host })) });
  print(`replica set ${name} initiated with ${hosts.join(', ')}`);
}

// An election takes a few seconds (up to about 12 by MongoDB's manual).
for (let waited = 0; ; waited++) {
  let primary;
  try {
    primary = rs.status().members.find((m) => m.stateStr === 'PRIMARY');
  } catch (err) {
    print(`waiting for the replica set: ${err.message}`);
  }
  if (primary) {
    print(`primary: ${primary.name}`);
    break;
  }
  if (waited >= 120) throw new Error(`replica set ${name} has no primary after 120 s`);
  sleep(1000);
}
