// The plugin's PHP API client (Compresso_Api_Client), run inside a real WordPress against a real
// Compresso server: its tables against the contract's JSON export and the server's openapi.json (drift),
// a real compress over the WordPress HTTP API, and every kind of failure as a WP_Error with the code.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import contract from '@compresso/schema/contract.json' with { type: 'json' };
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWordPress, type WordPress } from './testing/wordpress.ts';

const CORPUS = join(import.meta.dirname, '../../../../shared/corpus');
const CLIENT = "require_once WP_PLUGIN_DIR . '/compresso/includes/class-compresso-api-client.php';";

let wp: WordPress;
let api: TestServer;
let tight: TestServer;
let key: string;
let tightKey: string;
let silent: Server;
let silentUrl: string;
let closedUrl: string;
let notCompresso: Server;
let notCompressoUrl: string;

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  api = await startTestServer({ dbPath: ':memory:', overrides: { maxUploadBytes: 20 * 1024 * 1024 } });
  key = (await proAccount(api.db, 'client@example.com')).key;
  // A server whose plan allows one request a day: the second is refused with QUOTA_EXCEEDED.
  tight = await startTestServer({ dbPath: ':memory:', overrides: { proDailyLimit: 1 } });
  tightKey = (await proAccount(tight.db, 'tight@example.com')).key;
  // Accepts connections and never answers: the client's timeout must end the call.
  silent = createServer(() => {});
  silentUrl = await listen(silent);
  // A port that was open and is closed again: connection refused.
  const probe = createServer();
  closedUrl = await listen(probe);
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  // Some other web server at the configured URL.
  notCompresso = createServer((_req, res) => {
    res.writeHead(404, { 'content-type': 'text/html' });
    res.end('<h1>Not Found</h1>');
  });
  notCompressoUrl = await listen(notCompresso);
  wp = await startWordPress();
}, 300_000);

afterAll(async () => {
  await wp?.close();
  await api?.close();
  await tight?.close();
  silent?.closeAllConnections();
  silent?.close();
  notCompresso?.close();
});

