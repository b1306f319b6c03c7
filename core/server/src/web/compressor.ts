import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isIP } from 'node:net';
import { dirname, join } from 'node:path';
import type { Engine } from '@compresso/engine';
import {
  type Account,
  type Config,
  type Database,
  type Logger,
  nextReset,
  planOf,
  quotaDay,
  secondsUntilReset,
} from '@compresso/runtime';
import {
  AI_MODELS,
  COMPRESS_OPTIONS,
  type CompressOptionName,
  CompressoError,
  INPUT_EXTENSIONS,
  INPUT_FORMATS,
  INPUT_MIME_TYPES,
  INSTRUCTION_MAX,
  OUTPUT_FORMATS,
  type OutputFormat,
  PROMPT_MAX,
  type ResultHeaderField,
} from '@compresso/schema';
import express, { type Request, type RequestHandler, type Response } from 'express';
import type { AiProvider } from '../ai/provider.ts';
import { editImage, generateImage } from '../ai/routes.ts';
import { compressUpload, readImageUpload, sendCompressed } from '../compress-response.ts';
import { sendError } from '../errors.ts';
import type { UploadLimits } from '../multipart.ts';
import { page, sendPage } from './layout.ts';
import { csrfToken, sessionOf, verifyCsrf } from './session.ts';

export interface CompressorDeps {
  engine: Engine;
  db: Database;
  logger: Logger;
  config: Config;
  /** The app's upload limits and memory budget: web uploads share them with the API's. */
  uploadLimits: UploadLimits;
  /** The clock the allowance's day is read from (the app's, shared with the API quota). */
  now?: () => Date;
  /** The AI provider of the API's /generate and /edit, shared by the Pro panel; none: no generate form. */
  ai?: AiProvider | undefined;
}

/**
 * The network a visitor's allowance is counted for: an IPv4 address, or the /64 of an IPv6 address
 * (one household or phone is routinely given a whole /64, so per-address counting would be no limit).
 */
export function visitorNetwork(address: string): string {
  const bare = address.replace(/%.*$/, '');
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(bare);
  if (mapped) return mapped[1]!;
  if (isIP(bare) !== 6) return bare;
  const [head = '', tail] = bare.split('::');
  const first = head ? head.split(':') : [];
  const last = tail ? tail.split(':') : [];
  const groups = [...first, ...Array(Math.max(0, 8 - first.length - last.length)).fill('0'), ...last];
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}

/**
 * The key a visitor's count is stored under. Hashed so the table does not list addresses in the
 * clear; this is not anonymisation (IPv4 is small enough to enumerate), and rows are pruned daily.
 */
export function visitorKey(address: string): string {
  return createHash('sha256')
    .update(`compresso-visitor:${visitorNetwork(address)}`)
    .digest('hex')
    .slice(0, 32);
}

function accountOf(res: Response): Account | undefined {
  return sessionOf(res)?.account;
}

/**
 * Cross-site request forgery: another site must not make a visitor's browser spend their allowance
 * (or a signed-in Pro account's quota). The token check is the session layer's (verifyCsrf: the
 * X-CSRF-Token header must match the session, or signed out the signed `cmp_csrf` cookie); this
 * adds Fetch Metadata and Origin, which browsers send with every upload, as a second wall.
 */
const sameSiteOnly: RequestHandler = (req, _res, next) => {
  const refuse = (field: string, why: string, expected: string, received: string) =>
    new CompressoError(
      'FORBIDDEN',
      `Origin: ${why} Use the compressor page, or /api/v1/compress with an API key.`,
      { details: [{ field, expected, received: received.slice(0, 100) }] },
    );
  const site = req.get('Sec-Fetch-Site');
  if (site && site !== 'same-origin')
    throw refuse(
      'Sec-Fetch-Site',
      `the request came from another site (Sec-Fetch-Site: ${site}).`,
      'same-origin',
      site,
    );
  const origin = req.get('Origin');
  if (origin) {
    let host: string | undefined;
    try {
      host = new URL(origin).host;
    } catch {
      host = undefined;
    }
    if (host !== req.get('Host')) {
      throw refuse(
        'Origin',
        'the request came from another origin.',
        `this site (${req.get('Host')})`,
        origin,
      );
    }
  }
  next();
};

