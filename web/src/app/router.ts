/**
 * A small router of our own: the path and the query string are signals, so a view reads its
 * filters and selections from the URL (shareable, survives a reload) and writes them back with
 * `setQuery` (replaceState: typing in a filter does not fill the history).
 */
import { signal } from '@preact/signals';

export interface Loc {
  path: string;
  query: URLSearchParams;
}

const read = (): Loc => ({ path: location.pathname, query: new URLSearchParams(location.search) });
export const loc = signal<Loc>(read());

addEventListener('popstate', () => (loc.value = read()));

export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  const url = new URL(to, location.origin);
  if (url.pathname + url.search === location.pathname + location.search) return;
  history[opts.replace ? 'replaceState' : 'pushState'](null, '', url.pathname + url.search);
  loc.value = read();
  if (!opts.replace) scrollTo(0, 0);
}

/** Changes query parameters of the current URL; null or '' removes one. */
export function setQuery(patch: Record<string, string | number | boolean | null | undefined>, opts: { push?: boolean } = {}): void {
  const q = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(patch)) {
    if (v === null || v === undefined || v === '' || v === false) q.delete(k);
    else q.set(k, String(v));
  }
  const s = q.toString();
  const url = location.pathname + (s ? `?${s}` : '');
  history[opts.push ? 'pushState' : 'replaceState'](null, '', url);
  loc.value = read();
}

/** A query parameter of the current URL. */
export const qp = (name: string, fallback = ''): string => loc.value.query.get(name) ?? fallback;

/** Matches `/agents/:id` against a path; params are percent-decoded. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split('/').filter(Boolean);
  const s = path.split('/').filter(Boolean);
  if (p.length !== s.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i]!.startsWith(':')) {
      try {
        params[p[i]!.slice(1)] = decodeURIComponent(s[i]!);
      } catch {
        return null;
      }
    } else if (p[i] !== s[i]) return null;
  }
  return params;
}

/** Link clicks handled in the page (modifier keys and other targets left to the browser). */
export function onLinkClick(e: MouseEvent): void {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = (e.target as Element | null)?.closest?.('a');
  if (!a || a.target || a.hasAttribute('download')) return;
  const href = a.getAttribute('href');
  if (!href || !href.startsWith('/') || href.startsWith('/api/')) return;
  e.preventDefault();
  navigate(href);
}
