import {
  type AssetContext,
  type AssetPage,
  type CallOptions,
  type Clock,
  type ContextOptions,
  type FetchedAsset,
  isPlatformError,
  type ListOptions,
  noPacer,
  type Pacer,
  type PlatformAsset,
  PlatformError,
  type PlatformPort,
  pacedCall,
  type Replacement,
  sameImageKind,
  systemClock,
  type ThrottleStatus,
} from '@compresso/integration-kit';
import type { SessionStorage } from '@shopify/shopify-app-session-storage';
import { BULK_CURSOR, bulkListing } from './bulk-listing.ts';
import { type Session, shopifyApiLib } from './shopify-lib.ts';

/** What the adapter needs of the configured @shopify/shopify-api (`shopify.api` of the app object). */
export interface ShopifyApiHandle {
  clients: { Graphql: new (params: { session: Session }) => GraphqlClientLike };
  session: { getOfflineId(shop: string): string };
}

interface GraphqlClientLike {
  request(
    query: string,
    options?: { variables?: Record<string, unknown>; retries?: number },
  ): Promise<{ data?: unknown; extensions?: { cost?: { throttleStatus?: Partial<ThrottleStatus> } } }>;
}

function fullStatus(status: Partial<ThrottleStatus> | undefined): ThrottleStatus | undefined {
  if (
    typeof status?.maximumAvailable !== 'number' ||
    typeof status.currentlyAvailable !== 'number' ||
    typeof status.restoreRate !== 'number'
  ) {
    return undefined;
  }
  return {
    maximumAvailable: status.maximumAvailable,
    currentlyAvailable: status.currentlyAvailable,
    restoreRate: status.restoreRate,
  };
}

export interface ShopifyPlatformOptions {
  api: ShopifyApiHandle;
  sessions: SessionStorage;
  pacer?: Pacer;
  clock?: Clock;
  /** Downloads from the CDN and uploads to the staged target (default: global fetch). */
  fetch?: typeof fetch;
  /** Longest wait for a replaced file to be READY (default 60 s). */
  processingTimeoutMs?: number;
  /** THROTTLED answers waited out per call before it fails as retryable (default 20). */
  maxThrottled?: number;
  /**
   * How a listing from the start is made (bulk-listing.ts): `bulk` through one bulk query operation
   * (JSONL, streamed), `incremental` page by page through `products(first, after)`, `auto` (default)
   * bulk when the shop has more than `bulkThreshold` products (default 250), else incremental.
   * A listing goes on the way it began (the cursor says which).
   */
  listing?: 'auto' | 'bulk' | 'incremental';
  bulkThreshold?: number;
  /** How often a running bulk operation is polled (default 2 s). */
  bulkPollMs?: number;
}

/** Longest alt text Shopify stores on a file. */
export const SHOPIFY_MAX_ALT = 512;

/**
 * The requested cost of each query below, for the pacer, by Shopify's rule: an object 1, a
 * connection 2 + page size × one node, a mutation 10 (the fake computes the same from the query).
 */
const LIST_PAGE = 5;
const CONTEXT_PAGE = 10;
const COST = {
  node: 3,
  list: 2 + LIST_PAGE * (1 + 2 + 50 * 2),
  context: 1 + 2 + CONTEXT_PAGE * (1 + 2 + 50),
  product: 1 + 1 + (2 + 50),
  variants: 1 + 1 + (2 + 50) + (2 + 20 * (1 + 2 + 5)),
  shop: 1,
  mutation: 10,
} as const;

const MEDIA_FIELDS = /* GraphQL */ `
  id
  alt
  mimeType
  fileStatus
  image { url width height }
  originalSource { url fileSize }
`;

const NODE_QUERY = /* GraphQL */ `
  query CompressoMedia($id: ID!) {
    node(id: $id) { ... on MediaImage { ${MEDIA_FIELDS} } }
  }
`;

const LIST_QUERY = /* GraphQL */ `
  query CompressoListMedia($first: Int!, $after: String) {
    products(first: $first, after: $after) {
      edges {
        cursor
        node {
          id title vendor productType
          media(first: 50) { nodes { ... on MediaImage { id alt mimeType originalSource { url fileSize } } } }
        }
      }
      pageInfo { hasNextPage endCursor }
    }
  }
`;

