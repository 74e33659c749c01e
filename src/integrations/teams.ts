/**
 * The team-chat service: reading bot-framework activities that arrive on
 * POST /api/bridges/teams/incoming, and posting channel messages through its graph API
 * (`POST {GRAPH_BASE_URL}/teams/{teamId}/channels/{channelId}/messages`).
 *
 * The bot framework's bearer token on incoming activities is not verified (the interface
 * document says so): that endpoint must not be reachable from the public internet.
 */
import { postJson, type PostResult } from './webhook.js';

/** The parts of a bot-framework activity Steward reads. */
export interface TeamsActivity {
  type?: unknown;
  id?: unknown;
  text?: unknown;
  from?: { id?: unknown; name?: unknown; aadObjectId?: unknown } | null;
  channelData?: { teamsChannelId?: unknown; teamsTeamId?: unknown; team?: { id?: unknown } | null; channel?: { id?: unknown } | null } | null;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

/**
 * The plain text of an activity's HTML-ish text: `<at>Name</at>` becomes `@Name`, line breaks
 * (`<br>`, `</p>`, `</div>`) become newlines, other tags are dropped, entities decoded.
 */
export function activityText(text: string): string {
  return text
    .replace(/<at>([\s\S]*?)<\/at>/gi, (_m, name: string) => {
      const plain = stripTags(name).trim();
      return plain ? `@${plain}` : '';
    })
    .replace(/<br\s*\/?>|<\/p>|<\/div>/gi, '\n')
    .replace(/<[^>]*>/g, '')
    .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (m, e: string) => decodeEntity(e) ?? m)
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

function stripTags(s: string): string {
  return s.replace(/<[^>]*>/g, '');
}

function decodeEntity(e: string): string | undefined {
  if (e[0] === '#') {
    const code = e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
    return Number.isFinite(code) && code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : undefined;
  }
  return ENTITIES[e.toLowerCase()];
}

/** Escapes text for the HTML body of a graph API message; newlines become `<br>`. */
export function toHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/\n/g, '<br>');
}

/** The channel id an activity names (`channelData.teamsChannelId`, else `channelData.channel.id`). */
export function teamsChannelIdOf(a: TeamsActivity): string | null {
  const cd = a.channelData;
  const id = cd?.teamsChannelId ?? cd?.channel?.id;
  return typeof id === 'string' && id.length > 0 ? id : null;
}

/** Posts one message to a team channel with the bridge's access token. */
export function postChannelMessage(
  graphBaseUrl: string,
  target: { teamId: string; channelId: string; accessToken: string },
  body: { content: string; contentType: 'html' | 'text' },
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<PostResult> {
  const url = `${graphBaseUrl}/teams/${encodeURIComponent(target.teamId)}/channels/${encodeURIComponent(target.channelId)}/messages`;
  return postJson(url, JSON.stringify({ body }), { authorization: `Bearer ${target.accessToken}` }, opts);
}
