import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { COMPRESS_OPTIONS, INPUT_EXTENSIONS, RESULT_HEADERS } from '@compresso/schema';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInputFile } from './paths.ts';
import { type Connected, connect, workDir } from './test-support.ts';

/**
 * The tools follow @compresso/schema's contract table: every compress option of the table is an
 * argument of every image tool, and every fact of the result-header table is in the compress
 * result (and the info result). The shapes are derived from the table, so this fails only if the
 * derivation is undone; the README test then makes each new name documented.
 */
let mcp: Connected;
beforeAll(async () => {
  mcp = await connect({ env: {} });
});
afterAll(async () => {
  await mcp?.close();
});

describe('the MCP tools follow the contract table', () => {
  it('every option is an argument of each image tool, and every result fact is in its output', async () => {
    const { tools } = await mcp.client.listTools();
    const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));
    for (const name of ['compress_image', 'image_info', 'compress_batch']) {
      const args = Object.keys(byName[name]?.inputSchema.properties ?? {});
      for (const option of Object.keys(COMPRESS_OPTIONS)) expect(args, `${name} ${option}`).toContain(option);
    }
    for (const name of ['compress_image', 'image_info']) {
      const out = Object.keys(byName[name]?.outputSchema?.properties ?? {});
      for (const field of Object.keys(RESULT_HEADERS)) expect(out, `${name} ${field}`).toContain(field);
    }
  });

  it('takes a file with any input extension of the table as an image, and no other', async () => {
    const work = workDir('extensions');
    try {
      // Bytes no sniffer recognises: only the name can make the file an image.
      const named = (ext: string) => {
        const path = join(work.dir, `unknown${ext}`);
        writeFileSync(path, 'not sniffable');
        return path;
      };
      for (const ext of Object.keys(INPUT_EXTENSIONS)) {
        await expect(checkInputFile('file_path', named(ext.toUpperCase())), ext).resolves.toMatchObject({
          sniffed: undefined,
        });
      }
      await expect(checkInputFile('file_path', named('.txt'))).rejects.toMatchObject({
        code: 'NOT_AN_IMAGE',
      });
    } finally {
      work.cleanup();
    }
  });
});
