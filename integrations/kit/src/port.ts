/**
 * The platform port: the few operations a store or CMS adapter provides. Everything else (the
 * ledger, backups, the optimize pipeline, bulk runs) is the kit's, so a new platform is an adapter
 * of these functions and the battery in `@compresso/integration-kit/testing` says when it is done.
 *
 * Every call names the site (a Shopify shop domain, a WordPress site URL …): one adapter serves every
 * site an app is installed on, and keeps per-site state (tokens, cost budgets) itself.
 */

/** An image as the platform knows it, without its bytes. */
export interface PlatformAsset {
  /** The platform's stable id; replacing the bytes in place keeps it (Shopify: the MediaImage gid). */
  id: string;
  /** File name with its extension, as the platform shows it. */
  filename: string;
  /** `image/jpeg`, `image/png`, … — a replacement keeps it (platforms tie the extension to the file). */
  contentType: string;
  /** Bytes of the current file, when the platform says without a download. */
  size?: number | undefined;
  /** Current alt text; null when there is none. */
  altText: string | null;
  /** The thing the image belongs to (a product id), when there is one. */
  parentId?: string | undefined;
}

/** One page of a site's images. `cursor` continues after this page; null: this was the last. */
export interface AssetPage {
  assets: PlatformAsset[];
  cursor: string | null;
  /**
   * The listing is being prepared on the platform's side (Shopify: a bulk operation still running):
   * `assets` is empty, and the caller should ask again with `cursor` after this many ms. The cursor
   * is stored like any other, so a restart keeps waiting for the same preparation.
   */
  waitMs?: number | undefined;
  /** How many images the whole listing holds, when the platform learned it while listing (a bulk operation's count). */
  total?: number | undefined;
}

/** An asset's current bytes with its facts (read at the same time, so they describe these bytes). */
export interface FetchedAsset {
  asset: PlatformAsset;
  bytes: Uint8Array;
}

/** What to put in place of an asset's bytes. `contentType` must be the asset's own. */
export interface Replacement {
  bytes: Uint8Array;
  contentType: string;
  filename: string;
}

/**
 * What the platform knows around an image, for alt text (`{product_title}`, `{vendor}` …). Every
 * member is optional: a CMS attachment has a title and no vendor.
 */
export interface AssetContext {
  siteName?: string | undefined;
  title?: string | undefined;
  vendor?: string | undefined;
  productType?: string | undefined;
  variant?: string | undefined;
  /** 1-based position of the image among its parent's. */
  position?: number | undefined;
  filename?: string | undefined;
}

export interface CallOptions {
  signal?: AbortSignal | undefined;
}

/** `assetContext`'s options: the asset's parent when the caller knows it (a webhook names the product) saves a search. */
export interface ContextOptions extends CallOptions {
  parentId?: string | undefined;
  /** false: the caller does not use `variant`, so a platform may skip a dearer look-up (default true). */
  variant?: boolean | undefined;
}

export interface ListOptions extends CallOptions {
  /** Resume after this cursor (one a previous page returned); none: from the start. */
  cursor?: string | null | undefined;
  /** Assets per page, at most; the adapter may return fewer (never zero unless the end is reached). */
  limit?: number | undefined;
}

export interface PlatformPort {
  /** `memory`, `shopify`, … for logs and the ledger. */
  readonly platform: string;
  /** Longest alt text the platform stores (Shopify: 512). */
  readonly maxAltTextLength: number;
  /**
   * A page of the site's images. A cursor stays valid across process restarts (it is stored in the
   * bulk run's row); a cursor the adapter did not issue is a PlatformError `INVALID`.
   */
  listAssets(site: string, options?: ListOptions): Promise<AssetPage>;
  /**
   * How many images the site has, when the platform can say cheaply (Shopify: a bulk operation's
   * `objectCount`, a files count). Optional: a bulk run's progress is then done / total.
   */
  countAssets?(site: string, options?: CallOptions): Promise<number>;
  /** The asset's current bytes and facts. An unknown id is `NOT_FOUND`. */
  fetchAsset(site: string, assetId: string, options?: CallOptions): Promise<FetchedAsset>;
  /**
   * The asset's facts without its bytes (its alt text, say), when the platform can tell without a
   * download. Optional: the kit falls back to `fetchAsset`. An unknown id is `NOT_FOUND`.
   */
  getAsset?(site: string, assetId: string, options?: CallOptions): Promise<PlatformAsset>;
  /**
   * Put new bytes in place: same id, same URL where the platform has one. Resolves once the new file
   * is live (Shopify: READY); a platform that cannot process it is `REJECTED`, with the old file
   * still in place. Another content type than the asset's is `INVALID`, before any call.
   */
  replaceAsset(
    site: string,
    assetId: string,
    replacement: Replacement,
    options?: CallOptions,
  ): Promise<PlatformAsset>;
  /** Set (or, with null, clear) the alt text. Longer than `maxAltTextLength` is `INVALID`, before any call. */
  setAltText(
    site: string,
    assetId: string,
    altText: string | null,
    options?: CallOptions,
  ): Promise<PlatformAsset>;
  /** What the platform knows around the asset. */
  assetContext(site: string, assetId: string, options?: ContextOptions): Promise<AssetContext>;
}

/** The extension a content type is written with, for checking a replacement keeps the file's kind. */
export function sameImageKind(a: string, b: string): boolean {
  const norm = (type: string) => type.toLowerCase().split(';')[0]!.trim().replace('image/jpg', 'image/jpeg');
  return norm(a) === norm(b);
}
