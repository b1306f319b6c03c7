import { randomUUID } from 'node:crypto';
import { type Compresso, CompressoError } from '@compresso/client';
import type { Database, SqlRow } from '@compresso/runtime';
import { sha256 } from './backups.ts';
import { type Clock, systemClock } from './clock.ts';
import { assetLedger } from './ledger.ts';
import { isPlatformError } from './platform-error.ts';
import type { AssetContext, PlatformAsset, PlatformPort } from './port.ts';
import { kitSql, num, numOrNull, strOrNull } from './sql.ts';

/**
 * Alt text for a site's images, for every platform: templates with placeholders, AI-written text
 * through the Compresso API's `/api/v1/alt-text`, a preview on the real images, batches that apply
 * to the images without alt text or to all, and undo. Every change is a row in `kit_alt_changes`
 * with the text it replaced, written before the platform call, so a batch is undone exactly.
 */

/** The placeholders a template may use, and what fills each from the platform's context. */
export const ALT_PLACEHOLDERS = {
  product_title: (c: AssetContext) => c.title,
  vendor: (c: AssetContext) => c.vendor,
  product_type: (c: AssetContext) => c.productType,
  variant: (c: AssetContext) => c.variant,
  shop_name: (c: AssetContext) => c.siteName,
  n: (c: AssetContext) => (c.position !== undefined && c.position > 0 ? String(c.position) : undefined),
} as const satisfies Record<string, (c: AssetContext) => string | undefined>;

export type AltPlaceholder = keyof typeof ALT_PLACEHOLDERS;

/** Used when a batch asks for a template without giving one (and for AI's fallback). */
export const DEFAULT_ALT_TEMPLATE = '{product_title} by {vendor}';

/** Longest template accepted (the rendered text is cut to the platform's limit anyway). */
export const MAX_TEMPLATE_LENGTH = 1000;

export type AltMode = 'template' | 'ai';
export type AltScope = 'missing' | 'all';
/** `auto`: written on a new image's arrival (the site's setting), one batch per call of `autoAltText`. */
export type AltBatchScope = AltScope | 'auto';

/** What a template cannot be used for: unknown placeholders, an unclosed brace, too long. */
export class AltTemplateError extends Error {
  readonly code = 'INVALID_TEMPLATE';
  readonly problems: string[];
  constructor(message: string, problems: string[]) {
    super(message);
    this.problems = problems;
    this.name = 'AltTemplateError';
  }
}

/** The template's problems (none: it can be used). */
export function checkAltTemplate(template: string): string[] {
  const problems: string[] = [];
  if (template.trim() === '') problems.push('the template is empty');
  if (template.length > MAX_TEMPLATE_LENGTH)
    problems.push(`the template has ${template.length} characters; at most ${MAX_TEMPLATE_LENGTH}`);
  for (const [, name] of template.matchAll(/\{([^{}]*)\}/g))
    if (!(name! in ALT_PLACEHOLDERS))
      problems.push(
        `unknown placeholder {${name}}; use ${Object.keys(ALT_PLACEHOLDERS)
          .map((p) => `{${p}}`)
          .join(', ')}`,
      );
  const stray = template.replace(/\{[^{}]*\}/g, '');
  if (/[{}]/.test(stray)) problems.push('a { or } without its pair');
  return problems;
}

const SEPARATOR = /[-–—|·,:;/]/;

/** Whitespace collapsed, and the separators a missing value leaves behind removed ("Shirt - " → "Shirt"). */
function tidy(text: string): string {
  let out = text.replace(/\s+/g, ' ').replace(/\(\s*\)|\[\s*\]/g, ' ');
  for (let before = ''; before !== out; ) {
    before = out;
    out = out
      .replace(/\s+/g, ' ')
      // a separator followed by another one: the value between them was empty
      .replace(new RegExp(`(${SEPARATOR.source})\\s*(?=${SEPARATOR.source})`, 'g'), '')
      // a separator just inside a bracket, or just before one: the value next to it was empty
      .replace(new RegExp(`([(\\[])\\s*(${SEPARATOR.source})+\\s*`, 'g'), '$1')
      .replace(new RegExp(`\\s*(${SEPARATOR.source})+\\s*([)\\]])`, 'g'), '$2')
      .replace(new RegExp(`\\s+(${SEPARATOR.source})+\\s+(?=[(\\[])`, 'g'), ' ')
      .replace(new RegExp(`^\\s*(${SEPARATOR.source})+\\s*`), '')
      .replace(new RegExp(`\\s*(${SEPARATOR.source})+\\s*$`), '')
      // "by" or "for" with nothing after it
      .replace(/\s+(by|for|from|of)\s*$/i, '')
      .trim();
  }
  return out;
}

