export {
  type Delivery,
  type FakeFile,
  type FakeProduct,
  FakeShopify,
  type FakeShopifyOptions,
} from './fake/fake-shopify.ts';
