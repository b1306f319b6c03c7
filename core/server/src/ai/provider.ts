import type { AiModel, AiProviderName } from '@compresso/schema';

/** A picture a provider made: its bytes (any format the engine reads) and what made it. */
export interface ProviderImage {
  bytes: Uint8Array;
  /** The provider's model id. */
  model: string;
}

export interface GenerateInput {
  prompt: string;
  model: AiModel;
  /** width:height, as asked; the adapter picks its nearest supported ratio. */
  aspectRatio: string;
  signal: AbortSignal;
}

export interface EditInput {
  /** The image, as PNG. */
  image: Uint8Array;
  /** What to change, in the caller's words (the generative phrases of the instruction). */
  prompt: string;
  signal: AbortSignal;
}

export interface DescribeInput {
  /** The image, as a small JPEG. */
  image: Uint8Array;
  context: { product_title?: string; vendor?: string; page_title?: string };
  language: string;
  signal: AbortSignal;
}

/**
 * One AI provider behind the routes. `generate` is required; an adapter without image editing or
 * vision leaves those out, and the routes say so (PROVIDER_NOT_CONFIGURED, or offline alt text).
 */
export interface AiProvider {
  readonly name: AiProviderName;
  /** Our model name → the provider's model id, after configuration. */
  readonly models: Readonly<Record<AiModel, string>>;
  /** The ratios a provider model can make. */
  supportedRatios(model: string): readonly string[];
  generate(input: GenerateInput): Promise<ProviderImage & { aspectRatio: string }>;
  edit?(input: EditInput): Promise<ProviderImage>;
  describe?(input: DescribeInput): Promise<{ alt: string; model: string }>;
}