/**
 * At most `limit` characters, cut on a word boundary (a single word longer than the limit is cut
 * inside it), without a dangling separator at the end.
 */
export function fitAltText(text: string, limit: number): string {
  const clean = text.replace(/\s+/g, ' ').trim();
  if (clean.length <= limit) return clean;
  const head = clean.slice(0, limit + 1);
  const space = head.lastIndexOf(' ');
  const cut = space > 0 ? head.slice(0, space) : clean.slice(0, limit);
  return cut.replace(new RegExp(`\\s*(${SEPARATOR.source}|\\.)+\\s*$`), '').trim() || clean.slice(0, limit);
}

/** The template with the context's values in place, tidied and cut to `limit` on a word boundary. */
export function renderAltTemplate(template: string, context: AssetContext, limit: number): string {
  const problems = checkAltTemplate(template);
  if (problems.length)
    throw new AltTemplateError(`The alt text template cannot be used: ${problems.join('; ')}.`, problems);
  const filled = template.replace(/\{([a-z_]+)\}/g, (_, name: string) =>
    (ALT_PLACEHOLDERS[name as AltPlaceholder](context) ?? '').trim(),
  );
  return fitAltText(tidy(filled), limit);
}

/** What a preview shows for one image, and what a batch writes. */
export interface AltProposal {
  assetId: string;
  parentId: string | null;
  productTitle: string | null;
  filename: string;
  current: string | null;
  /** null: nothing to write (`error` says why). */
  proposed: string | null;
  source: 'template' | 'ai' | null;
  error?: string;
}

export interface AltPreview {
  items: AltProposal[];
  /** What the proposals came from: `template` also when AI was asked for but is not available. */
  source: AltMode;
  /** Said to the merchant when something differs from what was asked (AI not configured …). */
  message: string | null;
}

export type AltBatchState = 'queued' | 'running' | 'done' | 'failed';

export interface AltBatch {
  id: string;
  site: string;
  mode: AltMode;
  scope: AltBatchScope;
  template: string | null;
  state: AltBatchState;
  /** Images whose alt text this batch changed (and an undo puts back). */
  changed: number;
  /** Images in scope already carrying the proposed text, or with nothing to propose. */
  unchanged: number;
  failed: number;
  message: string | null;
  lastError: string | null;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
  undoneAt: number | null;
}

export interface AltUndoResult {
  batch: AltBatch;
  /** Images whose alt text went back to what it was before the batch. */
  restored: number;
  /**
   * Images left as they are because their alt text changed since the batch (the merchant edited it,
   * or a later batch wrote it): undo that later batch first.
   */
  kept: number;
  failed: number;
}

export type AutoAltOutcome =
  | { kind: 'written'; text: string; source: 'template' | 'ai'; batchId: string; message: string | null }
  | { kind: 'skipped'; reason: 'has_alt' | 'written_before' | 'nothing_to_write' | 'busy' };

export interface AltRequest {
  mode: AltMode;
  /** For `template`, and as AI's fallback (default DEFAULT_ALT_TEMPLATE). */
  template?: string | undefined;
  scope: AltScope;
}

export interface AltTextOptions {
  db: Database;
  port: PlatformPort;
  /** The site's Compresso client, for AI-written alt text. Without it, `ai` falls back to the template. */
  client?(site: string): Compresso | Promise<Compresso>;
  clock?: Clock;
  /** Lease owner id for the asset leases the writes take (default: a random one). */
  owner?: string;
  /** BCP 47 language AI writes in (default `en`). */
  language?: string;
}

