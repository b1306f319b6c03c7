import { readFileSync } from 'node:fs';
import {
  API_HEADERS,
  COMPRESS_OPTIONS,
  OUTPUT_FORMATS,
  RESULT_HEADERS,
  resultHeaderName,
} from '@compresso/schema';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../testing.ts';
import { FACTS_NOT_ON_PAGE, OPTIONS_NOT_ON_PAGE } from './compressor.ts';

/**
 * The compressor page follows @compresso/schema's contract table: each compress option is a control
 * of the form with the table's bounds and default, or is listed in OPTIONS_NOT_ON_PAGE with a
 * reason; the page's script sends only options of the table and reads only headers the contract
 * (or the page's own X-Allowance) defines.
 */
let srv: TestServer;
let html: string;
const script = readFileSync(new URL('./static/compressor.js', import.meta.url), 'utf8');

beforeAll(async () => {
  srv = await startTestServer();
  html = await (await fetch(`${srv.url}/`)).text();
});
afterAll(async () => {
  await srv.close();
});

function control(name: string): Record<string, string> | undefined {
  const tag = new RegExp(`<(?:input|select)\\b[^>]*\\bname="${name}"[^>]*>`).exec(html)?.[0];
  if (!tag) return undefined;
  return Object.fromEntries([...tag.matchAll(/(\w[\w-]*)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
}

describe('the compressor page follows the contract table', () => {
  it('every option is a control with the bounds of the table, or is declared not offered', () => {
    for (const [name, spec] of Object.entries(COMPRESS_OPTIONS)) {
      const found = control(name);
      const excluded = Object.hasOwn(OPTIONS_NOT_ON_PAGE, name);
      expect(
        Boolean(found) !== excluded,
        `${name}: a control of the form, or in OPTIONS_NOT_ON_PAGE (not both)`,
      ).toBe(true);
      if (!found || !('max' in spec)) continue;
      expect([Number(found.min), Number(found.max)], name).toEqual([spec.min, spec.max]);
      if ('default' in spec) expect(Number(found.value), name).toBe(spec.default);
    }
    const offered = [...html.matchAll(/<option value="([a-z]+)">/g)].map((m) => m[1]);
    expect(offered.length).toBeGreaterThan(2);
    for (const format of offered) expect(OUTPUT_FORMATS).toContain(format);
  });

  it("the page's script sends only options of the table and reads only headers of the contract", () => {
    const sent = [...script.matchAll(/values\.(\w+)\s*=/g)].map((m) => m[1]!);
    expect(sent.length).toBeGreaterThan(0);
    for (const name of sent) expect(Object.keys(COMPRESS_OPTIONS), name).toContain(name);
    const known = new Set([
      ...Object.keys(RESULT_HEADERS).map(resultHeaderName),
      ...Object.keys(API_HEADERS),
      'X-Allowance',
      'Content-Disposition',
      'Content-Type',
    ]);
    const read = [...script.matchAll(/(?:getResponseHeader|header)\('([^']+)'\)/g)].map((m) => m[1]!);
    expect(read.length).toBeGreaterThan(5);
    for (const name of read) expect(known, name).toContain(name);
  });

  it('every result fact of the table is shown by the script, or declared not shown', () => {
    const read = new Set([...script.matchAll(/header\('(X-[^']+)'\)/g)].map((m) => m[1]!));
    for (const field of Object.keys(RESULT_HEADERS)) {
      const shown = read.has(resultHeaderName(field));
      const excluded = Object.hasOwn(FACTS_NOT_ON_PAGE, field);
      expect(shown !== excluded, `${field}: shown by compressor.js, or in FACTS_NOT_ON_PAGE (not both)`).toBe(
        true,
      );
    }
  });
});
