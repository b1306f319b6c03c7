import { describePlatformPortBattery } from './testing/index.ts';
import { createMemoryPlatform } from './testing/memory-platform.ts';

describePlatformPortBattery('in-memory reference platform', async ({ images, pacer, clock, bucket }) => {
  const platform = createMemoryPlatform({ pacer, clock, ...(bucket ? { bucket } : {}) });
  const site = 'battery.example';
  platform.addSite(site, 'Battery Store');
  const ids = images.map((image) => platform.addAsset(site, image));
  return {
    port: platform.port,
    site,
    ids,
    missingId: `memory://${site}/asset/999999`,
    throttled: () => platform.stats.throttled,
    close: async () => {},
  };
});
