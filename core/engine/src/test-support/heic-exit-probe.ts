// Run as its own process by heic.test.ts: decodes one HEIC and never closes the pool. The process
// must still exit on its own as soon as the work is done: at exit the idle worker is still in the pool
// (a ref'd worker would keep the process alive until the pool's idle timeout had ended it, leaving 0).
import { decodeHeic, heicDecoderStats } from '../heic.ts';
import { DEFAULT_LIMITS } from '../limits.ts';
import { corpus } from './corpus.ts';

const { width, height } = await decodeHeic(corpus('photo-heic-rocket.heic'), DEFAULT_LIMITS);
console.log(`${width}x${height}`);
process.on('exit', () => console.log(`threads at exit: ${heicDecoderStats().threads}`));
