// The Compresso dashboard in the Shopify admin: one script for every screen, no build step.
// Every call to the app carries App Bridge's session token (`shopify.idToken()`) as a bearer token;
// images for the before/after comparison are fetched the same way and shown through object URLs.

const main = document.getElementById('main');
const toastBox = document.getElementById('toast');
const SCREENS = ['/', '/bulk', '/alt-text', '/images', '/settings'];
const PLACEHOLDERS = [
  ['{product_title}', 'the product’s title'],
  ['{vendor}', 'the vendor'],
  ['{product_type}', 'the product type'],
  ['{variant}', 'the variant shown in the image'],
  ['{shop_name}', 'your shop’s name'],
  ['{n}', 'the image’s position (1, 2, 3 …)'],
];

/** Timers and object URLs of the screen on display, dropped when another screen is shown. */
const cleanups = [];
let generation = 0;

// ------------------------------------------------------------------ small DOM helpers

/** An element with attributes (`on…` are listeners) and children (strings become text, never HTML). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
    else if (name === 'className') el.className = value;
    else if (value === true) el.setAttribute(name, '');
    else el.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const card = (...children) => h('section', { className: 'card' }, ...children);
const banner = (tone, title, ...text) =>
  h(
    'div',
    { className: `banner ${tone}`, role: tone === 'critical' ? 'alert' : 'status' },
    title ? h('h2', {}, title) : null,
    ...text.map((t) => (t instanceof Node ? t : h('p', {}, t))),
  );
const badge = (tone, text) => h('span', { className: `badge ${tone}` }, text);

function toast(message) {
  // In the Shopify admin, App Bridge shows it as the admin's own toast; ours keeps the text for the page.
  const admin = typeof window.shopify?.toast?.show === 'function';
  if (admin) window.shopify.toast.show(message);
  toastBox.textContent = message;
  toastBox.hidden = admin;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => {
    toastBox.hidden = true;
  }, 5000);
}

function bytes(n) {
  if (n === null || n === undefined) return '—';
  const abs = Math.abs(n);
  if (abs < 1024) return `${n} B`;
  if (abs < 1024 * 1024) return `${(n / 1024).toFixed(abs < 10 * 1024 ? 1 : 0)} KB`;
  if (abs < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(abs < 10 * 1024 ** 2 ? 2 : 1)} MB`;
  return `${(n / 1024 ** 3).toFixed(2)} GB`;
}
const count = (n) => Number(n ?? 0).toLocaleString('en-US');
const when = (iso) =>
  iso ? new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' }) : '—';
function duration(seconds) {
  if (seconds === null || seconds === undefined) return 'working it out…';
  if (seconds < 60) return 'less than a minute';
  const m = Math.round(seconds / 60);
  if (m < 60) return `about ${m} minute${m === 1 ? '' : 's'}`;
  const hours = Math.floor(m / 60);
  return `about ${hours} h ${m % 60} min`;
}

// ------------------------------------------------------------------ talking to the app

/** App Bridge's session token; without App Bridge the page was not opened from the Shopify admin. */
async function sessionToken() {
  if (!window.shopify || typeof window.shopify.idToken !== 'function') {
    throw new Problem(
      'NO_APP_BRIDGE',
      'Open this page from Apps in your Shopify admin: it needs Shopify’s App Bridge to know which shop you are.',
    );
  }
  return window.shopify.idToken();
}

class Problem extends Error {
  constructor(code, message, details) {
    super(message);
    this.code = code;
    this.details = details;
  }
}

/**
 * A call to the app's JSON API. Resolves the body; rejects with a Problem whose message says what to
 * do. A route this version of the app does not have yet is `UNAVAILABLE` (the screen says so).
 */
