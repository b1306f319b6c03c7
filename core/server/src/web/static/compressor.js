// The drag-and-drop compressor. Plain ES module, no build step: the server serves this file as is.
// Each file is posted to /web/compress (the same engine path as /api/v1/compress) with the page's
// CSRF token; XMLHttpRequest because fetch cannot report upload progress.
import { zipSync } from '/static/vendor/fflate.js';

/** Two uploads at a time: the engine works on a couple of images at once, more would only queue. */
const PARALLEL = 2;

const form = document.getElementById('compress-form');
const input = document.getElementById('file-input');
const dropzone = document.getElementById('dropzone');
const results = document.getElementById('results');
const status = document.getElementById('status');
const allowance = document.getElementById('allowance');
const downloadAll = document.getElementById('download-all');
const clearButton = document.getElementById('clear-results');
const autoQuality = document.getElementById('opt-auto');
const quality = document.getElementById('opt-quality');
const csrfToken = document.querySelector('meta[name="csrf-token"]')?.getAttribute('content') ?? '';

/** Every item ever added: { file, row, state: 'queued'|'working'|'done'|'failed'|'skipped', output? } */
const items = [];
const queue = [];
let running = 0;
/** Set when the allowance is used up: the rest of the queue is not sent (it would only be refused). */
let stopped;
let lowestRemaining = Number.POSITIVE_INFINITY;

