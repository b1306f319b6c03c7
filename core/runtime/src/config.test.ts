import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, defineConfig, loadConfig } from './config.ts';

describe('loadConfig', () => {
  it('has documented defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 3000,
      host: '0.0.0.0',
      dataDir: resolve('./.compresso-data'),
      databaseUrl: undefined,
      logLevel: 'info',
      maxUploadBytes: 50 * 1024 * 1024,
      proDailyLimit: 500,
      visitorDailyLimit: 20,
    });
    expect(loadConfig({ COMPRESSO_VISITOR_DAILY_LIMIT: '0' }).visitorDailyLimit).toBe(0);
  });

  it('reads the environment, and explicit overrides win over it', () => {
    const env = {
      PORT: '8080',
      COMPRESSO_DATA_DIR: '/tmp/x',
      LOG_LEVEL: 'warn',
      COMPRESSO_PRO_DAILY_LIMIT: '10',
    };
    expect(loadConfig(env)).toMatchObject({
      port: 8080,
      dataDir: '/tmp/x',
      logLevel: 'warn',
      proDailyLimit: 10,
    });
    expect(loadConfig(env, { port: 0 }).port).toBe(0);
  });

  it('reads the engine memory budget in MiB (768 by default) and refuses one too small to run an image', () => {
    expect(loadConfig({}).memoryBudgetMiB).toBe(768);
    expect(loadConfig({ COMPRESSO_MEMORY_BUDGET_MB: '1024' }).memoryBudgetMiB).toBe(1024);
    expect(() => loadConfig({ COMPRESSO_MEMORY_BUDGET_MB: '8' })).toThrow(
      /COMPRESSO_MEMORY_BUDGET_MB: .*"8"/,
    );
    expect(() => loadConfig({ COMPRESSO_MEMORY_BUDGET_MB: '1.5GB' })).toThrow(/COMPRESSO_MEMORY_BUDGET_MB/);
  });

  it('lists every problem in one message, naming the variable and the value', () => {
    let error: unknown;
    try {
      loadConfig({
        PORT: 'eighty',
        LOG_LEVEL: 'loud',
        DATABASE_URL: 'mysql://x',
        COMPRESSO_MAX_UPLOAD_BYTES: '0',
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const { problems, message } = error as ConfigError;
    expect(problems).toHaveLength(4);
    for (const name of ['PORT', 'LOG_LEVEL', 'DATABASE_URL', 'COMPRESSO_MAX_UPLOAD_BYTES'])
      expect(message).toContain(name);
    expect(message).toContain('"eighty"');
  });

  it('never prints the password of a connection URL it refuses', () => {
    let message = '';
    try {
      loadConfig({ DATABASE_URL: 'postgress://app:hunter2-secret@db.internal:5432/compresso' });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain('DATABASE_URL');
    expect(message).toContain('postgress://app:***@db.internal:5432/compresso');
    expect(message).not.toContain('hunter2');
  });
});

describe('loadConfig: queue and blob store', () => {
  it('defaults to the in-process queue and files under the data directory', () => {
    const config = loadConfig({ COMPRESSO_DATA_DIR: '/srv/compresso' });
    expect(config.redisUrl).toBeUndefined();
    expect(config.s3Bucket).toBeUndefined();
    expect(config.blobDir).toBe('/srv/compresso/blobs');
    expect(config).toMatchObject({ queuePrefix: 'compresso', workerConcurrency: 2, jobAttempts: 3 });
    expect(config.s3ForcePathStyle).toBe(false);
  });

  it('reads REDIS_URL and the S3 variables; path-style URLs follow S3_ENDPOINT unless set', () => {
    const config = loadConfig({
      REDIS_URL: 'redis://127.0.0.1:6379/2',
      S3_BUCKET: 'compresso-blobs',
      S3_ENDPOINT: 'http://127.0.0.1:9000',
      AWS_REGION: 'eu-west-3',
      AWS_ACCESS_KEY_ID: 'AKIA0000',
      AWS_SECRET_ACCESS_KEY: 'shh',
    });
    expect(config).toMatchObject({
      redisUrl: 'redis://127.0.0.1:6379/2',
      s3Bucket: 'compresso-blobs',
      s3Endpoint: 'http://127.0.0.1:9000',
      s3Region: 'eu-west-3',
      s3ForcePathStyle: true,
    });
    expect(loadConfig({ S3_ENDPOINT: 'http://x:9000', S3_FORCE_PATH_STYLE: 'false' }).s3ForcePathStyle).toBe(
      false,
    );
  });

  it('lists every bad queue or S3 setting, without a Redis password or the secret key', () => {
    let message = '';
    try {
      loadConfig({
        REDIS_URL: 'http://user:pa55word@redis:6379',
        S3_BUCKET: 'Not_A_Bucket',
        S3_ENDPOINT: 'ftp://x',
        S3_FORCE_PATH_STYLE: 'maybe',
        COMPRESSO_QUEUE_PREFIX: 'a:b',
      });
    } catch (e) {
      message = (e as Error).message;
    }
    for (const name of [
      'REDIS_URL',
      'S3_BUCKET',
      'S3_ENDPOINT',
      'S3_FORCE_PATH_STYLE',
      'COMPRESSO_QUEUE_PREFIX',
    ])
      expect(message).toContain(name);
    expect(message).not.toContain('pa55word');
  });

  it('reads the mail settings, wants a public URL with SMTP, and never prints the SMTP password', () => {
    const config = loadConfig({
      SMTP_URL: 'smtp://user:hunter2@mail.example.com:587',
      COMPRESSO_PUBLIC_URL: 'https://img.example.com/',
      COMPRESSO_COOKIE_SECURE: 'true',
    });
    expect(config).toMatchObject({
      smtpUrl: 'smtp://user:hunter2@mail.example.com:587',
      publicUrl: 'https://img.example.com',
      cookieSecure: true,
      mailFrom: 'Compresso <no-reply@localhost>',
    });
    expect(loadConfig({}).cookieSecure).toBeUndefined();
    expect(() => loadConfig({ SMTP_URL: 'smtp://mail.example.com' })).toThrow(
      /COMPRESSO_PUBLIC_URL: required with SMTP_URL/,
    );
    let message = '';
    try {
      loadConfig({ SMTP_URL: 'smtpp://user:hunter2@mail.example.com', COMPRESSO_PUBLIC_URL: 'ftp://x' });
    } catch (error) {
      message = (error as ConfigError).message;
    }
    expect(message).toContain('SMTP_URL: expected an smtp:// or smtps:// URL');
    expect(message).toContain('COMPRESSO_PUBLIC_URL: expected an http:// or https:// URL');
    expect(message).not.toContain('hunter2');
  });

  it('TRUST_PROXY: off by default; a hop count or a list of addresses and subnets; never "everything"', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '1' }).trustProxy).toBe(1);
    expect(loadConfig({ TRUST_PROXY: '0' }).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'false' }).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'loopback, 10.0.0.0/8, fd00::/8, 192.168.1.7' }).trustProxy).toEqual([
      'loopback',
      '10.0.0.0/8',
      'fd00::/8',
      '192.168.1.7',
    ]);
    expect(loadConfig({}, { trustProxy: 2 }).trustProxy).toBe(2);
    let error: unknown;
    try {
      loadConfig({ TRUST_PROXY: 'true', PORT: 'x' });
    } catch (e) {
      error = e;
    }
    // Listed with the other problems, naming the variable.
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toHaveLength(2);
    expect(problems.find((p) => p.startsWith('TRUST_PROXY:'))).toMatch(/any client choose its own address/);
    for (const bad of ['10.0.0.0/33', 'proxy.example.com', '::1/129', '1.2.3.4/8/9', '*', '33']) {
      expect(() => loadConfig({ TRUST_PROXY: bad }), bad).toThrow(/TRUST_PROXY: /);
    }
  });
});