export interface AltText {
  /** Proposals for the first `limit` images in scope (default 20, at most 100). Nothing is written. */
  preview(site: string, request: AltRequest & { limit?: number }, signal?: AbortSignal): Promise<AltPreview>;
  /** Record a batch (state `queued`); `runBatch` does the work, in a queue job. */
  createBatch(site: string, request: AltRequest): Promise<AltBatch>;
  /** Work a batch through the whole catalog. Running it again (a retried job) changes nothing twice. */
  runBatch(site: string, batchId: string, signal?: AbortSignal): Promise<AltBatch>;
  /** Put back the alt text each image had before the batch, where nothing changed it since. */
  undoBatch(site: string, batchId: string, signal?: AbortSignal): Promise<AltUndoResult>;
  /** The batch being applied (queued or running), if any; automatic ones are not counted. */
  activeBatch(site: string): Promise<AltBatch | undefined>;
  /** A batch whose job gave up for good: `failed`, with the reason (what it wrote stays undoable). */
  failBatch(site: string, batchId: string, error: string): Promise<void>;
  getBatch(site: string, batchId: string): Promise<AltBatch | undefined>;
  /** Newest first. */
  listBatches(site: string, options?: { limit?: number }): Promise<AltBatch[]>;
  /**
   * A new image's alt text, per the site's setting: written only when the image has none and the kit
   * never wrote one for it (so a merchant who clears it, or an undo, is not overridden).
   */
  autoAltText(
    site: string,
    assetId: string,
    request: { mode: AltMode; template?: string | undefined; parentId?: string | undefined },
    signal?: AbortSignal,
  ): Promise<AutoAltOutcome>;
}

const NOT_CONFIGURED =
  'AI alt text is not set up on the Compresso server (no vision provider is configured), so these come from the template.';
const LEASE_MS = 60_000;

const batchOf = (row: SqlRow): AltBatch => ({
  id: String(row.id),
  site: String(row.site),
  mode: String(row.mode) as AltMode,
  scope: String(row.scope) as AltBatchScope,
  template: strOrNull(row.template),
  state: String(row.state) as AltBatchState,
  changed: num(row.changed),
  unchanged: num(row.unchanged),
  failed: num(row.failed),
  message: strOrNull(row.message),
  lastError: strOrNull(row.last_error),
  createdAt: num(row.created_at),
  updatedAt: num(row.updated_at),
  finishedAt: numOrNull(row.finished_at),
  undoneAt: numOrNull(row.undone_at),
});

const missing = (alt: string | null) => alt === null || alt.trim() === '';
const errorText = (error: unknown) =>
  error instanceof CompressoError || isPlatformError(error)
    ? `${error.code}: ${error.message}`
    : error instanceof Error
      ? error.message
      : String(error);

