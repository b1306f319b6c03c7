export { type AppDeps, createApp } from './app.ts';
export { type AuthOptions, type AuthState, requireApiKey } from './auth.ts';
export { docsContent } from './docs.ts';
export { type RunningWorker, type StartWorkerOptions, startWorker } from './jobs/worker.ts';
export { createMetrics, type Metrics, metricsEndpoint } from './metrics.ts';
export { openApiDocument } from './openapi.ts';
export { createHttpServer, type RunningServer, type StartOptions, startServer } from './start.ts';
