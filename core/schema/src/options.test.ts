import { describe, expect, it } from 'vitest';
import {
  CompressoError,
  ERROR_STATUS,
  jsonSchemaOf,
  openApiComponents,
  parseCompressOptions,
} from './index.ts';

describe('parseCompressOptions', () => {
  it('applies the documented defaults', () => {
    expect(parseCompressOptions({})).toEqual({ quality: 80, strip_exif: true, png_to_jpeg: false });
  });

  it('accepts multipart text and the seed spellings', () => {
    expect(
      parseCompressOptions({
        quality: '75',
        output_format: 'WEBP',
        max_dimension: '2048',
        strip_exif: 'false',
      }),
    ).toEqual({
      quality: 75,
      output_format: 'webp',
      max_dimension: 2048,
      strip_exif: false,
      png_to_jpeg: false,
    });
    expect(parseCompressOptions({ output_format: 'jpg' }).output_format).toBe('jpeg');
    expect(parseCompressOptions({ output_format: 'AVIF', quality: 'Auto' })).toMatchObject({
      output_format: 'avif',
      quality: 'auto',
    });
  });

  it('is idempotent on its own output', () => {
    const once = parseCompressOptions({ quality: '60', output_format: 'Jpg', png_to_jpeg: 'yes' });
    expect(parseCompressOptions(once)).toEqual(once);
  });

  it('validates once: its own (frozen) output comes back as is, a copy is validated again', () => {
    const once = parseCompressOptions({ quality: '60' });
    expect(Object.isFrozen(once)).toBe(true);
    expect(parseCompressOptions(once)).toBe(once);
    const copy = { ...once, quality: 0 };
    expect(() => parseCompressOptions(copy)).toThrow(/quality/);
  });

  it.each([
    [{ quality: 0 }, 'quality', '0'],
    [{ quality: 101 }, 'quality', '101'],
    [{ quality: 'best' }, 'quality', '"best"'],
    [{ quality: 80.5 }, 'quality', '80.5'],
    [{ output_format: 'bmp' }, 'output_format', '"bmp"'],
    [{ max_dimension: -3 }, 'max_dimension', '-3'],
    [{ max_dimension: '99999999' }, 'max_dimension', '"99999999"'],
    [{ strip_exif: 'maybe' }, 'strip_exif', '"maybe"'],
    [{ max_dim: 10 }, 'max_dim', '10'],
  ])('refuses %j naming the field and the value', (input, field, received) => {
    let caught: unknown;
    try {
      parseCompressOptions(input);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(CompressoError);
    const error = caught as CompressoError;
    expect(error.code).toBe('INVALID_OPTION');
    expect(error.status).toBe(400);
    expect(error.message).toContain(field);
    expect(error.message).toContain(received);
    expect(error.details).toEqual([expect.objectContaining({ field, received })]);
  });

  it('reports every bad field at once', () => {
    expect(() => parseCompressOptions({ quality: 'x', output_format: 'y' })).toThrow(
      /quality.*output_format/,
    );
  });
});

describe('errors', () => {
  it('maps every code to a 4xx or 5xx status and serialises the wire body', () => {
    for (const status of Object.values(ERROR_STATUS)) expect(status).toBeGreaterThanOrEqual(400);
    const error = new CompressoError('QUOTA_EXCEEDED', 'daily quota used', {
      requestId: 'req_1',
      details: { limit: 500 },
    });
    expect(error.status).toBe(429);
    expect(error.toBody()).toEqual({
      error: {
        code: 'QUOTA_EXCEEDED',
        message: 'daily quota used',
        details: { limit: 500 },
        request_id: 'req_1',
      },
    });
  });
});

describe('JSON Schema and OpenAPI exports', () => {
  it('describes every option with its range and default', () => {
    const schema = jsonSchemaOf('CompressOptions', 'input') as {
      properties: Record<string, { description?: string }>;
    };
    for (const name of ['quality', 'output_format', 'max_dimension', 'strip_exif', 'png_to_jpeg']) {
      expect(schema.properties[name]?.description, name).toMatch(/Default/);
    }
  });

  it('exports the InfoResult members the seed names', () => {
    const schema = jsonSchemaOf('InfoResult') as { required: string[] };
    expect(schema.required).toEqual(
      expect.arrayContaining(['input_size', 'output_size', 'savings_percent', 'width', 'height']),
    );
    expect(Object.keys(openApiComponents().schemas)).toEqual(
      expect.arrayContaining(['CompressOptions', 'InfoResult', 'ErrorBody']),
    );
  });
});