/**
 * How the page offers the contract's options. Each option of @compresso/schema's table is either a
 * control of the form (its bounds read from the table) or listed here with the reason it is not:
 * an option added to the table fails the page's test until it is one or the other.
 */
export const OPTIONS_NOT_ON_PAGE: Partial<Record<CompressOptionName, string>> = {
  strip_exif: 'metadata is always removed on the page (the server default): a shared photo keeps no GPS',
  png_to_jpeg: '"Keep" keeps each format; a conversion is chosen with the Format select',
};

/**
 * Result facts (the contract's RESULT_HEADERS) the page's script does not show, and why; every other
 * one is shown in each result row. A fact added to the table fails the page's test until it is
 * shown or listed here.
 */
export const FACTS_NOT_ON_PAGE: Partial<Record<ResultHeaderField, string>> = {
  quality: 'the row shows sizes and dimensions; the quality chosen is for API users tuning settings',
  auto_quality: 'the page always asks for what the checkbox says',
  optimized: 'a result that was not optimized shows 0% saved',
  metadata_stripped: 'always true on the page',
  score: 'an expert metric; the page shows the saving instead',
  chroma_subsampling: 'an encoder setting, not a result a visitor acts on',
  lossless: 'an encoder setting, not a result a visitor acts on',
  near_lossless: 'an encoder setting, not a result a visitor acts on',
  effort: 'an encoder setting, not a result a visitor acts on',
  auto_steps: 'how the search went, not a result a visitor acts on',
};

/** Output formats the Format select offers (GIF output is for animations, which the page does not preview). */
export const PAGE_OUTPUT_FORMATS: readonly OutputFormat[] = OUTPUT_FORMATS.filter(
  (format) => format !== 'gif',
);

const FORMAT_LABELS: Record<OutputFormat, string> = {
  jpeg: 'JPEG',
  png: 'PNG',
  webp: 'WebP',
  avif: 'AVIF',
  gif: 'GIF',
};

/** Input formats the file picker proposes: every one the contract reads but TIFF (browsers cannot show it). */
const PAGE_INPUT_FORMATS = INPUT_FORMATS.filter((format) => format !== 'tiff');

const ACCEPT = [
  ...PAGE_INPUT_FORMATS.map((format) => INPUT_MIME_TYPES[format]),
  // What iPhones label their photos with, beside the registered image/heif.
  'image/heic',
  ...Object.entries(INPUT_EXTENSIONS)
    .filter(([, format]) => (PAGE_INPUT_FORMATS as readonly string[]).includes(format))
    .map(([ext]) => ext),
].join(',');

/** What the page says about the day's allowance before the first upload. */
interface AllowanceView {
  kind: 'account' | 'visitor';
  limit: number;
  used: number;
  resetsInSeconds: number;
  signedIn: boolean;
  /** Signed in on a plan with the API: the edit and generate panel; `generate` says whether a provider is set up. */
  aiPanel?: { generate: boolean };
}

function describeReset(seconds: number): string {
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.ceil((seconds % 3600) / 60);
  return hours > 0 ? `${hours} h ${minutes} min` : `${minutes} min`;
}

function allowanceHtml(view: AllowanceView, proDailyLimit: number): string {
  const left = Math.max(0, view.limit - view.used);
  const reset = `resets at 00:00 UTC, in ${describeReset(view.resetsInSeconds)}`;
  if (view.kind === 'account') {
    return `<p id="allowance" class="allowance${left === 0 ? ' is-exhausted' : ''}">Pro plan: ${left} of ${view.limit} requests left today, shared with your API keys (${reset}).</p>`;
  }
  if (view.limit === 0) {
    return `<p id="allowance" class="allowance is-exhausted">This server has no free allowance: ${view.signedIn ? '<a href="/account">activate Pro</a> on your account' : '<a href="/signup">sign up</a> and activate Pro'} to compress images here.</p>`;
  }
  const upgrade = view.signedIn
    ? `<a href="/account">Activate Pro</a> for ${proDailyLimit} a day.`
    : `<a href="/signup">Sign up</a> and activate Pro for ${proDailyLimit} a day.`;
  return `<p id="allowance" class="allowance${left === 0 ? ' is-exhausted' : ''}">Free allowance: ${left} of ${view.limit} images left today (${reset}). ${upgrade}</p>`;
}

