import { existsSync, promises as fs } from 'node:fs';
import { basename, dirname, extname, join } from 'node:path';
import {
  type BatchItem,
  type CompressOptions as CompressOptionsOfClient,
  Compresso,
  type CompressResult,
  DEFAULT_BASE_URL,
} from '@compresso/client';
import {
  COMPRESS_OPTIONS,
  type CompressOptions,
  defaultOutputFormat,
  FILE_EXTENSIONS,
  type InfoResult,
  type InputFormat,
  isCompressoError,
  type OutputFormat,
  parseCompressOptions,
  RESULT_HEADER_FIELDS,
  resultClientName,
} from '@compresso/schema';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { BASE_URL_ENV, errorBody, errorResult, KEY_ENV } from './errors.ts';
import { formatBytes } from './format.ts';
import { type CheckedInput, checkInputFile, checkOutputDir, checkOutputPath } from './paths.ts';
import {
  altTextInput,
  altTextOutput,
  compressBatchInput,
  compressBatchOutput,
  compressImageInput,
  compressImageOutput,
  editImageInput,
  editImageOutput,
  generateImageInput,
  generateImageOutput,
  IMAGE_CONTENT_LIMIT,
  IMAGE_OPTION_FIELDS,
  imageInfoInput,
  imageInfoOutput,
  usageOutput,
} from './schemas.ts';
import { ToolError } from './tool-error.ts';
import { VERSION } from './version.ts';