async function api(path, { method = 'GET', body } = {}) {
  const token = await sessionToken();
  let response;
  try {
    response = await fetch(path, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        accept: 'application/json',
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch {
    throw new Problem('OFFLINE', 'The app could not be reached. Check your connection, then try again.');
  }
  const type = response.headers.get('content-type') ?? '';
  const data = type.includes('application/json') ? await response.json().catch(() => null) : null;
  if (response.ok) return data ?? {};
  if ((response.status === 404 || response.status === 405) && !data?.error) {
    throw new Problem('UNAVAILABLE', 'This part of the app is not available in this version yet.');
  }
  if (response.status === 401 || response.status === 403) {
    throw new Problem(
      'SESSION',
      'Your session with the app has expired. Reload the page, or open the app again from Apps in your Shopify admin.',
    );
  }
  const error = data?.error ?? {};
  if (response.status >= 500 && !error.message) {
    throw new Problem(
      'SERVER',
      'Something went wrong in the app. Try again in a minute; if it keeps happening, contact support.',
    );
  }
  throw new Problem(
    error.code ?? `HTTP_${response.status}`,
    error.message ?? `The app answered ${response.status}.`,
    error.details,
  );
}

/** An image from the app (bearer token), as an object URL the screen revokes when it goes. */
async function imageUrl(path) {
  const token = await sessionToken();
  const response = await fetch(path, { headers: { authorization: `Bearer ${token}` } });
  if (!response.ok) {
    const data = await response.json().catch(() => null);
    throw new Problem(
      data?.error?.code ?? `HTTP_${response.status}`,
      data?.error?.message ?? 'The image could not be loaded. Try again.',
    );
  }
  const blob = await response.blob();
  const url = URL.createObjectURL(blob);
  cleanups.push(() => URL.revokeObjectURL(url));
  return { url, size: blob.size };
}

/** Wait for a queued job (restore, alt text …) to finish; its final state. */
async function waitForJob(jobId, mine) {
  for (let wait = 300; ; wait = Math.min(wait * 1.5, 2000)) {
    const job = await api(`/api/admin/jobs/${encodeURIComponent(jobId)}`);
    if (job.state === 'completed' || job.state === 'failed') return job;
    if (mine !== generation) return job;
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

function problemBanner(error, what) {
  if (error instanceof Problem && error.code === 'UNAVAILABLE') {
    return banner('info', `${what} is not available yet`, error.message, 'The other screens work as usual.');
  }
  return banner('critical', `${what}: something went wrong`, error.message);
}

/** Runs an action of a button: disables it meanwhile, reports a failure next to the screen's title. */
async function act(button, work) {
  const label = button.textContent;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  try {
    await work();
  } catch (error) {
    showError(error);
  } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
    button.textContent = label;
  }
}

function showError(error) {
  const box = document.getElementById('errors');
  const node = banner(
    'critical',
    null,
    error instanceof Problem ? error.message : `Something went wrong: ${error.message}. Try again.`,
    ...(Array.isArray(error.details)
      ? [
          h(
            'ul',
            {},
            error.details.map((d) => h('li', {}, `${fieldName(d.field)}: ${d.expected}`)),
          ),
        ]
      : []),
  );
  if (box) box.replaceChildren(node);
  else main.prepend(node);
}

function header(title, lead, ...extra) {
  return [h('h1', {}, title), h('p', { className: 'lead' }, lead), ...extra, h('div', { id: 'errors' })];
}

// ------------------------------------------------------------------ navigation

function screenOf(pathname) {
  return SCREENS.includes(pathname) ? pathname : '/';
}

function navigate(path) {
  history.pushState(null, '', path + location.search);
  show();
}

function linkTo(path, label, className = 'button') {
  return h(
    'a',
    {
      className,
      href: path,
      onclick: (event) => {
        event.preventDefault();
        navigate(path);
      },
    },
    label,
  );
}

async function show() {
  for (const cleanup of cleanups.splice(0)) cleanup();
  const mine = ++generation;
  const path = screenOf(location.pathname);
  for (const tab of document.querySelectorAll('.tab')) {
    if (tab.dataset.screen === path) tab.setAttribute('aria-current', 'page');
    else tab.removeAttribute('aria-current');
  }
  main.replaceChildren(h('p', { className: 'muted' }, 'Loading…'));
  const render = {
    '/': overview,
    '/bulk': bulk,
    '/alt-text': altText,
    '/images': images,
    '/settings': settings,
  }[path];
  try {
    const nodes = await render(mine);
    if (mine === generation) main.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined));
  } catch (error) {
    if (mine === generation)
      main.replaceChildren(...header('Compresso', ''), problemBanner(error, 'This screen'));
  }
  document.body.dataset.screen = path;
  document.body.dataset.ready = String(mine);
}

// Inside the Shopify admin, App Bridge shows <ui-nav-menu> as the app's navigation; the page's own
// tabs are for anywhere else (and for this page opened on its own).
if (window.shopify?.environment?.embedded === true) document.querySelector('.tabs').hidden = true;
for (const tab of document.querySelectorAll('.tab')) {
  tab.addEventListener('click', (event) => {
    event.preventDefault();
    navigate(tab.getAttribute('href'));
  });
}
window.addEventListener('popstate', show);

// ------------------------------------------------------------------ Overview

async function overview() {
  const o = await api('/api/admin/overview');
  const quota = o.quota ?? {};
  const quotaCard = quota.available
    ? card(
        h('h2', {}, 'Quota today'),
        h('p', { className: 'metric' }, `${count(quota.used)} of ${count(quota.limit)}`),
        h(
          'div',
          {
            className: 'progress',
            role: 'progressbar',
            'aria-label': 'Quota used today',
            'aria-valuemin': 0,
            'aria-valuemax': quota.limit ?? 0,
            'aria-valuenow': quota.used ?? 0,
          },
          h('span', { style: `width:${quota.limit ? Math.min(100, (100 * quota.used) / quota.limit) : 0}%` }),
        ),
        h(
          'p',
          { className: 'muted' },
          quota.remaining === 0
            ? `Used up for today. Compression continues by itself after the reset at ${when(quota.resets_at)}.`
            : `Each image compressed counts as one. Resets at ${when(quota.resets_at)}.`,
        ),
      )
    : card(
        h('h2', {}, 'Quota today'),
        h('p', { className: 'metric' }, '—'),
        h('p', { className: 'muted' }, quota.message ?? 'Not known right now.'),
      );
  const waiting = o.images?.new + o.images?.backed_up + o.images?.replacing;
  return [
    ...header(
      'Overview',
      'Compresso makes the product photos stored in your shop smaller, so pages load faster — without changing how they look. Every original is kept and can be put back.',
    ),
    !o.connected
      ? banner(
          'warning',
          'Not connected to Compresso',
          'Images cannot be compressed until a Compresso key is connected.',
          linkTo('/settings', 'Connect a key in Settings'),
        )
      : null,
    o.waiting?.count
      ? banner(
          'info',
          `${count(o.waiting.count)} ${o.waiting.count === 1 ? 'image waits' : 'images wait'} for the quota to reset`,
          `Today's Compresso quota is used up. ${o.waiting.count === 1 ? 'It is' : 'They are'} compressed by themselves after the reset at ${when(o.waiting.until)}; nothing is lost and nothing needs doing.`,
        )
      : null,
    h(
      'div',
      { className: 'grid' },
      card(
        h('h2', {}, 'Images optimized'),
        h('p', { className: 'metric', 'data-metric': 'images_optimized' }, count(o.images_optimized)),
        h(
          'p',
          { className: 'muted' },
          `${count(o.images?.skipped)} already small enough, ${count(o.images?.failed)} could not be done${waiting ? `, ${count(waiting)} in progress` : ''}.`,
        ),
      ),
      card(
        h('h2', {}, 'Space saved'),
        h('p', { className: 'metric', 'data-metric': 'bytes_saved' }, bytes(o.bytes_saved)),
        h(
          'p',
          { className: 'muted', 'data-metric': 'percent_saved' },
          `${o.percent_saved} % smaller: ${bytes(o.bytes_before)} before, ${bytes(o.bytes_after)} now.`,
        ),
      ),
      quotaCard,
    ),
    card(
      h('h2', {}, 'Automatic compression'),
      h(
        'p',
        {},
        o.auto_compress ? badge('success', 'On') : badge('attention', 'Off'),
        ' ',
        o.auto_compress
          ? 'New and changed product images are compressed as soon as you save the product.'
          : 'New product images are left as they are. Turn it on in Settings.',
      ),
      h(
        'div',
        { className: 'actions' },
        linkTo('/bulk', 'Optimize all existing images', 'button primary'),
        linkTo('/alt-text', 'Fix missing alt text'),
        linkTo('/images', 'See each image'),
        linkTo('/settings', 'Settings'),
      ),
    ),
    h(
      'p',
      { className: 'muted' },
      'Good to know: Shopify already serves resized WebP/AVIF copies to shoppers. Compresso makes the stored original smaller and correctly sized, which those copies are made from.',
    ),
  ];
}

// ------------------------------------------------------------------ Bulk

/** What a failure's code means for the merchant; the technical reason is shown under it. */
const FAILURE_WORDS = {
  INVALID: 'Shopify sent something that is not a usable image. Check the image on the product, then Retry.',
  REJECTED: 'Shopify did not accept the smaller file, so the original stays. Retry later.',
  NOT_FOUND: 'The image is no longer in Shopify (deleted?). Nothing to do.',
  UNAVAILABLE: 'Shopify or Compresso could not be reached. Retry in a few minutes.',
  THROTTLED: 'Shopify asked the app to slow down. Retry in a few minutes.',
  UNAUTHORIZED:
    'Shopify refused the app’s access. Open the app again from Apps in your Shopify admin, then Retry.',
  UNSUPPORTED_IMAGE: 'Compresso cannot compress this kind of file. Nothing to do.',
  FILE_TOO_LARGE: 'The file is larger than Compresso accepts. Nothing to do.',
  QUOTA_EXCEEDED: 'Today’s quota was used up. Retry after it resets.',
};

const DONE = {
  start: 'Started. You can leave this page: the work goes on in the background.',
  pause: 'Paused. Resume whenever you like.',
  resume: 'Resumed.',
  cancel: 'Stopped. Images already compressed stay compressed.',
};

const RUN_STATES = {
  running: ['info', 'Running'],
  paused: ['attention', 'Paused'],
  waiting_quota: ['attention', 'Waiting for quota'],
  cancelled: ['', 'Cancelled'],
  completed: ['success', 'Completed'],
  failed: ['critical', 'Stopped'],
};

async function bulk(mine) {
  let data;
  try {
    data = await api('/api/admin/bulk');
  } catch (error) {
    return [
      ...header(
        'Optimize all images',
        'Compress every product image already in your shop, in the background.',
      ),
      problemBanner(error, 'Optimizing the whole catalog'),
    ];
  }
  const body = h('div', {});
  const draw = (d) => {
    body.dataset.state = d.run?.state ?? 'none';
    body.replaceChildren(...bulkBody(d, mine, refresh));
  };
  async function refresh() {
    const next = await api('/api/admin/bulk');
    if (mine === generation) draw(next);
    return next;
  }
  draw(data);
  // Live progress: read again every 2 s while the run is going.
  const timer = setInterval(async () => {
    const state = body.dataset.state;
    if (state !== 'running' && state !== 'waiting_quota') return;
    try {
      await refresh();
    } catch (error) {
      showError(error);
    }
  }, 2000);
  cleanups.push(() => clearInterval(timer));
  return [
    ...header(
      'Optimize all images',
      'Compress every product image already in your shop, in the background. You can leave this page: the work goes on, and you can pause or stop it at any time. Images are never compressed twice, and every original is kept.',
    ),
    body,
  ];
}

function bulkBody(data, _mine, refresh) {
  const run = data.run;
  const nodes = [];
  const control = (label, path, className = '') =>
    h(
      'button',
      {
        className,
        type: 'button',
        'data-action': path,
        onclick: (event) =>
          act(event.currentTarget, async () => {
            await api(`/api/admin/bulk/${path}`, { method: 'POST', body: {} });
            await refresh();
            toast(DONE[path] ?? 'Done.');
          }),
      },
      label,
    );
  const active = run && ['running', 'paused', 'waiting_quota'].includes(run.state);
  if (!active) nodes.push(estimateCard());
  if (run) {
    const [tone, label] = RUN_STATES[run.state] ?? ['', run.state];
    const pct = run.total ? Math.min(100, Math.round((100 * run.done) / run.total)) : 0;
    const cancelBox = h('div', {});
    nodes.push(
      card(
        h(
          'div',
          { className: 'inline' },
          h('h2', { style: 'margin:0' }, active ? 'Current run' : 'Last run'),
          badge(tone, label),
        ),
        run.state === 'waiting_quota'
          ? banner(
              'warning',
              null,
              `Today’s Compresso quota is used up. The run continues by itself at ${when(run.waiting_until)}; nothing needs doing.`,
            )
          : null,
        h(
          'div',
          {
            className: 'progress',
            role: 'progressbar',
            'aria-label': 'Images done',
            'aria-valuemin': 0,
            'aria-valuemax': run.total ?? 0,
            'aria-valuenow': run.done ?? 0,
          },
          h('span', { style: `width:${pct}%` }),
        ),
        h(
          'p',
          { 'data-metric': 'bulk_progress' },
          run.total
            ? `${count(run.done)} of ${count(run.total)} images (${pct} %)`
            : `${count(run.done)} images so far`,
        ),
        h(
          'div',
          { className: 'stats' },
          h('div', {}, h('strong', {}, bytes(run.bytes_saved)), 'saved'),
          h('div', {}, h('strong', {}, count(run.optimized)), 'compressed'),
          h('div', {}, h('strong', {}, count(run.skipped)), 'already done or small enough'),
          h('div', {}, h('strong', {}, count(run.failed)), 'failed'),
          active
            ? h(
                'div',
                {},
                h(
                  'strong',
                  {},
                  run.images_per_minute ? `${Math.round(run.images_per_minute * 10) / 10}` : '—',
                ),
                'images a minute',
              )
            : null,
          active ? h('div', {}, h('strong', {}, duration(run.eta_seconds)), 'left') : null,
        ),
        h(
          'div',
          { className: 'actions' },
          run.state === 'running' || run.state === 'waiting_quota' ? control('Pause', 'pause') : null,
          run.state === 'paused' ? control('Resume', 'resume', 'primary') : null,
          active
            ? h(
                'button',
                {
                  type: 'button',
                  'data-action': 'ask-cancel',
                  onclick: () =>
                    cancelBox.replaceChildren(
                      h(
                        'div',
                        { className: 'confirm', role: 'alert' },
                        h(
                          'p',
                          {},
                          'Stop the run? Images already compressed stay compressed; the rest are left as they are. You can start again later.',
                        ),
                        h(
                          'div',
                          { className: 'actions' },
                          control('Stop the run', 'cancel', 'critical'),
                          h(
                            'button',
                            { type: 'button', onclick: () => cancelBox.replaceChildren() },
                            'Keep going',
                          ),
                        ),
                      ),
                    ),
                },
                'Cancel…',
              )
            : control(run.state === 'completed' ? 'Optimize new images' : 'Start again', 'start', 'primary'),
        ),
        cancelBox,
      ),
    );
  } else {
    nodes.push(
      card(
        h('h2', {}, 'Ready when you are'),
        h(
          'p',
          {},
          'Nothing has been run yet. Starting goes through every product image once; images already compressed are left alone.',
        ),
        h('div', { className: 'actions' }, control('Start optimizing all images', 'start', 'primary')),
      ),
    );
  }
  const failures = data.failures ?? [];
  if (failures.length) {
    nodes.push(
      card(
        h('h2', {}, `Images that could not be done (${count(failures.length)})`),
        h(
          'p',
          { className: 'muted' },
          'Their originals are untouched. Retry after fixing the reason, or leave them.',
        ),
        h(
          'div',
          { className: 'table-wrap' },
          h(
            'table',
            { className: 'responsive' },
            h(
              'thead',
              {},
              h('tr', {}, h('th', {}, 'Product'), h('th', {}, 'File'), h('th', {}, 'Why'), h('th', {}, '')),
            ),
            h(
              'tbody',
              {},
              failures.map((f) =>
                h(
                  'tr',
                  {},
                  h('td', { 'data-label': 'Product' }, f.product_title ?? '—'),
                  h('td', { 'data-label': 'File' }, f.filename ?? 'File name not known yet'),
                  h(
                    'td',
                    { 'data-label': 'Why' },
                    h(
                      'div',
                      {},
                      FAILURE_WORDS[f.code] ?? 'It could not be compressed.',
                      f.reason ? h('div', { className: 'help' }, `Details: ${f.reason}`) : null,
                    ),
                  ),
                  h(
                    'td',
                    {},
                    h(
                      'button',
                      {
                        type: 'button',
                        'data-action': 'retry',
                        onclick: (event) =>
                          act(event.currentTarget, async () => {
                            await api('/api/admin/bulk/retry', {
                              method: 'POST',
                              body: { asset_ids: [f.asset_id] },
                            });
                            await refresh();
                            toast('Retrying that image.');
                          }),
                      },
                      'Retry',
                    ),
                  ),
                ),
              ),
            ),
          ),
        ),
        h(
          'div',
          { className: 'actions' },
          h(
            'button',
            {
              type: 'button',
              'data-action': 'retry-all',
              onclick: (event) =>
                act(event.currentTarget, async () => {
                  await api('/api/admin/bulk/retry', { method: 'POST', body: {} });
                  await refresh();
                  toast('Retrying every failed image.');
                }),
            },
            'Retry all failed images',
          ),
        ),
      ),
    );
  }
  return nodes;
}

function estimateCard() {
  const out = h('div', { 'aria-live': 'polite' });
  return card(
    h('h2', {}, 'How much would it save?'),
    h(
      'p',
      { className: 'muted' },
      'A quick estimate from a sample of your images, before you start. It does not change anything.',
    ),
    out,
    h(
      'div',
      { className: 'actions' },
      h(
        'button',
        {
          type: 'button',
          'data-action': 'estimate',
          onclick: (event) =>
            act(event.currentTarget, async () => {
              out.replaceChildren(
                h('p', { className: 'muted' }, 'Estimating from a sample… this takes a few seconds.'),
              );
              const e = await api('/api/admin/bulk/estimate', { method: 'POST', body: {} });
              out.replaceChildren(
                h(
                  'p',
                  { 'data-metric': 'estimate' },
                  `About ${bytes(e.estimated_bytes_saved)} (${e.estimated_percent} %) could be saved on ${count(e.total_images)} images, judged from ${count(e.sampled)} of them.` +
                    (e.unreadable
                      ? ` ${count(e.unreadable)} sampled ${e.unreadable === 1 ? 'image' : 'images'} could not be read (Shopify did not send an image); a run will list ${e.unreadable === 1 ? 'it' : 'them'} under failures with the reason.`
                      : ''),
                ),
              );
            }),
        },
        'Estimate savings',
      ),
    ),
  );
}

// ------------------------------------------------------------------ Alt text

async function altText(mine) {
  const status = await api('/api/admin/status');
  let batches = null;
  let unavailable = null;
  try {
    batches = (await api('/api/admin/alt-text/batches')).batches ?? [];
  } catch (error) {
    unavailable = error;
  }
  const intro = header(
    'Alt text',
    'Alt text describes an image for shoppers who use screen readers, and helps search engines. Write it for all your product images at once from a template, look at the result first, and undo it if you change your mind.',
  );
  if (unavailable) return [...intro, problemBanner(unavailable, 'Writing alt text')];
  const settingsNow = status.settings ?? {};
  const form = h('form', { id: 'alt-form', onsubmit: (event) => event.preventDefault() });
  const template = h('input', {
    type: 'text',
    id: 'alt-template',
    name: 'template',
    maxlength: 512,
    value: settingsNow.alt_text_template ?? '{product_title} by {vendor}',
    'aria-describedby': 'alt-template-help',
  });
  const insert = (token) => {
    const start = template.selectionStart ?? template.value.length;
    const end = template.selectionEnd ?? start;
    template.value = template.value.slice(0, start) + token + template.value.slice(end);
    template.focus();
    template.setSelectionRange(start + token.length, start + token.length);
  };
  const mode = (value, label, help, checked) =>
    h(
      'label',
      { className: 'check' },
      h('input', { type: 'radio', name: 'mode', value, checked }),
      h('span', {}, label, h('div', { className: 'help' }, help)),
    );
  const scope = (value, label, help, checked) =>
    h(
      'label',
      { className: 'check' },
      h('input', { type: 'radio', name: 'scope', value, checked }),
      h('span', {}, label, h('div', { className: 'help' }, help)),
    );
  const preview = h(
    'div',
    { 'aria-live': 'polite' },
    h(
      'p',
      { className: 'muted' },
      'Press Preview to see what would be written on your first images. Nothing is changed until you press Apply.',
    ),
  );
  const values = () => {
    const data = new FormData(form);
    const m = data.get('mode');
    return { mode: m, scope: data.get('scope'), ...(m === 'template' ? { template: template.value } : {}) };
  };
  const batchesBox = h('div', {});
  const drawBatches = (list) => batchesBox.replaceChildren(...batchList(list, drawBatches));
  drawBatches(batches);
  form.append(
    h(
      'fieldset',
      { className: 'field', style: 'border:0;padding:0;margin:0 0 16px' },
      h('legend', { className: 'field-label' }, 'How to write it'),
      mode(
        'template',
        'From a template',
        'Your words, with the product’s details filled in.',
        settingsNow.alt_text_mode !== 'ai',
      ),
      mode(
        'ai',
        'Written by Compresso’s AI',
        'Describes what is in each photo, with the product’s name. Each image counts as one request of your quota.',
        settingsNow.alt_text_mode === 'ai',
      ),
    ),
    h(
      'div',
      { className: 'field' },
      h('label', { for: 'alt-template' }, 'Template'),
      template,
      h(
        'div',
        { className: 'help', id: 'alt-template-help' },
        'Click a placeholder to add it. At most 512 characters after filling in (Shopify’s limit).',
      ),
      h(
        'div',
        { className: 'chips' },
        PLACEHOLDERS.map(([token, meaning]) =>
          h(
            'button',
            {
              type: 'button',
              title: `Adds ${meaning}`,
              'aria-label': `Insert ${token}: ${meaning}`,
              onclick: () => insert(token),
            },
            token,
          ),
        ),
      ),
    ),
    h(
      'fieldset',
      { className: 'field', style: 'border:0;padding:0;margin:0 0 16px' },
      h('legend', { className: 'field-label' }, 'Which images'),
      scope('missing', 'Only images without alt text', 'Alt text you wrote yourself is kept.', true),
      scope('all', 'All images', 'Replaces existing alt text too (you can undo it below).', false),
    ),
    h(
      'div',
      { className: 'actions' },
      h(
        'button',
        {
          type: 'button',
          'data-action': 'preview',
          onclick: (event) =>
            act(event.currentTarget, async () => {
              const asked = values();
              const result = await api('/api/admin/alt-text/preview', {
                method: 'POST',
                body: { ...asked, limit: asked.mode === 'ai' ? 5 : 10 },
              });
              preview.replaceChildren(
                ...(result.message ? [banner('info', null, result.message)] : []),
                ...previewTable(result.items ?? []),
              );
            }),
        },
        'Preview',
      ),
      h(
        'button',
        {
          type: 'button',
          className: 'primary',
          'data-action': 'apply',
          onclick: (event) =>
            act(event.currentTarget, async () => {
              const started = await api('/api/admin/alt-text/apply', { method: 'POST', body: values() });
              toast('Writing alt text… you can leave this page.');
              if (started.job_id) {
                const job = await waitForJob(started.job_id, mine);
                if (job.state === 'failed')
                  throw new Problem(
                    'JOB_FAILED',
                    `Writing alt text stopped: ${job.error ?? 'unknown reason'}. Try again.`,
                  );
              }
              drawBatches((await api('/api/admin/alt-text/batches')).batches ?? []);
              toast('Alt text written.');
            }),
        },
        'Apply',
      ),
    ),
  );
  return [
    ...intro,
    card(h('h2', {}, 'Write alt text'), form),
    card(h('h2', {}, 'Preview'), preview),
    card(
      h('h2', {}, 'Earlier changes'),
      h(
        'p',
        { className: 'muted' },
        'Each Apply is kept here. Undo puts back the alt text the images had before it.',
      ),
      batchesBox,
    ),
  ];
}

function previewTable(items) {
  if (!items.length)
    return [
      h('p', {}, 'No images match: every image already has alt text. Choose “All images” to replace it.'),
    ];
  return [
    h(
      'div',
      { className: 'table-wrap' },
      h(
        'table',
        { className: 'responsive' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', {}, 'Product'),
            h('th', {}, 'File'),
            h('th', {}, 'Now'),
            h('th', {}, 'Would become'),
          ),
        ),
        h(
          'tbody',
          {},
          items.map((i) =>
            h(
              'tr',
              {},
              h('td', { 'data-label': 'Product' }, i.product_title ?? '—'),
              h('td', { 'data-label': 'File' }, i.filename ?? '—'),
              h('td', { 'data-label': 'Now' }, i.current || h('span', { className: 'muted' }, 'none')),
              h(
                'td',
                { 'data-label': 'Would become', 'data-proposed': '' },
                i.proposed ?? '',
                i.error ? h('div', { className: 'field-error' }, i.error) : null,
              ),
            ),
          ),
        ),
      ),
    ),
  ];
}

