/**
 * Slugs: the short names in paths and URLs. A workspace's is strict (lowercase letters and digits,
 * words joined by single hyphens); a channel's keeps every character but whitespace.
 */

/** A workspace slug as given. */
export const SLUG_RE = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/** Lowercase, accents dropped, every run of other characters one hyphen, no hyphen at either end. */
export function slugify(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 64)
    .replace(/-+$/, '');
}

/** Longest slug a channel may be given (the route checks it). */
export const CHANNEL_SLUG_MAX = 100;

/**
 * The slug of a channel created without one (interface §2.7): the name, trimmed and lower-cased,
 * with each whitespace character replaced by a hyphen. Every other character is kept, so
 * "C++ Devs" gives `c++-devs` and "日本語" gives `日本語`. Unlike workspace slugs, nothing is dropped.
 */
export function channelSlug(name: string): string {
  return name.trim().toLowerCase().replace(/\s/g, '-');
}
