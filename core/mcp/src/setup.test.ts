import { readdirSync } from 'node:fs';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, errorOf, PHOTO, textOf, workDir } from './test-support.ts';

const CLOCK = new Date('2026-11-22T23:59:00.000Z');

describe('without an API key', () => {
  it('starts, lists its tools, and every call answers isError with the setup steps', async () => {
    const mcp = await connect({ env: { COMPRESSO_BASE_URL: 'https://images.example.com' } });
    try {
      const { tools } = await mcp.client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual([
        'alt_text',
        'compress_batch',
        'compress_image',
        'edit_image',
        'generate_image',
        'get_usage',
        'image_info',
      ]);
      const calls: [string, Record<string, unknown>][] = [
        ['compress_image', { file_path: PHOTO }],
        ['image_info', { file_path: PHOTO }],
        ['compress_batch', { file_paths: [PHOTO] }],
        ['get_usage', {}],
        ['generate_image', { prompt: 'a paper boat', output_path: '/tmp/compresso-mcp-setup-boat.png' }],
        ['edit_image', { file_path: PHOTO, instruction: 'rotate left' }],
        ['alt_text', { file_path: PHOTO }],
      ];
      for (const [name, args] of calls) {
        const result = await mcp.call(name, args);
        expect(result.isError, name).toBe(true);
        expect(errorOf(result).code).toBe('MISSING_API_KEY');
        const text = textOf(result);
        expect(text).toContain('COMPRESSO_API_KEY is not set');
        expect(text).toContain('compresso keys create');
        expect(text).toContain('"COMPRESSO_API_KEY": "cmp_live_…"');
        expect(text).toContain('https://images.example.com');
        expect(text).toContain('Restart the MCP client');
      }
      // Said once at start (on stderr in the binary), then once per refused call.
      expect(mcp.logs[0]).toContain('No API key');
      expect(mcp.logs.filter((l) => l.includes('MISSING_API_KEY'))).toHaveLength(calls.length);
    } finally {
      await mcp.close();
    }
  });

  it('an unusable COMPRESSO_BASE_URL is reported the same way, by name', async () => {
    const mcp = await connect({ env: { COMPRESSO_API_KEY: 'cmp_live_x', COMPRESSO_BASE_URL: 'ftp://nope' } });
    try {
      const result = await mcp.call('get_usage');
      expect(result.isError).toBe(true);
      expect(errorOf(result)).toMatchObject({ code: 'INVALID_OPTION' });
      expect(textOf(result)).toContain('ftp://nope');
    } finally {
      await mcp.close();
    }
  });
});

describe('the daily quota', () => {
  let srv: TestServer;
  const work = workDir('quota');
  beforeAll(async () => {
    // The quota's clock is the server's, fixed a minute before midnight: the reset and Retry-After are
    // then exact, and a run that crosses 00:00 UTC cannot start the count again halfway.
    srv = await startTestServer({ dbPath: ':memory:', overrides: { proDailyLimit: 2 }, now: () => CLOCK });
  });
  afterAll(async () => {
    await srv?.close();
    work.cleanup();
  });

  it('QUOTA_EXCEEDED (429) carries the retry time and the reset, is not retried, and a batch stops spending', async () => {
    const { key } = await proAccount(srv.db, 'quota@example.com');
    const mcp = await connect({ apiKey: key, baseUrl: srv.url, env: {} });
    try {
      expect((await mcp.call('get_usage')).isError).toBeFalsy();
      expect((await mcp.call('image_info', { file_path: PHOTO })).isError).toBeFalsy();
      const over = await mcp.call('compress_image', { file_path: work.copy(PHOTO, 'a.jpg') });
      expect(over.isError).toBe(true);
      // Answered after one request, not retried (was: within 5 s of wall clock).
      expect(srv.logLines.filter((l) => (l as { status?: number }).status === 429)).toHaveLength(1);
      const error = errorOf(over);
      const midnight = new Date('2026-11-23T00:00:00.000Z');
      expect(error).toMatchObject({ code: 'QUOTA_EXCEEDED', status: 429 });
      expect(error['retry_after_seconds']).toBe(60);
      expect(error['resets_at']).toBe(midnight.toISOString());
      const text = textOf(over);
      expect(text).toMatch(/^QUOTA_EXCEEDED \(HTTP 429\): /);
      expect(text).toContain(`Retry after: ${error['retry_after_seconds']} s, at ${midnight.toISOString()}`);
      expect(text).toContain('resets at 00:00 UTC');
      expect(readdirSync(work.dir)).toEqual(['a.jpg']);

      const batch = await mcp.call('compress_batch', {
        file_paths: [work.copy(PHOTO, 'b.jpg'), work.copy(PHOTO, 'c.jpg'), work.copy(PHOTO, 'd.jpg')],
      });
      expect(batch.isError).toBeFalsy();
      const s = batch.structuredContent as { failed: number; results: { error: Record<string, unknown> }[] };
      expect(s.failed).toBe(3);
      for (const r of s.results) {
        expect(r.error).toMatchObject({
          code: 'QUOTA_EXCEEDED',
          status: 429,
          resets_at: midnight.toISOString(),
        });
      }
      // The server saw the 429s, and nothing more: only 2 requests were ever counted.
      const answered429 = srv.logLines.filter((l) => (l as { status?: number }).status === 429).length;
      expect(answered429).toBeGreaterThanOrEqual(2);
      expect(answered429).toBeLessThanOrEqual(3);
    } finally {
      await mcp.close();
    }
  });
});