describe('defineConfig: an app adds its own settings', () => {
  // What the Shopify app will do: its keys beside the base ones, checked in the same pass.
  const loadShopConfig = defineConfig({
    fields: {
      shopifyApiKey: { env: 'SHOPIFY_API_KEY', schema: z.string().min(1, 'required') },
      shopifyApiSecret: {
        env: 'SHOPIFY_API_SECRET',
        schema: z.string().min(16, 'expected at least 16 characters'),
        secret: true,
      },
      shopifyScopes: {
        env: 'SHOPIFY_SCOPES',
        schema: z
          .string()
          .default('read_products,write_files')
          .transform((s) => s.split(',').map((x) => x.trim())),
      },
    },
    rules: [
      (config, source) =>
        config.shopifyScopes.includes('write_files')
          ? []
          : [`${source('shopifyScopes')}: must include write_files`],
    ],
  });
  const good = { SHOPIFY_API_KEY: 'key', SHOPIFY_API_SECRET: 'a-secret-of-16-chars' };

  it('reads the base and the app keys together, typed, with the same resolution order', () => {
    const config = loadShopConfig({ ...good, PORT: '8080' }, { shopifyApiKey: 'override' });
    expect(config.port).toBe(8080);
    expect(config.shopifyApiKey).toBe('override');
    expect(config.shopifyScopes).toEqual(['read_products', 'write_files']);
    // Base normalisations still apply.
    expect(config.dataDir).toBe(resolve('./.compresso-data'));
    expect(config.blobDir).toBe(resolve('./.compresso-data/blobs'));
  });

  it('lists every problem in one error, base and app alike, with the app secret redacted', () => {
    let error: unknown;
    try {
      loadShopConfig({ PORT: 'eighty', SHOPIFY_API_SECRET: 'short-hunter2', LOG_LEVEL: 'loud' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems.map((p) => p.split(':')[0]).sort()).toEqual([
      'LOG_LEVEL',
      'PORT',
      'SHOPIFY_API_KEY',
      'SHOPIFY_API_SECRET',
    ]);
    expect((error as Error).message).not.toContain('hunter2');
    expect(problems.find((p) => p.startsWith('SHOPIFY_API_SECRET'))).toContain('[redacted]');
  });

  it('runs the base and the app cross-field rules once every field is valid, all in one error', () => {
    let error: unknown;
    try {
      loadShopConfig({ ...good, SHOPIFY_SCOPES: 'read_products', SMTP_URL: 'smtp://mail.example.com' });
    } catch (e) {
      error = e;
    }
    expect((error as ConfigError).problems).toEqual([
      expect.stringMatching(/^COMPRESSO_PUBLIC_URL: required with SMTP_URL/),
      'SHOPIFY_SCOPES: must include write_files',
    ]);
  });

  it('refuses a field that would shadow a base setting or read a variable twice', () => {
    expect(() => defineConfig({ fields: { port: { env: 'APP_PORT', schema: z.string() } } })).toThrow(
      /port is already defined/,
    );
    expect(() => defineConfig({ fields: { appUrl: { env: 'DATABASE_URL', schema: z.string() } } })).toThrow(
      /DATABASE_URL is already read by databaseUrl/,
    );
  });

  it('leaves the base loader as it was: unknown variables are ignored', () => {
    expect(loadConfig({ ...good }).port).toBe(3000);
    expect('shopifyApiKey' in loadConfig(good)).toBe(false);
  });
});

describe('Stripe settings', () => {
  const all = {
    STRIPE_SECRET_KEY: 'sk_test_abcdefgh12345678',
    STRIPE_WEBHOOK_SECRET: 'whsec_abcdefgh12345678',
    STRIPE_PRICE_PRO: 'price_1ProMonthly',
  };

  it('are all or none; grace days default to 3', () => {
    expect(loadConfig({})).toMatchObject({ stripeSecretKey: undefined, billingGraceDays: 3 });
    expect(loadConfig({ ...all, COMPRESSO_BILLING_GRACE_DAYS: '7' })).toMatchObject({
      stripeSecretKey: all.STRIPE_SECRET_KEY,
      stripeWebhookSecret: all.STRIPE_WEBHOOK_SECRET,
      stripePricePro: all.STRIPE_PRICE_PRO,
      billingGraceDays: 7,
    });
  });

  it('one error lists every problem, the secrets redacted, a missing partner named', () => {
    let error: unknown;
    try {
      loadConfig({ STRIPE_SECRET_KEY: 'pk_test_public', STRIPE_WEBHOOK_SECRET: 'nope', PORT: 'x' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    expect(problems).toMatch(/STRIPE_SECRET_KEY: expected a Stripe secret key .*\[redacted\]/);
    expect(problems).toMatch(/STRIPE_WEBHOOK_SECRET: expected a webhook signing secret .*\[redacted\]/);
    expect(problems).toMatch(/PORT/);
    expect(problems).not.toContain('pk_test_public');
    // Each valid on its own, but one missing: the rule names it and the ones given.
    expect(() =>
      loadConfig({ STRIPE_SECRET_KEY: all.STRIPE_SECRET_KEY, STRIPE_PRICE_PRO: all.STRIPE_PRICE_PRO }),
    ).toThrow(/STRIPE_WEBHOOK_SECRET: required with STRIPE_SECRET_KEY and STRIPE_PRICE_PRO/);
    expect(() => loadConfig({ ...all, COMPRESSO_BILLING_GRACE_DAYS: '90' })).toThrow(
      /COMPRESSO_BILLING_GRACE_DAYS/,
    );
  });
});

describe('AI provider settings', () => {
  it('reads the ecosystem names, trims the base URLs, and defaults to no provider', () => {
    const none = loadConfig({});
    expect([none.openaiApiKey, none.replicateApiToken, none.aiProvider]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    expect([none.openaiBaseUrl, none.replicateBaseUrl, none.aiTimeoutMs]).toEqual([
      'https://api.openai.com/v1',
      'https://api.replicate.com/v1',
      120_000,
    ]);
    const set = loadConfig({
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: 'http://127.0.0.1:9999/v1/',
      COMPRESSO_AI_MODEL_PHOTO: 'dall-e-3',
      COMPRESSO_AI_TIMEOUT_MS: '5000',
    });
    expect([set.openaiBaseUrl, set.aiModelPhoto, set.aiTimeoutMs]).toEqual([
      'http://127.0.0.1:9999/v1',
      'dall-e-3',
      5000,
    ]);
  });

  it('refuses a named provider without its key, and never prints a key', () => {
    let error: unknown;
    try {
      loadConfig({
        COMPRESSO_AI_PROVIDER: 'replicate',
        OPENAI_API_KEY: 'sk-secret-value',
        OPENAI_BASE_URL: 'ftp://x',
      });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems.some((p) => p.startsWith('OPENAI_BASE_URL'))).toBe(true);
    expect(String((error as Error).message)).not.toContain('sk-secret-value');
    expect(() => loadConfig({ COMPRESSO_AI_PROVIDER: 'replicate' })).toThrow(
      /replicate needs REPLICATE_API_TOKEN/,
    );
    expect(() => loadConfig({ OPENAI_API_KEY: '' })).not.toThrow();
    // An invalid key is named, its value redacted.
    const tooLong = `sk-${'s'.repeat(600)}`;
    expect(() => loadConfig({ OPENAI_API_KEY: tooLong })).toThrow(/OPENAI_API_KEY: .*\[redacted\]/);
  });
});