const CONTEXT_QUERY = /* GraphQL */ `
  query CompressoContext($first: Int!, $after: String) {
    shop { name }
    products(first: $first, after: $after) {
      nodes { id title vendor productType media(first: 50) { nodes { id } } }
      pageInfo { hasNextPage endCursor }
    }
  }
`;

interface ProductContextData {
  shop: { name: string };
  product: {
    id: string;
    title: string;
    vendor: string;
    productType: string;
    media: { nodes: { id: string }[] };
    variants?: { nodes: { title: string; media: { nodes: { id: string }[] } }[] };
  } | null;
}

const isImage = (m: { id?: string | undefined }) => m.id?.includes('/MediaImage/') ?? false;

/** How long a product's context answer is reused (a batch asks for each of its images in a row). */
const PRODUCT_CONTEXT_TTL_MS = 30_000;

const COUNT_IMAGES_QUERY = /* GraphQL */ `
  query CompressoCountImages($after: String) {
    products(first: 50, after: $after) { nodes { mediaCount { count } } pageInfo { hasNextPage endCursor } }
  }
`;

/** The context of one product, when the media's product is known (a listing or a webhook said). */
const PRODUCT_CONTEXT_QUERY = /* GraphQL */ `
  query CompressoProductContext($id: ID!) {
    shop { name }
    product(id: $id) { id title vendor productType media(first: 50) { nodes { id } } }
  }
`;

/** … with its variants and the media each shows, for `{variant}` (a dearer query: asked only when needed). */
const PRODUCT_VARIANTS_QUERY = /* GraphQL */ `
  query CompressoProductVariants($id: ID!) {
    shop { name }
    product(id: $id) {
      id title vendor productType
      media(first: 50) { nodes { id } }
      variants(first: 20) { nodes { title media(first: 5) { nodes { id } } } }
    }
  }
`;

const SHOP_NAME_QUERY = /* GraphQL */ `
  query CompressoShopName { shop { name } }
`;

const STAGE_MUTATION = /* GraphQL */ `
  mutation CompressoStage($input: [StagedUploadInput!]!) {
    stagedUploadsCreate(input: $input) {
      stagedTargets { url resourceUrl parameters { name value } }
      userErrors { field message }
    }
  }
`;

const FILE_UPDATE = /* GraphQL */ `
  mutation CompressoFileUpdate($files: [FileUpdateInput!]!) {
    fileUpdate(files: $files) {
      files { id fileStatus alt }
      userErrors { field message code }
    }
  }
`;

const ACK_FAILED = /* GraphQL */ `
  mutation CompressoAckFailed($ids: [ID!]!) {
    fileAcknowledgeUpdateFailed(fileIds: $ids) { files { id } userErrors { field message code } }
  }
`;

interface MediaNode {
  id?: string;
  alt?: string | null;
  mimeType?: string | null;
  fileStatus?: string;
  originalSource?: { url?: string | null; fileSize?: number | null } | null;
}

const CURSOR_PREFIX = 'shp1.';

function encodeCursor(productCursor: string | null, skip: number): string {
  return `${CURSOR_PREFIX}${Buffer.from(JSON.stringify([productCursor, skip])).toString('base64url')}`;
}

function decodeCursor(cursor: string): { after: string | null; skip: number } {
  try {
    if (!cursor.startsWith(CURSOR_PREFIX)) throw new Error('prefix');
    const [after, skip] = JSON.parse(
      Buffer.from(cursor.slice(CURSOR_PREFIX.length), 'base64url').toString(),
    ) as [string | null, number];
    if ((after !== null && typeof after !== 'string') || !Number.isInteger(skip) || skip < 0)
      throw new Error('shape');
    return { after, skip };
  } catch {
    throw new PlatformError(
      'INVALID',
      `Not a cursor this adapter issued: ${JSON.stringify(cursor.slice(0, 40))}`,
    );
  }
}

function filenameOf(url: string): string {
  const last = new URL(url).pathname.split('/').pop() ?? 'image';
  return decodeURIComponent(last);
}

