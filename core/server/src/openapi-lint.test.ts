import { loadConfig } from '@compresso/runtime';
import { ERROR_CODES } from '@compresso/schema';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { describe, expect, it } from 'vitest';
import { CODES_OUTSIDE_OPERATIONS, openApiDocument } from './openapi.ts';

/**
 * The OpenAPI document passes Redocly's linter with its `recommended` rule set (the rules behind
 * `redocly lint`): a structural error or a warning fails the build, so the document clients and
 * code generators read cannot drift into something invalid. Two rules are off, for reasons:
 * - no-unused-components: CompressOptions, ImageInspection and FieldProblem are published on purpose,
 *   for the Python and PHP clients to check their models against, even where no operation names them;
 * - operation-4xx-response: /healthz, /readyz and the two documentation routes have no client error
 *   to report. Every authenticated operation is checked for its 4xx answers by the test below instead.
 */
const lintConfig = () =>
  createConfig({
    extends: ['recommended'],
    rules: { 'no-unused-components': 'off', 'operation-4xx-response': 'off' },
  });
describe('OpenAPI document', () => {
  it('passes redocly lint (recommended rules) with no errors or warnings', async () => {
    const document = openApiDocument(loadConfig({}));
    const config = await lintConfig();
    const problems = await lintFromString({
      source: JSON.stringify(document),
      absoluteRef: 'openapi.json',
      config,
    });
    const report = problems.map(
      (p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer ?? '?'}`,
    );
    expect(report).toEqual([]);
  });

  it('documents 401 and 429 for every authenticated operation (401 and 404 for operator ones)', () => {
    const document = openApiDocument(loadConfig({})) as {
      paths: Record<string, Record<string, { security?: unknown[]; responses: Record<string, unknown> }>>;
    };
    const open = new Set(['/healthz', '/readyz', '/api/v1/openapi.json', '/api/v1/docs']);
    let checked = 0;
    for (const [path, operations] of Object.entries(document.paths)) {
      if (open.has(path)) continue;
      for (const [method, operation] of Object.entries(operations)) {
        if (typeof operation !== 'object' || !operation || !('responses' in operation)) continue;
        checked++;
        // Operator routes count nothing against a quota (no 429) and are off without the token (404).
        const operator = JSON.stringify(operation.security ?? []).includes('operatorToken');
        expect(Object.keys(operation.responses), `${method} ${path}`).toEqual(
          expect.arrayContaining(operator ? ['401', '404'] : ['401', '429']),
        );
      }
    }
    expect(checked).toBeGreaterThanOrEqual(6);
  });

  it('names every error code of the table under some operation, or says why not', () => {
    const document = openApiDocument(loadConfig({})) as { paths: unknown };
    const operations = JSON.stringify(document.paths);
    for (const code of ERROR_CODES) {
      const named = new RegExp(`\\b${code}\\b`).test(operations);
      const excused = Object.hasOwn(CODES_OUTSIDE_OPERATIONS, code);
      expect(
        named !== excused,
        `${code}: in an operation's responses, or in CODES_OUTSIDE_OPERATIONS (not both)`,
      ).toBe(true);
    }
  });

  it('is caught by the linter when it is broken', async () => {
    const document = openApiDocument(loadConfig({})) as { paths: Record<string, unknown> };
    // A path parameter that is never declared is an error under the recommended rules.
    document.paths['/api/v1/things/{thing_id}'] = { get: { responses: { '200': { description: 'ok' } } } };
    const config = await lintConfig();
    const problems = await lintFromString({
      source: JSON.stringify(document),
      absoluteRef: 'openapi.json',
      config,
    });
    expect(problems.some((p) => p.severity === 'error')).toBe(true);
  });
});
