import type { Config } from '@compresso/runtime';
import { openAiProvider } from './openai.ts';
import type { AiProvider } from './provider.ts';
import { replicateProvider } from './replicate.ts';

/**
 * The provider the configuration names: COMPRESSO_AI_PROVIDER, or the first of OpenAI and Replicate
 * that has its key. Undefined when none is configured.
 */
export function aiProviderFromConfig(
  config: Config,
  options: { pollMs?: number } = {},
): AiProvider | undefined {
  const models = {
    fast: config.aiModelFast,
    photo: config.aiModelPhoto,
    design: config.aiModelDesign,
    icon: config.aiModelIcon,
  };
  const which =
    config.aiProvider ??
    (config.openaiApiKey ? 'openai' : config.replicateApiToken ? 'replicate' : undefined);
  if (which === 'openai' && config.openaiApiKey) {
    return openAiProvider({
      apiKey: config.openaiApiKey,
      baseUrl: config.openaiBaseUrl,
      timeoutMs: config.aiTimeoutMs,
      models,
      editModel: config.aiEditModel,
      visionModel: config.aiVisionModel,
    });
  }
  if (which === 'replicate' && config.replicateApiToken) {
    return replicateProvider({
      token: config.replicateApiToken,
      baseUrl: config.replicateBaseUrl,
      timeoutMs: config.aiTimeoutMs,
      models,
      editModel: config.aiEditModel,
      ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}),
    });
  }
  return undefined;
}

/** What to tell a caller when a route needs a provider and none is set. */
export const PROVIDER_SETTINGS =
  'set OPENAI_API_KEY (and OPENAI_BASE_URL for another OpenAI-compatible service) or REPLICATE_API_TOKEN on the server';
