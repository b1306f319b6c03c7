/**
 * Names that come from the other end of the wire — a `Content-Disposition` file name, a format name
 * used as an extension — are chosen by whoever runs the server. A hostile or compromised server
 * answering `filename="../escaped.webp"` must not steer a write outside the folder the caller chose,
 * so such a name is used only when it already is one plain file name; anything else is refused, not
 * repaired (a server that sends `a/b.webp` is not one whose intent we can guess).
 *
 * Refused: an empty name, `.` and `..` (and any name made only of dots), `/` and `\` anywhere (so no
 * absolute path either), a Windows drive or stream (`C:x.webp`, `x.webp:zone`: any `:`), control
 * characters (C0, DEL and C1: they end lines in logs and terminals), and names longer than 255 bytes
 * (the usual file system limit). The Python client never reads Content-Disposition; it checks the
 * extension as safeExtension does (`_SAFE_EXTENSION`).
 */
export function safeFileName(name: string | undefined): string | undefined {
  if (typeof name !== 'string' || name === '') return undefined;
  if (/^\.+$/.test(name)) return undefined;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused.
  if (/[/\\:\u0000-\u001f\u007f-\u009f]/.test(name)) return undefined;
  if (Buffer.byteLength(name, 'utf8') > 255) return undefined;
  return name;
}

/**
 * An extension from the server's `X-Output-Format`: a short run of lower-case letters and digits
 * (`webp`, `jpg`, a format a newer server adds), or undefined for anything that could carry a path.
 */
export function safeExtension(format: string | undefined): string | undefined {
  return typeof format === 'string' && /^[a-z0-9]{1,16}$/.test(format) ? format : undefined;
}

/**
 * The file name a `Content-Disposition` header carries, as sent (not yet judged by safeFileName):
 * RFC 6266's `filename*` (RFC 8187 `charset'language'percent-encoded`, UTF-8 or ISO-8859-1) when
 * present and decodable, else `filename` (quoted, with backslash escapes, or a bare token).
 */
export function dispositionFileName(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const extended = /(?:^|;)\s*filename\*\s*=\s*([^';\s]*)'[^']*'([^;\s]*)/i.exec(header);
  if (extended) {
    const charset = extended[1]!.toLowerCase();
    const encoded = extended[2]!;
    try {
      if (charset === 'utf-8') return decodeURIComponent(encoded);
      if (charset === 'iso-8859-1') {
        return encoded.replace(/%([0-9a-f]{2})/gi, (_, hex: string) =>
          String.fromCharCode(Number.parseInt(hex, 16)),
        );
      }
    } catch {
      // Malformed percent-encoding: fall through to the plain parameter, as RFC 6266 advises.
    }
  }
  const quoted = /(?:^|;)\s*filename\s*=\s*"((?:[^"\\]|\\.)*)"/i.exec(header);
  if (quoted) return quoted[1]!.replace(/\\(.)/g, '$1');
  const token = /(?:^|;)\s*filename\s*=\s*([^;\s"]+)/i.exec(header);
  return token?.[1];
}
