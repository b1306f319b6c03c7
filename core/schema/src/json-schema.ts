import { z } from 'zod';
import { CONTRACT_SCHEMAS, type ContractSchemaName, contractJsonSchema } from './contract.ts';

/** The schemas other languages check themselves against (Python models, PHP plugin, OpenAPI). */
export const PUBLIC_SCHEMAS = CONTRACT_SCHEMAS;

export type PublicSchemaName = ContractSchemaName;

/** JSON Schema (draft 2020-12) of one public schema, as a request body (input) or an answer (output). */
export function jsonSchemaOf(
  name: PublicSchemaName,
  io: 'input' | 'output' = 'output',
): Record<string, unknown> {
  return z.toJSONSchema(PUBLIC_SCHEMAS[name], { io, target: 'draft-2020-12' }) as Record<string, unknown>;
}

/**
 * OpenAPI 3.1 `components.schemas`: OpenAPI 3.1 uses JSON Schema 2020-12, so the zod export fits
 * unchanged. Request bodies are exported as input (what a client sends), the rest as output.
 */
export function openApiComponents(): { schemas: Record<string, Record<string, unknown>> } {
  const schemas: Record<string, Record<string, unknown>> = {};
  for (const name of Object.keys(PUBLIC_SCHEMAS) as PublicSchemaName[]) {
    schemas[name] = contractJsonSchema(name);
  }
  return { schemas };
}
