export {
  ALT_PLACEHOLDERS,
  type AltBatch,
  type AltBatchScope,
  type AltBatchState,
  type AltMode,
  type AltPlaceholder,
  type AltPreview,
  type AltProposal,
  type AltRequest,
  type AltScope,
  AltTemplateError,
  type AltText,
  type AltTextOptions,
  type AltUndoResult,
  type AutoAltOutcome,
  checkAltTemplate,
  createAltText,
  DEFAULT_ALT_TEMPLATE,
  fitAltText,
  MAX_TEMPLATE_LENGTH,
  renderAltTemplate,
} from './alt-text.ts';
export {
  type Backup,
  BackupError,
  type BackupStore,
  type BackupStoreOptions,
  backupStore,
  sha256,
} from './backups.ts';
export {
  type BulkRunner,
  type BulkRunnerOptions,
  createBulkRunner,
  type RunProgress,
} from './bulk-runner.ts';
export { type Clock, systemClock } from './clock.ts';
export {
  ASSET_STATES,
  type AssetLedger,
  type AssetPatch,
  type AssetRecord,
  type AssetState,
  assetLedger,
  type LedgerTotals,
  type ListAssetsOptions,
} from './ledger.ts';
export { KIT_MIGRATIONS } from './migrations.ts';
export {
  type CostPacerOptions,
  costPacer,
  noPacer,
  type PacedCallOptions,
  type Pacer,
  pacedCall,
  type ThrottleStatus,
} from './pacer.ts';
export {
  createOptimizer,
  type OptimizeOptions,
  type OptimizeOutcome,
  type Optimizer,
  type OptimizerOptions,
  PIPELINE_STEPS,
  type PipelineStep,
  type RestoreOutcome,
  type SiteSettings,
} from './pipeline.ts';
export { isPlatformError, PlatformError, type PlatformErrorCode } from './platform-error.ts';
export {
  type AssetContext,
  type AssetPage,
  type CallOptions,
  type ContextOptions,
  type FetchedAsset,
  type ListOptions,
  type PlatformAsset,
  type PlatformPort,
  type Replacement,
  sameImageKind,
} from './port.ts';
export { type BulkRun, type RunCounts, type RunState, type RunStore, runStore, ZERO_COUNTS } from './runs.ts';
