import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.ts';

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
