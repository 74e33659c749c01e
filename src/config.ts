/**
 * Configuration from environment variables, parsed with zod in one place.
 *
 * Every variable is declared once in VARIABLES with its schema, default and description; the
 * configuration table of docs/configuration.md is generated from the same list (`npm run
 * docs:config`) and a test checks that the two agree.
 */
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { z } from 'zod';
import { stewardCommand, type StewardCommand } from './domain/cli-command.js';
import type { RateRule, RateRules } from './services/rate-limits.js';

const bool = z
  .enum(['1', '0', 'true', 'false', 'yes', 'no'], { message: 'expected 1, 0, true, false, yes or no' })
  .transform((v) => v === '1' || v === 'true' || v === 'yes');

const int = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, { message: 'expected a whole number' })
    .transform(Number)
    .pipe(z.number().int().min(min, { message: `must be at least ${min}` }).max(max, { message: `must be at most ${max}` }));

const httpUrl = z
  .string()
  .url({ message: 'expected an absolute URL' })
  .refine((u) => /^https?:\/\//.test(u), { message: 'expected an http:// or https:// URL' })
  .transform((u) => u.replace(/\/+$/, ''));

const secretKey = z
  .string()
  .refine((v) => decodeSecretKey(v) !== null, {
    message: 'expected 32 bytes as 64 hex characters or as base64/base64url (43 or 44 characters)',
  });

const UNIT_SECONDS = { s: 1, m: 60, h: 3600 } as const;
const RATE = /^(\d+)\/(\d+)([smh])(?:\+(\d+)\/(\d+)([smh]))?$/;

/** `N/<window>` or `N/<window>+B/<window>` (a burst of B more per the second window), windows as `30s`, `1m`, `2h`; `0` turns the limit off. */
export function parseRateRule(text: string): RateRule | null | undefined {
  if (text === '0') return null;
  const m = RATE.exec(text);
  if (!m) return undefined;
  const window = (n: string, unit: string) => Number(n) * UNIT_SECONDS[unit as keyof typeof UNIT_SECONDS];
  const rule: RateRule = { points: Number(m[1]), seconds: window(m[2]!, m[3]!) };
  if (m[4] !== undefined) rule.burst = { points: Number(m[4]), seconds: window(m[5]!, m[6]!) };
  const counts = [rule.points, rule.burst?.points ?? 1];
  const windows = [rule.seconds, rule.burst?.seconds ?? 1];
  if (counts.some((n) => n < 1 || n > 1e9) || windows.some((s) => s < 1 || s > 7 * 24 * 3600)) return undefined;
  return rule;
}

const rateRule = z.string().transform((text, ctx) => {
  const rule = parseRateRule(text.replace(/\s+/g, ''));
  if (rule === undefined) {
    ctx.addIssue({ code: 'custom', message: 'expected 0 (off) or COUNT/WINDOW, optionally +BURST/WINDOW (e.g. 600/1m+10000/10m; windows in s, m or h, at most 7 days)' });
    return z.NEVER;
  }
  return rule;
});

const isAddressOrSubnet = (entry: string) => {
  const [address, bits, ...rest] = entry.split('/');
  const kind = isIP(address ?? '');
  if (kind === 0 || rest.length > 0) return false;
  return bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= (kind === 4 ? 32 : 128));
};

const addressList = z
  .string()
  .transform((text) => text.split(',').map((e) => e.trim()).filter((e) => e !== ''))
  .refine((list) => list.every(isAddressOrSubnet), { message: 'expected IP addresses or CIDR subnets separated by commas (10.0.0.5, 10.1.0.0/16, fd00::/8)' });

const natsUrls = z
  .string()
  .transform((text) => text.split(',').map((e) => e.trim()).filter((e) => e !== ''))
  .refine((list) => list.length > 0 && list.every((u) => /^(nats|tls):\/\/[^/?#\s]+$/i.test(u)), {
    message: 'expected nats:// or tls:// URLs (host:port, optionally user:password@ or token@) separated by commas',
  });

const SAFE_TOKEN = /^[A-Za-z0-9_-]{1,64}$/;
const safeToken = z.string().regex(SAFE_TOKEN, { message: 'expected 1 to 64 letters, digits, "-" or "_"' });

/** The default node id: the host name, in the characters a node id may hold. */
export function defaultNodeId(host: string = hostname()): string {
  const id = host.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 64);
  return id === '' ? 'node' : id;
}

interface VariableSpec {
  schema: z.ZodType;
  default?: string;
  description: string;
  /** Shown in the table instead of the raw default. */
  defaultText?: string;
}

