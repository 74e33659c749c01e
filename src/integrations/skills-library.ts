/**
 * The external skills library: a catalogue of skills (SKILLS_LIBRARY_URL) and the code host
 * their SKILL.md files are read from (SKILLS_CODE_HOST_URL, a raw-content host where a file is
 * at `{base}/{owner}/{repo}/{branch}/{path}`).
 *
 * - The catalogue is cached for one hour. A failed refresh keeps serving the copy it has, marked
 *   stale, and waits a minute before asking again; with no copy at all the failure is a 502.
 *   Concurrent requests share one upstream call.
 * - A SKILL.md is looked up path by path — `skills/{skillId}/SKILL.md`, `{skillId}/SKILL.md`,
 *   `{skillId}.md` — each on `main`, then `master`. A 404 moves on to the next candidate; any
 *   other failure stops the search with a 502, so a file further down the list is never served
 *   in place of one the host could not answer for.
 * - `source` (owner/repo) and `skillId` are checked against a narrow alphabet before they are put
 *   into a URL, so neither can leave the repository (`..`, absolute URLs, encoded characters).
 *
 * Upstream URLs are never logged or put into error messages: a catalogue address may carry a key.
 */
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { AppError, badGateway, notFound } from '../domain/errors.js';
import type { Logger } from '../log.js';
import { OutageLog } from './outage-log.js';

/** A catalogue entry as GET /api/skills/library answers it: the ten fields of interface §4.9. */
export const CatalogueEntry = z
  .strictObject({
    id: z.string(),
    name: z.string(),
    description: z.string(),
    source: z.string(),
    skillId: z.string(),
    installs: z.number().int().min(0),
    githubStars: z.number().int().min(0),
    repoUrl: z.string(),
    standalone: z.boolean(),
    contentType: z.string(),
  })
  .meta({ id: 'SkillsLibraryEntry' });
export type CatalogueEntry = z.infer<typeof CatalogueEntry>;

export interface CatalogueResult {
  entries: CatalogueEntry[];
  /** True when the last refresh failed and an older copy is served. */
  stale: boolean;
  /** When the served copy was fetched (ISO 8601). */
  fetchedAt: string;
}

export interface SkillFile {
  /** The Markdown with its front matter removed. */
  content: string;
  /** The address the file was read from. */
  url: string;
  /** The front matter, when there was one and it was a YAML mapping. */
  frontMatter: Record<string, unknown> | null;
}

export const CATALOGUE_TTL_MS = 60 * 60 * 1000;
/** After a failed refresh, the stale copy is served this long before upstream is asked again. */
export const REFRESH_RETRY_MS = 60 * 1000;
const CATALOGUE_MAX_BYTES = 16 * 1024 * 1024;
const SKILL_FILE_MAX_BYTES = 1024 * 1024;
const UPSTREAM_TIMEOUT_MS = 15_000;

export const SKILL_FILE_PATHS = (skillId: string): string[] => [`skills/${skillId}/SKILL.md`, `${skillId}/SKILL.md`, `${skillId}.md`];
export const SKILL_FILE_BRANCHES = ['main', 'master'] as const;

/** owner/repo: an owner of letters, digits and inner hyphens; a repository name of letters, digits, `.`, `_`, `-` (not `.` or `..`). */
export const SOURCE_RE = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})\/(?!\.{1,2}$)[A-Za-z0-9._-]{1,100}$/;
/** One or more segments joined by `/`; each starts with a letter, digit or `_`, so none is `.` or `..`. */
export const SKILL_ID_RE = /^[A-Za-z0-9_][A-Za-z0-9._-]*(?:\/[A-Za-z0-9_][A-Za-z0-9._-]*)*$/;

export const sourceSchema = z
  .string({ message: 'required: the repository as owner/repo' })
  .min(1, { message: 'required: the repository as owner/repo' })
  .max(140)
  .regex(SOURCE_RE, { message: 'expected owner/repo (letters, digits, ".", "_", "-"; no "..", no URL)' });
export const skillIdSchema = z
  .string({ message: 'required: the skill id' })
  .min(1, { message: 'required: the skill id' })
  .max(200)
  .regex(SKILL_ID_RE, { message: 'expected a skill id (letters, digits, ".", "_", "-", segments joined by "/"; no "..", no URL)' });

/**
 * Splits a leading YAML front matter block (`---` on the first line, closed by `---` or `...` on
 * a line of its own) from Markdown. Returns the Markdown after it (leading blank lines dropped)
 * and the block parsed as YAML (null when it is not a mapping or not valid YAML; the block is
 * removed either way, since it is not meant for the reader). Text without such a block comes back
 * unchanged.
 */
