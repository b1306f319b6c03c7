import {
  type EditOperation,
  MAX_DIMENSION_LIMIT,
  normalizeOutputFormat,
  OUTPUT_FORMATS,
  QUALITY_MAX,
  QUALITY_MIN,
} from '@compresso/schema';

/**
 * A plain-language edit instruction, read deterministically: the same words always give the same
 * operations. Nothing here guesses: what no rule matches is reported, never applied.
 */
export interface ParsedInstruction {
  /** What sharp can do, in the order the instruction says it. */
  operations: EditOperation[];
  /** Phrases that need a generative model (adding, removing or restyling content). */
  generative: string[];
  /** Words no rule understood (fillers such as "and", "the", "please" are not listed). */
  unrecognized: string[];
  /** Phrases understood but asking for something out of range or contradictory. */
  problems: { phrase: string; message: string }[];
}

type Emit = { op?: EditOperation; generative?: true; problem?: string };

interface Rule {
  /** Matched at a word boundary of the normalized instruction; it must end at one too. */
  pattern: string;
  make(m: RegExpExecArray): Emit;
}

const N = String.raw`(\d+(?:\.\d+)?)`;
const OBJ = String.raw`(?:(?:it|this|that|them|the\s+(?:image|photo|picture|pic|whole\s+(?:image|thing)))\s+)?`;
/** Optional verbs and fillers before a size: "resize it to", "scale down to", "make it". */
const SIZE_VERB = String.raw`(?:(?:resize|rescale|scale|shrink|reduce|downsize|size|make|set|change)\s+(?:(?:it|this|the\s+(?:image|photo|picture|width|height)|down|up)\s+)*(?:(?:to|at)\s+)?)?`;
const PX = String.raw`(?:\s*(?:px|pixels?))?`;
const LITTLE = String.raw`(?:slight(?:ly)?|a\s+(?:little|bit|touch)(?:\s+more)?|light(?:ly)?|a\s+little\s+bit|somewhat)`;
const LOT = String.raw`(?:much|a\s+lot|way|strong(?:ly)?|heav(?:y|ily)|very|really|significantly|considerably)`;

const size = (n: string) => Number(n);

function amount(words: string | undefined): 'little' | 'normal' | 'lot' {
  if (!words) return 'normal';
  if (new RegExp(`^${LITTLE}$`).test(words)) return 'little';
  if (new RegExp(`^${LOT}$`).test(words)) return 'lot';
  return 'normal';
}

function dimension(n: number, what: string): Emit | undefined {
  if (!Number.isInteger(n) || n < 1 || n > MAX_DIMENSION_LIMIT)
    return { problem: `${what} must be a whole number of pixels from 1 to ${MAX_DIMENSION_LIMIT}` };
  return undefined;
}

function resize(width?: number, height?: number): Emit {
  for (const [n, what] of [
    [width, 'the width'],
    [height, 'the height'],
  ] as const) {
    if (n !== undefined) {
      const bad = dimension(n, what);
      if (bad) return bad;
    }
  }
  return {
    op: {
      op: 'resize',
      ...(width !== undefined ? { width } : {}),
      ...(height !== undefined ? { height } : {}),
    },
  };
}

function scale(factor: number): Emit {
  if (!(factor >= 0.01 && factor <= 8)) return { problem: 'a scale must be from 1% to 800%' };
  return { op: { op: 'resize', scale: Math.round(factor * 1000) / 1000 } };
}

const NAMED_ASPECTS: Record<string, string> = {
  square: '1:1',
  widescreen: '16:9',
  portrait: '4:5',
  landscape: '3:2',
  panorama: '3:1',
  panoramic: '3:1',
  story: '9:16',
  stories: '9:16',
};

function crop(text: string): Emit {
  const named = NAMED_ASPECTS[text];
  if (named) return { op: { op: 'crop', aspect: named } };
  const m = /^(\d{1,3})\s*(?::|\/|x|×|by|to)\s*(\d{1,3})$/.exec(text);
  const w = Number(m?.[1]);
  const h = Number(m?.[2]);
  if (!m || w < 1 || h < 1 || w > 100 || h > 100 || w / h > 10 || h / w > 10)
    return { problem: 'an aspect ratio is two whole numbers from 1 to 100, at most 10:1 (e.g. 16:9)' };
  return { op: { op: 'crop', aspect: `${w}:${h}` } };
}

