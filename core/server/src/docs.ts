type Json = Record<string, unknown>;

const esc = (text: unknown): string =>
  String(text ?? '').replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );

function schemaTable(schema: Json): string {
  const properties = (schema.properties ?? {}) as Record<string, Json>;
  const required = new Set((schema.required ?? []) as string[]);
  const rows = Object.entries(properties).map(([name, prop]) => {
    const type =
      prop.type ??
      (prop.enum ? `one of ${(prop.enum as unknown[]).join(', ')}` : prop.anyOf ? 'see description' : '');
    return `<tr><td><code>${esc(name)}</code>${required.has(name) ? ' *' : ''}</td><td>${esc(Array.isArray(type) ? type.join(' | ') : type)}</td><td>${esc(prop.description)}</td></tr>`;
  });
  return rows.length
    ? `<table><tr><th>Field</th><th>Type</th><th>Meaning</th></tr>${rows.join('')}</table>`
    : '';
}

/**
 * A plain HTML reference generated from the OpenAPI document: no scripts, no external assets, so it
 * works offline and under a strict Content-Security-Policy.
 */
export function docsPage(document: Json): string {
  const info = document.info as Json;
  const paths = document.paths as Record<string, Record<string, Json>>;
  const schemas = ((document.components as Json).schemas ?? {}) as Record<string, Json>;
  const operations = Object.entries(paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => {
      const responses = Object.entries((op.responses ?? {}) as Record<string, Json>)
        .map(([status, r]) => `<li><b>${esc(status)}</b> ${esc(r.description)}</li>`)
        .join('');
      const auth = Array.isArray(op.security) && op.security.length === 0 ? 'no key' : 'Bearer key';
      return `<section id="${esc(op.operationId)}"><h3><code>${esc(method.toUpperCase())} ${esc(path)}</code> <small>${auth}</small></h3><p>${esc(op.summary)}</p>${op.description ? `<p>${esc(op.description)}</p>` : ''}<ul>${responses}</ul></section>`;
    }),
  );
  const models = Object.entries(schemas)
    .map(
      ([name, schema]) =>
        `<section id="schema-${esc(name)}"><h3>${esc(name)}</h3><p>${esc(schema.description)}</p>${schemaTable(schema)}</section>`,
    )
    .join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(info.title)} reference</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}code{background:#f3f3f3;padding:0 .2em}table{border-collapse:collapse;width:100%}td,th{border:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}small{color:#777}section{margin-bottom:1.5rem}</style>
</head><body>
<h1>${esc(info.title)} <small>${esc(info.version)}</small></h1>
<p>${esc(info.description)}</p>
<p>Machine-readable: <a href="/api/v1/openapi.json">openapi.json</a>.</p>
<h2>Endpoints</h2>
${operations.join('\n')}
<h2>Schemas</h2>
${models}
</body></html>`;
}