/** Generate's model choices, as the contract names them. */
const PANEL_MODELS = AI_MODELS;

/**
 * The Pro panel: edit one image by an instruction, and generate one from a prompt. Only signed-in
 * accounts whose plan has the API see it; without an AI provider the generate form is replaced by a note.
 */
export function aiPanelHtml(panel: { generate: boolean }): string {
  const generate = panel.generate
    ? `<form id="generate-form" class="ai-form">
    <h3>Generate</h3>
    <div class="field">
      <label for="gen-prompt">Prompt</label>
      <textarea id="gen-prompt" name="prompt" required maxlength="${PROMPT_MAX}" rows="2" placeholder="a lighthouse at dusk"></textarea>
    </div>
    <div class="field">
      <label for="gen-model">Model</label>
      <select id="gen-model" name="model">
${PANEL_MODELS.map((model) => `        <option value="${model}">${model}</option>`).join('\n')}
      </select>
    </div>
    <div class="field">
      <label for="gen-format">Format</label>
      <select id="gen-format" name="output_format">
${PAGE_OUTPUT_FORMATS.map((format) => `        <option value="${format}">${FORMAT_LABELS[format]}</option>`).join('\n')}
      </select>
    </div>
    <button type="submit">Generate</button>
  </form>`
    : '<p id="generate-note" class="note">Image generation is not set up on this server (it needs an AI provider). Editing by instruction works without one.</p>';
  return `<section id="ai-panel" class="ai-panel" aria-labelledby="ai-title">
  <h2 id="ai-title">Edit and generate (Pro)</h2>
  <p class="lead">Each counts as one request of your daily quota, like the API's /edit and /generate.</p>
  <form id="edit-form" class="ai-form">
    <h3>Edit</h3>
    <div class="field">
      <label for="edit-file">Image</label>
      <input type="file" id="edit-file" name="file" required accept="${ACCEPT}">
    </div>
    <div class="field">
      <label for="edit-instruction">Instruction</label>
      <input type="text" id="edit-instruction" name="instruction" required maxlength="${INSTRUCTION_MAX}" placeholder="make it 800 wide, black and white, convert to webp">
    </div>
    <button type="submit">Edit</button>
  </form>
  ${generate}
  <p id="ai-status" class="status" role="status" aria-live="polite"></p>
  <div id="ai-result" class="ai-result" hidden>
    <img id="ai-image" alt="The result">
    <p><a id="ai-download" download>Download</a> <span id="ai-facts"></span></p>
    <p id="ai-operations"></p>
    <p id="ai-unrecognized"></p>
  </div>
</section>`;
}

/** The page's main content; the site layout (web/layout.ts) wraps it. */
export function compressorContent(view: AllowanceView, config: Config): string {
  const maxMiB = Math.floor(config.maxUploadBytes / 1024 / 1024);
  const limitText = maxMiB >= 1 ? `up to ${maxMiB} MB each` : `up to ${config.maxUploadBytes} bytes each`;
  // The bounds the server validates with, from the contract's option table.
  const { quality, max_dimension: dimension } = COMPRESS_OPTIONS;
  return `<section class="compressor" aria-labelledby="compressor-title">
<h1 id="compressor-title">Compress images</h1>
<p class="lead">Drop JPEG, PNG, WebP, AVIF, GIF or HEIC images (${limitText}). They are compressed on this server and never kept. <em>Keep</em> leaves each format as it is (HEIC becomes JPEG).</p>
<form id="compress-form" class="compress-form">
  <fieldset class="compress-options">
    <legend>Options</legend>
    <div class="field">
      <label for="opt-format">Format</label>
      <select id="opt-format" name="output_format">
        <option value="" selected>Keep</option>
${PAGE_OUTPUT_FORMATS.map((format) => `        <option value="${format}">${FORMAT_LABELS[format]}</option>`).join('\n')}
      </select>
    </div>
    <div class="field field-inline">
      <input type="checkbox" id="opt-auto" name="auto_quality" checked>
      <label for="opt-auto">Automatic quality</label>
    </div>
    <div class="field">
      <label for="opt-quality">Quality (${quality.min}–${quality.max})</label>
      <input type="number" id="opt-quality" name="quality" min="${quality.min}" max="${quality.max}" step="1" value="${quality.default}" inputmode="numeric">
    </div>
    <div class="field">
      <label for="opt-max">Maximum width or height (px)</label>
      <input type="number" id="opt-max" name="max_dimension" min="${dimension.min}" max="${dimension.max}" step="1" placeholder="keep size" inputmode="numeric">
    </div>
  </fieldset>
  <div id="dropzone" class="dropzone">
    <input type="file" id="file-input" class="visually-hidden" multiple accept="${ACCEPT}" aria-describedby="dropzone-help">
    <label for="file-input" class="dropzone-label">
      <strong>Drop images here</strong>
      <span class="button-like">or choose files</span>
      <small id="dropzone-help">Several at once; JPEG, PNG, WebP, AVIF, GIF, HEIC. Options apply to the images you add next.</small>
    </label>
  </div>
</form>
${allowanceHtml(view, config.proDailyLimit)}
<p id="status" class="status" role="status" aria-live="polite"></p>
<div class="results-actions">
  <button type="button" id="download-all" disabled>Download all (.zip)</button>
  <button type="button" id="clear-results" class="secondary" disabled>Clear results</button>
</div>
<ol id="results" class="results" aria-label="Compressed images"></ol>
</section>${view.aiPanel ? `\n${aiPanelHtml(view.aiPanel)}` : ''}`;
}

