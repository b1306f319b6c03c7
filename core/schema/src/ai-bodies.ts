import { z } from 'zod';
import {
  AI_MODELS,
  ALT_CONTEXT_MAX,
  ALT_TEXT_MAX,
  ALT_TEXT_SOURCES,
  ASPECT_RATIO_MAX,
  DEFAULT_AI_MODEL,
  DEFAULT_ASPECT_RATIO,
  INSTRUCTION_MAX,
  PROMPT_MAX,
  parseAspectRatio,
} from './ai-table.ts';
import { OutputFormatSchema } from './format-schemas.ts';
import { MAX_DIMENSION_LIMIT, QUALITY_MAX, QUALITY_MIN } from './option-table.ts';
import { CompressOptionsSchema } from './options.ts';

const aspectRatio = z
  .string()
  .refine((text) => {
    const ratio = parseAspectRatio(text);
    if (!ratio) return false;
    const r = ratio.width / ratio.height;
    return r <= ASPECT_RATIO_MAX && r >= 1 / ASPECT_RATIO_MAX;
  }, `width:height, two whole numbers from 1 to 100, between 1:${ASPECT_RATIO_MAX} and ${ASPECT_RATIO_MAX}:1`)
  .transform((text) => {
    const { width, height } = parseAspectRatio(text)!;
    return `${width}:${height}`;
  });

export const GenerateRequestSchema = z
  .object({
    prompt: z
      .string()
      .trim()
      .min(1)
      .max(PROMPT_MAX)
      .describe(`What to draw, in words (1–${PROMPT_MAX} characters).`),
    model: z
      .enum(AI_MODELS)
      .default(DEFAULT_AI_MODEL)
      .describe(
        `The kind of picture: fast (quick drafts), photo (photographic), design (graphics, text), icon (simple, flat). Default ${DEFAULT_AI_MODEL}. Each maps to a model of the configured provider (X-Ai-Model says which).`,
      ),
    aspect_ratio: aspectRatio
      .default(DEFAULT_ASPECT_RATIO)
      .describe(
        `width:height (e.g. 16:9). The nearest ratio the model supports is generated; X-Aspect-Ratio says which. Default ${DEFAULT_ASPECT_RATIO}.`,
      ),
    output_format: CompressOptionsSchema.shape.output_format,
    quality: CompressOptionsSchema.shape.quality,
    max_dimension: CompressOptionsSchema.shape.max_dimension,
  })
  .strict()
  .describe('The body of POST /api/v1/generate. The image goes through the engine like a compression.');
export type GenerateRequest = z.infer<typeof GenerateRequestSchema>;

/** The multipart fields of POST /api/v1/edit besides `file`: the instruction and the compress options. */
export const EditFormSchema = CompressOptionsSchema.extend({
  instruction: z
    .string()
    .trim()
    .min(1)
    .max(INSTRUCTION_MAX)
    .describe(
      `What to do, in plain English (1–${INSTRUCTION_MAX} characters): "make it 800 wide and black and white", "rotate left and convert to webp", "crop to square". A format or quality named in it wins over output_format and quality.`,
    ),
})
  .strict()
  .describe('The fields of POST /api/v1/edit beside its `file` part.');
export type EditForm = z.infer<typeof EditFormSchema>;

const factor = z.number().min(0.1).max(4);

