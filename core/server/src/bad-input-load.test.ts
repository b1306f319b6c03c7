import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { crc32, deflateSync } from 'node:zlib';
import { createEngine } from '@compresso/engine';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, form, proAccount, startTestServer, type TestServer } from './testing.ts';

/**
 * Principle 2 under load: bad input never becomes a 5xx, also while other images are encoding in the
 * same process (libvips' error buffer is process-wide: a truncated JPEG decoded beside other work
 * could lose its message and came back 500 in 1–2% of the soak's truncated uploads). A few hundred
 * requests of good and bad input, four at a time; the 10 000-request soak is `npm run bench:soak`.
 */

const CORPUS = resolve(import.meta.dirname, '../../../../shared/corpus');
const photo = readFileSync(resolve(CORPUS, 'photo-skimage-rocket.jpg'));

function chunk(type: string, data: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

/** A valid PNG header declaring 40000×40000 pixels, a few hundred bytes long. */
function pngHeader40k(): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(40_000, 0);
  ihdr.writeUInt32BE(40_000, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(Buffer.alloc(1024))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

interface Case {
  kind: string;
  file: Buffer | undefined;
  fields: Record<string, string>;
  filename?: string;
  /** The statuses this kind may answer. */
  expect: number[];
}

let srv: TestServer;
let key: string;
const cases: Case[] = [];

beforeAll(async () => {
  srv = await startTestServer({
    dbPath: ':memory:',
    overrides: { proDailyLimit: 100_000, maxUploadBytes: 8 * 1024 * 1024 },
    // Four images in flight, so bad input is decoded while others encode as often as possible.
    engine: createEngine({ concurrency: 4 }),
  });
  key = (await proAccount(srv.db, 'load@example.com')).key;
  const small = await sharp(photo).resize(192).jpeg().toBuffer();
  const alpha = await sharp({ create: { width: 96, height: 96, channels: 4, background: '#33669980' } })
    .png()
    .toBuffer();
  const text = Buffer.from('Dear customer,\nplease find attached photo.jpg\n'.repeat(10));
  const bomb = pngHeader40k();
  // 300 requests: 45% good (AVIF, WebP, JPEG, alpha PNG → WebP, auto), 55% bad of six kinds.
  for (let i = 0; i < 300; i++) {
    const cut = photo.subarray(0, Math.floor(photo.length * (0.3 + (0.6 * ((i * 37) % 100)) / 100)));
    const pick = i % 20;
    if (pick < 3) cases.push({ kind: 'avif', file: small, fields: { output_format: 'avif' }, expect: [200] });
    else if (pick < 5)
      cases.push({ kind: 'webp', file: small, fields: { output_format: 'webp' }, expect: [200] });
    else if (pick < 6) cases.push({ kind: 'jpeg', file: small, fields: {}, expect: [200] });
    else if (pick < 7)
      cases.push({ kind: 'alpha', file: alpha, fields: { output_format: 'webp' }, expect: [200] });
    else if (pick < 9) cases.push({ kind: 'auto', file: small, fields: { quality: 'auto' }, expect: [200] });
    else if (pick < 14)
      cases.push({ kind: 'truncated', file: cut, fields: { output_format: 'webp' }, expect: [422] });
    else if (pick < 15)
      cases.push({ kind: 'truncated-auto', file: cut, fields: { quality: 'auto' }, expect: [422] });
    else if (pick < 16) cases.push({ kind: 'empty', file: Buffer.alloc(0), fields: {}, expect: [400, 422] });
    else if (pick < 17) cases.push({ kind: 'text', file: text, fields: {}, expect: [415] });
    else if (pick < 18)
      cases.push({
        kind: 'bad-option',
        file: small,
        fields: { quality: 'very', max_dimension: '-3' },
        expect: [400],
      });
    else if (pick < 19)
      cases.push({ kind: 'bomb', file: bomb, fields: {}, filename: 'huge.png', expect: [413, 422] });
    else cases.push({ kind: 'no-file', file: undefined, fields: {}, expect: [400] });
  }
});
afterAll(async () => {
  await srv?.close();
});

describe('bad input under mixed concurrent load', () => {
  it('300 requests, four at a time: every bad input a 4xx with a code, every good one a 200, no 5xx', async () => {
    const answers: { kind: string; status: number; code?: string }[] = new Array(cases.length);
    let next = 0;
    const worker = async () => {
      while (next < cases.length) {
        const index = next++;
        const c = cases[index]!;
        const res = await fetch(`${srv.url}/api/v1/compress`, {
          method: 'POST',
          headers: bearer(key),
          body: form(c.file, c.fields, c.filename),
        });
        const body = Buffer.from(await res.arrayBuffer());
        const code =
          res.status >= 400
            ? (JSON.parse(body.toString()) as { error: { code: string } }).error.code
            : undefined;
        answers[index] = { kind: c.kind, status: res.status, ...(code ? { code } : {}) };
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);

    const serverErrors = answers.filter((a) => a.status >= 500);
    expect(serverErrors).toEqual([]);
    const unexpected = answers.filter((a, i) => !cases[i]!.expect.includes(a.status));
    expect(unexpected).toEqual([]);
    // Each bad kind answered with its own stable code.
    const codes = new Map<string, Set<string>>();
    for (const a of answers) {
      if (a.code) codes.set(a.kind, (codes.get(a.kind) ?? new Set()).add(a.code));
    }
    expect(Object.fromEntries([...codes].map(([kind, set]) => [kind, [...set].sort()]))).toEqual({
      truncated: ['CORRUPT_IMAGE'],
      'truncated-auto': ['CORRUPT_IMAGE'],
      empty: ['EMPTY_FILE'],
      text: ['NOT_AN_IMAGE'],
      'bad-option': ['INVALID_OPTION'],
      bomb: ['IMAGE_TOO_LARGE'],
      'no-file': ['MISSING_FILE'],
    });
    expect(srv.logLines.filter((l) => l['level'] === 50 || l['level'] === 'error')).toEqual([]);
  });
});