function rotate(degrees: number): Emit {
  if (!(degrees > -360 && degrees < 360)) return { problem: 'an angle must be between -360 and 360 degrees' };
  const normalized = ((degrees % 360) + 360) % 360;
  if (normalized === 0) return { problem: 'a rotation by a whole turn changes nothing' };
  return { op: { op: 'rotate', degrees: normalized } };
}

function factor(op: 'brightness' | 'contrast' | 'saturation', value: number): Emit {
  if (!(value >= 0.1 && value <= 4)) return { problem: `${op} can change from 10% to 400% of the original` };
  return { op: { op, factor: Math.round(value * 1000) / 1000 } };
}

/** "more"/"brighter" words to a factor: a little ±10%, plain ±20%, a lot ±40%; "by N%" exactly. */
function stepFactor(up: boolean, how: 'little' | 'normal' | 'lot', percent?: string): number {
  if (percent !== undefined) return 1 + ((up ? 1 : -1) * Number(percent)) / 100;
  const step = how === 'little' ? 0.1 : how === 'lot' ? 0.4 : 0.2;
  return up ? 1 + step : 1 - step;
}

function quality(value: number | 'auto'): Emit {
  if (value !== 'auto' && !(Number.isInteger(value) && value >= QUALITY_MIN && value <= QUALITY_MAX))
    return { problem: `quality is a whole number from ${QUALITY_MIN} to ${QUALITY_MAX}` };
  return { op: { op: 'quality', quality: value } };
}

const FORMAT_WORDS = String.raw`(webp|avif|png|jpe?g|gif|heic|heif|tiff?|bmp|svg|ico|jxl|jpeg\s*xl|pdf)`;

function format(word: string): Emit {
  const format = normalizeOutputFormat(word);
  if (!format)
    return {
      problem: `${word.toUpperCase()} is not an output format; choose one of ${OUTPUT_FORMATS.join(', ')}`,
    };
  return { op: { op: 'format', format } };
}

/** Things only a generative model can do something about: they name content, not pixels. */
const CONTENT = String.raw`(?:background|backdrop|bg|sky|foreground|subject|face|faces|person|people|persons|man|woman|child|kids?|dog|cat|car|cars|text|logo|logos|watermark|watermarks|shadow|shadows|object|objects|license\s+plates?|number\s+plates?|eyes|skin|hair|clothes|wall|floor|table|trees?|clouds?|crowd)`;
const PHRASE_TAIL = String.raw`(?:\s+(?!(?:and|then|also|but|,|\.|;)(?:\s|$))[a-z'-]+){0,4}`;

/**
 * The rules, tried at each word; the longest match wins and, at equal length, the earlier rule (so
 * the sharp operations come before the generative catch-alls, and "remove the colour" is grayscale).
 */