/**
 * The Shopify adapter of the kit's platform port, over the GraphQL Admin API through the real
 * @shopify/shopify-api client with the shop's offline session. Assets are product MediaImages (their
 * gid is the asset id and survives a replacement). Bytes are replaced in place as Shopify documents:
 * stagedUploadsCreate → upload to the target → fileUpdate(originalSource) on the MediaImage (same
 * extension), then the file is watched until READY; FAILED is acknowledged (Shopify keeps the earlier
 * file) and reported as REJECTED. THROTTLED (HTTP 200 with errors[].extensions.code) becomes a
 * retryable PlatformError with the wait read from throttleStatus; every call goes through the pacer.
 */
/** The port, and what the app asks Shopify beside it. */
export interface ShopifyPort extends PlatformPort {
  /** A product's title (one paced `node` query), for lists a merchant reads. */
  productTitle(shop: string, productId: string, signal?: AbortSignal): Promise<string | null>;
  /** The shop's number of products (`productsCount`). */
  countProducts(shop: string, signal?: AbortSignal): Promise<number>;
}

export function shopifyPlatform(options: ShopifyPlatformOptions): ShopifyPort {
  const pacer = options.pacer ?? noPacer;
  const clock = options.clock ?? systemClock;
  const doFetch = options.fetch ?? fetch;
  const processingTimeoutMs = options.processingTimeoutMs ?? 60_000;
  // Which product each media belongs to, as listings and context look-ups find out (Shopify's
  // MediaImage does not name its product): saves a catalogue walk for context.
  const productOfMedia = new Map<string, string>();
  const productContexts = new Map<string, { at: number; data: Promise<ProductContextData> }>();
  // What a listing read of each product (title, vendor, media order), for context without a call.
  const listedProducts = new Map<
    string,
    { at: number; title: string; vendor: string; productType: string; mediaIds: string[] }
  >();
  const shopNames = new Map<string, { at: number; name: Promise<string> }>();

  function remember(
    shop: string,
    product: { id: string; title?: string; vendor?: string; productType?: string },
    images: MediaNode[],
  ): void {
    if (product.title === undefined) return;
    if (listedProducts.size >= 5000)
      for (const [k, v] of listedProducts)
        if (clock.now() - v.at > PRODUCT_CONTEXT_TTL_MS) listedProducts.delete(k);
    listedProducts.set(`${shop}\u0000${product.id}`, {
      at: clock.now(),
      title: product.title,
      vendor: product.vendor ?? '',
      productType: product.productType ?? '',
      mediaIds: images.map((m) => m.id as string),
    });
  }

  /** The shop's name, asked once every few minutes. */
  async function shopName(shop: string, signal?: AbortSignal): Promise<string> {
    let cached = shopNames.get(shop);
    if (!cached || clock.now() - cached.at > 5 * 60_000) {
      cached = {
        at: clock.now(),
        name: gql<{ shop: { name: string } }>(shop, COST.shop, SHOP_NAME_QUERY, {}, signal).then(
          (d) => d.shop.name,
        ),
      };
      shopNames.set(shop, cached);
      cached.name.catch(() => shopNames.delete(shop));
    }
    return cached.name;
  }

  // The offline session, read (and unsealed) once a second at most per shop: a bulk run makes
  // several calls an image. A session removed (uninstall) is seen within that second.
  const sessionCache = new Map<string, { session: Session; at: number }>();
  async function sessionOf(shop: string): Promise<Session> {
    const cached = sessionCache.get(shop);
    if (cached && Date.now() - cached.at < 1000) return cached.session;
    let session: Session | undefined;
    try {
      session = await options.sessions.loadSession(options.api.session.getOfflineId(shop));
    } catch (error) {
      // The database away (restarting): transient, like Shopify being unreachable.
      throw new PlatformError(
        'UNAVAILABLE',
        `The session of ${shop} could not be read: ${(error as Error).message}`,
        {
          cause: error,
        },
      );
    }
    if (!session?.accessToken) {
      sessionCache.delete(shop);
      throw new PlatformError('UNAUTHORIZED', `No offline session for ${shop} (not installed).`);
    }
    sessionCache.set(shop, { session, at: Date.now() });
    return session;
  }

  // One GraphQL call in flight per shop, pacing included: the bucket is the shop's, and a call the
  // pacer admitted must reach Shopify before the next one is weighed, or calls admitted together
  // overdraw it (the pacer counts them spent, Shopify has not yet). Downloads, uploads and
  // compression still run side by side; only the Admin API calls of one shop queue here.
  const lanes = new Map<string, Promise<unknown>>();
  function inLane<T>(shop: string, work: () => Promise<T>): Promise<T> {
    const before = lanes.get(shop) ?? Promise.resolve();
    const run = before.then(work, work);
    const tail = run.catch(() => {});
    lanes.set(shop, tail);
    tail.then(() => {
      if (lanes.get(shop) === tail) lanes.delete(shop);
    });
    return run;
  }

  async function gql<T>(
    shop: string,
    cost: number,
    query: string,
    variables: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<T> {
    const session = await sessionOf(shop);
    return inLane(shop, () =>
      pacedCall(
        {
          pacer,
          clock,
          site: shop,
          cost,
          signal,
          ...(options.maxThrottled ? { maxThrottled: options.maxThrottled } : {}),
        },
        async () => {
          const client = new options.api.clients.Graphql({ session });
          try {
            const response = await client.request(query, { variables });
            const status = fullStatus(response.extensions?.cost?.throttleStatus);
            if (status) pacer.observe(shop, status);
            return response.data as T;
          } catch (error) {
            throw toPlatformError(shop, cost, error, (status) => pacer.observe(shop, status));
          }
        },
      ),
    );
  }

  const bulk = bulkListing({
    gql,
    fetch: doFetch,
    filenameOf,
    ...(options.bulkPollMs === undefined ? {} : { pollMs: options.bulkPollMs }),
  });
  async function wantsBulk(shop: string, signal?: AbortSignal): Promise<boolean> {
    const mode = options.listing ?? 'auto';
    if (mode !== 'auto') return mode === 'bulk';
    return (await bulk.products(shop, signal)) > (options.bulkThreshold ?? 250);
  }

  async function mediaNode(shop: string, id: string, signal?: AbortSignal): Promise<MediaNode> {
    const data = await gql<{ node: MediaNode | null }>(shop, COST.node, NODE_QUERY, { id }, signal);
    if (!data.node?.id) throw new PlatformError('NOT_FOUND', `No image ${id} in ${shop}.`);
    return data.node;
  }

  function assetOf(node: MediaNode, parentId?: string): PlatformAsset {
    const url = node.originalSource?.url ?? '';
    return {
      id: node.id as string,
      filename: url ? filenameOf(url) : 'image',
      contentType: node.mimeType ?? 'application/octet-stream',
      size: node.originalSource?.fileSize ?? undefined,
      altText: node.alt ? node.alt : null,
      parentId: parentId ?? productOfMedia.get(node.id as string),
    };
  }

  async function download(url: string, signal?: AbortSignal): Promise<Uint8Array> {
    let response: Response;
    try {
      response = await doFetch(url, {
        signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(60_000)]) : AbortSignal.timeout(60_000),
      });
    } catch (error) {
      throw new PlatformError('UNAVAILABLE', `CDN download failed: ${(error as Error).message}`, {
        cause: error,
      });
    }
    if (response.status === 404) throw new PlatformError('NOT_FOUND', `CDN answered 404 for ${url}`);
    if (!response.ok) throw new PlatformError('UNAVAILABLE', `CDN answered ${response.status} for ${url}`);
    const bytes = new Uint8Array(await response.arrayBuffer());
    // Refused before anything is backed up or sent: bytes that are not an image (an edge's error page
    // served with 200) must never become the "original".
    if (!looksLikeImage(bytes))
      throw new PlatformError(
        'INVALID',
        `CDN served ${bytes.byteLength} bytes that are not an image (${response.headers.get('content-type') ?? 'no content type'}) for ${url}`,
      );
    return bytes;
  }

  async function waitProcessed(shop: string, id: string, signal?: AbortSignal): Promise<MediaNode> {
    const started = clock.now();
    for (let wait = 50; ; wait = Math.min(wait * 2, 2000)) {
      const node = await mediaNode(shop, id, signal);
      if (node.fileStatus === 'READY') return node;
      if (node.fileStatus === 'FAILED') {
        // Shopify keeps serving the earlier file; acknowledging puts the file back to READY so it can
        // be updated again (a restore, a later attempt).
        await gql(shop, COST.mutation, ACK_FAILED, { ids: [id] }, signal);
        throw new PlatformError(
          'REJECTED',
          `Shopify could not process the new file for ${id}; the earlier file stays.`,
        );
      }
      if (clock.now() - started > processingTimeoutMs) {
        throw new PlatformError(
          'UNAVAILABLE',
          `${id} still ${node.fileStatus} after ${processingTimeoutMs} ms`,
        );
      }
      await clock.sleep(wait, signal);
    }
  }

  /** The context of media `id` from its product's own query; undefined when the product has no such media. */
  async function productContext(
    shop: string,
    productId: string,
    id: string,
    signal: AbortSignal | undefined,
    withVariants: boolean,
    fresh = false,
  ): Promise<AssetContext | undefined> {
    // A product's answer is kept for a moment: a batch asks for each of its images in a row.
    const key = `${shop}\u0000${productId}\u0000${withVariants ? 'v' : ''}`;
    let cached = productContexts.get(key);
    if (!cached || clock.now() - cached.at > PRODUCT_CONTEXT_TTL_MS || fresh) {
      if (productContexts.size >= 200)
        for (const [k, v] of productContexts)
          if (clock.now() - v.at > PRODUCT_CONTEXT_TTL_MS) productContexts.delete(k);
      cached = {
        at: clock.now(),
        data: withVariants
          ? gql(shop, COST.variants, PRODUCT_VARIANTS_QUERY, { id: productId }, signal)
          : gql(shop, COST.product, PRODUCT_CONTEXT_QUERY, { id: productId }, signal),
      };
      productContexts.set(key, cached);
      cached.data.catch(() => productContexts.delete(key));
    }
    const data = await cached.data;
    // {n} counts images: a product's videos and 3D models are not among them.
    const position = data.product?.media.nodes.filter(isImage).findIndex((m) => m.id === id) ?? -1;
    // Not among a kept answer's media: the image may be newer than the answer; ask once more.
    if (!fresh && position < 0 && data.product)
      return productContext(shop, productId, id, signal, withVariants, true);
    if (!data.product || position < 0) return undefined;
    productOfMedia.set(id, data.product.id);
    // The variant whose media this image is ("Default Title" is Shopify's name for a product without options).
    const variant = data.product.variants?.nodes.find(
      (v) => v.title !== 'Default Title' && v.media.nodes.some((m) => m.id === id),
    );
    return {
      siteName: data.shop.name,
      title: data.product.title,
      vendor: data.product.vendor,
      productType: data.product.productType || undefined,
      variant: variant?.title,
      position: position + 1,
    };
  }

  async function fileUpdate(
    shop: string,
    input: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<void> {
    const data = await gql<{
      fileUpdate: { userErrors: { field?: string[]; message: string; code?: string }[] } | null;
    }>(shop, COST.mutation, FILE_UPDATE, { files: [input] }, signal);
    const problems = data.fileUpdate?.userErrors ?? [];
    if (problems.length === 0) return;
    const first = problems[0] as { message: string; code?: string };
    const message = `fileUpdate: ${first.code ?? ''} ${first.message}`.trim();
    if (first.code === 'FILE_DOES_NOT_EXIST') throw new PlatformError('NOT_FOUND', message);
    // A pending operation on the file (an earlier update still processing): try again shortly.
    if (first.code === 'FILE_LOCKED' || first.code === 'NON_READY_STATE')
      throw new PlatformError('UNAVAILABLE', message);
    throw new PlatformError('INVALID', message);
  }

  /** The incremental listing: products a few at a time, their images (the `shp1.` cursor). */
  async function incremental(shop: string, listOptions: ListOptions, limit: number): Promise<AssetPage> {
    let { after, skip } = listOptions.cursor ? decodeCursor(listOptions.cursor) : { after: null, skip: 0 };
    const assets: PlatformAsset[] = [];
    // Products are walked a few at a time; the cursor is the product cursor before the current
    // product plus how many of its images were handed out, so a page may end inside a product.
    for (;;) {
      const first = LIST_PAGE;
      const data = await gql<{
        products: {
          edges: {
            cursor: string;
            node: {
              id: string;
              title?: string;
              vendor?: string;
              productType?: string;
              media: { nodes: MediaNode[] };
            };
          }[];
          pageInfo: { hasNextPage: boolean; endCursor: string | null };
        };
      }>(shop, COST.list, LIST_QUERY, { first, after }, listOptions.signal);
      const edges = data.products.edges;
      let previous = after;
      for (const edge of edges) {
        const images = edge.node.media.nodes.filter((m) => m.id?.includes('/MediaImage/'));
        for (const m of images) productOfMedia.set(m.id as string, edge.node.id);
        remember(shop, edge.node, images);
        const rest = images.slice(skip);
        const room = limit - assets.length;
        assets.push(...rest.slice(0, room).map((m) => assetOf(m, edge.node.id)));
        if (rest.length > room) {
          return { assets, cursor: encodeCursor(previous, skip + room) };
        }
        skip = 0;
        previous = edge.cursor;
        if (assets.length === limit) {
          const more = edge !== edges[edges.length - 1] || data.products.pageInfo.hasNextPage;
          return { assets, cursor: more ? encodeCursor(previous, 0) : null };
        }
      }
      if (!data.products.pageInfo.hasNextPage) return { assets, cursor: null };
      after = data.products.pageInfo.endCursor;
    }
  }

  /** Images of a small shop, from each product's mediaCount (pages of 50 products). */
  async function countImages(shop: string, signal?: AbortSignal): Promise<number> {
    let total = 0;
    for (let after: string | null = null; ; ) {
      const data: {
        products: {
          nodes: { mediaCount: { count: number } | null }[];
          pageInfo: { hasNextPage: boolean; endCursor: string | null };
        };
      } = await gql(shop, 2 + 50 * 2, COUNT_IMAGES_QUERY, { after }, signal);
      for (const product of data.products.nodes) total += product.mediaCount?.count ?? 0;
      if (!data.products.pageInfo.hasNextPage) return total;
      after = data.products.pageInfo.endCursor;
    }
  }

  return {
    platform: 'shopify',
    maxAltTextLength: SHOPIFY_MAX_ALT,

    countProducts: (shop, signal) => bulk.products(shop, signal),

    async productTitle(shop, productId, signal) {
      const data = await gql<{ node: { title?: string } | null }>(
        shop,
        1,
        'query CompressoProductTitle($id: ID!) { node(id: $id) { ... on Product { title } } }',
        { id: productId },
        signal,
      );
      return data.node?.title ?? null;
    },

    async listAssets(shop, listOptions: ListOptions = {}): Promise<AssetPage> {
      const limit = Math.max(1, Math.min(listOptions.limit ?? 50, 250));
      const cursor = listOptions.cursor ?? null;
      if (cursor?.startsWith(BULK_CURSOR) || (cursor === null && (await wantsBulk(shop, listOptions.signal))))
        return bulk.page(shop, cursor, limit, listOptions.signal);
      const page = await incremental(shop, listOptions, limit);
      // From the start (a small shop): the first page says how many images there are.
      return cursor === null ? { ...page, total: await countImages(shop, listOptions.signal) } : page;
    },

    async fetchAsset(shop, id, call: CallOptions = {}): Promise<FetchedAsset> {
      const node = await mediaNode(shop, id, call.signal);
      const url = node.originalSource?.url;
      if (!url) throw new PlatformError('NOT_FOUND', `${id} has no file yet (${node.fileStatus}).`);
      const bytes = await download(url, call.signal);
      return { asset: { ...assetOf(node), size: bytes.byteLength }, bytes };
    },

    async replaceAsset(shop, id, replacement: Replacement, call: CallOptions = {}): Promise<PlatformAsset> {
      const current = await mediaNode(shop, id, call.signal);
      const asset = assetOf(current);
      if (!sameImageKind(replacement.contentType, asset.contentType)) {
        throw new PlatformError(
          'INVALID',
          `${id} is ${asset.contentType}; a ${replacement.contentType} would change its extension.`,
        );
      }
      // The staged file keeps the current name, so the extension Shopify ties to the file stays.
      const filename = asset.filename;
      const staged = await gql<{
        stagedUploadsCreate: {
          stagedTargets: {
            url: string;
            resourceUrl: string;
            parameters: { name: string; value: string }[];
          }[];
          userErrors: { message: string }[];
        };
      }>(
        shop,
        COST.mutation,
        STAGE_MUTATION,
        {
          input: [
            {
              resource: 'IMAGE',
              filename,
              mimeType: asset.contentType,
              httpMethod: 'POST',
              fileSize: String(replacement.bytes.byteLength),
            },
          ],
        },
        call.signal,
      );
      const target = staged.stagedUploadsCreate.stagedTargets[0];
      if (!target) {
        throw new PlatformError(
          'INVALID',
          `stagedUploadsCreate: ${staged.stagedUploadsCreate.userErrors[0]?.message}`,
        );
      }
      const form = new FormData();
      for (const { name, value } of target.parameters) form.append(name, value);
      form.append(
        'file',
        new Blob([replacement.bytes as Uint8Array<ArrayBuffer>], { type: asset.contentType }),
        filename,
      );
      let upload: Response;
      try {
        upload = await doFetch(target.url, { method: 'POST', body: form, signal: call.signal ?? null });
      } catch (error) {
        throw new PlatformError(
          'UNAVAILABLE',
          `Upload to the staged target failed: ${(error as Error).message}`,
          {
            cause: error,
          },
        );
      }
      await upload.arrayBuffer();
      if (!upload.ok) throw new PlatformError('UNAVAILABLE', `The staged target answered ${upload.status}`);
      await fileUpdate(shop, { id, originalSource: target.resourceUrl }, call.signal);
      try {
        return assetOf(await waitProcessed(shop, id, call.signal));
      } catch (error) {
        // Shopify took the new file: only FAILED says for sure that the earlier one stays. Anything else
        // here (the token revoked by an uninstall, the database or Shopify away, the wait cut short)
        // leaves it unknown whether the new file went live, so it is retryable: the kit keeps the record
        // `replacing`, and the next run tells from the bytes Shopify serves — never "failed" with the
        // original's hash while the new file is live.
        if (isPlatformError(error) && error.code === 'REJECTED') throw error;
        throw new PlatformError(
          'UNAVAILABLE',
          `${id}: Shopify took the new file, then ${(error as Error).message}`,
          { cause: error },
        );
      }
    },

    async setAltText(shop, id, altText, call: CallOptions = {}): Promise<PlatformAsset> {
      if (altText !== null && altText.length > SHOPIFY_MAX_ALT) {
        throw new PlatformError(
          'INVALID',
          `Alt text of ${altText.length} characters; Shopify keeps ${SHOPIFY_MAX_ALT}.`,
        );
      }
      // An unknown id is refused by fileUpdate itself (FILE_DOES_NOT_EXIST: NOT_FOUND).
      await fileUpdate(shop, { id, alt: altText ?? '' }, call.signal);
      return assetOf(await mediaNode(shop, id, call.signal));
    },

    async getAsset(shop, id, call: CallOptions = {}): Promise<PlatformAsset> {
      return assetOf(await mediaNode(shop, id, call.signal));
    },

    async assetContext(shop, id, call: ContextOptions = {}): Promise<AssetContext> {
      // The product known (the caller's hint, or a listing saw it): one query for it, no catalogue
      // walk; the image found among its media is known to exist.
      const hinted = call.parentId?.startsWith('gid://shopify/Product/') ? call.parentId : undefined;
      const productId = hinted ?? productOfMedia.get(id);
      const withVariants = call.variant !== false;
      if (productId && !withVariants) {
        // A listing just read the product: its title, vendor and media order are known without a call.
        const listed = listedProducts.get(`${shop}\u0000${productId}`);
        const position =
          listed && clock.now() - listed.at <= PRODUCT_CONTEXT_TTL_MS ? listed.mediaIds.indexOf(id) : -1;
        if (listed && position >= 0)
          return {
            siteName: await shopName(shop, call.signal),
            title: listed.title,
            vendor: listed.vendor,
            productType: listed.productType || undefined,
            position: position + 1,
          };
      }
      if (productId) {
        const direct = await productContext(shop, productId, id, call.signal, withVariants);
        if (direct) return direct;
      }
      await mediaNode(shop, id, call.signal);
      let after: string | null = null;
      let siteName: string | undefined;
      for (;;) {
        const data: {
          shop: { name: string };
          products: {
            nodes: {
              id: string;
              title: string;
              vendor: string;
              productType: string;
              media: { nodes: { id: string }[] };
            }[];
            pageInfo: { hasNextPage: boolean; endCursor: string | null };
          };
        } = await gql(shop, COST.context, CONTEXT_QUERY, { first: CONTEXT_PAGE, after }, call.signal);
        siteName = data.shop.name;
        const known = productOfMedia.get(id);
        for (const product of data.products.nodes) {
          const position = product.media.nodes.filter(isImage).findIndex((m) => m.id === id);
          if (position < 0 && product.id !== known) continue;
          productOfMedia.set(id, product.id);
          // Its variants (which one shows this image) come with the product's own query.
          const direct = await productContext(shop, product.id, id, call.signal, call.variant !== false);
          if (direct) return direct;
          return {
            siteName,
            title: product.title,
            vendor: product.vendor,
            productType: product.productType || undefined,
            position: position + 1,
            filename: undefined,
          };
        }
        if (!data.products.pageInfo.hasNextPage) return { siteName };
        after = data.products.pageInfo.endCursor;
      }
    },
  };
}