export function splitFrontMatter(text: string): { body: string; frontMatter: Record<string, unknown> | null } {
  const src = text.replace(/^\uFEFF/, '');
  const open = /^---[ \t]*\r?\n/.exec(src);
  if (!open) return { body: text, frontMatter: null };
  const rest = src.slice(open[0].length);
  const close = /^(?:---|\.\.\.)[ \t]*(?:\r?\n|$)/m.exec(rest);
  if (!close) return { body: text, frontMatter: null };
  const yamlText = rest.slice(0, close.index);
  const body = rest.slice(close.index + close[0].length).replace(/^(?:[ \t]*\r?\n)+/, '');
  let frontMatter: Record<string, unknown> | null = null;
  try {
    const parsed: unknown = parseYaml(yamlText, { maxAliasCount: 50 });
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) frontMatter = parsed as Record<string, unknown>;
  } catch {
    frontMatter = null;
  }
  return { body, frontMatter };
}

/** Turns one catalogue item into an entry of the ten documented fields; null when it names no source or skill. */
export function normaliseEntry(item: unknown): CatalogueEntry | null {
  if (!item || typeof item !== 'object' || Array.isArray(item)) return null;
  const e = item as Record<string, unknown>;
  const str = (...keys: string[]): string | undefined => {
    for (const k of keys) {
      const v = e[k];
      if (typeof v === 'string' && v.trim() !== '') return v.trim();
    }
    return undefined;
  };
  const count = (...keys: string[]): number => {
    for (const k of keys) {
      const v = e[k];
      const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v.trim()) ? Number(v) : NaN;
      if (Number.isFinite(n) && n >= 0) return Math.floor(n);
    }
    return 0;
  };
  const source = str('source', 'repo', 'repository');
  const skillId = str('skillId', 'skill_id');
  if (!source || !skillId) return null;
  const standalone = e.standalone ?? e.is_standalone;
  return {
    id: str('id') ?? `${source}/${skillId}`,
    name: str('name') ?? skillId,
    description: str('description') ?? '',
    source,
    skillId,
    installs: count('installs'),
    githubStars: count('githubStars', 'github_stars', 'stars'),
    repoUrl: str('repoUrl', 'repo_url') ?? `https://github.com/${source}`,
    standalone: standalone === true || standalone === 1 || standalone === 'true',
    contentType: str('contentType', 'content_type') ?? 'skill',
  };
}

/** The catalogue body: a JSON array of entries, or an object holding one under `skills`, `entries` or `items`. */
export function parseCatalogue(text: string): { entries: CatalogueEntry[]; dropped: number } {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new Error('the catalogue is not valid JSON');
  }
  const obj = raw as Record<string, unknown> | null;
  const list = Array.isArray(raw)
    ? raw
    : obj && typeof obj === 'object'
      ? [obj.skills, obj.entries, obj.items].find((v): v is unknown[] => Array.isArray(v))
      : undefined;
  if (!list) throw new Error('the catalogue is neither a list nor an object with a skills list');
  const entries: CatalogueEntry[] = [];
  for (const item of list) {
    const entry = normaliseEntry(item);
    if (entry) entries.push(entry);
  }
  return { entries, dropped: list.length - entries.length };
}

class UpstreamError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface SkillsLibraryOptions {
  /** Catalogue address; undefined when not configured. */
  libraryUrl?: string;
  /** Raw-content host base, without a trailing slash. */
  codeHostUrl: string;
  /** User-Agent sent upstream. */
  userAgent?: string;
  /** Milliseconds since the epoch; replaceable so tests can move time. */
  now?: () => number;
}

export class SkillsLibrary {
  /** The clock of the cache; tests replace it to move past the hour. */
  now: () => number;
  private cached: { entries: CatalogueEntry[]; fetchedAt: number } | null = null;
  private failedAt: number | null = null;
  private inflight: Promise<CatalogueResult> | null = null;
  private readonly catalogueOutage: OutageLog;
  private readonly codeHostOutage: OutageLog;

  constructor(
    private readonly opts: SkillsLibraryOptions,
    private readonly log: Logger,
  ) {
    this.now = opts.now ?? Date.now;
    this.catalogueOutage = new OutageLog(log, 'the skills catalogue', opts.libraryUrl ? { catalogue: new URL(opts.libraryUrl).host } : {});
    this.codeHostOutage = new OutageLog(log, 'the code host of skill files', { codeHost: new URL(opts.codeHostUrl).host });
  }

  get configured(): boolean {
    return Boolean(this.opts.libraryUrl);
  }

  /** The catalogue, from the cache while it is younger than an hour. */
  async catalogue(): Promise<CatalogueResult> {
    if (!this.opts.libraryUrl) {
      throw new AppError(503, 'skills_library_not_configured', 'the skills library is not configured on this server (set SKILLS_LIBRARY_URL)');
    }
    const now = this.now();
    const c = this.cached;
    if (c && now - c.fetchedAt < CATALOGUE_TTL_MS) return this.result(c, false);
    if (c && this.failedAt !== null && now - this.failedAt < REFRESH_RETRY_MS) return this.result(c, true);
    this.inflight ??= this.refresh(this.opts.libraryUrl).finally(() => (this.inflight = null));
    return this.inflight;
  }

  private result(c: { entries: CatalogueEntry[]; fetchedAt: number }, stale: boolean): CatalogueResult {
    return { entries: c.entries, stale, fetchedAt: new Date(c.fetchedAt).toISOString() };
  }

