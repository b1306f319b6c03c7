export {
  type Delivery,
  type FakeEvent,
  type FakeFile,
  type FakeProduct,
  FakeShopify,
  type FakeShopifyOptions,
} from './fake/fake-shopify.ts';