/** What the library threw, as the kit's error: THROTTLED with its wait, 401 as UNAUTHORIZED, … */
function toPlatformError(
  shop: string,
  cost: number,
  error: unknown,
  observe: (status: ThrottleStatus) => void,
): PlatformError {
  if (error instanceof PlatformError) return error;
  const lib = shopifyApiLib;
  if (error instanceof lib.GraphqlQueryError) {
    const body = error.body as
      | {
          errors?: { graphQLErrors?: { message?: string; extensions?: { code?: string } }[] };
          extensions?: { cost?: { requestedQueryCost?: number; throttleStatus?: ThrottleStatus } };
        }
      | undefined;
    const status = body?.extensions?.cost?.throttleStatus;
    if (status) observe(status);
    const errors = body?.errors?.graphQLErrors ?? [];
    if (errors.some((e) => e.extensions?.code === 'THROTTLED')) {
      const requested = body?.extensions?.cost?.requestedQueryCost ?? cost;
      const short = status ? Math.max(0, requested - status.currentlyAvailable) : requested;
      const retryAfterMs = status ? Math.ceil((short / Math.max(status.restoreRate, 0.001)) * 1000) : 1000;
      return new PlatformError('THROTTLED', `Shopify throttled ${shop} (cost ${requested})`, {
        retryAfterMs: Math.max(retryAfterMs, 1),
        cause: error,
      });
    }
    return new PlatformError('INVALID', `GraphQL: ${errors[0]?.message ?? error.message}`, { cause: error });
  }
  if (error instanceof lib.HttpResponseError) {
    const code = error.response.code;
    if (code === 401 || code === 403) {
      return new PlatformError('UNAUTHORIZED', `Shopify refused the token for ${shop} (${code}).`, {
        cause: error,
      });
    }
    if (code === 404)
      return new PlatformError('NOT_FOUND', `Shopify answered 404 for ${shop}.`, { cause: error });
    if (code === 429)
      return new PlatformError('THROTTLED', `Shopify answered 429 for ${shop}.`, {
        retryAfterMs: 1000,
        cause: error,
      });
    return new PlatformError('UNAVAILABLE', `Shopify answered ${code} for ${shop}.`, { cause: error });
  }
  return new PlatformError(
    'UNAVAILABLE',
    `Shopify could not be reached for ${shop}: ${(error as Error).message}`,
    {
      cause: error,
    },
  );
}

/** The signatures of the image formats Shopify serves: JPEG, PNG, GIF, WebP, and HEIC/AVIF (ISO-BMFF `ftyp`). */
export function looksLikeImage(bytes: Uint8Array): boolean {
  const ascii = (from: number, to: number) => String.fromCharCode(...bytes.subarray(from, to));
  if (bytes.length < 12) return false;
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return true;
  if (bytes[0] === 0x89 && ascii(1, 4) === 'PNG') return true;
  if (ascii(0, 4) === 'GIF8') return true;
  if (ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WEBP') return true;
  return ascii(4, 8) === 'ftyp';
}
