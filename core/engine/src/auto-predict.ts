import { type ImageFeatures, isSynthetic } from './image-features.ts';
import type { EncodeVariant } from './optimize.ts';

type Lossy = 'jpeg' | 'webp' | 'avif';

/**
 * The quality auto's first probe goes to, and the score-per-quality-step it corrects a miss with.
 *
 * Fitted on test/bench/results/auto-calibration.json → curves (test/bench/auto-calibrate.ts --part
 * curves, 2026-11-25): for every corpus image at ≤ 2048 px and every lossy format, the score at a
 * grid of Compresso qualities with the settings auto uses; q* is where the image's curve crosses the
 * format's target. On the 12 photos q* runs from 66 to over 96 (a Hubble deep field and a rocket on a
 * clear sky need the most; both are smooth, noisy and have few distinct colours on the 256-px copy).
 * Of the cheap features, only the colour count orders q* at all: a least-squares line in
 * ln(colours) leaves a spread of 4.2 quality steps (WebP), 5.4 (AVIF) and 6.8 (JPEG) around it, against
 * 6.5, 6.2 and 6.7 around the plain mean. So the prediction is a first probe, not an answer: the
 * score of that probe decides, and a miss is corrected by the calibrated slope (the median score
 * gain per step at the target, 0.62–0.66 in every format; for AVIF photos and for synthetic images
 * into JPEG, by the direction of the miss, see PHOTO and SYNTHETIC).
 */
export interface Prediction {
  q: number;
  /**
   * SSIMULACRA2 points per Compresso quality step, for the one correction of a first probe that
   * missed: `up` when it scored under the target (the next probe is a higher quality), `down` when
   * over.
   */
  slope: { up: number; down: number };
}

interface Model {
  /** q* at COLOURS_CENTRE colours. */
  q: number;
  /** Change of q* per unit of ln(colours) (negative: more colours, less quality needed). */
  perLnColours: number;
  /** Points per step near the target (moves q* to another target; corrects a miss unless `correction`). */
  slope: number;
  /** Points per step for the correction, by the direction of the miss, where they differ (PHOTO, SYNTHETIC). */
  correction?: { up: number; down: number };
}

/** The geometric mean colour count of the corpus photos' 256-px copies. */
const COLOURS_CENTRE = 22_183;

/**
 * Photo-like images (isSynthetic false); q* at 96 where a photo's curve never reached the target.
 *
 * AVIF corrects a first probe that scored under the target with a steeper slope (2026-12-01): its
 * target went from 75 to 72 after the fit, and down there a photo that scores under the target at
 * the predicted quality (a hard photo: noise, fine texture) has a steep curve. Between the first
 * probe and where the curve crosses the target, on the calibration photos whose first probe missed
 * (`auto-simulate.ts --slopes`): 0.70–1.09 points a step from under (6 photos, median 0.87, the upper of the middle two), where
 * the single 0.62 overshot the band; 0.24–0.54 from over (4 photos, median 0.34). Only the first is
 * used. Measured for real (auto-speed.ts, the 14 corpus photos in AVIF at 2048 px, against the
 * engine before): with both, 2.6 → 2.2 scored encodes a photo but +0.6 % bytes, because the two
 * photos corrected down (LadyBird, TwoWings) landed in the band 1–2 points higher than the search
 * had ended (+8 % and +12 % bytes) and a third (RainDrops) took one more probe; with the steeper
 * slope up alone, 2.6 → 2.3, every photo the same bytes or fewer (−0.1 % in all), mean 72.5 → 72.4,
 * minimum 71.0 both. JPEG (0.50–1.17 from under, median 0.66; 0.51–0.85 from over, 0.61) and WebP
 * (0.57–0.88, 0.72; 0.73–0.97, 0.73) show no split and keep one slope.
 */
