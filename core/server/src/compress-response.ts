import type { Engine, OptimizeOutput } from '@compresso/engine';
import {
  CompressoError,
  encodeResultHeaders,
  FILE_EXTENSIONS,
  type InfoResult,
  MIME_TYPES,
  parseCompressOptions,
} from '@compresso/schema';
import type { Request, Response } from 'express';
import { readUpload, type Upload, type UploadLimits } from './multipart.ts';

/**
 * The one compress path shared by the API (`/api/v1/compress`, `/api/v1/info`) and the web
 * compressor (`/web/compress`): read the multipart upload within the limits, validate the options,
 * run the engine. Callers differ only in who they are (auth, quota) and how they answer.
 */
export async function compressUpload(
  engine: Engine,
  req: Request,
  res: Response,
  limits: UploadLimits,
): Promise<{ upload: Upload; output: OptimizeOutput }> {
  const upload = await readImageUpload(req, res, limits);
  return { upload, output: await optimizeUpload(engine, upload) };
}

/** The upload with its image, or MISSING_FILE. */
export async function readImageUpload(
  req: Request,
  res: Response,
  limits: UploadLimits,
): Promise<Upload & { file: Buffer }> {
  const upload = await readUpload(req, res, limits);
  if (!upload.file) {
    throw new CompressoError('MISSING_FILE', 'file: expected an image in a multipart part named "file".');
  }
  return upload as Upload & { file: Buffer };
}

/** Validate the options, then run the engine: a bad option is answered without touching sharp. */
export function optimizeUpload(engine: Engine, upload: Upload & { file: Buffer }): Promise<OptimizeOutput> {
  return engine.optimize(upload.file, parseCompressOptions(upload.fields));
}

export function outputName(uploaded: string | undefined, info: InfoResult): string {
  const base = (uploaded ?? '')
    .replace(/^.*[\\/]/, '')
    .replace(/\.[^.]*$/, '')
    .replace(/[^A-Za-z0-9._-]+/g, '_')
    .replace(/^[._]+/, '')
    .slice(0, 100);
  return `${base || 'image'}.${FILE_EXTENSIONS[info.output_format]}`;
}

/** The compression facts as headers, so a client that streams the bytes to disk still gets them. */
export function setInfoHeaders(res: Response, info: InfoResult): void {
  // The contract's codec: every fact of RESULT_HEADERS the result has, under its derived name.
  for (const [name, value] of encodeResultHeaders(info)) res.setHeader(name, value);
}

/** Answer with the compressed bytes, their type, a download name and the facts as headers. */
export function sendCompressed(res: Response, upload: Upload, output: OptimizeOutput): void {
  setInfoHeaders(res, output.info);
  const name = outputName(upload.filename, output.info);
  res.setHeader('Content-Type', MIME_TYPES[output.info.output_format]);
  res.setHeader('Content-Disposition', `attachment; filename="${name}"`);
  res.setHeader('Content-Length', String(output.data.length));
  res.end(output.data);
}