const RULES: Rule[] = [
  // --- size
  {
    pattern: String.raw`${SIZE_VERB}${N}${PX}\s*(?:wide|in\s+width|across|width)`,
    make: (m) => resize(size(m[1]!)),
  },
  {
    pattern: String.raw`${SIZE_VERB}(?:the\s+)?(?:width|w)\s*(?:of|to|=|:|at)?\s*${N}${PX}`,
    make: (m) => resize(size(m[1]!)),
  },
  {
    pattern: String.raw`${SIZE_VERB}${N}${PX}\s*(?:tall|high|in\s+height|height)`,
    make: (m) => resize(undefined, size(m[1]!)),
  },
  {
    pattern: String.raw`${SIZE_VERB}(?:the\s+)?(?:height|h)\s*(?:of|to|=|:|at)?\s*${N}${PX}`,
    make: (m) => resize(undefined, size(m[1]!)),
  },
  {
    pattern: String.raw`${SIZE_VERB}${N}\s*(?:x|×|by)\s*${N}${PX}`,
    make: (m) => resize(size(m[1]!), size(m[2]!)),
  },
  {
    pattern: String.raw`(?:(?:resize|scale|shrink|fit)\s+${OBJ}(?:to\s+)?(?:fit\s+)?(?:within|inside|in(?:to)?)|(?:at\s+most|max(?:imum)?|no\s+(?:bigger|larger)\s+than)|(?:resize|scale|shrink)\s+${OBJ}(?:to\s+)?(?:a\s+)?max(?:imum)?(?:\s+(?:size|side|dimension)\s+of)?)\s+${N}${PX}(?:\s+(?:max|square|box))?`,
    make: (m) => resize(size(m[1]!), size(m[1]!)),
  },
  {
    pattern: String.raw`(?:resize|rescale|scale|shrink|reduce|downsize|make)\s+${OBJ}(?:down\s+|up\s+)?(?:to\s+)?${N}\s*%(?:\s+(?:of\s+)?(?:the\s+)?(?:size|original(?:\s+size)?))?`,
    make: (m) => scale(Number(m[1]) / 100),
  },
  {
    pattern: String.raw`${SIZE_VERB}${N}\s*%\s+(smaller|bigger|larger)`,
    make: (m) => scale(1 + ((m[2] === 'smaller' ? -1 : 1) * Number(m[1])) / 100),
  },
  {
    pattern: String.raw`(?:shrink|reduce|downsize|scale\s+down|make\s+(?:it\s+)?smaller)\s+${OBJ}(?:the\s+size\s+)?by\s+${N}\s*%`,
    make: (m) => scale(1 - Number(m[1]) / 100),
  },
  {
    pattern: String.raw`(?:(?:make\s+(?:it\s+)?)?half\s+(?:the\s+)?(?:size|as\s+(?:big|large))|halve\s+${OBJ}(?:the\s+)?(?:size|dimensions)?|(?:resize|scale|shrink)\s+${OBJ}(?:to\s+|by\s+)?(?:a\s+)?half)`,
    make: () => scale(0.5),
  },
  {
    pattern: String.raw`(?:double\s+(?:the\s+)?(?:size|dimensions)|twice\s+as\s+(?:big|large)|(?:scale|resize)\s+${OBJ}(?:up\s+)?(?:by\s+)?(?:2x|x2|200\s*%))`,
    make: () => scale(2),
  },
  // --- crop
  {
    pattern: String.raw`(?:crop|cut)\s+${OBJ}(?:(?:to|into|as)\s+)?(?:an?\s+)?(square|widescreen|portrait|landscape|panoramic|panorama|stories|story|\d{1,3}\s*(?::|/|x|×|by|to)\s*\d{1,3})(?:\s+(?:aspect(?:\s+ratio)?|ratio|format|crop|shape))?`,
    make: (m) => crop(m[1]!.replace(/\s+/g, '')),
  },
  {
    pattern: String.raw`(?:make\s+(?:it\s+)?|turn\s+(?:it\s+)?into\s+(?:a\s+)?)?(?:square(?:\s+(?:it|crop|it\s+up))?|a\s+square)`,
    make: () => crop('square'),
  },
  // --- rotate
  {
    pattern: String.raw`(?:rotate|turn)\s+${OBJ}(?:(?:to\s+the|by)\s+)?(left|right|counter-?clockwise|anti-?clockwise|clockwise|ccw|cw)(?:\s+by\s+${N}\s*(?:°|degrees?|deg)?)?`,
    make: (m) => {
      const ccw = /left|counter|anti|ccw/.test(m[1]!);
      const by = m[2] !== undefined ? Number(m[2]) : 90;
      return rotate(ccw ? -by : by);
    },
  },
  {
    pattern: String.raw`(?:rotate|turn)\s+${OBJ}(?:by\s+)?(-?${N})\s*(?:°|degrees?|deg)?(?:\s+(left|right|counter-?clockwise|anti-?clockwise|clockwise|ccw|cw))?`,
    make: (m) => {
      const ccw = m[3] !== undefined && /left|counter|anti|ccw/.test(m[3]);
      return rotate(ccw ? -Number(m[1]) : Number(m[1]));
    },
  },
  {
    pattern: String.raw`(?:(?:rotate|turn)\s+${OBJ})?upside[\s-]*down`,
    make: () => rotate(180),
  },
  {
    pattern: String.raw`(?:rotate|turn)\s+${OBJ}(?:a\s+)?quarter(?:\s+turn)?(?:\s+(left|right|clockwise|counter-?clockwise|anti-?clockwise))?`,
    make: (m) => rotate(m[1] && /left|counter|anti/.test(m[1]) ? -90 : 90),
  },
  // --- flip
  {
    pattern: String.raw`(?:flip|mirror)\s+${OBJ}(horizontally|horizontal|left\s+to\s+right|sideways|side\s+to\s+side|vertically|vertical|top\s+to\s+bottom)(?:\s+axis)?`,
    make: (m) => ({
      op: { op: 'flip', direction: /vert|top/.test(m[1]!) ? 'vertical' : 'horizontal' },
    }),
  },
  {
    pattern: String.raw`(?:flip|mirror)(?:\s+(?:it|this|the\s+(?:image|photo|picture)|image))?`,
    make: () => ({ op: { op: 'flip', direction: 'horizontal' } }),
  },
  // --- colour
  {
    pattern: String.raw`(?:(?:convert|turn|change)\s+${OBJ}(?:to\s+|into\s+)?)?(?:black\s*(?:and|&|\+|n)\s*white|b\s*&\s*w|b\s*/\s*w|gr[ae]y\s*-?\s*scale|monochrome|mono|gr[ae]y|desaturated?|(?:remove|drop|strip)\s+(?:the\s+|all\s+(?:the\s+)?)?colou?rs?|no\s+colou?rs?|without\s+colou?rs?|colou?rless)`,
    make: () => ({ op: { op: 'grayscale' } }),
  },
  {
    pattern: String.raw`(?:(${LITTLE}|${LOT}|more|less)\s+)?(?:saturated|saturate|colou?rful|vivid|vibrant)(?:\s+(${LITTLE}|${LOT}))?`,
    make: (m) =>
      factor(
        'saturation',
        stepFactor(m[1] !== 'less', amount(m[1] === 'more' || m[1] === 'less' ? m[2] : (m[1] ?? m[2]))),
      ),
  },
  {
    pattern: String.raw`(increase|raise|boost|decrease|lower|reduce)\s+(?:the\s+)?saturation(?:\s+by\s+${N}\s*%)?`,
    make: (m) => factor('saturation', stepFactor(/increase|raise|boost/.test(m[1]!), 'normal', m[2])),
  },
  {
    pattern: String.raw`(?:(${LITTLE}|${LOT}|more|even)\s+)?(brighter|brighten|lighter|lighten|darker|darken|dimmer|dim)(?:\s+${OBJ}(${LITTLE}|${LOT}|by\s+${N}\s*%))?`,
    make: (m) => {
      const up = /bright|light/.test(m[2]!);
      const by = m[3]?.startsWith('by') ? m[4] : undefined;
      return factor('brightness', stepFactor(up, amount(by ? undefined : (m[3] ?? m[1])), by));
    },
  },
  {
    pattern: String.raw`(increase|raise|boost|up|decrease|lower|reduce)\s+(?:the\s+)?(?:brightness|exposure)(?:\s+by\s+${N}\s*%)?`,
    make: (m) => factor('brightness', stepFactor(/increase|raise|boost|up/.test(m[1]!), 'normal', m[2])),
  },
  {
    pattern: String.raw`(?:brightness|exposure)\s*(?:to|=|:|at)?\s*(\+|-)?${N}\s*%`,
    make: (m) =>
      factor('brightness', m[1] ? 1 + ((m[1] === '+' ? 1 : -1) * Number(m[2])) / 100 : Number(m[2]) / 100),
  },
  {
    pattern: String.raw`(?:(?:(${LITTLE}|${LOT})\s+)?(more|less|higher|lower|increased?|decreased?|boost(?:ed)?|reduced?|add(?:\s+(?:some|more))?|stronger|weaker)\s+(?:the\s+)?contrast|contrast\s+(up|down))(?:\s+(${LITTLE}|${LOT}))?`,
    make: (m) => {
      const down = /less|lower|decrease|reduce|weaker|down/.test(`${m[2] ?? ''}${m[3] ?? ''}`);
      return factor('contrast', stepFactor(!down, amount(m[1] ?? m[4])));
    },
  },
  {
    pattern: String.raw`(increase|raise|boost|decrease|lower|reduce)\s+(?:the\s+)?contrast(?:\s+by\s+${N}\s*%)?`,
    make: (m) => factor('contrast', stepFactor(/increase|raise|boost/.test(m[1]!), 'normal', m[2])),
  },
  {
    pattern: String.raw`contrast\s*(?:to|=|:|at)?\s*(\+|-)?${N}\s*%`,
    make: (m) =>
      factor('contrast', m[1] ? 1 + ((m[1] === '+' ? 1 : -1) * Number(m[2])) / 100 : Number(m[2]) / 100),
  },
  {
    pattern: String.raw`(?:more\s+)?(?:punchier|contrasty)`,
    make: () => factor('contrast', 1.2),
  },
  // --- blur, sharpen
  {
    pattern: String.raw`(?:(?:add|apply)\s+(?:a\s+)?)?(?:(${LITTLE}|${LOT}|soft|gentle)\s+)?(?:blur|blurry|blurred|gaussian\s+blur)(?:\s+${OBJ}(${LITTLE}|${LOT}|(?:by\s+|with\s+(?:a\s+)?(?:radius|sigma)\s+(?:of\s+)?|radius\s+|sigma\s+)?${N}(?:\s*px)?))?`,
    make: (m) => {
      if (m[3] !== undefined) {
        const sigma = Number(m[3]);
        if (!(sigma >= 0.3 && sigma <= 100)) return { problem: 'a blur radius must be from 0.3 to 100' };
        return { op: { op: 'blur', sigma } };
      }
      const how = amount(m[2] ?? (m[1] === 'soft' || m[1] === 'gentle' ? 'slightly' : m[1]));
      return { op: { op: 'blur', sigma: how === 'little' ? 1.5 : how === 'lot' ? 8 : 3 } };
    },
  },
  {
    pattern: String.raw`(?:(${LITTLE}|${LOT}|more)\s+)?(?:sharpen|sharper|crisper|crisp|crispen)(?:\s+${OBJ}(?:up\s+)?(${LITTLE}|${LOT})?)?`,
    make: (m) => {
      const how = amount(m[2] ?? (m[1] === 'more' ? undefined : m[1]));
      return { op: { op: 'sharpen', sigma: how === 'little' ? 0.5 : how === 'lot' ? 2 : 1 } };
    },
  },
  // --- output
  {
    pattern: String.raw`(?:(?:convert|change|save|export|turn|encode|output|make|write)\s+${OBJ}(?:the\s+format\s+)?)?(?:(?:to|into|as|in)\s+)?(?:an?\s+)?${FORMAT_WORDS}(?:\s+(?:format|file|image))?`,
    make: (m) => format(m[1]!.replace(/\s+/g, '')),
  },
  {
    pattern: String.raw`(?:(?:set|change)\s+(?:the\s+)?)?quality\s*(?:to|of|at|=|:)?\s*(auto|${N}\s*%?)`,
    make: (m) => quality(m[1] === 'auto' ? 'auto' : Number(m[2])),
  },
  {
    pattern: String.raw`(?:(?:at|with|in)\s+)?${N}\s*%?\s+quality`,
    make: (m) => quality(Number(m[1])),
  },
  {
    pattern: String.raw`(?:(?:at|with|in)\s+)?(?:(high|higher|best|max(?:imum)?|top|low|lower|medium|good|auto(?:matic)?)\s+quality|quality\s+(high|low|auto))`,
    make: (m) => {
      const word = m[1] ?? m[2]!;
      if (word.startsWith('auto')) return quality('auto');
      const table: Record<string, number> = {
        high: 90,
        higher: 90,
        best: 95,
        max: 100,
        maximum: 100,
        top: 95,
        good: 80,
        medium: 70,
        low: 50,
        lower: 60,
      };
      return quality(table[word]!);
    },
  },
  {
    pattern: String.raw`(?:(?:make\s+(?:it|the\s+file)\s+)?(?:a\s+)?(?:smaller|lighter)\s+file(?:\s+size)?|reduce\s+(?:the\s+)?file\s+size|compress\s+${OBJ}(?:more|harder|further))`,
    make: () => quality('auto'),
  },
  // --- generative: content, not pixels
  {
    pattern: String.raw`blur\s+(?:out\s+)?(?:the\s+|her\s+|his\s+|their\s+|its\s+|all\s+(?:the\s+)?)?${CONTENT}${PHRASE_TAIL}`,
    make: () => ({ generative: true }),
  },
  {
    pattern: String.raw`(?:remove|erase|delete|get\s+rid\s+of|take\s+out|cut\s+out|clean\s+up|replace|swap|change|add|insert|put|place|draw|paint|recolou?r|colou?rize|fill\s+in|extend|expand|outpaint|inpaint|retouch|restore|upscale|enhance|fix)\s+(?!and\b|then\b)[a-z'-]+${PHRASE_TAIL}`,
    make: () => ({ generative: true }),
  },
  {
    pattern: String.raw`(?:(?:make|turn)\s+${OBJ})?(?:look\s+like|in\s+the\s+style\s+of|styled\s+as|(?:into|as)\s+an?\s+(?:painting|cartoon|sketch|drawing|watercolou?r|anime|illustration|oil\s+painting))${PHRASE_TAIL}`,
    make: () => ({ generative: true }),
  },
  {
    pattern: String.raw`(?:(?:the|a|an|with\s+(?:a|an)?)\s+)?(?:(?!(?:and|then|also|but)\s)[a-z-]+\s+)?${CONTENT}${PHRASE_TAIL}`,
    make: () => ({ generative: true }),
  },
  {
    pattern: '(?:upscale|colou?rize|restore|retouch|enhance|outpaint|inpaint|beautify|stylize)',
    make: () => ({ generative: true }),
  },
];

