/**
 * The model area's vocabulary: the provider that needs a base URL, the name a model has in the
 * proxy, and what each sealed secret is bound to (the associated data of its sealing).
 */
import { slugify } from './slugs.js';

/** The provider of an OpenAI-compatible endpoint: it needs a base URL. */
export const OPENAI_COMPATIBLE = 'openai-compatible';

/** `{provider}/{slug of the name}`, fixed at creation (renaming a model does not change it); null when the name gives no slug. */
export function proxyModelNameOf(provider: string, name: string): string | null {
  const slug = slugify(name);
  return slug ? `${provider}/${slug}` : null;
}

/** A registry model's provider key. */
export const modelKeyAd = (id: string) => `model-api-key:${id}`;
/** A workspace's virtual key. */
export const workspaceKeyAd = (workspaceId: string) => `workspace-llm-key:${workspaceId}`;
/** An agent's manual provider key. */
export const agentKeyAd = (did: string) => `agent-llm-key:${did}`;
