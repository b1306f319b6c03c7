// Run as its own process by heic.test.ts: decodes one HEIC and never closes the pool. The process
// must still exit on its own as soon as the work is done.
import { decodeHeic } from '../heic.ts';
import { DEFAULT_LIMITS } from '../limits.ts';
import { corpus } from './corpus.ts';

const { width, height } = await decodeHeic(corpus('photo-heic-rocket.heic'), DEFAULT_LIMITS);
console.log(`${width}x${height}`);