const COMPILED = RULES.map((rule) => ({
  rule,
  regex: new RegExp(`${rule.pattern}(?=\\s|$)`, 'y'),
}));

/** Words that carry no operation of their own; skipped, never reported. */
const FILLERS = new Set(
  (
    "and then also please pls plz make it its it's this that the a an to into as be should could would you can " +
    'with of , . ; ! : - image photo picture pic img file me for us now just finally first after afterwards ' +
    "so do i want wanted like need turn set change version copy lets let's while at"
  ).split(' '),
);

/** Lower case, one space between words, punctuation as its own word (but not inside "16:9", "4/3", "1.5"). */
export function normalizeInstruction(text: string): string {
  return text
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[’‘`]/g, "'")
    .replace(/[“”"]/g, ' ')
    .replace(/(\d)\s*(?:°|º)/g, '$1 degrees')
    .replace(/([,;!?]|\.(?!\d))/g, ' $1 ')
    .replace(/\s+/g, ' ')
    .trim();
}

export function parseInstruction(instruction: string): ParsedInstruction {
  const text = normalizeInstruction(instruction);
  const result: ParsedInstruction = { operations: [], generative: [], unrecognized: [], problems: [] };
  let at = 0;
  while (at < text.length) {
    if (text[at] === ' ') {
      at++;
      continue;
    }
    let best: { end: number; emit: Emit; phrase: string } | undefined;
    for (const { rule, regex } of COMPILED) {
      regex.lastIndex = at;
      const m = regex.exec(text);
      if (!m || m[0].length === 0) continue;
      const end = at + m[0].length;
      if (!best || end > best.end) best = { end, emit: rule.make(m), phrase: m[0].trim() };
    }
    if (best) {
      if (best.emit.op) result.operations.push(best.emit.op);
      if (best.emit.generative) result.generative.push(best.phrase);
      if (best.emit.problem) result.problems.push({ phrase: best.phrase, message: best.emit.problem });
      at = best.end;
      continue;
    }
    const space = text.indexOf(' ', at);
    const end = space === -1 ? text.length : space;
    const word = text.slice(at, end);
    if (!FILLERS.has(word)) result.unrecognized.push(word);
    at = end;
  }
  // Two formats, or two qualities, contradict each other: which one was meant is not ours to guess.
  for (const kind of ['format', 'quality'] as const) {
    const named = result.operations.filter((op) => op.op === kind);
    if (named.length > 1) {
      const values = named.map((op) =>
        String(op.op === 'format' ? op.format : op.op === 'quality' ? op.quality : ''),
      );
      if (new Set(values).size > 1)
        result.problems.push({
          phrase: values.join(' and '),
          message: `the instruction names more than one ${kind} (${values.join(', ')}); name one`,
        });
    }
  }
  return result;
}
