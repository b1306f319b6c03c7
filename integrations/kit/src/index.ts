export { type Clock, systemClock } from './clock.ts';
export {
  type CostPacerOptions,
  costPacer,
  noPacer,
  type PacedCallOptions,
  type Pacer,
  pacedCall,
  type ThrottleStatus,
} from './pacer.ts';
export { isPlatformError, PlatformError, type PlatformErrorCode } from './platform-error.ts';
export {
  type AssetContext,
  type AssetPage,
  type CallOptions,
  type FetchedAsset,
  type ListOptions,
  type PlatformAsset,
  type PlatformPort,
  type Replacement,
  sameImageKind,
} from './port.ts';