// The same text as the CLI and the MCP server give for the same file: powers of 1000, kB, one decimal.
const units = ['B', 'kB', 'MB', 'GB'];
function formatBytes(bytes) {
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

function element(tag, attributes = {}, text) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function announce(message) {
  status.textContent = message;
}

function describeReset(seconds) {
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.ceil((seconds % 3600) / 60);
  return hours > 0 ? `${hours} h ${minutes} min` : `${minutes} min`;
}

/** The allowance line, from the RateLimit-* headers of the last answer. */
function showAllowance(xhr) {
  const limit = xhr.getResponseHeader('RateLimit-Limit');
  const remaining = xhr.getResponseHeader('RateLimit-Remaining');
  const reset = Number(xhr.getResponseHeader('RateLimit-Reset'));
  if (limit === null || remaining === null) return;
  // Uploads run in parallel and finish in any order: an answer counted earlier may arrive later, so
  // only a lower count is news (and a refusal's message stays up).
  if (Number(remaining) >= lowestRemaining) return;
  lowestRemaining = Number(remaining);
  const kind = xhr.getResponseHeader('X-Allowance') === 'account' ? 'Pro plan' : 'Free allowance';
  const what = kind === 'Pro plan' ? 'requests' : 'images';
  allowance.textContent = `${kind}: ${remaining} of ${limit} ${what} left today (resets at 00:00 UTC, in ${describeReset(reset)}).`;
}

function options() {
  const values = {};
  const format = form.elements.output_format.value;
  if (format) values.output_format = format;
  values.quality = autoQuality.checked ? 'auto' : quality.value;
  const max = form.elements.max_dimension.value.trim();
  if (max) values.max_dimension = max;
  return values;
}

function addFiles(fileList) {
  const files = [...fileList];
  if (files.length === 0) return;
  const chosen = options();
  for (const file of files) {
    const item = { file, options: chosen, state: 'queued' };
    item.row = buildRow(item);
    items.push(item);
    queue.push(item);
    results.append(item.row.root);
  }
  announce(`${files.length} ${files.length === 1 ? 'image' : 'images'} added; compressing.`);
  updateButtons();
  pump();
}

function buildRow(item) {
  const root = element('li', { class: 'result' });
  const head = element('div', { class: 'result-head' });
  const name = element('span', { class: 'result-name' }, item.file.name);
  const state = element('span', { class: 'result-state' }, 'Waiting');
  head.append(name, state);
  const progress = element('progress', { max: '100', value: '0', 'aria-label': `${item.file.name}: upload` });
  const sizes = element('dl', { class: 'sizes', hidden: '' });
  const body = element('div', { class: 'result-body' });
  root.append(head, progress, sizes, body);
  return { root, state, progress, sizes, body };
}

function updateButtons() {
  const done = items.filter((i) => i.state === 'done');
  downloadAll.disabled = done.length === 0;
  downloadAll.textContent = done.length > 1 ? `Download all ${done.length} (.zip)` : 'Download all (.zip)';
  clearButton.disabled = items.length === 0 || running > 0;
}

function pump() {
  while (running < PARALLEL && queue.length > 0) {
    const item = queue.shift();
    if (stopped) {
      skip(item, stopped);
      continue;
    }
    running += 1;
    upload(item).finally(() => {
      running -= 1;
      updateButtons();
      if (queue.length === 0 && running === 0) summarize();
      pump();
    });
  }
}

function skip(item, reason) {
  item.state = 'skipped';
  item.row.root.classList.add('is-skipped');
  item.row.state.textContent = 'Not sent';
  item.row.progress.remove();
  item.row.body.append(element('p', { class: 'error' }, reason));
}

function upload(item) {
  return new Promise((resolve) => {
    const { row } = item;
    item.state = 'working';
    row.state.textContent = 'Uploading 0%';
    const body = new FormData();
    for (const [name, value] of Object.entries(item.options)) body.append(name, value);
    body.append('file', item.file, item.file.name);
    const xhr = new XMLHttpRequest();
    xhr.open('POST', '/web/compress');
    xhr.responseType = 'blob';
    xhr.setRequestHeader('X-CSRF-Token', csrfToken);
    // Errors then come back as the API's JSON ({"error": {code, message}}), never as an HTML page.
    xhr.setRequestHeader('Accept', 'image/*, application/json');
    xhr.upload.addEventListener('progress', (event) => {
      if (!event.lengthComputable) return;
      const percent = Math.round((event.loaded / event.total) * 100);
      row.progress.value = percent;
      row.state.textContent = `Uploading ${percent}%`;
    });
    xhr.upload.addEventListener('load', () => {
      // The bytes are there; the engine's work has no measurable progress, so the bar goes indeterminate.
      row.progress.removeAttribute('value');
      row.state.textContent = 'Compressing…';
    });
    xhr.addEventListener('load', async () => {
      showAllowance(xhr);
      if (xhr.status === 200) await succeed(item, xhr);
      else await fail(item, xhr);
      resolve();
    });
    xhr.addEventListener('error', () => {
      failWith(item, 'The connection failed. Check your network and try again.');
      resolve();
    });
    xhr.send(body);
  });
}

async function succeed(item, xhr) {
  const { row } = item;
  const blob = xhr.response;
  const header = (name) => xhr.getResponseHeader(name);
  const inputSize = Number(header('X-Input-Size'));
  const outputSize = Number(header('X-Output-Size'));
  const savings = Number(header('X-Savings-Percent'));
  const disposition = header('Content-Disposition') ?? '';
  const name = /filename="([^"]+)"/.exec(disposition)?.[1] ?? item.file.name;
  item.output = { blob, name, inputSize, outputSize };
  item.state = 'done';
  row.progress.remove();
  row.state.textContent = savings > 0 ? `Saved ${savings}%` : 'Already optimal';
  row.root.classList.add('is-done');

  row.sizes.hidden = false;
  for (const [term, value] of [
    [
      'Before',
      `${formatBytes(inputSize)} · ${header('X-Input-Width')}×${header('X-Input-Height')} ${header('X-Input-Format')}`,
    ],
    [
      'After',
      `${formatBytes(outputSize)} · ${header('X-Width')}×${header('X-Height')} ${header('X-Output-Format')}`,
    ],
    [
      'Savings',
      savings > 0
        ? `${savings}% (${formatBytes(inputSize - outputSize)})`
        : 'none: the original was already as small',
    ],
  ]) {
    const group = element('div');
    group.append(element('dt', {}, term), element('dd', {}, value));
    row.sizes.append(group);
  }

  const afterUrl = URL.createObjectURL(blob);
  const beforeUrl = URL.createObjectURL(item.file);
  item.urls = [afterUrl, beforeUrl];
  const canShowOriginal = await decodes(beforeUrl);
  row.body.append(canShowOriginal ? comparison(item, beforeUrl, afterUrl) : compressedOnly(item, afterUrl));

  const link = element('a', { class: 'button download', href: afterUrl, download: name }, `Download ${name}`);
  row.body.append(link);
  updateButtons();
}

/** Whether this browser can draw the original (Chromium and Firefox cannot draw HEIC, for one). */
async function decodes(url) {
  const image = new Image();
  image.src = url;
  try {
    await image.decode();
    return true;
  } catch {
    return false;
  }
}

/** Before and after stacked; a range input moves the edge between them, so it works by keyboard too. */
function comparison(item, beforeUrl, afterUrl) {
  const figure = element('figure', { class: 'compare' });
  const frame = element('div', { class: 'compare-frame' });
  const before = element('img', {
    src: beforeUrl,
    alt: `${item.file.name}, original`,
    class: 'compare-before',
  });
  const after = element('img', {
    src: afterUrl,
    alt: `${item.file.name}, compressed`,
    class: 'compare-after',
  });
  frame.append(before, after);
  const slider = element('input', {
    type: 'range',
    min: '0',
    max: '100',
    value: '50',
    class: 'compare-slider',
    'aria-label': `Comparison of ${item.file.name}: original on the left, compressed on the right`,
  });
  const place = () => frame.style.setProperty('--split', `${slider.value}%`);
  slider.addEventListener('input', place);
  place();
  const caption = element('figcaption');
  caption.append(element('span', {}, 'Original'), element('span', {}, 'Compressed'));
  figure.append(frame, slider, caption);
  return figure;
}