describe('drift: the PHP client against the contract', { timeout: 180_000 }, () => {
  let tables: Record<string, unknown>;
  beforeAll(async () => {
    tables = (
      await wp.php<Record<string, unknown>>(`${CLIENT}
        compresso_test_out( array(
          'routes' => Compresso_Api_Client::ROUTES,
          'options' => Compresso_Api_Client::OPTIONS,
          'output_formats' => Compresso_Api_Client::OUTPUT_FORMATS,
          'result_headers' => Compresso_Api_Client::RESULT_HEADERS,
          'error_status' => Compresso_Api_Client::ERROR_STATUS,
          'client_error_codes' => Compresso_Api_Client::CLIENT_ERROR_CODES,
          'mime_types' => Compresso_Api_Client::MIME_TYPES,
        ) );`)
    ).value;
  });

  it('calls routes the contract table has, with their methods and paths', () => {
    const routes = tables.routes as Record<string, [string, string]>;
    const table = contract.routes as Record<string, { method: string; path: string }>;
    for (const [name, [method, path]] of Object.entries(routes)) {
      expect(table[name], name).toMatchObject({ method, path });
    }
  });

  it('knows every compress option, output format, result header, error code and client code', () => {
    expect(tables.options).toEqual(
      Object.fromEntries(Object.entries(contract.options).map(([name, spec]) => [name, spec.kind])),
    );
    expect(tables.output_formats).toEqual(contract.output_formats);
    expect(tables.result_headers).toEqual(
      Object.fromEntries(
        Object.entries(contract.result_headers).map(([field, spec]) => [
          field,
          [spec.header, spec.type, spec.required],
        ]),
      ),
    );
    expect(tables.error_status).toEqual(contract.error_status);
    expect(tables.client_error_codes).toEqual(Object.keys(contract.client_error_codes));
    expect(tables.mime_types).toEqual(contract.mime_types);
  });

  it("matches the live server's openapi.json: paths, methods, the form's fields and the result headers", async () => {
    const doc = (await (await fetch(`${api.url}/api/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, OpenApiOperation>>;
    };
    interface OpenApiOperation {
      requestBody?: { content: Record<string, { schema: unknown }> };
      responses: Record<string, { headers?: Record<string, unknown> }>;
    }
    const routes = tables.routes as Record<string, [string, string]>;
    for (const [method, path] of Object.values(routes)) {
      expect(doc.paths[path]?.[method.toLowerCase()], `${method} ${path}`).toBeDefined();
    }
    const compress = doc.paths['/api/v1/compress']?.post as OpenApiOperation;
    const form = JSON.stringify(compress.requestBody?.content['multipart/form-data']?.schema);
    for (const name of [...Object.keys(tables.options as object), 'file'])
      expect(form).toContain(`"${name}"`);
    const headers = Object.keys(compress.responses['200']?.headers ?? {}).map((h) => h.toLowerCase());
    for (const [header] of Object.values(tables.result_headers as Record<string, [string]>)) {
      expect(headers).toContain(header.toLowerCase());
    }
  });
});

describe('calls over the WordPress HTTP API', { timeout: 180_000 }, () => {
  it('compresses a real photo: multipart built right, bytes as announced, result fields typed', async () => {
    const photo = join(CORPUS, 'photo-mate-LadyBird.jpg');
    const size = readFileSync(photo).length;
    const { value } = await wp.php<{
      error?: string;
      size: number;
      result: Record<string, unknown>;
      quota: object;
    }>(
      `${CLIENT}
      $client = new Compresso_Api_Client( '${api.url}', '${key}' );
      // A file name with a quote and a line break: escaped in its part header, never breaking the form.
      $out = $client->compress( base64_decode( '${readFileSync(photo).toString('base64')}' ), "lady\\"bird\\r\\n.jpg", array( 'quality' => 70, 'max_dimension' => 800, 'strip_exif' => true ) );
      if ( is_wp_error( $out ) ) { compresso_test_out( array( 'error' => $out->get_error_code() . ': ' . $out->get_error_message() ) ); return; }
      compresso_test_out( array( 'size' => strlen( $out['bytes'] ), 'result' => $out['result'], 'quota' => $out['quota'] ) );`,
    );
    expect(value.error).toBeUndefined();
    expect(value.result).toMatchObject({
      input_size: size,
      output_size: value.size,
      output_format: 'jpeg',
      input_format: 'jpeg',
      quality: 70,
      optimized: true,
      auto_quality: false,
    });
    expect(Math.max(value.result.width as number, value.result.height as number)).toBe(800);
    expect(value.size).toBeLessThan(size);
    expect(value.quota).toMatchObject({ limit: expect.any(Number), remaining: expect.any(Number) });
  });

  it('turns each failure into a WP_Error carrying the contract code', async () => {
    const { value } = await wp.php<
      Record<string, { code: string; message: string; data: Record<string, unknown> }>
    >(
      `${CLIENT}
      $jpeg = base64_decode( '${readFileSync(join(CORPUS, 'photo-skimage-rocket.jpg')).toString('base64')}' );
      $e = function ( $r ) {
        return is_wp_error( $r )
          ? array( 'code' => $r->get_error_code(), 'message' => $r->get_error_message(), 'data' => $r->get_error_data() )
          : array( 'code' => 'NO_ERROR', 'message' => '', 'data' => array() );
      };
      $ok = new Compresso_Api_Client( '${api.url}', '${key}' );
      $tight = new Compresso_Api_Client( '${tight.url}', '${tightKey}' );
      $tight->usage();
      compresso_test_out( array(
        'wrong_key' => $e( ( new Compresso_Api_Client( '${api.url}', 'cmp_wrong_key_000000000000' ) )->usage() ),
        'bad_option' => $e( $ok->compress( $jpeg, 'a.jpg', array( 'quality' => 0 ) ) ),
        'corrupt' => $e( $ok->compress( substr( $jpeg, 0, 600 ), 'a.jpg' ) ),
        'not_an_image' => $e( $ok->compress( 'plain text, not an image', 'a.jpg' ) ),
        'quota' => $e( $tight->compress( $jpeg, 'a.jpg' ) ),
        'no_key' => $e( ( new Compresso_Api_Client( '${api.url}', '' ) )->usage() ),
        'refused' => $e( ( new Compresso_Api_Client( '${closedUrl}', '${key}' ) )->usage() ),
        'timeout' => $e( ( new Compresso_Api_Client( '${silentUrl}', '${key}', 2 ) )->usage() ),
        'not_compresso' => $e( ( new Compresso_Api_Client( '${notCompressoUrl}', '${key}' ) )->usage() ),
        'unknown_option' => $e( $ok->compress( $jpeg, 'a.jpg', array( 'qualty' => 5 ) ) ),
      ) );`,
    );
    expect(value.wrong_key).toMatchObject({ code: 'INVALID_API_KEY', data: { status: 401 } });
    expect(value.bad_option?.code).toBe('INVALID_OPTION');
    expect(value.bad_option?.data.status).toBe(400);
    expect(value.bad_option?.data.details).toEqual([expect.objectContaining({ field: 'quality' })]);
    expect(value.bad_option?.data.request_id).toEqual(expect.any(String));
    expect(value.corrupt?.code).toBe('CORRUPT_IMAGE');
    expect(value.not_an_image?.code).toBe('NOT_AN_IMAGE');
    expect(value.quota).toMatchObject({ code: 'QUOTA_EXCEEDED', data: { status: 429 } });
    expect(value.quota?.data.retry_after).toBeGreaterThan(0);
    expect(value.no_key?.code).toBe('MISSING_API_KEY');
    expect(value.refused?.code).toBe('CONNECTION_ERROR');
    expect(value.timeout?.code).toBe('TIMEOUT');
    expect(value.not_compresso).toMatchObject({ code: 'INVALID_RESPONSE', data: { status: 404 } });
    expect(value.unknown_option?.code).toBe('INVALID_INPUT');
  });
});
