import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { createFolderPlatform, describePlatformPortBattery } from './testing/index.ts';
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

const root = mkdtempSync(join(tmpdir(), 'compresso-kit-folder-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let folders = 0;

describePlatformPortBattery('folder platform (files on disk)', async ({ images, pacer, clock, bucket }) => {
  const platform = createFolderPlatform({
    root: join(root, `p${++folders}`),
    pacer,
    clock,
    ...(bucket ? { bucket } : {}),
  });
  const site = 'battery.example';
  platform.addSite(site, 'Battery Store');
  const ids = images.map((image) => platform.addAsset(site, image));
  return {
    port: platform.port,
    site,
    ids,
    missingId: 'missing-999.jpg',
    throttled: () => platform.stats.throttled,
    close: async () => {},
  };
});
