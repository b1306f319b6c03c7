type Json = Record<string, unknown>;

const esc = (text: unknown): string =>
  String(text ?? '').replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );

// OpenAPI descriptions are CommonMark; the one construct ours use is `code`. Render that, escape the rest.
const prose = (text: unknown): string => esc(text).replace(/`([^`]+)`/g, '<code>$1</code>');

/** `#/components/schemas/InfoResult` → a link to that schema's section. */
function schemaLink(ref: string): string {
  const name = ref.replace(/^#\/components\/schemas\//, '');
  return `<a href="#schema-${esc(name)}">${esc(name)}</a>`;
}

function typeOf(prop: Json): string {
  if (typeof prop.$ref === 'string') return schemaLink(prop.$ref);
  if (prop.enum) return `one of ${(prop.enum as unknown[]).map((v) => `<code>${esc(v)}</code>`).join(', ')}`;
  if (prop.anyOf || prop.oneOf) {
    return ((prop.anyOf ?? prop.oneOf) as Json[]).map((p) => typeOf(p) || 'value').join(' or ');
  }
  if (prop.type === 'array' && prop.items) return `array of ${typeOf(prop.items as Json)}`;
  if (prop.const !== undefined) return `<code>${esc(JSON.stringify(prop.const))}</code>`;
  const type = Array.isArray(prop.type) ? prop.type.join(' | ') : String(prop.type ?? '');
  return esc(prop.format ? `${type} (${prop.format})` : type);
}

function schemaTable(schema: Json): string {
  const properties = (schema.properties ?? {}) as Record<string, Json>;
  const required = new Set((schema.required ?? []) as string[]);
  const rows = Object.entries(properties).map(
    ([name, prop]) =>
      `<tr><td><code>${esc(name)}</code>${required.has(name) ? ' <abbr title="required">*</abbr>' : ''}</td><td>${typeOf(prop)}</td><td>${prose(prop.description)}</td></tr>`,
  );
  return rows.length
    ? `<div class="table"><table><thead><tr><th scope="col">Field</th><th scope="col">Type</th><th scope="col">Meaning</th></tr></thead><tbody>${rows.join('')}</tbody></table></div>`
    : '';
}

/** What a body holds: a link to a named schema, the fields of an inline one, or just its media types. */
function bodyHtml(content: Record<string, Json> | undefined): string {
  if (!content) return '';
  const plain: string[] = [];
  const described: string[] = [];
  for (const [type, media] of Object.entries(content)) {
    const schema = (media.schema ?? {}) as Json;
    const items = schema.items as Json | undefined;
    if (typeof schema.$ref === 'string') {
      described.push(`<p class="media"><code>${esc(type)}</code> ${schemaLink(schema.$ref)}</p>`);
    } else if (schema.properties) {
      described.push(`<p class="media"><code>${esc(type)}</code></p>${schemaTable(schema)}`);
    } else if (schema.type === 'array' && typeof items?.$ref === 'string') {
      described.push(`<p class="media"><code>${esc(type)}</code> array of ${schemaLink(items.$ref)}</p>`);
    } else {
      plain.push(`<code>${esc(type)}</code>`);
    }
  }
  return (plain.length ? `<p class="media">${plain.join(', ')}</p>` : '') + described.join('');
}

/** Response headers, folded away: they matter to some readers and would drown the rest. */
function headersHtml(headers: Record<string, Json> | undefined): string {
  if (!headers || Object.keys(headers).length === 0) return '';
  const rows = Object.entries(headers)
    .map(([name, h]) => `<dt><code>${esc(name)}</code></dt><dd>${prose(h.description)}</dd>`)
    .join('');
  return `<details><summary>Headers (${Object.keys(headers).length})</summary><dl class="headers">${rows}</dl></details>`;
}

/** A curl command for an operation, built from its method, path, security and request body. */
function curlExample(method: string, path: string, op: Json, operationSecurity: boolean): string {
  const parts = ['curl -fsS'];
  if (method !== 'get' && method !== 'post') parts.push(`-X ${method.toUpperCase()}`);
  if (operationSecurity) parts.push('-H "Authorization: Bearer $COMPRESSO_API_KEY"');
  const body = (op.requestBody as Json | undefined)?.content as Record<string, Json> | undefined;
  if (body?.['multipart/form-data']) {
    parts.push('-F file=@photo.jpg');
    const fields = ((body['multipart/form-data'].schema as Json).properties ?? {}) as Json;
    if ('output_format' in fields && op.operationId === 'compress') {
      parts.push('-F output_format=webp', '-o photo.webp');
    }
  } else if (body?.['application/json']) {
    const props = ((body['application/json'].schema as Json).properties ?? {}) as Record<string, Json>;
    const example = Object.fromEntries(
      Object.keys(props).map((name) => [name, name === 'name' ? 'laptop' : '…']),
    );
    parts.push("-H 'Content-Type: application/json'", `-d '${JSON.stringify(example)}'`);
  }
  const url = `"$COMPRESSO_BASE_URL${path.replace(/\{(\w+)\}/g, (_m, name: string) => `<${name}>`)}"`;
  parts.push(url);
  return parts.join(' \\\n  ');
}

/**
 * The API reference's content, generated once from the OpenAPI document: no scripts, no external
 * assets, so it works offline under the site's strict Content-Security-Policy. The route puts it in
 * the site layout (web/layout.ts) with static/docs.css, so the navigation knows who is signed in.
 */
export function docsContent(document: Json): string {
  const info = document.info as Json;
  const paths = document.paths as Record<string, Record<string, Json>>;
  const schemas = ((document.components as Json).schemas ?? {}) as Record<string, Json>;
  const secured = Array.isArray(document.security) && document.security.length > 0;
  const ops = Object.entries(paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => {
      const needsKey = Array.isArray(op.security) ? op.security.length > 0 : secured;
      return { path, method, op, needsKey, id: String(op.operationId ?? `${method}-${path}`) };
    }),
  );
  const toc = ops
    .map(
      ({ path, method, op, id }) =>
        `<li><a href="#${esc(id)}"><span class="method method-${esc(method)}">${esc(method.toUpperCase())}</span> <code>${esc(path)}</code></a> <span class="summary">${esc(op.summary)}</span></li>`,
    )
    .join('');
  const operations = ops.map(({ path, method, op, needsKey, id }) => {
    const params = ((op.parameters ?? []) as Json[])
      .map(
        (p) =>
          `<tr><td><code>${esc(p.name)}</code></td><td>${esc(p.in)}</td><td>${prose(p.description)}</td></tr>`,
      )
      .join('');
    const requestBody = op.requestBody as Json | undefined;
    // The body first: it is what a request is about; parameters (a path id, the Idempotency-Key
    // header) come after it.
    const request =
      (requestBody ? bodyHtml(requestBody.content as Record<string, Json>) : '') +
      (params
        ? `<div class="table"><table><thead><tr><th scope="col">Parameter</th><th scope="col">In</th><th scope="col">Meaning</th></tr></thead><tbody>${params}</tbody></table></div>`
        : '');
    const responses = Object.entries((op.responses ?? {}) as Record<string, Json>)
      .map(
        ([status, r]) =>
          `<tr><td><span class="status status-${esc(status[0])}xx">${esc(status)}</span></td><td>${prose(r.description)}${bodyHtml(r.content as Record<string, Json> | undefined)}${headersHtml(r.headers as Record<string, Json> | undefined)}</td></tr>`,
      )
      .join('');
    return `<section id="${esc(id)}" class="operation" aria-labelledby="${esc(id)}-title">
<h3 id="${esc(id)}-title"><span class="method method-${esc(method)}">${esc(method.toUpperCase())}</span> <code>${esc(path)}</code> <small>${needsKey ? 'API key' : 'no key'}</small></h3>
<p>${esc(op.summary)}</p>${op.description ? `<p>${prose(op.description)}</p>` : ''}
${request ? `<h4>Request</h4>${request}` : ''}
<h4>Example</h4>
<pre><code>${esc(curlExample(method, path, op, needsKey))}</code></pre>
<h4>Responses</h4>
<div class="table"><table><thead><tr><th scope="col">Status</th><th scope="col">Meaning</th></tr></thead><tbody>${responses}</tbody></table></div>
</section>`;
  });
  const models = Object.entries(schemas)
    .map(
      ([name, schema]) =>
        `<section id="schema-${esc(name)}"><h3>${esc(name)}</h3>${schema.description ? `<p>${prose(schema.description)}</p>` : ''}${schemaTable(schema)}</section>`,
    )
    .join('\n');
  return `<h1>${esc(info.title)} <small>${esc(info.version)}</small></h1>
<p>${prose(info.description)}</p>
<p>The examples read the server's address from <code>COMPRESSO_BASE_URL</code> and your key from <code>COMPRESSO_API_KEY</code>. Generate a key in your <a href="/account">account</a> once the Pro plan is active. Machine-readable: <a href="/api/v1/openapi.json">openapi.json</a> (OpenAPI ${esc(document.openapi)}).</p>
<nav aria-labelledby="endpoints-title"><h2 id="endpoints-title">Endpoints</h2><ul class="toc">${toc}</ul></nav>
${operations.join('\n')}
<h2>Schemas</h2>
${models}`;
}
