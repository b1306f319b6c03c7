import type { BulkRun } from '@compresso/integration-kit';
import { describe, expect, it } from 'vitest';
import { failureOf, runView } from './bulk.ts';

const T0 = Date.parse('2026-11-27T10:00:00.000Z');
const run = (patch: Partial<BulkRun>): BulkRun => ({
  id: 'run_1',
  site: 'shop.myshopify.com',
  state: 'running',
  cursor: null,
  total: 1000,
  done: 300,
  optimized: 250,
  skipped: 40,
  failed: 10,
  bytesBefore: 9_000_000,
  bytesAfter: 3_000_000,
  waitingUntil: null,
  waitingReason: null,
  lastError: null,
  leaseOwner: null,
  leaseUntil: 0,
  createdAt: T0,
  updatedAt: T0 + 60_000,
  finishedAt: null,
  ...patch,
});

describe('the bulk run as the admin API shows it', () => {
  it('running: rate since the start, time left at that rate, bytes saved', () => {
    expect(runView(run({}), T0 + 120_000)).toEqual({
      id: 'run_1',
      state: 'running',
      total: 1000,
      done: 300,
      optimized: 250,
      skipped: 40,
      failed: 10,
      bytes_before: 9_000_000,
      bytes_after: 3_000_000,
      bytes_saved: 6_000_000,
      images_per_minute: 150,
      eta_seconds: 280,
      waiting_until: null,
      started_at: '2026-11-27T10:00:00.000Z',
      updated_at: '2026-11-27T10:01:00.000Z',
    });
  });

  it('waiting for the quota: its own state and the reset time; no time left is promised', () => {
    const until = Date.parse('2026-11-28T00:00:00.000Z');
    const view = runView(run({ waitingUntil: until, waitingReason: 'quota' }), T0 + 120_000);
    expect(view).toMatchObject({
      state: 'waiting_quota',
      waiting_until: '2026-11-28T00:00:00.000Z',
      eta_seconds: null,
    });
  });

  it('ended or unknown size: no time left; the rate is over the run’s own time', () => {
    expect(
      runView(run({ state: 'completed', done: 1000, finishedAt: T0 + 600_000 }), T0 + 9e6),
    ).toMatchObject({
      state: 'completed',
      images_per_minute: 100,
      eta_seconds: null,
    });
    expect(runView(run({ total: null }), T0 + 120_000)).toMatchObject({ total: null, eta_seconds: null });
    expect(runView(run({ done: 0 }), T0)).toMatchObject({ images_per_minute: 0, eta_seconds: null });
  });

  it('a ledger error as a code and a reason', () => {
    expect(failureOf('REJECTED: Shopify could not process the new file')).toEqual({
      code: 'REJECTED',
      reason: 'Shopify could not process the new file',
    });
    expect(failureOf('gave up after 5 attempts: UNAVAILABLE: CDN answered 500')).toEqual({
      code: 'UNAVAILABLE',
      reason: 'CDN answered 500',
    });
    expect(failureOf('something odd')).toEqual({ code: 'FAILED', reason: 'something odd' });
    expect(failureOf(null)).toEqual({ code: 'FAILED', reason: 'Unknown error' });
  });
});
