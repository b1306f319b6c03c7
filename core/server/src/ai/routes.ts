import { applyEdits, type Engine, offlineAltText, parseInstruction } from '@compresso/engine';
import type { Config, Logger } from '@compresso/runtime';
import {
  ALT_TEXT_MAX,
  AltTextFormSchema,
  type AltTextResult,
  CompressoError,
  EditFormSchema,
  encodeJsonHeader,
  FILE_EXTENSIONS,
  fieldProblems,
  GenerateRequestSchema,
  type InfoResult,
  isCompressoError,
  MIME_TYPES,
} from '@compresso/schema';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { outputName, setInfoHeaders } from '../compress-response.ts';
import type { Idempotency } from '../idempotency.ts';
import { fingerprintOf } from '../idempotency.ts';
import type { Upload } from '../multipart.ts';
import type { RouteRegistrar } from '../routes.ts';
import { sameRatio } from './aspect.ts';
import type { AiProvider } from './provider.ts';
import { providerError } from './provider-http.ts';
import { PROVIDER_SETTINGS } from './select.ts';

export interface AiRouteDeps {
  engine: Engine;
  config: Config;
  logger: Logger;
  provider: AiProvider | undefined;
  auth: RequestHandler;
  idempotency: Idempotency;
  continueBody: RequestHandler;
  readImage: (req: Request, res: Response) => Promise<Upload & { file: Buffer }>;
}

/** The image the provider answered, compressed by the engine; an answer the engine cannot read is the provider's fault. */
async function fromProvider<T>(provider: AiProvider, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (
      isCompressoError(error) &&
      error.status >= 400 &&
      error.status < 500 &&
      error.code !== 'INVALID_REQUEST'
    )
      throw providerError(
        provider.name,
        'malformed',
        `answered an image Compresso cannot read (${error.code}).`,
      );
    throw error;
  }
}

function sendImage(res: Response, name: string, data: Buffer, info: InfoResult): void {
  setInfoHeaders(res, info);
  res.setHeader('Content-Type', MIME_TYPES[info.output_format]);
  res.setHeader('Content-Disposition', `attachment; filename="${name}"`);
  res.setHeader('Content-Length', String(data.length));
  res.end(data);
}

/** A provider's rate limit: pass its Retry-After on, so clients wait as long as it asked. */
function withRetryAfter(res: Response) {
  return (error: unknown): never => {
    if (isCompressoError(error) && error.code === 'PROVIDER_RATE_LIMITED') {
      const seconds = (error.details as { retry_after_seconds?: number } | undefined)?.retry_after_seconds;
      if (seconds) res.setHeader('Retry-After', String(seconds));
    }
    throw error;
  };
}

function invalid(
  message: string,
  issues: Parameters<typeof fieldProblems>[0],
  body: unknown,
): CompressoError {
  return new CompressoError('INVALID_REQUEST', message, { details: fieldProblems(issues, body) });
}

/** What the generate and edit work needs: the engine, the provider (if any) and the AI timeout. */
export interface AiWork {
  engine: Engine;
  config: Config;
  provider: AiProvider | undefined;
}

/**
 * The work of POST /generate, shared by the API route and the web compressor's panel: validate the
 * JSON body, ask the provider, compress its answer through the engine and send the image.
 */
export async function generateImage(work: AiWork, body: unknown, res: Response): Promise<void> {
  const { engine, config, provider } = work;
  const signal = () => AbortSignal.timeout(config.aiTimeoutMs);
  const parsed = GenerateRequestSchema.safeParse(body);
  if (!parsed.success)
    throw invalid(
      'The body must be {"prompt": "…", "model"?, "aspect_ratio"?, "output_format"?, "quality"?}.',
      parsed.error.issues,
      body,
    );
  if (!provider)
    throw new CompressoError(
      'PROVIDER_NOT_CONFIGURED',
      `Image generation needs an AI provider, and this server has none: ${PROVIDER_SETTINGS}.`,
      { details: { settings: ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'REPLICATE_API_TOKEN'] } },
    );
  const request = parsed.data;
  const made = await provider
    .generate({
      prompt: request.prompt,
      model: request.model,
      aspectRatio: request.aspect_ratio,
      signal: signal(),
    })
    .catch(withRetryAfter(res));
  const output = await fromProvider(provider, () =>
    engine.optimize(made.bytes, {
      quality: request.quality,
      ...(request.output_format ? { output_format: request.output_format } : {}),
      ...(request.max_dimension ? { max_dimension: request.max_dimension } : {}),
    }),
  );
  res.setHeader('X-Ai-Provider', provider.name);
  res.setHeader('X-Ai-Model', made.model);
  res.setHeader('X-Aspect-Ratio', made.aspectRatio);
  if (!sameRatio(made.aspectRatio, request.aspect_ratio))
    res.setHeader('X-Aspect-Ratio-Requested', request.aspect_ratio);
  sendImage(res, `generated.${FILE_EXTENSIONS[output.info.output_format]}`, output.data, output.info);
}

/**
 * The work of POST /edit, shared by the API route and the web compressor's panel: parse the
 * instruction, apply it (through the provider for generative phrases), send the image with the
 * applied operations and the words not understood as headers.
 */
