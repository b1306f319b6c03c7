import type { Request } from 'express';
import { escapeHtml } from './layout.ts';

/**
 * The pieces every form page of the account pages is built from: fields with their errors tied to
 * them, the CSRF input, reading a posted value, and the wording of waits.
 */

export type Fields = Record<string, string>;

export interface FieldSpec {
  name: string;
  label: string;
  type?: string;
  value?: string;
  error?: string;
  hint?: string;
  autocomplete?: string;
  required?: boolean;
  maxlength?: number;
}

/** A labelled input with its hint and error tied to it (aria-describedby), the error beside the field. */
export function field(spec: FieldSpec): string {
  const id = `field-${spec.name}`;
  const described = [spec.hint ? `${id}-hint` : '', spec.error ? `${id}-error` : '']
    .filter(Boolean)
    .join(' ');
  return `<div class="field">
  <label for="${id}">${escapeHtml(spec.label)}</label>
  ${spec.hint ? `<p class="hint" id="${id}-hint">${escapeHtml(spec.hint)}</p>` : ''}
  <input id="${id}" name="${spec.name}" type="${spec.type ?? 'text'}"${spec.value !== undefined ? ` value="${escapeHtml(spec.value)}"` : ''}${spec.autocomplete ? ` autocomplete="${spec.autocomplete}"` : ''}${spec.required === false ? '' : ' required'}${spec.maxlength ? ` maxlength="${spec.maxlength}"` : ''}${described ? ` aria-describedby="${described}"` : ''}${spec.error ? ' aria-invalid="true"' : ''}>
  ${spec.error ? `<p class="field-error" id="${id}-error">${escapeHtml(spec.error)}</p>` : ''}
</div>`;
}

export const csrfInput = (token: string) => `<input type="hidden" name="_csrf" value="${escapeHtml(token)}">`;

export const str = (body: unknown, name: string): string => {
  const value = (body as Record<string, unknown> | undefined)?.[name];
  return typeof value === 'string' ? value : '';
};

/** The client's address as TRUST_PROXY lets express derive it (req.ip); the socket's without a proxy. */
export const clientAddress = (req: Request) => req.ip ?? req.socket.remoteAddress ?? '';

/** A wait as people say it, rounded up to whole minutes. */
export function minutes(ms: number): string {
  const m = Math.max(1, Math.ceil(ms / 60000));
  return m === 1 ? '1 minute' : `${m} minutes`;
}
