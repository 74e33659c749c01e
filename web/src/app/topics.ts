/**
 * A view's subscription to a feed topic, narrowed by the topic's filters (`workflowId`, `kind`,
 * `id`…), for as long as the view is mounted and `enabled`. The handler also gets `resync` when
 * frames may have been missed, and should then read its data again over HTTP.
 */
import { useEffect, useRef } from 'preact/hooks';
import { feed, type FeedFrame, type FeedKey } from './feed';

export function useTopic(topic: string, filters: Record<string, string | undefined>, handler: (frame: FeedFrame) => void, enabled = true): void {
  const saved = useRef(handler);
  saved.current = handler;
  const narrowed = Object.fromEntries(Object.entries(filters).filter(([, v]) => v !== undefined && v !== ''));
  const id = JSON.stringify(narrowed);
  useEffect(() => {
    if (!enabled) return undefined;
    const key = { topic, ...narrowed } as FeedKey;
    return feed.subscribe(key, (f) => saved.current(f));
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [topic, id, enabled]);
}