export async function editImage(
  work: AiWork,
  upload: Upload & { file: Buffer },
  res: Response,
): Promise<void> {
  const { engine, config, provider } = work;
  const signal = () => AbortSignal.timeout(config.aiTimeoutMs);
  const form = EditFormSchema.safeParse(upload.fields);
  if (!form.success)
    throw invalid(
      'Send the instruction and any compress options as form fields beside the file.',
      form.error.issues,
      upload.fields,
    );
  const { instruction, ...options } = form.data;
  const parsed = parseInstruction(instruction);
  if (parsed.problems.length)
    throw new CompressoError(
      'INVALID_REQUEST',
      `instruction: ${parsed.problems.map((p) => `"${p.phrase}": ${p.message}`).join('; ')}.`,
      {
        details: parsed.problems.map((p) => ({
          field: 'instruction',
          expected: p.message,
          received: p.phrase.slice(0, 100),
        })),
      },
    );
  if (parsed.operations.length === 0 && parsed.generative.length === 0)
    throw new CompressoError(
      'INSTRUCTION_NOT_UNDERSTOOD',
      `instruction: nothing in it could be turned into an edit${parsed.unrecognized.length ? ` (not understood: ${parsed.unrecognized.slice(0, 20).join(', ')})` : ''}. Try e.g. "make it 800 wide", "rotate left", "crop to square", "black and white", "convert to webp".`,
      { details: { unrecognized: parsed.unrecognized } },
    );
  let source: Uint8Array = upload.file;
  let original: { format: InfoResult['input_format']; width: number; height: number } | undefined;
  if (parsed.generative.length) {
    if (!provider?.edit)
      throw new CompressoError(
        'PROVIDER_NOT_CONFIGURED',
        `instruction: ${parsed.generative.map((g) => `"${g}"`).join(', ')} needs a generative image model, and this server has none for editing: ${PROVIDER_SETTINGS}. Resizing, cropping, rotating, colour and format changes work without one.`,
        { details: { generative: parsed.generative } },
      );
    const pixels = await applyEdits(upload.file, [], engine.limits);
    original = pixels.input;
    const edited = await provider
      .edit({ image: pixels.png, prompt: parsed.generative.join('; '), signal: signal() })
      .catch(withRetryAfter(res));
    res.setHeader('X-Ai-Provider', provider.name);
    res.setHeader('X-Ai-Model', edited.model);
    res.setHeader('X-Edit-Generated', encodeJsonHeader(parsed.generative));
    source = edited.bytes;
  }
  const run = () => engine.edit(source, parsed.operations, options);
  const output = provider && original ? await fromProvider(provider, run) : await run();
  const info: InfoResult = original
    ? {
        ...output.info,
        input_size: upload.file.length,
        input_format: original.format,
        input_width: original.width,
        input_height: original.height,
        savings_percent: Math.round((1 - output.data.length / upload.file.length) * 1000) / 10,
      }
    : output.info;
  res.setHeader('X-Edit-Operations', encodeJsonHeader(parsed.operations));
  res.setHeader('X-Edit-Unrecognized', encodeJsonHeader(parsed.unrecognized));
  sendImage(res, outputName(upload.filename, info), output.data, info);
}

/**
 * POST /generate, /edit and /alt-text. Each is authenticated, counted and idempotent like
 * /compress; every image goes through the engine, so format, quality and size follow the one scale.
 */
export function registerAiRoutes(routes: RouteRegistrar, deps: AiRouteDeps): void {
  const { engine, config, provider, idempotency } = deps;
  const signal = () => AbortSignal.timeout(config.aiTimeoutMs);
  const work: AiWork = { engine, config, provider };

  routes.add(
    'generate',
    deps.auth,
    deps.continueBody,
    express.json({ limit: '64kb', strict: true }),
    async (req: Request, res: Response, _next: NextFunction) => {
      const body: unknown = req.body ?? {};
      await idempotency.run(req, res, fingerprintOf(req, { json: body }), async () => {
        await generateImage(work, body, res);
      });
    },
  );

  routes.add('edit', deps.auth, async (req, res) => {
    const upload = await deps.readImage(req, res);
    const fingerprint = fingerprintOf(req, {
      fields: upload.fields,
      files: [{ name: upload.filename, bytes: upload.file }],
    });
    await idempotency.run(req, res, fingerprint, async () => {
      await editImage(work, upload, res);
    });
  });

  routes.add('altText', deps.auth, async (req, res) => {
    const upload = await deps.readImage(req, res);
    const fingerprint = fingerprintOf(req, {
      fields: upload.fields,
      files: [{ name: upload.filename, bytes: upload.file }],
    });
    await idempotency.run(req, res, fingerprint, async () => {
      const form = AltTextFormSchema.safeParse(upload.fields);
      if (!form.success)
        throw invalid(
          'The context fields are product_title, vendor, page_title and language.',
          form.error.issues,
          upload.fields,
        );
      const { language, ...context } = form.data;
      const facts = await engine.facts(upload.file);
      let answer: AltTextResult;
      if (provider?.describe) {
        // A small JPEG is all a vision model needs, and far fewer bytes and tokens than the upload.
        const small = await engine.optimize(upload.file, {
          output_format: 'jpeg',
          max_dimension: 768,
          quality: 75,
          strip_exif: true,
        });
        const written = await provider
          .describe({ image: small.data, context, language, signal: signal() })
          .catch(withRetryAfter(res));
        const alt = written.alt
          .replace(/^["'“]+|["'”]+$/g, '')
          .replace(/\s+/g, ' ')
          .trim();
        res.setHeader('X-Ai-Provider', provider.name);
        res.setHeader('X-Ai-Model', written.model);
        answer = {
          alt: alt.length > ALT_TEXT_MAX ? `${alt.slice(0, ALT_TEXT_MAX - 1)}…` : alt,
          source: 'provider',
          language,
          basis: ['image', ...Object.keys(context).filter((k) => context[k as keyof typeof context])],
          provider: provider.name,
          model: written.model,
          facts,
        };
      } else {
        const offline = offlineAltText({ ...context, file_name: upload.filename }, facts);
        answer = { alt: offline.alt, source: 'offline', language: 'en', basis: offline.basis, facts };
      }
      res.json(answer);
    });
  });
}
