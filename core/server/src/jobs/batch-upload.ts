import type { IncomingMessage, ServerResponse } from 'node:http';
import { readMultipart } from '../multipart.ts';
import type { UploadBudget } from '../upload-budget.ts';

export interface BatchFile {
  name: string;
  bytes: Buffer;
}

export interface BatchUpload {
  files: BatchFile[];
  fields: Record<string, string>;
}

export interface BatchUploadLimits {
  /** Largest single file. */
  maxFileBytes: number;
  /** Largest whole body: every file of the batch is held in memory until stored. */
  maxBodyBytes: number;
  maxFiles: number;
  idleTimeoutMs: number;
  budget?: UploadBudget;
  owner?: string;
}

/**
 * A batch upload: many `file` parts and the compress option fields, read by the server's one
 * multipart reader (multipart.ts) with the batch's limits; each file gets a display name.
 */
export async function readBatchUpload(
  req: IncomingMessage,
  res: ServerResponse,
  limits: BatchUploadLimits,
): Promise<BatchUpload> {
  const { files, fields } = await readMultipart(req, res, { kind: 'batch', ...limits });
  return {
    fields,
    files: files.map((file, index) => {
      // The name is only shown back (and sanitised for downloads); a long one is cut, not refused.
      const name = (file.filename ?? '').replace(/^.*[\\/]/, '').slice(0, 200);
      return { name: name || `image-${index}`, bytes: file.bytes };
    }),
  };
}