export interface CompressoMcpOptions {
  /** Default: `COMPRESSO_API_KEY` from `env`. Without one the server still starts; calls explain the setup. */
  apiKey?: string;
  /** Default: `COMPRESSO_BASE_URL` from `env`, then http://localhost:3000. */
  baseUrl?: string;
  /** Where the key and base URL are read from (default `process.env`). */
  env?: Record<string, string | undefined>;
  /** Retries per request after the first attempt (the client's default is 2). */
  maxRetries?: number;
  /** Milliseconds one request may take (the client's default is 120 000). */
  timeout?: number;
  /** One line per tool call. Default: standard error — standard output is the protocol channel. */
  log?: (line: string) => void;
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/**
 * Batches of more files than this go to the server as one job (POST /api/v1/jobs, compressBatch's
 * `via: 'job'`) rather than one compress request per file. A job has fixed costs a few files do not
 * repay — polling (up to half a second after the last item), a second request per file to download
 * its result — but past a handful of files one idempotent submission replaces that many uploads and
 * the server's workers (on several processes, with Redis) share the work instead of this process
 * holding two requests at a time. Same results, same files, same quota either way; a server without
 * a job queue falls back to requests by itself.
 */
export const JOB_THRESHOLD = 10;

/** Formats the assistants' model APIs take as image content (AVIF is not among them). */
const DISPLAYABLE = new Set(['image/jpeg', 'image/png', 'image/webp', 'image/gif']);

const INSTRUCTIONS = `Compresso compresses images on this machine through the Compresso API.
- compress_image: one image → a smaller file (quality 1–100 or "auto", output_format jpeg/png/webp/avif/gif, max_dimension in pixels). It writes <name>.min.<ext> beside the source unless output_path says otherwise, and never replaces the source unless overwrite is true.
- image_info: what compress_image would give (sizes, dimensions, savings), writing nothing.
- compress_batch: up to 100 images at once; each file succeeds or fails on its own (more than ${JOB_THRESHOLD} files run as one server-side job).
- get_usage: the plan and today's request count.
- generate_image: an image from a prompt (model fast/photo/design/icon, aspect_ratio), made by the server's AI provider and written to output_path.
- edit_image: one image changed by a plain-English instruction ("make it 800 wide and black and white"); says what was applied and what was not understood.
- alt_text: alt text for one image, from a vision provider or offline from context and measured facts (the answer says which).
Paths must be absolute. Each call counts one request (a batch: one per file) against the daily quota.`;

/**
 * The compress options of a call, validated by @compresso/schema exactly as the server validates
 * them; a refusal becomes our INVALID_OPTION (no HTTP status: nothing was sent).
 */
function imageOptions(args: Record<string, unknown>) {
  const raw: Record<string, unknown> = {};
  for (const field of IMAGE_OPTION_FIELDS) if (args[field] !== undefined) raw[field] = args[field];
  let options: CompressOptions;
  try {
    options = parseCompressOptions(raw);
  } catch (error) {
    if (isCompressoError(error)) throw new ToolError(error.code, error.message, { details: error.details });
    throw error;
  }
  // Under the client's names for them, from the contract's option table.
  const client: Record<string, unknown> = {};
  for (const [field, spec] of Object.entries(COMPRESS_OPTIONS)) {
    const value = options[field as keyof CompressOptions];
    if (value !== undefined) client[spec.client] = value;
  }
  // Parsed by the schema: the format is canonical, the numbers in range.
  return client as Pick<CompressOptionsOfClient, 'quality' | 'stripExif' | 'pngToJpeg' | 'maxDimension'> & {
    format?: OutputFormat;
  };
}

/** The compress answer in the schema's snake_case, as the output schema describes it. */
function facts(result: CompressResult) {
  // Every fact of the contract's result-header table, by the name the client gave it.
  const out: Record<string, unknown> = {};
  for (const field of RESULT_HEADER_FIELDS) {
    const value = (result as unknown as Record<string, unknown>)[resultClientName(field)];
    if (value !== undefined) out[field] = value;
  }
  return out as Omit<InfoResult, 'frames'>;
}
/**
 * A tool's answer for an image it wrote: the summary line, the structured result as text, and the
 * image itself when asked for and small enough to display.
 */
function imageAnswer<S extends Record<string, unknown>>(
  text: string,
  structured: S,
  result: { outputSize: number; contentType: string; data: Buffer },
  includeImage: boolean | undefined,
): { content: CallToolResult['content']; structuredContent: S } {
  const content: CallToolResult['content'] = [
    { type: 'text', text },
    { type: 'text', text: JSON.stringify(structured) },
  ];
  if (includeImage && result.outputSize <= IMAGE_CONTENT_LIMIT && DISPLAYABLE.has(result.contentType)) {
    content.push({ type: 'image', data: result.data.toString('base64'), mimeType: result.contentType });
  }
  return { content, structuredContent: structured };
}

function summary(source: string, result: CompressResult): string {
  const saved = result.optimized
    ? `${result.savingsPercent}% smaller`
    : 'already as small as it gets, kept unchanged';
  return `${source} → ${result.outputPath}: ${formatBytes(result.inputSize)} → ${formatBytes(result.outputSize)} (${saved}), ${result.width}×${result.height} ${result.format} at quality ${result.quality}${result.autoQuality ? ' (auto)' : ''}.`;
}

/**
 * Where a write into a directory would land, when the format can be known before the request (an
 * explicit format, or the sniffed input's default): used to refuse replacing the source before a
 * request is spent. The client checks again right before writing, so a wrong guess is still safe.
 */
function predictedTarget(
  dir: string,
  input: CheckedInput,
  format: OutputFormat | undefined,
): string | undefined {
  const known = format ?? (input.sniffed ? defaultOutputFormat(input.sniffed as InputFormat) : undefined);
  if (!known) return undefined;
  const stem = basename(input.path, extname(input.path)) || 'image';
  return join(dir, `${stem}.${FILE_EXTENSIONS[known]}`);
}

/**
 * The MCP server with its seven tools. Without an API key it still starts and lists its tools;
 * every call then answers `isError` with the setup steps.
 */
export function createCompressoMcpServer(options: CompressoMcpOptions = {}): McpServer {
  const env = options.env ?? process.env;
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const baseUrlForMessages = (options.baseUrl ?? env[BASE_URL_ENV] ?? DEFAULT_BASE_URL).replace(/\/+$/, '');

  let client: Compresso | undefined;
  let setupError: unknown;
  try {
    client = new Compresso(options.apiKey, {
      env,
      ...(options.baseUrl !== undefined ? { baseUrl: options.baseUrl } : {}),
      ...(options.maxRetries !== undefined ? { maxRetries: options.maxRetries } : {}),
      ...(options.timeout !== undefined ? { timeout: options.timeout } : {}),
    });
  } catch (error) {
    // The client's own text speaks to programmers (`new Compresso(apiKey)`); here the fix is the environment.
    setupError =
      (error as { code?: unknown })?.code === 'MISSING_API_KEY'
        ? new ToolError(
            'MISSING_API_KEY',
            `No API key: ${KEY_ENV} is not set in the environment of compresso-mcp.`,
          )
        : error;
    log(
      `compresso-mcp: ${errorBody(setupError, baseUrlForMessages).message} Tools are listed; each call will answer with the setup steps.`,
    );
  }

  const server = new McpServer({ name: 'compresso-mcp', version: VERSION }, { instructions: INSTRUCTIONS });

  /** Every tool runs through here: no key → setup steps; any failure → an isError result, logged. */
  async function run(
    tool: string,
    work: (client: Compresso) => Promise<CallToolResult>,
  ): Promise<CallToolResult> {
    const started = Date.now();
    try {
      if (!client) throw setupError;
      const result = await work(client);
      log(`compresso-mcp: ${tool} ok in ${Date.now() - started} ms`);
      return result;
    } catch (error) {
      const body = errorBody(error, baseUrlForMessages);
      // Our own refusals and the API's answers are expected; anything else is a bug worth its stack.
      const expected = error instanceof ToolError || (error as { code?: unknown })?.code !== undefined;
      log(
        `compresso-mcp: ${tool} failed in ${Date.now() - started} ms: ${body.code}${body.request_id ? ` (request ${body.request_id})` : ''}${expected ? '' : `\n${(error as Error)?.stack ?? String(error)}`}`,
      );
      return errorResult(error, baseUrlForMessages);
    }
  }

  server.registerTool(
    'compress_image',
    {
      title: 'Compress an image',
      description:
        'Compress or convert one image file and write the result. Returns sizes, dimensions and savings (and the image itself when small). The source is never replaced unless overwrite is true.',
      inputSchema: compressImageInput,
      outputSchema: compressImageOutput,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    (args, extra: Extra) =>
      run('compress_image', async (api) => {
        const options = imageOptions(args);
        const input = await checkInputFile('file_path', args.file_path);
        const output = await checkOutputPath('output_path', args.output_path, input.path, args.overwrite);
        if (output.path && output.isDirectory) {
          const target = predictedTarget(output.path, input, options.format);
          if (target === input.path && !args.overwrite) {
            throw new ToolError(
              'INVALID_OPTION',
              `output_path: writing into ${output.path} would replace the source ${input.path}; pass overwrite: true, choose another directory, or another output_format.`,
              {
                details: [
                  { field: 'output_path', expected: 'a path other than file_path', received: output.path },
                ],
              },
            );
          }
          if (target !== undefined && target !== input.path && !args.overwrite && existsSync(target)) {
            throw new ToolError(
              'CONFLICT',
              `output_path: ${target} already exists; pass overwrite: true to replace it, or choose another directory.`,
              {
                details: [
                  {
                    field: 'output_path',
                    expected: 'a directory without that file (or overwrite: true)',
                    received: target,
                  },
                ],
              },
            );
          }
        }
        const result = await api.compress(input.path, {
          ...options,
          ...(output.path !== undefined ? { output: output.path } : {}),
          overwrite: args.overwrite,
          signal: extra.signal,
        });
        const structured = {
          file_path: input.path,
          output_path: String(result.outputPath),
          ...facts(result),
        };
        return imageAnswer(summary(input.path, result), structured, result, args.include_image);
      }),
  );

  server.registerTool(
    'image_info',
    {
      title: 'Preview compression',
      description:
        'What compress_image would give for one image with these options — input and output sizes, dimensions, formats, savings, the quality chosen — without writing anything.',
      inputSchema: imageInfoInput,
      outputSchema: imageInfoOutput,
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    (args, extra: Extra) =>
      run('image_info', async (api) => {
        const options = imageOptions(args);
        const input = await checkInputFile('file_path', args.file_path);
        const info = await api.info(input.path, { ...options, signal: extra.signal });
        const structured = { file_path: input.path, ...info };
        const text = `${input.path}: ${formatBytes(info.input_size)} ${info.input_format} ${info.input_width}×${info.input_height} → ${formatBytes(info.output_size)} ${info.output_format} ${info.width}×${info.height} at quality ${info.quality}${info.auto_quality ? ' (auto)' : ''}: ${info.optimized ? `${info.savings_percent}% smaller` : 'already as small as it gets'}. Nothing was written.`;
        return {
          content: [
            { type: 'text', text },
            { type: 'text', text: JSON.stringify(structured) },
          ],
          structuredContent: structured,
        };
      }),
  );

  server.registerTool(
    'compress_batch',
    {
      title: 'Compress many images',
      description:
        'Compress up to 100 image files with the same options. Each file succeeds or fails on its own (a corrupt file never loses the others); sources are never replaced. Sends progress notifications when the caller asks for them.',
      inputSchema: compressBatchInput,
      outputSchema: compressBatchOutput,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    (args, extra: Extra) =>
      run('compress_batch', async (api) => {
        const options = imageOptions(args);
        const outputDir = await checkOutputDir('output_dir', args.output_dir);
        const total = args.file_paths.length;
        const rows: BatchRow[] = new Array(total);
        const valid: { index: number; path: string }[] = [];
        for (const [index, raw] of args.file_paths.entries()) {
          try {
            const input = await checkInputFile(`file_paths[${index}]`, raw);
            valid.push({ index, path: input.path });
          } catch (error) {
            rows[index] = failure(raw, error, baseUrlForMessages);
          }
        }
        const progressToken = extra._meta?.progressToken;
        let completed = total - valid.length;
        const items: BatchItem[] = valid.length
          ? await api.compressBatch(
              valid.map((v) => v.path),
              {
                ...options,
                ...(outputDir !== undefined ? { outputDir } : {}),
                via: valid.length > JOB_THRESHOLD ? 'job' : 'requests',
                concurrency: 2,
                signal: extra.signal,
                onProgress: (event) => {
                  completed++;
                  if (progressToken === undefined) return;
                  extra
                    .sendNotification({
                      method: 'notifications/progress',
                      params: {
                        progressToken,
                        progress: completed,
                        total,
                        message: `${event.item.input}: ${event.item.ok ? 'done' : event.item.error.code}`,
                      },
                    })
                    .catch(() => {
                      // A client that went away mid-batch: the batch still finishes and writes its files.
                    });
                },
              },
            )
          : [];
        for (const item of items) {
          const { index, path } = valid[item.index]!;
          rows[index] = item.ok
            ? {
                file_path: path,
                ok: true,
                output_path: String(item.result.outputPath),
                ...facts(item.result),
              }
            : failure(path, item.error, baseUrlForMessages);
        }
        let inputSize = 0;
        let outputSize = 0;
        for (const row of rows) {
          if (row.ok) {
            inputSize += row.input_size;
            outputSize += row.output_size;
          }
        }
        const succeeded = rows.filter((r) => r.ok).length;
        const structured = {
          total,
          succeeded,
          failed: total - succeeded,
          input_size: inputSize,
          output_size: outputSize,
          savings_percent: inputSize > 0 ? Math.round((1000 * (inputSize - outputSize)) / inputSize) / 10 : 0,
          results: rows,
        };
        const lines = [
          `${succeeded} of ${total} compressed: ${formatBytes(inputSize)} → ${formatBytes(outputSize)} (${structured.savings_percent}% smaller).`,
          ...rows.map((row) =>
            row.ok
              ? `✓ ${row.file_path} → ${row.output_path} (${row.savings_percent}% smaller)`
              : `✗ ${row.file_path}: ${row.error.code}: ${row.error.message}`,
          ),
        ];
        return {
          content: [
            { type: 'text', text: lines.join('\n') },
            { type: 'text', text: JSON.stringify(structured) },
          ],
          structuredContent: structured,
        };
      }),
  );

  server.registerTool(
    'get_usage',
    {
      title: 'API usage today',
      description:
        "The account's plan and today's request count against the daily quota (this call included), and when it resets.",
      outputSchema: usageOutput,
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    (extra: Extra) =>
      run('get_usage', async (api) => {
        const usage = await api.usage({ signal: extra.signal });
        const structured = {
          plan: usage.plan,
          day: usage.day,
          used: usage.used,
          limit: usage.limit,
          remaining: usage.remaining,
          resets_at: usage.resetsAt,
          resets_in_seconds: usage.resetsInSeconds,
        };
        return {
          content: [
            {
              type: 'text',
              text: `Plan ${usage.plan}: ${usage.used} of ${usage.limit} requests used today (${usage.day}), ${usage.remaining} left; resets at ${usage.resetsAt}.`,
            },
            { type: 'text', text: JSON.stringify(structured) },
          ],
          structuredContent: structured,
        };
      }),
  );

  server.registerTool(
    'generate_image',
    {
      title: 'Generate an image from a prompt',
      description:
        "Make an image from a text prompt with the Compresso server's AI provider and write it, compressed like compress_image. model: fast, photo, design or icon. The aspect ratio made is the model's nearest to the one asked. A server without a provider answers PROVIDER_NOT_CONFIGURED.",
      inputSchema: generateImageInput,
      outputSchema: generateImageOutput,
      annotations: {
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        openWorldHint: true,
      },
    },
    (args, extra: Extra) =>
      run('generate_image', async (api) => {
        const options = imageOptions(args);
        const output = await checkOutputPath('output_path', args.output_path, '', args.overwrite);
        const target = output.isDirectory ? `${output.path}/` : output.path;
        if (!output.isDirectory && !args.overwrite && target && existsSync(target)) {
          throw new ToolError(
            'CONFLICT',
            `output_path: ${target} already exists; pass overwrite: true to replace it.`,
            {
              details: [
                {
                  field: 'output_path',
                  expected: 'a path without a file (or overwrite: true)',
                  received: target,
                },
              ],
            },
          );
        }
        const result = await api.generate(args.prompt, {
          model: args.model,
          aspectRatio: args.aspect_ratio,
          ...(options.format ? { format: options.format } : {}),
          ...(options.quality !== undefined ? { quality: options.quality } : {}),
          ...(options.maxDimension !== undefined ? { maxDimension: options.maxDimension } : {}),
          ...(target ? { outputPath: target } : {}),
          overwrite: true,
          signal: extra.signal,
        });
        const structured = {
          output_path: String(result.outputPath),
          provider: result.provider,
          model: result.model,
          aspect_ratio: result.aspectRatio,
          ...(result.aspectRatioRequested ? { aspect_ratio_requested: result.aspectRatioRequested } : {}),
          ...facts(result),
        };
        return imageAnswer(
          `Generated ${result.outputPath}: ${result.width}×${result.height} ${result.format}, ${formatBytes(result.outputSize)}, by ${result.provider} ${result.model} at ${result.aspectRatio}${result.aspectRatioRequested ? ` (nearest to ${result.aspectRatioRequested})` : ''}.`,
          structured,
          result,
          args.include_image,
        );
      }),
  );

  server.registerTool(
    'edit_image',
    {
      title: 'Edit an image by instruction',
      description:
        'Change one image as a plain-English instruction says — "make it 800 wide and black and white", "rotate left and convert to webp", "crop to square" — and write the result. Says which operations were applied and which words were not understood. Phrases that need a generative model ("remove the background") go to the server\'s AI provider, or are refused with PROVIDER_NOT_CONFIGURED. The source is never replaced unless overwrite is true.',
      inputSchema: editImageInput,
      outputSchema: editImageOutput,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    (args, extra: Extra) =>
      run('edit_image', async (api) => {
        const options = imageOptions(args);
        const input = await checkInputFile('file_path', args.file_path);
        const output = await checkOutputPath('output_path', args.output_path, input.path, args.overwrite);
        const result = await api.edit(input.path, args.instruction, {
          ...options,
          ...(output.path !== undefined
            ? { output: output.isDirectory ? `${output.path}/` : output.path }
            : {}),
          overwrite: args.overwrite,
          signal: extra.signal,
        });
        let written = result.outputPath;
        if (written === null) {
          // Beside the source, under a name that never is the source's.
          const stem = basename(input.path, extname(input.path)) || 'image';
          written = join(dirname(input.path), `${stem}.edited.${FILE_EXTENSIONS[result.format]}`);
          if (!args.overwrite && existsSync(written)) {
            throw new ToolError(
              'CONFLICT',
              `output_path: ${written} already exists; pass overwrite: true or an output_path.`,
              {
                details: [
                  {
                    field: 'output_path',
                    expected: 'a path without a file (or overwrite: true)',
                    received: written,
                  },
                ],
              },
            );
          }
          await fs.writeFile(written, result.data);
        }
        const structured = {
          file_path: input.path,
          output_path: written,
          operations: result.operations,
          unrecognized: result.unrecognized,
          generated: result.generated,
          ...(result.provider ? { provider: result.provider } : {}),
          ...(result.model ? { model: result.model } : {}),
          ...facts(result),
        };
        const did = result.operations.map((op) => JSON.stringify(op)).join(', ') || 'nothing';
        return imageAnswer(
          `${input.path} → ${written}: ${result.width}×${result.height} ${result.format}, ${formatBytes(result.outputSize)}. Applied: ${did}.${result.generated.length ? ` Done by ${result.provider} ${result.model}: ${result.generated.join('; ')}.` : ''}${result.unrecognized.length ? ` Not understood: ${result.unrecognized.join(', ')}.` : ''}`,
          structured,
          result,
          args.include_image,
        );
      }),
  );

  server.registerTool(
    'alt_text',
    {
      title: 'Alt text for an image',
      description:
        'Write alt text for one image. With a vision provider on the server a model that sees the image writes it (source: provider); otherwise it is composed from the context given (product title, vendor, page title) and measured facts — orientation, main colour, transparency — (source: offline), never describing content nobody saw. Writes nothing.',
      inputSchema: altTextInput,
      outputSchema: altTextOutput,
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    (args, extra: Extra) =>
      run('alt_text', async (api) => {
        const input = await checkInputFile('file_path', args.file_path);
        const result = await api.altText(
          input.path,
          {
            ...(args.product_title !== undefined ? { productTitle: args.product_title } : {}),
            ...(args.vendor !== undefined ? { vendor: args.vendor } : {}),
            ...(args.page_title !== undefined ? { pageTitle: args.page_title } : {}),
            ...(args.language !== undefined ? { language: args.language } : {}),
          },
          { signal: extra.signal },
        );
        const structured = {
          file_path: input.path,
          alt: result.alt,
          source: result.source,
          language: result.language,
          basis: result.basis,
          ...(result.provider ? { provider: result.provider } : {}),
          ...(result.model ? { model: result.model } : {}),
          facts: {
            width: result.facts.width,
            height: result.facts.height,
            orientation: result.facts.orientation,
            dominant_color: result.facts.dominantColor,
            color_name: result.facts.colorName,
            transparent: result.facts.transparent,
          },
        };
        return {
          content: [
            {
              type: 'text',
              text: `${result.alt}\n(${result.source === 'provider' ? `written by ${result.provider} ${result.model}, which saw the image` : 'written offline from the context and measured facts; no model saw the image'})`,
            },
            { type: 'text', text: JSON.stringify(structured) },
          ],
          structuredContent: structured,
        };
      }),
  );

  return server;
}

/** One file of a batch, as the output schema describes it. */
type BatchRow =
  | ({ file_path: string; ok: true; output_path: string } & ReturnType<typeof facts>)
  | {
      file_path: string;
      ok: false;
      error: {
        code: string;
        message: string;
        status?: number;
        retry_after_seconds?: number;
        resets_at?: string;
      };
    };

function failure(path: string, error: unknown, baseUrl: string): BatchRow {
  const body = errorBody(error, baseUrl);
  return {
    file_path: path,
    ok: false,
    error: {
      code: body.code,
      message: body.message,
      ...(body.status !== undefined ? { status: body.status } : {}),
      ...(body.retry_after_seconds !== undefined ? { retry_after_seconds: body.retry_after_seconds } : {}),
      ...(body.resets_at !== undefined ? { resets_at: body.resets_at } : {}),
    },
  };
}