const PHOTO: Record<Lossy, Model> = {
  jpeg: { q: 78, perLnColours: -10.7, slope: 0.66 },
  webp: { q: 78, perLnColours: -11, slope: 0.63 },
  avif: { q: 77, perLnColours: -6.7, slope: 0.62, correction: { up: 0.87, down: 0.62 } },
};

/**
 * Screenshots, charts, graphics and icons: the per-class start of the search (colour count is not a
 * texture measure there). The JPEG slope is the synthetic curves' own (2026-11-27, fifth pass):
 * replayed on test/bench/results/auto-calibration-synthetic.json (auto-simulate.ts --synthetic
 * --slope S), the 15 synthetic images took 2.13 / 2.07 / 2.00 / 2.13 / 2.20 scored encodes in JPEG
 * at 0.55 / 0.5 / 0.45 / 0.4 / 0.35 points a step, 2.20 at the photo slope of 0.6, at the same
 * bytes (within 0.4 %); the Debian and scikit-image logos, whose curves rise 0.34 and 0.43 a step
 * near the target, end in the band at the second probe instead of the third. WebP and AVIF keep
 * 0.6: WebP saved one probe over the 15 images at 0.35–0.5 (2.07 against 2.13), too little to
 * move it, and AVIF took more under 0.6 (2.07–2.27 at 0.3–0.55 against 1.93).
 *
 * JPEG corrects by the direction of the miss (2026-12-01): `auto-simulate.ts --slopes --synthetic`
 * reads 0.62–0.75 points a step from under (3 images, median 0.70) and 0.28–0.60 from over (5,
 * median 0.38) on those curves. Measured for real (auto-speed.ts, the 13 synthetic images of the
 * bench's kinds into JPEG, against the engine before, results/auto-speed-jpeg-synthetic-slopes.md):
 * 1.7 → 1.6 scored encodes (the GIMP multi-window screenshot 3 → 2), 2.92× → 2.72× (CPU 3.05× →
 * 2.74×), 1.0 % fewer bytes (five images 2–4 % smaller, landing lower in the band; the multi-window
 * screenshot 3 % larger, at its second probe), mean score 79.0 → 78.8, minimum 70.6 both. WebP and
 * AVIF read splits too (0.40 and 0.66 from under), but replayed they took more probes, and keep 0.6.
 */
const SYNTHETIC: Record<Lossy, Model> = {
  jpeg: { q: 80, perLnColours: 0, slope: 0.45, correction: { up: 0.7, down: 0.38 } },
  webp: { q: 70, perLnColours: 0, slope: 0.6 },
  avif: { q: 66, perLnColours: 0, slope: 0.6 },
};

/** The mean start of the search before the predictor, per class (`predict: false`). */
const CLASS_START: Record<Lossy, { photo: number; synthetic: number }> = {
  jpeg: { photo: 78, synthetic: 80 },
  webp: { photo: 78, synthetic: 70 },
  avif: { photo: 78, synthetic: 66 },
};

/** Score points per step before the image's own slope is known, as the search has always used. */
const DEFAULT_SLOPE = 0.6;

export function predictQuality(
  format: Lossy,
  features: ImageFeatures,
  _variant: EncodeVariant,
  target: number,
  predict = true,
): Prediction {
  const synthetic = isSynthetic(features);
  if (!predict)
    return {
      q: CLASS_START[format][synthetic ? 'synthetic' : 'photo'],
      slope: { up: DEFAULT_SLOPE, down: DEFAULT_SLOPE },
    };
  const m = (synthetic ? SYNTHETIC : PHOTO)[format];
  const colours = Math.log(Math.max(1, features.colours) / COLOURS_CENTRE);
  // The model is fitted at the default targets; another target moves q* by its own slope.
  return {
    q: Math.round(m.q + m.perLnColours * colours + (target - TARGET[format]) / m.slope),
    slope: m.correction ?? { up: m.slope, down: m.slope },
  };
}

/** The targets the models were fitted at (AUTO_SETTINGS' defaults). */
const TARGET: Record<Lossy, number> = { jpeg: 76, webp: 75, avif: 75 };
