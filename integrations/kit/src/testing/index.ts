export { type FixtureImage, fixtureImage } from './fixtures.ts';
export { createFolderPlatform, type FolderPlatform, type FolderPlatformOptions } from './folder-platform.ts';
export { type ManualClock, manualClock } from './manual-clock.ts';
export {
  createMemoryPlatform,
  MEMORY_COSTS,
  type MemoryPlatform,
  type MemoryPlatformOptions,
  type SeedAsset,
} from './memory-platform.ts';
export {
  type CrashBatteryOptions,
  type CrashHarness,
  type CrashHarnessFactory,
  type CrashLedgerDatabase,
  describePipelineCrashBattery,
} from './pipeline-crash-battery.ts';
export {
  describePlatformPortBattery,
  type PortHarness,
  type PortHarnessFactory,
  type PortSetup,
  type SeedImage,
} from './port-battery.ts';
