import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Secrets the app must be able to read back (a shop's Shopify access token, its Compresso key) are
 * kept encrypted at rest: AES-256-GCM under a key derived (HKDF-SHA256) from SHOPIFY_ENCRYPTION_KEY.
 * Each value is bound to what it belongs to (`context`, e.g. the session id) as additional data, so a
 * ciphertext copied onto another row does not decrypt. A database dump alone gives no token.
 */
export interface Sealer {
  seal(plain: string, context: string): string;
  /** Throws when the value was not sealed by this key for this context (tampered, moved, other key). */
  open(sealed: string, context: string): string;
}

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export function createSealer(secret: string): Sealer {
  if (secret.length < 32) throw new Error('encryption key: expected 32 characters or more');
  const key = Buffer.from(hkdfSync('sha256', secret, 'compresso-shopify', 'at-rest-v1', 32));
  return {
    seal(plain, context) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(context));
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return `${VERSION}.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')}`;
    },
    open(sealed, context) {
      const [version, data] = sealed.split('.');
      if (version !== VERSION || !data) throw new Error('sealed value: unknown format');
      const raw = Buffer.from(data, 'base64url');
      if (raw.length < IV_BYTES + TAG_BYTES) throw new Error('sealed value: too short');
      const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(context));
      decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString(
        'utf8',
      );
    },
  };
}
