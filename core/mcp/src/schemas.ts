import {
  AltTextFormSchema,
  AltTextResultSchema,
  COMPRESS_OPTION_NAMES,
  type CompressOptionName,
  EditFormSchema,
  EditOperationSchema,
  GenerateRequestSchema,
  InfoResultSchema,
  jsonSchemaOf,
  RESULT_FIELDS_NOT_IN_HEADERS,
} from '@compresso/schema';
import { z } from 'zod';

/**
 * The tools' input and output shapes, derived from @compresso/schema so the tools cannot drift from
 * what the server accepts; only what is MCP-specific (paths, overwrite, the batch envelope) is new.
 *
 * The compress options are shown to the assistant as the schema's own JSON Schema (ranges, accepted
 * spellings, descriptions), but validated in the handler by `parseCompressOptions`, the server's own
 * boundary check: its refusal names the field, what it accepts and what it got, with the code
 * INVALID_OPTION — where the SDK's validation of the same zod fields only says "Invalid input at
 * output_format".
 */
const optionJson = (
  jsonSchemaOf('CompressOptions', 'input') as { properties: Record<string, Record<string, unknown>> }
).properties;

function optionField(name: CompressOptionName) {
  const json = optionJson[name];
  if (!json) throw new Error(`@compresso/schema has no compress option ${name}`);
  return z.unknown().optional().meta(json);
}

/** The compress options of the contract's table, each an argument of every image tool. */
export const IMAGE_OPTION_FIELDS: readonly CompressOptionName[] = COMPRESS_OPTION_NAMES;

/** Largest batch in one call: a batch holds every result in memory and an assistant waits for it. */
export const MAX_BATCH_FILES = 100;
/** Results up to this size are also returned as image content, so the assistant can look at them. */
// 256 kB in the units the tools print sizes in (powers of 1000), so the limit reads as it is.
export const IMAGE_CONTENT_LIMIT = 256_000;

const imageOptions = Object.fromEntries(
  IMAGE_OPTION_FIELDS.map((name) => [name, optionField(name)]),
) as Record<CompressOptionName, ReturnType<typeof optionField>>;

const filePath = z
  .string()
  .min(1)
  .describe(
    'Absolute path of the image (JPEG, PNG, WebP, AVIF, GIF, TIFF or HEIC/HEIF) on the machine running this server.',
  );

const overwrite = z
  .boolean()
  .default(false)
  .describe(
    'Allow replacing an existing file at output_path, the source image included. Default false: the source is never replaced unless this is true.',
  );

export const compressImageInput = {
  file_path: filePath,
  output_path: z
    .string()
    .min(1)
    .optional()
    .describe(
      'Absolute path of the file to write, or of an existing directory to write <name>.<extension> into. Default: <name>.min.<extension> beside the source (an earlier result of that name is replaced). An existing file is only replaced with overwrite: true.',
    ),
  ...imageOptions,
  overwrite,
  include_image: z
    .boolean()
    .default(true)
    .describe(
      `Also return the compressed image as image content when it is at most ${IMAGE_CONTENT_LIMIT / 1000} kB and JPEG, PNG, WebP or GIF. Default true.`,
    ),
};

export const imageInfoInput = {
  file_path: filePath,
  ...imageOptions,
};

export const compressBatchInput = {
  file_paths: z
    .array(filePath)
    .min(1)
    .max(MAX_BATCH_FILES)
    .describe(`Absolute paths of the images, 1 to ${MAX_BATCH_FILES}.`),
  output_dir: z
    .string()
    .min(1)
    .optional()
    .describe(
      'Absolute path of a directory for the results (created when missing): <name>.<extension> each, a name used twice gets -2, -3…; files of those names there are replaced, a source never. Default: each result beside its source as <name>.min.<extension>.',
    ),
  ...imageOptions,
};

/**
 * What one compression did: the schema's InfoResult as the compress answer's headers carry it (the
 * contract's result-header table; frames is not among them).
 */
const compressFacts = InfoResultSchema.omit(
  Object.fromEntries(Object.keys(RESULT_FIELDS_NOT_IN_HEADERS).map((field) => [field, true])) as {
    frames: true;
  },
).shape;

export const compressImageOutput = {
  file_path: z.string().describe('The source image (unchanged unless overwrite was asked).'),
  output_path: z.string().describe('The file written.'),
  ...compressFacts,
};