function batchList(list, redraw) {
  if (!list.length) return [h('p', { className: 'muted' }, 'No alt text written by the app yet.')];
  return [
    h(
      'div',
      { className: 'table-wrap' },
      h(
        'table',
        { className: 'responsive' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', {}, 'When'),
            h('th', {}, 'How'),
            h('th', {}, 'Images'),
            h('th', { className: 'num' }, 'Changed'),
            h('th', {}, ''),
          ),
        ),
        h(
          'tbody',
          {},
          list.map((b) =>
            h(
              'tr',
              {},
              h('td', { 'data-label': 'When' }, when(b.created_at)),
              h('td', { 'data-label': 'How' }, b.mode === 'ai' ? 'AI' : 'Template'),
              h(
                'td',
                { 'data-label': 'Images' },
                { all: 'All', missing: 'Without alt text', auto: 'New images (automatic)' }[b.scope] ??
                  b.scope,
                b.message ? h('div', { className: 'help' }, b.message) : null,
              ),
              h(
                'td',
                { className: 'num', 'data-label': 'Changed' },
                count(b.changed),
                b.failed ? h('div', { className: 'help' }, `${count(b.failed)} failed`) : null,
              ),
              h(
                'td',
                {},
                b.undone
                  ? badge('', 'Undone')
                  : b.state === 'queued' || b.state === 'running'
                    ? badge('attention', 'Working…')
                    : h(
                        'button',
                        {
                          type: 'button',
                          'data-action': 'undo',
                          onclick: (event) =>
                            act(event.currentTarget, async () => {
                              const r = await api('/api/admin/alt-text/undo', {
                                method: 'POST',
                                body: { batch_id: b.id },
                              });
                              if (r.job_id) await waitForJob(r.job_id, generation);
                              redraw((await api('/api/admin/alt-text/batches')).batches ?? []);
                              toast('The earlier alt text is back.');
                            }),
                        },
                        'Undo',
                      ),
              ),
            ),
          ),
        ),
      ),
    ),
  ];
}