export function createAltText(options: AltTextOptions): AltText {
  const { port } = options;
  const sql = kitSql(options.db);
  const ledger = assetLedger(options.db);
  const clock = options.clock ?? systemClock;
  const owner = options.owner ?? `kit-alt-${randomUUID()}`;
  const limit = port.maxAltTextLength;

  /** One pass's memory: the images of each parent seen so far, and whether AI answered as AI. */
  interface Pass {
    site: string;
    mode: AltMode;
    template: string;
    /** Images of each parent seen so far, for `{n}` when the platform does not give the position. */
    seen: Map<string, number>;
    aiUnavailable: boolean;
    signal: AbortSignal | undefined;
  }

  const newPass = (site: string, request: Omit<AltRequest, 'scope'>, signal?: AbortSignal): Pass => {
    const template = request.template ?? DEFAULT_ALT_TEMPLATE;
    const problems = checkAltTemplate(template);
    if (problems.length)
      throw new AltTemplateError(`The alt text template cannot be used: ${problems.join('; ')}.`, problems);
    return {
      site,
      mode: request.mode,
      template,
      seen: new Map(),
      aiUnavailable: !options.client,
      signal,
    };
  };

  async function contextOf(pass: Pass, asset: PlatformAsset): Promise<AssetContext> {
    const parent = asset.parentId;
    let n: number | undefined;
    if (parent) {
      n = (pass.seen.get(parent) ?? 0) + 1;
      pass.seen.set(parent, n);
    }
    // Asked per image (its variant and position are its own), with the parent as a hint: an adapter
    // answers from the parent's one look-up (the Shopify adapter keeps a product's for a moment).
    const context = await port.assetContext(pass.site, asset.id, {
      signal: pass.signal,
      parentId: parent,
      variant: pass.template.includes('{variant}'),
    });
    // Without a position from the platform, the image's place among its parent's in the listing.
    return { ...context, position: context.position ?? n, filename: asset.filename };
  }

  async function propose(pass: Pass, asset: PlatformAsset, context: AssetContext): Promise<AltProposal> {
    const base = {
      assetId: asset.id,
      parentId: asset.parentId ?? null,
      productTitle: context.title ?? null,
      filename: asset.filename,
      current: asset.altText,
    };
    if (pass.mode === 'ai' && !pass.aiUnavailable && options.client) {
      try {
        const client = await options.client(pass.site);
        const { bytes } = await port.fetchAsset(pass.site, asset.id, { signal: pass.signal });
        const ctx = {
          ...(context.title ? { productTitle: context.title } : {}),
          ...(context.vendor ? { vendor: context.vendor } : {}),
          ...(context.siteName ? { pageTitle: context.siteName } : {}),
          ...(options.language ? { language: options.language } : {}),
        };
        // The same image and context: the same key, so a batch after its preview gets the text the
        // merchant saw (the server answers a repeated key with its first answer), at no second cost.
        const idempotencyKey = `kit-alt-${sha256(new TextEncoder().encode(JSON.stringify([pass.site, asset.id, sha256(bytes), ctx])))}`;
        const result = await client.altText(bytes, ctx, {
          filename: asset.filename,
          idempotencyKey,
          ...(pass.signal ? { signal: pass.signal } : {}),
        });
        if (result.source === 'provider') {
          const text = fitAltText(result.alt, limit);
          return text
            ? { ...base, proposed: text, source: 'ai' }
            : { ...base, proposed: null, source: null, error: 'the AI answered an empty text' };
        }
        // `offline`: the server has no vision provider. Its offline text is not the AI's; use the template.
        pass.aiUnavailable = true;
      } catch (error) {
        if (error instanceof CompressoError && error.code === 'PROVIDER_NOT_CONFIGURED')
          pass.aiUnavailable = true;
        else return { ...base, proposed: null, source: null, error: errorText(error) };
      }
    }
    const text = renderAltTemplate(pass.template, context, limit);
    return text
      ? { ...base, proposed: text, source: 'template' }
      : { ...base, proposed: null, source: null, error: 'the template has nothing to say for this image' };
  }

  const messageOf = (pass: Pass) => (pass.mode === 'ai' && pass.aiUnavailable ? NOT_CONFIGURED : null);

  /** Each asset of the site in scope, page by page. */
  async function* assetsInScope(pass: Pass, scope: AltScope): AsyncGenerator<PlatformAsset> {
    let cursor: string | null = null;
    do {
      const page = await port.listAssets(pass.site, { cursor, limit: 50, signal: pass.signal });
      for (const asset of page.assets) {
        if (scope === 'missing' && !missing(asset.altText)) {
          // Still counted for {n}: the position is among all the parent's images.
          if (asset.parentId) pass.seen.set(asset.parentId, (pass.seen.get(asset.parentId) ?? 0) + 1);
          continue;
        }
        yield asset;
      }
      cursor = page.cursor;
    } while (cursor);
  }

  /** Take the asset's lease (a compression of the same image waits for it), a few tries. */
  async function withAssetLease<T>(
    site: string,
    assetId: string,
    work: () => Promise<T>,
  ): Promise<T | 'busy'> {
    for (let wait = 50; ; wait *= 2) {
      const claimed = await ledger.claim(site, assetId, owner, clock.now(), LEASE_MS);
      if (claimed) {
        try {
          return await work();
        } finally {
          await ledger.release(site, assetId, owner);
        }
      }
      if (wait > 3200) return 'busy';
      await clock.sleep(wait);
    }
  }

  /**
   * Write one image's alt text as part of a batch: the change (with the text it replaces) is recorded
   * first, so a crash after the platform call still leaves what undo needs.
   */
  async function write(
    site: string,
    batchId: string,
    asset: PlatformAsset,
    text: string,
    source: 'template' | 'ai',
  ): Promise<'changed' | 'unchanged' | 'busy'> {
    const outcome = await withAssetLease(site, asset.id, async () => {
      const [already] = await sql.all(
        'SELECT state FROM kit_alt_changes WHERE batch_id = ? AND asset_id = ?',
        [batchId, asset.id],
      );
      if (already?.state === 'written') return 'unchanged' as const; // a retried job: done before
      if (!already)
        await sql.run(
          `INSERT INTO kit_alt_changes (batch_id, site, asset_id, alt_before, alt_after, source, state, created_at)
           VALUES (?, ?, ?, ?, ?, ?, 'pending', ?) ON CONFLICT (batch_id, asset_id) DO NOTHING`,
          [batchId, site, asset.id, asset.altText, text, source, clock.now()],
        );
      await port.setAltText(site, asset.id, text, { signal: undefined });
      await sql.run(`UPDATE kit_alt_changes SET state = 'written' WHERE batch_id = ? AND asset_id = ?`, [
        batchId,
        asset.id,
      ]);
      return 'changed' as const;
    });
    return outcome;
  }

  async function insertBatch(
    site: string,
    request: AltRequest | { mode: AltMode; template?: string | undefined; scope: 'auto' },
    state: AltBatchState,
  ) {
    const id = `alt_${randomUUID().replace(/-/g, '').slice(0, 20)}`;
    const now = clock.now();
    await sql.run(
      `INSERT INTO kit_alt_batches (id, site, mode, scope, template, state, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      [id, site, request.mode, request.scope, request.template ?? DEFAULT_ALT_TEMPLATE, state, now, now],
    );
    return id;
  }

  const service: AltText = {
    async preview(site, request, signal) {
      const pass = newPass(site, request, signal);
      const max = Math.max(1, Math.min(100, Math.trunc(request.limit ?? 20)));
      const items: AltProposal[] = [];
      for await (const asset of assetsInScope(pass, request.scope)) {
        items.push(await propose(pass, asset, await contextOf(pass, asset)));
        if (items.length >= max) break;
      }
      return {
        items,
        source: pass.mode === 'ai' && !pass.aiUnavailable ? 'ai' : 'template',
        message: messageOf(pass),
      };
    },

    async createBatch(site, request) {
      newPass(site, request); // the template is checked before anything is queued
      const id = await insertBatch(site, request, 'queued');
      return (await service.getBatch(site, id)) as AltBatch;
    },

    async runBatch(site, batchId, signal) {
      const batch = await service.getBatch(site, batchId);
      if (!batch) throw new Error(`runBatch: no alt text batch ${batchId} for ${site}`);
      if (batch.state === 'done' || batch.state === 'failed' || batch.undoneAt !== null) return batch;
      if (batch.scope === 'auto') throw new Error('runBatch: an automatic batch is written by autoAltText');
      const pass = newPass(site, { mode: batch.mode, template: batch.template ?? undefined }, signal);
      await sql.run(`UPDATE kit_alt_batches SET state = 'running', updated_at = ? WHERE id = ?`, [
        clock.now(),
        batchId,
      ]);
      const counts = { changed: 0, unchanged: 0, failed: 0 };
      let lastError: string | null = null;
      try {
        for await (const asset of assetsInScope(pass, batch.scope)) {
          const proposal = await propose(pass, asset, await contextOf(pass, asset));
          if (proposal.proposed === null) {
            if (proposal.error && proposal.source === null && !/nothing to say/.test(proposal.error)) {
              counts.failed++;
              lastError = `${asset.filename}: ${proposal.error}`;
            } else counts.unchanged++;
            continue;
          }
          if (proposal.proposed === asset.altText) {
            // Already there: written by an earlier run of this batch that stopped before recording it
            // (its change is then completed), or the image had this text before.
            const completed = await sql.run(
              `UPDATE kit_alt_changes SET state = 'written' WHERE batch_id = ? AND asset_id = ? AND state = 'pending'`,
              [batchId, asset.id],
            );
            if (completed === 0) counts.unchanged++;
            continue;
          }
          try {
            const outcome = await write(
              site,
              batchId,
              asset,
              proposal.proposed,
              proposal.source ?? 'template',
            );
            if (outcome === 'busy') {
              counts.failed++;
              lastError = `${asset.filename}: being worked on; run the batch again`;
            } else counts[outcome]++;
          } catch (error) {
            if (isPlatformError(error) && error.retryable) throw error; // the job's retry goes on from here
            // Refused: nothing changed, so nothing for undo.
            await sql.run(
              `DELETE FROM kit_alt_changes WHERE batch_id = ? AND asset_id = ? AND state = 'pending'`,
              [batchId, asset.id],
            );
            counts.failed++;
            lastError = `${asset.filename}: ${errorText(error)}`;
          }
        }
      } catch (error) {
        await sql.run(`UPDATE kit_alt_batches SET last_error = ?, updated_at = ? WHERE id = ?`, [
          errorText(error),
          clock.now(),
          batchId,
        ]);
        throw error;
      }
      // Changed counts what this batch wrote over all its runs (a retried job counts each image once).
      const [written] = await sql.all(
        `SELECT COUNT(*) AS n FROM kit_alt_changes WHERE batch_id = ? AND state = 'written'`,
        [batchId],
      );
      const now = clock.now();
      await sql.run(
        `UPDATE kit_alt_batches SET state = 'done', changed = ?, unchanged = ?, failed = ?, message = ?, last_error = ?,
           updated_at = ?, finished_at = ? WHERE id = ?`,
        [num(written?.n), counts.unchanged, counts.failed, messageOf(pass), lastError, now, now, batchId],
      );
      return (await service.getBatch(site, batchId)) as AltBatch;
    },

    async undoBatch(site, batchId, signal) {
      const batch = await service.getBatch(site, batchId);
      if (!batch) throw new Error(`undoBatch: no alt text batch ${batchId} for ${site}`);
      const result = { restored: 0, kept: 0, failed: 0 };
      // Again until none is left: an automatic batch may gain a change while it is being undone.
      const seen = new Set<string>();
      for (;;) {
        const changes = (
          await sql.all(
            `SELECT * FROM kit_alt_changes WHERE batch_id = ? AND undone_at IS NULL ORDER BY asset_id`,
            [batchId],
          )
        ).filter((change) => !seen.has(String(change.asset_id)));
        if (changes.length === 0) break;
        for (const change of changes) {
          seen.add(String(change.asset_id));
          const assetId = String(change.asset_id);
          const before = strOrNull(change.alt_before);
          const after = String(change.alt_after);
          try {
            const outcome = await withAssetLease(site, assetId, async () => {
              const live = port.getAsset
                ? await port.getAsset(site, assetId, { signal })
                : (await port.fetchAsset(site, assetId, { signal })).asset;
              // Only where the image still has what the batch wrote: a later edit stays.
              if ((live.altText ?? '') === after) {
                await port.setAltText(site, assetId, before === null || before === '' ? null : before, {
                  signal,
                });
                return 'restored' as const;
              }
              // Never written (the platform refused it), or put back by hand: nothing to do.
              return (live.altText ?? '') === (before ?? '') ? ('settled' as const) : ('kept' as const);
            });
            if (outcome === 'busy') {
              result.failed++;
              continue;
            }
            if (outcome !== 'settled') result[outcome]++;
            await sql.run(`UPDATE kit_alt_changes SET undone_at = ? WHERE batch_id = ? AND asset_id = ?`, [
              clock.now(),
              batchId,
              assetId,
            ]);
          } catch (error) {
            if (isPlatformError(error) && error.code === 'NOT_FOUND') {
              // The image is gone: nothing to put back.
              await sql.run(`UPDATE kit_alt_changes SET undone_at = ? WHERE batch_id = ? AND asset_id = ?`, [
                clock.now(),
                batchId,
                assetId,
              ]);
              continue;
            }
            if (isPlatformError(error) && error.retryable) throw error;
            result.failed++;
          }
        }
      }
      if (result.failed === 0)
        await sql.run(`UPDATE kit_alt_batches SET undone_at = ?, updated_at = ? WHERE id = ?`, [
          clock.now(),
          clock.now(),
          batchId,
        ]);
      return { ...result, batch: (await service.getBatch(site, batchId)) as AltBatch };
    },

    async activeBatch(site) {
      const [row] = await sql.all(
        `SELECT * FROM kit_alt_batches WHERE site = ? AND scope <> 'auto' AND state IN ('queued', 'running')
         ORDER BY created_at DESC LIMIT 1`,
        [site],
      );
      return row && batchOf(row);
    },

    async failBatch(site, batchId, error) {
      const [written] = await sql.all(
        `SELECT COUNT(*) AS n FROM kit_alt_changes WHERE batch_id = ? AND state = 'written'`,
        [batchId],
      );
      const now = clock.now();
      await sql.run(
        `UPDATE kit_alt_batches SET state = 'failed', changed = ?, last_error = ?, updated_at = ?, finished_at = ?
         WHERE site = ? AND id = ? AND state IN ('queued', 'running')`,
        [num(written?.n), error, now, now, site, batchId],
      );
    },

    async getBatch(site, batchId) {
      const [row] = await sql.all('SELECT * FROM kit_alt_batches WHERE site = ? AND id = ?', [site, batchId]);
      return row && batchOf(row);
    },

    async listBatches(site, { limit: max = 50 } = {}) {
      const rows = await sql.all(
        'SELECT * FROM kit_alt_batches WHERE site = ? ORDER BY created_at DESC, id DESC LIMIT ?',
        [site, Math.max(1, Math.min(500, Math.trunc(max)))],
      );
      return rows.map(batchOf);
    },

    async autoAltText(site, assetId, request, signal) {
      const [history] = await sql.all(
        'SELECT 1 AS seen FROM kit_alt_changes WHERE site = ? AND asset_id = ? LIMIT 1',
        [site, assetId],
      );
      if (history) return { kind: 'skipped', reason: 'written_before' };
      const asset = port.getAsset
        ? await port.getAsset(site, assetId, { signal })
        : (await port.fetchAsset(site, assetId, { signal })).asset;
      if (!missing(asset.altText)) return { kind: 'skipped', reason: 'has_alt' };
      const pass = newPass(site, request, signal);
      const parent = request.parentId ?? asset.parentId;
      const context = {
        ...(await port.assetContext(site, assetId, {
          signal,
          parentId: parent,
          variant: pass.template.includes('{variant}'),
        })),
        filename: asset.filename,
      };
      const proposal = await propose(pass, { ...asset, parentId: parent }, context);
      if (proposal.proposed === null || proposal.source === null)
        return { kind: 'skipped', reason: 'nothing_to_write' };
      // One automatic batch per site and day: a day's writes on arrival are listed, and undone, together.
      const day = Math.floor(clock.now() / 86_400_000) * 86_400_000;
      const [open] = await sql.all(
        `SELECT id FROM kit_alt_batches WHERE site = ? AND scope = 'auto' AND undone_at IS NULL AND created_at >= ?
         ORDER BY created_at DESC LIMIT 1`,
        [site, day],
      );
      const batchId = open
        ? String(open.id)
        : await insertBatch(site, { mode: request.mode, template: pass.template, scope: 'auto' }, 'done');
      const dropIfEmpty = async () => {
        if (!open)
          await sql.run(
            'DELETE FROM kit_alt_batches WHERE id = ? AND NOT EXISTS (SELECT 1 FROM kit_alt_changes WHERE batch_id = ?)',
            [batchId, batchId],
          );
      };
      let outcome: Awaited<ReturnType<typeof write>>;
      try {
        outcome = await write(site, batchId, asset, proposal.proposed, proposal.source);
      } catch (error) {
        // Not written: no trace, so the image's next event tries again.
        await sql.run(
          `DELETE FROM kit_alt_changes WHERE batch_id = ? AND asset_id = ? AND state = 'pending'`,
          [batchId, assetId],
        );
        await dropIfEmpty();
        throw error;
      }
      if (outcome === 'busy') {
        await dropIfEmpty();
        return { kind: 'skipped', reason: 'busy' };
      }
      const now = clock.now();
      await sql.run(
        `UPDATE kit_alt_batches SET changed = (SELECT COUNT(*) FROM kit_alt_changes WHERE batch_id = ? AND state = 'written'),
           message = COALESCE(?, message), updated_at = ?, finished_at = ? WHERE id = ?`,
        [batchId, messageOf(pass), now, now, batchId],
      );
      return {
        kind: 'written',
        text: proposal.proposed,
        source: proposal.source,
        batchId,
        message: messageOf(pass),
      };
    },
  };
  return service;
}
