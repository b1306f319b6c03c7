/**
 * The part of Shopify's GraphQL Admin API schema the fake serves: the types, fields, arguments and
 * enums as Shopify's reference documents them (names and nullability kept), reduced to what an
 * image app touches — the shop, products and their media, files, staged uploads, fileUpdate and
 * fileAcknowledgeUpdateFailed, webhook subscriptions, bulk query operations, productsCount. A query outside it fails validation exactly
 * as a misspelt field fails on Shopify ("Field 'x' doesn't exist on type 'Y'").
 */
export const ADMIN_SDL = /* GraphQL */ `
scalar URL
scalar DateTime
scalar UnsignedInt64

interface Node {
  id: ID!
}

type PageInfo {
  hasNextPage: Boolean!
  hasPreviousPage: Boolean!
  startCursor: String
  endCursor: String
}

type Shop implements Node {
  id: ID!
  name: String!
  email: String!
  myshopifyDomain: String!
  contactEmail: String!
  currencyCode: String!
}

type AppInstallation implements Node {
  id: ID!
  accessScopes: [AccessScope!]!
}

type AccessScope {
  handle: String!
  description: String!
}

enum ProductStatus {
  ACTIVE
  ARCHIVED
  DRAFT
}

type Product implements Node {
  id: ID!
  title: String!
  handle: String!
  vendor: String!
  productType: String!
  status: ProductStatus!
  createdAt: DateTime!
  updatedAt: DateTime!
  media(first: Int, after: String, last: Int, before: String, query: String, reverse: Boolean = false): MediaConnection!
  variants(first: Int, after: String, last: Int, before: String, reverse: Boolean = false): ProductVariantConnection!
  mediaCount: Count
}

type ProductVariant implements Node {
  id: ID!
  title: String!
  displayName: String!
  media(first: Int, after: String, last: Int, before: String, reverse: Boolean = false): MediaConnection!
}

type ProductVariantEdge {
  cursor: String!
  node: ProductVariant!
}

type ProductVariantConnection {
  edges: [ProductVariantEdge!]!
  nodes: [ProductVariant!]!
  pageInfo: PageInfo!
}

type ProductEdge {
  cursor: String!
  node: Product!
}

type ProductConnection {
  edges: [ProductEdge!]!
  nodes: [Product!]!
  pageInfo: PageInfo!
}

enum MediaContentType {
  EXTERNAL_VIDEO
  IMAGE
  MODEL_3D
  VIDEO
}

enum MediaStatus {
  FAILED
  PROCESSING
  READY
  UPLOADED
}

enum FileStatus {
  FAILED
  PROCESSING
  READY
  UPLOADED
}

enum MediaPreviewImageStatus {
  FAILED
  PROCESSING
  READY
  UPLOADED
}

type Image {
  id: ID
  altText: String
  url: URL!
  width: Int
  height: Int
}

type MediaPreviewImage {
  image: Image
  status: MediaPreviewImageStatus!
}

type MediaError {
  code: String!
  details: String
  message: String!
}

type FileError {
  code: String!
  details: String
  message: String!
}

type MediaImageOriginalSource {
  url: URL
  fileSize: Int
}

interface Media {
  id: ID!
  alt: String
  mediaContentType: MediaContentType!
  status: MediaStatus!
  preview: MediaPreviewImage
  mediaErrors: [MediaError!]!
}

interface File {
  id: ID!
  alt: String
  createdAt: DateTime!
  updatedAt: DateTime!
  fileStatus: FileStatus!
  fileErrors: [FileError!]!
  preview: MediaPreviewImage
}

type MediaImage implements Node & Media & File {
  id: ID!
  alt: String
  mediaContentType: MediaContentType!
  status: MediaStatus!
  fileStatus: FileStatus!
  preview: MediaPreviewImage
  mediaErrors: [MediaError!]!
  fileErrors: [FileError!]!
  image: Image
  mimeType: String
  originalSource: MediaImageOriginalSource
  createdAt: DateTime!
  updatedAt: DateTime!
}

type MediaEdge {
  cursor: String!
  node: Media!
}

type MediaConnection {
  edges: [MediaEdge!]!
  nodes: [Media!]!
  pageInfo: PageInfo!
}

type FileEdge {
  cursor: String!
  node: File!
}

type FileConnection {
  edges: [FileEdge!]!
  nodes: [File!]!
  pageInfo: PageInfo!
}

enum StagedUploadTargetGenerateUploadResource {
  BULK_MUTATION_VARIABLES
  COLLECTION_IMAGE
  FILE
  IMAGE
  MODEL_3D
  PRODUCT_IMAGE
  SHOP_IMAGE
  URL_REDIRECT_IMPORT
  VIDEO
}

enum StagedUploadHttpMethodType {
  POST
  PUT
}

input StagedUploadInput {
  resource: StagedUploadTargetGenerateUploadResource!
  filename: String!
  mimeType: String!
  httpMethod: StagedUploadHttpMethodType = PUT
  fileSize: UnsignedInt64
}

type StagedUploadParameter {
  name: String!
  value: String!
}

type StagedMediaUploadTarget {
  url: URL
  resourceUrl: URL
  parameters: [StagedUploadParameter!]!
}

type UserError {
  field: [String!]
  message: String!
}

type StagedUploadsCreatePayload {
  stagedTargets: [StagedMediaUploadTarget!]
  userErrors: [UserError!]!
}

input FileUpdateInput {
  id: ID!
  alt: String
  originalSource: String
  previewImageSource: String
  filename: String
  referencesToAdd: [ID!]
  referencesToRemove: [ID!]
}

enum FilesErrorCode {
  ALT_VALUE_LIMIT_EXCEEDED
  FILE_DOES_NOT_EXIST
  FILE_LOCKED
  INVALID
  INVALID_FAILED_MEDIA_STATE
  INVALID_FILENAME
  INVALID_FILENAME_EXTENSION
  INVALID_IMAGE_SOURCE_URL
  NON_READY_STATE
  TOO_MANY_ARGUMENTS
}

type FilesUserError {
  field: [String!]
  message: String!
  code: FilesErrorCode
}

type FileUpdatePayload {
  files: [File!]
  userErrors: [FilesUserError!]!
}

type FileAcknowledgeUpdateFailedPayload {
  files: [File!]
  userErrors: [FilesUserError!]!
}

enum WebhookSubscriptionTopic {
  APP_UNINSTALLED
  PRODUCTS_CREATE
  PRODUCTS_DELETE
  PRODUCTS_UPDATE
}

enum WebhookSubscriptionFormat {
  JSON
  XML
}

type WebhookHttpEndpoint {
  callbackUrl: URL!
}

type WebhookEventBridgeEndpoint {
  arn: String!
}

type WebhookPubSubEndpoint {
  pubSubProject: String!
  pubSubTopic: String!
}

union WebhookSubscriptionEndpoint = WebhookEventBridgeEndpoint | WebhookHttpEndpoint | WebhookPubSubEndpoint

type WebhookSubscription implements Node {
  id: ID!
  topic: WebhookSubscriptionTopic!
  format: WebhookSubscriptionFormat!
  uri: String!
  callbackUrl: URL!
  endpoint: WebhookSubscriptionEndpoint!
  includeFields: [String!]!
  metafieldNamespaces: [String!]!
  filter: String
  createdAt: DateTime!
  updatedAt: DateTime!
}

type WebhookSubscriptionEdge {
  cursor: String!
  node: WebhookSubscription!
}

type WebhookSubscriptionConnection {
  edges: [WebhookSubscriptionEdge!]!
  nodes: [WebhookSubscription!]!
  pageInfo: PageInfo!
}

input WebhookSubscriptionInput {
  callbackUrl: URL
  uri: String
  format: WebhookSubscriptionFormat
  includeFields: [String!]
  metafieldNamespaces: [String!]
  filter: String
}

type WebhookSubscriptionCreatePayload {
  webhookSubscription: WebhookSubscription
  userErrors: [UserError!]!
}

type WebhookSubscriptionUpdatePayload {
  webhookSubscription: WebhookSubscription
  userErrors: [UserError!]!
}

type WebhookSubscriptionDeletePayload {
  deletedWebhookSubscriptionId: ID
  userErrors: [UserError!]!
}

enum BulkOperationStatus {
  CANCELED
  CANCELING
  COMPLETED
  CREATED
  EXPIRED
  FAILED
  RUNNING
}

enum BulkOperationType {
  MUTATION
  QUERY
}

enum BulkOperationErrorCode {
  ACCESS_DENIED
  INTERNAL_SERVER_ERROR
  TIMEOUT
}

type BulkOperation implements Node {
  id: ID!
  completedAt: DateTime
  createdAt: DateTime!
  errorCode: BulkOperationErrorCode
  fileSize: UnsignedInt64
  objectCount: UnsignedInt64!
  partialDataUrl: URL
  query: String!
  rootObjectCount: UnsignedInt64!
  status: BulkOperationStatus!
  type: BulkOperationType!
  url: URL
}

enum BulkOperationUserErrorCode {
  INVALID
  OPERATION_IN_PROGRESS
}

type BulkOperationUserError {
  code: BulkOperationUserErrorCode
  field: [String!]
  message: String!
}

type BulkOperationRunQueryPayload {
  bulkOperation: BulkOperation
  userErrors: [BulkOperationUserError!]!
}

type BulkOperationCancelPayload {
  bulkOperation: BulkOperation
  userErrors: [UserError!]!
}

enum CountPrecision {
  AT_LEAST
  EXACT
}

type Count {
  count: Int!
  precision: CountPrecision!
}

type Query {
  shop: Shop!
  currentBulkOperation(type: BulkOperationType = QUERY): BulkOperation
  productsCount(query: String, limit: Int = 10000): Count
  currentAppInstallation: AppInstallation!
  node(id: ID!): Node
  nodes(ids: [ID!]!): [Node]!
  product(id: ID!): Product
  products(first: Int, after: String, last: Int, before: String, query: String, reverse: Boolean = false): ProductConnection!
  files(first: Int, after: String, last: Int, before: String, query: String, reverse: Boolean = false): FileConnection!
  webhookSubscriptions(
    first: Int
    after: String
    last: Int
    before: String
    callbackUrl: URL
    uri: String
    format: WebhookSubscriptionFormat
    topics: [WebhookSubscriptionTopic!]
    query: String
  ): WebhookSubscriptionConnection!
}

type Mutation {
  bulkOperationRunQuery(query: String!, groupObjects: Boolean! = true): BulkOperationRunQueryPayload
  bulkOperationCancel(id: ID!): BulkOperationCancelPayload
  stagedUploadsCreate(input: [StagedUploadInput!]!): StagedUploadsCreatePayload
  fileUpdate(files: [FileUpdateInput!]!): FileUpdatePayload
  fileAcknowledgeUpdateFailed(fileIds: [ID!]!): FileAcknowledgeUpdateFailedPayload
  webhookSubscriptionCreate(
    topic: WebhookSubscriptionTopic!
    webhookSubscription: WebhookSubscriptionInput!
  ): WebhookSubscriptionCreatePayload
  webhookSubscriptionUpdate(id: ID!, webhookSubscription: WebhookSubscriptionInput!): WebhookSubscriptionUpdatePayload
  webhookSubscriptionDelete(id: ID!): WebhookSubscriptionDeletePayload
}
`;