  private async refresh(url: string): Promise<CatalogueResult> {
    try {
      const res = await this.get(url, CATALOGUE_MAX_BYTES, 'application/json');
      if (res.status !== 200) throw new UpstreamError(`the skills catalogue answered HTTP ${res.status}`, res.status);
      const { entries, dropped } = parseCatalogue(res.text);
      if (dropped > 0) this.log.warn({ dropped, kept: entries.length }, 'skills catalogue entries without a source or skill id were left out');
      this.cached = { entries, fetchedAt: this.now() };
      this.failedAt = null;
      this.catalogueOutage.worked();
      return this.result(this.cached, false);
    } catch (err) {
      const message = (err as Error).message;
      this.failedAt = this.now();
      this.catalogueOutage.failed(this.cached ? `${message} (serving the copy of ${new Date(this.cached.fetchedAt).toISOString()})` : message);
      if (this.cached) return this.result(this.cached, true);
      throw badGateway(`the skills catalogue could not be fetched: ${message}`, 'skills_library_unavailable');
    }
  }

  /**
   * Reads a skill's SKILL.md from the code host. `source` and `skillId` must already satisfy
   * SOURCE_RE and SKILL_ID_RE (the route schemas check them); they are checked again here.
   */
  async skillFile(source: string, skillId: string): Promise<SkillFile> {
    if (!SOURCE_RE.test(source) || !SKILL_ID_RE.test(skillId)) {
      throw new AppError(400, 'invalid_skill_reference', 'source must be owner/repo and skillId a relative skill id');
    }
    const base = this.opts.codeHostUrl.replace(/\/+$/, '');
    const seg = (s: string) => s.split('/').map(encodeURIComponent).join('/');
    for (const path of SKILL_FILE_PATHS(skillId)) {
      for (const branch of SKILL_FILE_BRANCHES) {
        const url = `${base}/${seg(source)}/${branch}/${seg(path)}`;
        // Defence in depth: the URL must still sit under the base and the repository.
        const parsed = new URL(url);
        if (!parsed.href.startsWith(`${base}/${seg(source)}/`) || parsed.pathname.split('/').some((p) => p === '..' || p === '.')) {
          throw new AppError(400, 'invalid_skill_reference', 'the skill reference leaves the repository');
        }
        let res: { status: number; text: string };
        try {
          res = await this.get(url, SKILL_FILE_MAX_BYTES, 'text/plain, text/markdown, */*');
        } catch (err) {
          this.codeHostOutage.failed((err as Error).message);
          throw badGateway(`the code host could not be reached for ${source}: ${(err as Error).message}`, 'code_host_unavailable');
        }
        if (res.status !== 200 && res.status !== 404) {
          this.codeHostOutage.failed(`HTTP ${res.status}`);
          throw badGateway(`the code host answered HTTP ${res.status} for ${source} (${branch}:${path})`, 'code_host_unavailable');
        }
        this.codeHostOutage.worked();
        if (res.status === 404) continue;
        const { body, frontMatter } = splitFrontMatter(res.text);
        return { content: body, url, frontMatter };
      }
    }
    throw notFound(
      `no SKILL.md for '${skillId}' in ${source}: tried ${SKILL_FILE_PATHS(skillId).join(', ')} on ${SKILL_FILE_BRANCHES.join(' and ')}`,
      'skill_file_not_found',
    );
  }

  /** One GET with a timeout and a size cap; answers the status and, for 200, the body as UTF-8. */
  private async get(url: string, maxBytes: number, accept: string): Promise<{ status: number; text: string }> {
    let res: Response;
    try {
      res = await fetch(url, {
        headers: { accept, 'user-agent': this.opts.userAgent ?? 'steward' },
        signal: AbortSignal.timeout(UPSTREAM_TIMEOUT_MS),
        redirect: 'follow',
      });
    } catch (err) {
      const e = err as Error & { cause?: { code?: string } };
      const reason = e.name === 'TimeoutError' ? `no answer within ${UPSTREAM_TIMEOUT_MS / 1000} s` : (e.cause?.code ?? 'connection failed');
      throw new UpstreamError(reason);
    }
    if (res.status !== 200) {
      await res.body?.cancel().catch(() => undefined);
      return { status: res.status, text: '' };
    }
    const declared = Number(res.headers.get('content-length') ?? NaN);
    if (Number.isFinite(declared) && declared > maxBytes) {
      await res.body?.cancel().catch(() => undefined);
      throw new UpstreamError(`the answer is larger than ${maxBytes} bytes`);
    }
    const chunks: Uint8Array[] = [];
    let size = 0;
    if (res.body) {
      const reader = res.body.getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          size += value.byteLength;
          if (size > maxBytes) {
            await reader.cancel().catch(() => undefined);
            throw new UpstreamError(`the answer is larger than ${maxBytes} bytes`);
          }
          chunks.push(value);
        }
      } catch (err) {
        if (err instanceof UpstreamError) throw err;
        throw new UpstreamError('the answer was cut short');
      }
    }
    return { status: 200, text: Buffer.concat(chunks).toString('utf8') };
  }
}