/** One operation an instruction was parsed into; X-Edit-Operations lists those applied, in order. */
export const EditOperationSchema = z
  .discriminatedUnion('op', [
    z
      .object({
        op: z.literal('resize'),
        width: z.int().min(1).max(MAX_DIMENSION_LIMIT).optional(),
        height: z.int().min(1).max(MAX_DIMENSION_LIMIT).optional(),
        scale: z.number().min(0.01).max(8).optional(),
      })
      .describe('Width and/or height in pixels (both: fit inside, keeping the ratio), or a scale factor.'),
    z
      .object({
        op: z.literal('crop'),
        aspect: z.string().describe('width:height, cropped around the centre.'),
      })
      .describe('Crop to an aspect ratio, around the centre.'),
    z
      .object({ op: z.literal('rotate'), degrees: z.number().gt(-360).lt(360).describe('Clockwise.') })
      .describe(
        'Rotate clockwise (negative: counter-clockwise); corners of other angles are transparent or white.',
      ),
    z.object({ op: z.literal('flip'), direction: z.enum(['horizontal', 'vertical']) }).describe('Mirror.'),
    z.object({ op: z.literal('grayscale') }).describe('Black and white.'),
    z.object({ op: z.literal('blur'), sigma: z.number().min(0.3).max(100) }).describe('Gaussian blur.'),
    z.object({ op: z.literal('sharpen'), sigma: z.number().min(0.3).max(10) }).describe('Unsharp mask.'),
    z.object({ op: z.literal('brightness'), factor }).describe('Multiply the brightness (1 keeps it).'),
    z.object({ op: z.literal('contrast'), factor }).describe('Stretch (>1) or flatten (<1) around mid-grey.'),
    z.object({ op: z.literal('saturation'), factor }).describe('Multiply the colour saturation.'),
    z.object({ op: z.literal('format'), format: OutputFormatSchema }).describe('The output format.'),
    z
      .object({
        op: z.literal('quality'),
        quality: z.union([z.int().min(QUALITY_MIN).max(QUALITY_MAX), z.literal('auto')]),
      })
      .describe("The output quality on Compresso's scale."),
  ])
  .describe('One edit operation.');
export type EditOperation = z.infer<typeof EditOperationSchema>;

const contextField = (what: string) =>
  z
    .string()
    .trim()
    .max(ALT_CONTEXT_MAX)
    .optional()
    .describe(`${what} (at most ${ALT_CONTEXT_MAX} characters).`);

export const AltTextFormSchema = z
  .object({
    product_title: contextField('The product the image shows'),
    vendor: contextField('Its brand or vendor'),
    page_title: contextField('The title of the page the image is on'),
    language: z
      .string()
      .regex(/^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/, 'a language tag such as en or pt-BR')
      .default('en')
      .describe(
        'The language to write in (BCP 47, default en). A vision provider writes in it; offline text is English, and `language` in the answer says which.',
      ),
  })
  .strict()
  .describe('The fields of POST /api/v1/alt-text beside its `file` part.');
export type AltTextForm = z.infer<typeof AltTextFormSchema>;

export const ORIENTATIONS = ['landscape', 'portrait', 'square'] as const;

export const ImageFactsSchema = z
  .object({
    width: z.int().positive(),
    height: z.int().positive(),
    orientation: z.enum(ORIENTATIONS).describe('square: sides within 3% of each other.'),
    dominant_color: z
      .string()
      .regex(/^#[0-9a-f]{6}$/)
      .describe('The most common colour, as #rrggbb.'),
    color_name: z.string().describe('A plain name for dominant_color (e.g. "dark blue").'),
    transparent: z.boolean().describe('True when some pixels are not fully opaque.'),
  })
  .describe('What the server measured on the image itself.');
export type ImageFacts = z.infer<typeof ImageFactsSchema>;

export const AltTextResultSchema = z
  .object({
    alt: z.string().max(ALT_TEXT_MAX).describe(`The alt text (at most ${ALT_TEXT_MAX} characters).`),
    source: z
      .enum(ALT_TEXT_SOURCES)
      .describe(
        'provider: written by a vision model that saw the image; offline: composed from the context fields and the measured facts only, never describing content nobody saw.',
      ),
    language: z.string().describe('The language the text is in.'),
    basis: z
      .array(z.string())
      .describe(
        'What the text was made from: context fields sent (product_title, vendor, page_title, file_name), facts (orientation, dominant_color, transparent), or image (seen by the provider).',
      ),
    provider: z.string().optional().describe('source provider: who wrote it (also X-Ai-Provider).'),
    model: z.string().optional().describe('source provider: the model (also X-Ai-Model).'),
    facts: ImageFactsSchema,
  })
  .describe('Alt text for an image, and where it came from.');
export type AltTextResult = z.infer<typeof AltTextResultSchema>;
