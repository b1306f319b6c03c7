import { z } from 'zod';
import { InputFormatSchema, OutputFormatSchema } from './format-schemas.ts';

export const InfoResultSchema = z
  .object({
    input_size: z.int().nonnegative().describe('Size of the input in bytes.'),
    output_size: z.int().nonnegative().describe('Size of the output in bytes.'),
    savings_percent: z
      .number()
      .describe(
        'Share of the input saved, in percent, rounded to 0.1 (0 when the input is returned unchanged).',
      ),
    input_format: InputFormatSchema.describe('Format of the input.'),
    output_format: OutputFormatSchema.describe('Format of the output.'),
    input_width: z.int().positive().describe('Width of the input in pixels, after orientation.'),
    input_height: z.int().positive().describe('Height of the input in pixels, after orientation.'),
    width: z.int().positive().describe('Width of the output in pixels.'),
    height: z.int().positive().describe('Height of the output in pixels.'),
    quality: z
      .int()
      .min(1)
      .max(100)
      .describe('The quality used, on the 1–100 scale (the one chosen when "auto").'),
    auto_quality: z.boolean().describe('True when the quality was chosen by the perceptual search.'),
    optimized: z
      .boolean()
      .describe(
        'False when the input was already as small as Compresso can make it and is returned unchanged.',
      ),
    score: z
      .number()
      .optional()
      .describe(
        'SSIMULACRA2 score of the output against the (resized) input, when one was computed: 90 visually lossless, 80 very high, 70 high.',
      ),
    chroma_subsampling: z
      .enum(['4:2:0', '4:4:4'])
      .optional()
      .describe(
        'JPEG and lossy AVIF: the chroma subsampling written. Quality "auto" picks 4:4:4 for text, sharp colour edges and small images, where 4:2:0 cannot reach its floor.',
      ),
    lossless: z
      .boolean()
      .optional()
      .describe(
        'WebP, AVIF and PNG: true for a lossless output (PNG: truecolour rather than a palette). Quality "auto" may choose lossless WebP for screenshots and graphics when it is smaller, or when no lossy quality reaches its floor.',
      ),
    near_lossless: z
      .boolean()
      .optional()
      .describe('WebP: true when written near-lossless (quality "auto" on small images).'),
    effort: z
      .int()
      .nonnegative()
      .optional()
      .describe('Encoder effort (WebP method 0–6, AVIF effort 0–9, palette PNG effort 1–10).'),
    auto_steps: z
      .int()
      .nonnegative()
      .optional()
      .describe('Quality "auto": how many candidate encodes were scored to choose this output.'),
    metadata_stripped: z.boolean().describe('True when EXIF, XMP and IPTC were removed.'),
    frames: z.int().positive().describe('Number of frames (1 for still images).'),
  })
  .describe('What a compression did, or would do.');
export type InfoResult = z.infer<typeof InfoResultSchema>;

export const ImageInspectionSchema = z
  .object({
    format: InputFormatSchema,
    size: z.int().nonnegative().describe('Bytes.'),
    width: z.int().positive().describe('Width in pixels as displayed (orientation applied).'),
    height: z.int().positive().describe('Height in pixels as displayed (orientation applied).'),
    has_alpha: z.boolean().describe('True when the image has an alpha channel.'),
    animated: z.boolean(),
    frames: z.int().positive(),
    orientation: z.int().min(1).max(8).describe('EXIF orientation (1 = upright).'),
    color_space: z.string().describe('libvips interpretation, e.g. srgb, cmyk, b-w.'),
    icc_profile: z.boolean().describe('True when an ICC colour profile is embedded.'),
    metadata: z.object({
      exif: z.boolean(),
      xmp: z.boolean(),
      iptc: z.boolean(),
      gps: z.boolean().describe('True when EXIF carries a GPS block.'),
    }),
  })
  .describe('What an image is, without changing it.');
export type ImageInspection = z.infer<typeof ImageInspectionSchema>;