// ------------------------------------------------------------------ Images

const IMAGE_STATES = {
  optimized: ['success', 'Optimized'],
  skipped: ['', 'Already small'],
  failed: ['critical', 'Failed'],
  restored: ['info', 'Original'],
  new: ['attention', 'In progress'],
  backed_up: ['attention', 'In progress'],
  replacing: ['attention', 'In progress'],
  not_seen: ['', 'Not yet'],
};

async function images(mine) {
  const tbody = h('tbody', {});
  const more = h('div', { className: 'actions' });
  const dialog = compareDialog();
  const confirmBox = h('div', {});
  const notesBox = h('div', {});
  let loaded = [];

  async function restore(ids, what, button) {
    await act(button, async () => {
      const started = await api('/api/admin/restore', {
        method: 'POST',
        body: ids === 'all' ? { all: true } : { asset_ids: ids },
      });
      toast(`Putting back ${what}… you can leave this page.`);
      const job = await waitForJob(started.job_id, mine);
      if (mine !== generation) return;
      if (job.state === 'failed')
        throw new Problem('JOB_FAILED', `Restoring stopped: ${job.error ?? 'unknown reason'}. Try again.`);
      const results = Array.isArray(job.result) ? job.result : [];
      const failed = results.filter((r) => r.outcome?.kind === 'failed');
      toast(
        failed.length
          ? `${failed.length} could not be restored: ${failed[0].outcome.error}`
          : `Restored ${what}.`,
      );
      if (mine === generation) await reload();
    });
  }

  function rows(items) {
    const out = [];
    let product = null;
    for (const item of items) {
      if (item.product_id !== product) {
        product = item.product_id;
        const own = items.filter(
          (i) => i.product_id === product && i.has_original && i.state === 'optimized',
        );
        out.push(
          h(
            'tr',
            { className: 'group' },
            h(
              'td',
              { colspan: 6 },
              h(
                'div',
                { className: 'inline', style: 'justify-content:space-between' },
                h('span', {}, item.product_title),
                own.length
                  ? h(
                      'button',
                      {
                        type: 'button',
                        className: 'plain',
                        'data-action': 'restore-product',
                        onclick: (event) =>
                          restore(
                            own.map((i) => i.asset_id),
                            `the originals of “${item.product_title}”`,
                            event.currentTarget,
                          ),
                      },
                      'Restore this product’s originals',
                    )
                  : null,
              ),
            ),
          ),
        );
      }
      const [tone, label] = IMAGE_STATES[item.state] ?? ['', item.state];
      out.push(
        h(
          'tr',
          { 'data-asset': item.asset_id },
          h(
            'td',
            { 'data-label': 'Image' },
            item.thumbnail_url
              ? h('img', {
                  className: 'thumb',
                  src: item.thumbnail_url,
                  alt: item.alt ?? '',
                  loading: 'lazy',
                })
              : null,
          ),
          h(
            'td',
            { 'data-label': 'File' },
            item.filename,
            item.reason && item.state !== 'optimized' ? h('div', { className: 'help' }, item.reason) : null,
          ),
          h('td', { 'data-label': 'Status' }, badge(tone, label)),
          h(
            'td',
            { className: 'num', 'data-label': 'Size' },
            item.state === 'optimized'
              ? `${bytes(item.bytes_before)} → ${bytes(item.bytes_now)}`
              : bytes(item.bytes_now),
          ),
          h(
            'td',
            { className: 'num', 'data-label': 'Saved' },
            item.state === 'optimized' ? `${bytes(item.bytes_saved)} (${item.percent_saved} %)` : '—',
          ),
          h(
            'td',
            { 'data-label': '' },
            h(
              'div',
              { className: 'inline', style: 'justify-content:flex-end' },
              item.has_original
                ? h(
                    'button',
                    { type: 'button', 'data-action': 'compare', onclick: () => dialog.open(item) },
                    'Compare',
                  )
                : null,
              item.has_original && item.state === 'optimized'
                ? h(
                    'button',
                    {
                      type: 'button',
                      'data-action': 'restore',
                      onclick: (event) =>
                        restore([item.asset_id], `the original of ${item.filename}`, event.currentTarget),
                    },
                    'Restore',
                  )
                : null,
            ),
          ),
        ),
      );
    }
    return out;
  }

  async function page(cursor) {
    const data = await api(`/api/admin/images${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ''}`);
    loaded = cursor ? loaded.concat(data.items) : data.items;
    if (data.notes?.length) notesBox.append(...data.notes.map((note) => h('p', { className: 'help' }, note)));
    tbody.replaceChildren(...rows(loaded));
    if (!loaded.length)
      tbody.replaceChildren(h('tr', {}, h('td', { colspan: 6 }, 'Your shop has no product images yet.')));
    more.replaceChildren(
      data.next_cursor
        ? h(
            'button',
            {
              type: 'button',
              'data-action': 'more',
              onclick: (event) => act(event.currentTarget, () => page(data.next_cursor)),
            },
            'Show more products',
          )
        : h('span', { className: 'muted' }, `${count(loaded.length)} images shown — that is all.`),
    );
  }
  const reload = () => page(null);
  await page(null);

  return [
    ...header(
      'Images',
      'Each product image, what it weighed before and what it weighs now. Compare shows the original next to the compressed image. Restore puts the original back exactly as it was (it will not be compressed again).',
    ),
    card(
      h(
        'div',
        { className: 'table-wrap' },
        h(
          'table',
          { className: 'responsive', 'aria-label': 'Product images' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', {}, 'Image'),
              h('th', {}, 'File'),
              h('th', {}, 'Status'),
              h('th', { className: 'num' }, 'Size'),
              h('th', { className: 'num' }, 'Saved'),
              h('th', {}, ''),
            ),
          ),
          tbody,
        ),
      ),
      notesBox,
      more,
    ),
    card(
      h('h2', {}, 'Restore every image'),
      h(
        'p',
        { className: 'muted' },
        'Puts back the original of every image the app compressed, in the whole shop. Automatic compression will not touch them again.',
      ),
      h(
        'div',
        { className: 'actions' },
        h(
          'button',
          {
            type: 'button',
            'data-action': 'ask-restore-all',
            onclick: () =>
              confirmBox.replaceChildren(
                h(
                  'div',
                  { className: 'confirm', role: 'alert' },
                  h('p', {}, 'Put back every original in the shop? Your images will be as large as before.'),
                  h(
                    'div',
                    { className: 'actions' },
                    h(
                      'button',
                      {
                        type: 'button',
                        className: 'critical',
                        'data-action': 'restore-all',
                        onclick: (event) => restore('all', 'every original', event.currentTarget),
                      },
                      'Restore all originals',
                    ),
                    h(
                      'button',
                      { type: 'button', onclick: () => confirmBox.replaceChildren() },
                      'Keep them compressed',
                    ),
                  ),
                ),
              ),
          },
          'Restore all…',
        ),
      ),
      confirmBox,
    ),
    dialog.element,
  ];
}

