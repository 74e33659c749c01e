/** Text a query matches literally inside a regular expression (a search box's words, an action prefix). */
export const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
