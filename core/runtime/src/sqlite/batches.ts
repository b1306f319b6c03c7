import type { BatchItemRecord, BatchRecord, BatchStore } from '../database.ts';
import type { Row, SqliteConnection } from './connection.ts';

/** Batch jobs and their items on SQLite. */
export function sqliteBatchStore({ stmt, transaction }: SqliteConnection): BatchStore {
  const toBatch = (row: Row): BatchRecord => ({
    id: String(row.id),
    accountId: String(row.account_id),
    source: String(row.source) as BatchRecord['source'],
    options: String(row.options),
    total: Number(row.total),
    quotaDay: String(row.quota_day),
    createdAt: String(row.created_at),
  });
  const numOrNull = (v: unknown) => (v == null ? null : Number(v));
  const strOrNull = (v: unknown) => (v == null ? null : String(v));
  const toItem = (row: Row): BatchItemRecord => ({
    batchId: String(row.batch_id),
    index: Number(row.idx),
    name: String(row.name),
    sourceUrl: strOrNull(row.source_url),
    status: String(row.status) as BatchItemRecord['status'],
    inputSize: numOrNull(row.input_size),
    outputSize: numOrNull(row.output_size),
    result: strOrNull(row.result),
    errorCode: strOrNull(row.error_code),
    errorMessage: strOrNull(row.error_message),
    finishedAt: strOrNull(row.finished_at),
  });

  return {
    async insertBatch(batch, items) {
      transaction(() => {
        stmt(
          'INSERT INTO batch_jobs (id, account_id, source, options, total, quota_day, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        ).run(
          batch.id,
          batch.accountId,
          batch.source,
          batch.options,
          batch.total,
          batch.quotaDay,
          batch.createdAt,
        );
        const insert = stmt(
          "INSERT INTO batch_items (batch_id, idx, name, source_url, status) VALUES (?, ?, ?, ?, 'queued')",
        );
        for (const item of items) insert.run(batch.id, item.index, item.name, item.sourceUrl);
      });
    },
    async findBatch(id) {
      const row = stmt('SELECT * FROM batch_jobs WHERE id = ?').get(id) as Row | undefined;
      return row && toBatch(row);
    },
    async listBatchItems(batchId) {
      return (stmt('SELECT * FROM batch_items WHERE batch_id = ? ORDER BY idx').all(batchId) as Row[]).map(
        toItem,
      );
    },
    async findBatchItem(batchId, index) {
      const row = stmt('SELECT * FROM batch_items WHERE batch_id = ? AND idx = ?').get(batchId, index) as
        | Row
        | undefined;
      return row && toItem(row);
    },
    async finishBatchItem(batchId, index, outcome, now) {
      const result =
        outcome.status === 'done'
          ? stmt(
              `UPDATE batch_items SET status = 'done', input_size = ?, output_size = ?, result = ?, finished_at = ?
               WHERE batch_id = ? AND idx = ? AND status = 'queued'`,
            ).run(outcome.inputSize, outcome.outputSize, outcome.result, now, batchId, index)
          : stmt(
              `UPDATE batch_items SET status = 'failed', input_size = ?, error_code = ?, error_message = ?, finished_at = ?
               WHERE batch_id = ? AND idx = ? AND status = 'queued'`,
            ).run(outcome.inputSize, outcome.errorCode, outcome.errorMessage, now, batchId, index);
      return Number(result.changes) === 1;
    },
    async listQueuedBatchItems(limit, options = {}) {
      // Times are ISO 8601 strings in UTC (toISOString), so text order is time order; the row value
      // comparison is the keyset for the next page.
      const after = options.after;
      const rows = stmt(
        `SELECT i.batch_id, i.idx, b.created_at FROM batch_items i JOIN batch_jobs b ON b.id = i.batch_id
         WHERE i.status = 'queued' AND (? IS NULL OR b.created_at < ?)
           AND (? IS NULL OR (b.created_at, i.batch_id, i.idx) > (?, ?, ?))
         ORDER BY b.created_at, i.batch_id, i.idx LIMIT ?`,
      ).all(
        options.createdBefore ?? null,
        options.createdBefore ?? null,
        after ? 1 : null,
        after?.createdAt ?? null,
        after?.batchId ?? null,
        after?.index ?? null,
        limit,
      ) as Row[];
      return rows.map((r) => ({
        batchId: String(r.batch_id),
        index: Number(r.idx),
        createdAt: String(r.created_at),
      }));
    },
  };
}