function compareDialog() {
  const body = h('div', { className: 'dialog-body' });
  const title = h('h2', { id: 'compare-title', style: 'margin:0' }, 'Before and after');
  const element = h(
    'dialog',
    { 'aria-labelledby': 'compare-title', id: 'compare' },
    h(
      'div',
      { className: 'dialog-head' },
      title,
      h('button', { type: 'button', 'data-action': 'close', onclick: () => element.close() }, 'Close'),
    ),
    body,
  );
  const urls = [];
  element.addEventListener('close', () => {
    for (const url of urls.splice(0)) URL.revokeObjectURL(url);
    body.replaceChildren();
  });
  cleanups.push(() => element.open && element.close());
  return {
    element,
    async open(item) {
      title.textContent = `${item.product_title}: ${item.filename}`;
      body.replaceChildren(h('p', { className: 'muted' }, 'Loading both images…'));
      element.showModal();
      const n = item.asset_id.split('/').pop();
      try {
        const [before, after] = await Promise.all([
          imageUrl(`/api/admin/images/${n}/original`),
          imageUrl(`/api/admin/images/${n}/current`),
        ]);
        urls.push(before.url, after.url);
        const saved = before.size - after.size;
        body.replaceChildren(
          h(
            'div',
            { className: 'compare' },
            h(
              'figure',
              {},
              h('img', { src: before.url, alt: `Original of ${item.filename}`, 'data-side': 'original' }),
              h('figcaption', {}, h('strong', {}, 'Original'), ` — ${bytes(before.size)}`),
            ),
            h(
              'figure',
              {},
              h('img', {
                src: after.url,
                alt: `What your shop serves now: ${item.filename}`,
                'data-side': 'current',
              }),
              h(
                'figcaption',
                {},
                h('strong', {}, 'In your shop now'),
                ` — ${bytes(after.size)}${saved > 0 ? `, ${bytes(saved)} smaller` : ''}`,
              ),
            ),
          ),
        );
      } catch (error) {
        body.replaceChildren(banner('critical', null, error.message));
      }
    },
  };
}