function compressedOnly(item, afterUrl) {
  const figure = element('figure', { class: 'compare compare-single' });
  figure.append(
    element('img', { src: afterUrl, alt: `${item.file.name}, compressed`, class: 'compare-only' }),
  );
  figure.append(
    element(
      'figcaption',
      { class: 'note' },
      'Your browser cannot display this original (HEIC photos, for one), so only the compressed image is shown.',
    ),
  );
  return figure;
}

async function fail(item, xhr) {
  let message = `The server answered ${xhr.status}.`;
  let code;
  try {
    const body = JSON.parse(await xhr.response.text());
    code = body.error?.code;
    if (body.error?.message) message = body.error.message;
  } catch {
    // Not our JSON (a proxy's error page, say): the status line is all there is to say.
  }
  failWith(item, message);
  if (code === 'QUOTA_EXCEEDED' || code === 'PLAN_REQUIRED') {
    stopped = `Not sent: ${message}`;
    allowance.textContent = message;
    allowance.classList.add('is-exhausted');
  }
}

function failWith(item, message) {
  item.state = 'failed';
  item.row.progress.remove();
  item.row.state.textContent = 'Failed';
  item.row.root.classList.add('is-failed');
  item.row.body.append(element('p', { class: 'error' }, message));
}

function summarize() {
  const done = items.filter((i) => i.state === 'done');
  const failed = items.filter((i) => i.state === 'failed' || i.state === 'skipped');
  const before = done.reduce((sum, i) => sum + i.output.inputSize, 0);
  const after = done.reduce((sum, i) => sum + i.output.outputSize, 0);
  const parts = [];
  if (done.length > 0) {
    const percent = before > 0 ? Math.round((1 - after / before) * 1000) / 10 : 0;
    parts.push(
      `${done.length} ${done.length === 1 ? 'image' : 'images'} compressed: ${formatBytes(before)} → ${formatBytes(after)} (${percent}% smaller).`,
    );
  }
  if (failed.length > 0) parts.push(`${failed.length} could not be compressed; see below.`);
  announce(parts.join(' '));
  if (stopped) stopped = undefined;
}

/** Names inside the zip must be unique: a second photo.webp becomes photo-2.webp. */
function uniqueName(name, taken) {
  if (!taken.has(name)) {
    taken.add(name);
    return name;
  }
  const dot = name.lastIndexOf('.');
  const stem = dot > 0 ? name.slice(0, dot) : name;
  const extension = dot > 0 ? name.slice(dot) : '';
  for (let n = 2; ; n++) {
    const candidate = `${stem}-${n}${extension}`;
    if (!taken.has(candidate)) {
      taken.add(candidate);
      return candidate;
    }
  }
}

downloadAll.addEventListener('click', async () => {
  const done = items.filter((i) => i.state === 'done');
  if (done.length === 0) return;
  const taken = new Set();
  const entries = {};
  for (const item of done) {
    // Level 0 (stored): the images are already compressed; deflating them again costs time for nothing.
    entries[uniqueName(item.output.name, taken)] = [
      new Uint8Array(await item.output.blob.arrayBuffer()),
      { level: 0 },
    ];
  }
  const zip = new Blob([zipSync(entries)], { type: 'application/zip' });
  const url = URL.createObjectURL(zip);
  const link = element('a', { href: url, download: 'compresso-images.zip' });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  announce(
    `Zip of ${done.length} ${done.length === 1 ? 'image' : 'images'} ready (${formatBytes(zip.size)}).`,
  );
});

clearButton.addEventListener('click', () => {
  for (const item of items) for (const url of item.urls ?? []) URL.revokeObjectURL(url);
  items.length = 0;
  results.replaceChildren();
  announce('Results cleared.');
  updateButtons();
  input.focus();
});

input.addEventListener('change', () => {
  addFiles(input.files);
  // Cleared so choosing the same file again fires change again.
  input.value = '';
});

for (const type of ['dragenter', 'dragover']) {
  dropzone.addEventListener(type, (event) => {
    event.preventDefault();
    dropzone.classList.add('is-dragging');
  });
}
for (const type of ['dragleave', 'drop']) {
  dropzone.addEventListener(type, () => dropzone.classList.remove('is-dragging'));
}
dropzone.addEventListener('drop', (event) => {
  event.preventDefault();
  addFiles(event.dataTransfer?.files ?? []);
});

autoQuality.addEventListener('change', () => {
  quality.disabled = autoQuality.checked;
});
quality.disabled = autoQuality.checked;
form.addEventListener('submit', (event) => event.preventDefault());
updateButtons();
document.documentElement.classList.add('compressor-ready');
