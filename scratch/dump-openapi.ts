import { startServer, http } from '../test/helpers.js';
const s = await startServer();
const r = await http(s.url, 'GET', '/api/openapi.json');
process.stdout.write(JSON.stringify(r.body, null, 1));
await s.stop(true);
process.exit(0);