export const VARIABLES = {
  PORT: {
    schema: int(0, 65535),
    default: '8080',
    description: 'TCP port for HTTP and WebSocket (0 picks a free port). Not shared: a port another process listens on is refused at start.',
  },
  HOST: { schema: z.string().min(1), default: '0.0.0.0', description: 'Address to listen on.' },
  PUBLIC_URL: {
    schema: httpUrl,
    description: 'Address people and wallets use to reach Steward; used in claim URLs and to decide whether cookies are Secure.',
    defaultText: '`http://localhost:{PORT}`',
  },
  DATA_DIR: {
    schema: z.string().min(1),
    default: './data',
    description:
      'Directory of the embedded store and, in embedded mode, of the generated secret key. Created 0700 with its files 0600 (older ones are tightened at start); one Steward process at a time (a lock file in DATA_DIR/store).',
  },
  MONGODB_URI: {
    schema: z.string().regex(/^mongodb(\+srv)?:\/\//, { message: 'expected a mongodb:// or mongodb+srv:// URI' }),
    description: 'MongoDB connection string. Unset: the embedded store under DATA_DIR is used.',
    defaultText: 'unset (embedded store)',
  },
  MONGODB_DB: {
    schema: z.string().regex(/^[^/\\. "$]{1,63}$/, { message: 'expected a MongoDB database name' }),
    description: 'Database name; defaults to the one in MONGODB_URI, else `steward`.',
    defaultText: 'from the URI',
  },
  STORE_COMPACT_MIN_MB: {
    schema: int(1, 1024 * 1024),
    default: '16',
    description: 'Embedded store: a collection\'s datafile is append-only (every update adds a line) and is rewritten with only its live documents once it has reached twice its size after the last rewrite and at least this many MiB. Ignored with MongoDB.',
  },
  STEWARD_SECRET_KEY: {
    schema: secretKey,
    description:
      'Key (32 bytes, hex or base64) that encrypts secrets at rest with AES-256-GCM. Required with MongoDB; in embedded mode a key is generated once into DATA_DIR/secret.key (mode 0600) when unset.',
    defaultText: 'generated (embedded only)',
  },
  NATS_URL: {
    schema: natsUrls,
    description:
      'Cluster mode: the NATS server(s) the nodes route work over, `nats://host:4222` (several separated by commas; credentials as `nats://user:password@host:4222` or `nats://token@host:4222`, never logged). Needs MONGODB_URI. Unset: one process with an in-process bus (docs/cluster.md).',
    defaultText: 'unset (single node)',
  },
  STEWARD_NODE_ID: {
    schema: safeToken,
    description: 'Cluster mode: this node\'s id, unique in the cluster (a second process with a live node\'s id is refused).',
    defaultText: 'the host name',
  },
  CLUSTER_NAME: {
    schema: safeToken,
    default: 'main',
    description: 'Cluster mode: the name in every NATS subject of the cluster (`steward.<name>.…`), so several clusters can share one NATS.',
  },
  CLUSTER_SHARDS: {
    schema: int(1, 65536),
    default: '1024',
    description: 'Cluster mode: virtual shards actors are placed on by a hash of their id; the same on every node (a node with another count takes no shards). Change it only with every node stopped.',
  },
  CLUSTER_LEASE_MS: {
    schema: int(3000, 600_000),
    default: '15000',
    description: 'Cluster mode: lease of a node\'s membership and of its shards, renewed every third of it; a node that stops renewing has its shards taken over after this long.',
  },
  CLUSTER_LEASE_MARGIN_MS: {
    schema: int(0, 200_000),
    default: '3000',
    description:
      'Cluster mode: a node stops acting as owner of its shards this long before their lease ends (leases are judged on the store\'s clock; the margin covers the error of reading it and the time a renewal takes). Below a third of CLUSTER_LEASE_MS.',
  },
  CLUSTER_CHANGE_POLL_MS: {
    schema: int(100, 600_000),
    default: '5000',
    description:
      'Cluster mode: how often each node reads the change log, where every node appends what it changed for the others (an agent, a run...): a change whose broadcast NATS lost reaches every node within this long. One small store read per period, whatever the fleet size.',
  },
  CLUSTER_BUS_LOSS_RELEASE_MS: {
    schema: int(1000, 600_000),
    default: '10000',
    description:
      'Cluster mode: a node cut off from NATS this long, while other nodes are connected, gives its shards to them (their actors are unreachable from the rest of the cluster meanwhile) and says so on /readyz; it takes its share again once NATS is back. When every node is cut off, each keeps what it holds.',
  },
  CLUSTER_REQUEST_TIMEOUT_MS: {
    schema: int(100, 120_000),
    default: '5000',
    description:
      'Cluster mode: how long a command to the node that holds an actor (a decision, a channel post, a run started or cancelled) may take, retries while its shard changes hands included, and how long a gather from every node waits (the `sentTo` of a policy change, the actor list).',
  },
  LOG_LEVEL: {
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
      message: 'expected fatal, error, warn, info, debug, trace or silent',
    }),
    default: 'info',
    description: 'Log level of the JSON logs on standard output.',
  },
  BODY_LIMIT_BYTES: {
    schema: int(1024, 1024 * 1024 * 1024),
    default: String(1024 * 1024),
    description: 'Largest accepted HTTP request body; larger requests get 413 without the rest being read.',
  },
  TRUSTED_PROXIES: {
    schema: addressList,
    description:
      'Proxies (load balancers) in front of Steward, as IP addresses or CIDR subnets separated by commas. A request from one of them is counted by the rate limits under the client address it forwards in X-Forwarded-For (read from the right, past the trusted hops); from any other peer the header is ignored.',
    defaultText: 'unset (X-Forwarded-For ignored)',
  },
  METRICS_TOKEN: {
    schema: z.string().min(16, { message: 'expected at least 16 characters' }),
    description: 'When set, GET /metrics needs `Authorization: Bearer <METRICS_TOKEN>` (401 otherwise). A secret: never logged. Unset: /metrics is public.',
    defaultText: 'unset (public)',
  },
  RATE_LIMIT_LOGIN_PER_ADDRESS: {
    schema: rateRule,
    default: '600/1m+10000/10m',
    description: 'POST /api/auth/challenge and /api/auth/login (together) per source address: COUNT/WINDOW, then a burst allowance +COUNT/WINDOW; over it, 429 with Retry-After. 0: no limit.',
  },
  RATE_LIMIT_LOGIN_PER_DID: {
    schema: rateRule,
    default: '30/1m+300/1h',
    description:
      'Failed logins (POST /api/auth/login refused) per DID, against guessing at one account. Past it, a login from an address that has failed too is refused with 429; one from an address with no failures still gets through, so a stranger naming the DID cannot lock its owner out. Challenges asked for never count. 0: no limit.',
  },
  RATE_LIMIT_LOGIN_FAILURES_PER_ADDRESS: {
    schema: rateRule,
    default: '30/1m+300/1h',
    description: 'Failed logins per source address, against one address guessing at many accounts; past it, every login from that address is refused with 429 until the window ends. 0: no limit.',
  },
  RATE_LIMIT_CLAIM_PER_ADDRESS: {
    schema: rateRule,
    default: '600/1m+10000/10m',
    description: 'Requests to the public claim and invitation endpoints (/api/user/claim/…, /api/user/listen/…, /api/invitations/…, /api/users/invite/from-email) per source address. 0: no limit.',
  },
  RATE_LIMIT_CLAIM_PER_TOKEN: {
    schema: rateRule,
    default: '120/1m',
    description: 'The same requests per claim or invitation token (enough to poll listen every second). 0: no limit.',
  },
  RATE_LIMIT_DEVICE_PER_ADDRESS: {
    schema: rateRule,
    default: '600/1m+10000/10m',
    description: 'POST /api/auth/device and /api/auth/device/token (browsers asking to be signed in by a wallet, and polling) per source address. 0: no limit.',
  },
  RATE_LIMIT_USER_CODE_PER_ADDRESS: {
    schema: rateRule,
    default: '20/10m',
    description:
      'Wrong user codes given to the device approval endpoints (/api/auth/device/{userCode}/approve, /deny) per source address; past it, every approval from that address is refused with 429 until the window ends. 0: no limit.',
  },
  RATE_LIMIT_USER_CODE_PER_PERSON: {
    schema: rateRule,
    default: '20/10m',
    description:
      'Wrong user codes given to the device approval endpoints by one signed-in person, from any address; past it, that person\'s approvals are refused with 429 until the window ends (nobody else\'s). 0: no limit.',
  },
  RATE_LIMIT_USER_CODE_TOTAL: {
    schema: rateRule,
    default: '200/10m',
    description:
      'Wrong user codes given to the device approval endpoints by everyone together, against a guessing campaign spread over many people and addresses. Past it, an approval is refused with 429 when its person or its address has given a wrong code in the window; one from a person and an address with none still gets through. 0: no limit.',
  },
  RATE_LIMIT_WEBHOOK_PER_ADDRESS: {
    schema: rateRule,
    default: '3000/1m+30000/10m',
    description: 'Incoming bridge deliveries (POST /api/bridges/webhook/…/incoming, /api/bridges/teams/incoming) per source address. 0: no limit.',
  },
  RATE_LIMIT_WEBHOOK_PER_BRIDGE: {
    schema: rateRule,
    default: '1200/1m+12000/10m',
    description: 'Incoming webhook deliveries per bridge id, correctly signed or not. 0: no limit.',
  },
  RATE_LIMIT_AGENT_PER_ADDRESS: {
    schema: rateRule,
    default: '1200/1m+40000/10m',
    description:
      'Agent hellos on /ws/agent and POST /api/agents/register per source address; a refused hello is closed with 4429 (retry later). The burst lets a fleet of 20,000 agents behind one address reconnect at once, twice within ten minutes. 0: no limit.',
  },
  STEWARD_ALLOW_UWS_FALLBACK: {
    schema: bool,
    default: '0',
    description: "Set to 1 to allow starting on uWebSockets.js's slow JavaScript fallback when the native binary does not load.",
  },
  STEWARD_ED25519: {
    schema: z.enum(['auto', 'libsodium', 'openssl'], { message: 'expected auto, libsodium or openssl' }),
    default: 'auto',
    description:
      "Ed25519 implementation: `libsodium` (the sodium-native binary, about twice as fast), `openssl` (Node's crypto), or `auto` (libsodium when its binary loads, else OpenSSL). `libsodium` refuses to start without it.",
  },
  STEWARD_CHECK_RESPONSES: {
    schema: bool,
    default: '0',
    description:
      "For tests and development: every HTTP answer is checked against the response schema its route declares (the OpenAPI document's), and one that does not match is logged as an error and answered 500 `response_schema_violation` instead. Costs a validation per request: leave it off in production.",
  },
  ACTOR_IDLE_MS: {
    schema: int(0, 7 * 24 * 3600 * 1000),
    default: String(10 * 60 * 1000),
    description: 'Actors idle this long are passivated (snapshot kept, memory freed), within a quarter of this time after it ends; 0 never passivates.',
  },
  SESSION_TTL_HOURS: {
    schema: int(1, 24 * 365),
    default: '168',
    description: 'Sessions of people and agents expire after this long without use (sliding).',
  },
  DEVICE_CODE_TTL_SECONDS: {
    schema: int(10, 3600),
    default: '600',
    description: 'How long a browser\'s device sign-in request (its user code and device code) can be approved by a wallet and exchanged for a session; each code serves once.',
  },
  DEVICE_POLL_INTERVAL_SECONDS: {
    schema: int(1, 60),
    default: '5',
    description: 'Seconds a browser waits between two polls of POST /api/auth/device/token; a faster poll gets slow_down and 5 seconds more to wait (RFC 8628).',
  },
  STEWARD_OWNER_DID: {
    schema: z.string().regex(/^did:key:z6Mk[1-9A-HJ-NP-Za-km-z]+$/, { message: 'expected an Ed25519 did:key (did:key:z6Mk...)' }),
    description: 'On first start, makes this DID the claimed owner. Unset: the owner is created unclaimed and a claim QR is printed.',
    defaultText: 'unset',
  },
  WALLET_URL: {
    schema: httpUrl,
    default: 'https://wallet.steward.dev',
    description: 'Wallet address encoded in claim QR codes: `{WALLET_URL}/#<connectionString>&protocol=p2p&service=auth&did=<serverDid>`.',
  },
  CLAIM_TTL_MINUTES: {
    schema: int(1, 7 * 24 * 60),
    default: '30',
    description: 'How long a claim session (send-qr, invite link, invitation QR) stays pending before its status becomes -2.',
  },
  SMTP_URL: {
    schema: z.string().regex(/^smtps?:\/\//, { message: 'expected smtp:// or smtps://' }),
    description: 'SMTP server for invitation and claim mails (`smtp://user:pass@host:587`). Unset: no mail is sent (emailSent false).',
    defaultText: 'unset',
  },
  MAIL_FROM: {
    schema: z.string().min(3),
    default: 'Steward <steward@localhost>',
    description: 'Sender of the mails Steward sends.',
  },
  AGENT_SEND_BUFFER_LIMIT_BYTES: {
    schema: int(4096, 256 * 1024 * 1024),
    default: String(1024 * 1024),
    description: 'Largest send buffer of an agent socket; an agent that reads too slowly and lets it grow past this is disconnected.',
  },
  FEED_BATCH_WINDOW_MS: {
    schema: int(1, 10_000),
    default: '150',
    description: 'Live feed (/ws/feed): frames for one subscriber within this window go out as one batch, repeated frames about the same entity folded to the latest; while frames keep coming the window doubles, up to 8 times this.',
  },
  FEED_BATCH_MAX_FRAMES: {
    schema: int(10, 100_000),
    default: '500',
    description: 'Live feed: most frames in one batch (and held for one subscriber); older ones beyond it are dropped and counted as folded, and the batch says `truncated` (the client re-reads over HTTP).',
  },
  FEED_SOCKETS_PER_PERSON: {
    schema: int(1, 10_000),
    default: '50',
    description: 'Live feed: most /ws/feed sockets one person holds open at once on one node (every tab and script together); one more is closed with 4413 (docs/feed.md).',
  },
  AGENT_MAX_FRAME_BYTES: {
    schema: int(1024, 64 * 1024 * 1024),
    default: String(1024 * 1024),
    description: 'Largest frame an agent may send on /ws/agent; a larger one closes the socket.',
  },
  AGENT_HANDSHAKE_TIMEOUT_MS: {
    schema: int(100, 600_000),
    default: '10000',
    description: 'Time an agent socket has from opening (or from its approval) until `ready`; then it is closed with 4408. Waiting for approval does not count.',
  },
  AGENT_PENDING_SOCKET_TIMEOUT_SECONDS: {
    schema: int(1, 7 * 24 * 3600),
    default: '600',
    description:
      'An agent socket waiting for an admin to decide its registration is closed after this long (and up to a tenth more, at random, so agents that started waiting together do not come back together) with 4202; the agent reconnects and waits on, its registration kept.',
  },
  AGENT_PENDING_REGISTRATIONS_MAX: {
    schema: int(1, 10_000_000),
    default: '50000',
    description:
      'Registrations that may await a decision at once (WebSocket `hello` and POST /api/agents/register together); a new one past it is refused (HTTP 429 with Retry-After, or close 4429) until an admin decides some. An agent already pending is never refused.',
  },
  AGENT_PENDING_REGISTRATIONS_PER_ADDRESS_MAX: {
    schema: int(1, 10_000_000),
    default: '25000',
    description:
      "Pending registrations that may come from one source address (an IPv4 address, or an IPv6 /64). A fleet enrolling for the first time behind one NAT or proxy comes from one address, so the default admits 25,000 of them, more than the largest fleet one Steward is sized to hold (about 20,000 agents); it keeps one address from taking all of AGENT_PENDING_REGISTRATIONS_MAX. Behind a reverse proxy every agent has the proxy's address. Lower it where agents have addresses of their own.",
  },
  AGENT_INVALID_FRAME_LIMIT: {
    schema: int(1, 1000),
    default: '3',
    description: 'Invalid frames (binary, not JSON, failing their schema, out of order) an agent socket may send; the last one allowed closes it with 1008.',
  },
  AGENT_HEARTBEAT_INTERVAL_SECONDS: {
    schema: int(1, 3600),
    default: '30',
    description: 'Heartbeat interval Steward asks of agents (sent in `ready`).',
  },
  AGENT_IDLE_TIMEOUT_SECONDS: {
    schema: int(8, 960),
    default: '120',
    description: 'An agent socket with no traffic for this long is closed (Steward pings idle sockets, so a live agent never hits it).',
  },
  AGENT_OFFLINE_GRACE_MS: {
    schema: int(0, 600_000),
    default: '10000',
    description: "An agent's actor records it offline only after it has been disconnected this long, so a quick reconnect is not two transitions (the API's isOnline follows the socket at once); 0 records every disconnection.",
  },
  AGENT_ACTOR_IDLE_SECONDS: {
    schema: int(0, 7 * 24 * 3600),
    default: '120',
    description: "An agent's actor with no lifecycle event for this long leaves memory, within a quarter of this time after it (its snapshot stays; heartbeats are not lifecycle events); 0 keeps agent actors in memory.",
  },
  AGENT_ACTOR_WRITE_DELAY_MS: {
    schema: int(0, 60_000),
    default: '1000',
    description: "Agent actors' snapshots are written at most this long after a transition, so a burst (a policy re-certifying the fleet, a mass reconnect) costs one write per agent with its latest state; 0 writes on the next turn of the event loop. Agent status and certificates are stored on their own, at once.",
  },
  AGENT_LAST_SEEN_WRITE_SECONDS: {
    schema: int(1, 3600),
    default: '60',
    description: "How often agents' lastSeen is written to the store (one batch for all agents active since the last write).",
  },
  TOKEN_LEDGER_WRITE_GAP_MS: {
    schema: int(0, 1000),
    default: '25',
    description: 'Least time between two token-ledger writes: the heartbeats that arrive meanwhile wait and go into the next write together (fewer, larger writes, and less memory for a held fleet, for up to this much more acknowledgement latency). Once 64 heartbeats wait they are written without waiting out the gap (at most one write every 2 ms).',
  },
  TOKEN_ROLLUP_INTERVAL_SECONDS: {
    schema: int(1, 3600),
    default: '10',
    description: 'How often acknowledged heartbeat token deltas are folded from the ledger into per-agent and global totals.',
  },
  TOKEN_AGENT_DAYS_KEPT: {
    schema: int(1, 62),
    default: '2',
    description: "Daily token buckets kept in each agent's usage document, today included. Only today's is ever read per agent; in the embedded store each kept day costs about 100 bytes of memory per agent. Older days move to the agent's usage history (TOKEN_HISTORY_DAYS_KEPT) and stay in its allTime and monthly totals.",
  },
  TOKEN_AGENT_MONTHS_KEPT: {
    schema: int(0, 1200),
    default: '2',
    description: "Monthly token buckets kept per agent, this month included; 0 keeps them all (the fleet-wide totals keep every month). Only this month's is ever read per agent; in the embedded store each kept month costs about 100 bytes of memory per agent.",
  },
  TOKEN_HISTORY_DAYS_KEPT: {
    schema: int(31, 3660),
    default: '90',
    description: "Days of token usage history kept for the usage series (GET /api/stats/tokens/series): the fleet-wide daily buckets, a document per workspace and day, and a document per agent and month it used tokens in. The embedded store holds that history in memory, about 28 bytes per agent and day (90 days: about 2.5 KiB per agent that used tokens every day; see docs/performance.md); on MongoDB it costs no server memory, so raise it there (e.g. 400).",
  },
  INTENT_TIMEOUT_MS: {
    schema: int(100, 3_600_000),
    default: '30000',
    description: 'Default time POST /api/agents/{did}/intents waits for the agent to answer before 504.',
  },
  INTENT_MAX_TIMEOUT_MS: {
    schema: int(100, 3_600_000),
    default: '300000',
    description: 'Largest `timeoutMs` a caller may ask for on POST /api/agents/{did}/intents.',
  },
  SKILLS_LIBRARY_URL: {
    schema: httpUrl,
    description:
      'Address of the external skills catalogue read by GET /api/skills/library (a JSON list of entries, cached for 1 hour). Unset: the library answers 503.',
    defaultText: 'unset',
  },
  SKILLS_CODE_HOST_URL: {
    schema: httpUrl,
    default: 'https://raw.githubusercontent.com',
    description: 'Raw-content host that skill files are read from: `{SKILLS_CODE_HOST_URL}/{owner}/{repo}/{branch}/{path}`.',
  },
  PROXY_BASE_URL: {
    schema: httpUrl,
    description:
      "Address of the model proxy (LiteLLM's management API, also the address agents use for workspace routing). Used only when PROXY_MASTER_KEY is set too.",
    defaultText: 'unset (no proxy)',
  },
  PROXY_MASTER_KEY: {
    schema: z.string().min(1),
    description: 'Master key of the model proxy, sent as `Authorization: Bearer <key>` on management calls. A secret: never logged or returned.',
    defaultText: 'unset',
  },
  PROXY_TIMEOUT_MS: {
    schema: int(100, 600_000),
    default: '10000',
    description: 'Longest Steward waits for one model-proxy management call; a call that takes longer counts as the proxy failing (502).',
  },
  GRAPH_BASE_URL: {
    schema: httpUrl,
    default: 'https://graph.microsoft.com/v1.0',
    description: "Base URL of the team-chat service's graph API; teams bridges post to `{GRAPH_BASE_URL}/teams/{teamId}/channels/{channelId}/messages`.",
  },
  BRIDGE_REPLAY_WINDOW_SECONDS: {
    schema: int(0, 7 * 24 * 3600),
    default: '0',
    description:
      '0 (off): every correctly signed incoming webhook delivery is posted, a repeated one too. Above 0 (an opt-in that departs from plain delivery): for that many seconds after a delivery is accepted, one with the same signature (so the same body) is refused as a replay (409).',
  },
  BRIDGE_DELIVERY_ATTEMPTS: {
    schema: int(1, 20),
    default: '6',
    description: 'Attempts at delivering one message to an outgoing bridge (webhook or graph API) before it is dropped and logged.',
  },
  BRIDGE_RETRY_BASE_MS: {
    schema: int(1, 600_000),
    default: '1000',
    description: 'First wait before retrying a failed outgoing bridge delivery; each further wait doubles (exponential back-off).',
  },
  BRIDGE_DELIVERY_TIMEOUT_MS: {
    schema: int(100, 600_000),
    default: '10000',
    description: 'Time one outgoing bridge request may take before it counts as failed.',
  },
  WORKFLOW_RETRY_BASE_MS: {
    schema: int(1, 3_600_000),
    default: '1000',
    description: 'Back-off before the first retry of a workflow step with onError retry; each further wait doubles (with jitter), up to WORKFLOW_RETRY_MAX_MS.',
  },
  WORKFLOW_RETRY_MAX_MS: {
    schema: int(1, 86_400_000),
    default: '300000',
    description: 'Longest back-off between two attempts of a workflow step.',
  },
  WORKFLOW_STEP_OUTPUT_MAX_BYTES: {
    schema: int(1024, 8 * 1024 * 1024),
    default: String(1024 * 1024),
    description:
      "Largest output (its JSON text) a workflow step keeps in its run; a larger one is kept as a marker `{truncated, bytes, limit, preview}`. A broadcast step's outputs are cut agent by agent, largest first.",
  },
  WORKFLOW_RUN_OUTPUT_MAX_BYTES: {
    schema: int(1024, 12 * 1024 * 1024),
    default: String(8 * 1024 * 1024),
    description:
      "Largest total of the step outputs one workflow run keeps (the run is stored as one document, at most 16 MiB); a step's output beyond what is left is kept as a marker.",
  },
  SHUTDOWN_TIMEOUT_MS: {
    schema: int(100, 120_000),
    default: '5000',
    description: 'Longest a graceful shutdown (SIGTERM/SIGINT) may take before the process exits anyway.',
  },
} satisfies Record<string, VariableSpec>;

type Vars = typeof VARIABLES;
type Parsed = { [K in keyof Vars]: z.output<Vars[K]['schema']> };

export interface Config {
  port: number;
  host: string;
  publicUrl: string;
  /** True when publicUrl was not set and follows the listening port. */
  publicUrlDefaulted: boolean;
  dataDir: string;
  mongodbUri?: string;
  mongodbDb?: string;
  storeCompactMinBytes: number;
  secretKey?: Buffer;
  /** Set in cluster mode (NATS_URL), which also has mongodbUri. */
  cluster?: ClusterConfig;
  logLevel: Parsed['LOG_LEVEL'];
  /** How the console names the `steward` command (from how this process was started, not a setting). */
  stewardCommand: StewardCommand;
  bodyLimitBytes: number;
  /** Proxies whose X-Forwarded-For is believed (addresses and CIDR subnets); empty: none. */
  trustedProxies: string[];
  /** Bearer token GET /metrics needs; unset: public. */
  metricsToken?: string;
  /** Rate limits per group: per source address and per key; null: off. */
  rateLimits: RateRules;
  allowUwsFallback: boolean;
  ed25519: Parsed['STEWARD_ED25519'];
  /** STEWARD_CHECK_RESPONSES: answers are checked against their routes' declared schemas. */
  checkResponses: boolean;
  actorIdleMs: number;
  shutdownTimeoutMs: number;
  sessionTtlMs: number;
  deviceCodeTtlMs: number;
  devicePollIntervalSeconds: number;
  ownerDid?: string;
  walletUrl: string;
  claimTtlMs: number;
  smtpUrl?: string;
  mailFrom: string;
  /** Model proxy base URL; set only when both PROXY_BASE_URL and PROXY_MASTER_KEY are. */
  proxyBaseUrl?: string;
  proxyMasterKey?: string;
  proxyTimeoutMs: number;
  /** When only one of the two proxy variables is set: the name of the missing one (the proxy stays off). */
  proxyIncomplete?: 'PROXY_BASE_URL' | 'PROXY_MASTER_KEY';
  skillsLibraryUrl?: string;
  skillsCodeHostUrl: string;
  agentSendBufferLimitBytes: number;
  agentMaxFrameBytes: number;
  feedBatchWindowMs: number;
  feedBatchMaxFrames: number;
  feedSocketsPerPerson: number;
  agentHandshakeTimeoutMs: number;
  agentInvalidFrameLimit: number;
  agentPendingSocketTimeoutMs: number;
  agentPendingRegistrationsMax: number;
  agentPendingRegistrationsPerAddressMax: number;
  agentHeartbeatIntervalMs: number;
  agentIdleTimeoutSeconds: number;
  agentLastSeenWriteMs: number;
  agentOfflineGraceMs: number;
  agentActorIdleMs: number;
  agentActorWriteDelayMs: number;
  tokenLedgerWriteGapMs: number;
  tokenRollupIntervalMs: number;
  tokenAgentDaysKept: number;
  /** 0: all. */
  tokenAgentMonthsKept: number;
  tokenHistoryDaysKept: number;
  intentTimeoutMs: number;
  intentMaxTimeoutMs: number;
  graphBaseUrl: string;
  bridgeReplayWindowMs: number;
  bridgeDeliveryAttempts: number;
  bridgeRetryBaseMs: number;
  bridgeDeliveryTimeoutMs: number;
  workflowRetryBaseMs: number;
  workflowRetryMaxMs: number;
  workflowStepOutputMaxBytes: number;
  workflowRunOutputMaxBytes: number;
}

export interface ClusterConfig {
  natsServers: string[];
  nodeId: string;
  name: string;
  shards: number;
  leaseMs: number;
  leaseMarginMs: number;
  requestTimeoutMs: number;
  busLossReleaseMs: number;
  changePollMs: number;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

export function decodeSecretKey(value: string): Buffer | null {
  const v = value.trim();
  if (/^[0-9a-fA-F]{64}$/.test(v)) return Buffer.from(v, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}={0,1}$/.test(v)) {
    const buf = Buffer.from(v.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    return buf.length === 32 ? buf : null;
  }
  return null;
}

/** Parses the environment; throws ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const problems: string[] = [];
  const out: Partial<Record<keyof Vars, unknown>> = {};
  for (const [name, spec] of Object.entries(VARIABLES) as [keyof Vars, VariableSpec][]) {
    const raw = env[name];
    const value = raw === undefined || raw === '' ? spec.default : raw;
    if (value === undefined) continue;
    const result = spec.schema.safeParse(value);
    if (result.success) out[name] = result.data;
    else problems.push(`${name}=${JSON.stringify(redactIfSecret(name, value))}: ${result.error.issues.map((i) => i.message).join('; ')}`);
  }
  if (problems.length === 0 && out.MONGODB_URI && !out.STEWARD_SECRET_KEY) {
    problems.push('STEWARD_SECRET_KEY: required when MONGODB_URI is set (the key must not sit beside the data it protects)');
  }
  if (out.NATS_URL && !out.MONGODB_URI) {
    problems.push(
      'NATS_URL: cluster mode needs MONGODB_URI as well: the nodes share their documents, shard ownership and leases through MongoDB, and the embedded store belongs to one process',
    );
  }
  if (typeof out.CLUSTER_LEASE_MS === 'number' && typeof out.CLUSTER_LEASE_MARGIN_MS === 'number' && out.CLUSTER_LEASE_MARGIN_MS * 3 >= out.CLUSTER_LEASE_MS) {
    problems.push(`CLUSTER_LEASE_MARGIN_MS=${out.CLUSTER_LEASE_MARGIN_MS}: must be below a third of CLUSTER_LEASE_MS (${out.CLUSTER_LEASE_MS}), so a node survives one failed renewal`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  const p = out as Parsed;
  return {
    port: p.PORT,
    host: p.HOST,
    publicUrl: p.PUBLIC_URL ?? `http://localhost:${p.PORT}`,
    publicUrlDefaulted: p.PUBLIC_URL === undefined,
    dataDir: p.DATA_DIR,
    mongodbUri: p.MONGODB_URI,
    mongodbDb: p.MONGODB_DB,
    storeCompactMinBytes: p.STORE_COMPACT_MIN_MB * 1024 * 1024,
    secretKey: p.STEWARD_SECRET_KEY ? (decodeSecretKey(p.STEWARD_SECRET_KEY) ?? undefined) : undefined,
    cluster: p.NATS_URL
      ? {
          natsServers: p.NATS_URL,
          nodeId: p.STEWARD_NODE_ID ?? defaultNodeId(),
          name: p.CLUSTER_NAME,
          shards: p.CLUSTER_SHARDS,
          leaseMs: p.CLUSTER_LEASE_MS,
          leaseMarginMs: p.CLUSTER_LEASE_MARGIN_MS,
          requestTimeoutMs: p.CLUSTER_REQUEST_TIMEOUT_MS,
          busLossReleaseMs: p.CLUSTER_BUS_LOSS_RELEASE_MS,
          changePollMs: p.CLUSTER_CHANGE_POLL_MS,
        }
      : undefined,
    logLevel: p.LOG_LEVEL,
    stewardCommand: stewardCommand(env),
    bodyLimitBytes: p.BODY_LIMIT_BYTES,
    trustedProxies: p.TRUSTED_PROXIES ?? [],
    metricsToken: p.METRICS_TOKEN,
    rateLimits: {
      login: { address: p.RATE_LIMIT_LOGIN_PER_ADDRESS, key: null },
      loginFailure: { address: p.RATE_LIMIT_LOGIN_FAILURES_PER_ADDRESS, key: p.RATE_LIMIT_LOGIN_PER_DID },
      claim: { address: p.RATE_LIMIT_CLAIM_PER_ADDRESS, key: p.RATE_LIMIT_CLAIM_PER_TOKEN },
      webhook: { address: p.RATE_LIMIT_WEBHOOK_PER_ADDRESS, key: p.RATE_LIMIT_WEBHOOK_PER_BRIDGE },
      agent: { address: p.RATE_LIMIT_AGENT_PER_ADDRESS, key: null },
      device: { address: p.RATE_LIMIT_DEVICE_PER_ADDRESS, key: null },
      userCode: { address: p.RATE_LIMIT_USER_CODE_PER_ADDRESS, key: p.RATE_LIMIT_USER_CODE_PER_PERSON },
      userCodeTotal: { address: null, key: p.RATE_LIMIT_USER_CODE_TOTAL },
    },
    allowUwsFallback: p.STEWARD_ALLOW_UWS_FALLBACK,
    ed25519: p.STEWARD_ED25519,
    checkResponses: p.STEWARD_CHECK_RESPONSES,
    actorIdleMs: p.ACTOR_IDLE_MS,
    shutdownTimeoutMs: p.SHUTDOWN_TIMEOUT_MS,
    sessionTtlMs: p.SESSION_TTL_HOURS * 3600_000,
    deviceCodeTtlMs: p.DEVICE_CODE_TTL_SECONDS * 1000,
    devicePollIntervalSeconds: p.DEVICE_POLL_INTERVAL_SECONDS,
    ownerDid: p.STEWARD_OWNER_DID,
    walletUrl: p.WALLET_URL,
    claimTtlMs: p.CLAIM_TTL_MINUTES * 60_000,
    smtpUrl: p.SMTP_URL,
    mailFrom: p.MAIL_FROM,
    proxyBaseUrl: p.PROXY_BASE_URL && p.PROXY_MASTER_KEY ? p.PROXY_BASE_URL : undefined,
    proxyMasterKey: p.PROXY_BASE_URL && p.PROXY_MASTER_KEY ? p.PROXY_MASTER_KEY : undefined,
    proxyTimeoutMs: p.PROXY_TIMEOUT_MS,
    proxyIncomplete: p.PROXY_BASE_URL && !p.PROXY_MASTER_KEY ? 'PROXY_MASTER_KEY' : !p.PROXY_BASE_URL && p.PROXY_MASTER_KEY ? 'PROXY_BASE_URL' : undefined,
    skillsLibraryUrl: p.SKILLS_LIBRARY_URL,
    skillsCodeHostUrl: p.SKILLS_CODE_HOST_URL,
    agentSendBufferLimitBytes: p.AGENT_SEND_BUFFER_LIMIT_BYTES,
    agentMaxFrameBytes: p.AGENT_MAX_FRAME_BYTES,
    feedBatchWindowMs: p.FEED_BATCH_WINDOW_MS,
    feedBatchMaxFrames: p.FEED_BATCH_MAX_FRAMES,
    feedSocketsPerPerson: p.FEED_SOCKETS_PER_PERSON,
    agentHandshakeTimeoutMs: p.AGENT_HANDSHAKE_TIMEOUT_MS,
    agentInvalidFrameLimit: p.AGENT_INVALID_FRAME_LIMIT,
    agentPendingSocketTimeoutMs: p.AGENT_PENDING_SOCKET_TIMEOUT_SECONDS * 1000,
    agentPendingRegistrationsMax: p.AGENT_PENDING_REGISTRATIONS_MAX,
    agentPendingRegistrationsPerAddressMax: p.AGENT_PENDING_REGISTRATIONS_PER_ADDRESS_MAX,
    agentHeartbeatIntervalMs: p.AGENT_HEARTBEAT_INTERVAL_SECONDS * 1000,
    agentIdleTimeoutSeconds: p.AGENT_IDLE_TIMEOUT_SECONDS,
    agentLastSeenWriteMs: p.AGENT_LAST_SEEN_WRITE_SECONDS * 1000,
    agentOfflineGraceMs: p.AGENT_OFFLINE_GRACE_MS,
    agentActorIdleMs: p.AGENT_ACTOR_IDLE_SECONDS * 1000,
    agentActorWriteDelayMs: p.AGENT_ACTOR_WRITE_DELAY_MS,
    tokenLedgerWriteGapMs: p.TOKEN_LEDGER_WRITE_GAP_MS,
    tokenRollupIntervalMs: p.TOKEN_ROLLUP_INTERVAL_SECONDS * 1000,
    tokenAgentDaysKept: p.TOKEN_AGENT_DAYS_KEPT,
    tokenAgentMonthsKept: p.TOKEN_AGENT_MONTHS_KEPT,
    tokenHistoryDaysKept: p.TOKEN_HISTORY_DAYS_KEPT,
    intentTimeoutMs: p.INTENT_TIMEOUT_MS,
    intentMaxTimeoutMs: p.INTENT_MAX_TIMEOUT_MS,
    graphBaseUrl: p.GRAPH_BASE_URL,
    bridgeReplayWindowMs: p.BRIDGE_REPLAY_WINDOW_SECONDS * 1000,
    bridgeDeliveryAttempts: p.BRIDGE_DELIVERY_ATTEMPTS,
    bridgeRetryBaseMs: p.BRIDGE_RETRY_BASE_MS,
    bridgeDeliveryTimeoutMs: p.BRIDGE_DELIVERY_TIMEOUT_MS,
    workflowRetryBaseMs: p.WORKFLOW_RETRY_BASE_MS,
    workflowRetryMaxMs: p.WORKFLOW_RETRY_MAX_MS,
    workflowStepOutputMaxBytes: p.WORKFLOW_STEP_OUTPUT_MAX_BYTES,
    workflowRunOutputMaxBytes: p.WORKFLOW_RUN_OUTPUT_MAX_BYTES,
  };
}

function redactIfSecret(name: string, value: string): string {
  return /SECRET|KEY|TOKEN|PASSWORD|SMTP_URL|MONGODB_URI|NATS_URL/.test(name) ? '<redacted>' : value;
}

/** The Markdown table of every variable, as it appears in docs/configuration.md. */
export function configTable(): string {
  const rows = Object.entries(VARIABLES).map(([name, spec]: [string, VariableSpec]) => {
    const def = spec.defaultText ?? (spec.default !== undefined ? `\`${spec.default}\`` : 'unset');
    return `| \`${name}\` | ${def} | ${spec.description} |`;
  });
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}
