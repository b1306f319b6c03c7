import { z } from 'zod';
import { defineConfig } from './config.ts';
import { startProcess } from './process.ts';

/**
 * An app process for process.test.ts, run as a child so real signals reach it. It logs one line per
 * step (`ready`, `closing <what>`, …) through the process's logger, so they come out in order with
 * the runtime's own, for the test to wait on. FIXTURE_HANG=1 makes its
 * last-registered closer never finish, like work in flight that will not stop.
 */
const loadFixtureConfig = defineConfig({
  fields: { fixtureGreeting: { env: 'FIXTURE_GREETING', schema: z.string().min(3) } },
});

const running = await startProcess({
  name: 'fixture',
  loadConfig: loadFixtureConfig,
  async start({ config, db, logger, onClose }) {
    // What a listening socket does for a server: keeps the process alive until it is closed.
    const alive = setInterval(() => {}, 60_000);
    onClose('keep-alive', () => clearInterval(alive));
    onClose('first', async () => {
      // Registered first, closed last among the app's: the database is still open here.
      await db.ping();
      logger.info('closing first (database open)');
    });
    onClose('second', async () => {
      logger.info('closing second');
      if (process.env.FIXTURE_HANG === '1') await new Promise(() => {});
    });
    return { greeting: config.fixtureGreeting };
  },
});
running.logger.info(
  `ready ${running.app.greeting} ${running.db.kind} ${running.queue.kind} ${running.blobs.kind}`,
);