export function compressorRouter(deps: CompressorDeps): express.Router {
  const { engine, db, logger, config, uploadLimits } = deps;
  const clock = deps.now ?? (() => new Date());
  const router = express.Router();
  // fflate's ES module build for browsers, served from node_modules: no CDN, no build step.
  const fflate = readFileSync(
    join(dirname(createRequire(import.meta.url).resolve('fflate/package.json')), 'esm', 'browser.js'),
  );
  let prunedBefore = '';

  /** Which allowance this request draws on: the account's Pro quota, or the visitor allowance. */
  const allowanceFor = async (req: Request, res: Response, now: Date) => {
    const account = accountOf(res);
    const plan = account ? planOf(account.plan, config) : undefined;
    const day = quotaDay(now);
    if (account && plan?.api) {
      return {
        kind: 'account' as const,
        day,
        limit: plan.dailyRequests,
        owner: account.id,
        used: () => db.usageOn(account.id, day),
        consume: () => db.consumeQuota(account.id, day, plan.dailyRequests),
        refund: () => db.refundQuota(account.id, day),
      };
    }
    // Free accounts count like visitors, by network: a new account per 20 images should gain nothing.
    // req.ip: the client as TRUST_PROXY lets express see it, not the proxy every visitor shares.
    const visitor = visitorKey(req.ip ?? req.socket.remoteAddress ?? '');
    return {
      kind: 'visitor' as const,
      day,
      limit: config.visitorDailyLimit,
      owner: `visitor:${visitor}`,
      used: () => db.visitorUsageOn(visitor, day),
      consume: async () => {
        if (prunedBefore !== day) {
          // Once a day per process: yesterday's visitor counts are never read again.
          prunedBefore = day;
          db.pruneVisitorUsage(day).catch((err) => logger.error({ err }, 'pruning visitor usage failed'));
        }
        return db.consumeVisitorQuota(visitor, day, config.visitorDailyLimit);
      },
      refund: () => db.refundVisitorQuota(visitor, day),
    };
  };

  router.get('/', async (req, res) => {
    const now = clock();
    const allowance = await allowanceFor(req, res, now);
    const view: AllowanceView = {
      kind: allowance.kind,
      limit: allowance.limit,
      used: await allowance.used(),
      resetsInSeconds: secondsUntilReset(now),
      signedIn: accountOf(res) !== undefined,
      ...(allowance.kind === 'account' ? { aiPanel: { generate: deps.ai !== undefined } } : {}),
    };
    sendPage(
      res,
      page({
        title: 'Compress images',
        current: 'compressor',
        session: sessionOf(res),
        body: compressorContent(view, config),
        styles: ['/static/compressor.css'],
        scripts: view.aiPanel ? ['/static/compressor.js', '/static/ai-panel.js'] : ['/static/compressor.js'],
        // Signed out, this also sets the cmp_csrf cookie the token is bound to.
        csrfToken: await csrfToken(req, res),
      }),
    );
  });

  /**
   * Count one request against the allowance (or refuse: no allowance, or used up), with the
   * RateLimit headers; a 5xx answer gives it back, as on the API.
   */
  const charge = async (allowance: Awaited<ReturnType<typeof allowanceFor>>, now: Date, res: Response) => {
    const reset = secondsUntilReset(now);
    const resetsAt = nextReset(now).toISOString();
    res.setHeader('X-Allowance', allowance.kind);
    if (allowance.limit < 1) {
      throw new CompressoError(
        'PLAN_REQUIRED',
        'This server gives no free allowance: sign in with an account on the Pro plan to compress images here.',
        { details: { required: 'pro' } },
      );
    }
    const quota = await allowance.consume();
    res.setHeader('RateLimit-Limit', String(allowance.limit));
    res.setHeader('RateLimit-Remaining', String(Math.max(0, allowance.limit - quota.used)));
    res.setHeader('RateLimit-Reset', String(reset));
    if (!quota.allowed) {
      res.setHeader('Retry-After', String(reset));
      throw new CompressoError(
        'QUOTA_EXCEEDED',
        allowance.kind === 'account'
          ? `The daily quota of ${allowance.limit} requests (shared with your API keys) is used up; it resets at 00:00 UTC (${resetsAt}).`
          : `The free allowance of ${allowance.limit} images a day is used up; it resets at 00:00 UTC (${resetsAt}). Sign up and activate Pro for ${config.proDailyLimit} a day.`,
        { details: { limit: allowance.limit, used: quota.used, resets_at: resetsAt } },
      );
    }
    res.on('finish', () => {
      // Our failure is not the visitor's: a 5xx gives the image back, as it does on the API.
      if (res.statusCode >= 500) {
        allowance.refund().catch((err) => logger.error({ err }, 'allowance refund failed'));
      }
    });
  };

  router.post('/web/compress', sameSiteOnly, verifyCsrf, async (req, res) => {
    const now = clock();
    const allowance = await allowanceFor(req, res, now);
    await charge(allowance, now, res);
    const { upload, output } = await compressUpload(engine, req, res, {
      ...uploadLimits,
      owner: allowance.owner,
    });
    sendCompressed(res, upload, output);
  });

  const work = { engine, config, provider: deps.ai };
  /** The Pro panel's routes: an account whose plan has the API, counted on its quota like the API. */
  const proOnly = async (req: Request, res: Response) => {
    const now = clock();
    const allowance = await allowanceFor(req, res, now);
    if (allowance.kind !== 'account')
      throw new CompressoError(
        'PLAN_REQUIRED',
        accountOf(res)
          ? 'Editing and generating on this page are part of the Pro plan: activate Pro in the account area.'
          : 'Editing and generating on this page are part of the Pro plan: sign in with a Pro account.',
        { details: { required: 'pro' } },
      );
    await charge(allowance, now, res);
    return allowance;
  };

  router.post('/web/edit', sameSiteOnly, verifyCsrf, async (req, res) => {
    const allowance = await proOnly(req, res);
    const upload = await readImageUpload(req, res, { ...uploadLimits, owner: allowance.owner });
    await editImage(work, upload, res);
  });

  router.post(
    '/web/generate',
    sameSiteOnly,
    verifyCsrf,
    async (req, res, next) => {
      await proOnly(req, res);
      next();
    },
    express.json({ limit: '64kb', strict: true }),
    async (req, res) => {
      await generateImage(work, req.body ?? {}, res);
    },
  );

  router.all(['/web/compress', '/web/edit', '/web/generate'], (req, res) => {
    res.setHeader('Allow', 'POST');
    sendError(
      res,
      req,
      new CompressoError('METHOD_NOT_ALLOWED', `${req.method} is not allowed on ${req.path}; use POST.`),
    );
  });

  const staticDir = join(import.meta.dirname, 'static');
  for (const file of ['compressor.js', 'compressor.css', 'ai-panel.js']) {
    router.get(`/static/${file}`, (_req, res) => {
      res.setHeader('Cache-Control', 'no-cache');
      res.sendFile(join(staticDir, file));
    });
  }

  // Browsers ask for it on every page; "no icon" is a cheaper answer than a 404 in every console.
  router.get('/favicon.ico', (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=86400');
    res.status(204).end();
  });

  router.get('/static/vendor/fflate.js', (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=86400');
    res.type('text/javascript').send(fflate);
  });

  return router;
}
