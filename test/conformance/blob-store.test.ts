import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { Readable, Writable } from 'node:stream';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { fileBlobStore, loadConfig, openBlobStore } from '@compresso/runtime';
import { s3BlobStore } from '@compresso/runtime/s3';
import { isCompressoError } from '@compresso/schema';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeBlobStoreBattery } from './blob-store-battery.ts';

/**
 * The blob battery on both backends: files in a directory, and S3 through the AWS SDK against s3rver,
 * an S3-compatible server (npm, run here as its own process on a free port with its own data
 * directory). No AWS or MinIO can be reached from the test machines; s3rver speaks the S3 REST API
 * (SigV4 signatures checked, multipart uploads, ListObjectsV2), which is what the backend uses.
 */
const dir = mkdtempSync(join(tmpdir(), 'compresso-blobs-'));
let stores = 0;
const credentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' }; // s3rver's fixed pair
let s3rver: ChildProcess | undefined;
let endpoint = '';
let admin: S3Client | undefined;
const run = randomBytes(3).toString('hex');

beforeAll(async () => {
  const bin = join(
    dirname(createRequire(import.meta.url).resolve('s3rver/package.json')),
    'bin',
    's3rver.js',
  );
  s3rver = spawn(
    process.execPath,
    [bin, '-d', join(dir, 's3rver'), '-a', '127.0.0.1', '-p', '0', '--silent'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const lines = createInterface({ input: s3rver.stdout as NodeJS.ReadableStream });
  const port = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error('s3rver did not start within 15 s (npm ci installs it)')),
      15_000,
    );
    lines.on('line', (line) => {
      const match = /listening on [\d.]+:(\d+)/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve(match[1] as string);
      }
    });
    s3rver?.once('exit', (code) => reject(new Error(`s3rver exited with ${code} before listening`)));
  });
  endpoint = `http://127.0.0.1:${port}`;
  admin = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials });
}, 30_000);

afterAll(async () => {
  admin?.destroy();
  if (s3rver && s3rver.exitCode === null) {
    s3rver.kill('SIGTERM');
    await once(s3rver, 'exit');
  }
  rmSync(dir, { recursive: true, force: true });
});

describeBlobStoreBattery('file (directory)', async () =>
  fileBlobStore({ root: join(dir, `files-${++stores}`) }),
);

describeBlobStoreBattery('s3 (AWS SDK v3 → s3rver, S3-compatible)', async () => {
  const bucket = `cmp-${run}-${++stores}`;
  await admin?.send(new CreateBucketCommand({ Bucket: bucket }));
  return s3BlobStore({ bucket, endpoint, credentials });
});