export const imageInfoOutput = {
  file_path: z.string().describe('The image examined; nothing was written.'),
  ...InfoResultSchema.shape,
};

const itemError = z
  .object({
    code: z.string().describe('Stable error code (@compresso/schema), e.g. NOT_AN_IMAGE, CORRUPT_IMAGE.'),
    message: z.string(),
    status: z.int().optional().describe('HTTP status, when the server answered.'),
    retry_after_seconds: z.int().optional(),
    resets_at: z.string().optional(),
  })
  .describe('Why this file failed.');

export const compressBatchOutput = {
  total: z.int().nonnegative(),
  succeeded: z.int().nonnegative(),
  failed: z.int().nonnegative(),
  input_size: z.int().nonnegative().describe('Bytes of the sources that succeeded.'),
  output_size: z.int().nonnegative().describe('Bytes of their results.'),
  savings_percent: z
    .number()
    .describe('Share saved over the files that succeeded, in percent, rounded to 0.1.'),
  results: z
    .array(
      z.union([
        z.object({ file_path: z.string(), ok: z.literal(true), output_path: z.string(), ...compressFacts }),
        z.object({ file_path: z.string(), ok: z.literal(false), error: itemError }),
      ]),
    )
    .describe('One entry per file, in the order given.'),
};

export const usageOutput = {
  plan: z.string().describe('The account plan, e.g. pro.'),
  day: z.string().describe('The quota day (UTC), YYYY-MM-DD.'),
  used: z.int().nonnegative().describe('Requests counted today, this one included.'),
  limit: z.int().nonnegative().describe('Requests allowed per day.'),
  remaining: z.int().nonnegative(),
  resets_at: z.string().describe('When the count resets (00:00 UTC), ISO 8601.'),
  resets_in_seconds: z.int().nonnegative(),
};

// --- AI tools: their arguments are the contract's bodies (GenerateRequest, EditForm, AltTextForm).

export const generateImageInput = {
  prompt: GenerateRequestSchema.shape.prompt,
  model: GenerateRequestSchema.shape.model,
  aspect_ratio: GenerateRequestSchema.shape.aspect_ratio,
  output_path: z
    .string()
    .min(1)
    .describe(
      'Absolute path of the file to write, or of an existing directory to write generated.<extension> into. An existing file is only replaced with overwrite: true.',
    ),
  output_format: imageOptions.output_format,
  quality: imageOptions.quality,
  max_dimension: imageOptions.max_dimension,
  overwrite,
  include_image: z
    .boolean()
    .default(true)
    .describe(
      `Also return the image as image content when it is at most ${IMAGE_CONTENT_LIMIT / 1000} kB. Default true.`,
    ),
};

export const generateImageOutput = {
  output_path: z.string().describe('The file written.'),
  provider: z.string().describe('The AI provider that made it (openai, replicate).'),
  model: z.string().describe("The provider's model."),
  aspect_ratio: z.string().describe('The ratio made: the nearest the model supports to the one asked.'),
  aspect_ratio_requested: z.string().optional().describe('The ratio asked, when it differs.'),
  ...compressFacts,
};

export const editImageInput = {
  file_path: filePath,
  instruction: EditFormSchema.shape.instruction,
  output_path: z
    .string()
    .min(1)
    .optional()
    .describe(
      'Absolute path of the file to write, or of an existing directory to write <name>.<extension> into. Default: <name>.edited.<extension> beside the source.',
    ),
  ...imageOptions,
  overwrite,
  include_image: z
    .boolean()
    .default(true)
    .describe(
      `Also return the edited image as image content when it is at most ${IMAGE_CONTENT_LIMIT / 1000} kB. Default true.`,
    ),
};

export const editImageOutput = {
  file_path: z.string().describe('The source image (unchanged).'),
  output_path: z.string().describe('The file written.'),
  operations: z.array(EditOperationSchema).describe('The operations applied, in order.'),
  unrecognized: z
    .array(z.string())
    .describe('Words of the instruction that were not understood (not applied).'),
  generated: z.array(z.string()).describe('Phrases a generative AI provider carried out, when any.'),
  provider: z.string().optional(),
  model: z.string().optional(),
  ...compressFacts,
};

export const altTextInput = {
  file_path: filePath,
  ...AltTextFormSchema.shape,
};

export const altTextOutput = {
  file_path: z.string().describe('The image described.'),
  ...AltTextResultSchema.shape,
};
