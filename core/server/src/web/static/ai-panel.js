// The Pro panel of the compressor page: edit one image by an instruction (/web/edit) and generate one
// from a prompt (/web/generate). Plain ES module, no build step; served only to Pro accounts' pages.
const csrfToken = document.querySelector('meta[name="csrf-token"]')?.getAttribute('content') ?? '';
const editForm = document.getElementById('edit-form');
const generateForm = document.getElementById('generate-form');
const status = document.getElementById('ai-status');
const result = document.getElementById('ai-result');
const image = document.getElementById('ai-image');
const download = document.getElementById('ai-download');
const facts = document.getElementById('ai-facts');
const operations = document.getElementById('ai-operations');
const unrecognized = document.getElementById('ai-unrecognized');
let lastUrl;

/** A JSON header of the answer (the server escapes non-ASCII as \u sequences), or undefined. */
function jsonHeader(res, name) {
  const text = res.headers.get(name);
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** One edit operation as words: its name and its settings. */
function describe(op) {
  const { op: name, ...rest } = op;
  const settings = Object.entries(rest).map(([key, value]) => `${key} ${value}`);
  return settings.length ? `${name} (${settings.join(', ')})` : name;
}

async function send(path, init, busy) {
  const buttons = document.querySelectorAll('#ai-panel button');
  for (const button of buttons) button.disabled = true;
  status.textContent = busy;
  try {
    const res = await fetch(path, {
      method: 'POST',
      ...init,
      headers: { 'X-CSRF-Token': csrfToken, Accept: 'image/*, application/json', ...init.headers },
    });
    if (!res.ok) {
      let message = `The server answered ${res.status}.`;
      try {
        const body = await res.json();
        if (body.error?.message) message = body.error.message;
      } catch {
        // Not our JSON: the status is all there is to say.
      }
      status.textContent = message;
      return;
    }
    const blob = await res.blob();
    if (lastUrl) URL.revokeObjectURL(lastUrl);
    lastUrl = URL.createObjectURL(blob);
    const name = /filename="([^"]+)"/.exec(res.headers.get('Content-Disposition') ?? '')?.[1] ?? 'image';
    image.src = lastUrl;
    download.href = lastUrl;
    download.download = name;
    download.textContent = `Download ${name}`;
    facts.textContent = `${res.headers.get('X-Width')}×${res.headers.get('X-Height')} ${res.headers.get('X-Output-Format')}, ${blob.size} bytes`;
    const applied = jsonHeader(res, 'X-Edit-Operations');
    const generated = jsonHeader(res, 'X-Edit-Generated');
    const missed = jsonHeader(res, 'X-Edit-Unrecognized');
    operations.textContent = applied
      ? `Applied: ${[...applied.map(describe), ...(generated ?? []).map((g) => `generated "${g}"`)].join('; ') || 'nothing'}`
      : '';
    unrecognized.textContent = missed?.length ? `Not understood: ${missed.join(', ')}` : '';
    result.hidden = false;
    status.textContent = 'Done.';
  } catch {
    status.textContent = 'The connection failed. Check your network and try again.';
  } finally {
    for (const button of buttons) button.disabled = false;
  }
}

editForm.addEventListener('submit', (event) => {
  event.preventDefault();
  send('/web/edit', { body: new FormData(editForm) }, 'Editing…');
});

generateForm?.addEventListener('submit', (event) => {
  event.preventDefault();
  const fields = Object.fromEntries(new FormData(generateForm));
  send(
    '/web/generate',
    { body: JSON.stringify(fields), headers: { 'Content-Type': 'application/json' } },
    'Generating…',
  );
});
document.documentElement.classList.add('ai-panel-ready');
