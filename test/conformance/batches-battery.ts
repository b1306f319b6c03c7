import { createAccount } from '@compresso/runtime';
import { describe, expect, it } from 'vitest';
import { type OpenDatabase, withDatabase } from './database-battery-helpers.ts';

/**
 * What every backend's BatchStore must do (batch jobs and their items). `open` returns a fresh, migrated, empty
 * Database; other stores are used only to set up (an account for a foreign key).
 */
export function describeBatchStoreBattery(name: string, open: OpenDatabase): void {
  describe(`BatchStore battery: ${name}`, () => {
    const withDb = withDatabase(open);

    it(
      'batch jobs: items recorded in order, each finished exactly once, queued ones listed',
      withDb(async (db) => {
        const a = await createAccount(db, 'batch@x.io');
        await db.insertBatch(
          {
            id: 'job_one',
            accountId: a.id,
            source: 'upload',
            options: '{"output_format":"webp"}',
            total: 3,
            quotaDay: '2026-11-22',
            createdAt: '2026-11-22T10:00:00.000Z',
          },
          [
            { index: 0, name: 'a.jpg', sourceUrl: null },
            { index: 1, name: 'b.png', sourceUrl: null },
            { index: 2, name: 'c.jpg', sourceUrl: 'https://example.com/c.jpg' },
          ],
        );
        const batch = await db.findBatch('job_one');
        expect(batch).toEqual({
          id: 'job_one',
          accountId: a.id,
          source: 'upload',
          options: '{"output_format":"webp"}',
          total: 3,
          quotaDay: '2026-11-22',
          createdAt: '2026-11-22T10:00:00.000Z',
        });
        expect(await db.findBatch('job_none')).toBeUndefined();
        expect(
          (await db.listBatchItems('job_one')).map((i) => [i.index, i.name, i.status, i.sourceUrl]),
        ).toEqual([
          [0, 'a.jpg', 'queued', null],
          [1, 'b.png', 'queued', null],
          [2, 'c.jpg', 'queued', 'https://example.com/c.jpg'],
        ]);
        const at = '2026-11-22T10:00:00.000Z';
        expect(await db.listQueuedBatchItems(10)).toEqual([
          { batchId: 'job_one', index: 0, createdAt: at },
          { batchId: 'job_one', index: 1, createdAt: at },
          { batchId: 'job_one', index: 2, createdAt: at },
        ]);
        // Pages for the reconciliation sweep: batches older than a cutoff, after the last item seen.
        await db.insertBatch(
          {
            id: 'job_new',
            accountId: a.id,
            source: 'upload',
            options: '{}',
            total: 1,
            quotaDay: '2026-11-22',
            createdAt: '2026-11-22T10:05:00.000Z',
          },
          [{ index: 0, name: 'n.jpg', sourceUrl: null }],
        );
        const page1 = await db.listQueuedBatchItems(2, { createdBefore: '2026-11-22T10:01:00.000Z' });
        expect(page1.map((i) => [i.batchId, i.index])).toEqual([
          ['job_one', 0],
          ['job_one', 1],
        ]);
        const page2 = await db.listQueuedBatchItems(2, {
          createdBefore: '2026-11-22T10:01:00.000Z',
          after: page1[1]!,
        });
        expect(page2.map((i) => [i.batchId, i.index])).toEqual([['job_one', 2]]);
        expect((await db.listQueuedBatchItems(10, { after: page2[0]! })).map((i) => i.batchId)).toEqual([
          'job_new',
        ]);
        // The cutoff is exclusive: a batch created at that very instant is still too young.
        expect(await db.listQueuedBatchItems(10, { createdBefore: '2026-11-22T10:00:00.000Z' })).toEqual([]);
        await db.finishBatchItem(
          'job_new',
          0,
          { status: 'failed', errorCode: 'X', errorMessage: 'x', inputSize: null },
          '2026-11-22T10:05:01.000Z',
        );

        const done = {
          status: 'done',
          inputSize: 1000,
          outputSize: 400,
          result: '{"savings_percent":60}',
        } as const;
        const now = '2026-11-22T10:00:05.000Z';
        // Two workers finishing one item at once (a retried or taken-over job): one write wins.
        const race = await Promise.all([
          db.finishBatchItem('job_one', 0, done, now),
          db.finishBatchItem('job_one', 0, { ...done, outputSize: 999 }, now),
        ]);
        expect(race.filter(Boolean)).toHaveLength(1);
        expect(
          await db.finishBatchItem(
            'job_one',
            0,
            { status: 'failed', errorCode: 'X', errorMessage: 'late', inputSize: null },
            now,
          ),
        ).toBe(false);
        expect(
          await db.finishBatchItem(
            'job_one',
            1,
            { status: 'failed', errorCode: 'CORRUPT_IMAGE', errorMessage: 'truncated', inputSize: 12 },
            now,
          ),
        ).toBe(true);
        const item0 = await db.findBatchItem('job_one', 0);
        expect(item0).toMatchObject({
          status: 'done',
          inputSize: 1000,
          result: '{"savings_percent":60}',
          finishedAt: now,
        });
        expect([400, 999]).toContain(item0?.outputSize);
        expect(await db.findBatchItem('job_one', 1)).toMatchObject({
          status: 'failed',
          errorCode: 'CORRUPT_IMAGE',
          errorMessage: 'truncated',
          inputSize: 12,
          outputSize: null,
        });
        expect(await db.findBatchItem('job_one', 7)).toBeUndefined();
        expect(await db.listQueuedBatchItems(10)).toEqual([{ batchId: 'job_one', index: 2, createdAt: at }]);
      }),
    );
  });
}
