import type { BatchItemRecord, BatchRecord, BatchStore } from '../database.ts';
import { iso, isoOrNull, type PostgresConnection, type Row } from './connection.ts';

/** Batch jobs and their items on PostgreSQL. */
export function postgresBatchStore({ query, one, transaction }: PostgresConnection): BatchStore {
  // node-postgres parses a date column into a Date at local midnight: read it back in local time.
  const dateText = (value: unknown): string =>
    value instanceof Date
      ? `${value.getFullYear()}-${String(value.getMonth() + 1).padStart(2, '0')}-${String(value.getDate()).padStart(2, '0')}`
      : String(value);
  const toBatch = (row: Row): BatchRecord => ({
    id: String(row.id),
    accountId: String(row.account_id),
    source: String(row.source) as BatchRecord['source'],
    options: String(row.options),
    total: Number(row.total),
    quotaDay: dateText(row.quota_day),
    createdAt: iso(row.created_at),
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
    finishedAt: isoOrNull(row.finished_at),
  });

  return {
    async insertBatch(batch, items) {
      await transaction(async (client) => {
        await client.query(
          'INSERT INTO batch_jobs (id, account_id, source, options, total, quota_day, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
          [
            batch.id,
            batch.accountId,
            batch.source,
            batch.options,
            batch.total,
            batch.quotaDay,
            batch.createdAt,
          ],
        );
        // One statement for all items: a 500-item batch is one round trip, not 500.
        await client.query(
          `INSERT INTO batch_items (batch_id, idx, name, source_url, status)
           SELECT $1, i, n, u, 'queued' FROM unnest($2::int[], $3::text[], $4::text[]) AS t (i, n, u)`,
          [batch.id, items.map((i) => i.index), items.map((i) => i.name), items.map((i) => i.sourceUrl)],
        );
      });
    },
    async findBatch(id) {
      const row = await one('SELECT * FROM batch_jobs WHERE id = $1', [id]);
      return row && toBatch(row);
    },
    async listBatchItems(batchId) {
      return (await query('SELECT * FROM batch_items WHERE batch_id = $1 ORDER BY idx', [batchId])).rows.map(
        toItem,
      );
    },
    async findBatchItem(batchId, index) {
      const row = await one('SELECT * FROM batch_items WHERE batch_id = $1 AND idx = $2', [batchId, index]);
      return row && toItem(row);
    },
    async finishBatchItem(batchId, index, outcome, now) {
      const result =
        outcome.status === 'done'
          ? await query(
              `UPDATE batch_items SET status = 'done', input_size = $3, output_size = $4, result = $5, finished_at = $6
               WHERE batch_id = $1 AND idx = $2 AND status = 'queued'`,
              [batchId, index, outcome.inputSize, outcome.outputSize, outcome.result, now],
            )
          : await query(
              `UPDATE batch_items SET status = 'failed', input_size = $3, error_code = $4, error_message = $5, finished_at = $6
               WHERE batch_id = $1 AND idx = $2 AND status = 'queued'`,
              [batchId, index, outcome.inputSize, outcome.errorCode, outcome.errorMessage, now],
            );
      return result.rowCount === 1;
    },
    async listQueuedBatchItems(limit, options = {}) {
      const after = options.after;
      const { rows } = await query(
        `SELECT i.batch_id, i.idx, b.created_at FROM batch_items i JOIN batch_jobs b ON b.id = i.batch_id
         WHERE i.status = 'queued' AND ($2::timestamptz IS NULL OR b.created_at < $2::timestamptz)
           AND ($3::timestamptz IS NULL OR (b.created_at, i.batch_id, i.idx) > ($3::timestamptz, $4::text, $5::int))
         ORDER BY b.created_at, i.batch_id, i.idx LIMIT $1`,
        [
          limit,
          options.createdBefore ?? null,
          after?.createdAt ?? null,
          after?.batchId ?? null,
          after?.index ?? null,
        ],
      );
      return rows.map((r) => ({
        batchId: String(r.batch_id),
        index: Number(r.idx),
        createdAt: iso(r.created_at),
      }));
    },
  };
}
