import { z } from 'zod';
import { ErrorBodySchema, FieldProblemSchema } from './errors.ts';
import { CompressOptionsSchema } from './options.ts';
import { ImageInspectionSchema, InfoResultSchema } from './results.ts';

/** The schemas other languages check themselves against (Python models, PHP plugin, OpenAPI). */
export const PUBLIC_SCHEMAS = {
  CompressOptions: CompressOptionsSchema,
  InfoResult: InfoResultSchema,
  ImageInspection: ImageInspectionSchema,
  ErrorBody: ErrorBodySchema,
  FieldProblem: FieldProblemSchema,
} as const;

export type PublicSchemaName = keyof typeof PUBLIC_SCHEMAS;

/** JSON Schema (draft 2020-12) of one public schema, as a request body (input) or an answer (output). */
export function jsonSchemaOf(
  name: PublicSchemaName,
  io: 'input' | 'output' = 'output',
): Record<string, unknown> {
  return z.toJSONSchema(PUBLIC_SCHEMAS[name], { io, target: 'draft-2020-12' }) as Record<string, unknown>;
}

/**
 * OpenAPI 3.1 `components.schemas`: OpenAPI 3.1 uses JSON Schema 2020-12, so the zod export fits
 * unchanged. Options are exported as input (what a client sends), the rest as output.
 */
export function openApiComponents(): { schemas: Record<string, Record<string, unknown>> } {
  const schemas: Record<string, Record<string, unknown>> = {};
  for (const name of Object.keys(PUBLIC_SCHEMAS) as PublicSchemaName[]) {
    const { $schema: _ignored, ...schema } = jsonSchemaOf(
      name,
      name === 'CompressOptions' ? 'input' : 'output',
    );
    schemas[name] = schema;
  }
  return { schemas };
}