// ------------------------------------------------------------------ Settings

async function settings() {
  const status = await api('/api/admin/status');
  const s = status.settings ?? {};
  const errors = {};
  const fieldError = (name) => {
    errors[name] = h('div', { className: 'field-error', id: `err-${name}`, role: 'alert' });
    return errors[name];
  };
  const quality = h('input', {
    type: 'number',
    id: 'quality',
    name: 'quality',
    min: 1,
    max: 100,
    value: s.quality === 'auto' ? 80 : s.quality,
    disabled: s.quality === 'auto',
    'aria-describedby': 'err-quality',
  });
  const qualityMode = (value, label, help) =>
    h(
      'label',
      { className: 'check' },
      h('input', {
        type: 'radio',
        name: 'qualityMode',
        value,
        checked: (s.quality === 'auto') === (value === 'auto'),
        onchange: () => {
          quality.disabled = value === 'auto';
        },
      }),
      h('span', {}, label, h('div', { className: 'help' }, help)),
    );
  const maxDim = h('input', {
    type: 'number',
    id: 'maxDimension',
    name: 'maxDimension',
    min: 16,
    max: 16384,
    value: s.maxDimension ?? 2048,
    disabled: s.maxDimension === null,
    'aria-describedby': 'err-maxDimension',
  });
  const hasAltMode = 'alt_text_mode' in s;
  const hasRetention = 'backupRetentionDays' in s;
  const form = h('form', { id: 'settings-form', novalidate: true });
  form.append(
    h(
      'div',
      { className: 'field' },
      h(
        'label',
        { className: 'check' },
        h('input', { type: 'checkbox', name: 'enabled', id: 'enabled', checked: s.enabled }),
        h(
          'span',
          {},
          h('strong', {}, 'Compress new and changed product images automatically'),
          h(
            'div',
            { className: 'help' },
            'When you add or change a product, its photos are compressed within a minute.',
          ),
        ),
      ),
    ),
    h(
      'fieldset',
      { className: 'field', style: 'border:0;padding:0;margin:0 0 16px' },
      h('legend', { className: 'field-label' }, 'Quality'),
      qualityMode(
        'auto',
        'Automatic (recommended)',
        'For each image, the smallest file that still looks the same.',
      ),
      qualityMode(
        'fixed',
        'A fixed quality',
        'From 1 to 100: lower is smaller but may show blur. 75–85 suits most photos.',
      ),
      h(
        'div',
        { style: 'margin-left:24px' },
        h('label', { for: 'quality', className: 'help' }, 'Quality (1–100)'),
        quality,
        fieldError('quality'),
      ),
    ),
    h(
      'div',
      { className: 'field' },
      h('label', { for: 'maxDimension' }, 'Largest width or height'),
      h('div', { className: 'inline' }, maxDim, h('span', {}, 'pixels')),
      h(
        'label',
        { className: 'check', style: 'margin-top:6px' },
        h('input', {
          type: 'checkbox',
          name: 'keepSize',
          checked: s.maxDimension === null,
          onchange: (e) => {
            maxDim.disabled = e.currentTarget.checked;
          },
        }),
        h('span', {}, 'Keep the original size'),
      ),
      h(
        'div',
        { className: 'help' },
        'Larger photos are scaled down to this. 2048 pixels is sharp on every screen and zoom.',
      ),
      fieldError('maxDimension'),
    ),
    h(
      'div',
      { className: 'field' },
      h(
        'label',
        { className: 'check' },
        h('input', { type: 'checkbox', name: 'keepExif', checked: s.keepExif }),
        h(
          'span',
          {},
          'Keep camera details (EXIF)',
          h(
            'div',
            { className: 'help' },
            'Off is recommended: camera details can include where a photo was taken, and make the file larger.',
          ),
        ),
      ),
    ),
    hasAltMode
      ? h(
          'div',
          { className: 'field' },
          h('label', { for: 'alt_text_mode' }, 'Alt text for new images'),
          h(
            'select',
            { id: 'alt_text_mode', name: 'alt_text_mode' },
            h('option', { value: 'off', selected: s.alt_text_mode === 'off' }, 'Leave it as it is'),
            h(
              'option',
              { value: 'template', selected: s.alt_text_mode === 'template' },
              'Write it from my template',
            ),
            h('option', { value: 'ai', selected: s.alt_text_mode === 'ai' }, 'Write it with Compresso’s AI'),
          ),
          h(
            'div',
            { className: 'help' },
            'Only new images without alt text get it; alt text you wrote is never replaced.',
          ),
          fieldError('alt_text_mode'),
          'alt_text_template' in s
            ? h(
                'div',
                { style: 'margin-top:8px' },
                h('label', { for: 'alt_text_template', className: 'help' }, 'Template for new images'),
                h('input', {
                  type: 'text',
                  id: 'alt_text_template',
                  name: 'alt_text_template',
                  maxlength: 1000,
                  value: s.alt_text_template ?? '',
                }),
                h('div', { className: 'help' }, `Placeholders: ${PLACEHOLDERS.map(([t]) => t).join(' ')}`),
                fieldError('alt_text_template'),
              )
            : null,
        )
      : h(
          'div',
          { className: 'field' },
          h('span', { className: 'field-label' }, 'Alt text for new images'),
          h('p', { className: 'muted' }, 'Not available in this version of the app yet.'),
        ),
    hasRetention
      ? h(
          'div',
          { className: 'field' },
          h('label', { for: 'backupRetentionDays' }, 'Keep originals for'),
          h(
            'select',
            { id: 'backupRetentionDays', name: 'backupRetentionDays' },
            [
              ['', 'Always (recommended)'],
              ['30', '30 days'],
              ['90', '90 days'],
              ['365', '1 year'],
            ].map(([value, label]) =>
              h('option', { value, selected: String(s.backupRetentionDays ?? '') === value }, label),
            ),
          ),
          h(
            'div',
            { className: 'help' },
            'After this, an image’s original is deleted and it can no longer be restored.',
          ),
          fieldError('backupRetentionDays'),
        )
      : h(
          'div',
          { className: 'field' },
          h('span', { className: 'field-label' }, 'Keep originals for'),
          h('p', { className: 'muted' }, 'Always: every original is kept while the app is installed.'),
        ),
    h(
      'div',
      { className: 'actions' },
      h('button', { type: 'submit', className: 'primary', 'data-action': 'save' }, 'Save'),
    ),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const button = form.querySelector('[type=submit]');
    act(button, async () => {
      for (const box of Object.values(errors)) box.textContent = '';
      const data = new FormData(form);
      const patch = {
        enabled: data.get('enabled') === 'on',
        quality: data.get('qualityMode') === 'auto' ? 'auto' : Number(quality.value),
        maxDimension: data.get('keepSize') === 'on' ? null : Number(maxDim.value),
        keepExif: data.get('keepExif') === 'on',
        ...(hasAltMode ? { alt_text_mode: data.get('alt_text_mode') } : {}),
        ...('alt_text_template' in s
          ? { alt_text_template: String(data.get('alt_text_template') ?? '') }
          : {}),
        ...(hasRetention
          ? {
              backupRetentionDays: data.get('backupRetentionDays')
                ? Number(data.get('backupRetentionDays'))
                : null,
            }
          : {}),
      };
      if (
        patch.quality !== 'auto' &&
        !(Number.isInteger(patch.quality) && patch.quality >= 1 && patch.quality <= 100)
      ) {
        errors.quality.textContent = 'Enter a whole number from 1 to 100, or choose Automatic.';
        quality.focus();
        return;
      }
      try {
        await api('/api/admin/settings', { method: 'POST', body: patch });
      } catch (error) {
        const named = (error.details ?? []).filter((d) => errors[d.field]);
        for (const d of named) errors[d.field].textContent = `${fieldName(d.field)}: ${friendly(d.expected)}`;
        if (named.length) return;
        throw error;
      }
      toast('Settings saved.');
    });
  });

  const key = h('input', {
    type: 'password',
    id: 'key',
    name: 'key',
    autocomplete: 'off',
    placeholder: 'cmp_live_…',
    'aria-describedby': 'err-key key-help',
  });
  const keyForm = h(
    'form',
    { id: 'key-form', novalidate: true },
    h(
      'div',
      { className: 'field' },
      h('label', { for: 'key' }, 'Your Compresso API key'),
      key,
      h(
        'div',
        { className: 'help', id: 'key-help' },
        'Find it in your Compresso account, under API keys. It starts with cmp_live_.',
      ),
      fieldError('key'),
    ),
    h(
      'div',
      { className: 'actions' },
      h('button', { type: 'submit', 'data-action': 'connect' }, 'Connect key'),
    ),
  );
  keyForm.addEventListener('submit', (event) => {
    event.preventDefault();
    act(keyForm.querySelector('[type=submit]'), async () => {
      errors.key.textContent = '';
      const value = key.value.trim();
      if (!/^cmp_live_[A-Za-z0-9_-]{20,100}$/.test(value)) {
        errors.key.textContent =
          'That does not look like a Compresso key: it starts with cmp_live_ followed by at least 20 letters and digits.';
        key.focus();
        return;
      }
      try {
        const r = await api('/api/admin/key', { method: 'POST', body: { key: value } });
        key.value = '';
        keySource.replaceChildren(keyText('merchant', true));
        toast(`Key connected (plan: ${r.plan}).`);
      } catch (error) {
        if (error.code === 'INVALID_REQUEST') {
          errors.key.textContent = `${error.message} Check that you copied the whole key, and that its account has the API.`;
          return;
        }
        throw error;
      }
    });
  });
  const keySource = h('p', {}, keyText(status.key_source, status.connected));
  return [
    ...header(
      'Settings',
      'How Compresso treats your product images. Changes apply to images compressed from now on.',
    ),
    card(h('h2', {}, 'Compression'), form),
    card(
      h('h2', {}, 'Compresso account'),
      keySource,
      h(
        'p',
        { className: 'muted' },
        'Compresso made an account for your shop when you installed the app. If you already have a Compresso account with the API, connect its key to use its plan instead.',
      ),
      keyForm,
    ),
  ];
}

function keyText(source, connected) {
  if (!connected) return 'No key is connected: images are not compressed until you connect one below.';
  return source === 'merchant'
    ? 'Connected with your own Compresso key.'
    : 'Connected with the account made for your shop at install.';
}

function fieldName(field) {
  return (
    {
      quality: 'Quality',
      maxDimension: 'Largest width or height',
      key: 'Key',
      alt_text_template: 'Template',
      alt_text_mode: 'Alt text',
      backupRetentionDays: 'Keep originals for',
    }[field] ?? field
  );
}

function friendly(expected) {
  return /number|>=|<=|too_small|too_big|Too (small|big)/i.test(expected ?? '')
    ? 'this value is outside what is allowed. Use a whole number in the range shown.'
    : (expected ?? 'not accepted');
}

show();