describe('fileBlobStore', () => {
  // Atomic replacement is S3's own guarantee; s3rver (the S3 test server) writes objects in place,
  // so a reader racing a writer there can see a cut-off body. Ours is checked on the file backend.
  it('readers see the old bytes or the new, never a mix, while a key is rewritten', async () => {
    const store = fileBlobStore({ root: join(dir, 'atomic') });
    const a = new Uint8Array(512 * 1024).fill(0x61);
    const b = new Uint8Array(512 * 1024).fill(0x62);
    await store.put('hot', a);
    let writing = true;
    const writer = (async () => {
      for (let i = 0; i < 20; i++) await store.put('hot', i % 2 ? a : b);
      writing = false;
    })();
    const seen = new Set<number>();
    let reads = 0;
    while (writing) {
      const bytes = (await store.get('hot'))?.bytes ?? new Uint8Array();
      reads++;
      expect(bytes.byteLength).toBe(a.byteLength);
      expect(bytes.every((x) => x === bytes[0])).toBe(true);
      seen.add(bytes[0] ?? 0);
    }
    await writer;
    expect(reads).toBeGreaterThan(1);
    expect([...seen].every((c) => c === 0x61 || c === 0x62)).toBe(true);
  });

  it('leaves no temporary files behind, after good and failed writes', async () => {
    const root = join(dir, 'tmp-check');
    const store = fileBlobStore({ root });
    await store.put('a/b.png', new Uint8Array(10));
    await store
      .put(
        'a/c.png',
        new ReadableStream({
          pull(controller) {
            controller.error(new Error('broken upload'));
          },
        }),
      )
      .catch(() => {});
    expect(readdirSync(join(root, '.tmp'))).toEqual([]);
    expect(await store.head('a/c.png')).toBeUndefined();
  });

  it('closes the file of a stream read to its end, and of one destroyed part-way', async () => {
    const root = join(dir, 'fd-check');
    const store = fileBlobStore({ root });
    await store.put('k/one.bin', new Uint8Array(256 * 1024).fill(7));
    // This process's descriptors open on the blob's file (Linux: /proc/self/fd links).
    const openOnBlob = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`).startsWith(root);
        } catch {
          return false; // closed between the listing and the read
        }
      }).length;
    for (let i = 0; i < 5; i++) {
      // Read to its end as a response reads it (piped: the reader never destroys it itself).
      const full = await store.getStream('k/one.bin');
      const fullClosed = once(full!.stream, 'close');
      let bytes = 0;
      const sink = new Writable({
        write(chunk: Buffer, _encoding, done) {
          bytes += chunk.byteLength;
          done();
        },
      });
      full!.stream.pipe(sink);
      await once(sink, 'finish');
      expect(bytes).toBe(256 * 1024);
      await fullClosed;
      const cut = await store.getStream('k/one.bin');
      const cutClosed = once(cut!.stream, 'close');
      cut!.stream.destroy();
      await cutClosed;
    }
    expect(openOnBlob()).toBe(0);
  }, 10_000);
});

describe('s3BlobStore', () => {
  it('answers SERVICE_UNAVAILABLE when the endpoint does not answer', async () => {
    const store = s3BlobStore({
      bucket: 'nowhere',
      endpoint: 'http://127.0.0.1:9',
      credentials,
      connectTimeoutMs: 500,
    });
    for (const work of [() => store.head('a'), () => store.put('a', new Uint8Array(1)), () => store.ping()]) {
      // The outcome, not its speed (was: within 5 s): nothing listens on port 9, so the SDK's retries
      // end on refusals; how soon is the benchmark's business.
      const error = await work().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isCompressoError(error) && error.code).toBe('SERVICE_UNAVAILABLE');
    }
    await store.close();
  });

  it('a 5xx answer is SERVICE_UNAVAILABLE; a failure of the call itself (its stream) is not', async () => {
    // A store that answers, but only 503 (S3's SlowDown, a gateway in front of a node that is down).
    const down = createServer((_req, res) => res.writeHead(503).end());
    down.listen(0, '127.0.0.1');
    await once(down, 'listening');
    const port = (down.address() as AddressInfo).port;
    const unwell = s3BlobStore({ bucket: 'b', endpoint: `http://127.0.0.1:${port}`, credentials });
    try {
      for (const work of [() => unwell.head('a'), () => unwell.get('a')]) {
        const error = await work().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(isCompressoError(error) && error.code).toBe('SERVICE_UNAVAILABLE');
      }
    } finally {
      await unwell.close();
      down.close();
    }

    // The store is fine; the body we hand it breaks off. No status, no network error: the caller's
    // own failure, which the batch worker must spend an attempt on rather than wait out as an outage.
    const bucket = `cmp-${run}-local`;
    await admin?.send(new CreateBucketCommand({ Bucket: bucket }));
    const store = s3BlobStore({ bucket, endpoint, credentials });
    async function* broken() {
      yield Buffer.alloc(1000, 1);
      throw new Error('client went away');
    }
    const error = await store.put('x', Readable.from(broken())).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as Error).message).toMatch(/client went away/);
    expect(isCompressoError(error)).toBe(false);
    await store.close();
  });

  it('ping names a missing bucket', async () => {
    const store = s3BlobStore({ bucket: `missing-${run}`, endpoint, credentials });
    await expect(store.ping()).rejects.toThrow(/answered 404.*S3_BUCKET/);
    await store.close();
  });
});

describe('openBlobStore', () => {
  it('picks files in COMPRESSO_BLOB_DIR without S3_BUCKET, and the bucket with it', async () => {
    const files = await openBlobStore(loadConfig({ COMPRESSO_DATA_DIR: join(dir, 'data') }));
    expect(files.kind).toBe('file');
    await files.put('x', new Uint8Array([7]));
    expect(readdirSync(join(dir, 'data', 'blobs'))).toContain('x~');

    const bucket = `cmp-${run}-open`;
    await admin?.send(new CreateBucketCommand({ Bucket: bucket }));
    const s3 = await openBlobStore(
      loadConfig({
        S3_BUCKET: bucket,
        S3_ENDPOINT: endpoint,
        AWS_ACCESS_KEY_ID: credentials.accessKeyId,
        AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      }),
    );
    expect(s3.kind).toBe('s3');
    await s3.ping();
    await s3.put('y', new Uint8Array([8]));
    expect((await s3.get('y'))?.bytes).toEqual(new Uint8Array([8]));
    await s3.close();
    await expect(
      openBlobStore(loadConfig({ S3_BUCKET: bucket, AWS_ACCESS_KEY_ID: 'only-half' })),
    ).rejects.toThrow(/AWS_SECRET_ACCESS_KEY/);
  });
});
